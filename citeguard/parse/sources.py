"""What arrives beside the text: a provider's citation objects and numbered references
(Perplexity's ``citations``), or the caller's ``references=``."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from citeguard.models import CitationOrigin, Finding, Severity
from citeguard.parse.base import _AXIS, _Hit, _Layout, _normalize_key, _PendingCitation, _RefDef
from citeguard.providers.base import (
    ProviderAnswer,
    ProviderCitation,
    read_references,
    strip_tracking,
)
from citeguard.web.urls import normalize_url


def _same_url(a: str, b: str) -> bool:
    """The same page, tracking parameters aside."""
    try:
        return normalize_url(strip_tracking(a)) == normalize_url(strip_tracking(b))
    except ValueError:
        return a.strip() == b.strip()


@dataclass(slots=True)
class _Source:
    """What arrives beside the text: a provider's citation objects and numbered references
    (Perplexity's ``citations``), or the caller's ``references=``."""

    origin: CitationOrigin
    markers: list[ProviderCitation]  # ranges that are markers (OpenAI url_citation)
    spans: list[ProviderCitation]  # ranges of supported text (Anthropic, Gemini), or none
    refs: list[tuple[str, ProviderCitation | None]]
    ref_origin: CitationOrigin
    # markers over a link of the text that names another URL: (citation, where that link is)
    late: list[tuple[ProviderCitation, int]] = field(default_factory=list)

    @classmethod
    def of(
        cls, answer: ProviderAnswer | None, references: Sequence[Any] | Mapping[Any, Any] | None
    ) -> _Source | None:
        refs = read_references(references)
        if answer is None:
            return cls("references", [], [], refs, "references") if refs else None
        markers: list[ProviderCitation] = []
        spans: list[ProviderCitation] = []
        for c in answer.citations:
            (markers if c.marks == "marker" and 0 <= c.start < c.end else spans).append(c)
        ref_origin: CitationOrigin = "references"
        if answer.references:
            # the provider's numbered sources first; passed ones fill other keys
            numbered = [(str(n), r) for n, r in enumerate(answer.references, start=1)]
            taken = {k for k, _ in numbered}
            refs = numbered + [(k, r) for k, r in refs if k not in taken]
            ref_origin = answer.origin
        return cls(answer.origin, markers, spans, refs, ref_origin)

    def add_definitions(self, layout: _Layout) -> None:
        """The passed references as definitions the text's markers resolve to (the text's own
        definition of a key wins)."""
        for raw_key, ref in self.refs:
            key = _normalize_key(raw_key)
            url = ref.url if ref is not None else None
            existing = layout.defs.get(key)
            if existing is not None:
                if existing.url != url:
                    layout.findings.append(
                        Finding(
                            code="duplicate_reference",
                            message=(
                                f"reference [{key}] is defined in the answer ({existing.url!r}) "
                                f"and passed beside it ({url!r}); the answer's is used"
                            ),
                            severity=Severity.WARNING,
                            axis=_AXIS,
                            url=url,
                            details={"label": key, "first_url": existing.url},
                        )
                    )
                continue
            layout.defs[key] = _RefDef(
                key=key,
                url=url,
                line=-1,
                origin=self.ref_origin,
                title=ref.title if ref is not None else None,
                quote=ref.quote if ref is not None else None,
            )

    def mark(self, hits: list[_Hit]) -> list[_Hit]:
        """The provider's marker ranges onto the text's hits: a range over a link to the same
        page annotates that link (one citation); a range over no hit is a marker of its own."""
        if not self.markers:
            return hits
        added: list[_Hit] = []
        for cit in self.markers:
            over = [h for h in (*hits, *added) if h.start < cit.end and cit.start < h.end]
            same = next(
                (
                    h
                    for h in over
                    if h.url is not None
                    and h.provider is None
                    and cit.url is not None
                    and _same_url(h.url, cit.url)
                ),
                None,
            )
            if same is not None:
                same.provider, same.origin = cit, self.origin
            elif over:
                self.late.append((cit, min(h.start for h in over)))
            elif cit.url is not None:
                added.append(
                    _Hit(
                        cit.start,
                        cit.end,
                        "annotation",
                        url=cit.url,
                        label=cit.title,
                        provider=cit,
                        origin=self.origin,
                    )
                )
        return sorted([*hits, *added], key=lambda h: h.start) if added else hits

    def assemble(
        self,
        pending: list[_PendingCitation],
        layout: _Layout,
        claim_spans: list[tuple[int, int]],
        claim_of: Callable[[int], int | None],
        text: str,
    ) -> list[_PendingCitation]:
        """The text's citations with the provider's span citations, the markers that overlap
        another link, and references no marker cites, in text order."""
        out = list(pending)
        for cit, pos in self.late:
            if cit.url is None:
                continue
            marker = text[cit.start : cit.end]
            out.append(
                _PendingCitation(
                    cit.url, "annotation", marker, cit.title, cit.start, cit.end, claim_of(pos)
                ).from_provider(cit, self.origin)
            )
        starts = [s for s, _ in claim_spans]
        for cit in self.spans:
            out.extend(self._spanned(cit, claim_spans, starts, layout.findings))
        passed = [d for d in layout.defs.values() if d.line == -1]
        if passed and not any(d.used for d in passed):
            # sources beside a text with no marker: cited by the answer as a whole
            for d in passed:
                d.used = True
                if d.url is None:
                    layout.findings.append(
                        Finding(
                            code="reference_without_url",
                            message=f"reference [{d.key}] passed beside the answer names no URL",
                            axis=_AXIS,
                            details={"label": d.key},
                        )
                    )
                    continue
                out.append(
                    _PendingCitation(d.url, "external", "", d.key, -1, -1, None).from_reference(d)
                )
        out.sort(key=lambda p: (p.start < 0, p.start))
        return out

    def _spanned(
        self,
        cit: ProviderCitation,
        claim_spans: list[tuple[int, int]],
        starts: list[int],
        findings: list[Finding],
    ) -> list[_PendingCitation]:
        """A citation of a span of text: one zero-width marker at the span's end in each claim
        the span covers (the claim before it when it covers none)."""
        claims: list[int] = []
        if 0 <= cit.start <= cit.end:
            i = max(0, bisect.bisect_right(starts, cit.start) - 1)
            if i < len(claim_spans) and claim_spans[i][1] <= cit.start:
                i += 1
            while i < len(claim_spans) and claim_spans[i][0] < max(cit.end, cit.start + 1):
                claims.append(i)
                i += 1
            if not claims and starts:
                j = bisect.bisect_right(starts, cit.start) - 1
                claims = [j] if j >= 0 else []
        places: list[tuple[int | None, int]] = [
            (ci, min(max(cit.end, claim_spans[ci][0]), claim_spans[ci][1])) for ci in claims
        ]
        places = places or [(None, -1)]
        out: list[_PendingCitation] = []
        for ci, pos in places:
            if cit.url is None:
                url = f"document:{cit.document or '?'}"
                findings.append(
                    Finding(
                        code="not_checkable",
                        message=f"the {self.origin} citation {cit.unchecked or 'names no URL'}",
                        severity=Severity.WARNING,
                        axis=_AXIS,
                        url=url,
                        claim_index=ci,
                        details={"document": cit.document, "origin": self.origin},
                    )
                )
            else:
                url = cit.url
            p = _PendingCitation(url, "annotation", "", cit.title, pos, pos, ci)
            p.from_provider(cit, self.origin)
            p.checkable = cit.url is not None
            out.append(p)
        return out

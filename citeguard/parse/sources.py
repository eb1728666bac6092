"""What arrives beside the text: a provider's citation objects and numbered references
(Perplexity's ``citations``), or the caller's ``references=``."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from citeguard.models import CitationOrigin, Finding, Severity
from citeguard.parse.base import (
    _AXIS,
    _Hit,
    _HitBudget,
    _Layout,
    _normalize_key,
    _PendingCitation,
    _RefDef,
)
from citeguard.providers.base import (
    ProviderAnswer,
    ProviderCitation,
    read_references,
    strip_tracking,
)
from citeguard.web.urls import normalize_url

_UrlKey = tuple[str | None, str]

_MARK_SCAN = 32
"""The links one provider range is matched against (the first ones it overlaps): a range over
more is a citation of its own at the first. A bound that keeps marking linear."""


def _url_key(url: str) -> _UrlKey:
    """What :func:`_same_url` compares: the normalised URL, tracking parameters aside (None
    where it does not normalise), and the URL as written."""
    try:
        return normalize_url(strip_tracking(url)), url.strip()
    except ValueError:
        return None, url.strip()


def _same_url(a: _UrlKey, b: _UrlKey) -> bool:
    """The same page: the normalised URLs, or as written where either does not normalise."""
    if a[0] is not None and b[0] is not None:
        return a[0] == b[0]
    return a[1] == b[1]


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
            layout.budget.take()
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

    def mark(self, hits: list[_Hit], budget: _HitBudget) -> list[_Hit]:
        """The provider's marker ranges onto the text's hits (sorted by start): a range over a
        link to the same page annotates that link (one citation); a range over no hit is a
        marker of its own. Each range takes one from ``budget``. Linear with a log factor: the
        hits overlapping a range are found by bisection (``reach``: the furthest end so far,
        never decreasing), and at most :data:`_MARK_SCAN` of them are compared."""
        if not self.markers:
            return hits
        items = list(hits)
        starts = [h.start for h in items]
        reach = list(itertools.accumulate((h.end for h in items), max))
        keys: dict[int, _UrlKey] = {}  # id(hit) -> its URL's key, made once
        for cit in self.markers:
            budget.take()
            first = bisect.bisect_right(reach, cit.start)  # the first hit ending after it starts
            stop = bisect.bisect_left(starts, cit.end)  # past the last hit starting before its end
            if first < stop:  # it overlaps hits; items[first] is the first of them
                same = None
                if cit.url is not None:
                    want = _url_key(cit.url)
                    for k in range(first, min(stop, first + _MARK_SCAN)):
                        h = items[k]
                        if h.url is None or h.provider is not None or h.end <= cit.start:
                            continue
                        key = keys.get(id(h))
                        if key is None:
                            key = keys[id(h)] = _url_key(h.url)
                        if _same_url(key, want):
                            same = h
                            break
                if same is not None:
                    same.provider, same.origin = cit, self.origin
                else:
                    self.late.append((cit, items[first].start))
            elif cit.url is not None:
                # over no hit: every hit before ends by its start, every one after starts at or
                # after its end, so the furthest end at its place is its own end
                at = bisect.bisect_left(starts, cit.start)
                items.insert(
                    at,
                    _Hit(
                        cit.start,
                        cit.end,
                        "annotation",
                        url=cit.url,
                        label=cit.title,
                        provider=cit,
                        origin=self.origin,
                    ),
                )
                starts.insert(at, cit.start)
                reach.insert(at, cit.end)
        return items

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

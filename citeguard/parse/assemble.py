"""Hits, claims, quotes and the reference table assembled into an :class:`Answer`: markers
resolved, URLs normalised once each, problems as findings."""

from __future__ import annotations

import bisect

from citeguard.models import Answer, Citation, CitationStatus, Claim, Finding, Severity
from citeguard.parse.base import _AXIS, _Hit, _Layout, _PendingCitation
from citeguard.parse.quotes import _bind_quotes
from citeguard.parse.scholarly import REFERENCE_SCHEME, scholarly_url
from citeguard.parse.sources import _Source
from citeguard.providers.base import strip_tracking
from citeguard.web.urls import UrlProblem, normalize_url

# origins whose URLs carry tracking parameters the provider added (matched without them)
_PROVIDER_ORIGINS: frozenset[str] = frozenset({"openai", "anthropic", "gemini", "perplexity"})


def _citations(
    pending: list[_PendingCitation], allowed_schemes: frozenset[str], findings: list[Finding]
) -> list[Citation]:
    """The final citations, each URL normalised (problems go to ``findings``)."""
    normalize = _Normalizer(allowed_schemes, findings)
    return [
        Citation(
            index=k,
            url=p.url,
            normalized_url=(
                normalize(p.url, p.claim_index, strip=p.origin in _PROVIDER_ORIGINS)
                if p.checkable
                else None
            ),
            kind=p.kind,
            marker=p.marker,
            label=p.label,
            start=p.start,
            end=p.end,
            claim_index=p.claim_index,
            quote=p.quote,
            origin=p.origin,
            title=p.title,
            confidence=p.confidence,
            provider_redirect=p.redirect,
            reference=p.reference,
        )
        for k, p in enumerate(pending)
    ]


class _Normalizer:
    """normalize_url once per distinct URL; problems become findings once per URL."""

    def __init__(self, allowed_schemes: frozenset[str], findings: list[Finding]) -> None:
        self._allowed = allowed_schemes
        self._findings = findings
        self._seen: dict[tuple[str, bool], str | None] = {}

    def __call__(self, url: str, claim_index: int | None, *, strip: bool = False) -> str | None:
        """``strip``: match the URL without its tracking parameters (a provider's URL)."""
        if (url, strip) in self._seen:
            return self._seen[url, strip]
        try:
            target = strip_tracking(url) if strip else url
            target = scholarly_url(target) or target  # a structured item's "doi:10.…"
            result: str | None = normalize_url(target, allowed_schemes=self._allowed)
        except UrlProblem as exc:
            result = None
            blocked = exc.status is CitationStatus.BLOCKED_SCHEME
            self._findings.append(
                Finding(
                    code="blocked_scheme" if blocked else "malformed_url",
                    message=f"cited URL {url!r}: {exc.reason}",
                    axis=_AXIS,
                    url=url,
                    claim_index=claim_index,
                    details={"status": exc.status.value},
                )
            )
        except ValueError as exc:  # defensive: urls.py should raise UrlProblem only
            result = None
            self._findings.append(
                Finding(
                    code="malformed_url",
                    message=f"cited URL {url!r} cannot be parsed: {exc}",
                    axis=_AXIS,
                    url=url,
                    claim_index=claim_index,
                    details={"status": CitationStatus.MALFORMED_URL.value},
                )
            )
        self._seen[url, strip] = result
        return result


def _assemble(
    *,
    text: str,
    hits: list[_Hit],
    claim_spans: list[tuple[int, int]],
    orphan_spans: list[tuple[int, int, int]],
    quotes: list[tuple[int, int, str]],
    layout: _Layout,
    allowed_schemes: frozenset[str],
    source: _Source | None = None,
) -> Answer:
    findings = layout.findings
    claim_starts = [s for s, _ in claim_spans]
    orphan_starts = [s for s, _, _ in orphan_spans]

    def claim_of(pos: int) -> int | None:
        i = bisect.bisect_right(claim_starts, pos) - 1
        if i >= 0 and pos < claim_spans[i][1]:
            return i
        j = bisect.bisect_right(orphan_starts, pos) - 1
        if j >= 0 and pos < orphan_spans[j][1]:
            return orphan_spans[j][2]
        return None

    pending: list[_PendingCitation] = []
    for hit in hits:
        marker = text[hit.start : hit.end]
        claim_index = claim_of(hit.start)
        if hit.note is not None:
            findings.append(Finding(**hit.note, claim_index=claim_index))
        if hit.url is not None:
            pending.append(
                _PendingCitation(
                    hit.url, hit.kind, marker, hit.label, hit.start, hit.end, claim_index
                ).from_provider(hit.provider, hit.origin)
            )
            continue
        for key in hit.keys:
            ref = layout.defs.get(key)
            if ref is None:
                findings.append(
                    Finding(
                        code="unresolved_marker",
                        message=(
                            f"citation marker {marker!r} cites [{key}], "
                            "but the answer defines no such reference"
                        ),
                        axis=_AXIS,
                        claim_index=claim_index,
                        details={"marker": marker, "label": key, "start": hit.start},
                    )
                )
                continue
            ref.used = True
            if ref.url is None and ref.entry is not None:
                # a paper named with no link: looked up by its title (checks/scholarly)
                looked_up = _PendingCitation(
                    REFERENCE_SCHEME + key, hit.kind, marker, key, hit.start, hit.end, claim_index
                ).from_reference(ref)
                looked_up.checkable = False
                pending.append(looked_up)
                continue
            if ref.url is None:
                findings.append(
                    Finding(
                        code="reference_without_url",
                        message=(
                            f"citation marker {marker!r} cites reference [{key}], which names no "
                            "URL, so it cannot be checked"
                        ),
                        axis=_AXIS,
                        claim_index=claim_index,
                        details={"marker": marker, "label": key, "start": hit.start},
                    )
                )
                continue
            pending.append(
                _PendingCitation(
                    ref.url, hit.kind, marker, key, hit.start, hit.end, claim_index
                ).from_reference(ref)
            )

    if source is not None:
        pending = source.assemble(pending, layout, claim_spans, claim_of, text)

    for ref in layout.defs.values():
        if not ref.used:
            findings.append(
                Finding(
                    code="unused_reference",
                    message=f"reference [{ref.key}] is listed but never cited in the answer",
                    severity=Severity.WARNING,
                    axis=_AXIS,
                    url=ref.url,
                    details={"label": ref.key},
                )
            )

    # Quotes per claim, then bind them to that claim's citations.
    # Sparse maps: most claims of a long answer have neither quotes nor citations.
    claim_quotes: dict[int, list[tuple[int, int, str]]] = {}
    for q in quotes:
        ci = claim_of(q[0])
        if ci is not None and claim_spans[ci][0] <= q[0] < claim_spans[ci][1]:
            claim_quotes.setdefault(ci, []).append(q)
    claim_cits: dict[int, list[int]] = {}
    for k, p in enumerate(pending):
        if p.claim_index is not None:
            claim_cits.setdefault(p.claim_index, []).append(k)
    for ci, cits in claim_cits.items():
        # a quote the provider gave (Anthropic's cited_text) is the one to verify
        _bind_quotes(claim_quotes.get(ci, []), [pending[k] for k in cits if not pending[k].own])

    citations = _citations(pending, allowed_schemes, findings)
    claims = [
        Claim(
            index=ci,
            text=text[s:e],
            start=s,
            end=e,
            citation_indices=claim_cits.get(ci, []),
            quotes=[q[2] for q in claim_quotes.get(ci, ())],
        )
        for ci, (s, e) in enumerate(claim_spans)
    ]
    references = {key: ref.url for key, ref in layout.defs.items() if ref.url is not None}
    return Answer(
        text=text, claims=claims, citations=citations, references=references, findings=findings
    )

"""Structured input: a list of ``{claim, url, quote}`` mappings, one claim per item."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from citeguard.models import Answer, Claim, Finding
from citeguard.parse.assemble import _citations
from citeguard.parse.base import _AXIS, _HitBudget, _PendingCitation
from citeguard.parse.quotes import _find_quotes


def _parse_structured(
    items: Sequence[Any], allowed_schemes: frozenset[str], budget: _HitBudget
) -> Answer:
    """One claim per item; each URL takes one from ``budget``."""
    findings: list[Finding] = []
    texts: list[str] = []
    claims: list[Claim] = []
    pending: list[_PendingCitation] = []
    offset = 0

    def missing(item: int, name: str, why: str, claim_index: int | None) -> None:
        findings.append(
            Finding(
                code="structured_missing_field",
                message=f"structured item {item}: {why}",
                axis=_AXIS,
                claim_index=claim_index,
                details={"item": item, "field": name},
            )
        )

    for n, item in enumerate(items):
        if not isinstance(item, Mapping):
            findings.append(
                Finding(
                    code="structured_invalid_item",
                    message=(
                        f"structured item {n} must be a mapping with 'claim' and 'url', "
                        f"not {type(item).__name__}"
                    ),
                    axis=_AXIS,
                    details={"item": n},
                )
            )
            continue
        raw_claim = item.get("claim")
        claim_text = raw_claim.strip() if isinstance(raw_claim, str) else ""
        claim_index = len(claims) if claim_text else None
        if claim_index is None:
            missing(n, "claim", "has no 'claim' text", None)

        raw_urls = item.get("url")
        urls: list[str] = []
        if isinstance(raw_urls, str):
            urls = [raw_urls.strip()] if raw_urls.strip() else []
        elif isinstance(raw_urls, Sequence) and not isinstance(raw_urls, bytes | bytearray):
            urls = [u.strip() for u in raw_urls if isinstance(u, str) and u.strip()]
        if not urls:
            missing(n, "url", "has no 'url' (a non-empty string or list of strings)", claim_index)

        raw_quote = item.get("quote")
        quote = raw_quote.strip() if isinstance(raw_quote, str) and raw_quote.strip() else None
        if raw_quote is not None and not isinstance(raw_quote, str):
            why = f"'quote' must be a string, not {type(raw_quote).__name__}"
            missing(n, "quote", why, claim_index)

        if claim_index is not None:
            detected = [q[2] for q in _find_quotes(claim_text)]
            quotes = [quote] if quote is not None else detected
            quote = quote if quote is not None else (detected[0] if detected else None)
            if texts:
                offset += 1  # the joining newline
            start = offset
            offset += len(claim_text)
            texts.append(claim_text)
            first = len(pending)
            claims.append(
                Claim(
                    index=claim_index,
                    text=claim_text,
                    start=start,
                    end=offset,
                    citation_indices=list(range(first, first + len(urls))),
                    quotes=quotes,
                )
            )
        for url in urls:
            budget.take()
            pending.append(
                _PendingCitation(
                    url, "structured", url, None, -1, -1, claim_index, quote, origin="structured"
                )
            )

    citations = _citations(pending, allowed_schemes, findings)
    return Answer(text="\n".join(texts), claims=claims, citations=citations, findings=findings)

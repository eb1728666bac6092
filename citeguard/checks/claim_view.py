"""The per-claim view (``Verdict.claims``): each claim, its citations, the support its best
citation got, the evidence window with a link that opens the page at it, and whether it gated.

Built by the validity axis from its (claim, URL) pairs; generic over the support labels an
entailment backend gives (``EntailmentScore.label``, ``score``, ``backend``, ``evidence``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from citeguard.checks.passage import text_fragment_url
from citeguard.models import (
    CitationStatus,
    Claim,
    ClaimCheck,
    ClaimReport,
    EntailmentScore,
    PassageMatch,
)

__all__ = ["claim_fragment", "claim_report", "mark_gated"]


def _evidence(passage: PassageMatch | None, entailment: EntailmentScore | None) -> str | None:
    """The page words the claim was judged on: the matched passage (the page's own sentence
    when the claim altered it), else the backend's window."""
    if passage is not None and (passage.found or passage.altered) and passage.matched_text:
        return passage.matched_text
    if entailment is not None and entailment.evidence.strip():
        return entailment.evidence
    return None


def claim_fragment(
    url: str, passage: PassageMatch | None, entailment: EntailmentScore | None
) -> str | None:
    """``url`` opened at the evidence (a text fragment), or None when there is none."""
    evidence = _evidence(passage, entailment)
    return None if evidence is None else text_fragment_url(url, evidence)


def _rank(check: ClaimCheck) -> tuple[bool, float]:
    score = check.entailment.score if check.entailment is not None else -1.0
    return (check.status is CitationStatus.OK, score)


def claim_report(claim: Claim, checks: Sequence[ClaimCheck]) -> ClaimReport:
    """The claim's row: its checks, and the support, evidence and link of its best one."""
    if not checks:
        return ClaimReport(index=claim.index, text=claim.text)
    best = max(checks, key=_rank)  # the first of equals: citation order
    ent = best.entailment
    return ClaimReport(
        index=claim.index,
        text=claim.text,
        checks=list(checks),
        supported=any(c.status is CitationStatus.OK for c in checks),
        support=max((c.entailment.score for c in checks if c.entailment), default=None),
        urls=list(dict.fromkeys(c.url for c in checks)),
        label=None if ent is None else ent.label,
        probability=None if ent is None else ent.score,
        backend=None if ent is None else ent.backend,
        evidence=_evidence(best.passage, ent),
        text_fragment_url=best.text_fragment_url,
    )


def mark_gated(
    reports: Sequence[ClaimReport], gated: Collection[tuple[int, str]]
) -> list[ClaimReport]:
    """``reports`` with ``gated`` set on the (claim index, URL as cited) pairs that made the
    validity axis hard-reject a URL, and on their claims."""
    if not gated:
        return list(reports)
    out: list[ClaimReport] = []
    for r in reports:
        checks = [
            c.model_copy(update={"gated": True}) if (r.index, c.url) in gated else c
            for c in r.checks
        ]
        hit = any(c.gated for c in checks)
        out.append(r.model_copy(update={"checks": checks, "gated": hit}) if hit else r)
    return out

"""The entailment protocol (:class:`Entailer`), what it is asked (:class:`EntailmentRequest`),
and what every backend shares: the reason words of a band and the score of a pair with nothing
to judge."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from citeguard.models import EntailmentScore

Pair = tuple[str, str]


@runtime_checkable
class Entailer(Protocol):
    """Scores (claim, evidence) pairs. One score per pair, in order; never raises for bad input."""

    name: str

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[EntailmentScore]:
        """Score each ``(claim, evidence)`` pair."""
        ...


@dataclass(frozen=True)
class EntailmentRequest:
    """One claim to judge against evidence from one page.

    ``page`` is the normalised URL the evidence comes from: requests sharing it can be judged
    together (one judge request per page, one set of page embeddings). ``claim_id`` names the
    claim for backends that judge several claims at once.
    """

    claim: str
    evidence: str
    page: str | None = None
    claim_id: str | None = None
    # the evidence was found on a whole page (its metadata and the sentences that can matter,
    # citeguard.checks.evidence), not a passage: a backend with bands for it reads it with those
    whole_page: bool = False


async def score_requests(
    entailer: Entailer, requests: Sequence[EntailmentRequest]
) -> list[EntailmentScore]:
    """Score requests with ``entailer``: through its ``score_requests`` method when it has one
    (a backend that groups by page), else pair by pair through :meth:`Entailer.score`."""
    if not requests:
        return []
    grouped = getattr(entailer, "score_requests", None)
    if grouped is not None:
        scores: list[EntailmentScore] = await grouped(list(requests))
        return scores
    return await entailer.score([(r.claim, r.evidence) for r in requests])


# how a band's label opens a reason
_BAND_WORDS: dict[str, str] = {
    "supported": "supported",
    "uncertain": "uncertain",
    "not_supported": "not supported",
}


def _empty_score(claim: str, evidence: str, backend: str) -> EntailmentScore:
    """A pair with nothing to judge: no evidence text is not supported (the page says nothing
    to check against); a claim without content words is uncertain (there is nothing to show
    wrong)."""
    no_evidence = not evidence.strip()
    reason = "no evidence text" if no_evidence else "claim has no content words"
    return EntailmentScore(
        label="not_supported" if no_evidence and claim.strip() else "uncertain",
        score=0.0,
        probabilities={"supported": 0.0, "contradicted": 0.0, "not_supported": 1.0},
        evidence=evidence[:200] if evidence.strip() else "",
        backend=backend,
        reason=reason if claim.strip() else "empty claim",
    )

"""A URL's failure or one claim's: which failing citations exclude their URL.

A failure of the URL itself (dead, soft 404, blocked, bot wall, unreachable, a cross-site
redirect, not retrieved by any search, …) is the URL's: every claim citing it fails and the
answer function is told not to cite it again (an offending URL). A failure of one (claim, URL)
pair (the page resolves but is not on the claim's side: its passage missing, the claim not
supported or contradicted) is that claim's: it fails the answer, goes to repair and to the
feedback naming the claim, and excludes the URL only when no claim it backs passes: a page that
supports the other claims citing it stays citable (:data:`~citeguard.models.FailureKind`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from citeguard.models import (
    CitationStatus,
    Claim,
    ClaimReport,
    FailureKind,
    Finding,
    Severity,
)

__all__ = ["FailingPair", "excludes", "mark_failures", "pair_finding", "pair_findings"]

# a claim's words quoted in a finding, at most
_CLAIM_CHARS = 120
# findings of one URL's failing pairs, at most (one more counts the rest): a hostile answer may
# hold 100,000 claims citing one page
MAX_PAIR_FINDINGS = 20


class FailingPair(Protocol):
    """What a finding needs of a failing (claim, URL) pair."""

    @property
    def claim(self) -> Claim: ...

    @property
    def claim_text(self) -> str: ...

    @property
    def status(self) -> CitationStatus: ...

    @property
    def reason(self) -> str: ...


def excludes(kind: FailureKind, url: str, backed: Collection[str]) -> bool:
    """Whether a failing URL is an offending URL: a failure of the URL itself always; a pair's
    failure only when no claim citing the URL passes on it (``backed``: the URLs some claim
    passes on)."""
    return kind == "url" or url not in backed


def pair_finding(
    *,
    url: str,
    claim_index: int,
    claim_text: str,
    status: CitationStatus,
    reason: str,
    excluded: bool,
) -> Finding:
    """The error finding of one failing (claim, URL) pair: it names the claim, and says whether
    the page is excluded (no claim it backs passes) or stays citable for the others."""
    claim = " ".join(claim_text.split())
    claim = claim if len(claim) <= _CLAIM_CHARS else claim[: _CLAIM_CHARS - 1] + "…"
    where = (
        "no claim citing this page is backed by it"
        if excluded
        else "the page backs other claims and stays citable: change this claim or its citation"
    )
    return Finding(
        code=status.value,
        message=f"{url}: claim {claim_index + 1} (“{claim}”): {reason} ({where})",
        severity=Severity.ERROR,
        axis="validity",
        url=url,
        claim_index=claim_index,
        details={
            "outcome": status.outcome.value,
            "status": status.value,
            "failure": "pair",
            "excluded": excluded,
        },
    )


def pair_findings(url: str, pairs: Sequence[FailingPair], *, excluded: bool) -> list[Finding]:
    """The findings of ``url``'s failing pairs, one per claim up to :data:`MAX_PAIR_FINDINGS`,
    then one that counts the rest."""
    out = [
        pair_finding(
            url=url,
            claim_index=p.claim.index,
            claim_text=p.claim_text,
            status=p.status,
            reason=p.reason,
            excluded=excluded,
        )
        for p in pairs[:MAX_PAIR_FINDINGS]
    ]
    rest = len(pairs) - MAX_PAIR_FINDINGS
    if rest > 0:
        out.append(
            Finding(
                code=pairs[MAX_PAIR_FINDINGS].status.value,
                message=f"{url}: {rest} more claim(s) citing this page fail on it",
                severity=Severity.ERROR,
                axis="validity",
                url=url,
                details={"failure": "pair", "excluded": excluded, "more": rest},
            )
        )
    return out


def mark_failures(
    reports: Sequence[ClaimReport], kinds: Mapping[tuple[int, str], FailureKind]
) -> list[ClaimReport]:
    """``reports`` with each failing (claim index, URL as cited) pair's ``failure`` set."""
    if not kinds:
        return list(reports)
    out: list[ClaimReport] = []
    for r in reports:
        if not any((r.index, c.url) in kinds for c in r.checks):
            out.append(r)
            continue
        checks = [
            c.model_copy(update={"failure": kinds[(r.index, c.url)]})
            if (r.index, c.url) in kinds
            else c
            for c in r.checks
        ]
        out.append(r.model_copy(update={"checks": checks}))
    return out

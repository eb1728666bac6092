"""The verdict room: axis results → one :class:`~citeguard.models.Verdict`.

The vector is the diagnosis: the verdict passes when every gating axis passes, and the URLs
the answer function must stop citing are the offenders of the gating axes. Replayed runs are
compared byte for byte, so their wall-clock timings are zeroed here.
"""

from __future__ import annotations

from collections.abc import Sequence

from citeguard.models import AxisResult, CitationReport, ClaimReport, Finding, JudgeUsage, Verdict


def build_verdict(
    axes: Sequence[AxisResult],
    *,
    citations: Sequence[CitationReport],
    claims: Sequence[ClaimReport],
    findings: Sequence[Finding],
    regime: str | None,
    elapsed_ms: float,
    replay: bool,
    judge_usage: JudgeUsage | None = None,
) -> Verdict:
    """The verdict of one answer from its axes (in registry order) and its reports.

    ``judge_usage``: what the run's LLM judges used so far (tokens and cost are replayed from
    the snapshot, so they stay in a replayed verdict)."""
    offending: set[str] = set()
    for axis in axes:
        if axis.gating:
            offending.update(axis.offending_urls)
    verdict = Verdict(
        passed=all(a.passed for a in axes if a.gating),
        axes={a.name: a for a in axes},
        citations=list(citations),
        claims=list(claims),
        findings=list(findings),
        offending_urls=frozenset(offending),
        regime=regime,
        elapsed_ms=elapsed_ms,
        judge_usage=judge_usage,
    )
    return without_timings(verdict) if replay else verdict


def failing_claims(verdict: Verdict) -> frozenset[int]:
    """The claims that failed on a page that is not an offending URL (a pair failure: the page
    backs other claims, see :mod:`citeguard.checks.failures`): what stripping removes besides
    the offending URLs' citations."""
    return frozenset(r.index for r in verdict.claims if any(c.failure == "pair" for c in r.checks))


def without_timings(verdict: Verdict) -> Verdict:
    """Replays are compared byte for byte; wall-clock timings would differ, so they are zeroed."""
    return verdict.model_copy(
        update={
            "elapsed_ms": 0.0,
            "citations": [c.model_copy(update={"elapsed_ms": 0.0}) for c in verdict.citations],
        }
    )


__all__ = ["build_verdict", "failing_claims", "without_timings"]

"""The ``citeguard`` object the service adds to an answer, and the per-request log summary."""

from __future__ import annotations

from typing import Any, Literal

from citeguard.models import GuardResult, Verdict

__all__ = ["Outcome", "outcome_of", "summary", "verdict_json"]

Outcome = Literal["passed", "repaired", "rejected"]


def outcome_of(result: GuardResult) -> Outcome:
    """``x-citeguard-verdict``: passed, repaired (mended or stripped, and now passing), or
    rejected."""
    if not result.passed:
        return "rejected"
    return "passed" if result.outcome == "passed" else "repaired"


def verdict_json(verdict: Verdict) -> dict[str, Any]:
    """The verdict as JSON: the four axes, each citation, each claim."""
    return verdict.model_dump(mode="json")


def summary(
    verdict: Verdict,
    outcome: Outcome,
    *,
    attempts: int,
    message: str = "",
    result: GuardResult | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``citeguard`` object: the outcome, attempts, and the verdict in full."""
    out: dict[str, Any] = {
        "verdict": outcome,
        "passed": outcome != "rejected",
        "attempts": attempts,
        "message": message,
        **verdict_json(verdict),
    }
    # verdict_json's own "passed" is the checked answer's: the outcome decides the top level
    out["passed"] = outcome != "rejected"
    if result is not None:
        out["outcome"] = result.outcome
        out["removed_urls"] = list(result.removed_urls)
        out["repairs"] = [r.model_dump(mode="json") for r in result.repairs]
    if extra:
        out.update(extra)
    return out


def log_summary(verdict: Verdict, outcome: str, attempts: int) -> dict[str, Any]:
    """What the request's log line says of its verdict (no answer text)."""
    statuses: dict[str, int] = {}
    for c in verdict.citations:
        statuses[c.status.value] = statuses.get(c.status.value, 0) + 1
    return {
        "verdict": outcome,
        "attempts": attempts,
        "axes": {name: ax.passed for name, ax in verdict.axes.items()},
        "citations": statuses,
        "offending_urls": sorted(verdict.offending_urls)[:20],
    }

"""The ``citeguard`` object the service adds to an answer, and the per-request log summary."""

from __future__ import annotations

from typing import Any, Literal

from citeguard.models import GuardResult, Verdict, VerdictWord
from citeguard.policy import Policy

__all__ = ["Ending", "Outcome", "ending_of", "outcome_of", "summary", "verdict_json"]

#: ``x-citeguard-verdict`` and ``citeguard.verdict``: the one vocabulary (models.VerdictWord)
Outcome = VerdictWord
#: how the answer ends for the client: as the upstream ended it (``stop``), marked the way the
#: API marks what its own content filter cut (``content_filter``: Chat ``finish_reason``,
#: Responses ``status: incomplete``, Anthropic ``stop_reason: refusal``), or an error the SDKs
#: raise (``error``)
Ending = Literal["stop", "content_filter", "error"]


def outcome_of(result: GuardResult) -> Outcome:
    """``x-citeguard-verdict``: passed, repaired (mended or stripped, and now passing), or
    rejected."""
    return result.verdict_word


def ending_of(policy: Policy, outcome: Outcome, *, cut: bool = False) -> Ending:
    """How an answer ends for the client: a rejected one fails closed unless the policy's
    ``on_fail`` opts out (``return``, ``report``: the upstream's own ending, the old way);
    ``raise`` is an error; a passing one whose claims citeguard removed (``cut``) is marked
    as filtered too."""
    if outcome == "rejected":
        if policy.on_fail == "raise":
            return "error"
        return "content_filter" if policy.on_fail == "strip" else "stop"
    return "content_filter" if cut else "stop"


def verdict_json(verdict: Verdict) -> dict[str, Any]:
    """The verdict as JSON: its word (``verdict``: passed or rejected, the one vocabulary),
    the four axes, each citation, each claim."""
    return {"verdict": verdict.verdict_word, **verdict.model_dump(mode="json")}


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
        **verdict_json(verdict),
        "attempts": attempts,
        "message": message,
    }
    # verdict_json's own word and "passed" are the checked answer's: the outcome decides
    out["verdict"], out["passed"] = outcome, outcome != "rejected"
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

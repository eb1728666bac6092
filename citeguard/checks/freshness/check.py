"""The freshness axis as a registered check."""

from __future__ import annotations

from citeguard.checks.base import AnnotatorKind, CheckContext, skipped
from citeguard.checks.freshness.gate import check_freshness
from citeguard.models import (
    AxisResult,
    Verdict,
)
from citeguard.policy import Policy


class FreshnessCheck:
    """The freshness axis as a registered check (see :func:`check_freshness`). The regime comes
    in through the context: the pipeline needs it before fetching (dates cost extra work)."""

    name = "freshness"
    hint = "Use recent sources and say as of when the information holds."
    feeds_back_when_advisory = False

    def __init__(self, policy: Policy) -> None:
        self._policy = policy.freshness

    async def run(self, ctx: CheckContext) -> AxisResult:
        if not self._policy.enabled:
            return skipped(self.name)
        return check_freshness(
            ctx.question,
            ctx.answer.text,
            ctx.citations,
            self._policy,
            now=ctx.now,
            search_dates=ctx.search_dates,
            fclass=ctx.regime,
        )

    def annotator(self, axis: AxisResult, verdict: Verdict) -> AnnotatorKind:
        return "CODE"

    async def aclose(self) -> None:
        return None

"""The query axis as a registered check."""

from __future__ import annotations

from citeguard.checks.base import AnnotatorKind, CheckContext, is_llm_backend, skipped
from citeguard.checks.judge import judge_for
from citeguard.checks.query.axis import check_queries
from citeguard.checks.query.judge import JudgeQueryScorer
from citeguard.models import AxisResult, Verdict
from citeguard.policy import Policy


class QueryCheck:
    """The query axis as a registered check: the rules, or the judge the policy names."""

    name = "query"
    hint = "Search with the user's exact constraints (years, versions, regions, numbers)."
    feeds_back_when_advisory = True

    def __init__(self, policy: Policy) -> None:
        self._policy = policy.query
        q = policy.query
        self._judge = judge_for(policy, JudgeQueryScorer, q.enabled and q.use_judge)

    async def run(self, ctx: CheckContext) -> AxisResult:
        if not self._policy.enabled:
            return skipped(self.name)
        if self._judge is not None:
            return await self._judge.check_queries(ctx.question, ctx.queries, self._policy)
        return check_queries(ctx.question, ctx.queries, self._policy)

    def annotator(self, axis: AxisResult, verdict: Verdict) -> AnnotatorKind:
        return "LLM" if is_llm_backend(str(axis.details.get("backend") or "")) else "CODE"

    async def aclose(self) -> None:
        if self._judge is not None:
            await self._judge.aclose()

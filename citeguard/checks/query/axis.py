"""The query axis for one answer: every recorded query scored, sibling queries covering each
other's drops."""

from __future__ import annotations

from collections.abc import Sequence

from citeguard.checks.query.prompt import _analyse_prompt
from citeguard.checks.query.score import QueryScore, _score
from citeguard.models import AxisResult, Finding, Severity
from citeguard.policy import QueryPolicy


def _not_evaluated(policy: QueryPolicy) -> AxisResult:
    return AxisResult(
        name="query",
        passed=True,
        evaluated=False,
        gating=policy.gating,
        details={"reason": "disabled" if not policy.enabled else "no queries were recorded"},
    )


def check_queries(prompt: str, queries: Sequence[str], policy: QueryPolicy) -> AxisResult:
    """The query axis for one answer: every recorded search query scored against the prompt.

    Passes when every query's ``overall`` reaches ``policy.min_score``. A constraint or entity
    that one query drops but another keeps is reported (info) without counting. ``gating`` comes
    from the policy: by default the axis reports and feeds back, since re-synthesis alone
    cannot fix a bad query. Not evaluated when no query was recorded. ``score`` is the lowest
    ``overall`` on the 1–5 scale.
    """
    if not policy.enabled or not queries:
        return _not_evaluated(policy)
    analysed = _analyse_prompt(prompt)
    first_pass = [_score(analysed, q, frozenset()) for q in queries]
    scores: list[QueryScore] = []
    for i, query in enumerate(queries):
        covered = frozenset().union(*(k for j, (_, k) in enumerate(first_pass) if j != i))
        scores.append(_score(analysed, query, covered)[0] if covered else first_pass[i][0])
    return _axis(queries, scores, policy)


def _axis(queries: Sequence[str], scores: Sequence[QueryScore], policy: QueryPolicy) -> AxisResult:
    """The query AxisResult from one score per query."""
    findings: list[Finding] = []
    per_query: list[dict[str, object]] = []
    worst = 5
    failing = 0
    for i, (query, score) in enumerate(zip(queries, scores, strict=True)):
        ok = score.overall >= policy.min_score
        failing += not ok
        worst = min(worst, score.overall)
        per_query.append({"query": query, **score.model_dump(exclude={"findings"})})
        for f in score.findings:
            severity = f.severity
            if ok and severity is Severity.ERROR:
                severity = Severity.WARNING  # the query passes; the issue is reported only
            findings.append(
                f.model_copy(
                    update={
                        "message": f"query {i + 1} ('{query}'): {f.message}",
                        "severity": severity,
                        "details": {**f.details, "query": query, "query_index": i},
                    }
                )
            )
    passed = failing == 0
    if not passed:
        findings.append(
            Finding(
                code="query.feedback",
                message=(
                    f"{failing} of {len(queries)} search queries lost what the prompt asked for"
                ),
                severity=Severity.ERROR,
                axis="query",
                details={
                    "feedback": (
                        "Search again with queries that keep the prompt's years, versions, "
                        "numbers, regions, quoted phrases, exclusions and names, without "
                        "generic words such as 'best' or 'overview'."
                    )
                },
            )
        )
    return AxisResult(
        name="query",
        passed=passed,
        score=float(worst),
        gating=policy.gating,
        findings=findings,
        details={"min_score": policy.min_score, "queries": per_query},
    )

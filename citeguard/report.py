"""The traffic view: what goes wrong across many logged cases.

:func:`build_report` reads logged cases — mappings with ``prompt``, ``queries``, ``answer`` and
``verdict`` (the JSON of :class:`citeguard.models.Verdict`, as a mapping or a JSON string) — and
counts, per axis, how many evaluated answers failed, and which findings are most common.
Findings are clustered by code family so the report reads as sentences a person can act on:
"the rewriter dropped the year or region in 1 of 8 queries".

Query findings are counted per query (each carries ``details["query"]`` or ``query_index``);
every other finding is counted per answer. A case that cannot be read is skipped and its
reason kept in ``TrafficReport.skipped``; it never stops the report.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from citeguard.errors import InputError
from citeguard.models import AXES
from citeguard.render import Column, table

__all__ = ["AxisStats", "FindingCluster", "TrafficReport", "build_report", "render_report"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AxisStats(_Model):
    """Failure rate of one axis over the answers where it was evaluated."""

    axis: str
    evaluated: int
    failed: int
    failure_rate: float | None  # None when the axis was never evaluated


class FindingCluster(_Model):
    """A family of findings and how many queries or answers it touched."""

    key: str
    axis: str
    sentence: str  # "the rewriter dropped the year or region in 1 of 8 queries"
    count: int  # queries or answers with at least one finding of the family
    total: int  # queries or answers it could have touched
    unit: str  # "queries" or "answers"
    codes: dict[str, int] = Field(default_factory=dict)  # finding code → occurrences
    examples: list[str] = Field(default_factory=list)  # up to three messages


class TrafficReport(_Model):
    """Per-axis failure rates and the most common findings across logged cases."""

    cases: int
    passed: int
    skipped: list[str] = Field(default_factory=list)  # "line 3: verdict is not JSON"
    queries: int = 0
    axes: list[AxisStats] = Field(default_factory=list)
    clusters: list[FindingCluster] = Field(default_factory=list)


# Findings that summarise others of the same axis; counting them would count twice.
_SUMMARY_CODES = frozenset({"query.feedback"})
_AXIS_ORDER: dict[str, int] = {a: i for i, a in enumerate(AXES)}

# Code → (cluster key, the noun that goes into the cluster's sentence).
_QUERY_CONSTRAINT_WORDS = {
    "query.dropped_year": "year",
    "query.dropped_version": "version",
    "query.dropped_region": "region",
    "query.dropped_constraint": "number constraint",
    "query.reversed_constraint": "number constraint",
    "query.weakened_constraint": "comparator",
    "query.dropped_phrase": "quoted phrase",
    "query.unquoted_phrase": "phrase quotes",
    "query.dropped_exclusion": "exclusion",
    "query.inverted_exclusion": "exclusion",
}
_QUERY_BREADTH_WORDS = {
    "query.added_generic": "generic words",
    "query.added_year": "a year",
    "query.added_entity": "unasked names",
    "query.added_terms": "extra terms",
    "query.topic_rewrite": "a bare topic",
    "query.lost_specificity": "lost key terms",
}
# Cluster key → (axis, sentence template with {what}, {n} and {total} and {unit}).
_TEMPLATES: dict[str, tuple[str, str]] = {
    "query.constraint": ("query", "the rewriter dropped the {what} in {n} of {total} {unit}"),
    "query.entity": (
        "query",
        "the rewriter dropped or shortened a name (organisation, product, law or person) in "
        "{n} of {total} {unit}",
    ),
    "query.breadth": (
        "query",
        "the rewriter broadened or padded the query ({what}) in {n} of {total} {unit}",
    ),
    "diversity.domain_floor": ("diversity", "too few distinct domains in {n} of {total} {unit}"),
    "diversity.per_domain_cap": (
        "diversity",
        "one site cited more than the per-domain cap in {n} of {total} {unit}",
    ),
    "diversity.primary_share": (
        "diversity",
        "too few primary sources for the question's class in {n} of {total} {unit}",
    ),
    "freshness.stale_median": (
        "freshness",
        "cited sources older than the question's regime allows in {n} of {total} {unit}",
    ),
    "freshness.stale_source": (
        "freshness",
        "a stale source cited for a fast-changing question in {n} of {total} {unit}",
    ),
    "freshness.undated": ("freshness", "undated sources in {n} of {total} {unit}"),
    "freshness.missing_caveat": (
        "freshness",
        "no dated recency caveat on a fast-changing question in {n} of {total} {unit}",
    ),
}


def _cluster_of(code: str, axis: str) -> tuple[str, str, str | None]:
    """(cluster key, axis, word for the sentence) of a finding code."""
    if code in _QUERY_CONSTRAINT_WORDS:
        return "query.constraint", "query", _QUERY_CONSTRAINT_WORDS[code]
    if code in _QUERY_BREADTH_WORDS:
        return "query.breadth", "query", _QUERY_BREADTH_WORDS[code]
    if code in ("query.dropped_entity", "query.shortened_entity"):
        return "query.entity", "query", None
    if code in _TEMPLATES:
        return code, _TEMPLATES[code][0], None
    return code, axis, None


def _join_or(words: list[str]) -> str:
    if len(words) <= 1:
        return words[0] if words else "constraint"
    return ", ".join(words[:-1]) + " or " + words[-1]


def _verdict_of(case: Mapping[str, Any]) -> Mapping[str, Any]:
    verdict = case.get("verdict")
    if isinstance(verdict, str):
        verdict = json.loads(verdict)
    if not isinstance(verdict, Mapping):
        raise InputError("verdict is missing or not an object")
    axes = verdict.get("axes", {})
    if not isinstance(axes, Mapping):
        raise InputError("verdict.axes is not an object")
    return verdict


def _count_queries(case: Mapping[str, Any]) -> int:
    queries = case.get("queries") or []
    return len(queries) if isinstance(queries, list | tuple) else 0


def build_report(cases: Iterable[Mapping[str, Any]]) -> TrafficReport:
    """Per-axis failure rates and clustered findings over logged cases (module docstring)."""
    n_cases = 0
    n_passed = 0
    n_queries = 0
    query_cases = 0
    skipped: list[str] = []
    evaluated: dict[str, int] = dict.fromkeys(AXES, 0)
    failed: dict[str, int] = dict.fromkeys(AXES, 0)
    # cluster key → set of (case, query) or (case,) units touched
    touched: dict[str, set[tuple[int, str]]] = {}
    codes: dict[str, dict[str, int]] = {}
    words: dict[str, list[str]] = {}
    examples: dict[str, list[str]] = {}
    axis_of: dict[str, str] = {}

    for i, case in enumerate(cases, start=1):
        if not isinstance(case, Mapping):
            skipped.append(f"case {i}: not an object")
            continue
        try:
            verdict = _verdict_of(case)
        except (ValueError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
            skipped.append(f"case {i}: {exc}")
            continue
        n_cases += 1
        n_passed += bool(verdict.get("passed"))
        case_queries = _count_queries(case)
        n_queries += case_queries
        query_cases += case_queries > 0
        axes = verdict.get("axes", {})
        for axis_name, axis in axes.items():
            if not isinstance(axis, Mapping):
                continue
            if axis.get("evaluated", True):
                evaluated[axis_name] = evaluated.get(axis_name, 0) + 1
                failed[axis_name] = failed.get(axis_name, 0) + (not axis.get("passed", True))
            for finding in axis.get("findings") or []:
                _add_finding(i, axis_name, finding, touched, codes, words, examples, axis_of)
        for finding in verdict.get("findings") or []:
            _add_finding(i, "answer", finding, touched, codes, words, examples, axis_of)

    clusters: list[FindingCluster] = []
    for key, units in touched.items():
        axis = axis_of[key]
        is_query = axis == "query"
        unit = "queries" if is_query else "answers"
        total = n_queries if is_query else n_cases
        if is_query and total < len(units):
            total = len(units)  # queries were not logged with the case; count what we saw
        what = _join_or(words.get(key, []))
        template = _TEMPLATES.get(key)
        if template is not None:
            sentence = template[1].format(what=what, n=len(units), total=total, unit=unit)
        else:
            sentence = f"{key} in {len(units)} of {total} {unit}"
        clusters.append(
            FindingCluster(
                key=key,
                axis=axis,
                sentence=sentence,
                count=len(units),
                total=total,
                unit=unit,
                codes=dict(sorted(codes[key].items())),
                examples=examples[key],
            )
        )
    clusters.sort(key=lambda c: (-c.count / max(c.total, 1), -c.count, c.key))
    axes_stats = [
        AxisStats(
            axis=a,
            evaluated=evaluated[a],
            failed=failed[a],
            failure_rate=(failed[a] / evaluated[a]) if evaluated[a] else None,
        )
        for a in sorted(evaluated, key=lambda a: (_AXIS_ORDER.get(a, len(AXES)), a))
    ]
    return TrafficReport(
        cases=n_cases,
        passed=n_passed,
        skipped=skipped,
        queries=n_queries,
        axes=axes_stats,
        clusters=clusters,
    )


def _add_finding(
    case_index: int,
    axis_name: str,
    finding: Any,
    touched: dict[str, set[tuple[int, str]]],
    codes: dict[str, dict[str, int]],
    words: dict[str, list[str]],
    examples: dict[str, list[str]],
    axis_of: dict[str, str],
) -> None:
    if not isinstance(finding, Mapping):
        return
    if finding.get("severity") == "info":
        return
    code = str(finding.get("code") or "unknown")
    if code in _SUMMARY_CODES:
        return
    key, axis, word = _cluster_of(code, axis_name)
    details = finding.get("details") or {}
    unit = ""
    if axis == "query" and isinstance(details, Mapping):
        unit = str(details.get("query_index", details.get("query", finding.get("message", ""))))
    touched.setdefault(key, set()).add((case_index, unit))
    per_code = codes.setdefault(key, {})
    per_code[code] = per_code.get(code, 0) + 1
    axis_of.setdefault(key, axis)
    if word is not None and word not in words.setdefault(key, []):
        words[key].append(word)
    bucket = examples.setdefault(key, [])
    message = str(finding.get("message", ""))
    if message and len(bucket) < 3 and message not in bucket:
        bucket.append(message)


_AXIS_COLUMNS = (
    Column("axis", width=10),
    Column("evaluated", width=9, align="right"),
    Column("failed", width=7, align="right"),
    Column("rate", width=7, align="right"),
)


def render_report(report: TrafficReport) -> str:
    """A plain-text view of a :class:`TrafficReport`: an axis table, then the findings."""
    lines = [
        f"cases: {report.cases}  passed: {report.passed}  queries: {report.queries}"
        + (f"  skipped: {len(report.skipped)}" if report.skipped else ""),
        "",
        table(
            _AXIS_COLUMNS,
            [
                [
                    a.axis,
                    str(a.evaluated),
                    str(a.failed),
                    "-" if a.failure_rate is None else f"{a.failure_rate:.0%}",
                ]
                for a in report.axes
            ],
            sep=" ",
        ),
    ]
    if report.clusters:
        lines += ["", "most common findings:"]
        for c in report.clusters:
            lines.append(f"  - {c.sentence}")
            if c.examples:
                lines.append(f"      e.g. {c.examples[0]}")
    if report.skipped:
        lines += ["", "skipped:"]
        lines += [f"  - {s}" for s in report.skipped]
    return "\n".join(lines) + "\n"

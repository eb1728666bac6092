"""The traffic view: what goes wrong across many logged cases.

:func:`build_report` reads logged cases — mappings with ``prompt``, ``queries``, ``answer``,
``verdict`` (the JSON of :class:`citeguard.models.Verdict`, as a mapping or a JSON string) and
optionally ``timestamp`` (ISO 8601 or Unix seconds), as :meth:`GuardResult.to_case
<citeguard.models.GuardResult.to_case>` writes them — and counts, per axis, how many evaluated
answers failed, and which findings are most common. Findings are clustered by code family so the
report reads as sentences a person can act on: "the rewriter dropped the year or region in 1 of
8 queries". Cases that carry a timestamp also give the failure rates per hour, day or week
(:class:`Timeline`), and the failing answers are ranked: the worst few are kept whole, with
their citations (:class:`WorstCase`).

Query findings are counted per query (each carries ``details["query"]`` or ``query_index``);
every other finding is counted per answer. A case that cannot be read is skipped and its
reason kept in ``TrafficReport.skipped``; it never stops the report.

:func:`report_file` reads a JSONL log (one case a line) the same way, a line at a time: a line
that is not UTF-8, not JSON or not a case is skipped and counted; only a file that is no text
log at all (missing, a directory, binary, UTF-16) is an :class:`~citeguard.errors.InputError`.
"""

from __future__ import annotations

import heapq
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field

from citeguard.dates import parse_date, parse_iso
from citeguard.errors import InputError
from citeguard.models import AXES, CitationStatus
from citeguard.render import Column, table, trim

__all__ = [
    "AxisStats",
    "FindingCluster",
    "ReportCitation",
    "TimeBucket",
    "Timeline",
    "TrafficReport",
    "WorstCase",
    "build_report",
    "read_cases",
    "render_report",
    "report_file",
]


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


BucketSize = Literal["hour", "day", "week"]


class TimeBucket(_Model):
    """The cases logged in one hour, day or week (``start``, UTC) and their axes' failure rates."""

    start: datetime
    cases: int
    passed: int
    axes: list[AxisStats] = Field(default_factory=list)


class Timeline(_Model):
    """Failure rates over time, from the cases that carry a ``timestamp``. The bucket size
    follows the span: hours up to three days, days up to 120 days, then weeks (from Monday)."""

    bucket: BucketSize
    buckets: list[TimeBucket] = Field(default_factory=list)  # in time order, empty ones left out
    untimed: int = 0  # cases without a readable timestamp


class ReportCitation(_Model):
    """One cited URL of a worst case, as its verdict reported it."""

    url: str
    status: str
    ok: bool
    reason: str = ""
    domain: str | None = None
    title: str | None = None
    final_url: str | None = None
    # the page scrolled to the matched passage (``#:~:text=``), when a passage was found
    text_fragment_url: str | None = None
    claims: list[str] = Field(default_factory=list)  # the claims citing it (up to three, cut)
    # "uncertain": it passed with a claim's support unsettled (validity.support_uncertain)
    support: str | None = None


class ReportClaim(_Model):
    """One claim of a worst case, as the verdict's per-claim view gave it."""

    index: int
    text: str  # cut
    label: str | None = None  # the support label of its best citation
    probability: float | None = None  # P(supported)
    backend: str | None = None
    evidence: str | None = None  # the evidence window, cut
    text_fragment_url: str | None = None  # the page opened at the evidence
    gated: bool = False  # a citation was hard-rejected for it
    urls: list[str] = Field(default_factory=list)


class WorstCase(_Model):
    """A failing case, kept for the report's "worst answers": ranked by failing gating axes,
    then failing citations, then error findings."""

    label: str  # where it came from: "line 12" (a log file), "case 3" (build_report)
    prompt: str = ""
    answer: str = ""  # cut to 4,000 characters
    answer_cut: bool = False
    timestamp: datetime | None = None
    failed_axes: list[str] = Field(default_factory=list)
    findings: list[str] = Field(default_factory=list)  # up to six error messages
    broken: int = 0  # citations whose status is not ok
    citations: list[ReportCitation] = Field(default_factory=list)
    claims: list[ReportClaim] = Field(default_factory=list)  # gated claims first


class TrafficReport(_Model):
    """Per-axis failure rates and the most common findings across logged cases."""

    cases: int
    passed: int
    skipped: list[str] = Field(default_factory=list)  # "line 3: not JSON (...)"; first 100
    skipped_count: int = 0  # every case or line skipped
    queries: int = 0
    axes: list[AxisStats] = Field(default_factory=list)
    clusters: list[FindingCluster] = Field(default_factory=list)
    citations: int = 0  # cited URLs over all cases
    citation_statuses: dict[str, int] = Field(default_factory=dict)  # status → cited URLs
    timeline: Timeline | None = None  # None: no case carries a timestamp
    worst: list[WorstCase] = Field(default_factory=list)


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


_MAX_SKIPPED = 100  # reasons kept; every skip is counted
_ANSWER_CHARS = 4_000
_CLAIM_CHARS = 300
_MAX_FINDINGS = 6
_MAX_CITATIONS = 40  # per worst case
MAX_LINE_BYTES = 16 * 1024 * 1024  # a longer log line is skipped, never read whole


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


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
    return len(_as_list(case.get("queries")))


def _timestamp_of(case: Mapping[str, Any]) -> datetime | None:
    """The case's ``timestamp`` in UTC: ISO 8601 or Unix seconds; None when absent or bad."""
    raw = case.get("timestamp")
    if isinstance(raw, bool) or raw is None:
        return None
    if isinstance(raw, int | float):
        try:
            return datetime.fromtimestamp(raw, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(raw, str):
        parsed = parse_iso(raw) or parse_date(raw)
        return parsed.astimezone(UTC) if parsed is not None else None
    return None


def _floor(t: datetime, size: BucketSize) -> datetime:
    hour = t.replace(minute=0, second=0, microsecond=0)
    if size == "hour":
        return hour
    day = hour.replace(hour=0)
    return day if size == "day" else day - timedelta(days=day.weekday())


def _bucket_size(first: datetime, last: datetime) -> BucketSize:
    span = last - first
    if span <= timedelta(days=3):
        return "hour"
    return "day" if span <= timedelta(days=120) else "week"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_error(finding: Any) -> bool:
    return isinstance(finding, Mapping) and finding.get("severity", "error") == "error"


class _Counts:
    """Cases, passes and per-axis counts of one time bucket (a builder's own state)."""

    __slots__ = ("cases", "evaluated", "failed", "passed")

    def __init__(self) -> None:
        self.cases = 0
        self.passed = 0
        self.evaluated: dict[str, int] = {}
        self.failed: dict[str, int] = {}

    def merge(self, other: _Counts) -> None:
        self.cases += other.cases
        self.passed += other.passed
        for axis, n in other.evaluated.items():
            self.evaluated[axis] = self.evaluated.get(axis, 0) + n
        for axis, n in other.failed.items():
            self.failed[axis] = self.failed.get(axis, 0) + n


def _axis_order(names: Iterable[str]) -> list[str]:
    return sorted(names, key=lambda a: (_AXIS_ORDER.get(a, len(AXES)), a))


def _stats(
    axes: list[str], evaluated: Mapping[str, int], failed: Mapping[str, int]
) -> list[AxisStats]:
    return [
        AxisStats(
            axis=a,
            evaluated=evaluated.get(a, 0),
            failed=failed.get(a, 0),
            failure_rate=(failed.get(a, 0) / evaluated[a]) if evaluated.get(a) else None,
        )
        for a in axes
    ]


class _Builder:
    """One report's running counts: cases are added one at a time and never kept, except the
    few worst (a bounded heap), so a log of any length is read in constant memory per case."""

    def __init__(self, worst: int) -> None:
        self.cases = 0
        self.passed = 0
        self.queries = 0
        self.skipped: list[str] = []
        self.skipped_count = 0
        self.evaluated: dict[str, int] = dict.fromkeys(AXES, 0)
        self.failed: dict[str, int] = dict.fromkeys(AXES, 0)
        # cluster key → set of (case, query) or (case, "") units touched
        self.touched: dict[str, set[tuple[int, str]]] = {}
        self.codes: dict[str, dict[str, int]] = {}
        self.words: dict[str, list[str]] = {}
        self.examples: dict[str, list[str]] = {}
        self.axis_of: dict[str, str] = {}
        self.citations = 0
        self.statuses: dict[str, int] = {}
        self.hours: dict[datetime, _Counts] = {}
        self.untimed = 0
        self.keep_worst = max(worst, 0)
        # (rank, -sequence, case): a min-heap of the worst seen; on equal rank the earlier stays
        self.worst: list[tuple[tuple[int, int, int], int, WorstCase]] = []

    def skip(self, label: str, reason: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < _MAX_SKIPPED:
            self.skipped.append(f"{label}: {reason}")

    def add(self, case: Any, label: str) -> None:
        if not isinstance(case, Mapping):
            self.skip(label, "not an object")
            return
        try:
            verdict = _verdict_of(case)
        except (ValueError, TypeError, RecursionError) as exc:  # JSONDecodeError: a ValueError
            self.skip(label, str(exc) or type(exc).__name__)
            return
        self.cases += 1
        seq = self.cases
        passed = bool(verdict.get("passed"))
        self.passed += passed
        self.queries += _count_queries(case)
        when = _timestamp_of(case)
        bucket: _Counts | None = None
        if when is None:
            self.untimed += 1
        else:
            bucket = self.hours.setdefault(_floor(when, "hour"), _Counts())
            bucket.cases += 1
            bucket.passed += passed
        failed_axes: list[str] = []
        errors = 0
        for axis_name, axis in verdict.get("axes", {}).items():
            if not isinstance(axis, Mapping):
                continue
            name = str(axis_name)
            if axis.get("evaluated", True):
                failing = not axis.get("passed", True)
                self.evaluated[name] = self.evaluated.get(name, 0) + 1
                self.failed[name] = self.failed.get(name, 0) + failing
                if bucket is not None:
                    bucket.evaluated[name] = bucket.evaluated.get(name, 0) + 1
                    bucket.failed[name] = bucket.failed.get(name, 0) + failing
                if failing and axis.get("gating", True):
                    failed_axes.append(name)
            for finding in _as_list(axis.get("findings")):
                self._add_finding(seq, name, finding)
                errors += _is_error(finding)
        for finding in _as_list(verdict.get("findings")):
            self._add_finding(seq, "answer", finding)
            errors += _is_error(finding)
        cited = [c for c in _as_list(verdict.get("citations")) if isinstance(c, Mapping)]
        broken = 0
        for c in cited:
            status = str(c.get("status") or "unknown")
            self.statuses[status] = self.statuses.get(status, 0) + 1
            broken += status != CitationStatus.OK.value
        self.citations += len(cited)
        if passed or not self.keep_worst:
            return
        rank = (len(failed_axes), broken, errors)
        if len(self.worst) >= self.keep_worst and (rank, -seq) <= self.worst[0][:2]:
            return
        entry = (rank, -seq, _worst_case(case, verdict, label, when, failed_axes, cited, broken))
        if len(self.worst) < self.keep_worst:
            heapq.heappush(self.worst, entry)
        else:
            heapq.heapreplace(self.worst, entry)

    def _add_finding(self, case_index: int, axis_name: str, finding: Any) -> None:
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
        self.touched.setdefault(key, set()).add((case_index, unit))
        per_code = self.codes.setdefault(key, {})
        per_code[code] = per_code.get(code, 0) + 1
        self.axis_of.setdefault(key, axis)
        if word is not None and word not in self.words.setdefault(key, []):
            self.words[key].append(word)
        bucket = self.examples.setdefault(key, [])
        message = str(finding.get("message", ""))
        if message and len(bucket) < 3 and message not in bucket:
            bucket.append(message)

    def finish(self) -> TrafficReport:
        axes = _axis_order(self.evaluated)
        return TrafficReport(
            cases=self.cases,
            passed=self.passed,
            skipped=self.skipped,
            skipped_count=self.skipped_count,
            queries=self.queries,
            axes=_stats(axes, self.evaluated, self.failed),
            clusters=self._clusters(),
            citations=self.citations,
            citation_statuses=dict(sorted(self.statuses.items(), key=lambda kv: (-kv[1], kv[0]))),
            timeline=self._timeline(axes),
            worst=[e[2] for e in sorted(self.worst, reverse=True)],
        )

    def _clusters(self) -> list[FindingCluster]:
        clusters: list[FindingCluster] = []
        for key, units in self.touched.items():
            axis = self.axis_of[key]
            is_query = axis == "query"
            unit = "queries" if is_query else "answers"
            total = self.queries if is_query else self.cases
            if is_query and total < len(units):
                total = len(units)  # queries were not logged with the case; count what we saw
            what = _join_or(self.words.get(key, []))
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
                    codes=dict(sorted(self.codes[key].items())),
                    examples=self.examples[key],
                )
            )
        clusters.sort(key=lambda c: (-c.count / max(c.total, 1), -c.count, c.key))
        return clusters

    def _timeline(self, axes: list[str]) -> Timeline | None:
        if not self.hours:
            return None
        size = _bucket_size(min(self.hours), max(self.hours))
        merged: dict[datetime, _Counts] = {}
        for hour, counts in self.hours.items():
            merged.setdefault(_floor(hour, size), _Counts()).merge(counts)
        return Timeline(
            bucket=size,
            buckets=[
                TimeBucket(
                    start=start,
                    cases=c.cases,
                    passed=c.passed,
                    axes=_stats(axes, c.evaluated, c.failed),
                )
                for start, c in sorted(merged.items())
            ],
            untimed=self.untimed,
        )


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _worst_case(
    case: Mapping[str, Any],
    verdict: Mapping[str, Any],
    label: str,
    when: datetime | None,
    failed_axes: list[str],
    cited: list[Mapping[str, Any]],
    broken: int,
) -> WorstCase:
    claims: dict[int, str] = {}
    views: list[ReportClaim] = []
    for claim in _as_list(verdict.get("claims")):
        if isinstance(claim, Mapping) and isinstance(claim.get("index"), int):
            claims[claim["index"]] = _cut(str(claim.get("text", "")), _CLAIM_CHARS)
            if len(views) < _MAX_CITATIONS:
                views.append(_report_claim(claim, claims[claim["index"]]))
    views.sort(key=lambda c: not c.gated)  # gated claims first, in the verdict's order
    findings: list[str] = []
    for axis in verdict.get("axes", {}).values():
        if isinstance(axis, Mapping) and not axis.get("passed", True):
            findings += [
                str(f.get("message", "")) for f in _as_list(axis.get("findings")) if _is_error(f)
            ]
    findings += [
        str(f.get("message", "")) for f in _as_list(verdict.get("findings")) if _is_error(f)
    ]
    citations = [
        ReportCitation(
            url=str(c.get("url", "")),
            status=str(c.get("status") or "unknown"),
            ok=c.get("status") == CitationStatus.OK.value,
            reason=str(c.get("reason") or ""),
            domain=_str_or_none(c.get("domain")),
            title=_str_or_none(c.get("title")),
            final_url=_str_or_none(c.get("final_url")),
            text_fragment_url=_str_or_none(c.get("text_fragment_url")),
            support=_str_or_none(c.get("support")),
            claims=[
                claims[i]
                for i in _as_list(c.get("claim_indices"))
                if isinstance(i, int) and i in claims
            ][:3],
        )
        for c in cited[:_MAX_CITATIONS]
    ]
    # failing citations first, in the verdict's order
    citations.sort(key=lambda c: c.ok)
    answer = case.get("answer")
    answer_text = answer if isinstance(answer, str) else ""
    prompt = case.get("prompt")
    return WorstCase(
        label=label,
        prompt=prompt if isinstance(prompt, str) else "",
        answer=_cut(answer_text, _ANSWER_CHARS),
        answer_cut=len(answer_text) > _ANSWER_CHARS,
        timestamp=when,
        failed_axes=failed_axes,
        findings=[m for m in dict.fromkeys(findings) if m][:_MAX_FINDINGS],
        broken=broken,
        citations=citations,
        claims=views,
    )


def _report_claim(claim: Mapping[str, Any], text: str) -> ReportClaim:
    """A logged claim view, read defensively (a log line is anyone's JSON)."""
    prob = claim.get("probability")
    evidence = _str_or_none(claim.get("evidence"))
    return ReportClaim(
        index=claim["index"],
        text=text,
        label=_str_or_none(claim.get("label")),
        probability=float(prob)
        if isinstance(prob, int | float) and not isinstance(prob, bool)
        else None,
        backend=_str_or_none(claim.get("backend")),
        evidence=None if evidence is None else _cut(evidence, _CLAIM_CHARS),
        text_fragment_url=_str_or_none(claim.get("text_fragment_url")),
        gated=claim.get("gated") is True,
        urls=[str(u) for u in _as_list(claim.get("urls")) if isinstance(u, str)][:_MAX_CITATIONS],
    )


def build_report(cases: Iterable[Any], *, worst: int = 10) -> TrafficReport:
    """Per-axis failure rates, clustered findings, failure rates over time and the ``worst``
    failing cases, over logged cases (module docstring). A case that is not a mapping or has
    no readable verdict is skipped as ``case N: reason``."""
    builder = _Builder(worst)
    for i, case in enumerate(cases, start=1):
        builder.add(case, f"case {i}")
    return builder.finish()


# --------------------------------------------------------------------------------------------
# A JSONL log on disk
# --------------------------------------------------------------------------------------------


def _open_log(path: Path) -> IO[bytes]:
    """The log opened for reading, or an InputError saying in one line why it is no log."""
    try:
        f = path.open("rb")
    except FileNotFoundError:
        raise InputError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory, not a JSONL log") from None
    except PermissionError:
        raise InputError(f"cannot read {path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        if not path.is_file():
            raise InputError(f"{path} is not a regular file")
        head = f.read(8192)
        f.seek(0)
    except OSError as exc:
        f.close()
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except InputError:
        f.close()
        raise
    why = _not_a_log(head)
    if why is not None:
        f.close()
        raise InputError(f"{path} {why}; citeguard report reads UTF-8 JSONL, one case a line")
    return f


def _not_a_log(head: bytes) -> str | None:
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "is UTF-16 or UTF-32 text (it starts with a byte-order mark)"
    if head.startswith(b"\x1f\x8b"):
        return "is gzip-compressed (gunzip it first)"
    if b"\x00" in head:
        return "looks binary (it holds NUL bytes)"
    return None


def _lines(f: IO[bytes], max_line_bytes: int) -> Iterator[tuple[int, bytes | None, int]]:
    """(line number, the line or None when it is too long, bytes read so far)."""
    number = done = 0
    while True:
        raw = f.readline(max_line_bytes + 1)
        if not raw:
            return
        number += 1
        done += len(raw)
        if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # the rest of the line, read and dropped
                raw = f.readline(1 << 20)
                done += len(raw)
            yield number, None, done
            continue
        yield number, raw, done


def read_cases(
    f: IO[bytes], *, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, Any, str | None, int]]:
    """Each non-blank line of a JSONL log: (line number, the parsed JSON or None, why the line
    cannot be read or None, bytes read so far). A line that is too long, not UTF-8 or not JSON
    comes back with its reason; it never stops the reading."""
    for number, raw, done in _lines(f, max_line_bytes):
        if raw is None:
            yield number, None, f"longer than {max_line_bytes:,} bytes", done
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = raw[exc.start : exc.start + 1].hex()
            yield number, None, f"not UTF-8 (byte 0x{bad} at offset {exc.start})", done
            continue
        if number == 1:
            text = text.removeprefix("\ufeff")
        if not text.strip():
            continue
        try:
            yield number, json.loads(text), None, done
        except json.JSONDecodeError as exc:
            yield number, None, f"not JSON ({exc.msg} at column {exc.colno})", done
        except RecursionError:
            yield number, None, "not JSON (nested too deep)", done
        except ValueError as exc:  # e.g. an integer longer than Python reads
            yield number, None, f"not JSON ({exc})", done


def report_file(
    path: Path | str,
    *,
    worst: int = 10,
    progress: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> TrafficReport:
    """:func:`build_report` over a JSONL log, a line at a time; bad lines are skipped as
    ``line N: reason``. ``progress``: a stream (stderr) for a one-line progress meter, written
    only when it is a terminal and the reading takes longer than a moment. Raises
    :class:`~citeguard.errors.InputError` when the file is not a text log at all."""
    path = Path(path)
    builder = _Builder(worst)
    with _open_log(path) as f:
        try:
            total = path.stat().st_size
        except OSError:
            total = 0
        meter = _Progress(progress, total, clock)
        try:
            for number, case, why, done in read_cases(f, max_line_bytes=max_line_bytes):
                label = f"line {number}"
                if why is not None:
                    builder.skip(label, why)
                else:
                    builder.add(case, label)
                meter.update(done, builder.cases)
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
        finally:
            meter.close()
    return builder.finish()


class _Progress:
    """A one-line meter on a terminal: rewritten in place at most every ``interval`` seconds,
    the first time only after ``interval`` has passed (a short run prints nothing), erased at
    the end. Silent when the stream is not a terminal."""

    def __init__(
        self,
        stream: TextIO | None,
        total: int,
        clock: Callable[[], float],
        interval: float = 0.25,
    ) -> None:
        self._stream = stream if stream is not None and _isatty(stream) else None
        self._total = total
        self._clock = clock
        self._interval = interval
        self._last = clock() if self._stream is not None else 0.0
        self._width = 0

    def update(self, done: int, cases: int) -> None:
        if self._stream is None:
            return
        now = self._clock()
        if now - self._last < self._interval:
            return
        self._last = now
        text = self._text(done, cases)
        self._stream.write("\r" + text.ljust(self._width))
        self._stream.flush()
        self._width = max(self._width, len(text))

    def _text(self, done: int, cases: int) -> str:
        """The meter's line; ``done`` counts what was read (bytes for report), ``cases`` cases."""
        share = f" ({min(done * 100 // self._total, 100)}%)" if self._total else ""
        return f"citeguard report: {cases:,} cases read{share}"

    def close(self) -> None:
        if self._stream is not None and self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
            self._width = 0


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # a closed or odd stream
        return False


# --------------------------------------------------------------------------------------------
# Plain text
# --------------------------------------------------------------------------------------------

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
        + (f"  skipped: {report.skipped_count}" if report.skipped_count else ""),
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
    if report.worst:
        lines += ["", "worst answers:"]
        for w in report.worst[:5]:
            failed = ", ".join(w.failed_axes) or "no gating axis"
            lines.append(f"  - {w.label}: {failed} failed, {w.broken} failing citation(s)")
            if w.prompt:
                lines.append(f"      {trim(' '.join(w.prompt.split()), 90)}")
    if report.skipped:
        lines += ["", "skipped:"]
        lines += [f"  - {s}" for s in report.skipped]
        if report.skipped_count > len(report.skipped):
            lines.append(f"  - ... and {report.skipped_count - len(report.skipped)} more")
    return "\n".join(lines) + "\n"

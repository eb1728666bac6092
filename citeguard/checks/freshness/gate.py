"""The axis: the sources' median recency against the regime's floor, stale and undated sources,
date disagreements and the caveat rule, one named step each; an uncertain regime gated on its
most lenient plausible floor."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from citeguard.checks.freshness.caveat import CaveatMatch, find_caveat
from citeguard.checks.freshness.dating import (
    _FAST_REGIMES,
    _date_gap,
    _day,
    _days,
    _get_normalized,
    _iso,
    _normalized_keys,
    source_date,
)
from citeguard.checks.freshness.model import ModelFreshnessClass
from citeguard.checks.freshness.rules import classify_freshness
from citeguard.checks.minilm import LOCAL_MODEL_HINT
from citeguard.dates import as_aware
from citeguard.models import (
    AxisResult,
    CitationReport,
    Finding,
    FreshnessClass,
    Outcome,
    Regime,
    Severity,
)
from citeguard.policy import FreshnessPolicy


def _regime_model_details(
    fc: FreshnessClass, details: dict[str, object], findings: list[Finding]
) -> None:
    """The learned regime model's probabilities and top features, or why it fell back."""
    if not isinstance(fc, ModelFreshnessClass):
        return
    details["regime_backend"] = fc.backend
    details["rules_regime"] = fc.rules_regime.value
    if fc.backend == "model":
        details["regime_probabilities"] = dict(fc.probabilities)
        details["regime_top_features"] = list(fc.top_features)
    if fc.fallback is not None:
        findings.append(
            Finding(
                code="freshness.regime_fallback",
                message=(
                    f"the regime model is unavailable ({fc.fallback}); the question's regime "
                    f"({fc.regime.value.replace('_', '-')}) comes from the deterministic rules"
                ),
                severity=Severity.INFO,
                axis="freshness",
                details={"reason": fc.fallback, "hint": LOCAL_MODEL_HINT},
            )
        )


def check_freshness(
    question: str,
    answer_text: str,
    citations: Sequence[CitationReport],
    policy: FreshnessPolicy,
    *,
    now: datetime,
    search_dates: Mapping[str, datetime] | None = None,
    fclass: FreshnessClass | None = None,
) -> AxisResult:
    """Judge the recency of one answer's sources against the question's regime.

    ``search_dates`` maps a cited URL (as cited, normalised or final) to the published date a
    recorded search result gave it. ``score`` is the share of counted sources within the floor
    (1.0 when the regime has no floor). ``details`` carries the regime, cues, median recency,
    floor and each URL's date and its source (and, for a dated page, the search result's date
    and the gap to it). The median takes the page's own date first (:func:`source_date`); when
    a search result dated the page more than ``policy.date_disagreement_days`` from both its
    published and modified dates, that is a ``freshness.date_disagreement`` warning: the user
    saw one date in the results and the page says another.
    """
    if not policy.enabled:
        return AxisResult(
            name="freshness", passed=True, evaluated=False, details={"reason": "disabled"}
        )
    now = as_aware(now)
    fc = fclass if fclass is not None else classify_freshness(question, now=now)
    gate = fc.gate_regime if policy.uncertain_regime == "lenient" else fc.regime
    result = _gate(answer_text, citations, policy, now, search_dates or {}, fc, gate)
    if gate is fc.regime:
        return result
    guess = _gate(answer_text, citations, policy, now, search_dates or {}, fc, fc.regime)
    return _uncertain(result, guess, fc, gate)


def _uncertain(
    result: AxisResult, guess: AxisResult, fc: FreshnessClass, gate: Regime
) -> AxisResult:
    """The lenient result, with a ``freshness.regime_uncertain`` finding and what the best
    guess's floor would have rejected, as warnings (no hard reject on a regime that may be
    wrong: a missing caveat and a source past the guess's floor are shown, not gated)."""
    seen = {(f.code, f.url) for f in result.findings}
    would = [f for f in guess.findings if f.severity is Severity.ERROR]
    findings = [
        Finding(
            code="freshness.regime_uncertain",
            message=(
                f"the question looks {fc.regime.value.replace('_', '-')}, but the development "
                f"data cannot vouch for that ({', '.join(r.value for r in fc.plausible)} "
                f"plausible); gated on the most lenient floor, {gate.value.replace('_', '-')}"
                + (
                    f"; under the {fc.regime.value.replace('_', '-')} floor it would fail: "
                    + "; ".join(f.message for f in would)
                    if would
                    else ""
                )
            ),
            severity=Severity.WARNING if would else Severity.INFO,
            axis="freshness",
            details={
                "regime": fc.regime.value,
                "gate_regime": gate.value,
                "plausible": [r.value for r in fc.plausible],
                "confidence": fc.confidence,
                "would_fail": [f.code for f in would],
            },
        ),
        *result.findings,
        *(
            f.model_copy(
                update={
                    "severity": Severity.WARNING,
                    "details": {**f.details, "if_regime": fc.regime.value},
                }
            )
            for f in would
            if (f.code, f.url) not in seen
        ),
    ]
    details = {
        **result.details,
        "regime": fc.regime.value,
        "gate_regime": gate.value,
        "plausible_regimes": [r.value for r in fc.plausible],
        "regime_confidence": fc.confidence,
    }
    evaluated = result.evaluated or guess.evaluated
    return result.model_copy(
        update={"findings": findings, "details": details, "evaluated": evaluated}
    )


@dataclass(frozen=True)
class _Floor:
    """The rules one regime gates with: its floor, whether it is fast, the undated rule."""

    regime: Regime
    floor: float | None
    fast: bool
    undated_stale: bool

    @staticmethod
    def of(regime: Regime, policy: FreshnessPolicy) -> _Floor:
        fast = regime in _FAST_REGIMES
        return _Floor(
            regime=regime,
            floor=policy.floor_days.get(regime.value),
            fast=fast,
            undated_stale=fast and policy.undated_counts_as_stale,
        )

    @property
    def name(self) -> str:
        return self.regime.value.replace("_", "-")

    def past(self, days: float) -> bool:
        return self.floor is not None and days > self.floor


@dataclass
class _Dated:
    """The counted (resolving) sources: each one's date, age and where the date came from."""

    counted: int = 0
    per_url: dict[str, dict[str, object]] = field(default_factory=dict)
    recencies: list[float] = field(default_factory=list)
    undated: list[str] = field(default_factory=list)
    stale: list[tuple[str, float | None]] = field(default_factory=list)  # (url, age or undated)
    weak_stale: list[tuple[str, CitationReport, float]] = field(default_factory=list)
    # (url, report, search date, days between it and the nearest page date)
    disagreements: list[tuple[str, CitationReport, datetime, float]] = field(default_factory=list)


class _SearchDates:
    """The search results' dates, looked up as cited, normalised or final URL."""

    def __init__(self, dates: Mapping[str, datetime]) -> None:
        self._dates = dates
        self._normalized: dict[str, datetime] | None = None

    def find(self, report: CitationReport) -> datetime | None:
        dates = self._dates
        searched = (
            dates.get(report.url)
            or (dates.get(report.normalized_url) if report.normalized_url else None)
            or (dates.get(report.final_url) if report.final_url else None)
        )
        if searched is None and dates and (report.normalized_url or report.final_url):
            if self._normalized is None:
                # Search APIs and answers may spell one URL differently (case, slashes).
                self._normalized = _normalized_keys(dates)
            searched = (
                self._normalized.get(report.normalized_url) if report.normalized_url else None
            ) or _get_normalized(self._normalized, report.final_url)
        return searched


def _date_one(
    out: _Dated,
    report: CitationReport,
    searched: datetime | None,
    rules: _Floor,
    now: datetime,
    max_gap: float | None,
) -> None:
    """One counted source: its date and age, stale or not, and any date disagreement."""
    url = report.normalized_url or report.url
    date, source = source_date(report, searched)
    gap = _date_gap(report, searched)
    if gap is not None and max_gap is not None and gap > max_gap and searched is not None:
        out.disagreements.append((url, report, as_aware(searched), gap))
    if date is None:
        out.undated.append(url)
        out.per_url[url] = {"date": None, "source": source, "recency_days": None}
        if rules.undated_stale:
            out.recencies.append(float("inf"))
            out.stale.append((url, None))
        return
    # A date in the future (clock skew, scheduled posts) is as fresh as now, no fresher.
    days = max(0.0, (now - date).total_seconds() / 86400.0)
    entry: dict[str, object] = {
        "date": date.isoformat(),
        "source": source,
        "recency_days": round(days, 2),
    }
    out.per_url[url] = entry
    if report.date_source is not None:
        entry["date_source"] = report.date_source
    if source == "published_weak" and rules.past(days):
        # a text heuristic's date alone cannot make a source stale: shown, not counted
        out.weak_stale.append((url, report, days))
        return
    out.recencies.append(days)
    if searched is not None and source != "search":
        entry["search_date"] = as_aware(searched).isoformat()
        entry["search_gap_days"] = None if gap is None else round(gap, 2)
    if rules.past(days):
        out.stale.append((url, days))


def _date_sources(
    citations: Sequence[CitationReport],
    rules: _Floor,
    now: datetime,
    dates: Mapping[str, datetime],
    max_gap: float | None,
) -> _Dated:
    """Every resolving citation dated (the others are validity's business)."""
    out = _Dated()
    lookup = _SearchDates(dates)
    for report in citations:
        if report.status.outcome is not Outcome.RESOLVES:
            continue
        out.counted += 1
        _date_one(out, report, lookup.find(report), rules, now, max_gap)
    return out


def _median_days(median: float | None) -> float | str | None:
    return None if median is None else ("inf" if median == float("inf") else round(median, 2))


def _stale_median(rules: _Floor, median: float | None) -> Finding | None:
    """The median cited source past the floor (an error)."""
    floor = rules.floor
    if floor is None or median is None or median <= floor:
        return None
    if median == float("inf"):
        what = "the median cited source is undated (undated sources count as stale)"
    else:
        what = f"the median cited source is {_days(median)} old"
    return Finding(
        code="freshness.stale_median",
        message=f"{what}; a {rules.name} question needs sources at most {_days(floor)} old",
        axis="freshness",
        details={
            "median_recency_days": _median_days(median),
            "floor_days": floor,
            "feedback": (
                f"Cite sources updated within the last {_days(floor)}; the answer "
                "depends on information that changes quickly."
            ),
        },
    )


def _stale_sources(
    rules: _Floor, dated: _Dated, median_fails: bool, now: datetime
) -> list[Finding]:
    """On a fast question each stale (or undated) source is an offender, so regeneration drops
    it; an error when the median fails, else a warning. The message names the source's date
    and what "fresh" means for the question: dated on or after ``now`` less the floor."""
    if not rules.fast:
        return []
    since = (now - timedelta(days=rules.floor or 0)).date().isoformat()

    def dated_on(url: str) -> str:
        day = dated.per_url.get(url, {}).get("date")
        return f" (dated {day[:10]})" if isinstance(day, str) else ""

    return [
        Finding(
            code="freshness.stale_source" if age is not None else "freshness.undated",
            message=(
                f"{url}{dated_on(url)} is {_days(age)} old, past the {_days(rules.floor or 0)} "
                f"floor for a {rules.name} question: a fresh source is dated on or after {since}"
                if age is not None
                else f"{url} has no date, so it counts as stale for a {rules.name} question"
            ),
            severity=Severity.ERROR if median_fails else Severity.WARNING,
            axis="freshness",
            url=url,
            details={"recency_days": None if age is None else round(age, 2)},
        )
        for url, age in dated.stale
    ]


def _undated_sources(rules: _Floor, undated: list[str]) -> list[Finding]:
    """Undated sources left out of the median (a warning), where the regime has a floor."""
    if not undated or rules.undated_stale or rules.floor is None:
        return []
    return [
        Finding(
            code="freshness.undated",
            message=(
                f"{len(undated)} cited source(s) have no date and were left out of the "
                f"median: {', '.join(undated)}"
            ),
            severity=Severity.WARNING,
            axis="freshness",
            details={"urls": undated},
        )
    ]


def _weak_dates(rules: _Floor, dated: _Dated) -> list[Finding]:
    """A source past the floor only by a date guessed from its text: shown, not counted."""
    return [
        Finding(
            code="freshness.weak_date",
            message=(
                f"{url} looks {_days(age)} old, past the {_days(rules.floor or 0)} floor for a "
                f"{rules.name} question, but that date was guessed from "
                f"the page's text ({report.date_source}), not its metadata: not counted as "
                "stale"
            ),
            severity=Severity.WARNING,
            axis="freshness",
            url=url,
            details={"recency_days": round(age, 2), "date_source": report.date_source},
        )
        for url, report, age in dated.weak_stale
    ]


def _date_disagreement(
    url: str, report: CitationReport, searched: datetime, gap: float, max_gap: float | None
) -> Finding:
    """The date the user saw in the search results against the page's own dates."""
    page_dates = {
        "published": None if report.published is None else as_aware(report.published),
        "modified": None if report.modified is None else as_aware(report.modified),
    }
    said = " and ".join(f"{kind} {_day(d)}" for kind, d in page_dates.items() if d is not None)
    return Finding(
        code="freshness.date_disagreement",
        message=(
            f"{url}: the search result dated it {_day(searched)}, but the page says "
            f"{said}, {_days(gap)} apart; the median recency uses the page's date"
        ),
        severity=Severity.WARNING,
        axis="freshness",
        url=url,
        details={
            "search_date": searched.isoformat(),
            "page_published": _iso(page_dates["published"]),
            "page_modified": _iso(page_dates["modified"]),
            "gap_days": round(gap, 2),
            "max_gap_days": max_gap,
        },
    )


def _missing_caveat(
    rules: _Floor, caveat: CaveatMatch | None, now: datetime, policy: FreshnessPolicy
) -> Finding | None:
    """A fast question's answer without a dated caveat, or one naming only a year."""
    if caveat is not None and caveat.granularity != "year":
        return None
    problem = (
        "the answer has no dated recency caveat"
        if caveat is None
        else f"the recency caveat {caveat.text!r} names only a year"
    )
    return Finding(
        code="freshness.missing_caveat",
        message=(
            f"{problem}; a {rules.name} question needs one such as 'as of {now.day} {now:%B %Y}'"
        ),
        severity=Severity.ERROR if policy.require_caveat else Severity.WARNING,
        axis="freshness",
        details={
            "feedback": (
                "State when the information was checked, with a date: e.g. "
                f"'as of {now.day} {now:%B %Y}'."
            )
        },
    )


def _within_floor(floor: float | None, recencies: list[float]) -> float:
    """The share of dated sources within the floor (1.0 without a floor or a dated source)."""
    if floor is None or not recencies:
        return 1.0
    return sum(1 for d in recencies if d <= floor) / len(recencies)


def _gate(
    answer_text: str,
    citations: Sequence[CitationReport],
    policy: FreshnessPolicy,
    now: datetime,
    dates: Mapping[str, datetime],
    fc: FreshnessClass,
    regime: Regime,
) -> AxisResult:
    """The freshness axis with ``regime``'s floor, caveat rule and undated rule."""
    rules = _Floor.of(regime, policy)
    max_gap = policy.date_disagreement_days
    dated = _date_sources(citations, rules, now, dates, max_gap)
    findings: list[Finding] = []
    details: dict[str, object] = {
        "regime": regime.value,
        "regime_confidence": fc.confidence,
        "cues": fc.cues,
        "floor_days": rules.floor,
        "sources": dated.per_url,
        "undated": dated.undated,
    }
    _regime_model_details(fc, details, findings)
    if dated.counted == 0:
        details["reason"] = "no cited URL resolved; nothing to date"
    median: float | None = statistics.median(dated.recencies) if dated.recencies else None
    details["median_recency_days"] = _median_days(median)

    stale_median = _stale_median(rules, median)
    findings.extend([stale_median] if stale_median is not None else [])
    findings.extend(_stale_sources(rules, dated, stale_median is not None, now))
    findings.extend(_undated_sources(rules, dated.undated))
    findings.extend(_weak_dates(rules, dated))
    findings.extend(_date_disagreement(*d, max_gap) for d in dated.disagreements)
    if rules.fast:
        caveat = find_caveat(answer_text)
        details["caveat"] = None if caveat is None else caveat.model_dump(mode="json")
        missing = _missing_caveat(rules, caveat, now, policy)
        findings.extend([missing] if missing is not None else [])

    return AxisResult(
        name="freshness",
        passed=not any(f.severity is Severity.ERROR for f in findings),
        score=round(_within_floor(rules.floor, dated.recencies), 4),
        evaluated=dated.counted > 0 or rules.fast,
        findings=findings,
        offending_urls=[url for url, _ in dated.stale] if rules.fast else [],
        details=details,
    )

"""The named steps of the freshness gate (issue 46)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from conftest import resolving_report

from citeguard.checks.freshness.caveat import find_caveat
from citeguard.checks.freshness.gate import (
    _date_one,
    _date_sources,
    _Dated,
    _Floor,
    _missing_caveat,
    _SearchDates,
    _stale_median,
    _undated_sources,
    _within_floor,
)
from citeguard.models import CitationStatus, Regime
from citeguard.policy import FreshnessPolicy

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
POLICY = FreshnessPolicy()


def test_a_fast_regime_counts_undated_sources_as_stale_by_default() -> None:
    fast = _Floor.of(Regime.FAST, POLICY)
    assert fast.fast and fast.undated_stale and fast.floor is not None
    slow = _Floor.of(Regime.SLOW, POLICY)
    assert not slow.fast and not slow.undated_stale
    lenient = _Floor.of(Regime.FAST, POLICY.model_copy(update={"undated_counts_as_stale": False}))
    assert not lenient.undated_stale


def test_search_dates_found_under_a_differently_spelled_url() -> None:
    when = NOW - timedelta(days=3)
    dates = _SearchDates({"HTTPS://A.EXAMPLE/x": when})
    # neither spelling is the search result's key; the final URL, normalised, is
    report = resolving_report(
        "https://t.example/r", normalized_url=None, final_url="https://a.example/x"
    )
    assert dates.find(report) == when
    assert _SearchDates({}).find(resolving_report()) is None


def test_a_future_date_is_as_fresh_as_now() -> None:
    out = _Dated()
    rules = _Floor.of(Regime.FAST, POLICY)
    _date_one(out, resolving_report(modified=NOW + timedelta(days=5)), None, rules, NOW, None)
    assert out.recencies == [0.0] and out.stale == []


def test_a_guessed_date_past_the_floor_is_shown_not_counted() -> None:
    rules = _Floor.of(Regime.FAST, POLICY)
    old = NOW - timedelta(days=2000)
    out = _Dated()
    _date_one(out, resolving_report(published=old, date_source="htmldate"), None, rules, NOW, None)
    assert [u for u, _, _ in out.weak_stale] == ["https://a.example/x"]
    assert out.recencies == [] and out.stale == []
    out = _Dated()
    _date_one(out, resolving_report(published=old, date_source="json-ld"), None, rules, NOW, None)
    assert out.stale and out.recencies


def test_only_resolving_citations_are_dated() -> None:
    rules = _Floor.of(Regime.FAST, POLICY)
    cits = [
        resolving_report(),
        resolving_report("https://b.example/", status=CitationStatus.NOT_FOUND),
    ]
    dated = _date_sources(cits, rules, NOW, {}, None)
    assert dated.counted == 1
    assert list(dated.per_url) == ["https://a.example/x"]
    assert dated.stale == [("https://a.example/x", None)]  # undated on a fast question


def test_the_median_fails_only_past_the_floor() -> None:
    rules = _Floor.of(Regime.FAST, POLICY)
    assert rules.floor is not None
    assert _stale_median(rules, rules.floor) is None
    assert _stale_median(rules, None) is None
    finding = _stale_median(rules, float("inf"))
    assert finding is not None and "undated" in finding.message
    assert _stale_median(_Floor.of(Regime.INSENSITIVE, POLICY), 10_000.0) is None


def test_undated_sources_warned_only_when_left_out_of_the_median() -> None:
    urls = ["https://a.example/x"]
    assert _undated_sources(_Floor.of(Regime.FAST, POLICY), urls) == []  # counted stale
    assert [f.code for f in _undated_sources(_Floor.of(Regime.SLOW, POLICY), urls)] == [
        "freshness.undated"
    ]


def test_a_caveat_naming_only_a_year_is_missing_a_date() -> None:
    rules = _Floor.of(Regime.FAST, POLICY)
    assert _missing_caveat(rules, find_caveat("As of 1 December 2026, 42."), NOW, POLICY) is None
    year_only = _missing_caveat(rules, find_caveat("As of 2026, 42."), NOW, POLICY)
    assert year_only is not None and "names only a year" in year_only.message
    assert _missing_caveat(rules, None, NOW, POLICY) is not None


def test_the_score_is_the_share_within_the_floor() -> None:
    assert _within_floor(None, [1.0, 500.0]) == 1.0
    assert _within_floor(10.0, []) == 1.0
    assert _within_floor(10.0, [1.0, 5.0, 50.0, float("inf")]) == 0.5

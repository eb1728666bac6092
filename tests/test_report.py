"""The traffic report: per-axis failure rates and clustered findings over logged cases."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from citeguard.checks.diversity import check_diversity
from citeguard.checks.freshness import check_freshness
from citeguard.checks.query import check_queries
from citeguard.models import AxisResult, CitationReport, CitationStatus, Finding, Verdict
from citeguard.policy import Policy
from citeguard.report import build_report, render_report

POLICY = Policy()
NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)


def ok(url: str, **kw: Any) -> CitationReport:
    return CitationReport(url=url, normalized_url=url, status=CitationStatus.OK, reason="ok", **kw)


def case(
    prompt: str, queries: list[str], answer: str, cites: list[CitationReport]
) -> dict[str, Any]:
    """A logged case as the guard would write it: the verdict is Verdict's JSON."""
    validity = AxisResult(name="validity", passed=True)
    diversity = check_diversity(prompt, cites, POLICY.diversity)
    freshness = check_freshness(prompt, answer, cites, POLICY.freshness, now=NOW)
    query = check_queries(prompt, queries, POLICY.query)
    axes = {"validity": validity, "diversity": diversity, "freshness": freshness, "query": query}
    passed = all(a.passed for a in axes.values() if a.gating)
    verdict = Verdict(passed=passed, axes=axes, citations=cites)
    return {
        "prompt": prompt,
        "queries": queries,
        "answer": answer,
        "verdict": verdict.model_dump(mode="json"),
    }


def traffic() -> list[dict[str, Any]]:
    fresh = ok("https://www.nasa.gov/a", published=datetime(2026, 11, 30, tzinfo=UTC))
    cases = [
        # 1 query drops the year (of 8 queries overall)
        case("GDPR fines issued in 2025 in the EU", ["GDPR fines EU"], "x", [fresh]),
        case("Who founded Boeing?", ["Boeing founder"], "x", [fresh]),
        case("Who painted The Starry Night?", ["Starry Night painter"], "x", [fresh]),
        case("What is the capital of Costa Rica?", ["Costa Rica capital"], "x", [fresh]),
        case(
            "Compare the battery life of the MacBook Air M3 and the Dell XPS 13",
            ["MacBook Air M3 battery life", "Dell XPS 13 battery life"],
            "x",
            [fresh, ok("https://www.theverge.com/a")],
        ),
        # a real-time question without a caveat, and a monoculture synthesis answer
        case("What is the current price of bitcoin?", ["bitcoin price"], "About $90k.", [fresh]),
        case(
            "Give an overview of the history of solid-state battery research",
            ["solid-state battery research history"],
            "x",
            [ok("https://www.example.com/a"), ok("https://www.example.com/b")],
        ),
    ]
    return cases


def test_rates_and_clusters() -> None:
    report = build_report(traffic())
    assert report.cases == 7
    assert report.queries == 8
    rates = {a.axis: a for a in report.axes}
    assert [a.axis for a in report.axes] == ["validity", "diversity", "freshness", "query"]
    assert rates["validity"].failure_rate == 0.0
    assert rates["query"].evaluated == 7 and rates["query"].failed == 1
    assert rates["freshness"].failed == 1  # the bitcoin answer has no dated caveat
    assert rates["diversity"].failed == 1  # one site for a synthesis question
    sentences = [c.sentence for c in report.clusters]
    assert "the rewriter dropped the year in 1 of 8 queries" in sentences
    assert "no dated recency caveat on a fast-changing question in 1 of 7 answers" in sentences
    assert "too few distinct domains in 1 of 7 answers" in sentences
    year = next(c for c in report.clusters if c.key == "query.constraint")
    assert year.codes == {"query.dropped_year": 1}
    assert year.examples and "dropped the year 2025" in year.examples[0]
    # Covered drops in the split comparison are info and are not counted, and the axis's
    # summary finding is not a cluster of its own.
    assert not any(c.key == "query.entity" for c in report.clusters)
    assert not any(c.key == "query.feedback" for c in report.clusters)


def test_cluster_sentence_names_each_kind_seen() -> None:
    cases = traffic()
    cases.append(
        case("What changed in Python 3.12 for asyncio?", ["Python asyncio changes"], "x", [])
    )
    cases.append(case("GDPR fines issued in 2025 in the EU", ["GDPR fines 2025"], "x", []))
    report = build_report(cases)
    sentences = [c.sentence for c in report.clusters]
    assert "the rewriter dropped the year, version or region in 3 of 10 queries" in sentences


def test_bad_cases_are_skipped_with_reasons() -> None:
    good = traffic()[:2]
    as_string = dict(good[1], verdict=Verdict.model_validate(good[1]["verdict"]).model_dump_json())
    cases: list[Any] = [
        good[0],
        as_string,
        {"prompt": "x"},
        {"verdict": "{not json"},
        {"verdict": {"axes": []}},
        "not a mapping",
    ]
    report = build_report(cases)
    assert report.cases == 2
    assert len(report.skipped) == 4
    assert report.skipped[0].startswith("case 3:")
    assert report.clusters[0].total == 2  # two queries across the two readable cases


def test_unknown_codes_are_clustered_by_code() -> None:
    axis = AxisResult(
        name="validity",
        passed=False,
        findings=[Finding(code="validity.not_found", message="https://x.example/ returned 404")],
    )
    verdict = Verdict(passed=False, axes={"validity": axis})
    report = build_report([{"verdict": verdict.model_dump(mode="json")}] * 3)
    [cluster] = report.clusters
    assert cluster.sentence == "validity.not_found in 3 of 3 answers"
    assert report.axes[0].failure_rate == 1.0


def test_render_report() -> None:
    text = render_report(build_report(traffic()))
    lines = text.splitlines()
    assert lines[0] == "cases: 7  passed: 5  queries: 8"
    assert any(line.split()[:4] == ["query", "7", "1", "14%"] for line in lines)
    assert "  - the rewriter dropped the year in 1 of 8 queries" in lines
    empty = render_report(build_report([]))
    assert empty.startswith("cases: 0")
    assert "-" in empty.splitlines()[3]

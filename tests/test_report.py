"""The traffic report: per-axis failure rates, clustered findings, rates over time and the
worst answers over logged cases; the JSONL log it reads (``GuardResult.to_case()``)."""

from __future__ import annotations

import gzip
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from citeguard.checks.diversity import check_diversity
from citeguard.checks.freshness import check_freshness
from citeguard.checks.query import check_queries
from citeguard.errors import InputError
from citeguard.models import (
    Attempt,
    AxisResult,
    CitationReport,
    CitationStatus,
    Finding,
    GuardResult,
    SearchRecord,
    Verdict,
)
from citeguard.policy import Policy
from citeguard.report import build_report, render_report, report_file

# the report clusters a freshness failure: "the current price of bitcoin" gated on its guessed
# regime (the default gates an uncertain regime leniently, with warnings only: issue 32)
POLICY = Policy(freshness={"uncertain_regime": "strict"})
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


# --------------------------------------------------------------------------------------------
# Over time, the worst answers, cited statuses
# --------------------------------------------------------------------------------------------


def _timed(verdict: Verdict, at: Any) -> dict[str, Any]:
    return {"verdict": verdict.model_dump(mode="json"), "timestamp": at}


def _verdict(*, validity: bool, query: bool = True, cites: int = 0) -> Verdict:
    axes = {
        "validity": AxisResult(name="validity", passed=validity),
        "query": AxisResult(name="query", passed=query),
    }
    broken = [
        CitationReport(
            url=f"https://x.example/{i}",
            normalized_url=f"https://x.example/{i}",
            status=CitationStatus.NOT_FOUND,
            reason="HTTP 404",
        )
        for i in range(cites)
    ]
    return Verdict(passed=validity and query, axes=axes, citations=broken)


def test_timeline_buckets_follow_the_span() -> None:
    t0 = datetime(2026, 12, 2, 9, 15, tzinfo=UTC)
    hours = [
        _timed(_verdict(validity=True), t0.isoformat()),
        _timed(_verdict(validity=False), (t0 + timedelta(minutes=30)).isoformat()),
        _timed(_verdict(validity=False), (t0 + timedelta(hours=2)).timestamp()),  # Unix seconds
        {"verdict": _verdict(validity=False).model_dump(mode="json")},  # untimed
        _timed(_verdict(validity=False), "not a date"),  # counted, but not on the timeline
    ]
    report = build_report(hours)
    assert report.cases == 5
    timeline = report.timeline
    assert timeline is not None and timeline.bucket == "hour" and timeline.untimed == 2
    assert [b.start for b in timeline.buckets] == [
        datetime(2026, 12, 2, 9, tzinfo=UTC),
        datetime(2026, 12, 2, 11, tzinfo=UTC),
    ]
    first = {a.axis: a for a in timeline.buckets[0].axes}
    assert timeline.buckets[0].cases == 2 and timeline.buckets[0].passed == 1
    assert first["validity"].failure_rate == 0.5 and first["diversity"].failure_rate is None

    days = [_timed(_verdict(validity=d % 2 == 0), t0 + timedelta(days=d)) for d in range(10)]
    days = [dict(c, timestamp=c["timestamp"].isoformat()) for c in days]
    timeline = build_report(days).timeline
    assert timeline is not None and timeline.bucket == "day" and len(timeline.buckets) == 10
    assert timeline.buckets[1].axes[0].failure_rate == 1.0

    # over 120 days: weeks, each starting on a Monday, in another offset too
    weeks = [_timed(_verdict(validity=True), f"2026-0{m}-15T23:30:00-05:00") for m in (1, 6)]
    timeline = build_report(weeks).timeline
    assert timeline is not None and timeline.bucket == "week"
    assert [b.start.weekday() for b in timeline.buckets] == [0, 0]
    assert timeline.buckets[0].start == datetime(2026, 1, 12, tzinfo=UTC)  # 16 Jan 04:30 UTC

    assert build_report(traffic()).timeline is None  # no case carries a timestamp


def test_worst_answers_are_ranked_and_bounded() -> None:
    cases = [
        {"prompt": "passes", "verdict": _verdict(validity=True).model_dump(mode="json")},
        {"prompt": "one axis", "verdict": _verdict(validity=False).model_dump(mode="json")},
        {
            "prompt": "two axes",
            "verdict": _verdict(validity=False, query=False, cites=1).model_dump(mode="json"),
        },
        {
            "prompt": "one axis, three dead links",
            "answer": "x" * 5000,
            "verdict": _verdict(validity=False, cites=3).model_dump(mode="json"),
        },
        {"prompt": "one axis again", "verdict": _verdict(validity=False).model_dump(mode="json")},
    ]
    report = build_report(cases, worst=3)
    assert [w.prompt for w in report.worst] == [
        "two axes",
        "one axis, three dead links",
        "one axis",  # on a tie the earlier case stays
    ]
    assert [w.label for w in report.worst] == ["case 3", "case 4", "case 2"]
    assert report.worst[0].failed_axes == ["validity", "query"]
    assert report.worst[1].broken == 3 and len(report.worst[1].answer) == 4000
    assert report.worst[1].answer_cut and report.worst[1].answer.endswith("…")
    assert build_report(cases, worst=0).worst == []
    assert report.citations == 4 and report.citation_statuses == {"not_found": 4}


def test_worst_case_keeps_citation_links_and_claims() -> None:
    good = ok("https://www.nasa.gov/a", text_fragment_url="https://www.nasa.gov/a#:~:text=Moon")
    bad = CitationReport(
        url="https://gone.example/b",
        normalized_url="https://gone.example/b",
        status=CitationStatus.NOT_FOUND,
        reason="HTTP 404",
        claim_indices=[1],
    )
    from citeguard.models import ClaimReport

    verdict = Verdict(
        passed=False,
        axes={"validity": AxisResult(name="validity", passed=False)},
        citations=[good, bad],
        claims=[ClaimReport(index=0, text="first"), ClaimReport(index=1, text="second")],
    )
    [worst] = build_report([{"verdict": verdict.model_dump_json()}]).worst
    assert [c.url for c in worst.citations] == ["https://gone.example/b", "https://www.nasa.gov/a"]
    assert worst.citations[0].claims == ["second"] and not worst.citations[0].ok
    assert worst.citations[1].text_fragment_url == "https://www.nasa.gov/a#:~:text=Moon"


def test_malformed_parts_of_a_case_do_not_stop_it() -> None:
    verdict = {
        "passed": False,
        "axes": {"validity": {"passed": False, "findings": 5}, "query": "x"},
        "findings": {"not": "a list"},
        "citations": [7, {"status": None}],
        "claims": "nope",
    }
    report = build_report([{"verdict": verdict, "queries": "q", "prompt": 3}])
    assert report.cases == 1 and report.skipped_count == 0
    assert report.citation_statuses == {"unknown": 1}
    assert report.worst[0].prompt == "" and report.worst[0].failed_axes == ["validity"]


def test_skipped_reasons_are_capped_but_counted() -> None:
    report = build_report(["x"] * 150)
    assert report.skipped_count == 150 and len(report.skipped) == 100
    text = render_report(report)
    assert "skipped: 150" in text.splitlines()[0]
    assert "  - ... and 50 more" in text.splitlines()


# --------------------------------------------------------------------------------------------
# The report's input: GuardResult.to_case()
# --------------------------------------------------------------------------------------------


def test_to_case_is_one_jsonl_line_build_report_reads() -> None:
    cases = traffic()
    verdict = Verdict.model_validate(cases[0]["verdict"])
    attempts = [
        Attempt(
            number=1,
            answer="first",
            verdict=verdict,
            searches=[SearchRecord(query="GDPR fines EU"), SearchRecord(query=" ")],
        ),
        Attempt(number=2, answer="x", verdict=verdict, searches=[SearchRecord(query="GDPR 2025")]),
    ]
    result = GuardResult(
        answer="x", passed=False, verdict=verdict, attempts=attempts, outcome="failed"
    )
    at = datetime(2026, 12, 2, 12, 30, tzinfo=UTC)
    line = json.dumps(result.to_case("GDPR fines issued in 2025 in the EU", timestamp=at))
    case = json.loads(line)
    assert set(case) == {
        "timestamp",
        "prompt",
        "queries",
        "answer",
        "outcome",
        "attempts",
        "verdict",
        "searches",  # what citeguard rescore needs to run the gate again
        "excluded_urls",
        "structured",
        "snapshot",
    }
    assert [s["query"] for s in case["searches"]] == ["GDPR fines EU", " ", "GDPR 2025"]
    assert case["excluded_urls"] == [] and case["snapshot"] is None
    assert case["timestamp"] == "2026-12-02T12:30:00+00:00"
    assert case["queries"] == ["GDPR fines EU", "GDPR 2025"]  # blank queries are none
    assert case["attempts"] == 2 and case["outcome"] == "failed"
    assert Verdict.model_validate(case["verdict"]) == verdict
    report = build_report([case])
    assert report.cases == 1 and report.queries == 2
    assert report.timeline is not None and report.timeline.buckets[0].start == at.replace(minute=0)
    # without a timestamp given, the case is stamped now, with an offset
    stamped = result.to_case()["timestamp"]
    assert datetime.fromisoformat(stamped).tzinfo is not None


# --------------------------------------------------------------------------------------------
# A log on disk
# --------------------------------------------------------------------------------------------


def _line(case: dict[str, Any]) -> bytes:
    return json.dumps(case).encode() + b"\n"


def test_report_file_skips_and_counts_bad_lines(tmp_path: Path) -> None:
    good = traffic()[:3]
    log = tmp_path / "cases.jsonl"
    log.write_bytes(
        b"\xef\xbb\xbf"  # a UTF-8 byte-order mark on the first line is read past
        + _line(good[0])
        + b"\n   \n"  # blank lines are neither cases nor skips
        + b'{"prompt": "caf\xe9"}\n'  # Latin-1, not UTF-8
        + b"{not json\n"
        + b"[1, 2]\n"
        + _line(good[1])
        + b'{"verdict": 5}\n'
        + b"[" * 100_000
        + b"\n"
        + _line(good[2]).rstrip(b"\n")  # no newline at the end
    )
    report = report_file(log)
    assert report.cases == 3 and report.queries == 3
    assert report.skipped_count == 5
    assert report.skipped[0] == "line 4: not UTF-8 (byte 0xe9 at offset 15)"
    assert report.skipped[1].startswith("line 5: not JSON (Expecting property name")
    assert report.skipped[2] == "line 6: not an object"
    assert report.skipped[3] == "line 8: verdict is missing or not an object"
    assert report.skipped[4].startswith("line 9: not JSON")


def test_report_file_skips_a_line_too_long_to_read(tmp_path: Path) -> None:
    log = tmp_path / "cases.jsonl"
    long_line = b'{"prompt": "' + b"x" * 5000 + b'"}\n'
    log.write_bytes(_line(traffic()[0]) + long_line + _line(traffic()[1]))
    report = report_file(log, max_line_bytes=4096)
    assert report.cases == 2
    assert report.skipped == ["line 2: longer than 4,096 bytes"]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('{"verdict": {}}\n'.encode("utf-16"), "is UTF-16 or UTF-32 text"),
        (gzip.compress(b'{"verdict": {}}\n', mtime=0), "is gzip-compressed"),
        (b"\x00\x01\x02binary\n", "looks binary"),
    ],
)
def test_report_file_refuses_what_is_no_text_log(tmp_path: Path, content: bytes, says: str) -> None:
    log = tmp_path / "cases.jsonl"
    log.write_bytes(content)
    with pytest.raises(InputError, match=says) as err:
        report_file(log)
    assert "\n" not in str(err.value)


def test_report_file_refuses_missing_files_and_directories(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        report_file(tmp_path / "missing.jsonl")
    with pytest.raises(InputError, match="is a directory"):
        report_file(tmp_path)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _ticking(step: float) -> Any:
    now = [0.0]

    def clock() -> float:
        now[0] += step
        return now[0]

    return clock


def test_progress_is_drawn_on_a_terminal_and_erased(tmp_path: Path) -> None:
    log = tmp_path / "cases.jsonl"
    log.write_bytes(b"".join(_line(c) for c in traffic()))
    term = _Terminal()
    report = report_file(log, progress=term, clock=_ticking(1.0))
    written = term.getvalue()
    updates = [u for u in written.split("\r") if u.strip()]
    assert len(updates) == report.cases  # one per line read, as the clock runs fast
    assert updates[0].startswith("citeguard report: 1 cases read (")
    assert updates[-1].rstrip() == "citeguard report: 7 cases read (100%)"
    assert written.endswith("\r" + " " * len(updates[-1].rstrip()) + "\r")  # erased


def test_progress_stays_quiet_off_a_terminal_and_on_short_runs(tmp_path: Path) -> None:
    log = tmp_path / "cases.jsonl"
    log.write_bytes(b"".join(_line(c) for c in traffic()))
    pipe = io.StringIO()  # not a terminal
    report_file(log, progress=pipe, clock=_ticking(1.0))
    assert pipe.getvalue() == ""
    term = _Terminal()  # a terminal, but the reading takes less than the interval
    report_file(log, progress=term, clock=_ticking(0.001))
    assert term.getvalue() == ""

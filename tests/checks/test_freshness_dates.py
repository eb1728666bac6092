"""Freshness: the date a search result showed the user against the cited page's own dates.

Through ``Guard.check`` against the loopback farm: the agent's search is recorded (its result
carries a ``published_date``, as Tavily's news results do), the page is fetched and dated from
its markup, and the freshness axis reports a ``freshness.date_disagreement`` finding when the
two are more than ``FreshnessPolicy.date_disagreement_days`` apart. The median recency keeps
using the page's own date.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from conftest import Farm

from citeguard import FetchPolicy, Guard, Policy, SearchRecord, SearchResult, Verdict
from citeguard.models import Finding, Severity
from citeguard.recording import recording_run

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
QUESTION = "What is the latest version of Frobnicator?"  # a fast question: dates matter


def _page(published: str | None, modified: str | None = None) -> str:
    head = ""
    if published:
        head += f"<meta property='article:published_time' content='{published}'>"
    if modified:
        head += f"<meta property='article:modified_time' content='{modified}'>"
    return (
        f"<html><head><title>Frobnicator 5.2</title>{head}</head><body><article>"
        "<p>Frobnicator 5.2 is the latest version of the Frobnicator toolkit, released by its "
        "maintainers this week with faster builds.</p></article></body></html>"
    )


def _answer(url: str) -> str:
    return f"As of 2 December 2026, the latest version of Frobnicator is 5.2 [1].\n\n[1] {url}\n"


def _policy(**freshness: Any) -> Policy:
    fetch = FetchPolicy(
        allow_private_addresses=True, url_timeout=3.0, answer_deadline=5.0, retries=0
    )
    return Policy(
        fetch=fetch,
        entailment={"check_entailment": False},
        freshness=freshness,
    )


def _guard(farm: Farm, policy: Policy | None = None) -> Guard:
    return Guard(policy or _policy(), resolver=farm.resolver, now=lambda: NOW)


def _disagreements(verdict: Verdict) -> list[Finding]:
    return [
        f for f in verdict.axes["freshness"].findings if f.code == "freshness.date_disagreement"
    ]


async def test_recorded_search_date_disagreeing_with_the_page_is_a_finding(farm: Farm) -> None:
    url = farm.add("news.example.com", "/frob", body=_page("2026-11-28T09:00:00Z"))
    async with _guard(farm) as guard:

        def search(query: str) -> list[dict[str, str]]:
            return [
                {
                    "url": url,
                    "title": "Frobnicator 5.2",
                    "content": "Frobnicator 5.2 released",
                    "published_date": "Sat, 01 Mar 2025 08:00:00 GMT",
                }
            ]

        with recording_run():
            guard.wrap_search(search)("frobnicator latest version")
            verdict = await guard.check(_answer(url), question=QUESTION)

    axis = verdict.axes["freshness"]
    assert axis.details["regime"] == "fast"
    found = _disagreements(verdict)
    assert len(found) == 1
    finding = found[0]
    assert finding.severity is Severity.WARNING and finding.url == url
    assert finding.details["search_date"].startswith("2025-03-01")
    assert finding.details["page_published"].startswith("2026-11-28")
    assert finding.details["max_gap_days"] == 30.0
    assert 600 < finding.details["gap_days"] < 640
    assert "1 March 2025" in finding.message and "28 November 2026" in finding.message
    # the median recency still uses the page's own date: 4 days, within the fast floor
    source = axis.details["sources"][url]
    assert source["source"] == "published" and source["recency_days"] < 5
    assert source["search_date"].startswith("2025-03-01")
    assert axis.details["median_recency_days"] < 5
    assert axis.passed  # a warning, not a failure


async def test_search_and_page_within_the_window_agree(farm: Farm) -> None:
    url = farm.add("news.example.com", "/frob", body=_page("2026-11-28T09:00:00Z"))
    searches = [
        SearchRecord(
            query="frobnicator",
            results=[SearchResult(url=url, published=datetime(2026, 11, 10, tzinfo=UTC))],
        )
    ]
    async with _guard(farm) as guard:
        verdict = await guard.check(_answer(url), question=QUESTION, searches=searches)
    assert _disagreements(verdict) == []
    assert verdict.axes["freshness"].details["sources"][url]["search_gap_days"] < 30


async def test_the_nearer_page_date_counts(farm: Farm) -> None:
    """A provider date may be the page's last update: near ``modified``, it agrees."""
    body = _page("2024-01-05T00:00:00Z", modified="2026-11-29T00:00:00Z")
    url = farm.add("news.example.com", "/frob", body=body)
    searches = [
        SearchRecord(
            query="frobnicator",
            results=[SearchResult(url=url, published=datetime(2026, 11, 30, tzinfo=UTC))],
        )
    ]
    async with _guard(farm) as guard:
        verdict = await guard.check(_answer(url), question=QUESTION, searches=searches)
    assert _disagreements(verdict) == []


async def test_search_url_spelled_differently_still_matches(farm: Farm) -> None:
    url = farm.add("news.example.com", "/frob", body=_page("2026-11-28T09:00:00Z"))
    spelled = url.replace("news.example.com", "NEWS.Example.COM")
    searches = [
        SearchRecord(
            query="frobnicator",
            results=[SearchResult(url=spelled, published=datetime(2025, 3, 1, tzinfo=UTC))],
        )
    ]
    async with _guard(farm) as guard:
        verdict = await guard.check(_answer(url), question=QUESTION, searches=searches)
    assert [f.url for f in _disagreements(verdict)] == [url]


async def test_threshold_comes_from_the_policy(farm: Farm) -> None:
    url = farm.add("news.example.com", "/frob", body=_page("2026-11-28T09:00:00Z"))
    searches = [
        SearchRecord(
            query="frobnicator",
            results=[SearchResult(url=url, published=datetime(2026, 11, 10, tzinfo=UTC))],
        )
    ]
    async with _guard(farm, _policy(date_disagreement_days=7)) as guard:
        strict = await guard.check(_answer(url), question=QUESTION, searches=searches)
    assert len(_disagreements(strict)) == 1
    async with _guard(farm, _policy(date_disagreement_days=None)) as guard:
        off = await guard.check(_answer(url), question=QUESTION, searches=searches)
    assert _disagreements(off) == []


async def test_undated_page_takes_the_search_date_without_a_finding(farm: Farm) -> None:
    url = farm.add("news.example.com", "/frob", body=_page(None))
    searches = [
        SearchRecord(
            query="frobnicator",
            results=[SearchResult(url=url, published=datetime(2026, 11, 30, tzinfo=UTC))],
        )
    ]
    async with _guard(farm) as guard:
        verdict = await guard.check(_answer(url), question=QUESTION, searches=searches)
    assert _disagreements(verdict) == []
    assert verdict.axes["freshness"].details["sources"][url]["source"] == "search"

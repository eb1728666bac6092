"""Search results as they come: SDK response objects (Exa, Perplexity, Anthropic), provider
shapes, and their dates (RFC 1123, ages against the Guard's clock, Google CSE meta tags; never
Bing's crawl date), through normalize_search_results, wrap_search and check(searches=...)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from anthropic.types import Message, WebSearchToolResultBlock
from conftest import Farm
from exa_py.api import Result, SearchResponse
from perplexity.types import SearchCreateResponse, StreamChunk
from provider_pages import (
    NOW,
    QUESTION,
    anthropic_message,
    guard,
    perplexity_completion,
    policy,
    site,
)

from citeguard import CitationStatus
from citeguard.dates import parse_relative_date
from citeguard.search import as_search_record, normalize_search_results, query_of

A, B = "https://a.example.com/one", "https://b.example.org/two"
SENTENCE = "Middlemarch is a novel by the English author George Eliot"


def _exa(urls: tuple[str, str] = (A, B)) -> SearchResponse[Result]:
    return SearchResponse(
        results=[
            Result(
                url=urls[0],
                id=urls[0],
                title="One",
                published_date="2026-11-20T08:30:00.000Z",
                highlights=["the first passage", "the second"],
            ),
            Result(url=urls[1], id=urls[1], title="Two", published_date=None),
        ],
        resolved_search_type="neural",
        auto_date=None,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3 days ago", NOW - timedelta(days=3)),
        ("1 week ago", NOW - timedelta(weeks=1)),
        ("an hour ago", NOW - timedelta(hours=1)),
        ("2 months ago", NOW.replace(month=10)),
        ("1 year ago", NOW.replace(year=2025)),
        ("yesterday", NOW - timedelta(days=1)),
        ("in 3 days", None),
        ("3 days", None),
    ],
)
def test_relative_dates_read_against_the_clock(text: str, expected: datetime | None) -> None:
    assert parse_relative_date(text, now=NOW) == expected
    assert parse_relative_date(text, now=None) is None


def test_the_exa_sdk_response_yields_its_rows() -> None:
    rows = normalize_search_results(_exa())
    assert [r.url for r in rows] == [A, B]
    assert rows[0].published == datetime(2026, 11, 20, 8, 30, tzinfo=UTC)
    assert rows[0].snippet == "the first passage … the second"
    assert rows[1].published is None and [r.rank for r in rows] == [1, 2]


def test_perplexity_search_results_in_the_sdk_objects() -> None:
    chunk = StreamChunk.model_validate(perplexity_completion("x [1]", [A, B], dates=["", ""]))
    assert [r.url for r in normalize_search_results(chunk)] == [A, B]
    search = SearchCreateResponse.model_validate(
        {
            "id": "s1",
            "results": [
                {"title": "One", "url": A, "snippet": "s", "date": "2026-11-01"},
                {"title": "Two", "url": B, "snippet": "s", "date": None},
            ],
        }
    )
    rows = normalize_search_results(search)
    assert [r.url for r in rows] == [A, B]
    assert rows[0].published == datetime(2026, 11, 1, tzinfo=UTC)


def test_anthropic_web_search_tool_result_blocks() -> None:
    urls = {"book": A, "library": B}
    message = Message.model_validate(anthropic_message(urls))
    block = next(b for b in message.content if isinstance(b, WebSearchToolResultBlock))
    for shape in (block, block.model_dump(), message.content, message, message.model_dump()):
        rows = normalize_search_results(shape, now=NOW)
        assert [r.url for r in rows] == [A, B], type(shape)
        assert rows[0].published == datetime(2025, 4, 30, tzinfo=UTC)
        assert rows[1].published == NOW - timedelta(days=3)
    error = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
    }
    assert normalize_search_results(error) == []


def test_tavily_news_dates_in_rfc_1123() -> None:
    raw = {
        "query": "helix release",
        "results": [
            {
                "url": A,
                "title": "One",
                "content": "c",
                "published_date": "Mon, 30 Nov 2026 14:05:00 GMT",
            },
        ],
    }
    (row,) = normalize_search_results(raw)
    assert row.published == datetime(2026, 11, 30, 14, 5, tzinfo=UTC)
    assert query_of(raw) == "helix release"


def test_serper_ages_need_the_clock() -> None:
    raw = {
        "searchParameters": {"q": "helix release", "type": "search"},
        "organic": [
            {"title": "One", "link": A, "snippet": "s", "date": "3 days ago"},
            {"title": "Two", "link": B, "snippet": "s", "date": "1 week ago"},
        ],
    }
    assert [r.published for r in normalize_search_results(raw)] == [None, None]
    dated = normalize_search_results(raw, now=NOW)
    assert [r.published for r in dated] == [NOW - timedelta(days=3), NOW - timedelta(weeks=1)]
    assert query_of(raw) == "helix release"


def test_google_cse_metatag_dates() -> None:
    raw = {
        "queries": {"request": [{"searchTerms": "helix release"}]},
        "items": [
            {
                "title": "One",
                "link": A,
                "snippet": "s",
                "pagemap": {
                    "metatags": [
                        {"og:type": "article", "article:published_time": "2026-11-28T09:00:00Z"}
                    ]
                },
            },
            {
                "title": "Two",
                "link": B,
                "pagemap": {"newsarticle": [{"datepublished": "2026-10-01"}]},
            },
        ],
    }
    rows = normalize_search_results(raw)
    assert rows[0].published == datetime(2026, 11, 28, 9, tzinfo=UTC)
    assert rows[1].published == datetime(2026, 10, 1, tzinfo=UTC)
    assert query_of(raw) == "helix release"


def test_bing_crawl_dates_are_not_publication_dates() -> None:
    raw = {
        "queryContext": {"originalQuery": "helix release"},
        "webPages": {
            "value": [
                {
                    "name": "One",
                    "url": A,
                    "snippet": "s",
                    "dateLastCrawled": "2026-12-01T00:00:00Z",
                },
                {
                    "name": "Two",
                    "url": B,
                    "snippet": "s",
                    "datePublished": "2026-06-01T00:00:00Z",
                    "dateLastCrawled": "2026-12-01T00:00:00Z",
                },
            ]
        },
    }
    rows = normalize_search_results(raw)
    assert [r.published for r in rows] == [None, datetime(2026, 6, 1, tzinfo=UTC)]
    assert query_of(raw) == "helix release"


def test_brave_and_serpapi_queries() -> None:
    assert query_of({"query": {"original": "q1"}, "web": {"results": []}}) == "q1"
    assert query_of({"search_parameters": {"q": "q2"}, "organic_results": []}) == "q2"
    assert query_of(_exa()) is None


def test_openai_web_search_sources() -> None:
    sources = [{"type": "url", "url": A}, {"type": "url", "url": B}]
    assert [r.url for r in normalize_search_results(sources)] == [A, B]


def test_as_search_record_takes_records_pairs_and_responses() -> None:
    rec = as_search_record(("helix 5 release", _exa()), provider="exa")
    assert rec.query == "helix 5 release" and len(rec.results) == 2
    assert rec.raw["results"][0]["url"] == A  # JSON-safe raw
    assert as_search_record(rec) is rec
    assert as_search_record({"query": "q", "results": [{"url": A}]}).query == "q"


async def test_wrap_search_records_sdk_objects_and_ages_against_the_guards_clock(
    farm: Farm,
) -> None:
    urls = site(farm)

    async def exa_search(query: str) -> SearchResponse[Result]:
        return _exa((urls["book"], urls["library"]))

    def serper_search(query: str) -> dict[str, Any]:
        return {"organic": [{"link": urls["book"], "title": "One", "date": "2 days ago"}]}

    async with guard(farm) as g:
        exa = g.wrap_search(exa_search, provider="exa")
        serper = g.wrap_search(serper_search, provider="serper")

        async def agent(question: str, *, exclude_urls: frozenset[str]) -> str:
            await exa("Middlemarch author")
            serper("Middlemarch novel author")
            return f"{SENTENCE} [1].\n\n[1] {urls['book']}"

        result = await g.wrap(agent)(QUESTION)
    exa_rec, serper_rec = result.attempts[0].searches
    assert [r.url for r in exa_rec.results] == [urls["book"], urls["library"]]
    assert exa_rec.results[0].published == datetime(2026, 11, 20, 8, 30, tzinfo=UTC)
    assert serper_rec.results[0].published == NOW - timedelta(days=2)
    assert result.passed
    assert not [f for f in result.verdict.axes["validity"].findings if f.code == "not_retrieved"]


async def test_check_accepts_search_responses_in_any_shape(farm: Farm) -> None:
    urls = site(farm)
    text = f"{SENTENCE} [1].\n\n[1] {urls['book']}"
    exa = _exa((urls["library"], urls["library"]))
    async with guard(farm, policy=policy(not_retrieved_fails=True)) as g:
        missing = await g.check(text, question=QUESTION, searches=[("Middlemarch author", exa)])
        found = await g.check(
            text,
            question=QUESTION,
            searches=[("Middlemarch author", _exa((urls["book"], urls["library"])))],
        )
    assert missing.citations[0].status is CitationStatus.NOT_RETRIEVED
    assert found.citations[0].status is CitationStatus.OK
    assert found.axes["query"].evaluated

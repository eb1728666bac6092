"""Perplexity chat completions: ``[n]`` markers bound to ``citations``, ``search_results`` fed
as the run's searches, and ``references=`` for any agent whose sources arrive beside the text."""

from __future__ import annotations

from datetime import UTC, datetime

from conftest import Farm
from perplexity.types import StreamChunk
from provider_pages import QUESTION, guard, perplexity_completion, site

from citeguard import CitationStatus, parse_answer
from citeguard.providers import read_provider

TEXT = (
    "<think>The user asks who wrote it.</think>\n"
    "Middlemarch is a novel by the English author George Eliot [1]. "
    "George Eliot was the pen name of Mary Ann Evans [2]."
)


def _completion(urls: dict[str, str], first: str = "book") -> StreamChunk:
    data = perplexity_completion(
        TEXT, [urls[first], urls["library"]], dates=["2025-05-20", "3 days ago"]
    )
    return StreamChunk.model_validate(data)


def test_numbered_markers_cite_the_citations_list(farm: Farm) -> None:
    urls = site(farm)
    answer = parse_answer(_completion(urls))
    assert not answer.text.startswith("<think>")  # the reasoning is not the answer
    assert [(c.kind, c.origin, c.label, c.claim_index) for c in answer.citations] == [
        ("numbered", "perplexity", "1", 0),
        ("numbered", "perplexity", "2", 1),
    ]
    assert [c.normalized_url for c in answer.citations] == [urls["book"], urls["library"]]
    assert answer.citations[0].title == "Result 1"
    assert not [f for f in answer.findings if f.code == "unresolved_marker"]


def test_search_results_are_the_runs_search_with_their_dates(farm: Farm) -> None:
    urls = site(farm)
    answer = parse_answer(_completion(urls))
    (search,) = answer.searches
    assert search.provider == "perplexity" and search.query == ""
    assert [r.url for r in search.results] == [urls["book"], urls["library"]]
    assert search.results[0].published == datetime(2025, 5, 20, tzinfo=UTC)
    provider = read_provider(_completion(urls))
    assert provider is not None and provider.cost == 0.00709


def test_search_results_stand_in_for_a_missing_citations_list(farm: Farm) -> None:
    urls = site(farm)
    data = perplexity_completion(TEXT, [urls["book"], urls["library"]], dates=["", ""])
    del data["citations"]
    answer = parse_answer(data)
    assert [c.normalized_url for c in answer.citations] == [urls["book"], urls["library"]]


async def test_guard_checks_a_perplexity_answer_end_to_end(farm: Farm) -> None:
    urls = site(farm)
    async with guard(farm) as g:
        verdict = await g.check(_completion(urls), question=QUESTION)
    assert verdict.axes["validity"].passed
    assert {c.url: c.status for c in verdict.citations} == {
        urls["book"]: CitationStatus.OK,
        urls["library"]: CitationStatus.OK,
    }
    # a search with no known query is not judged by the query axis
    assert not verdict.axes["query"].evaluated


async def test_a_guarded_perplexity_agent_reports_its_cost(farm: Farm) -> None:
    urls = site(farm)
    calls: list[frozenset[str]] = []

    def agent(question: str, *, exclude_urls: frozenset[str]) -> StreamChunk:  # sync SDK call
        calls.append(exclude_urls)
        return _completion(urls, first="dead" if len(calls) == 1 else "book")

    async with guard(farm) as g:
        result = await g.wrap(agent)(QUESTION)
    assert result.passed and len(result.attempts) == 2
    assert result.attempts[0].cost == 0.00709
    assert urls["dead"] in calls[1]
    assert "[1]" in result.answer


def test_references_beside_plain_text() -> None:
    text = "Middlemarch is by George Eliot [1]. Eliot was Mary Ann Evans [2]."
    refs = [
        "https://books.example.com/m",
        {"url": "https://library.example.org/e", "title": "Eliot"},
    ]
    answer = parse_answer(text, references=refs)
    assert [(c.origin, c.claim_index, c.url) for c in answer.citations] == [
        ("references", 0, "https://books.example.com/m"),
        ("references", 1, "https://library.example.org/e"),
    ]
    assert answer.citations[1].title == "Eliot"
    keyed = parse_answer("As the [Times][nyt] reported.", references={"nyt": refs[0]})
    assert [c.url for c in keyed.citations] == [refs[0]]


def test_references_a_text_never_marks_cite_the_answer_as_a_whole() -> None:
    answer = parse_answer(
        "Middlemarch is by George Eliot.", references=["https://books.example.com/m"]
    )
    (c,) = answer.citations
    assert (c.kind, c.claim_index, c.start) == ("external", None, -1)
    assert not [f for f in answer.findings if f.code == "unused_reference"]


def test_a_texts_own_reference_list_wins_over_passed_references() -> None:
    text = "Middlemarch is by George Eliot [1].\n\n[1] https://books.example.com/m"
    answer = parse_answer(text, references=["https://other.example.org/x"])
    assert [c.url for c in answer.citations] == ["https://books.example.com/m"]
    assert "duplicate_reference" in [f.code for f in answer.findings]


async def test_guard_check_accepts_references(farm: Farm) -> None:
    urls = site(farm)
    text = "Middlemarch is a novel by the English author George Eliot [1]."
    async with guard(farm) as g:
        verdict = await g.check(text, question=QUESTION, references=[urls["book"]])
    assert [(c.url, c.status) for c in verdict.citations] == [(urls["book"], CitationStatus.OK)]

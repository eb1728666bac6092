"""Anthropic Messages: text-block citations bound to the claims they back, ``cited_text``
verified on the page (a trailing "..." is a cut, not an elision), document citations mapped to
URLs or reported as not checkable, web search results as the run's searches."""

from __future__ import annotations

from datetime import timedelta

from anthropic.types import Message
from conftest import Farm
from provider_pages import (
    NOW,
    QUESTION,
    anthropic_message,
    document_blocks,
    guard,
    policy,
    site,
)

from citeguard import CitationStatus, parse_answer
from citeguard.providers import resolve_answer, untruncate


def test_untruncate_drops_the_cut_marks_only() -> None:
    assert untruncate("was an American mathematician and i...") == (
        "was an American mathematician and i"
    )
    assert untruncate("… the middle part …") == "the middle part"
    assert untruncate("a … b") == "a … b"
    assert untruncate("...") is None


def test_sdk_message_binds_citations_to_the_claims_their_blocks_are_in(farm: Farm) -> None:
    urls = site(farm)
    message = Message.model_validate(anthropic_message(urls))
    answer = parse_answer(message)
    assert answer.text.startswith("I'll search for who wrote Middlemarch.\n\nBased on")
    assert [c.text for c in answer.claims] == [
        "I'll search for who wrote Middlemarch.",
        "Based on the search results, Middlemarch is a novel by George Eliot.",
        "George Eliot was the pen name of Mary Ann Evans.",
    ]
    book, library = answer.citations
    assert (book.origin, book.kind, book.claim_index) == ("anthropic", "annotation", 1)
    assert (library.claim_index, library.normalized_url) == (2, urls["library"])
    # a zero-width marker at the end of the cited text: the claim's words are all kept
    assert book.marker == "" and book.start == book.end
    assert answer.text[: book.end].endswith("by George Eliot")
    # the cited passage is the quote to verify, without the API's "..."
    assert book.quote == (
        "Middlemarch is a novel by the English author George Eliot, first published in eight"
    )
    assert answer.claims[0].citation_indices == []


def test_web_search_tool_results_are_the_runs_searches(farm: Farm) -> None:
    urls = site(farm)
    answer = parse_answer(Message.model_validate(anthropic_message(urls)))
    (search,) = answer.searches
    assert search.query == "Middlemarch novel author" and search.provider == "anthropic"
    assert [r.url for r in search.results] == [urls["book"], urls["library"]]
    assert search.results[0].published is not None
    assert search.results[0].published.date().isoformat() == "2025-04-30"


def test_a_content_block_list_reads_like_the_message(farm: Farm) -> None:
    urls = site(farm)
    message = Message.model_validate(anthropic_message(urls))
    from_blocks = parse_answer(message.content)
    from_message = parse_answer(message)
    assert from_blocks.citations == from_message.citations
    assert parse_answer(message.model_dump_json()) == from_message


def test_a_document_citation_without_a_url_is_not_checkable() -> None:
    urls = {"book": "https://books.example.com/m", "library": "https://library.example.org/e"}
    answer = parse_answer(anthropic_message(urls, extra=document_blocks()))
    doc = answer.citations[-1]
    assert doc.normalized_url is None and doc.url == "document:'Eliot biography'"
    assert doc.claim_index == 3
    (finding,) = [f for f in answer.findings if f.code == "not_checkable"]
    assert finding.url == doc.url and "documents=" in finding.message


def test_a_documents_map_names_the_url_a_document_citation_is_checked_at() -> None:
    urls = {"book": "https://books.example.com/m", "library": "https://library.example.org/e"}
    data = anthropic_message(urls, extra=document_blocks())
    for key in (0, "Eliot biography"):
        answer = parse_answer(data, documents={key: urls["library"]})
        doc = answer.citations[-1]
        assert doc.normalized_url == urls["library"] and doc.quote.startswith("Evans was born")
        assert not [f for f in answer.findings if f.code == "not_checkable"]


async def test_guard_checks_an_anthropic_answer_end_to_end(farm: Farm) -> None:
    urls = site(farm)
    message = Message.model_validate(anthropic_message(urls))
    async with guard(farm) as g:
        verdict = await g.check(message, question=QUESTION)
    assert verdict.axes["validity"].passed
    by_url = {c.url: c for c in verdict.citations}
    assert by_url[urls["book"]].status is CitationStatus.OK
    assert by_url[urls["book"]].claim_indices == [1]
    assert by_url[urls["library"]].claim_indices == [2]
    # the cited passages were found on the pages, verbatim
    assert by_url[urls["book"]].passage is not None
    assert by_url[urls["book"]].passage.how in ("exact", "normalised")
    (claim,) = [c for c in verdict.claims if c.index == 1]
    assert claim.checks[0].quote is not None and not claim.checks[0].quote.endswith("...")


async def test_an_invented_cited_text_fails_on_the_page(farm: Farm) -> None:
    urls = site(farm)
    data = anthropic_message(urls)
    data["content"][4]["citations"][0]["cited_text"] = (
        "Middlemarch is a short story by Charles Dickens, first published in 1901..."
    )
    async with guard(farm) as g:
        verdict = await g.check(data, question=QUESTION)
    book = next(c for c in verdict.citations if c.url == urls["book"])
    assert book.status in (CitationStatus.PASSAGE_MISSING, CitationStatus.PASSAGE_ALTERED)
    assert not verdict.passed


async def test_guard_reports_document_citations_as_not_checkable(farm: Farm) -> None:
    urls = site(farm)
    data = anthropic_message(urls, extra=document_blocks())
    async with guard(farm) as g:
        verdict = await g.check(data, question=QUESTION)
        mapped = await g.check(data, question=QUESTION, documents={0: urls["library"]})
    doc = next(c for c in verdict.citations if c.url.startswith("document:"))
    assert doc.status is CitationStatus.NOT_CHECKABLE
    assert doc.status.outcome.value == "unverifiable" and "names no URL" in doc.reason
    assert not verdict.passed  # unverifiable_fails: the gate fails closed
    assert {c.status for c in mapped.citations} == {CitationStatus.OK}


async def test_search_result_ages_are_read_against_the_guards_clock(farm: Farm) -> None:
    urls = site(farm)
    parsed = parse_answer(anthropic_message(urls))
    assert parsed.searches[0].results[1].published is None  # "3 days ago": no clock yet
    _, searches = await resolve_answer(parsed, [], policy=policy().fetch, now=NOW)
    (search,) = searches
    library = next(r for r in search.results if r.url == urls["library"])
    assert library.published == NOW - timedelta(days=3)


async def test_strip_cannot_cut_citations_that_live_outside_the_text(farm: Farm) -> None:
    urls = site(farm)
    data = anthropic_message({"book": urls["dead"], "library": urls["library"]})

    async def agent(question: str, *, exclude_urls: frozenset[str]) -> dict:
        return data

    async with guard(farm, policy=policy(on_fail="strip", max_attempts=1)) as g:
        result = await g.wrap(agent)(QUESTION)
    assert not result.passed and result.outcome == "failed"
    assert "nothing was stripped" in result.message


def test_search_result_citations_use_their_source_url_or_the_documents_map() -> None:
    def block(source: str) -> dict:
        return {
            "type": "text",
            "text": "The API limit is 100 requests per minute",
            "citations": [
                {
                    "type": "search_result_location",
                    "source": source,
                    "title": "Rate limits",
                    "cited_text": "The API limit is 100 requests per minute.",
                    "search_result_index": 0,
                    "start_block_index": 0,
                    "end_block_index": 1,
                }
            ],
        }

    by_url = parse_answer([block("https://docs.example.com/limits")])
    assert [c.normalized_url for c in by_url.citations] == ["https://docs.example.com/limits"]
    internal = [block("kb://limits")]
    assert parse_answer(internal).citations[0].normalized_url is None
    mapped = parse_answer(internal, documents={"kb://limits": "https://docs.example.com/l"})
    assert mapped.citations[0].normalized_url == "https://docs.example.com/l"

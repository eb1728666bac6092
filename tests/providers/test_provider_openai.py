"""OpenAI Responses and Chat Completions: url_citation annotations bound to the sentences their
markers close, tracking parameters stripped for matching, end to end through Guard.check."""

from __future__ import annotations

import json

import pytest
from conftest import Farm
from openai.types.chat import ChatCompletion
from openai.types.responses import Response
from provider_pages import (
    QUESTION,
    chat_completion,
    guard,
    openai_response,
    openai_text,
    site,
)

from citeguard import CitationStatus, Synthesis, parse_answer
from citeguard.providers import read_provider, strip_tracking

BOOK_SENTENCE = "Middlemarch is a novel by the English author George Eliot."
PEN_SENTENCE = "George Eliot was the pen name of Mary Ann Evans."


def _response(urls: dict[str, str], first: str = "book") -> Response:
    text, anns = openai_text(
        [
            (BOOK_SENTENCE, urls[first], "Middlemarch"),
            (PEN_SENTENCE, urls["library"], "George Eliot"),
        ]
    )
    data = openai_response(
        text, anns, query="Middlemarch author", sources=[urls["book"], urls["library"]]
    )
    return Response.model_validate(data)


def test_strip_tracking_keeps_everything_but_tracking_parameters() -> None:
    assert strip_tracking("https://a.example/p?utm_source=openai") == "https://a.example/p"
    assert (
        strip_tracking("https://a.example/p?id=3&utm_medium=x&gclid=1&b=2#sec")
        == "https://a.example/p?id=3&b=2#sec"
    )
    assert strip_tracking("https://a.example/p?ref=home") == "https://a.example/p?ref=home"
    assert strip_tracking("https://a.example/p") == "https://a.example/p"


def test_responses_sdk_object_binds_each_annotation_to_the_sentence_its_marker_closes(
    farm: Farm,
) -> None:
    urls = site(farm)
    answer = parse_answer(_response(urls))
    assert [c.text.split(" (")[0] for c in answer.claims] == [BOOK_SENTENCE, PEN_SENTENCE]
    assert [(c.origin, c.kind, c.claim_index) for c in answer.citations] == [
        ("openai", "inline_link", 0),
        ("openai", "inline_link", 1),
    ]
    book = answer.citations[0]
    assert book.url == urls["book"] + "?utm_source=openai"  # as the user sees it
    assert book.normalized_url == urls["book"]  # as it is matched and fetched
    assert book.title == "Middlemarch"
    assert answer.urls == [urls["book"], urls["library"]]
    (search,) = answer.searches
    assert search.query == "Middlemarch author" and search.provider == "openai"
    assert [r.url for r in search.results] == [urls["book"], urls["library"]]


def test_the_dict_and_json_forms_read_like_the_sdk_object(farm: Farm) -> None:
    urls = site(farm)
    obj = _response(urls)
    as_dict = obj.model_dump()
    as_json = obj.model_dump_json()
    expected = parse_answer(obj)
    assert parse_answer(as_dict) == expected
    assert parse_answer(as_json) == expected
    assert parse_answer(json.loads(as_json)) == expected


def test_an_annotation_over_no_link_is_a_marker_of_its_own() -> None:
    text = "Rates rose in 2024. 【1†source】 Jobs grew."
    start = text.index("【")
    data = openai_response(
        text,
        [
            {
                "type": "url_citation",
                "start_index": start,
                "end_index": start + len("【1†source】"),
                "url": "https://news.example.com/rates?utm_source=openai&id=7",
                "title": "Rates",
            }
        ],
        query="rates 2024",
        sources=[],
    )
    answer = parse_answer(Response.model_validate(data))
    (c,) = answer.citations
    assert c.kind == "annotation" and c.marker == "【1†source】"
    assert c.claim_index == 0 and answer.claims[0].text.startswith("Rates rose in 2024.")
    assert c.normalized_url == "https://news.example.com/rates?id=7"


def test_chat_completions_annotations(farm: Farm) -> None:
    urls = site(farm)
    text, anns = openai_text([(BOOK_SENTENCE, urls["book"], "Middlemarch")])
    completion = ChatCompletion.model_validate(chat_completion(text, anns))
    answer = parse_answer(completion)
    (c,) = answer.citations
    assert (c.origin, c.claim_index, c.normalized_url) == ("openai", 0, urls["book"])
    provider = read_provider(completion)
    assert provider is not None and provider.input_tokens == 9 and provider.output_tokens == 250


async def test_guard_checks_a_responses_answer_end_to_end(farm: Farm) -> None:
    urls = site(farm)
    async with guard(farm) as g:
        verdict = await g.check(_response(urls), question=QUESTION)
    assert verdict.axes["validity"].passed
    by_key = {c.normalized_url: c for c in verdict.citations}
    assert set(by_key) == {urls["book"], urls["library"]}
    assert all(c.status is CitationStatus.OK for c in verdict.citations)
    assert by_key[urls["book"]].claim_indices == [0]
    assert by_key[urls["library"]].claim_indices == [1]
    # the search the response reports returned these pages: nothing is "not retrieved"
    assert not [f for f in verdict.axes["validity"].findings if f.code == "not_retrieved"]
    # one fetch per page, without the tracking parameter
    assert farm.count("books.example.com", "/middlemarch") == 1


async def test_the_same_page_with_and_without_utm_is_one_source(farm: Farm) -> None:
    urls = site(farm)
    text, anns = openai_text(
        [
            (BOOK_SENTENCE, urls["book"], "Middlemarch"),
            ("It was first published in installments in 1871.", urls["book"], "Middlemarch"),
        ]
    )
    text += f"\n\nSee also [the book page]({urls['book']})."
    data = openai_response(text, anns, query="Middlemarch", sources=[urls["book"]])
    async with guard(farm) as g:
        verdict = await g.check(Response.model_validate(data), question=QUESTION)
    assert [c.normalized_url for c in verdict.citations] == [urls["book"]]
    assert verdict.axes["diversity"].details["distinct_domains"] == 1


async def test_guard_run_regenerates_after_an_openai_answer_cites_a_dead_page(farm: Farm) -> None:
    urls = site(farm)
    calls: list[frozenset[str]] = []

    async def agent(question: str, *, exclude_urls: frozenset[str]) -> Response:
        calls.append(exclude_urls)
        return _response(urls, first="dead" if len(calls) == 1 else "book")

    async with guard(farm) as g:
        result = await g.wrap(agent)(QUESTION)
    assert result.passed and len(result.attempts) == 2
    first = result.attempts[0].verdict
    dead = next(c for c in first.citations if c.normalized_url == urls["dead"])
    assert dead.status is CitationStatus.NOT_FOUND
    assert urls["dead"] + "?utm_source=openai" in calls[1]
    # the user gets the provider's text; the synthesis carries its usage
    assert result.answer.startswith(BOOK_SENTENCE)
    assert result.attempts[1].answer == result.answer


async def test_a_synthesis_is_still_accepted(farm: Farm) -> None:
    urls = site(farm)

    async def agent(question: str, *, exclude_urls: frozenset[str]) -> Synthesis:
        return Synthesis(text=f"{BOOK_SENTENCE} [1]\n\n[1] {urls['book']}", cost=0.01)

    async with guard(farm) as g:
        result = await g.wrap(agent)(QUESTION)
    assert result.passed


@pytest.mark.parametrize("bad", ["", "{not json", "[[[[", '{"output": 3}', '{"choices": []}'])
def test_odd_inputs_are_not_provider_responses(bad: str) -> None:
    assert read_provider(bad) is None
    parse_answer(bad)  # never raises


def test_citeguard_needs_no_sdk_at_run_time() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "for name in ('openai', 'anthropic', 'google.genai', 'exa_py', 'perplexity'):\n"
        "    sys.modules[name] = None  # importing it now raises ImportError\n"
        "import citeguard, citeguard.providers\n"
        "from citeguard import parse_answer\n"
        "a = parse_answer({'object': 'response', 'output': [{'type': 'message', 'content': "
        "[{'type': 'output_text', 'text': 'A [x](https://a.example/p).', 'annotations': "
        "[{'type': 'url_citation', 'start_index': 2, 'end_index': 26, 'url': "
        "'https://a.example/p', 'title': 'x'}]}]}]})\n"
        "assert a.citations[0].origin == 'openai', a\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

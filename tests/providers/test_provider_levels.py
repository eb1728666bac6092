"""Every level of a provider response a developer may hold is read: the whole response, its item
or choice, its message, its content part, as the SDK's own objects and as their dicts. Each level
that carries citation objects gives the citations the whole response gives; a level below the
citations (a Gemini content, a Perplexity message) gives its text and says what it lacks."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import Message
from conftest import Farm
from google.genai import types as genai
from openai.types.chat import ChatCompletion
from openai.types.responses import Response
from perplexity.types import StreamChunk
from provider_pages import (
    QUESTION,
    anthropic_message,
    chat_completion,
    gemini_response,
    guard,
    openai_response,
    openai_text,
    perplexity_completion,
    site,
)

from citeguard import Answer, CitationStatus, parse_answer

BOOK = "https://books.example.com/middlemarch"
LIBRARY = "https://library.example.org/eliot"
URLS = {"book": BOOK, "library": LIBRARY}
FIRST = "Middlemarch is a novel by George Eliot."
SECOND = "George Eliot was the pen name of Mary Ann Evans."


def _cites(answer: Answer) -> list[tuple[str | None, int | None, str | None]]:
    return [(c.normalized_url, c.claim_index, c.origin) for c in answer.citations]


def _both(obj: Any) -> list[Any]:
    """The SDK object and its dict form."""
    return [obj, obj.model_dump() if hasattr(obj, "model_dump") else [o.model_dump() for o in obj]]


# ---- OpenAI Responses -----------------------------------------------------------------------


def _openai_response(urls: dict[str, str] = URLS) -> Response:
    text, anns = openai_text([(FIRST, urls["book"], "M"), (SECOND, urls["library"], "E")])
    return Response.model_validate(openai_response(text, anns, query="q", sources=[]))


RESPONSE_LEVELS = {
    "response.output": lambda r: r.output,
    "output item (ResponseOutputMessage)": lambda r: r.output[1],
    "message.content": lambda r: r.output[1].content,
    "content part (ResponseOutputText)": lambda r: r.output[1].content[0],
}


@pytest.mark.parametrize("level", list(RESPONSE_LEVELS))
def test_each_level_of_a_responses_answer_gives_the_whole_responses_citations(level: str) -> None:
    response = _openai_response()
    whole = parse_answer(response)
    assert _cites(whole) == [(BOOK, 0, "openai"), (LIBRARY, 1, "openai")]
    for form in _both(RESPONSE_LEVELS[level](response)):
        part = parse_answer(form)
        assert not [f for f in part.findings if f.code == "invalid_input"]
        assert _cites(part) == _cites(whole), form
        assert [c.text for c in part.claims] == [c.text for c in whole.claims]
        assert [c.marker for c in part.citations] == [c.marker for c in whole.citations]


def test_a_content_part_of_a_later_part_keeps_its_own_offsets() -> None:
    """Annotations index into their own part's text: the part read alone is that text."""
    first, a1 = openai_text([(FIRST, BOOK, "M")])
    second, a2 = openai_text([(SECOND, LIBRARY, "E")])
    data = openai_response(first, a1, query="q", sources=[])
    data["output"][1]["content"].append({"type": "output_text", "text": second, "annotations": a2})
    response = Response.model_validate(data)
    assert _cites(parse_answer(response)) == [(BOOK, 0, "openai"), (LIBRARY, 1, "openai")]
    part = parse_answer(response.output[1].content[1])
    assert part.text == second
    assert _cites(part) == [(LIBRARY, 0, "openai")]


# ---- OpenAI Chat Completions ----------------------------------------------------------------


def _chat() -> ChatCompletion:
    text, anns = openai_text([(FIRST, BOOK, "M"), (SECOND, LIBRARY, "E")])
    return ChatCompletion.model_validate(chat_completion(text, anns))


CHAT_LEVELS = {
    "completion.choices": lambda c: c.choices,
    "choice": lambda c: c.choices[0],
    "message (ChatCompletionMessage)": lambda c: c.choices[0].message,
}


@pytest.mark.parametrize("level", list(CHAT_LEVELS))
def test_each_level_of_a_chat_completion_gives_its_annotations(level: str) -> None:
    completion = _chat()
    whole = parse_answer(completion)
    assert _cites(whole) == [(BOOK, 0, "openai"), (LIBRARY, 1, "openai")]
    for form in _both(CHAT_LEVELS[level](completion)):
        part = parse_answer(form)
        assert _cites(part) == _cites(whole), form
        assert not [f for f in part.findings if f.severity == "error"]


# ---- Anthropic ------------------------------------------------------------------------------


def test_anthropic_content_and_a_single_text_block_keep_their_citations() -> None:
    message = Message.model_validate(anthropic_message(URLS))
    whole = parse_answer(message)
    assert [(u, o) for u, _, o in _cites(whole)] == [(BOOK, "anthropic"), (LIBRARY, "anthropic")]
    for form in _both(message.content):
        assert _cites(parse_answer(form)) == _cites(whole)
    block = message.content[4]  # "Middlemarch is a novel by George Eliot", cited
    for form in (block, block.model_dump()):
        part = parse_answer(form)
        assert part.text == "Middlemarch is a novel by George Eliot"
        (c,) = part.citations
        assert (c.normalized_url, c.claim_index, c.origin) == (BOOK, 0, "anthropic")
        assert c.quote is not None and c.quote.startswith("Middlemarch is a novel")


# ---- Gemini ---------------------------------------------------------------------------------


def _gemini() -> genai.GenerateContentResponse:
    text = f"{FIRST} {SECOND}"
    data = gemini_response(
        text,
        [(FIRST, [0], [0.9]), (SECOND, [1], [0.8])],
        [(BOOK, "b"), (LIBRARY, "l")],
        queries=["q"],
    )
    return genai.GenerateContentResponse.model_validate(data)


def test_a_gemini_candidate_carries_its_grounding() -> None:
    response = _gemini()
    whole = parse_answer(response)
    assert _cites(whole) == [(BOOK, 0, "gemini"), (LIBRARY, 1, "gemini")]
    assert response.candidates is not None
    for level in (response.candidates, response.candidates[0]):
        for form in _both(level):
            assert _cites(parse_answer(form)) == _cites(whole)


def test_gemini_content_and_parts_are_read_as_their_text() -> None:
    response = _gemini()
    assert response.candidates is not None
    content = response.candidates[0].content
    assert content is not None and content.parts is not None
    for level in (content, content.parts, content.parts[0]):
        for form in _both(level):
            part = parse_answer(form)
            assert [c.text for c in part.claims] == [FIRST, SECOND]
            assert part.citations == []  # the grounding lives on the candidate
            assert not [f for f in part.findings if f.code == "invalid_input"]


# ---- Perplexity -----------------------------------------------------------------------------


def _perplexity() -> StreamChunk:
    text = "Middlemarch is by George Eliot [1]. Eliot was Mary Ann Evans [2]."
    data = perplexity_completion(text, [BOOK, LIBRARY], dates=["2024-01-01", "2024-02-01"])
    return StreamChunk.model_validate(data)


@pytest.mark.parametrize("level", ["choice", "message"])
def test_a_perplexity_message_alone_says_where_its_sources_are(level: str) -> None:
    completion = _perplexity()
    whole = parse_answer(completion)
    assert _cites(whole) == [(BOOK, 0, "perplexity"), (LIBRARY, 1, "perplexity")]
    obj = completion.choices[0] if level == "choice" else completion.choices[0].message
    for form in (obj, obj.model_dump()):
        part = parse_answer(form)
        assert len(part.claims) == 2 and part.citations == []
        (note,) = [f for f in part.findings if f.code == "sources_not_in_part"]
        assert "references=completion.citations" in note.message
        # with its sources passed beside it, the message reads as the completion does
        beside = parse_answer(form, references=completion.citations)
        assert [(u, ci) for u, ci, _ in _cites(beside)] == [(BOOK, 0), (LIBRARY, 1)]
        assert not [f for f in beside.findings if f.code == "sources_not_in_part"]


def test_structured_items_and_plain_dicts_are_not_taken_for_parts() -> None:
    items = [{"claim": FIRST, "url": BOOK, "text": "x"}]
    assert [c.kind for c in parse_answer(items).citations] == ["structured"]
    # a structured item that misnames its claim is reported as one, not read as prose
    misnamed = parse_answer([{"text": FIRST, "url": BOOK}])
    assert "structured_missing_field" in [f.code for f in misnamed.findings]
    assert parse_answer({"unrelated": 1}).findings[0].code == "invalid_input"


# ---- end to end -----------------------------------------------------------------------------


async def test_guard_checks_a_response_output_message_and_a_chat_message(farm: Farm) -> None:
    urls = site(farm)
    response = _openai_response(urls)
    text, anns = openai_text([(FIRST, urls["book"], "M"), (SECOND, urls["library"], "E")])
    chat = ChatCompletion.model_validate(chat_completion(text, anns))
    async with guard(farm) as g:
        for part in (response.output[1], chat.choices[0].message):
            verdict = await g.check(part, question=QUESTION)
            assert {c.normalized_url: c.status for c in verdict.citations} == {
                urls["book"]: CitationStatus.OK,
                urls["library"]: CitationStatus.OK,
            }
            assert verdict.axes["validity"].passed


# ---- Perplexity's Agent API (the Responses shape) -------------------------------------------


def _agent() -> Any:
    from perplexity.types import ResponseCreateResponse

    text = "Middlemarch is by George Eliot [1]. Eliot was Mary Ann Evans [2]."
    return ResponseCreateResponse.model_validate(
        {
            "id": "resp_1",
            "created_at": 1,
            "model": "openai/gpt-5.2",
            "object": "response",
            "status": "completed",
            "output": [
                {
                    "type": "search_results",
                    "queries": ["middlemarch author"],
                    "results": [
                        {"id": 2, "snippet": "Evans", "title": "Eliot", "url": LIBRARY},
                        {"id": 1, "snippet": "Novel", "title": "Middlemarch", "url": BOOK},
                    ],
                },
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                },
            ],
        }
    )


def test_a_perplexity_agent_response_numbers_its_markers_by_result_id() -> None:
    response = _agent()
    for level in (response, response.output):
        for form in _both(level):
            answer = parse_answer(form)
            assert _cites(answer) == [(BOOK, 0, "perplexity"), (LIBRARY, 1, "perplexity")]
            (search,) = answer.searches
            assert search.query == "middlemarch author"
            assert {r.url for r in search.results} == {BOOK, LIBRARY}
    message = parse_answer(response.output[1])
    assert message.citations == []
    assert "sources_not_in_part" in [f.code for f in message.findings]

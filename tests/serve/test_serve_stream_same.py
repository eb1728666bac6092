"""A streamed answer reads as the same answer not streamed (issue 53): the same text, the same
sources (the reference list's surviving entries) and the same verdict word and ending, for an
answer part of which fails (a sentence citing a 404: cut, with its reference entry, and the
removal note added) and for one that fails whole (the note alone). Streaming holds back what it
has not verified; it drops nothing that survived. Read with the real ``openai`` and
``anthropic`` SDKs against the service in front of a loopback upstream."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import anthropic
import openai
import pytest

from serve.servers import KEY, FakeUpstream, Pages, Service
from serve.streams import MESSAGES, chat_stream_ending, responses_stream

GOOD = "The Eiffel Tower is 330 metres tall and stands on the Champ de Mars in Paris [1]."
BAD = "It was painted gold in 2020 [2]."


class Seen(NamedTuple):
    """What a client got: the answer's text, the verdict word, how the answer ended."""

    text: str
    word: str
    ending: str | None


def _partly(pages: Pages) -> str:
    return f"{GOOD} {BAD}\n\n[1] {pages.url('/good')}\n[2] {pages.url('/dead')}\n"


def _wholly(pages: Pages) -> str:
    return f"The Eiffel Tower is 330 metres tall [1].\n\n[1] {pages.url('/dead')}\n"


def _openai(service: Service) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{service.url}/v1", api_key=KEY, max_retries=0, timeout=60)


def _anthropic(service: Service) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=service.url, api_key=KEY, max_retries=0, timeout=60)


def _chat(service: Service) -> Seen:
    raw = _openai(service).chat.completions.with_raw_response.create(
        model="m",
        messages=MESSAGES,  # type: ignore[arg-type]
    )
    completion = raw.parse()
    word = (completion.model_extra or {})["citeguard"]["verdict"]
    assert raw.headers["x-citeguard-verdict"] == word
    choice = completion.choices[0]
    return Seen(choice.message.content or "", word, choice.finish_reason)


def _chat_streamed(service: Service) -> Seen:
    text, verdict, finish = chat_stream_ending(_openai(service))
    return Seen(text, verdict["verdict"], finish)


def _responses(service: Service) -> Seen:
    response = _openai(service).responses.create(model="m", input="How tall?")
    word = (response.model_extra or {})["citeguard"]["verdict"]
    return Seen(response.output_text, word, response.status)


def _responses_streamed(service: Service) -> Seen:
    deltas, last = responses_stream(_openai(service))
    # the final response event repeats the text: what the deltas said
    assert last.response.output_text == deltas
    word = (last.model_extra or {})["citeguard"]["verdict"]
    return Seen(deltas, word, last.response.status)


def _messages(service: Service) -> Seen:
    message = _anthropic(service).messages.create(
        model="m",
        max_tokens=100,
        messages=MESSAGES,  # type: ignore[arg-type]
    )
    text = "".join(b.text for b in message.content if b.type == "text")
    word = (message.model_extra or {})["citeguard"]["verdict"]
    return Seen(text, word, message.stop_reason)


def _messages_streamed(service: Service) -> Seen:
    text, word, stop = "", "", None
    for event in _anthropic(service).messages.create(
        model="m",
        max_tokens=100,
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
    ):
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            text += event.delta.text
        if event.type == "message_delta":
            word = (event.model_extra or {})["citeguard"]["verdict"]
            stop = event.delta.stop_reason
    return Seen(text, word, stop)


READERS: dict[str, tuple[Callable[[Service], Seen], Callable[[Service], Seen]]] = {
    "chat": (_chat, _chat_streamed),
    "responses": (_responses, _responses_streamed),
    "messages": (_messages, _messages_streamed),
}


def _both(service: Service, upstream: FakeUpstream, answer: str, api: str) -> tuple[Seen, Seen]:
    plain, streamed = READERS[api]
    upstream.script(answer)
    once = plain(service)
    upstream.script(answer)
    return once, streamed(service)


@pytest.mark.parametrize("api", list(READERS))
def test_a_partly_failing_answer_keeps_its_sources_streamed(
    service: Service, upstream: FakeUpstream, pages: Pages, api: str
) -> None:
    once, streamed = _both(service, upstream, _partly(pages), api)
    # not streamed: the good sentence, its source, the note; the failing sentence and its
    # source gone
    assert once.text.startswith(GOOD), once
    assert f"[1] {pages.url('/good')}" in once.text
    assert "painted gold" not in once.text and "/dead" not in once.text
    assert "citeguard removed 1 claim(s)" in once.text
    assert once.word == "repaired"
    # streamed: the same
    assert streamed == once


@pytest.mark.parametrize("api", list(READERS))
def test_a_wholly_failing_answer_reads_the_same_streamed(
    service: Service, upstream: FakeUpstream, pages: Pages, api: str
) -> None:
    once, streamed = _both(service, upstream, _wholly(pages), api)
    assert "/dead" not in once.text and "330 metres" not in once.text
    assert once.word == "rejected"
    assert streamed == once


def test_the_verdict_object_says_what_was_cut_streamed(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    upstream.script(_partly(pages))
    shown: dict[str, Any] = chat_stream_ending(_openai(service))[1]
    assert shown["verdict"] == "repaired" and shown["ending"] == "content_filter"
    assert shown["removed_urls"] == [pages.url("/dead")]
    assert pages.url("/dead") in shown["offending_urls"]  # the verdict of what was cut

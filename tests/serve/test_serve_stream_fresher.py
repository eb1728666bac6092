"""``citeguard serve``'s streamed relay asks the upstream once for fresher sources (issue 45):
in hold mode, with nothing sent yet, an answer citing a page stale under an uncertain faster
regime is kept back unseen and the upstream asked once more (the stale page named, not banned);
the fresher answer goes if it passes with newer sources, else the kept one, passing, with the
warning. Once text can be out (annotate mode) it is the warning only. Read with the ``openai``
and ``anthropic`` SDKs' own stream readers; dated pages on 127.0.0.1 (serve.dated)."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from serve.dated import QUESTION, TEXT, DatedPages, answer_citing, day
from serve.servers import KEY, FakeUpstream, Service
from serve.streams import chat_stream, responses_stream

MESSAGES = [{"role": "user", "content": QUESTION}]


def _client(service: Service, **headers: str) -> openai.OpenAI:
    client = openai.OpenAI(base_url=f"{service.url}/v1", api_key=KEY, max_retries=0, timeout=60)
    return client.with_options(default_headers=headers) if headers else client


def _codes(verdict: dict[str, Any]) -> set[str]:
    return {f["code"] for f in verdict["axes"]["freshness"]["findings"]}


def test_a_held_stream_asks_once_and_relays_the_fresher_answer(
    fresh_service: Service, upstream_server: FakeUpstream, dated: DatedPages
) -> None:
    old, new = dated.url("/old"), dated.url("/new")
    upstream_server.script(answer_citing(old), answer_citing(new))
    text, verdict = chat_stream(_client(fresh_service), MESSAGES)
    assert text == answer_citing(new)  # the stale first answer never reached the client
    assert verdict["verdict"] == "passed" and verdict["attempts"] == 2
    assert "freshness.fresher_asked" not in _codes(verdict)
    assert len(upstream_server.requests) == 2
    retry = upstream_server.requests[1]["messages"]
    assert retry[:1] == MESSAGES and retry[-1]["role"] == "user"
    assert old in retry[-1]["content"] and day(90) in retry[-1]["content"]
    assert "Do not cite" not in retry[-1]["content"]  # the stale page is not banned


def test_without_a_fresher_source_the_held_answer_is_released_with_the_warning(
    fresh_service: Service, upstream_server: FakeUpstream, dated: DatedPages
) -> None:
    old = dated.url("/old")
    upstream_server.script(answer_citing(old))  # asked again, it cites the same page
    text, verdict = chat_stream(_client(fresh_service), MESSAGES)
    assert text == answer_citing(old)  # sent once, whole: the second attempt never went out
    assert verdict["verdict"] == "passed" and verdict["passed"] is True
    assert verdict["attempts"] == 2 and verdict["ending"] == "stop"
    assert {"freshness.regime_uncertain", "freshness.fresher_asked"} <= _codes(verdict)
    assert old in verdict["message"]
    assert len(upstream_server.requests) == 2


@pytest.mark.parametrize("failure", ["500", "close_mid"])
def test_a_failing_fresher_call_releases_the_held_answer_with_the_warning(
    fresh_service: Service, upstream_server: FakeUpstream, dated: DatedPages, failure: str
) -> None:
    old, new = dated.url("/old"), dated.url("/new")
    upstream_server.script(answer_citing(old), answer_citing(new))
    # the fresher call is refused (500), or its stream breaks off half way
    upstream_server.behaviour, upstream_server.behaviour_from = failure, 1
    text, verdict = chat_stream(_client(fresh_service), MESSAGES)
    assert text == answer_citing(old)  # nothing of the broken attempt reached the client
    assert verdict["verdict"] == "passed" and verdict["attempts"] == 2
    assert "freshness.fresher_asked" in _codes(verdict)
    assert len(upstream_server.requests) == 2


def test_a_held_responses_stream_asks_once_and_relays_the_fresher_answer(
    fresh_service: Service, upstream_server: FakeUpstream, dated: DatedPages
) -> None:
    old, new = dated.url("/old"), dated.url("/new")
    upstream_server.script(answer_citing(old), answer_citing(new))
    text, last = responses_stream(_client(fresh_service), QUESTION)
    assert text == answer_citing(new)
    assert last.type == "response.completed" and last.response.output_text == text
    verdict = (last.response.model_extra or {})["citeguard"]
    assert verdict["verdict"] == "passed" and verdict["attempts"] == 2
    assert len(upstream_server.requests) == 2
    assert old in str(upstream_server.requests[1]["input"][-1]["content"])


def test_annotate_mode_only_warns(
    fresh_service: Service, upstream_server: FakeUpstream, dated: DatedPages
) -> None:
    old, new = dated.url("/old"), dated.url("/new")
    upstream_server.script(answer_citing(old), answer_citing(new))
    client = _client(fresh_service, **{"x-citeguard-mode": "annotate"})
    text, verdict = chat_stream(client, MESSAGES)
    assert text == answer_citing(old)
    assert verdict["verdict"] == "passed" and verdict["attempts"] == 1
    assert "freshness.regime_uncertain" in _codes(verdict)
    assert "freshness.fresher_asked" not in _codes(verdict)
    assert len(upstream_server.requests) == 1


def test_ask_fresher_0_makes_no_extra_upstream_call(
    fresh_service: Service, upstream_server: FakeUpstream, dated: DatedPages
) -> None:
    old, new = dated.url("/old"), dated.url("/new")
    upstream_server.script(answer_citing(old), answer_citing(new))
    off = {"citeguard": {"policy": {"freshness": {"ask_fresher": 0}}}}
    text, verdict = chat_stream(_client(fresh_service), MESSAGES, extra_body=off)
    assert text == answer_citing(old)
    assert verdict["verdict"] == "passed" and verdict["attempts"] == 1
    assert "freshness.regime_uncertain" in _codes(verdict)
    assert len(upstream_server.requests) == 1


def test_an_anthropic_stream_asks_once_and_relays_the_fresher_citation(
    fresh_service: Service, upstream_server: FakeUpstream, dated: DatedPages
) -> None:
    old, new = dated.url("/old"), dated.url("/new")
    said = "Frobnicator 5.2 is the latest version."
    upstream_server.script(
        said,
        citations=[
            [{"url": old, "quote": TEXT, "title": "Frobnicator"}],
            [{"url": new, "quote": TEXT, "title": "Frobnicator"}],
        ],
    )
    client = anthropic.Anthropic(base_url=fresh_service.url, api_key=KEY, max_retries=0, timeout=60)
    text, cited, verdict = "", [], None
    for event in client.messages.create(
        model="m",
        max_tokens=100,
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
    ):
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            text += event.delta.text
        elif event.type == "content_block_delta" and event.delta.type == "citations_delta":
            cited.append(event.delta.citation.url)  # type: ignore[union-attr]
        elif event.type == "message_delta":
            verdict = (event.model_extra or {}).get("citeguard")
    assert text == said
    assert cited == [new]  # the stale citation never reached the client
    assert len(upstream_server.requests) == 2
    assert old in upstream_server.requests[1]["messages"][-1]["content"]
    assert verdict is not None and verdict["verdict"] == "passed" and verdict["attempts"] == 2


def test_once_text_is_out_a_held_stream_only_warns(
    fresh_service: Service, upstream_server: FakeUpstream, dated: DatedPages
) -> None:
    old, new = dated.url("/old"), dated.url("/new")
    first = f"The latest version of Frobnicator is 5.2 ({new}). "
    begun = "Its builds are faster; "  # ends where the relay hands the guard text
    answer = f"{first}{begun}see the notes ({old})."
    upstream_server.script(answer, answer_citing(new))
    # the upstream holds the rest of the stale-cited sentence back (once it has begun: the
    # first is complete) until the client has read the first one, released once verified:
    # by the verdict, text is out
    upstream_server.pause_before = 1 + len(FakeUpstream._pieces(first + begun))
    text, verdict = "", None
    stream = _client(fresh_service).chat.completions.create(
        model="m",
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
    )
    try:
        for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
            if text.startswith(first.rstrip()):
                upstream_server.resume()
            if (chunk.model_extra or {}).get("citeguard"):
                verdict = chunk.model_extra["citeguard"]  # type: ignore[index]
    finally:
        upstream_server.resume()
    assert text == answer
    assert verdict is not None
    assert verdict["verdict"] == "passed" and verdict["attempts"] == 1
    assert "freshness.regime_uncertain" in _codes(verdict)
    assert "freshness.fresher_asked" not in _codes(verdict)
    assert len(upstream_server.requests) == 1

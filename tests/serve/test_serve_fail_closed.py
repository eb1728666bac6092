"""A failing answer is never an ordinary success for a client that knows nothing of citeguard:
by default (``on_fail: strip``, the service's) the failing claims are cut and the answer ends as
the API ends what its own content filter cut (Chat ``finish_reason: "content_filter"``,
Responses ``status: "incomplete"`` / ``response.incomplete``, Anthropic ``stop_reason:
"refusal"``), streamed or not; ``on_fail: raise`` is an error each SDK raises, streamed too;
``on_fail: return`` is the old way, opted into. Read with the real ``openai`` and ``anthropic``
SDKs against the service in front of a loopback upstream."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import openai
import pytest

from citeguard.serve import Settings
from citeguard.serve.settings import load_policy
from serve.answers import AFTER, ANNOTATED, annotated, dead, good
from serve.servers import GOOD_TEXT, KEY, FakeUpstream, Pages, Service
from serve.streams import MESSAGES, chat_stream_ending, responses_stream

TEXT = "The Eiffel Tower is 330 metres tall."


def _openai(service: Service) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{service.url}/v1", api_key=KEY, max_retries=0, timeout=60)


def _anthropic(service: Service) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=service.url, api_key=KEY, max_retries=0, timeout=60)


def _cite(pages: Pages, path: str, quote: str) -> list[list[dict[str, str]]]:
    return [[{"url": pages.url(path), "quote": quote, "title": "t"}]]


def test_the_service_fails_closed_unless_the_policy_says_otherwise(tmp_path: Path) -> None:
    assert Settings().policy.on_fail == "strip"
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"max_attempts": 2}))
    assert load_policy(bare).on_fail == "strip"
    opted = tmp_path / "return.json"
    opted.write_text(json.dumps({"on_fail": "return"}))
    assert load_policy(opted).on_fail == "return"


# --------------------------------------------------------------------------------------------
# OpenAI Chat Completions
# --------------------------------------------------------------------------------------------


def test_chat_failing_answer_is_content_filtered(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    client = _openai(service)
    upstream.script(good(pages))
    passing = client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert passing.choices[0].finish_reason == "stop"
    assert passing.choices[0].message.content == good(pages)

    upstream.script(dead(pages))
    raw = client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert raw.headers["x-citeguard-verdict"] == "rejected"
    completion = raw.parse()
    assert completion.choices[0].finish_reason == "content_filter"
    assert "/dead" not in (completion.choices[0].message.content or "")
    shown = (completion.model_extra or {})["citeguard"]
    assert shown["verdict"] == "rejected" and shown["ending"] == "content_filter"
    assert pages.url("/dead") in shown["offending_urls"]
    # the SDK's parse helper raises on a filtered answer, as on OpenAI's own filter
    with pytest.raises(openai.ContentFilterFinishReasonError):
        client.chat.completions.parse(model="m", messages=MESSAGES)  # type: ignore[arg-type]


def test_chat_answer_stripped_into_a_pass_is_repaired_and_content_filtered(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    dead_claim = f"It was painted gold in 2020 ([source]({pages.url('/dead')}))."
    upstream.script(f"{good(pages)} {dead_claim}")
    raw = _openai(service).chat.completions.with_raw_response.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    completion = raw.parse()
    content = completion.choices[0].message.content or ""
    assert good(pages) in content and "painted gold" not in content and "/dead" not in content
    # what is left passes, but text was cut: the answer says so as a filter would
    assert raw.headers["x-citeguard-verdict"] == "repaired"
    assert completion.choices[0].finish_reason == "content_filter"
    shown = (completion.model_extra or {})["citeguard"]
    assert shown["removed_urls"] == [pages.url("/dead")]
    assert pages.url("/dead") in shown["offending_urls"]  # the verdict of what was cut


def test_chat_failing_annotation_cuts_its_claim(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    # the failing citation is an annotation (not in the text, so strip cannot remove it): the
    # text stops before the claim it cites, and the annotation goes
    text, cites = annotated(pages, "/dead")
    upstream.script(text, citations=cites)
    completion = _openai(service).chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    choice = completion.choices[0]
    assert choice.finish_reason == "content_filter"
    assert choice.message.content == good(pages)
    assert ANNOTATED not in (choice.message.content or "") and AFTER not in str(choice.message)
    assert all("/dead" not in a.url_citation.url for a in choice.message.annotations or [])


def test_chat_stream_failing_answer_ends_content_filtered(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    client = _openai(service)
    upstream.script(good(pages))
    text, verdict, finish = chat_stream_ending(client)
    assert (text, verdict["verdict"], finish) == (good(pages), "passed", "stop")

    text, cites = annotated(pages, "/dead")
    upstream.script(text, citations=cites)
    sent, verdict, finish = chat_stream_ending(client)
    assert sent.strip() == good(pages)
    assert verdict["verdict"] == "rejected" and finish == "content_filter"
    # the SDK's stream helper has no final completion to give: it raises
    upstream.script(text, citations=cites)
    with (
        client.chat.completions.stream(model="m", messages=MESSAGES) as stream,  # type: ignore[arg-type]
        pytest.raises(openai.ContentFilterFinishReasonError),
    ):
        stream.get_final_completion()


def test_chat_stream_whose_last_text_carries_the_finish_reason(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    # some providers send the last text and the finish reason in one chunk: the text is
    # released as the guard allows, the finish reason says how the answer ended
    client = _openai(service)
    upstream.script(good(pages))
    upstream.behaviour = "text_with_finish"
    assert chat_stream_ending(client)[::2] == (good(pages), "stop")
    upstream.script(dead(pages))
    upstream.behaviour = "text_with_finish"
    sent, verdict, finish = chat_stream_ending(client)
    assert "/dead" not in sent and verdict["verdict"] == "rejected"
    assert finish == "content_filter"


def test_chat_stream_annotate_mode_ends_content_filtered(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    text, cites = annotated(pages, "/dead")
    upstream.script(text, citations=cites)
    client = _openai(service).with_options(default_headers={"x-citeguard-mode": "annotate"})
    sent, verdict, finish = chat_stream_ending(client)
    assert sent == text  # annotate sends the text as it comes; its ending says it failed
    assert verdict["verdict"] == "rejected" and finish == "content_filter"


def test_on_fail_return_keeps_the_old_ending(
    returning_service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    client = _openai(returning_service)
    upstream.script(dead(pages))
    completion = client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert completion.choices[0].finish_reason == "stop"
    assert completion.choices[0].message.content == dead(pages)
    assert (completion.model_extra or {})["citeguard"]["verdict"] == "rejected"
    text, cites = annotated(pages, "/dead")
    upstream.script(text, citations=cites)
    _, verdict, finish = chat_stream_ending(client)
    assert verdict["verdict"] == "rejected" and finish == "stop"


def test_on_fail_raise_stream_is_an_error_the_sdks_raise(
    raising_service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    upstream.script(dead(pages))
    with pytest.raises(openai.APIError) as info:
        for _ in _openai(raising_service).chat.completions.create(
            model="m",
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
        ):
            pass
    assert "/dead" in info.value.message
    upstream.script(TEXT, citations=_cite(pages, "/dead", "330 metres tall"))
    with (
        pytest.raises(anthropic.APIStatusError) as err,
        _anthropic(raising_service).messages.stream(
            model="m",
            max_tokens=100,
            messages=MESSAGES,  # type: ignore[arg-type]
        ) as stream,
    ):
        for _ in stream:
            pass
    assert "citation_rejected" in str(err.value)


# --------------------------------------------------------------------------------------------
# OpenAI Responses
# --------------------------------------------------------------------------------------------


def test_responses_failing_answer_is_incomplete(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    client = _openai(service)
    upstream.script(good(pages))
    passing = client.responses.create(model="m", input="How tall?")
    assert passing.status == "completed" and passing.output_text == good(pages)

    upstream.script(dead(pages))
    response = client.responses.create(model="m", input="How tall?")
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "content_filter"
    assert "/dead" not in response.output_text
    assert (response.model_extra or {})["citeguard"]["verdict"] == "rejected"


def test_responses_stream_failing_answer_ends_incomplete(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    client = _openai(service)
    upstream.script(good(pages))
    sent, last = responses_stream(client)
    assert (sent, last.type, last.response.status) == (
        good(pages),
        "response.completed",
        "completed",
    )

    text, cites = annotated(pages, "/dead")
    upstream.script(text, citations=cites)
    sent, last = responses_stream(client)
    assert sent.strip() == good(pages)
    assert last.type == "response.incomplete" and last.response.status == "incomplete"
    assert last.response.incomplete_details.reason == "content_filter"
    # the SDK's helper has no final response to give: it raises
    upstream.script(text, citations=cites)
    with (
        pytest.raises(RuntimeError, match=r"response\.completed"),
        client.responses.stream(model="m", input="How tall?") as stream,
    ):
        stream.get_final_response()


# --------------------------------------------------------------------------------------------
# Anthropic Messages
# --------------------------------------------------------------------------------------------


def test_messages_failing_answer_is_a_refusal(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    client = _anthropic(service)
    upstream.script(TEXT, citations=_cite(pages, "/good", GOOD_TEXT.split(". ")[0]))
    passing = client.messages.create(model="m", max_tokens=100, messages=MESSAGES)  # type: ignore[arg-type]
    assert passing.stop_reason == "end_turn"

    upstream.script(TEXT, citations=_cite(pages, "/dead", "330 metres tall"))
    message = client.messages.create(model="m", max_tokens=100, messages=MESSAGES)  # type: ignore[arg-type]
    assert message.stop_reason == "refusal"
    # the one claim cited the dead page: nothing is left, and no empty text block (the API
    # refuses one when the client sends the conversation back)
    assert message.content == []
    assert (message.model_extra or {})["citeguard"]["verdict"] == "rejected"


def test_messages_stream_failing_answer_is_a_refusal(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    client = _anthropic(service)
    upstream.script(TEXT, citations=_cite(pages, "/good", GOOD_TEXT.split(". ")[0]))
    with client.messages.stream(model="m", max_tokens=100, messages=MESSAGES) as stream:  # type: ignore[arg-type]
        assert stream.get_final_message().stop_reason == "end_turn"

    upstream.script(TEXT, citations=_cite(pages, "/dead", "330 metres tall"))
    with client.messages.stream(model="m", max_tokens=100, messages=MESSAGES) as stream:  # type: ignore[arg-type]
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == ""
    assert final.stop_reason == "refusal"

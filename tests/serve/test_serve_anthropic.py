"""/v1/messages through the ``anthropic`` SDK: web search result citations (``cited_text`` is
the quote looked for on the page), non-streaming and streamed as ``citations_delta``."""

from __future__ import annotations

import anthropic
import pytest

from serve.servers import GOOD_TEXT, KEY, FakeUpstream, Pages, Service

TEXT = "The Eiffel Tower is 330 metres tall."
QUESTION = [{"role": "user", "content": "How tall is the Eiffel Tower?"}]


def _client(service: Service) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=service.url, api_key=KEY, max_retries=0, timeout=60)


def _cite(pages: Pages, path: str, quote: str) -> list[dict[str, str]]:
    return [{"url": pages.url(path), "quote": quote, "title": "t"}]


def test_messages_with_a_true_quote_pass(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    upstream.script(TEXT, citations=[_cite(pages, "/good", GOOD_TEXT.split(". ")[0])])
    raw = _client(service).messages.with_raw_response.create(
        model="m",
        max_tokens=100,
        messages=QUESTION,  # type: ignore[arg-type]
    )
    assert raw.headers["x-citeguard-verdict"] == "passed"
    message = raw.parse()
    assert message.content[0].text == TEXT  # type: ignore[union-attr]
    assert (message.model_extra or {})["citeguard"]["citations"][0]["status"] == "ok"
    # the client's own upstream key, in x-upstream-api-key, goes upstream as Anthropic's header
    client = _client(service).with_options(default_headers={"x-upstream-api-key": "sk-ant-1"})
    client.messages.create(model="m", max_tokens=100, messages=QUESTION)  # type: ignore[arg-type]
    assert upstream.headers[-1]["x-api-key"] == "sk-ant-1"
    assert "Authorization" not in upstream.headers[-1]


def test_messages_misquote_is_regenerated(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    upstream.script(
        TEXT,
        citations=[
            _cite(pages, "/good", "The Eiffel Tower is 500 metres tall and stands in London"),
            _cite(pages, "/mirror", GOOD_TEXT.split(". ")[0]),
        ],
    )
    raw = _client(service).messages.with_raw_response.create(
        model="m",
        max_tokens=100,
        messages=QUESTION,  # type: ignore[arg-type]
    )
    assert raw.headers["x-citeguard-attempts"] == "2"
    assert raw.headers["x-citeguard-verdict"] == "passed"
    retry = upstream.requests[1]["messages"][-1]
    assert retry["role"] == "user" and pages.url("/good") in retry["content"]


def test_stream_hold_keeps_back_text_of_a_failed_citation(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    upstream.script(TEXT, citations=[_cite(pages, "/dead", "330 metres tall")])
    with _client(service).messages.stream(model="m", max_tokens=100, messages=QUESTION) as stream:  # type: ignore[arg-type]
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == ""
    assert final.content[0].text == ""  # type: ignore[union-attr]


def test_stream_good_citation_and_verdict(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    upstream.script(TEXT, citations=[_cite(pages, "/good", GOOD_TEXT.split(". ")[0])])
    client = _client(service)
    verdict = None
    text = ""
    for event in client.messages.create(model="m", max_tokens=100, messages=QUESTION, stream=True):  # type: ignore[arg-type]
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            text += event.delta.text
        if event.type == "message_delta":
            verdict = (event.model_extra or {}).get("citeguard")
    assert text == TEXT
    assert verdict is not None and verdict["verdict"] == "passed"


def test_anthropic_errors_in_anthropic_shape(service: Service, upstream: FakeUpstream) -> None:
    with pytest.raises(anthropic.AuthenticationError) as e:
        anthropic.Anthropic(base_url=service.url, api_key="wrong", max_retries=0).messages.create(
            model="m",
            max_tokens=10,
            messages=QUESTION,  # type: ignore[arg-type]
        )
    body = e.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "authentication_error"

"""Reading a guarded stream with the ``openai`` SDK's own stream readers."""

from __future__ import annotations

from typing import Any

import openai

MESSAGES = [{"role": "user", "content": "How tall is the Eiffel Tower?"}]


def chat_stream_ending(
    client: openai.OpenAI, messages: list[dict[str, str]] = MESSAGES, **kw: Any
) -> tuple[str, dict[str, Any], str | None]:
    """The text the client received, the ``citeguard`` verdict of the last chunk, and the
    stream's finish reason as the SDK reads it."""
    text, verdict, finish = "", None, None
    for chunk in client.chat.completions.create(model="m", messages=messages, stream=True, **kw):  # type: ignore[arg-type]
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
        if (chunk.model_extra or {}).get("citeguard"):
            verdict = chunk.model_extra["citeguard"]  # type: ignore[index]
    assert verdict is not None
    return text, verdict, finish


def chat_stream(
    client: openai.OpenAI, messages: list[dict[str, str]] = MESSAGES, **kw: Any
) -> tuple[str, dict[str, Any]]:
    """The text the client received and the ``citeguard`` verdict of the last chunk
    (``kw``: more of the request, e.g. ``extra_body``)."""
    text, verdict, _ = chat_stream_ending(client, messages, **kw)
    return text, verdict


def responses_stream(
    client: openai.OpenAI, question: str = "How tall?", **kw: Any
) -> tuple[str, Any]:
    """The text deltas a Responses stream sent, and its last event (``response.completed``,
    or ``response.incomplete`` for an answer that failed closed), read with the SDK's
    ``responses.stream`` helper."""
    with client.responses.stream(model="m", input=question, **kw) as stream:
        deltas, last = [], None
        for e in stream:
            if e.type == "response.output_text.delta":
                deltas.append(e.delta)
            elif e.type in ("response.completed", "response.incomplete"):
                last = e
    assert last is not None
    return "".join(deltas), last

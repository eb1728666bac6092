"""Reading a guarded Chat Completions stream with the ``openai`` SDK's own stream reader."""

from __future__ import annotations

from typing import Any

import openai

MESSAGES = [{"role": "user", "content": "How tall is the Eiffel Tower?"}]


def chat_stream(client: openai.OpenAI) -> tuple[str, dict[str, Any]]:
    """The text the client received and the ``citeguard`` verdict of the last chunk."""
    text, verdict = "", None
    for chunk in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):  # type: ignore[arg-type]
        for choice in chunk.choices:
            text += choice.delta.content or ""
        if (chunk.model_extra or {}).get("citeguard"):
            verdict = chunk.model_extra["citeguard"]  # type: ignore[index]
    assert verdict is not None
    return text, verdict

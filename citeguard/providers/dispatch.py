"""Which provider wrote a response: one function that reads any of them.

:func:`read_provider` takes an SDK response object, its ``dict`` form, or its JSON text, and
returns a :class:`~citeguard.providers.base.ProviderAnswer`, or ``None`` when the value is no
provider response it knows (plain text and structured items are the parser's own input).
Recognised, in this order: a ``ProviderAnswer`` as it is; OpenAI Responses (``output``);
Perplexity (``choices`` with ``citations`` / ``search_results``); OpenAI Chat Completions
(``choices``); Anthropic Messages (``content`` blocks, or the block list alone); Gemini
(``candidates``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from citeguard.providers import anthropic, gemini, openai, perplexity
from citeguard.providers.base import ProviderAnswer, as_data, looks_like_json

__all__ = ["is_provider_response", "read_provider"]


def read_provider(
    obj: Any, *, documents: Mapping[int | str, str] | None = None
) -> ProviderAnswer | None:
    """``obj`` read as a provider response, or None when it is none (see the module docstring).

    ``documents`` maps the documents an Anthropic response cites (by ``document_index``,
    ``document_title`` or a search result's ``source``) to URLs. Never raises on odd input:
    a value no adapter can read gives None.
    """
    if isinstance(obj, ProviderAnswer):
        return obj
    if isinstance(obj, str) and not looks_like_json(obj):
        return None  # answer text: the common case, decided without parsing
    try:
        data = as_data(obj)
        if isinstance(data, Sequence) and not isinstance(data, str | bytes):
            return (
                anthropic.read_message(list(data), documents=documents)
                if (anthropic.is_content_blocks(data))
                else None
            )
        if not isinstance(data, Mapping):
            return None
        if openai.is_response(data):
            return openai.read_response(data)
        if perplexity.is_chat_completion(data):
            return perplexity.read_chat_completion(data)
        if openai.is_chat_completion(data):
            return openai.read_chat_completion(data)
        if anthropic.is_message(data):
            return anthropic.read_message(data, documents=documents)
        if gemini.is_generate_content_response(data):
            return gemini.read_response(data)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError):
        return None
    return None


def is_provider_response(obj: Any) -> bool:
    """Whether :func:`read_provider` reads ``obj`` as a provider response."""
    return read_provider(obj) is not None

"""Which provider wrote a response: one function that reads any of them.

:func:`read_provider` takes an SDK response object, its ``dict`` form, or its JSON text, and
returns a :class:`~citeguard.providers.base.ProviderAnswer`, or ``None`` when the value is no
provider response it knows (plain text and structured items are the parser's own input).
Recognised, in this order: a ``ProviderAnswer`` as it is; Perplexity's Agent API (``output``
with ``search_results`` items); OpenAI Responses (``output``);
Perplexity (``choices`` with ``citations`` / ``search_results``); OpenAI Chat Completions
(``choices``); Anthropic Messages (``content`` blocks, or the block list alone); Gemini
(``candidates``).

Developers often hold a part of a response rather than the whole, so every level that still
carries the text is read too (:func:`_whole` lifts it to the whole response's shape):

==============  ================================================================================
provider        levels read besides the whole response
==============  ================================================================================
OpenAI          Responses: ``response.output`` (the item list), an output item of type
                ``message``, ``message.content`` and one ``output_text`` part (its
                ``url_citation`` annotations are relative to that part's text). Chat
                Completions: ``completion.choices``, a choice, ``choice.message``
Anthropic       ``message.content`` and a single ``text`` block with its ``citations``
Gemini          ``response.candidates``, a candidate (its ``grounding_metadata`` is on it),
                ``candidate.content``, ``content.parts`` and one part (no grounding below the
                candidate: the text alone)
Perplexity      chat: a choice or ``choice.message``; Agent API: ``response.output``, a
                ``message`` item, its content. The ``[n]`` markers' sources live beside the
                message (``citations``, ``search_results`` items), so a message read alone
                says so in a ``sources_not_in_part`` warning; pass the whole response, or
                ``references=completion.citations``
==============  ================================================================================
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from citeguard.models import Finding, Severity
from citeguard.providers import anthropic, gemini, openai, perplexity
from citeguard.providers.base import ProviderAnswer, as_data, looks_like_json, pick
from citeguard.search import plain

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
        data, part = _whole(as_data(obj))
        answer = _read(data, documents)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError):
        return None
    if answer is not None and part is not None:
        answer = _note_part(answer, part)
    return answer


def _read(data: Any, documents: Mapping[int | str, str] | None) -> ProviderAnswer | None:
    """A whole response (plain data) read by its adapter, or None."""
    if isinstance(data, Sequence) and not isinstance(data, str | bytes):
        if anthropic.is_content_blocks(data):
            return anthropic.read_message(list(data), documents=documents)
        return None
    if not isinstance(data, Mapping):
        return None
    if perplexity.is_agent_response(data):
        return perplexity.read_agent_response(data)
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
    return None


# ---- parts of a response --------------------------------------------------------------------


def _typed(d: Any, *kinds: str) -> bool:
    return isinstance(d, Mapping) and pick(d, "type") in kinds


def _is_output_message(d: Any) -> bool:
    """An OpenAI Responses output item of type ``message`` (``output_text`` parts)."""
    content = pick(d, "content") if _typed(d, "message") else None
    return isinstance(content, list) and any(
        _typed(p, "output_text", "refusal") for p in map(plain, content)
    )


def _is_output_text(d: Any) -> bool:
    return _typed(d, "output_text") and isinstance(pick(d, "text"), str)


def _is_choice(d: Any) -> bool:
    """A Chat Completions choice (``completion.choices[0]``)."""
    return (
        isinstance(d, Mapping)
        and isinstance(pick(d, "message"), Mapping)
        and ("finish_reason" in d or "index" in d)
    )


def _is_chat_message(d: Any) -> bool:
    """An assistant's chat message (``choice.message``): string content, or annotations."""
    return (
        isinstance(d, Mapping)
        and d.get("role") == "assistant"
        and (isinstance(d.get("content"), str) or isinstance(d.get("annotations"), list))
    )


def _is_candidate(d: Any) -> bool:
    """A Gemini candidate: its content's parts, or its grounding metadata."""
    if not isinstance(d, Mapping) or "candidates" in d:
        return False
    return isinstance(pick(pick(d, "content"), "parts"), list) or isinstance(
        pick(d, "grounding_metadata"), Mapping
    )


def _is_gemini_content(d: Any) -> bool:
    return isinstance(d, Mapping) and isinstance(pick(d, "parts"), list) and "candidates" not in d


def _is_gemini_part(d: Any) -> bool:
    """A Gemini part (untyped, with text); structured items (``claim``, ``url``) are not."""
    return (
        isinstance(d, Mapping)
        and isinstance(d.get("text"), str)
        and d.get("type") is None
        and "claim" not in d
        and "url" not in d
    )


def _response_of(items: list[Any]) -> dict[str, Any]:
    return {"object": "response", "output": items}


def _whole(data: Any) -> tuple[Any, str | None]:
    """A part of a response lifted to the shape of the whole response its adapter reads, and
    the name of the level when it is a message or part of one (whose sources may live on the
    whole response); anything else unchanged."""
    if isinstance(data, Mapping):
        if _is_output_message(data):
            return _response_of([data]), "output item"
        if _is_output_text(data):
            return _response_of([{"type": "message", "content": [data]}]), "content part"
        if "choices" not in data and _is_choice(data):
            return {"choices": [data]}, "choice"
        if "choices" not in data and _is_chat_message(data):
            return {"choices": [{"message": data}]}, "message"
        if _typed(data, "text") and isinstance(pick(data, "text"), str):
            return [data], None  # an Anthropic text block (its citations with it)
        if _is_candidate(data):
            return {"candidates": [data]}, None
        if _is_gemini_content(data):
            return {"candidates": [{"content": data}]}, None
        if _is_gemini_part(data):
            return {"candidates": [{"content": {"parts": [data]}}]}, None
        return data, None
    if not isinstance(data, list) or not data or not isinstance(plain(data[0]), Mapping):
        return data, None
    items = [plain(i) for i in data]
    if not all(isinstance(i, Mapping) for i in items):
        return data, None
    if all(isinstance(pick(i, "type"), str) for i in items):
        if any(_is_output_message(i) or _typed(i, "web_search_call") for i in items):
            return _response_of(items), None  # response.output
        if any(_is_output_text(i) for i in items):
            return _response_of([{"type": "message", "content": items}]), "content list"
        return items, None
    if all(_is_choice(i) for i in items):
        return {"choices": items}, "choice"
    if all(_is_candidate(i) for i in items):
        return {"candidates": items}, None
    if all(_is_gemini_part(i) for i in items):
        return {"candidates": [{"content": {"parts": items}}]}, None
    return data, None


_NUMBERED = re.compile(r"\[\d{1,3}\]")


def _note_part(answer: ProviderAnswer, level: str) -> ProviderAnswer:
    """A message or part of one read alone: when its text cites ``[n]`` sources it does not
    carry (Perplexity keeps them beside the message), a warning that says where they are."""
    if answer.citations or answer.references or _NUMBERED.search(answer.text) is None:
        return answer
    note = Finding(
        code="sources_not_in_part",
        message=(
            f"the {level} was read on its own: its [n] markers cite sources the whole response "
            "carries beside it (Perplexity's citations or search results); pass the whole "
            "response, or its sources as references= (references=completion.citations)"
        ),
        severity=Severity.WARNING,
        axis="validity",
        details={"level": level},
    )
    return dataclasses.replace(answer, findings=(*answer.findings, note))


def is_provider_response(obj: Any) -> bool:
    """Whether :func:`read_provider` reads ``obj`` as a provider response."""
    return read_provider(obj) is not None

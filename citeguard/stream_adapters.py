"""Streaming LLM output → text chunks, for :meth:`citeguard.Guard.stream`.

:func:`text_of` reads the text one streaming event adds, whatever produced it; :func:`text_chunks`
turns a whole stream into an async iterator of non-empty text chunks. No SDK is imported: the SDK
objects are read by their fields, and each one's ``dict`` form (``event.model_dump()``, or JSON
from the wire) is read the same way.

==========================================  ======================================================
event                                       text it adds
==========================================  ======================================================
``str``                                     itself
OpenAI Chat Completions                     ``choices[0].delta.content`` (``ChatCompletionChunk``,
``object="chat.completion.chunk"``          ``create(stream=True)``); other choices are not read
OpenAI ``chat.completions.stream()``        ``type="content.delta"``: ``delta`` (its
helper events                               ``type="chunk"`` events repeat the same text: skipped)
OpenAI Responses API                        ``type="response.output_text.delta"``: ``delta``
Anthropic Messages                          ``type="content_block_delta"`` with a ``text_delta``:
                                            ``delta.text`` (the ``messages.stream()`` helper's
                                            ``type="text"`` events repeat it: skipped)
LangChain ``astream``                       ``AIMessageChunk.content``: a string, or content
                                            blocks whose ``type`` is ``"text"``
LangChain ``astream_events``                ``event="on_chat_model_stream"``: ``data.chunk``
==========================================  ======================================================

Every other event of those families (role deltas, tool-call deltas, refusals, ``message_start``,
``response.completed``, usage, annotation events, ...) adds no text (``""``). An object of no
known kind is a :class:`~citeguard.errors.UsageError`: a stream that silently yields nothing
would pass an empty answer to the guard.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any

from citeguard.errors import UsageError

__all__ = ["ChunkSource", "text_chunks", "text_of"]

#: what :func:`text_chunks` and ``Guard.stream`` accept: an (async) iterable of text chunks or
#: of streaming events of the kinds above
ChunkSource = AsyncIterable[Any] | Iterable[Any]

_MISSING = object()

# event types of the known families that carry no answer text
_SILENT_TYPES = frozenset(
    {
        # OpenAI chat.completions.stream() helper
        "chunk",
        "content.done",
        "refusal.delta",
        "refusal.done",
        "tool_calls.function.arguments.delta",
        "tool_calls.function.arguments.done",
        "logprobs.content.delta",
        "logprobs.content.done",
        "logprobs.refusal.delta",
        "logprobs.refusal.done",
        # Anthropic messages.stream() helper
        "text",
        "citation",
        "thinking",
        "signature",
        "input_json",
        # Anthropic raw events
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_stop",
        "ping",
        "error",
    }
)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for a mapping, ``obj.name`` otherwise."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _blocks_text(content: Any) -> str:
    """LangChain message content: a string, or a list of strings and ``{"type": "text"}``
    blocks (Anthropic-style content through LangChain)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes | bytearray):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif _get(block, "type") == "text":
                parts.append(_as_text(_get(block, "text")))
        return "".join(parts)
    return ""


def _chat_chunk_text(event: Any) -> str:
    choices = _get(event, "choices") or ()
    for choice in choices:
        if (_get(choice, "index", 0) or 0) != 0:
            continue
        delta = _get(choice, "delta")
        return _as_text(_get(delta, "content")) if delta is not None else ""
    return ""


def text_of(event: Any) -> str:
    """The answer text one streaming event adds (``""`` for events that add none).

    Raises :class:`~citeguard.errors.UsageError` for an object of no known kind.
    """
    if isinstance(event, str):
        return event
    if event is None:
        return ""
    if _get(event, "object") == "chat.completion.chunk":
        return _chat_chunk_text(event)
    kind = _get(event, "type")
    if isinstance(kind, str):
        if kind == "response.output_text.delta" or kind == "content.delta":
            return _as_text(_get(event, "delta"))
        if kind == "content_block_delta":
            delta = _get(event, "delta")
            return _as_text(_get(delta, "text")) if _get(delta, "type") == "text_delta" else ""
        if kind in ("AIMessageChunk", "ai", "AIMessage"):
            return _blocks_text(_get(event, "content"))
        if kind.startswith("response.") or kind in _SILENT_TYPES:
            return ""
    name = event.get("event") if isinstance(event, Mapping) else None
    if isinstance(name, str) and name.startswith("on_"):  # LangChain astream_events
        if name == "on_chat_model_stream":
            return text_of(_get(event.get("data") or {}, "chunk"))
        return ""
    if _get(event, "choices", _MISSING) is not _MISSING:
        return _chat_chunk_text(event)  # a chunk whose "object" field was dropped
    raise UsageError(
        f"cannot read answer text from a {type(event).__name__} streaming event: pass text "
        "chunks, OpenAI, Anthropic or LangChain streaming events, or their dict forms"
    )


async def text_chunks(source: ChunkSource) -> AsyncIterator[str]:
    """The non-empty text chunks of ``source``: an async iterable (``AsyncOpenAI`` /
    ``AsyncAnthropic`` streams, ``runnable.astream(...)``) or an iterable of text or events.
    A plain iterable that is not a list or tuple (a synchronous SDK stream, which blocks on
    the network) is read in a worker thread."""
    if isinstance(source, AsyncIterable):
        async for event in source:
            text = text_of(event)
            if text:
                yield text
        return
    if isinstance(source, str | bytes | bytearray):
        raise UsageError("pass an iterable of chunks, not one string (wrap it in a list)")
    if not isinstance(source, Iterable):
        raise UsageError(
            f"a stream must be an iterable or async iterable, not {type(source).__name__}"
        )
    if isinstance(source, list | tuple):
        for event in source:
            text = text_of(event)
            if text:
                yield text
        return
    iterator: Iterator[Any] = iter(source)
    while True:
        event = await asyncio.to_thread(next, iterator, _MISSING)
        if event is _MISSING:
            return
        text = text_of(event)
        if text:
            yield text

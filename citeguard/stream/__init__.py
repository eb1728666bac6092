"""Verify an answer while it streams: :meth:`Guard.stream` and :meth:`Guard.stream_run`.

Waiting for the last token before fetching puts the whole verification after the answer. Here
the work starts as the text arrives:

* **URLs**: the text received so far is parsed (by :func:`~citeguard.parse.parse_answer`, the
  parser ``check()`` uses) up to its last whitespace, ``)`` or ``>``, so every URL in that
  prefix is complete. Each new URL is fetched at once through the Guard's own fetcher, and its
  page extracted through the Guard's own extract stage (and its host probed for a catch-all
  page when it is short), so the result lands in the fetcher's TTL cache and the stage's page
  LRU.
* **Sentences**: a claim is complete when another claim has begun after it, every marker in it
  is resolved (``[2]`` has its reference line), no bracket in it may still become a citation
  and no quote opened on the current line may still swallow it. Its citations are then
  verified on their own (resolution, passage, entailment: :func:`check_validity` on a one-claim
  answer, sharing the Guard's entailment score cache), which gives the ``citation`` events and
  decides ``hold`` mode.
* **The verdict**: when the stream ends, ``guard.check(full_text)`` runs as usual. It finds
  every page already fetched and extracted and every entailment already scored, so it returns
  quickly, and its verdict is the ``check()`` verdict by construction (timings aside).

Modes: ``hold`` releases a sentence (with the text between it and the previous one) only once
its citations pass, in order; the first failing sentence and everything after it are held back
for good (``held`` events), and the text after the last sentence (a reference list) is released
only when the verdict passes. ``annotate`` releases every chunk as it arrives; the statuses
follow as ``citation`` events. In both modes released plus held text is the whole answer.

``late_citations=True`` (``hold`` only): the stream's citation objects may arrive *after* the
text they cite (OpenAI ``url_citation`` annotations: a chat delta's ``annotations``, Responses
``response.output_text.annotation.added`` events), so a sentence that cites nothing inline may
yet turn out to be cited. Such a sentence is then not released when it completes: it is held
pending (not failed) until the stream ends, and the sentences after it wait (release stays in
order); at the end the verdict decides it, as for a sentence whose early work could not decide.
A sentence with inline citations is still released once they pass. The verdict is
``check()`` on the text; whoever holds the citation objects checks them too (``citeguard
serve`` checks the whole response and releases no further than its first failing claim).

A ``citeguard.stream`` span (GUARDRAIL) covers the stream; the ``citeguard.check`` span of the
final verdict is its child. Its events mark each URL completed and fetched and each sentence
completed, released (with how long it was held) or held; its attributes sum up (held
sentences, hold ms, the time from the last chunk to the verdict).

On failure, :func:`stream_run` behaves as ``Guard.wrap``/``Guard.run``: it *is* ``Guard.run``,
with an answer function that streams each attempt through :func:`stream_answer` (so exclusions,
feedback, budgets and every ``on_fail`` strategy are the loop's own). ``guard.stream`` on its
own never regenerates: its final ``verdict`` event carries ``passed=False`` and the feedback to
hand a regenerated attempt.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import (
    AsyncIterable,
    Awaitable,
    Callable,
    Iterable,
    Sequence,
)
from contextlib import suppress
from typing import Any

from citeguard.errors import UsageError
from citeguard.feedback import Feedback
from citeguard.models import (
    SearchRecord,
)
from citeguard.stream.events import (
    _MODES,
    EventStream,
    StreamAnswerFn,
    StreamAttempt,
    StreamCitation,
    StreamEvent,
    StreamHeld,
    StreamMode,
    StreamResult,
    StreamText,
    StreamVerdict,
)
from citeguard.stream.sentences import _complete_prefix as _complete_prefix
from citeguard.stream.sentences import _units as _units
from citeguard.stream.session import _GuardParts, _Session
from citeguard.stream_adapters import ChunkSource

__all__ = [
    "ChunkSource",
    "EventStream",
    "StreamAnswerFn",
    "StreamAttempt",
    "StreamCitation",
    "StreamEvent",
    "StreamHeld",
    "StreamMode",
    "StreamResult",
    "StreamText",
    "StreamVerdict",
    "stream_answer",
    "stream_run",
]


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


def stream_answer(
    guard: _GuardParts,
    chunks: ChunkSource,
    *,
    question: str = "",
    mode: StreamMode = "hold",
    searches: Sequence[SearchRecord] | None = None,
    exclude_urls: frozenset[str] | set[str] = frozenset(),
    late_citations: bool = False,
    fresher: bool = False,
) -> EventStream:
    """Verify the answer ``chunks`` stream while it streams; yields :data:`StreamEvent` values
    ending with one :class:`StreamVerdict` (see the module docstring). ``chunks``: text chunks
    or provider streaming events (:mod:`citeguard.stream_adapters`). ``late_citations``: the
    stream's citation objects may come after their text; ``hold`` then keeps a sentence that
    cites nothing inline pending until the verdict (see the module docstring). ``fresher``
    (``hold``, set by :func:`stream_run` when the run may still ask for fresher sources): a
    sentence citing a source stale under an uncertain faster regime is not released; when the
    verdict passes and the freshness axis asks for fresher sources
    (:func:`~citeguard.checks.freshness_ask.fresher_ask`), it and the rest stay ``pending``."""
    _check_mode(mode)
    if isinstance(chunks, str | bytes) or not isinstance(chunks, AsyncIterable | Iterable):
        raise UsageError(
            f"stream() takes an (async) iterable of chunks, not {type(chunks).__name__}"
        )
    session = _Session(
        guard,
        question=question,
        mode=mode,
        searches=None if searches is None else list(searches),
        exclude_urls=frozenset(exclude_urls),
        late_citations=late_citations,
        fresher=fresher,
    )
    return _events(session, chunks)


def stream_run(
    guard: _GuardParts,
    answer_stream_fn: StreamAnswerFn,
    question: str,
    *,
    mode: StreamMode = "hold",
    late_citations: bool = False,
    **kwargs: Any,
) -> EventStream:
    """``Guard.run`` with a streaming answer function: each attempt's events (after a
    :class:`StreamAttempt`), then one :class:`StreamResult`. Regeneration, exclusions,
    feedback, budgets and ``on_fail`` are the loop's (``on_fail="raise"`` raises
    ``CitationRejected`` after the last event). ``late_citations``: as :func:`stream_answer`
    takes it, for every attempt."""
    _check_mode(mode)
    return _run_events(guard, answer_stream_fn, question, mode, late_citations, kwargs)


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise UsageError(f"mode must be 'hold' or 'annotate', not {mode!r}")


async def _events(session: _Session, chunks: ChunkSource) -> EventStream:
    # the work runs in its own task: its span and judge run stay in one context, and the
    # consumer may take its time between events
    task = asyncio.create_task(session.run(chunks))
    try:
        while True:
            event = await session.queue.get()
            if event is None:
                break
            yield event
        await task  # the stream's own errors (the chunk iterator raised) propagate
    finally:
        if not task.done():
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task


async def _run_events(
    guard: _GuardParts,
    answer_stream_fn: StreamAnswerFn,
    question: str,
    mode: StreamMode,
    late_citations: bool,
    kwargs: dict[str, Any],
) -> EventStream:
    queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
    t0 = time.perf_counter()
    wants_feedback = _accepts_feedback(answer_stream_fn)
    attempts = 0
    policy = guard.policy
    # an attempt after which the loop may still ask once for fresher sources
    may_ask = mode == "hold" and policy.freshness.ask_fresher > 0 and policy.on_fail != "report"
    sent = _TextSent()

    async def attempt(
        q: str,
        *,
        exclude_urls: frozenset[str] = frozenset(),
        feedback: Feedback | None = None,
        **extra: Any,
    ) -> str:
        nonlocal attempts
        attempts += 1
        at = (time.perf_counter() - t0) * 1000.0
        queue.put_nowait(StreamAttempt(number=attempts, exclude_urls=exclude_urls, at_ms=at))
        if wants_feedback:
            extra["feedback"] = feedback
        source = answer_stream_fn(q, exclude_urls=exclude_urls, **extra)
        if inspect.isawaitable(source):
            source = await source
        text = ""
        fresher = (
            may_ask
            and attempts < policy.max_attempts
            and (feedback is None or feedback.kind != "fresher")
        )
        sent.pending = False
        async for event in stream_answer(
            guard,
            source,
            question=q,
            mode=mode,
            exclude_urls=exclude_urls,
            late_citations=late_citations,
            fresher=fresher,
        ):
            queue.put_nowait(event)
            if isinstance(event, StreamVerdict):
                text = event.text
                sent.pending = bool(event.pending)
        return text

    sent.attempt = attempt
    task = asyncio.create_task(guard.run(sent.run, question, **kwargs))
    task.add_done_callback(lambda _t: queue.put_nowait(None))
    try:
        while True:
            event = await queue.get()
            if event is None:
                break
            yield event
        result = await task  # CitationRejected (on_fail="raise") propagates here
        at = (time.perf_counter() - t0) * 1000.0
        yield StreamResult(result=result, at_ms=at)
    finally:
        if not task.done():
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task


class _TextSent:
    """``stream_run``'s attempts as the loop sees them (:class:`citeguard.loop.SendsText`): the
    latest attempt's text is out unless its stream kept it pending for a fresher attempt."""

    def __init__(self) -> None:
        self.pending = False
        self.attempt: Callable[..., Awaitable[str]] | None = None

    async def run(self, q: str, **kwargs: Any) -> str:
        assert self.attempt is not None
        text: str = await self.attempt(q, **kwargs)
        return text

    def text_sent(self) -> bool:
        return not self.pending


def _accepts_feedback(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "feedback" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)

"""LlamaIndex handlers: check a query's answer against the retrievals it made.

Install with ``pip install 'citeguard-agent[llamaindex]'``; importing this module without
``llama-index-core`` raises :class:`~citeguard.errors.MissingExtraError` with that hint.

Two ways in, one behaviour (attach one of them, not both):

* :class:`CiteguardInstrumentation`, through the instrumentation dispatcher::

      handler = CiteguardInstrumentation(guard).attach()   # every engine, agent, retriever
      response = await engine.aquery(question)
      got = await handler.averdict(response)

  Its span handler follows the span tree (so concurrent queries never mix); retrieval events
  give each literal query and the nodes retrieved; the end event of the outermost query (a
  sub-question engine's inner queries are part of it) gives the response and its source nodes.
* :class:`CiteguardCallbackHandler`, for the legacy callback manager, which LlamaIndex still
  routes retrievals (``RETRIEVE``) and responses (``QUERY`` / ``SYNTHESIZE``) through:
  ``index.as_query_engine(callback_manager=CallbackManager([handler]))``, or
  ``Settings.callback_manager``. One ``"query"`` trace is one run.

Recorded: each retrieval as a search (the literal query; one result per node with a URL, read by
:func:`~citeguard.integrations.llamaindex.node_url`). Checked: the response as
:func:`~citeguard.integrations.llamaindex.render_response` writes it (``[n]`` markers bound to
``source_nodes``), with those searches: the verdict is :meth:`Guard.check`'s.

When the verdict comes
    LlamaIndex calls handlers synchronously and swallows whatever they raise, so the check
    cannot run inside the query nor raise into it. When the query ends inside a running event
    loop the check starts at once as a task; ``await handler.averdict(response)`` waits for it
    (``handler.verdict(response)`` from code with no running loop runs it). The response's
    ``metadata`` holds the run id (``"citeguard_run_id"``) at once and the
    :class:`~citeguard.integrations.runs.RunVerdict` (``"citeguard_verdict"``) once checked;
    ``on_verdict`` gets each verdict, and the check is a ``citeguard.callback`` span. A
    streaming response is checked when ``averdict`` is awaited after the stream was consumed to
    its end (``response_gen``, ``get_response()``, ``print_response_stream()``,
    ``async_response_gen()``); before that ``averdict`` raises :class:`~citeguard.UsageError`.

Modes: ``report`` returns the verdict; ``raise`` makes ``averdict`` / ``verdict`` raise
:class:`~citeguard.CitationRejected` for a failing answer. Regeneration is
:func:`~citeguard.integrations.llamaindex.guard_query_engine`'s.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from citeguard import Guard, MissingExtraError, SearchRecord
from citeguard.errors import EventLoopError, InputError, UsageError
from citeguard.integrations.runs import (
    HandlerMode,
    RunChecker,
    Runs,
    RunVerdict,
    VerdictHook,
)

try:
    from llama_index.core.base.response.schema import Response
    from llama_index.core.callbacks.base_handler import BaseCallbackHandler
    from llama_index.core.callbacks.schema import BASE_TRACE_EVENT, CBEventType, EventPayload
    from llama_index.core.instrumentation import (  # type: ignore[attr-defined, unused-ignore]
        Dispatcher,
        get_dispatcher,
    )
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.events import BaseEvent
    from llama_index.core.instrumentation.events.query import QueryEndEvent, QueryStartEvent
    from llama_index.core.instrumentation.events.retrieval import (
        RetrievalEndEvent,
        RetrievalStartEvent,
    )
    from llama_index.core.instrumentation.span import BaseSpan
    from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
    from llama_index.core.schema import NodeWithScore, QueryBundle
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise MissingExtraError("llama-index-core", "llamaindex") from exc

from citeguard.integrations.llamaindex import node_url, render_response

__all__ = [
    "RUN_ID_KEY",
    "VERDICT_KEY",
    "CiteguardCallbackHandler",
    "CiteguardInstrumentation",
    "RunVerdict",
]

logger = logging.getLogger(__name__)

#: ``response.metadata`` keys: the run id (set when the query ends), the verdict (once checked).
RUN_ID_KEY = "citeguard_run_id"
VERDICT_KEY = "citeguard_verdict"

_SNIPPET_CHARS = 2_000  # of a node's text, kept as its result's snippet
_MAX_SPANS = 65_536  # open spans followed at once, at most
_MAX_DEPTH = 256  # span ancestors walked, at most


# ---------------------------------------------------------------------- shared by both handlers


@dataclass
class _Pending:
    """A run whose query ended and whose verdict is not in yet."""

    run_id: str
    question: str
    searches: list[SearchRecord]
    response: Any
    task: asyncio.Task[RunVerdict] | None = None
    streamed: str | None = None  # a stream's whole text, once its generator ran to its end


class _Deferred:
    """Checks scheduled when a query ends, awaited by :meth:`averdict`."""

    def __init__(
        self, guard: Guard, *, mode: HandlerMode, on_verdict: VerdictHook | None, keep: int
    ) -> None:
        self._checker = RunChecker(
            guard, framework="llamaindex", mode=mode, on_verdict=on_verdict, keep=keep
        )
        self._keep = keep
        self._pending: OrderedDict[str, _Pending] = OrderedDict()

    @property
    def guard(self) -> Guard:
        return self._checker.guard

    @property
    def verdicts(self) -> Mapping[str, RunVerdict]:
        """The most recent verdicts, by run id."""
        return self._checker.verdicts

    def schedule(
        self, run_id: str, question: str, searches: list[SearchRecord], response: Any
    ) -> None:
        _set_meta(response, RUN_ID_KEY, run_id)
        pending = _Pending(run_id, question, searches, response)
        self._pending[run_id] = pending
        while len(self._pending) > self._keep:
            self._pending.popitem(last=False)
        if _is_stream(response):
            _record_stream(pending)
            return  # its text exists once the caller has consumed it
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to run on: `verdict(response)` runs it
        pending.task = loop.create_task(self._run(pending))
        pending.task.add_done_callback(_log_failure)

    async def _run(self, pending: _Pending) -> RunVerdict:
        answer = _answer_of(pending.response, pending.streamed)
        got = await self._checker.check(
            pending.run_id, question=pending.question, answer=answer, searches=pending.searches
        )
        _set_meta(pending.response, VERDICT_KEY, got)
        self._pending.pop(pending.run_id, None)
        return got

    async def averdict(self, response: Any) -> RunVerdict:
        """The verdict on ``response``'s query (or on the run id given as a string), once
        checked. ``raise`` mode: :class:`~citeguard.CitationRejected` when it failed."""
        run_id = _run_id_of(response)
        pending = self._pending.get(run_id)
        if pending is None:
            got = self._checker.verdicts.get(run_id)
            if got is None:
                raise InputError(f"no query with run id {run_id!r} is known to this handler")
            return self._checker.deliver(got)
        task = pending.task
        loop = asyncio.get_running_loop()
        failed = (
            task is not None and task.done() and (task.cancelled() or task.exception() is not None)
        )
        if task is None or failed or task.get_loop() is not loop:
            # not started (a stream, no loop at the query's end), or failed: (re)run it here
            task = pending.task = loop.create_task(self._run(pending))
        return self._checker.deliver(await task)

    def verdict(self, response: Any) -> RunVerdict:
        """:meth:`averdict` for code with no running event loop (e.g. after ``engine.query``):
        runs the check under :func:`asyncio.run`, then releases the guard's connection pool,
        which belongs to that short-lived loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._released(response))
        raise EventLoopError(
            "verdict() was called inside a running event loop, where it cannot block; use "
            "`await handler.averdict(response)` instead"
        )

    async def _released(self, response: Any) -> RunVerdict:
        try:
            return await self.averdict(response)
        finally:
            await self.guard.aclose()


def _log_failure(task: asyncio.Task[RunVerdict]) -> None:
    if not task.cancelled() and (error := task.exception()) is not None:
        # retrieved here so an unawaited check does not warn; `averdict` runs it again
        logger.warning("citeguard: checking a LlamaIndex response failed: %r", error)


def _is_stream(response: Any) -> bool:
    return hasattr(response, "response_gen") or hasattr(response, "async_response_gen")


def _record_stream(pending: _Pending) -> None:
    """Wrap the stream's generator so that its end keeps the whole text in ``pending``:
    LlamaIndex sets no ``response_txt`` when ``response_gen`` is iterated directly, and a
    partial one while ``async_response_gen()`` runs, so it cannot tell a consumed stream."""
    response = pending.response
    gen = getattr(response, "response_gen", None)
    parts: list[str] = []
    if isinstance(gen, AsyncIterator):

        async def arecorded() -> AsyncIterator[str]:
            async for text in gen:
                parts.append(text)
                yield text
            pending.streamed = "".join(parts)

        response.response_gen = arecorded()
    elif isinstance(gen, Iterator):

        def recorded() -> Iterator[str]:
            for text in gen:
                parts.append(text)
                yield text
            pending.streamed = "".join(parts)

        response.response_gen = recorded()
    elif isinstance(text := getattr(response, "response_txt", None), str):
        pending.streamed = text  # no generator: its text is all there is


def _answer_of(response: Any, streamed: str | None = None) -> str:
    """The answer of a response, with its ``[n]`` markers bound to its source nodes (a
    stream's: ``streamed``, its text once consumed)."""
    if _is_stream(response):
        text = streamed
        if not isinstance(text, str):
            raise UsageError(
                "a streaming response is checked after its stream was consumed to its end "
                "(response_gen, get_response(), print_response_stream() or async_response_gen()); "
                "await averdict() then"
            )
        response = Response(text, source_nodes=list(getattr(response, "source_nodes", [])))
    return render_response(response)


def _set_meta(response: Any, key: str, value: Any) -> None:
    if not hasattr(response, "metadata"):
        return
    if response.metadata is None:
        response.metadata = {}
    if isinstance(response.metadata, dict):
        response.metadata[key] = value


def _run_id_of(response: Any) -> str:
    if isinstance(response, str):
        return response
    meta = getattr(response, "metadata", None)
    run_id = meta.get(RUN_ID_KEY) if isinstance(meta, Mapping) else None
    if not isinstance(run_id, str):
        raise InputError(
            "this response carries no citeguard run id: was the handler attached when the "
            "query ran?"
        )
    return run_id


def _query_str(query: Any) -> str:
    if isinstance(query, QueryBundle):
        return query.query_str
    return query if isinstance(query, str) else str(query)


def _rows(nodes: Any) -> list[dict[str, Any]]:
    """Retrieved nodes as search result rows: its URL, its text (capped), its metadata."""
    rows: list[dict[str, Any]] = []
    for n in nodes or ():
        if not isinstance(n, NodeWithScore) or (url := node_url(n)) is None:
            continue
        meta = n.node.metadata
        rows.append(
            {
                "url": url,
                "title": meta.get("title"),
                "content": n.node.get_content()[:_SNIPPET_CHARS],
                "metadata": dict(meta),
            }
        )
    return rows


# ---------------------------------------------------------------------- instrumentation


class _Spans(BaseSpanHandler[BaseSpan]):  # type: ignore[misc, unused-ignore]
    """Follows the span tree: each open span's parent."""

    _owner: CiteguardInstrumentation | None = None

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex lists this handler under."""
        return "CiteguardSpans"

    def span_enter(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        parent_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if self._owner is not None:
            self._owner._span_entered(id_, parent_id)

    def span_exit(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> None:
        if self._owner is not None:
            self._owner._span_left(id_)

    def span_drop(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> None:
        if self._owner is not None:
            self._owner._span_left(id_)

    # the span objects themselves are not kept
    def new_span(self, *args: Any, **kwargs: Any) -> BaseSpan | None:
        return None

    def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> BaseSpan | None:
        return None

    def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> BaseSpan | None:
        return None


class _Events(BaseEventHandler):  # type: ignore[misc, unused-ignore]
    """Hands query and retrieval events to the owner."""

    _owner: CiteguardInstrumentation | None = None

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex lists this handler under."""
        return "CiteguardEvents"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if self._owner is not None:
            self._owner._event(event)


class CiteguardInstrumentation(_Deferred):
    """Check each outermost query's answer with the retrievals made under it, through
    LlamaIndex's instrumentation dispatcher; see the module docstring.

    ``guard``: the :class:`~citeguard.Guard` that checks. ``mode``: ``"report"`` or ``"raise"``
    (what :meth:`averdict` does with a failing answer). ``on_verdict``: called (sync or async)
    with each :class:`RunVerdict`. ``keep``: how many verdicts to keep.
    """

    def __init__(
        self,
        guard: Guard,
        *,
        mode: HandlerMode = "report",
        on_verdict: VerdictHook | None = None,
        keep: int = 1000,
    ) -> None:
        super().__init__(guard, mode=mode, on_verdict=on_verdict, keep=keep)
        self._parent: dict[str, str | None] = {}
        self._runs: Runs[str] = Runs()
        self._spans = _Spans()
        self._spans._owner = self
        self._events = _Events()
        self._events._owner = self

    def attach(self, dispatcher: Dispatcher | None = None) -> CiteguardInstrumentation:
        """Add the handler to ``dispatcher`` (default: LlamaIndex's root one, which every
        module's dispatcher propagates to); returns the handler."""
        d = dispatcher if dispatcher is not None else get_dispatcher()
        d.add_span_handler(self._spans)
        d.add_event_handler(self._events)
        return self

    def detach(self, dispatcher: Dispatcher | None = None) -> None:
        """Remove the handler from ``dispatcher`` (default: the root one)."""
        d = dispatcher if dispatcher is not None else get_dispatcher()
        d.span_handlers = [h for h in d.span_handlers if h is not self._spans]
        d.event_handlers = [h for h in d.event_handlers if h is not self._events]

    @property
    def runs_in_flight(self) -> int:
        """How many queries and spans the handler follows now (0 when nothing runs)."""
        return len(self._runs) + len(self._parent)

    # ---- the span tree

    def _span_entered(self, span_id: str, parent_id: str | None) -> None:
        self._parent[span_id] = parent_id
        if len(self._parent) > _MAX_SPANS:
            self._span_left(next(iter(self._parent)))

    def _span_left(self, span_id: str) -> None:
        self._parent.pop(span_id, None)
        if self._runs.is_root(span_id):  # a query that failed before its end event
            self._runs.close(span_id)

    def _query_root(self, span_id: str | None) -> str | None:
        """The outermost query span at or above ``span_id``."""
        found = None
        for _ in range(_MAX_DEPTH):
            if span_id is None:
                break
            if self._runs.is_root(span_id):
                found = span_id
            span_id = self._parent.get(span_id)
        return found

    # ---- events

    def _event(self, event: BaseEvent) -> None:
        span_id = event.span_id
        if isinstance(event, QueryStartEvent):
            if span_id is not None and self._query_root(span_id) is None:
                self._runs.enter(span_id, None).question = _query_str(event.query)
        elif isinstance(event, RetrievalStartEvent):
            root = self._query_root(span_id)
            if root is not None and span_id is not None:
                query = _query_str(event.str_or_query_bundle)
                self._runs.begin_search(span_id, root, query, span_id.split(".", 1)[0])
        elif isinstance(event, RetrievalEndEvent):
            if span_id is not None:
                self._runs.end_search(span_id, _rows(event.nodes), now=self.guard.now())
        elif isinstance(event, QueryEndEvent) and span_id is not None:
            ended = self._runs.close(span_id) if self._runs.is_root(span_id) else None
            if ended is not None:
                self.schedule(span_id, ended.question, ended.searches, event.response)


# ---------------------------------------------------------------------- legacy callback manager

_TOP = "top"  # a run's top-level events (their parent is the trace's base)
_RESPONSE = "response"  # the response of its last top-level event that had one


class CiteguardCallbackHandler(BaseCallbackHandler, _Deferred):  # type: ignore[misc, unused-ignore]
    """The same as :class:`CiteguardInstrumentation`, as a legacy callback-manager handler: one
    ``"query"`` trace is one run (concurrent queries each have their own, through a context
    variable, as the callback manager's own trace stack does)."""

    def __init__(
        self,
        guard: Guard,
        *,
        mode: HandlerMode = "report",
        on_verdict: VerdictHook | None = None,
        keep: int = 1000,
    ) -> None:
        BaseCallbackHandler.__init__(self, event_starts_to_ignore=[], event_ends_to_ignore=[])
        _Deferred.__init__(self, guard, mode=mode, on_verdict=on_verdict, keep=keep)
        self._runs: Runs[str] = Runs()
        self._trace: contextvars.ContextVar[str | None] = contextvars.ContextVar(
            f"citeguard_llamaindex_trace_{id(self)}", default=None
        )

    @property
    def runs_in_flight(self) -> int:
        """How many traces and events the handler follows now (0 when nothing runs)."""
        return len(self._runs)

    def start_trace(self, trace_id: str | None = None) -> None:
        """A ``"query"`` trace starts a run."""
        if trace_id != "query":
            return
        run_id = str(uuid.uuid4())
        self._trace.set(run_id)
        self._runs.enter(run_id, None).extra[_TOP] = set()

    def end_trace(
        self, trace_id: str | None = None, trace_map: dict[str, list[str]] | None = None
    ) -> None:
        """The run's end schedules the check of its response."""
        run_id = self._trace.get()
        if trace_id != "query" or run_id is None:
            return
        self._trace.set(None)
        root = self._runs.close(run_id)
        if root is not None and _RESPONSE in root.extra:
            self.schedule(run_id, root.question, root.searches, root.extra[_RESPONSE])

    def on_event_start(
        self,
        event_type: CBEventType,
        payload: dict[str, Any] | None = None,
        event_id: str = "",
        parent_id: str = "",
        **kwargs: Any,
    ) -> str:
        """Follow the event; a retrieval begins a search, the first query string is the
        question."""
        run_id = self._trace.get()
        if run_id is None or not self._runs.is_root(run_id):
            return event_id
        root = self._runs.enter(event_id, run_id)
        if parent_id == BASE_TRACE_EVENT:
            root.extra[_TOP].add(event_id)
        query = (payload or {}).get(EventPayload.QUERY_STR)
        query = query if isinstance(query, str) else ""
        if query and not root.question:
            root.question = query
        outer = root.pending.get(parent_id)
        # CitationQueryEngine's own RETRIEVE event wraps its retriever's: one search, not two
        if event_type is CBEventType.RETRIEVE and (outer is None or outer[0] != query):
            self._runs.begin_search(event_id, run_id, query, "retriever")
        return event_id

    def on_event_end(
        self,
        event_type: CBEventType,
        payload: dict[str, Any] | None = None,
        event_id: str = "",
        **kwargs: Any,
    ) -> None:
        """A retrieval's nodes are its results; a top-level event's response is the answer."""
        root = self._runs.root(event_id)
        if root is None:
            return
        payload = payload or {}
        if event_type is CBEventType.RETRIEVE:
            nodes = payload.get(EventPayload.NODES)
            self._runs.end_search(event_id, _rows(nodes), now=self.guard.now())
            return
        if EventPayload.RESPONSE in payload and event_id in root.extra[_TOP]:
            root.extra[_RESPONSE] = payload[EventPayload.RESPONSE]
        self._runs.exit(event_id)

"""LangChain callback handler: check a run's final answer against the searches it made.

Install with ``pip install 'citeguard-agent[langchain]'``; importing this module without
``langchain-core`` raises :class:`~citeguard.errors.MissingExtraError` with that hint.

Attach it like a tracing handler, with nothing else changed::

    handler = CiteguardCallbackHandler(guard)
    answer = await chain.ainvoke(inputs, config={"callbacks": [handler]})
    handler.verdict(run_id)  # or on_verdict=..., or mode="raise"

What it records
    Every retriever call (its literal query and the documents it returned) and every search-tool
    call (the tool's arguments' query and what it returned) of the run, as
    :meth:`Guard.wrap_search` records them, grouped under the run's root by ``parent_run_id``:
    concurrent runs never mix. A tool counts as a search when it is named in ``search_tools``;
    with ``search_tools=None`` (the default), any tool whose result reads as search results
    (rows with a URL, :func:`~citeguard.search.normalize_search_results`).

When it checks
    When the root run ends (a chain, an agent, a bare chat-model or LLM call): its output is the
    answer (a str, a message, a mapping with ``answer``, ``output``, ``result``, ``text`` or
    ``messages``), its input the question (``question_key``, else ``question``, ``input``,
    ``query``, ``q``, or the last human message). The verdict is :meth:`Guard.check`'s on that
    answer and those searches. A streamed run (``astream``, ``astream_events``) is checked once,
    when it ends, on the whole answer. A run that fails is forgotten unchecked.

Modes
    ``report``: the verdict is kept by root run id (:attr:`verdicts`, :meth:`verdict`), handed to
    ``on_verdict`` and emitted as a ``citeguard.callback`` span holding the ``citeguard.check``
    span. LangChain fixes a run's metadata when the run starts, so the verdict cannot be attached
    to it afterwards. ``raise``: the same, then :class:`~citeguard.CitationRejected` for a failing
    answer, out of ``ainvoke`` / ``astream`` (the handler sets ``raise_error``, without which
    LangChain logs a handler's exceptions and goes on).

The async API (``ainvoke``, ``astream``, ``abatch``) runs the handler on the caller's event loop.
On the sync API (``invoke``, ``stream``, ``batch``) LangChain runs each event of an async handler
on a throwaway event loop and logs its exceptions instead of raising them: the check still runs
and is reported, the guard's connection pool is released after it, and ``raise`` mode cannot
raise. Do not use one Guard from the sync and async APIs at the same time.

Regeneration is not done here: to retry with the rejected URLs excluded, wrap the chain with
:func:`~citeguard.integrations.langchain.guard_runnable`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from typing import Any
from uuid import UUID

from citeguard import Guard, MissingExtraError
from citeguard.errors import UsageError
from citeguard.integrations.runs import (
    HandlerMode,
    RunChecker,
    Runs,
    RunVerdict,
    VerdictHook,
)
from citeguard.search import normalize_search_results

try:
    from langchain_core.callbacks import AsyncCallbackHandler
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, LLMResult
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise MissingExtraError("langchain-core", "langchain") from exc

from citeguard.integrations.langchain import _query_of, to_synthesis

__all__ = ["CiteguardCallbackHandler", "RunVerdict"]

_QUESTION_KEYS = ("question", "input", "query", "q")
_ANSWER_KEYS = ("answer", "output", "result", "text", "content")
_MAX_NESTING = 8  # mappings inside mappings read for the answer, at most
_LOOP = "loop"  # the event loop a root started on (a different one at its end: the sync API)


class CiteguardCallbackHandler(AsyncCallbackHandler):
    """Check each root run's final answer with the searches made under it; see the module
    docstring.

    ``guard``: the :class:`~citeguard.Guard` that checks. ``mode``: ``"report"`` or ``"raise"``.
    ``on_verdict``: called (sync or async) with each :class:`RunVerdict`. ``search_tools``: the
    names of the tools that are searches (``None``: any tool that returns search results).
    ``question_key``: the input key holding the question. ``keep``: how many verdicts to keep.
    """

    def __init__(
        self,
        guard: Guard,
        *,
        mode: HandlerMode = "report",
        on_verdict: VerdictHook | None = None,
        search_tools: Collection[str] | None = None,
        question_key: str | None = None,
        keep: int = 1000,
    ) -> None:
        self._checker = RunChecker(
            guard, framework="langchain", mode=mode, on_verdict=on_verdict, keep=keep
        )
        self._runs: Runs[UUID] = Runs()
        self._search_tools = frozenset(search_tools) if search_tools is not None else None
        self._question_keys = (question_key,) if question_key else _QUESTION_KEYS
        # LangChain swallows a handler's exceptions unless it asks otherwise
        self.raise_error = mode == "raise"

    # ------------------------------------------------------------------ results

    @property
    def guard(self) -> Guard:
        """The guard that checks."""
        return self._checker.guard

    @property
    def verdicts(self) -> Mapping[str, RunVerdict]:
        """The most recent verdicts, by root run id (as a string)."""
        return self._checker.verdicts

    def verdict(self, run_id: UUID | str) -> RunVerdict | None:
        """The verdict on the root run ``run_id`` (``None``: not checked, or no longer kept)."""
        return self._checker.verdicts.get(str(run_id))

    @property
    def runs_in_flight(self) -> int:
        """How many runs the handler is following now (0 once every root has ended)."""
        return len(self._runs)

    # ------------------------------------------------------------------ starts

    async def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Follow the run; a root's input gives the question."""
        self._start(run_id, parent_run_id, inputs)

    async def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Follow the run; a root call's last human message is the question."""
        self._start(run_id, parent_run_id, messages[0] if messages else [])

    async def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Follow the run; a root call's prompt is the question."""
        self._start(run_id, parent_run_id, prompts[0] if prompts else "")

    async def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A search tool's call begins a search; any other tool is only followed."""
        name = _name(serialized, kwargs, "tool")
        if self._search_tools is None or name in self._search_tools:
            query = _query_of(inputs if isinstance(inputs, dict) else input_str)
            self._runs.begin_search(run_id, parent_run_id, query, name)
        else:
            self._runs.enter(run_id, parent_run_id)

    async def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """A retrieval begins a search with its literal query."""
        self._runs.begin_search(
            run_id, parent_run_id, query, _name(serialized, kwargs, "retriever")
        )

    # ------------------------------------------------------------------ ends

    async def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A root's end checks its answer."""
        await self._end(run_id, outputs, kwargs.get("inputs"))

    async def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """A root call's end checks its answer."""
        await self._end(run_id, response, None)

    async def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A search tool's result is recorded (what the model reads, else the artifact)."""
        if isinstance(output, ToolMessage):
            raw: Any = output.content
            if output.artifact is not None and not _rows(raw):
                raw = output.artifact
        else:
            raw = output
        keep = self._search_tools is not None  # a named search tool is kept even when empty
        self._end_search(run_id, raw, keep_empty=keep)

    async def on_retriever_end(
        self, documents: Sequence[Any], *, run_id: UUID, **kwargs: Any
    ) -> None:
        """The retrieved documents are the search's results."""
        self._end_search(run_id, list(documents), keep_empty=True)

    async def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A failed run is forgotten (a failed root with all its runs, unchecked)."""
        self._forget(run_id)

    async def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """See :meth:`on_chain_error`."""
        self._forget(run_id)

    async def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """See :meth:`on_chain_error`."""
        self._forget(run_id)

    async def on_retriever_error(
        self, error: BaseException, *, run_id: UUID, **kwargs: Any
    ) -> None:
        """See :meth:`on_chain_error`."""
        self._forget(run_id)

    # ------------------------------------------------------------------ helpers

    def _start(self, run_id: UUID, parent_run_id: UUID | None, inputs: Any) -> None:
        root = self._runs.enter(run_id, parent_run_id)
        if self._runs.is_root(run_id):
            root.question = _question_of(inputs, self._question_keys)
            root.extra[_LOOP] = asyncio.get_running_loop()

    def _end_search(self, run_id: UUID, raw: Any, *, keep_empty: bool) -> None:
        now = self.guard.now()  # the guard's clock reads result ages, as wrap_search does
        self._runs.end_search(run_id, raw, keep_empty=keep_empty, now=now)
        self._forget(run_id)  # a search run that was a root checks nothing

    def _forget(self, run_id: UUID) -> None:
        if self._runs.is_root(run_id):
            self._runs.close(run_id)
        else:
            self._runs.exit(run_id)

    async def _end(self, run_id: UUID, output: Any, inputs: Any) -> None:
        if not self._runs.is_root(run_id):
            self._runs.exit(run_id)
            return
        root = self._runs.close(run_id)
        assert root is not None  # is_root just said so
        if inputs is not None:  # a streamed run reports its input only at its end
            root.question = _question_of(inputs, self._question_keys) or root.question
        answer = _answer_of(output)
        if answer is None:
            raise UsageError(
                "citeguard cannot read an answer from the run's output "
                f"({type(output).__name__}): return a str, a message, or a mapping with an "
                "'answer', 'output' or 'messages' entry"
            )
        sync_api = root.extra.get(_LOOP) is not asyncio.get_running_loop()
        try:
            got = await self._checker.check(
                str(run_id), question=root.question, answer=answer, searches=root.searches
            )
        finally:
            if sync_api:  # this throwaway loop is closed after the event: so is the pool
                await self.guard.aclose()
        self._checker.deliver(got)


def _name(serialized: Mapping[str, Any] | None, kwargs: Mapping[str, Any], default: str) -> str:
    for got in (kwargs.get("name"), (serialized or {}).get("name")):
        if isinstance(got, str) and got:
            return got
    return default


def _rows(raw: Any) -> bool:
    return bool(normalize_search_results(raw))


def _text(message: BaseMessage) -> str:
    got = to_synthesis(message)
    return got if isinstance(got, str) else got.text


def _question_of(inputs: Any, keys: tuple[str, ...]) -> str:
    """The question of a root run's input: a string, a key of a mapping, or the last human
    message of a message list (a chat model's input, a LangGraph state's ``messages``)."""
    if isinstance(inputs, str):
        return inputs
    if isinstance(inputs, BaseMessage):
        return _text(inputs)
    if isinstance(inputs, Mapping):
        for key in keys:
            value = inputs.get(key)
            if isinstance(value, str):
                return value
        return _last_human(inputs.get("messages"))
    return _last_human(inputs)


def _last_human(messages: Any) -> str:
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return ""
    humans = [m for m in messages if isinstance(m, HumanMessage)]
    return _text(humans[-1]) if humans else ""


def _answer_of(output: Any, depth: int = 0) -> str | None:
    """The answer text of a root run's output (``None`` when it holds none)."""
    if depth > _MAX_NESTING:
        return None
    if isinstance(output, LLMResult):
        gen = output.generations[0][0] if output.generations and output.generations[0] else None
        if isinstance(gen, ChatGeneration):
            return _text(gen.message)
        return gen.text if gen is not None else None
    if isinstance(output, str | BaseMessage):
        got = to_synthesis(output)
        return got if isinstance(got, str) else got.text
    if isinstance(output, Mapping):
        for key in (*_ANSWER_KEYS, "messages"):
            if key in output:
                return _answer_of(output[key], depth + 1)
        return None
    if isinstance(output, Sequence):
        replies = [m for m in output if isinstance(m, AIMessage)]
        return _text(replies[-1]) if replies else None
    try:
        got = to_synthesis(output)  # a citeguard Synthesis
    except UsageError:
        return None
    return got if isinstance(got, str) else got.text

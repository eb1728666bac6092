"""LangChain integration: guard a chain's answer, and record a search tool's queries.

Install with ``pip install 'citeguard-agent[langchain]'``; importing this module without
``langchain-core`` raises :class:`~citeguard.errors.MissingExtraError` with that hint.

* :func:`guard_runnable` wraps any Runnable that turns ``{"question": ..., "exclude_urls": [...],
  "feedback": ...}`` into an answer (a ``str``, an ``AIMessage``, a :class:`~citeguard.Synthesis`,
  or a mapping with an ``"answer"`` entry). Invoking the wrapper runs :meth:`Guard.run`: each
  attempt invokes the chain with the URLs to avoid and the guard's feedback, and the result is the
  :class:`~citeguard.GuardResult` (or, with ``output="answer"``, the answer string).
* :func:`guard_tool` wraps a search tool (``BaseTool``) so each call goes through
  :meth:`Guard.wrap_search`: the literal query and the results are recorded for the query axis and
  the not-retrieved check, and the agent gets back exactly what the tool returned.

Only citeguard's public API is used here.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Literal, TypeVar, overload

from pydantic import ConfigDict, PrivateAttr

from citeguard import Feedback, Guard, GuardResult, MissingExtraError, Synthesis
from citeguard.errors import EventLoopError, InputError, UsageError

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForChainRun,
        AsyncCallbackManagerForToolRun,
        CallbackManagerForToolRun,
        Callbacks,
    )
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.runnables import (
        Runnable,
        RunnableConfig,
        RunnableSerializable,
        patch_config,
    )
    from langchain_core.tools import BaseTool, Tool
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise MissingExtraError("langchain-core", "langchain") from exc

__all__ = [
    "GuardInput",
    "GuardedRunnable",
    "GuardedTool",
    "guard_runnable",
    "guard_tool",
    "to_synthesis",
]

GuardInput = str | dict[str, Any]
"""What a guarded runnable accepts: the question, or a dict holding it under ``question_key``."""

_T = TypeVar("_T")

_QUERY_KEYS = ("query", "q", "search_query", "input", "question")


class GuardedRunnable(RunnableSerializable[GuardInput, GuardResult | str]):
    """A Runnable whose every invocation runs :meth:`Guard.run` around ``runnable``.

    Each attempt invokes ``runnable`` with the input dict (a bare string input becomes
    ``{question_key: input}``) extended by ``exclude_urls`` (a sorted list of URLs the answer must
    not cite) and ``feedback`` (the guard's message on why the previous attempt was rejected, or
    ``None`` on the first attempt). An ``exclude_urls`` entry in the input seeds the exclusions.

    ``output="result"`` returns the :class:`GuardResult`; ``output="answer"`` returns only the
    answer text (the best attempt's when none passed, as ``Policy.on_fail`` decides).

    ``ainvoke`` / ``abatch`` are the native paths. ``invoke`` / ``batch`` work from code with no
    running event loop: they run the async path under :func:`asyncio.run` and then release the
    guard's connection pool, which belongs to that short-lived loop (the guard reopens it on its
    next use). Called inside a running loop they raise ``RuntimeError``: use ``await ainvoke``.
    """

    runnable: Runnable[Any, Any]
    guard: Guard
    question_key: str = "question"
    output: Literal["result", "answer"] = "result"

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # The sync path runs one event loop at a time: a Guard's pool must not straddle two loops.
    _sync_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    # ------------------------------------------------------------------ async (native)

    async def ainvoke(
        self, input: GuardInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> GuardResult | str:
        """Run the guarded loop; returns a GuardResult (or the answer, per ``output``)."""
        return await self._acall_with_config(self._arun, input, config, **kwargs)

    async def _arun(
        self,
        input: GuardInput,
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
        **kwargs: Any,
    ) -> GuardResult | str:
        question, base = self._split(input)
        seed = base.pop("exclude_urls", None) or ()
        child = patch_config(config, callbacks=run_manager.get_child())
        inner = self.runnable

        async def answer(
            q: str, *, exclude_urls: frozenset[str], feedback: Feedback | None = None
        ) -> str | Synthesis:
            payload = {
                **base,
                "exclude_urls": sorted(exclude_urls),
                "feedback": feedback.message if feedback is not None else None,
            }
            return to_synthesis(await inner.ainvoke(payload, child, **kwargs))

        result = await self.guard.run(answer, question, exclude_urls=frozenset(seed))
        return result.answer if self.output == "answer" else result

    # ------------------------------------------------------------------ sync (no running loop)

    def invoke(
        self, input: GuardInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> GuardResult | str:
        """Sync :meth:`ainvoke` for code without a running event loop."""
        _refuse_inside_loop("invoke", "ainvoke")
        with self._sync_lock:
            return asyncio.run(self._released(self.ainvoke(input, config, **kwargs)))

    def batch(
        self,
        inputs: list[GuardInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any | None,
    ) -> list[GuardResult | str]:
        """Sync :meth:`abatch`: all inputs run concurrently on one event loop (not in threads,
        which would share the guard's connection pool across loops)."""
        _refuse_inside_loop("batch", "abatch")
        if not inputs:
            return []
        with self._sync_lock:
            return asyncio.run(
                self._released(
                    self.abatch(inputs, config, return_exceptions=return_exceptions, **kwargs)
                )
            )

    async def _released(self, work: Awaitable[_T]) -> _T:
        try:
            return await work
        finally:
            await self.guard.aclose()

    # ------------------------------------------------------------------ helpers

    def _split(self, input: GuardInput) -> tuple[str, dict[str, Any]]:
        if isinstance(input, str):
            return input, {self.question_key: input}
        if isinstance(input, Mapping):
            question = input.get(self.question_key)
            if not isinstance(question, str):
                raise InputError(
                    f"the input needs the question as a string under {self.question_key!r} "
                    f"(got keys {sorted(map(str, input))})"
                )
            return question, dict(input)
        raise UsageError(f"a guarded runnable takes a str or a dict, not {type(input).__name__}")


@overload
def guard_runnable(
    runnable: Runnable[Any, Any],
    guard: Guard,
    *,
    question_key: str = ...,
    output: Literal["result"] = ...,
) -> Runnable[GuardInput, GuardResult]: ...


@overload
def guard_runnable(
    runnable: Runnable[Any, Any],
    guard: Guard,
    *,
    question_key: str = ...,
    output: Literal["answer"],
) -> Runnable[GuardInput, str]: ...


def guard_runnable(
    runnable: Runnable[Any, Any],
    guard: Guard,
    *,
    question_key: str = "question",
    output: Literal["result", "answer"] = "result",
) -> Runnable[GuardInput, GuardResult] | Runnable[GuardInput, str]:
    """Wrap ``runnable`` (prompt | llm | parser, or any chain) in the guard's regenerate loop.

    See :class:`GuardedRunnable`. The chain reads ``exclude_urls`` and ``feedback`` from its input
    dict (e.g. as prompt variables) and returns the answer with its citations.
    """
    return GuardedRunnable(  # type: ignore[return-value]  # the overloads narrow the output
        runnable=runnable, guard=guard, question_key=question_key, output=output
    )


def to_synthesis(out: Any) -> str | Synthesis:
    """Read a chain's output as an answer: a str, a Synthesis, a message (its ``content``; an
    ``AIMessage``'s token usage is kept for the LLM span), or a mapping with an ``"answer"``."""
    if isinstance(out, str | Synthesis):
        return out
    if isinstance(out, BaseMessage):
        text = _content_text(out.content)
        usage = out.usage_metadata if isinstance(out, AIMessage) else None
        if usage:
            return Synthesis(
                text=text,
                input_tokens=usage.get("input_tokens"),
                output_tokens=usage.get("output_tokens"),
            )
        return text
    if isinstance(out, Mapping) and "answer" in out:
        return to_synthesis(out["answer"])
    raise UsageError(
        "the guarded runnable must return a str, an AIMessage, a citeguard.Synthesis or a "
        f"mapping with an 'answer' entry, not {type(out).__name__}"
    )


def _content_text(content: str | list[str | dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    # content blocks: keep the text ones, in order (tool calls, images... carry no citations)
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "".join(parts)


def _refuse_inside_loop(method: str, alternative: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise EventLoopError(
        f"GuardedRunnable.{method}() was called inside a running event loop, where it cannot "
        f"block; use `await guarded.{alternative}(...)` instead"
    )


# ---------------------------------------------------------------------- tools


class GuardedTool(BaseTool):
    """A search tool whose calls go through :meth:`Guard.wrap_search`.

    It has the wrapped tool's name, description, argument schema and response format, and returns
    what the tool returned (for a ``content_and_artifact`` tool, its content and artifact). Each
    call is recorded under the tool's name, with the literal query read from the arguments
    (``query``, ``q``, ``search_query``, ``input``, ``question``, else the only string argument).

    The recorded value is the tool's *content* (what the model reads and may cite). With a
    snapshot store in replay mode the tool is not called, and a ``content_and_artifact`` tool's
    artifact comes back as ``None``.
    """

    tool: BaseTool
    guard: Guard

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _run(
        self, *args: Any, run_manager: CallbackManagerForToolRun | None = None, **kwargs: Any
    ) -> Any:
        callbacks = run_manager.get_child() if run_manager is not None else None
        got = _call_tool(self.tool, self.guard, _tool_input(args, kwargs), callbacks)
        return _shape(self.tool, got)

    async def _arun(
        self,
        *args: Any,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> Any:
        callbacks = run_manager.get_child() if run_manager is not None else None
        got = await _acall_tool(self.tool, self.guard, _tool_input(args, kwargs), callbacks)
        return _shape(self.tool, got)


def guard_tool(tool: BaseTool, guard: Guard) -> BaseTool:
    """Wrap a LangChain search tool so its queries and results are recorded by ``guard``.

    Use the returned tool in place of the original (bind it to the model, give it to the agent):
    the model sees the same name, description and arguments. Calls made inside a guarded run
    (:func:`guard_runnable`, :meth:`Guard.run`) feed that run's query axis and its not-retrieved
    check; elsewhere the wrapper just calls the tool. A legacy single-string ``Tool`` (no
    ``args_schema``) is wrapped as a ``Tool``, so it keeps its single-string calling convention.
    """
    common: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "return_direct": tool.return_direct,
        "response_format": tool.response_format,
        "handle_tool_error": tool.handle_tool_error,
        "handle_validation_error": tool.handle_validation_error,
    }
    if isinstance(tool, Tool) and tool.args_schema is None:

        def func(tool_input: str, callbacks: Callbacks = None) -> Any:
            return _shape(tool, _call_tool(tool, guard, tool_input, callbacks))

        async def coroutine(tool_input: str, callbacks: Callbacks = None) -> Any:
            return _shape(tool, await _acall_tool(tool, guard, tool_input, callbacks))

        return Tool(func=func, coroutine=coroutine, **common)
    return GuardedTool(tool=tool, guard=guard, args_schema=tool.args_schema, **common)


# Asking for a ToolMessage (by giving a call id) is how BaseTool hands back a tool's artifact.
_CALL_ID = "citeguard-guarded-call"


class _Box:
    """The artifact of one content_and_artifact call, kept beside the recorded content."""

    def __init__(self) -> None:
        self.value: Any = None

    def unpack(self, msg: Any) -> Any:
        if isinstance(msg, ToolMessage):
            self.value = msg.artifact
            return msg.content
        return msg


def _call_tool(
    tool: BaseTool, guard: Guard, tool_input: str | dict[str, Any], callbacks: Callbacks
) -> tuple[Any, Any]:
    """Call ``tool`` through ``guard.wrap_search``; returns (content, artifact)."""
    artifact = _Box()

    def search(query: str, tool_input: str | dict[str, Any]) -> Any:
        if tool.response_format == "content_and_artifact":
            msg = tool.run(tool_input, callbacks=callbacks, tool_call_id=_CALL_ID)
            return artifact.unpack(msg)
        return tool.run(tool_input, callbacks=callbacks)

    content = guard.wrap_search(search, provider=tool.name)(_query_of(tool_input), tool_input)
    return content, artifact.value


async def _acall_tool(
    tool: BaseTool, guard: Guard, tool_input: str | dict[str, Any], callbacks: Callbacks
) -> tuple[Any, Any]:
    """Async :func:`_call_tool`."""
    artifact = _Box()

    async def search(query: str, tool_input: str | dict[str, Any]) -> Any:
        if tool.response_format == "content_and_artifact":
            msg = await tool.arun(tool_input, callbacks=callbacks, tool_call_id=_CALL_ID)
            return artifact.unpack(msg)
        return await tool.arun(tool_input, callbacks=callbacks)

    wrapped = guard.wrap_search(search, provider=tool.name)
    content = await wrapped(_query_of(tool_input), tool_input)
    return content, artifact.value


def _shape(tool: BaseTool, got: tuple[Any, Any]) -> Any:
    return got if tool.response_format == "content_and_artifact" else got[0]


def _tool_input(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | dict[str, Any]:
    # BaseTool passes a plain-string input positionally, and only then
    return str(args[0]) if args else dict(kwargs)


def _query_of(tool_input: str | dict[str, Any]) -> str:
    """The literal search string of a call: what the query axis judges."""
    if isinstance(tool_input, str):
        return tool_input
    for key in _QUERY_KEYS:
        if isinstance(tool_input.get(key), str):
            return str(tool_input[key])
    strings = [v for v in tool_input.values() if isinstance(v, str)]
    if len(strings) == 1:
        return strings[0]
    return json.dumps(tool_input, sort_keys=True, default=str)

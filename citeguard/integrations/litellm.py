"""citeguard as a LiteLLM proxy guardrail: five lines of ``config.yaml``.

::

    guardrails:
      - guardrail_name: citeguard
        litellm_params:
          guardrail: citeguard.integrations.litellm.CiteguardGuardrail
          mode: post_call
          default_on: true            # or: clients ask for it with "guardrails": ["citeguard"]
          on_fail: block              # block | repair | annotate (CITEGUARD_ON_FAIL)
          policy: /etc/citeguard/policy.json   # a Policy as JSON (CITEGUARD_POLICY)
          redis: redis://redis:6379/0          # shared per-host fetch limits (CITEGUARD_REDIS)
          judge_model: gpt-4o-mini             # the judge (CITEGUARD_JUDGE_MODEL)
          judge_base_url: https://api.openai.com/v1   # ... asked here (CITEGUARD_JUDGE_BASE_URL)

LiteLLM imports the class by its dotted path (``citeguard`` must be installed in the proxy's
environment: ``pip install 'citeguard-agent[litellm]'``). The settings not given come from the
same ``CITEGUARD_*`` variables as ``citeguard serve``.

* **Whole responses** (the post-call success hook): the whole ``ModelResponse`` (or a
  Responses API response) is checked, its ``url_citation`` annotations included (LiteLLM's
  text-only guardrail interface never sees them), with the last user message as the question.
  A passing answer goes through unchanged; a failing one is blocked (HTTP 400, ``{"error":
  {"message": "citeguard blocked the answer: ... failing citations: URL (status: reason);
  ..."}}``), repaired (mended from the pages it cites, checked again, else blocked) or
  annotated, per ``on_fail`` (:mod:`citeguard.integrations.gateway`). The guardrail's name
  joins the ``x-litellm-applied-guardrails`` header; ``x-citeguard-verdict`` (``passed``,
  ``repaired``, ``rejected``: the words ``citeguard serve`` uses) and ``x-citeguard-action``
  (``pass``, ``repair``, ``annotate``) say what happened, and the response body carries the
  verdict in brief under ``citeguard``.
* **Streams** (the streaming iterator hook): chunks are held until the citations of their
  sentence are verified, as ``Guard.stream(..., mode="hold")`` does; text after a failing
  sentence never reaches the client. At the end of the stream a failing answer is blocked
  (the stream ends with ``finish_reason: "content_filter"``, as OpenAI ends a stream its own
  filter cut, and the proxy logs one line), repaired (the rest of the mended answer is sent)
  or annotated (the held text is sent; the verdict goes to the proxy's log, not the stream).
  Streams are checked on their text: providers' stream annotations are not read. Responses
  API streams are passed on unchecked.

One Guard per configured guardrail in each proxy process (its connection pool, caches and
extraction process), started with the proxy and closed when the proxy's event loop ends
(Ctrl-C / SIGINT). LiteLLM gives guardrails no shutdown hook, and on SIGTERM uvicorn ends the
process right after the app's shutdown: the Guard's extraction children then exit as their
pipe closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from citeguard.errors import MissingExtraError
from citeguard.guard import Guard
from citeguard.integrations.gateway import (
    SETTINGS,
    CitationsBlocked,
    GatewayOutcome,
    GatewaySettings,
    OnFail,
    annotation,
    block_message,
    build_guard,
    close_guard,
    guard_answer,
    question_of,
    url_citations,
)
from citeguard.stream import StreamHeld, StreamText, StreamVerdict

try:
    from litellm._logging import verbose_proxy_logger
    from litellm.integrations.custom_guardrail import CustomGuardrail
    from litellm.proxy.common_utils.callback_utils import (
        add_guardrail_to_applied_guardrails_header,
    )
    from litellm.types.guardrails import GuardrailEventHooks
    from litellm.types.utils import (
        Delta,
        ModelResponse,
        ModelResponseStream,
        StreamingChoices,
    )
except ImportError as exc:  # pragma: no cover - the litellm extra is missing
    raise MissingExtraError("litellm", "litellm") from exc

__all__ = ["CiteguardGuardrail"]

log = verbose_proxy_logger  # the proxy's own log


class CiteguardGuardrail(CustomGuardrail):  # type: ignore[misc]  # litellm is untyped here
    """A LiteLLM ``CustomGuardrail`` that checks an answer's citations (see the module
    docstring). LiteLLM builds it from ``litellm_params``: the names of
    :data:`~citeguard.integrations.gateway.SETTINGS` (``policy``, ``redis``, ``on_fail``,
    ``store``, ``judge_model``, ...) are citeguard's, the rest LiteLLM's."""

    def __init__(self, **kwargs: Any) -> None:
        params = {name: kwargs.pop(name, None) for name in SETTINGS}
        self.settings = GatewaySettings.load(params)
        self._policy = self.settings.load_policy()  # a bad policy file fails the proxy's start
        kwargs.setdefault("supported_event_hooks", [GuardrailEventHooks.post_call])
        super().__init__(**kwargs)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Future[Guard] | None = None
        self._keeper: asyncio.Task[None] | None = None
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # started on the first request instead
        else:
            self._start()

    # ------------------------------------------------------------------ the Guard's lifetime

    def _start(self) -> asyncio.Future[Guard]:
        loop = asyncio.get_running_loop()
        if self._ready is None or self._loop is not loop:
            self._loop = loop
            self._ready = loop.create_future()
            self._keeper = loop.create_task(self._keep(self._ready), name="citeguard-guard")
        return self._ready

    async def _keep(self, ready: asyncio.Future[Guard]) -> None:
        """Holds the Guard for as long as the proxy's event loop runs: the loop's shutdown
        cancels this task, which closes it."""
        guard = build_guard(self.settings, policy=self._policy)
        try:
            await guard.warm_up()
            ready.set_result(guard)
            await asyncio.Event().wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e)
            raise
        finally:
            await close_guard(guard)
            log.info("citeguard: guardrail %s closed its Guard", self.guardrail_name)

    async def guard(self) -> Guard:
        """This guardrail's Guard, started (and warmed up) on first use if the proxy did not
        start it with its event loop."""
        return await asyncio.shield(self._start())

    # ------------------------------------------------------------------ whole responses

    async def async_post_call_success_hook(
        self, data: dict[str, Any], user_api_key_dict: Any, response: Any
    ) -> Any:
        """Check the whole response; returns the response the client gets (raises
        :class:`~citeguard.integrations.gateway.CitationsBlocked` to block it)."""
        chat = isinstance(response, ModelResponse)
        dumped = response.model_dump() if chat or _is_responses_api(response) else None
        if dumped is None:
            return response  # embeddings, images, ...: nothing cited
        if self.should_run_guardrail(data=data, event_type=GuardrailEventHooks.post_call) is False:
            return response
        add_guardrail_to_applied_guardrails_header(data, self.guardrail_name)
        guard = await self.guard()
        on_fail = self.settings.on_fail
        text_part = None if chat else _only_text_part(response)
        if not chat and on_fail == "repair" and text_part is None:
            on_fail = "block"  # a Responses output of several text parts: nowhere to put one
        outcome = await guard_answer(
            guard,
            dumped,
            question=question_of(data.get("messages") or _input_messages(data.get("input"))),
            on_fail=on_fail,
        )
        self._mark(response, outcome)
        if outcome.blocked:
            raise CitationsBlocked(outcome.message, guardrail_name=self.guardrail_name)
        if outcome.action == "repair" and outcome.text is not None:
            if chat:
                message = response.choices[0].message
                message.content = outcome.text
                message.annotations = url_citations(outcome.text)
            elif text_part is not None:
                text_part.text = outcome.text
                text_part.annotations = [
                    {"type": "url_citation", **a["url_citation"]}
                    for a in url_citations(outcome.text)
                ]
        return response

    def _mark(self, response: Any, outcome: GatewayOutcome) -> None:
        response.citeguard = outcome.metadata()
        hidden = getattr(response, "_hidden_params", None)
        if isinstance(hidden, dict):
            headers = hidden.setdefault("additional_headers", {})
            if isinstance(headers, dict):
                headers["x-citeguard-verdict"] = outcome.word
                headers["x-citeguard-action"] = outcome.action

    # ------------------------------------------------------------------ streams

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict[str, Any]
    ) -> AsyncGenerator[Any, None]:
        """Hold each sentence's chunks until its citations pass (``Guard.stream`` in ``hold``
        mode); decide at the end of the stream per ``on_fail``."""
        if (
            self.should_run_guardrail(data=request_data, event_type=GuardrailEventHooks.post_call)
            is False
        ):
            async for chunk in response:
                yield chunk
            return
        if "messages" not in request_data:
            # a Responses API stream (events, not chat chunks): passed on unchecked
            async for chunk in response:
                yield chunk
            return
        add_guardrail_to_applied_guardrails_header(request_data, self.guardrail_name)
        guard = await self.guard()
        question = question_of(request_data.get("messages"))
        upstream = _Upstream(response)
        released: list[str] = []
        verdict_event: StreamVerdict | None = None
        async for event in guard.stream(upstream.texts(), question=question, mode="hold"):
            if isinstance(event, StreamText):
                released.append(event.text)
                yield upstream.chunk(event.text)
            elif isinstance(event, StreamHeld):
                log.debug("citeguard: held %d chars: %s", len(event.text), event.reason)
            elif isinstance(event, StreamVerdict):
                verdict_event = event
        if verdict_event is None:  # pragma: no cover - stream() always ends with a verdict
            return
        async for chunk in self._end_of_stream(guard, verdict_event, "".join(released), upstream):
            yield chunk

    async def _end_of_stream(
        self, guard: Guard, end: StreamVerdict, released: str, upstream: _Upstream
    ) -> AsyncIterator[Any]:
        on_fail: OnFail = self.settings.on_fail
        if end.passed:
            for chunk in upstream.tail():
                yield chunk
            return
        if on_fail == "annotate":
            outcome = GatewayOutcome(
                "annotate", end.verdict, annotation(end.verdict), failed=end.verdict
            )
            if end.held:
                yield upstream.chunk(end.held)
        elif on_fail == "repair":
            outcome = await guard_answer(guard, end.text, question="", on_fail="repair")
            text = outcome.text or ""
            if outcome.action == "repair" and text.startswith(released):
                yield upstream.chunk(text[len(released) :])
            elif outcome.action != "block":
                outcome = GatewayOutcome(
                    "block",
                    outcome.verdict,
                    block_message(end.verdict) + " (the repair changed text already sent)",
                    failed=end.verdict,
                )
        else:
            outcome = GatewayOutcome(
                "block", end.verdict, block_message(end.verdict), failed=end.verdict
            )
        if outcome.blocked:
            # the response is already under way: the stream ends as OpenAI ends one its own
            # filter cut (finish_reason "content_filter"), with one line in the proxy's log
            # (an exception here would be an ERROR with a traceback, and a bare error event)
            log.warning("citeguard: %s blocked a stream: %s", self.guardrail_name, outcome.message)
            for chunk in upstream.ending("content_filter", outcome.metadata()):
                yield chunk
            return
        log.info("citeguard: %s: %s", self.guardrail_name, outcome.message)
        for chunk in upstream.tail():
            yield chunk


class _Upstream:
    """The upstream stream's chunks: their text fed to the Guard, the rest kept to send after
    it (the finish reason, usage), and new chunks made in their likeness."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self._first: Any = None
        self._tail: list[Any] = []

    async def texts(self) -> AsyncIterator[str]:
        async for chunk in self._response:
            if self._first is None:
                self._first = chunk
            text = ""
            choices = getattr(chunk, "choices", None) or []
            for choice in choices:
                delta = getattr(choice, "delta", None)
                content = getattr(delta, "content", None)
                if delta is not None and isinstance(content, str) and content:
                    text += content
                    delta.content = None
            if _carries_more(chunk):
                self._tail.append(chunk)
            if text:
                yield text

    def chunk(self, text: str) -> Any:
        first = self._first
        return ModelResponseStream(
            id=getattr(first, "id", None),
            model=getattr(first, "model", None),
            created=getattr(first, "created", None),
            choices=[StreamingChoices(index=0, delta=Delta(content=text, role="assistant"))],
        )

    def tail(self) -> list[Any]:
        return list(self._tail)

    def ending(self, reason: str, verdict: dict[str, Any]) -> list[Any]:
        """The tail with each finish reason set to ``reason`` and ``verdict`` under
        ``citeguard`` on the chunk that says it (a new one when the upstream sent none)."""
        tail, ended = self.tail(), None
        for chunk in tail:
            for choice in getattr(chunk, "choices", None) or []:
                if getattr(choice, "finish_reason", None):
                    choice.finish_reason = reason
                    ended = chunk
        if ended is None:
            ended = self.chunk("")
            ended.choices[0].delta = Delta(content=None)
            ended.choices[0].finish_reason = reason
            tail.insert(0, ended)
        ended.citeguard = verdict
        # LiteLLM serialises a plain text chunk by a fast path that knows only OpenAI's
        # fields; a chunk with provider-specific fields gets its whole model, ``citeguard``
        # included
        ended.provider_specific_fields = {"citeguard": verdict}
        return tail


def _is_responses_api(response: Any) -> bool:
    """A Responses API response (LiteLLM's ``ResponsesAPIResponse``)."""
    return getattr(response, "object", None) == "response" and hasattr(response, "output")


def _only_text_part(response: Any) -> Any:
    """The one ``output_text`` part of a Responses output, or None when there are several."""
    parts = [
        part
        for item in getattr(response, "output", None) or []
        if getattr(item, "type", None) == "message"
        for part in getattr(item, "content", None) or []
        if getattr(part, "type", None) == "output_text"
    ]
    return parts[0] if len(parts) == 1 else None


def _input_messages(value: Any) -> Any:
    """A Responses request's ``input`` as chat messages: a string is one user message."""
    return [{"role": "user", "content": value}] if isinstance(value, str) else value


def _carries_more(chunk: Any) -> bool:
    """Whether a chunk says more than its text: a finish reason, tool calls, usage."""
    if getattr(chunk, "usage", None) is not None:
        return True
    for choice in getattr(chunk, "choices", None) or []:
        if getattr(choice, "finish_reason", None):
            return True
        delta = getattr(choice, "delta", None)
        if getattr(delta, "tool_calls", None) or getattr(delta, "function_call", None):
            return True
    return False

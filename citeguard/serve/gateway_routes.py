"""Gateway endpoints of ``citeguard serve``: LiteLLM's generic guardrail API and Portkey's
webhook guardrail. Both read the one Guard of the app (``request.app.state.guard``).

**LiteLLM** (``guardrail: generic_guardrail_api``, ``api_base: http://citeguard:8000``):
LiteLLM POSTs ``{texts, input_type, structured_messages, request_data, litellm_call_id,
additional_provider_specific_params, ...}`` to ``/beta/litellm_basic_guardrail_api`` and takes
``{action: NONE | BLOCKED | GUARDRAIL_INTERVENED, blocked_reason, texts}``. Only responses
(``input_type: "response"``) are checked; each text is one answer. It sees **text only**: a
provider's ``url_citation`` annotations never reach this API, so citations the text does not
write out as links are not checked (use the LiteLLM class, :mod:`citeguard.integrations.litellm`,
for those). ``on_fail`` (``block``, ``repair``, ``annotate``) comes from
``additional_provider_specific_params.on_fail``, else the app's ``gateway_on_fail``, else
``block``; ``annotate`` answers ``NONE`` with the verdict under ``citeguard``. docs/gateways.md
runs the guardrail from a LiteLLM policy pipeline step (``on_fail: modify_response``): LiteLLM
then ends a ``BLOCKED`` answer with ``finish_reason: "content_filter"`` and delivers a stream's
``GUARDRAIL_INTERVENED`` text; run alone, it logs each blocked stream with a traceback and
drops a stream's rewrite, whatever this endpoint answers.

**Portkey** (a webhook guardrail check, URL ``http://citeguard:8000/v1/portkey/webhook``):
Portkey POSTs its hook context ``{request: {json, text, isStreamingRequest}, response: {json,
text, statusCode}, provider, requestType, metadata, eventType}`` and takes ``{verdict,
data, transformedData}``. ``afterRequestHook`` events are checked on the whole provider response
(``response.json``, annotations included); ``beforeRequestHook`` events pass. A failing answer
gets ``verdict: false`` (Portkey's check ``deny`` setting decides whether that blocks, HTTP 446,
or is reported, 246); with ``on_fail=repair`` a mended answer comes back as
``transformedData.response.json`` with ``verdict: true``. Portkey waits ``timeout`` ms (3,000
by default) and *passes* the request when a webhook does not answer in time, so this endpoint
answers before that: give the same value as ``?timeout_ms=`` in the webhook URL (default 3000)
and it answers ``verdict: false`` ("could not verify in time"), or ``true`` with
``?on_timeout=pass``, 250 ms before Portkey would give up. ``on_fail`` is a query parameter too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypeVar

from fastapi import APIRouter, HTTPException, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from citeguard.errors import CiteguardError
from citeguard.guard import Guard
from citeguard.integrations.gateway import (
    GatewayOutcome,
    OnFail,
    chat_completion_with_text,
    guard_answer,
    on_fail_word,
    question_of,
)
from citeguard.providers.dispatch import read_provider

__all__ = [
    "LiteLLMGuardrailRequest",
    "LiteLLMGuardrailResponse",
    "PortkeyWebhookRequest",
    "PortkeyWebhookResponse",
    "router",
]

T = TypeVar("T")

router = APIRouter(tags=["gateways"])

_MAX_TEXTS = 64  # texts in one generic-guardrail request (one per choice)
_MARGIN_S = 0.25  # answer Portkey this long before its timeout
_MAX_TIMEOUT_MS = 600_000


# --------------------------------------------------------------------------------------------
# LiteLLM's generic guardrail API
# --------------------------------------------------------------------------------------------


class LiteLLMGuardrailRequest(BaseModel):
    """What LiteLLM's ``generic_guardrail_api`` sends (fields it may add are kept)."""

    model_config = ConfigDict(extra="allow")

    texts: list[str] | None = Field(None, max_length=_MAX_TEXTS)
    input_type: Literal["request", "response"]
    images: list[str] | None = None
    tools: list[dict[str, Any]] | None = None
    structured_messages: list[dict[str, Any]] | None = None
    request_data: dict[str, Any] = Field(default_factory=dict)
    additional_provider_specific_params: dict[str, Any] | None = None
    litellm_call_id: str | None = None
    litellm_trace_id: str | None = None
    model: str | None = None


class LiteLLMGuardrailResponse(BaseModel):
    """What LiteLLM takes back: ``NONE`` (unchanged), ``BLOCKED`` (with ``blocked_reason``) or
    ``GUARDRAIL_INTERVENED`` (``texts`` replace the answer's); ``citeguard``: the verdicts."""

    action: Literal["NONE", "BLOCKED", "GUARDRAIL_INTERVENED"]
    blocked_reason: str | None = None
    texts: list[str] | None = None
    citeguard: list[dict[str, Any]] | None = None


@router.post("/beta/litellm_basic_guardrail_api", response_model_exclude_none=True)
async def litellm_basic_guardrail_api(
    body: LiteLLMGuardrailRequest, request: Request
) -> LiteLLMGuardrailResponse:
    """LiteLLM's generic guardrail API: each response text checked as one answer."""
    if body.input_type != "response" or not body.texts:
        return LiteLLMGuardrailResponse(action="NONE")  # citeguard checks answers, not prompts
    params = body.additional_provider_specific_params or {}
    on_fail = _on_fail(params.get("on_fail"), request)
    guard = _guard(request)
    question = question_of(body.structured_messages)
    texts = body.texts
    outcomes = await _on_guard_loop(
        request,
        lambda: asyncio.gather(
            *(guard_answer(guard, text, question=question, on_fail=on_fail) for text in texts)
        ),
    )
    meta = [o.metadata() for o in outcomes]
    blocked = [o.message for o in outcomes if o.blocked]
    if blocked:
        return LiteLLMGuardrailResponse(
            action="BLOCKED", blocked_reason=" | ".join(blocked), citeguard=meta
        )
    if any(o.action == "repair" for o in outcomes):
        texts = [
            o.text if o.action == "repair" and o.text is not None else t
            for o, t in zip(outcomes, body.texts, strict=True)
        ]
        return LiteLLMGuardrailResponse(action="GUARDRAIL_INTERVENED", texts=texts, citeguard=meta)
    return LiteLLMGuardrailResponse(action="NONE", citeguard=meta)


# --------------------------------------------------------------------------------------------
# Portkey's webhook guardrail
# --------------------------------------------------------------------------------------------


class _PortkeyPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    json_body: Any = Field(None, alias="json")
    text: str | None = None


class PortkeyWebhookRequest(BaseModel):
    """Portkey's hook context as its webhook plugin POSTs it."""

    model_config = ConfigDict(extra="allow")

    request: _PortkeyPart = Field(default_factory=_PortkeyPart)
    response: _PortkeyPart = Field(default_factory=_PortkeyPart)
    eventType: Literal["beforeRequestHook", "afterRequestHook"] = "afterRequestHook"
    provider: str | None = None
    requestType: str | None = None
    metadata: dict[str, Any] | None = None


class PortkeyWebhookResponse(BaseModel):
    """``verdict``: the check passed; ``transformedData.response.json``: the repaired
    response, whole; ``data``: the verdict in brief (shown in Portkey's hook results)."""

    verdict: bool
    data: dict[str, Any] | None = None
    transformedData: dict[str, Any] | None = None


@router.post("/v1/portkey/webhook", response_model_exclude_none=True)
async def portkey_webhook(
    body: PortkeyWebhookRequest,
    request: Request,
    on_fail: str | None = None,
    timeout_ms: int = Query(3000, gt=0, le=_MAX_TIMEOUT_MS),
    on_timeout: Literal["fail", "pass"] = "fail",
) -> PortkeyWebhookResponse:
    """Portkey's webhook guardrail: the provider's whole response checked as one answer."""
    if body.eventType != "afterRequestHook":
        return PortkeyWebhookResponse(verdict=True, data={"checked": False})
    mode = _on_fail(on_fail, request)
    guard = _guard(request)
    response_json = body.response.json_body
    answer: object
    if isinstance(response_json, Mapping) and read_provider(response_json) is not None:
        answer = dict(response_json)
    else:
        answer = body.response.text or ""
    request_json = body.request.json_body
    messages = request_json.get("messages") if isinstance(request_json, Mapping) else None
    budget = max(timeout_ms / 1000.0 - _MARGIN_S, 0.05)
    try:
        async with asyncio.timeout(budget):
            outcome = await _on_guard_loop(
                request,
                lambda: guard_answer(guard, answer, question=question_of(messages), on_fail=mode),
            )
    except TimeoutError:
        return PortkeyWebhookResponse(
            verdict=on_timeout == "pass",
            data={
                "checked": False,
                "message": f"citeguard could not verify the citations within {timeout_ms} ms",
            },
        )
    return _portkey_answer(outcome, answer)


def _portkey_answer(outcome: GatewayOutcome, answer: object) -> PortkeyWebhookResponse:
    data = {"checked": True, **outcome.metadata()}
    if outcome.action == "repair" and outcome.text is not None:
        if isinstance(answer, Mapping):
            try:
                repaired: Any = chat_completion_with_text(answer, outcome.text)
            except CiteguardError:
                return PortkeyWebhookResponse(verdict=False, data=data)
            return PortkeyWebhookResponse(
                verdict=True, data=data, transformedData={"response": {"json": repaired}}
            )
        return PortkeyWebhookResponse(
            verdict=True, data=data, transformedData={"response": {"text": outcome.text}}
        )
    return PortkeyWebhookResponse(verdict=outcome.action == "pass", data=data)


# --------------------------------------------------------------------------------------------


class _HTTPError(HTTPException, CiteguardError):
    """A bad request or an unready service, answered in FastAPI's ``{"detail": ...}`` shape."""


def _guard(request: Request) -> Guard:
    guard = getattr(request.app.state, "guard", None)
    if not isinstance(guard, Guard):
        raise _HTTPError(status_code=503, detail="citeguard's Guard is not running")
    return guard


async def _on_guard_loop(request: Request, work: Callable[[], Awaitable[T]]) -> T:
    """``work()`` run where the app's Guard lives: its guard loop (see ``serve/worker.py``)."""
    worker = getattr(request.app.state, "worker", None)

    async def run() -> T:
        return await work()

    if worker is None:
        return await run()
    result: T = await worker.run(run())
    return result


def _on_fail(value: object, request: Request) -> OnFail:
    if value is None:
        value = getattr(request.app.state, "gateway_on_fail", None) or "block"
    try:
        return on_fail_word(value)
    except CiteguardError as e:
        raise _HTTPError(status_code=422, detail=str(e)) from e

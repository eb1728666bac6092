"""The ASGI app: ``create_app(settings)`` → a FastAPI app serving the check API, the guarded
OpenAI and Anthropic proxies, health, readiness and metrics.

The one :class:`~citeguard.Guard` lives on ``app.state.guard`` (made in the lifespan, warmed up in
the background: ``/readyz`` answers 200 once its model is loaded; closed on shutdown, after
uvicorn has drained the requests in flight). Requests whose policy overrides differ from the
server's get a Guard of their own policy that shares the entailer (a few are kept, least
recently used first out).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response, StreamingResponse

from citeguard.errors import PolicyError
from citeguard.guard import Guard
from citeguard.policy import Policy
from citeguard.runtime import Runtime
from citeguard.serve.dialects import ANTHROPIC, CHAT, RESPONSES, Dialect
from citeguard.serve.errors import ApiError, error_response, flavor_of
from citeguard.serve.gateway_routes import router as gateway_router
from citeguard.serve.limits import KeyLimits, LimitExceeded
from citeguard.serve.metrics import Metrics, sample_loop_lag
from citeguard.serve.overrides import bounded_policy
from citeguard.serve.proxy import Record, guarded_call, guarded_stream, open_stream
from citeguard.serve.settings import Settings, key_id, serve_policy
from citeguard.serve.upstream import Upstream, UpstreamError
from citeguard.serve.verdicts import log_summary, verdict_json
from citeguard.serve.worker import GuardLoop
from citeguard.snapshot import SnapshotStore, open_store

__all__ = ["CheckRequest", "create_app"]

log = logging.getLogger("citeguard.serve")
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_OPEN_PATHS = frozenset({"/healthz", "/readyz"})
_GUARD_POOL = 8  # Guards of per-request policies kept alive


class CheckRequest(BaseModel):
    """``POST /v1/check``."""

    model_config = ConfigDict(extra="forbid")

    answer: str | dict[str, Any] | list[Any] = Field(
        description="answer text, structured {claim, url, quote} items, or a provider response "
        "as JSON (OpenAI Responses / Chat Completions, Anthropic Messages, Gemini, Perplexity)"
    )
    question: str = Field("", max_length=20_000)
    searches: Any = None
    references: list[Any] | dict[str, Any] | None = None
    documents: dict[str, str] | None = None
    policy: dict[str, Any] | None = Field(
        None, description="policy overrides, bounded by the server's policy"
    )


class _Guards:
    """The server's Guard, and Guards of per-request policies (LRU), sharing its entailer."""

    def __init__(self, base: Guard, store: SnapshotStore | None, settings: Settings) -> None:
        self.base = base
        self._store = store
        self._settings = settings
        self._derived: OrderedDict[str, Guard] = OrderedDict()
        self._users: dict[str, int] = {}

    @asynccontextmanager
    async def use(self, policy: Policy) -> AsyncIterator[Guard]:
        if policy is self.base.policy:
            yield self.base
            return
        key = policy.model_dump_json()
        guard = self._derived.get(key)
        if guard is None:
            guard = Guard(
                policy,
                cache=self._store,
                snapshot_mode=self.base.snapshot_mode,
                entailer=self.base._get_entailer(),
                limits_redis=self._settings.redis,
            )
            self._derived[key] = guard
        self._derived.move_to_end(key)
        self._users[key] = self._users.get(key, 0) + 1
        try:
            yield guard
        finally:
            self._users[key] -= 1
            await self._evict()

    async def _evict(self) -> None:
        for key in list(self._derived):
            if len(self._derived) <= _GUARD_POOL:
                break
            if not self._users.get(key):
                await self._derived.pop(key).aclose()
                self._users.pop(key, None)

    async def aclose(self) -> None:
        for guard in self._derived.values():
            await guard.aclose()
        self._derived.clear()


def _upstream(settings: Settings, root: str | None, style: str) -> Upstream | None:
    if root is None:
        return None
    key = settings.upstream_api_key.get_secret_value() if settings.upstream_api_key else None
    return Upstream(
        root,
        api_key=key,
        connect_timeout=settings.upstream_connect_timeout,
        read_timeout=settings.upstream_read_timeout,
        max_bytes=settings.upstream_max_bytes,
        auth_style=style,
    )


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service's app; ``uvicorn.run(create_app(settings))`` serves it."""
    settings = settings or Settings()
    settings = settings.model_copy(update={"policy": serve_policy(settings)})
    metrics = Metrics()
    edge_state = _EdgeState()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        worker = GuardLoop()
        worker.start()
        app.state.worker = worker
        app.state.ready = asyncio.Event()
        app.state.draining = False
        location = settings.store

        async def setup() -> tuple[SnapshotStore | None, Guard]:
            # made on the guard loop: the Guard's and the upstreams' sessions belong to it
            store = open_store(location) if location else None
            guard = Guard(settings.policy, cache=store, limits_redis=settings.redis)
            app.state.guards = _Guards(guard, store, settings)
            app.state.upstream = _upstream(settings, settings.upstream, "bearer")
            app.state.anthropic = _upstream(
                settings, settings.anthropic_upstream or settings.upstream, "x-api-key"
            )
            return store, guard

        store, guard = await worker.run(setup())
        app.state.guard = guard

        async def warm() -> None:
            try:
                # ready once the model is loaded and an extraction child is up; the children
                # load dateparser's locales beside their first pages (~1.5 s sooner ready)
                await worker.run(guard.warm_up(every_child=False))
            except Exception as e:  # a model that cannot load: not ready, and the log says why
                log.error(
                    json.dumps({"event": "warm_up_failed", "error": f"{type(e).__name__}: {e}"})
                )
                return
            if runtime is not None:
                runtime.apply()
                tasks.append(asyncio.create_task(runtime.collector()))
            app.state.ready.set()

        async def teardown() -> None:
            await app.state.guards.aclose()
            await guard.aclose()
            for up in (app.state.upstream, app.state.anthropic):
                if up is not None:
                    await up.aclose()
            if store is not None:
                close = getattr(store, "aclose", None) or getattr(store, "close", None)
                if close is not None:
                    out = close()
                    if asyncio.iscoroutine(out):
                        await out

        runtime = (
            Runtime(busy=lambda: edge_state.busy > 0, on_full=metrics.gc_full.observe)
            if settings.runtime == "tuned"
            else None
        )
        tasks: list[asyncio.Task[None]] = []
        warming = asyncio.create_task(warm())
        lag = asyncio.create_task(sample_loop_lag(metrics.loop_lag))
        guard_lag = asyncio.run_coroutine_threadsafe(
            sample_loop_lag(metrics.guard_loop_lag), worker.loop
        )
        try:
            yield
        finally:
            app.state.draining = True
            tasks += [warming, lag]
            for task in tasks:
                task.cancel()
            guard_lag.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            try:
                await worker.run(teardown())
            finally:
                await worker.stop()
                if runtime is not None:
                    runtime.restore()

    app = FastAPI(
        title="citeguard serve",
        summary="checks an answer's citations before the user sees them",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    limits = KeyLimits(settings.per_key_concurrency, settings.per_key_rate)
    app.state.limits = limits
    # LiteLLM's generic guardrail API and Portkey's webhook, on the same Guard
    app.include_router(gateway_router)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        _record(request).error = exc.code
        return error_response(flavor_of(request.url.path), exc)

    @app.exception_handler(UpstreamError)
    async def _upstream_error(request: Request, exc: UpstreamError) -> Response:
        _record(request).error = exc.code
        flavor = flavor_of(request.url.path)
        if exc.body is not None and exc.upstream_status and exc.upstream_status < 500:
            # the upstream's own 4xx, in its own shape, passed on
            return JSONResponse(exc.body, status_code=exc.status)
        return error_response(
            flavor, ApiError(exc.status, exc.code, str(exc), type="upstream_error")
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # unknown paths and methods: in the API's shape too, not FastAPI's {"detail": ...}
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        _record(request).error = code
        err = ApiError(exc.status_code, code, str(exc.detail), headers=dict(exc.headers or {}))
        return error_response(flavor_of(request.url.path), err)

    @app.exception_handler(RequestValidationError)
    async def _invalid_body(request: Request, exc: RequestValidationError) -> Response:
        # a body model's refusal (the gateway routes): in the API's shape, not {"detail": ...}
        _record(request).error = "invalid_request"
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid body"}
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        err = ApiError(422, "invalid_request", f"{where}: {first.get('msg', 'invalid')}")
        return error_response(flavor_of(request.url.path), err)

    @app.exception_handler(PolicyError)
    async def _policy_error(request: Request, exc: PolicyError) -> Response:
        _record(request).error = "invalid_policy"
        return error_response(
            flavor_of(request.url.path), ApiError(400, "invalid_policy", str(exc))
        )

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:
        _record(request).error = "internal_error"
        log.error(
            json.dumps(
                {"event": "internal_error", "path": request.url.path, "error": type(exc).__name__}
            )
        )
        err = ApiError(500, "internal_error", "citeguard failed on this request (see its log)")
        return error_response(flavor_of(request.url.path), err)

    # ------------------------------------------------------------------ health and metrics

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(request: Request) -> Response:
        state = request.app.state
        if getattr(state, "draining", False):
            return JSONResponse({"status": "draining"}, status_code=503)
        if not state.ready.is_set():
            return JSONResponse({"status": "loading"}, status_code=503)
        return JSONResponse({"status": "ready"})

    @app.get("/metrics")
    async def metrics_route() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    # ------------------------------------------------------------------ the check API

    @app.post(
        "/v1/check",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": CheckRequest.model_json_schema()}},
            }
        },
    )
    async def check(request: Request) -> Response:
        raw = await _json_body(request, settings)
        try:
            req = CheckRequest.model_validate(raw)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            raise ApiError(400, "invalid_request", f"{where}: {first['msg']}") from None
        policy = bounded_policy(settings.policy, req.policy)
        await _ready(request, settings)
        record = _record(request)
        guards: _Guards = request.app.state.guards

        documents: dict[int | str, str] | None = None
        if req.documents is not None:
            documents = {k: v for k, v in req.documents.items()}

        async def work() -> Response:
            async with guards.use(policy) as guard:
                verdict = await guard.check(
                    req.answer,
                    question=req.question,
                    searches=req.searches if req.searches is not None else [],
                    references=req.references,
                    documents=documents,
                )
            outcome = verdict.verdict_word
            record.outcome, record.verdict = outcome, verdict
            metrics.observe_verdict("/v1/check", verdict, outcome, 0)
            # encoded here too: the verdict's JSON is the largest thing a request builds
            return JSONResponse(verdict_json(verdict), headers={"x-citeguard-verdict": outcome})

        worker: GuardLoop = request.app.state.worker
        return await worker.run(work())

    # ------------------------------------------------------------------ the proxies

    async def proxy(request: Request, dialect: Dialect, upstream: Upstream | None) -> Response:
        if upstream is None:
            raise ApiError(503, "no_upstream", "citeguard serve was started without --upstream")
        body = await _json_body(request, settings)
        if not isinstance(body, dict):
            raise ApiError(400, "invalid_request", "the body must be a JSON object")
        options = body.pop("citeguard", None)
        if options is not None and not isinstance(options, dict):
            raise ApiError(400, "invalid_request", "citeguard must be an object")
        options = options or {}
        policy = bounded_policy(settings.policy, options.get("policy"))
        mode = (
            request.headers.get("x-citeguard-mode") or options.get("mode") or settings.stream_mode
        )
        if mode not in ("hold", "annotate"):
            raise ApiError(400, "invalid_mode", "x-citeguard-mode must be hold or annotate")
        incoming = _incoming(request, settings)
        record = _record(request)
        await _ready(request, settings)
        route = dialect.path
        worker: GuardLoop = request.app.state.worker
        guards: _Guards = request.app.state.guards
        if body.get("stream") is True:
            # open the upstream's stream before answering, so its refusal is a real status
            stream = await worker.run(open_stream(upstream, dialect, body, incoming, record))

            async def events() -> AsyncIterator[bytes]:  # runs on the guard loop
                async with guards.use(policy) as g:
                    async for chunk in guarded_stream(
                        g,
                        dialect,
                        stream,
                        question=dialect.question(body),
                        mode=mode,
                        record=record,
                        meta={"model": body.get("model", ""), "created": int(time.time())},
                        reopen=lambda feedback: open_stream(
                            upstream,
                            dialect,
                            dialect.with_feedback(body, feedback),
                            incoming,
                            record,
                        ),
                    ):
                        yield chunk
                if record.outcome is not None:
                    metrics.observe_verdict(route, record.verdict, record.outcome, record.attempts)

            return StreamingResponse(
                worker.iterate(events()),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache", "x-citeguard-mode": mode},
            )

        async def call() -> Response:
            async with guards.use(policy) as guard:
                try:
                    status, out, headers = await guarded_call(
                        guard, upstream, dialect, body, incoming, record
                    )
                finally:
                    if record.outcome is not None:
                        metrics.observe_verdict(
                            route, record.verdict, record.outcome, record.attempts
                        )
            return JSONResponse(out, status_code=status, headers=headers)

        return await worker.run(call())

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await proxy(request, CHAT, request.app.state.upstream)

    @app.post("/v1/responses")
    async def responses(request: Request) -> Response:
        return await proxy(request, RESPONSES, request.app.state.upstream)

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        return await proxy(request, ANTHROPIC, request.app.state.anthropic)

    app.add_middleware(_Edge, settings=settings, metrics=metrics, limits=limits, state=edge_state)
    return app


def _record(request: Request) -> Record:
    record = getattr(request.state, "record", None)
    if record is None:
        record = request.state.record = Record()
    return record


async def _ready(request: Request, settings: Settings) -> None:
    ready: asyncio.Event = request.app.state.ready
    if ready.is_set():
        return
    try:
        async with asyncio.timeout(settings.ready_timeout):
            await ready.wait()
    except TimeoutError:
        raise ApiError(503, "not_ready", "citeguard is still loading its model") from None


async def _json_body(request: Request, settings: Settings) -> Any:
    """The request's JSON body, at most ``max_body_bytes``, sent within ``body_timeout``."""
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(settings.body_timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > settings.max_body_bytes:
                    raise ApiError(
                        413, "body_too_large", f"the body is over {settings.max_body_bytes} bytes"
                    )
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(
            408, "body_timeout", f"the body did not arrive within {settings.body_timeout:g}s"
        ) from None
    try:
        return json.loads(b"".join(chunks))
    except (ValueError, RecursionError):
        raise ApiError(400, "invalid_json", "the body is not valid JSON") from None


def _incoming(request: Request, settings: Settings) -> dict[str, str]:
    """Provider headers to pass on, and the client's own upstream key when it may send one."""
    h = request.headers
    out = {
        k: h[k]
        for k in ("anthropic-version", "anthropic-beta", "openai-organization", "openai-project")
        if k in h
    }
    if settings.authenticated:
        credential = h.get("x-upstream-api-key", "")
    else:
        credential = _presented_key(h) or ""
    if credential:
        out["credential"] = credential
    return out


def _presented_key(headers: Any) -> str | None:
    auth = headers.get("authorization") or ""
    if auth[:7].lower() == "bearer ":
        return str(auth[7:].strip()) or None
    key = headers.get("x-api-key")
    return str(key) if key else None


class _EdgeState:
    """What the edge knows across requests: how many API requests are in flight."""

    def __init__(self) -> None:
        self.busy = 0


class _Edge:
    """The ASGI layer in front of the app: auth, per-key limits, the body cap, in-flight
    metrics and one JSON log line per request. Answers errors in the route's API shape."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        settings: Settings,
        metrics: Metrics,
        limits: KeyLimits,
        state: _EdgeState,
    ) -> None:
        self.app = app
        self.state = state
        self.settings = settings
        self.metrics = metrics
        self.limits = limits
        self._keys = [k.get_secret_value().encode() for k in settings.api_keys]

    def _authorized(self, presented: str | None) -> bool:
        if not self._keys:
            return True
        if presented is None:
            return False
        given = presented.encode()
        ok = False
        for key in self._keys:  # every key compared, in constant time each
            ok |= hmac.compare_digest(given, key)
        return ok

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        path: str = scope["path"]
        flavor = flavor_of(path)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        record = Record()
        scope.setdefault("state", {})["record"] = record
        status = {"code": 0}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        async def refuse(err: ApiError) -> None:
            record.error = err.code
            await error_response(flavor, err)(scope, receive, sending)

        presented = _presented_key(headers)
        who = key_id(presented) if presented and self._keys else "-"
        limited = False
        api = path.startswith("/v1/")
        self.metrics.in_flight.inc()
        self.state.busy += api
        try:
            if path not in _OPEN_PATHS and not self._authorized(presented):
                await refuse(
                    ApiError(
                        401,
                        "invalid_api_key",
                        "missing or wrong API key (send Authorization: Bearer <key>)",
                    )
                )
                return
            length = headers.get("content-length")
            if length is not None and (
                not length.isdigit() or int(length) > self.settings.max_body_bytes
            ):
                await refuse(
                    ApiError(
                        413,
                        "body_too_large",
                        f"the body is over {self.settings.max_body_bytes} bytes",
                    )
                )
                return
            if path.startswith("/v1/"):
                try:
                    self.limits.acquire(who)
                    limited = True
                except LimitExceeded as e:
                    extra = (
                        {"retry-after": str(max(1, round(e.retry_after)))} if e.retry_after else {}
                    )
                    await refuse(ApiError(429, "rate_limited", str(e), headers=extra))
                    return
            await self.app(scope, receive, sending)
        finally:
            if limited:
                self.limits.release(who)
            self.metrics.in_flight.dec()
            self.state.busy -= api
            self._finish(scope, headers, record, status["code"], time.perf_counter() - t0, who)

    def _finish(
        self,
        scope: Scope,
        headers: dict[str, str],
        record: Record,
        status: int,
        elapsed: float,
        who: str,
    ) -> None:
        path: str = scope["path"]
        route = path if path in _ROUTES else "other"
        self.metrics.requests.labels(route, str(status)).inc()
        if record.upstream_calls:
            self.metrics.upstream_latency.labels(route).observe(record.upstream_s)
            self.metrics.added_latency.labels(route).observe(max(0.0, elapsed - record.upstream_s))
        elif route == "/v1/check":
            self.metrics.added_latency.labels(route).observe(elapsed)
        line: dict[str, Any] = {
            "event": "request",
            "method": scope.get("method"),
            "path": path,
            "status": status,
            "ms": round(elapsed * 1000, 2),
            "key": who,
        }
        if record.upstream_calls:
            line["upstream_ms"] = round(record.upstream_s * 1000, 2)
        if record.mode:
            line["mode"] = record.mode
        if record.error:
            line["error"] = record.error
        if record.verdict is not None and record.outcome is not None:
            line.update(log_summary(record.verdict, record.outcome, record.attempts))
        log.info(json.dumps(line, separators=(",", ":")))


_ROUTES = frozenset(
    {
        "/v1/check",
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
        "/healthz",
        "/readyz",
        "/metrics",
    }
)

"""Real loopback servers for the service tests, each on its own event loop in a thread.

* :class:`Pages`: the cited web (``/good``, ``/other``, ``/dead`` 404, ``/slow``);
* :class:`FakeUpstream`: an LLM API speaking OpenAI Chat Completions, OpenAI Responses and
  Anthropic Messages, as JSON or server-sent events, scripted per test: ``answers`` (one text per
  call, the last repeated), ``citations`` (citation objects instead of links in the text) and
  ``behaviour`` (``"ok"``, ``"slow"`` (2 s), ``"hang"``, ``"500"``, ``"broken_sse"``,
  ``"close_mid"``, ``"hang_mid"``, ``"no_annotation_events"``: a Responses stream whose
  annotations are only in ``response.completed``, as some gateways send it;
  ``"text_with_finish"``: a Chat stream whose last text comes in the chunk with the finish
  reason). Every request body
  it got is in ``requests``;
* :class:`Service`: ``citeguard serve``'s app under uvicorn (in-process) on a free port.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn
from aiohttp import web

from citeguard.policy import Policy
from citeguard.serve import Settings, create_app
from citeguard.serve.main import listen
from citeguard.serve.settings import SERVE_ON_FAIL

GOOD_TEXT = (
    "The Eiffel Tower is 330 metres tall and stands on the Champ de Mars in Paris. "
    "It was completed in 1889 for the World's Fair and was designed by the engineering firm "
    "of Gustave Eiffel. Millions of visitors climb it every year."
)
OTHER_TEXT = (
    "The Great Wall of China is more than 21,000 kilometres long. It was built over many "
    "centuries by several dynasties to protect the northern borders of China."
)


def serve_policy() -> Policy:
    """Loopback pages allowed; the validity axis only (the pages are undated, one domain); the
    service's own ``on_fail`` (it fails closed)."""
    return Policy.for_tests().replace(
        on_fail=SERVE_ON_FAIL,
        entailment={"backend": "word_overlap"},
        diversity={"enabled": False},
        freshness={"enabled": False},
        query={"enabled": False},
        fetch={"url_timeout": 5.0, "retries": 0},
    )


KEY = "sk-citeguard"  # the test services' client key


def make_settings(upstream: FakeUpstream, **kw: object) -> Settings:
    values: dict[str, object] = {
        "policy": serve_policy(),
        "upstream": upstream.url,
        "api_keys": frozenset({KEY}),
        "upstream_read_timeout": 3.0,
        "body_timeout": 2.0,
        "max_body_bytes": 64 * 1024,
    }
    values.update(kw)
    return Settings.model_validate(values)


class Loop:
    """An event loop in a daemon thread; ``run(coro)`` runs a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Awaitable[Any], timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


async def start_runner(runner: web.AppRunner) -> int:
    """Set ``runner`` up on 127.0.0.1, any free port; that port."""
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]


def _page(title: str, text: str) -> str:
    return (
        f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1>"
        f"<p>{text}</p></main></body></html>"
    )


class Pages:
    def __init__(self, loop: Loop) -> None:
        self.loop = loop
        self.release = asyncio.Event()
        app = web.Application()
        app.router.add_get("/good", self._html("The Eiffel Tower", GOOD_TEXT))
        app.router.add_get("/other", self._html("The Great Wall", OTHER_TEXT))
        app.router.add_get("/mirror", self._html("The Eiffel Tower (mirror)", GOOD_TEXT))
        app.router.add_get("/dead", lambda r: web.Response(status=404, text="not found"))
        self.runner = web.AppRunner(app)
        self.port = loop.run(self._start())

    @staticmethod
    def _html(title: str, text: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(text=_page(title, text), content_type="text/html")

        return handler

    async def _start(self) -> int:
        return await start_runner(self.runner)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.loop.run(self.runner.cleanup())


_BEHAVIOUR = web.RequestKey("behaviour", str)  # the behaviour one request gets


class FakeUpstream:
    def __init__(self, loop: Loop) -> None:
        self.loop = loop
        self.answers: list[str] = ["Hello."]
        self.citations: list[list[dict[str, Any]]] = []  # per answer: citation objects
        self.behaviour = "ok"
        # the behaviour is that of the requests from this one on (0-based); earlier ones are ok
        self.behaviour_from = 0
        # a stream waits for resume() before its event of this index (None: it does not wait)
        self.pause_before: int | None = None
        self._resume = asyncio.Event()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_post("/v1/messages", self._messages)
        self.runner = web.AppRunner(app)
        self.port = loop.run(self._start())

    async def _start(self) -> int:
        return await start_runner(self.runner)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *answers: str, citations: list[list[dict[str, Any]]] | None = None) -> None:
        self.answers = list(answers)
        self.citations = citations or []
        self.behaviour = "ok"
        self.behaviour_from = 0
        self.pause_before = None
        self._resume = asyncio.Event()
        self.requests.clear()
        self.headers.clear()

    def resume(self) -> None:
        """Let a stream paused at ``pause_before`` go on."""
        self.loop.loop.call_soon_threadsafe(self._resume.set)

    def close(self) -> None:
        self.loop.loop.call_soon_threadsafe(self._stop.set)
        self.resume()
        self.loop.run(self.runner.cleanup())

    # ---- helpers

    def _next(self) -> tuple[str, list[dict[str, Any]]]:
        n = len(self.requests) - 1
        text = self.answers[min(n, len(self.answers) - 1)]
        cites = self.citations[min(n, len(self.citations) - 1)] if self.citations else []
        return text, cites

    async def _begin(self, request: web.Request) -> dict[str, Any] | web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        acts = len(self.requests) > self.behaviour_from
        request[_BEHAVIOUR] = behaviour = self.behaviour if acts else "ok"
        if behaviour == "hang":
            await self._stop.wait()
        if behaviour == "slow":  # answers after a while: a request still in flight
            await asyncio.sleep(2)
        if behaviour == "500":
            return web.json_response({"error": {"message": "boom"}}, status=500)
        return body  # type: ignore[no-any-return]

    async def _sse(
        self, request: web.Request, events: list[tuple[str | None, Any]]
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        half = len(events) // 2
        behaviour = request.get(_BEHAVIOUR, self.behaviour)
        for i, (name, data) in enumerate(events):
            if i == self.pause_before:
                await self._resume.wait()
            if i == half and behaviour == "broken_sse":
                await resp.write(b"data: {not json\n\n")
                return resp
            if i == half and behaviour == "close_mid":
                request.transport.close()  # type: ignore[union-attr]
                return resp
            if i == half and behaviour == "hang_mid":
                await self._stop.wait()
                return resp  # the client is long gone
            head = f"event: {name}\n" if name else ""
            payload = data if isinstance(data, str) else json.dumps(data)
            await resp.write(f"{head}data: {payload}\n\n".encode())
        await resp.write_eof()
        return resp

    @staticmethod
    def _pieces(text: str) -> list[str]:
        # word-sized deltas, as a model streams
        return re.findall(r"\S+\s*|\s+", text)

    # ---- OpenAI Chat Completions

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._begin(request)
        if isinstance(body, web.StreamResponse):
            return body
        text, cites = self._next()
        annotations = [
            {
                "type": "url_citation",
                "url_citation": {
                    "url": c["url"],
                    "title": c.get("title", ""),
                    "start_index": c.get("start", 0),
                    "end_index": c.get("end", len(text)),
                },
            }
            for c in cites
        ]
        base = {"id": "chatcmpl-1", "created": int(time.time()), "model": body.get("model", "m")}
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if annotations:
                message["annotations"] = annotations
            return web.json_response(
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
                }
            )
        chunk = {**base, "object": "chat.completion.chunk"}
        events: list[tuple[str | None, Any]] = [
            (
                None,
                {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
            )
        ]
        for piece in self._pieces(text):
            events.append((None, {**chunk, "choices": [{"index": 0, "delta": {"content": piece}}]}))
        if annotations:
            events.append(
                (None, {**chunk, "choices": [{"index": 0, "delta": {"annotations": annotations}}]})
            )
        ending = {"index": 0, "delta": {}, "finish_reason": "stop"}
        if self.behaviour == "text_with_finish":  # the last text and the finish in one chunk
            last = events.pop()
            if isinstance(last[1], dict) and last[1]["choices"][0].get("delta", {}).get("content"):
                ending["delta"] = last[1]["choices"][0]["delta"]
            else:
                events.append(last)
        events.append((None, {**chunk, "choices": [ending]}))
        events.append((None, "[DONE]"))
        return await self._sse(request, events)

    # ---- OpenAI Responses

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        body = await self._begin(request)
        if isinstance(body, web.StreamResponse):
            return body
        text, cites = self._next()
        annotations = [
            {
                "type": "url_citation",
                "url": c["url"],
                "title": c.get("title", ""),
                "start_index": c.get("start", 0),
                "end_index": c.get("end", len(text)),
            }
            for c in cites
        ]
        part = {"type": "output_text", "text": text, "annotations": annotations}
        item = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [part],
        }
        response = {
            "id": "resp_1",
            "object": "response",
            "created_at": int(time.time()),
            "model": body.get("model", "m"),
            "status": "completed",
            "output": [item],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
        if not body.get("stream"):
            return web.json_response(response)
        seq = iter(range(10_000))
        empty_item = {**item, "status": "in_progress", "content": []}
        events: list[tuple[str | None, Any]] = [
            (
                "response.created",
                {
                    "type": "response.created",
                    "sequence_number": next(seq),
                    "response": {**response, "status": "in_progress", "output": []},
                },
            ),
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "sequence_number": next(seq),
                    "item": empty_item,
                },
            ),
            (
                "response.content_part.added",
                {
                    "type": "response.content_part.added",
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "sequence_number": next(seq),
                    "part": {"type": "output_text", "text": "", "annotations": []},
                },
            ),
        ]
        for piece in self._pieces(text):
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": "msg_1",
                        "output_index": 0,
                        "content_index": 0,
                        "delta": piece,
                        "sequence_number": next(seq),
                        "logprobs": [],
                    },
                )
            )
        for i, a in enumerate([] if self.behaviour == "no_annotation_events" else annotations):
            events.append(
                (
                    "response.output_text.annotation.added",
                    {
                        "type": "response.output_text.annotation.added",
                        "item_id": "msg_1",
                        "output_index": 0,
                        "content_index": 0,
                        "annotation_index": i,
                        "annotation": a,
                        "sequence_number": next(seq),
                    },
                )
            )
        events += [
            (
                "response.output_text.done",
                {
                    "type": "response.output_text.done",
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "text": text,
                    "sequence_number": next(seq),
                    "logprobs": [],
                },
            ),
            (
                "response.content_part.done",
                {
                    "type": "response.content_part.done",
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "part": part,
                    "sequence_number": next(seq),
                },
            ),
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "output_index": 0,
                    "item": item,
                    "sequence_number": next(seq),
                },
            ),
            (
                "response.completed",
                {"type": "response.completed", "response": response, "sequence_number": next(seq)},
            ),
        ]
        return await self._sse(request, events)

    # ---- Anthropic Messages

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await self._begin(request)
        if isinstance(body, web.StreamResponse):
            return body
        text, cites = self._next()
        citations = [
            {
                "type": "web_search_result_location",
                "url": c["url"],
                "title": c.get("title", ""),
                "cited_text": c["quote"],
                "encrypted_index": "x",
            }
            for c in cites
        ]
        block: dict[str, Any] = {"type": "text", "text": text}
        if citations:
            block["citations"] = citations
        message = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "m"),
            "content": [block],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 5, "output_tokens": 7},
        }
        if not body.get("stream"):
            return web.json_response(message)
        events: list[tuple[str | None, Any]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {**message, "content": [], "stop_reason": None},
                },
            ),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
        ]
        for cit in citations:
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "citations_delta", "citation": cit},
                    },
                )
            )
        for piece in self._pieces(text):
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
            )
        events += [
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 7},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return await self._sse(request, events)


class Service:
    """``create_app(settings)`` under uvicorn on 127.0.0.1, port 0, in its own loop thread."""

    def __init__(self, settings: Settings) -> None:
        self.loop = Loop()
        self.settings = settings
        self.app = create_app(settings)
        sock = listen("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
        self.server = uvicorn.Server(config)
        self._task = asyncio.run_coroutine_threadsafe(
            self.server.serve(sockets=[sock]), self.loop.loop
        )
        self.loop.run(self._started())

    async def _started(self) -> None:
        while not self.server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)
        await self.app.state.ready.wait()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.should_exit = True
        self._task.result(30)
        self.loop.stop()

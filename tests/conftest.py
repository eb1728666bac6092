"""Shared fixtures: ``farm``, a real aiohttp server on 127.0.0.1 that serves many host names.

One ``web.Application`` listens on an OS-chosen loopback port and dispatches on the ``Host``
header, so a test can talk to ``a.example.com``, ``other.example.org``, ... at once through
``farm.resolver`` (a :class:`StaticResolver` that maps every farm host to 127.0.0.1, the way
``curl --resolve`` does). Built-in routes on every host:

* ``/status/{code}`` — that status, with a short text body
* ``/slow/{seconds}`` — 200 after a delay
* ``/redirect/{n}`` — ``n`` same-host 302 hops, then 200
* ``/page/{name}`` — a file from ``tests/fixtures/pages/``

Per-test routes: ``farm.add(host, path, handler)`` with an aiohttp handler coroutine, or
``farm.add(host, path, status=..., body=..., headers=..., content_type=...)``. ``host="*"`` matches
every host; ``path="*"`` every path of the host that no other route serves. Every request is
logged in ``farm.requests`` as ``(method, host, path)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import mimetypes
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from citeguard.models import CitationReport, CitationStatus, EntailmentLabel, EntailmentScore
from citeguard.policy import FetchPolicy
from citeguard.web.fetch import StaticResolver

PAGES = Path(__file__).resolve().parent / "fixtures" / "pages"

#: Host names the farm answers for out of the box (more appear with ``farm.add``).
FARM_HOSTS: tuple[str, ...] = (
    "example.com",
    "www.example.com",
    "a.example.com",
    "b.example.com",
    "news.example.com",
    "example.org",
    "other.example.org",
    "docs.example.net",
    "shop.example.co.uk",
    "blog.example.io",
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class _FarmHosts:
    """Fallback resolver for hosts registered with ``farm.add`` after the resolver was built."""

    def __init__(self, farm: Farm) -> None:
        self._farm = farm

    async def resolve(self, host: str, port: int) -> list[str]:
        if host.lower() in self._farm.hosts:
            return ["127.0.0.1"]
        raise socket.gaierror(socket.EAI_NONAME, f"{host}: not a farm host")


class Farm:
    """A multi-host test web server. See the module docstring."""

    def __init__(self) -> None:
        self.port = 0
        self.requests: list[tuple[str, str, str]] = []
        self.hosts: set[str] = set(FARM_HOSTS)
        self._routes: dict[tuple[str, str], Handler] = {}
        self._release = asyncio.Event()  # set at teardown so slow handlers end promptly
        self.resolver = StaticResolver(dict.fromkeys(FARM_HOSTS, "127.0.0.1"), _FarmHosts(self))

    def url(self, host: str, path: str = "/") -> str:
        """``http://host:PORT/path`` on the farm."""
        if not path.startswith("/"):
            path = "/" + path
        return f"http://{host}:{self.port}{path}"

    def add(
        self,
        host: str,
        path: str,
        handler: Handler | None = None,
        *,
        status: int = 200,
        body: bytes | str = b"",
        headers: Mapping[str, str] | None = None,
        content_type: str | None = "text/html",
    ) -> str:
        """Serve ``path`` on ``host`` (``"*"``: every host); returns the URL when host is named."""
        host = host.lower()
        if handler is None:
            payload = body.encode() if isinstance(body, str) else body

            async def spec_handler(request: web.Request) -> web.StreamResponse:
                resp = web.Response(status=status, body=payload, headers=dict(headers or {}))
                if content_type is not None and "Content-Type" not in (headers or {}):
                    resp.content_type = content_type
                return resp

            handler = spec_handler
        self._routes[(host, path)] = handler
        if host != "*":
            self.hosts.add(host)
        return self.url(host, path) if host != "*" else path

    def count(self, host: str | None = None, path: str | None = None) -> int:
        """How many requests (any method) were made, optionally for one host and/or path."""
        return sum(
            1
            for _m, h, p in self.requests
            if (host is None or h == host) and (path is None or p == path)
        )

    async def sleep(self, seconds: float) -> None:
        """Sleep in a handler, ending early when the farm shuts down."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._release.wait(), seconds)

    # ---- dispatch -------------------------------------------------------------------------

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        host = (request.host or "").rsplit(":", 1)[0].lower()
        path = request.path
        self.requests.append((request.method, host, path))
        handler = (
            self._routes.get((host, path))
            or self._routes.get(("*", path))
            or self._routes.get((host, "*"))  # a host's catch-all
        )
        if handler is not None:
            return await handler(request)
        return await self._builtin(request, path)

    async def _builtin(self, request: web.Request, path: str) -> web.StreamResponse:
        parts = path.strip("/").split("/")
        if len(parts) == 2:
            kind, arg = parts
            if kind == "status" and arg.isdigit():
                return web.Response(status=int(arg), text=f"status {arg}")
            if kind == "slow":
                await self.sleep(float(arg))
                return web.Response(text=f"slept {arg}", content_type="text/html")
            if kind == "redirect" and arg.isdigit():
                n = int(arg)
                if n <= 0:
                    return web.Response(text="arrived", content_type="text/html")
                raise web.HTTPFound(f"/redirect/{n - 1}")
            if kind == "page":
                file = (PAGES / arg).resolve()
                if file.parent == PAGES and file.is_file():
                    ctype = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
                    charset = "utf-8" if ctype.startswith("text/") else None
                    return web.Response(body=file.read_bytes(), content_type=ctype, charset=charset)
        return web.Response(status=404, text="no such route")


@pytest_asyncio.fixture
async def farm() -> AsyncIterator[Farm]:
    """A fresh farm per test (function scope), listening on 127.0.0.1:<OS port>."""
    f = Farm()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", f.dispatch)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    site = web.SockSite(runner, sock)
    await site.start()
    f.port = sock.getsockname()[1]
    try:
        yield f
    finally:
        f._release.set()
        await runner.cleanup()


@pytest.fixture
def fetch_policy() -> FetchPolicy:
    """Loopback allowed, small timeouts, quick retries: for tests against the farm."""
    return FetchPolicy(
        allow_private_addresses=True,
        connect_timeout=1.0,
        url_timeout=3.0,
        answer_deadline=5.0,
        retries=2,
        retry_backoff=0.01,
        retry_after_cap=5.0,
        max_body_bytes=1024 * 1024,
        max_decompressed_bytes=2 * 1024 * 1024,
    )


class SleepRecorder:
    """An injectable ``sleep`` that records every wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleeps() -> SleepRecorder:
    """Recorded retry waits (pass as ``Fetcher(..., sleep=sleeps)``)."""
    return SleepRecorder()


def chat_completion(text: str, spans: list[tuple[int, int, str]]) -> dict[str, object]:
    """An OpenAI chat completion (as its dict): ``text`` with a ``url_citation`` annotation
    over each ``(start, end, url)``."""
    annotations = [
        {
            "type": "url_citation",
            "url_citation": {"start_index": s, "end_index": e, "url": url, "title": "t"},
        }
        for s, e, url in spans
    ]
    message = {"role": "assistant", "content": text, "annotations": annotations}
    return {"object": "chat.completion", "choices": [{"index": 0, "message": message}]}


def fresh_python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run in a fresh interpreter (nothing this process imported or built is there),
    its output captured as text; a failure raises."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )


def resolving_report(url: str = "https://a.example/x", **fields: object) -> CitationReport:
    """A citation report whose URL resolved (status ok), with ``fields`` set on it."""
    data: dict[str, object] = {
        "url": url,
        "normalized_url": url,
        "status": CitationStatus.OK,
        "reason": "ok",
    }
    data.update(fields)
    return CitationReport.model_validate(data)


class RecordingEntailer:
    """An entailer that gives every pair one label and remembers what it was asked."""

    name = "recorder"

    def __init__(
        self, label: EntailmentLabel = "uncertain", score: float = 0.5, reason: str = "?"
    ) -> None:
        self.asked: list[tuple[str, str]] = []
        self._label, self._score, self._reason = label, score, reason

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[EntailmentScore]:
        self.asked.extend(pairs)
        return [
            EntailmentScore(
                label=self._label, score=self._score, backend=self.name, reason=self._reason
            )
            for _ in pairs
        ]

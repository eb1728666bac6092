"""``citeguard serve``'s non-streamed proxy asks the upstream once for fresher sources (issue 45):
an answer citing a page stale under an uncertain faster regime passes, and the proxy makes one
more upstream call whose feedback names the stale page and its date, the page not excluded.
Driven by the ``openai`` SDK; dated pages served on 127.0.0.1 (dates relative to today)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import openai
import pytest
from aiohttp import web

from serve.servers import KEY, FakeUpstream, Loop, Service, make_settings, serve_policy

QUESTION = "What is the latest version of Frobnicator?"  # rules: fast, not vouched for
TEXT = "Frobnicator 5.2 is the latest version of the Frobnicator toolkit, with faster builds."


def _day(days_ago: int) -> str:
    return f"{datetime.now(UTC) - timedelta(days=days_ago):%Y-%m-%d}"


class DatedPages:
    """``/old``: published 90 days ago; ``/new``: 3 days ago."""

    def __init__(self, loop: Loop) -> None:
        self.loop = loop
        app = web.Application()
        app.router.add_get("/old", self._dated(90))
        app.router.add_get("/new", self._dated(3))
        self.runner = web.AppRunner(app)
        self.port = loop.run(self._start())

    @staticmethod
    def _dated(days_ago: int) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            body = (
                "<html><head><title>Frobnicator</title><meta property='article:published_time' "
                f"content='{_day(days_ago)}T08:00:00Z'></head><body><article>"
                f"<h1>Frobnicator</h1><p>{TEXT}</p></article></body></html>"
            )
            return web.Response(text=body, content_type="text/html")

        return handler

    async def _start(self) -> int:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture(scope="module")
def dated(bg_loop: Loop) -> Iterator[DatedPages]:
    p = DatedPages(bg_loop)
    yield p
    bg_loop.run(p.runner.cleanup())


@pytest.fixture(scope="module")
def fresh_service(upstream_server: FakeUpstream) -> Iterator[Service]:
    policy = serve_policy().replace(
        freshness={"enabled": True}, entailment={"check_entailment": False}
    )
    s = Service(make_settings(upstream_server, policy=policy))
    yield s
    s.close()


def _answer(url: str) -> str:
    return f"The latest version of Frobnicator is 5.2 [1].\n\n[1] {url}\n"


def _ask(service: Service) -> Any:
    client = openai.OpenAI(base_url=f"{service.url}/v1", api_key=KEY, max_retries=0, timeout=60)
    return client.chat.completions.with_raw_response.create(
        model="m",
        messages=[{"role": "user", "content": QUESTION}],
    )


def test_the_proxy_asks_once_for_fresher_sources(
    fresh_service: Service, upstream_server: FakeUpstream, dated: DatedPages
) -> None:
    old, new = dated.url("/old"), dated.url("/new")
    upstream_server.script(_answer(old), _answer(new))
    raw = _ask(fresh_service)
    assert raw.headers["x-citeguard-verdict"] == "passed"
    assert raw.headers["x-citeguard-attempts"] == "2"
    assert raw.parse().choices[0].message.content == _answer(new)
    retry = upstream_server.requests[1]["messages"][-1]["content"]
    assert old in retry and _day(90) in retry
    assert "Do not cite" not in retry  # the stale page is not banned


def test_without_a_fresher_source_the_proxy_returns_the_first_answer(
    fresh_service: Service, upstream_server: FakeUpstream, dated: DatedPages
) -> None:
    old = dated.url("/old")
    upstream_server.script(_answer(old))
    raw = _ask(fresh_service)
    assert raw.headers["x-citeguard-verdict"] == "passed"
    assert raw.headers["x-citeguard-attempts"] == "2"
    assert raw.parse().choices[0].message.content == _answer(old)
    assert len(upstream_server.requests) == 2

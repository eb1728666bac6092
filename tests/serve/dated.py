"""Dated pages on 127.0.0.1 for the freshness tests (dates relative to today), and an answer
citing one: a question the rules take for fast-changing without vouching for it, so a 90-day-old
source is stale under an uncertain regime (issue 45)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from aiohttp import web

from serve.servers import Loop, Pages

QUESTION = "What is the latest version of Frobnicator?"  # rules: fast, not vouched for
TEXT = "Frobnicator 5.2 is the latest version of the Frobnicator toolkit, with faster builds."


def day(days_ago: int) -> str:
    return f"{datetime.now(UTC) - timedelta(days=days_ago):%Y-%m-%d}"


def answer_citing(url: str) -> str:
    return f"The latest version of Frobnicator is 5.2 [1].\n\n[1] {url}\n"


class DatedPages(Pages):
    """``/old``: published 90 days ago; ``/new``: 3 days ago (served as ``Pages`` serves)."""

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
                f"content='{day(days_ago)}T08:00:00Z'></head><body><article>"
                f"<h1>Frobnicator</h1><p>{TEXT}</p></article></body></html>"
            )
            return web.Response(text=body, content_type="text/html")

        return handler

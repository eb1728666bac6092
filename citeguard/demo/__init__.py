"""The bundled demo: a realistic question, an agent that gets its citations wrong, then right.

The agent first cites a dead URL, an invented quote and a stale source. The guard rejects the
answer, the agent regenerates without the offending URLs, and the second answer passes. Every
web interaction was recorded into ``demo.sqlite`` (a snapshot), so ``citeguard demo`` replays it
offline and byte-for-byte the same every time. ``--live`` serves the same pages from a local
site on 127.0.0.1 instead; ``--record PATH`` records a fresh snapshot from that site.

The site, the project and the people in it are fictional; the pages were written for this demo.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from aiohttp import web

from citeguard.feedback import Feedback
from citeguard.models import GuardResult
from citeguard.policy import EntailmentPolicy, FetchPolicy, Policy
from citeguard.render import render_result

QUESTION = "What is the latest stable release of the Helix database, and what changed in it?"
# The recording's clock: freshness is judged against it so a replay gives the same verdict.
DEMO_NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
SNAPSHOT_FILE = "demo.sqlite"


@dataclass(frozen=True)
class _Route:
    file: str | None
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    location: str | None = None


ROUTES: dict[tuple[str, str], _Route] = {
    ("helixdb.org", "/blog/helix-5-0-released"): _Route("helixdb-release-5.html"),
    ("helixdb.org", "/releases/4-2"): _Route(None, status=404),
    ("docs.helixdb.org", "/upgrading/5.0"): _Route("helixdb-upgrade.html"),
    ("www.dbweekly-news.com", "/2026/11/helix-5-lands"): _Route("dbweekly-helix-5.html"),
    ("devnotes.io", "/posts/first-look-helix-4"): _Route("techblog-helix-4.html"),
    ("www.oswire.net", "/2026/11/helix-reaches-5"): _Route("oswire-helix-5.html"),
    # an old URL that moved within the site: the redirect is followed and passes
    ("helixdb.org", "/news/5.0"): _Route(None, status=301, location="/blog/helix-5-0-released"),
}
HOSTS = sorted({h for h, _ in ROUTES})

SEARCH_INDEX: list[dict[str, Any]] = [
    {
        "url": "http://helixdb.org/blog/helix-5-0-released",
        "title": "Helix 5.0 released",
        "content": "The Helix Database Project announced the general availability of Helix 5.0.",
        "published_date": "2026-11-18",
    },
    {
        "url": "http://www.dbweekly-news.com/2026/11/helix-5-lands",
        "title": "Helix 5.0 lands with a faster planner and vector search",
        "content": "The open-source Helix database shipped version 5.0 this week.",
        "published_date": "2026-11-19",
    },
    {
        "url": "http://www.oswire.net/2026/11/helix-reaches-5",
        "title": "Helix database reaches 5.0",
        "content": "Version 5.0 of the Helix database is out.",
        "published_date": "2026-11-21",
    },
    {
        "url": "http://docs.helixdb.org/upgrading/5.0",
        "title": "Upgrading to Helix 5.0",
        "content": "Upgrading from 4.x requires running the helix-migrate tool once.",
        "published_date": "2026-11-25",
    },
    {
        "url": "http://devnotes.io/posts/first-look-helix-4",
        "title": "A first look at Helix 4.0",
        "content": "Helix 4.0 is the latest stable release of the Helix database.",
        "published_date": "2024-03-02",
    },
    {
        "url": "http://helixdb.org/releases/4-2",
        "title": "Helix 4.2 release notes",
        "content": "Release notes for Helix 4.2.",
        "published_date": "2025-05-01",
    },
]

# Attempt 1: a dead URL, an invented quote, a stale source, and no "as of" caveat.
ANSWER_1 = """\
Helix 4.0 is the latest stable release of the Helix database and introduces a columnar storage engine [1].
The 4.2 release notes list the changes in detail [2].
Maintainer Priya Raman said the release "doubles write throughput on every workload" [3].

[1] http://devnotes.io/posts/first-look-helix-4
[2] http://helixdb.org/releases/4-2
[3] http://www.dbweekly-news.com/2026/11/helix-5-lands
"""

# Attempt 2, written without the excluded URLs and with the feedback in mind.
ANSWER_2 = """\
As of 2 December 2026, Helix 5.0 is the latest stable release of the Helix database; it became generally available on 18 November 2026 [1].
Its rewritten query planner runs analytical queries up to 40 percent faster than Helix 4.3 [1].
Helix 5.0 also adds native vector indexes, so similarity search no longer needs a separate extension [1].
Maintainer Priya Raman said the team "spent two years rebuilding the planner from scratch" [2].
The on-disk format changed, so upgrading from 4.x requires running the helix-migrate tool once on each data directory [3].

[1] http://helixdb.org/blog/helix-5-0-released
[2] http://www.oswire.net/2026/11/helix-reaches-5
[3] http://docs.helixdb.org/upgrading/5.0
"""


def demo_policy() -> Policy:
    """The demo's policy: defaults, except that the local site lives on loopback."""
    return Policy(
        fetch=FetchPolicy(allow_private_addresses=True, url_timeout=5.0, answer_deadline=10.0),
        entailment=EntailmentPolicy(backend="local"),
    )


def _site_dir() -> Path:
    return Path(str(resources.files("citeguard.demo") / "site"))


def snapshot_path() -> Path:
    return Path(str(resources.files("citeguard.demo") / SNAPSHOT_FILE))


@asynccontextmanager
async def serve_site() -> AsyncIterator[int]:
    """Serve the demo pages on 127.0.0.1 (an OS-chosen port), dispatching on the Host header."""
    site = _site_dir()

    async def handle(request: web.Request) -> web.StreamResponse:
        host = (request.host or "").split(":", 1)[0].lower()
        route = ROUTES.get((host, request.path))
        if route is None:
            return web.Response(status=404, text="not found")
        if route.location is not None:
            return web.Response(status=route.status, headers={"Location": route.location})
        if route.file is None:
            return web.Response(status=route.status, text="not found")
        body = (site / route.file).read_bytes()
        return web.Response(
            status=route.status, body=body, headers={"Content-Type": route.content_type}
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = runner.addresses[0][1]
    try:
        yield int(port)
    finally:
        await runner.cleanup()


async def search_tool(query: str) -> dict[str, Any]:
    """The demo's search API: a fixed index, returned in Tavily's shape."""
    words = {w.lower().strip("?,.") for w in query.split()}
    hits = [r for r in SEARCH_INDEX if words & set(r["title"].lower().split())]
    return {"query": query, "results": hits}


def make_agent(search: Any) -> Any:
    """A scripted agent: searches, then answers; it learns only from ``exclude_urls``."""

    async def agent(
        question: str,
        *,
        exclude_urls: frozenset[str] = frozenset(),
        feedback: Feedback | None = None,
    ) -> str:
        await search("latest stable release Helix database")
        if not exclude_urls:
            return ANSWER_1
        await search("Helix 5.0 release changes")
        return ANSWER_2

    return agent


async def run_scenario(*, live: bool = False, record: str | None = None) -> GuardResult:
    """Run the demo once: replay the bundled snapshot, or serve the site and run live/record."""
    from citeguard.guard import Guard
    from citeguard.snapshot import SnapshotMode, SQLiteSnapshotStore
    from citeguard.web.fetch import StaticResolver

    if not live and record is None:
        store = SQLiteSnapshotStore(snapshot_path(), read_only=True)
        try:
            async with Guard(
                demo_policy(), cache=store, snapshot_mode=SnapshotMode.REPLAY, now=lambda: DEMO_NOW
            ) as guard:
                agent = guard.wrap(make_agent(guard.wrap_search(search_tool, provider="demo")))
                result: GuardResult = await agent(QUESTION)
                return result
        finally:
            await store.close()

    async with serve_site() as port:
        resolver = StaticResolver({h: f"127.0.0.1:{port}" for h in HOSTS})
        store_ctx = SQLiteSnapshotStore(Path(record)) if record else None
        try:
            async with Guard(
                demo_policy(),
                cache=store_ctx,
                snapshot_mode=SnapshotMode.RECORD if store_ctx else SnapshotMode.LIVE,
                resolver=resolver,
                now=lambda: DEMO_NOW,
            ) as guard:
                if store_ctx is not None:
                    await store_ctx.begin_version("demo")
                agent = guard.wrap(make_agent(guard.wrap_search(search_tool, provider="demo")))
                result = await agent(QUESTION)
                if store_ctx is not None:
                    await store_ctx.record_verdict("demo", result.verdict)
                return result
        finally:
            if store_ctx is not None:
                await store_ctx.close()


def run_demo(
    *, out: TextIO, as_json: bool = False, live: bool = False, record: str | None = None
) -> int:
    """``citeguard demo``: print each attempt's four-axis vector and the final answer."""
    result = asyncio.run(run_scenario(live=live, record=record))
    if as_json:
        out.write(json.dumps(result.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
    else:
        out.write(f"question: {QUESTION}\n\n")
        out.write(render_result(result))
        out.write("\nfinal answer shown to the user:\n\n" + result.answer + "\n")
    return 0 if result.passed else 1

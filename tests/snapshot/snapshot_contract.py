"""The SnapshotStore contract, as async checks any backend must pass.

``tests/snapshot/test_snapshot.py`` (SQLite) and ``tests/snapshot/test_snapshot_redis.py`` (a real
redis-server) call these with their own stores, so both backends are held to the same behaviour.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from citeguard.errors import SnapshotMiss
from citeguard.models import (
    AxisResult,
    CitationStatus,
    FetchResult,
    Page,
    SearchRecord,
    SearchResult,
    Verdict,
)
from citeguard.snapshot import SnapshotFetcher, SnapshotMode, SnapshotStore, snapshot_search

StoreFactory = Callable[[], SnapshotStore]

WHEN = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def fetch_result(url: str, body: bytes | None = b"<html>hi</html>", **kw: Any) -> FetchResult:
    base: dict[str, Any] = {
        "url": url,
        "final_url": url,
        "status": CitationStatus.OK,
        "reason": "200 OK",
        "http_status": 200,
        "method": "GET",
        "headers": {"content-type": "text/html; charset=utf-8", "etag": '"abc"'},
        "content_type": "text/html",
        "body": body,
        "fetched_at": WHEN,
        "elapsed_ms": 12.5,
    }
    base.update(kw)
    return FetchResult(**base)


def verdict(passed: bool, **scores: tuple[bool, float | None]) -> Verdict:
    axes = {name: AxisResult(name=name, passed=p, score=s) for name, (p, s) in scores.items()}
    return Verdict(passed=passed, axes=axes)


# --------------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------------


async def check_round_trips(store: SnapshotStore) -> None:
    assert await store.current_version() is None
    assert await store.get_fetch("GET", "https://a.example.com/x") is None

    ok = fetch_result(
        "https://a.example.com/x",
        body=bytes(range(256)) * 40,  # binary, not text: bodies are bytes end to end
        redirects=["http://a.example.com/x", "https://a.example.com/x"],
    )
    gone = fetch_result(
        "https://a.example.com/gone",
        body=None,
        status=CitationStatus.NOT_FOUND,
        reason="404 Not Found",
        http_status=404,
    )
    empty = fetch_result("https://a.example.com/empty", body=b"")
    await store.put_fetch(ok, method="GET")
    await store.put_fetch(gone, method="HEAD")
    await store.put_fetch(empty, method="get")
    assert await store.current_version() == 1  # the first write made version 1

    got = await store.get_fetch("GET", "https://a.example.com/x")
    assert got is not None
    assert got.body == ok.body
    assert got.model_dump_json() == ok.model_dump_json()  # every field, timestamp included
    # the key is normalised: case of scheme/host, default port, fragment do not matter
    alias = await store.get_fetch("get", "HTTPS://A.Example.COM:443/x#section")
    assert alias is not None and alias.body == ok.body
    g2 = await store.get_fetch("HEAD", "https://a.example.com/gone")
    assert g2 is not None and g2.body is None and g2.status is CitationStatus.NOT_FOUND
    assert await store.get_fetch("GET", "https://a.example.com/gone") is None  # method matters
    e2 = await store.get_fetch("GET", "https://a.example.com/empty")
    assert e2 is not None and e2.body == b""  # empty body is not "no body"

    rec = SearchRecord(
        query="EU AI Act obligations 2025",
        provider="tavily",
        results=[SearchResult(url="https://eur-lex.europa.eu/x", title="AI Act", rank=1)],
        raw={"results": [{"url": "https://eur-lex.europa.eu/x", "title": "AI Act"}]},
        elapsed_ms=321.0,
    )
    await store.put_search(rec)
    s2 = await store.get_search("tavily", "EU AI Act obligations 2025")
    assert s2 == rec
    assert await store.get_search("tavily", "EU AI Act obligations 2025 ") is None  # literal
    assert await store.get_search("exa", "EU AI Act obligations 2025") is None

    page = Page(
        url="https://a.example.com/x",
        kind="html",
        text="All visible text",
        main_text="Main",
        title="T",
        published=WHEN,
        types=["NewsArticle"],
    )
    await store.put_page("https://a.example.com/x", "v3", page)
    assert await store.get_page("https://a.example.com/x", "v3") == page
    assert await store.get_page("https://a.example.com/x", "v4") is None


async def check_body_dedup(store: SnapshotStore) -> None:
    body = b"<html>" + b"same body " * 2000 + b"</html>"
    for i in range(3):
        await store.put_fetch(fetch_result(f"https://m{i}.example.com/", body=body), method="GET")
    await store.put_fetch(fetch_result("https://m0.example.com/", body=body), method="HEAD")
    assert await store.count_bodies() == 1
    await store.put_fetch(fetch_result("https://other.example.com/", body=b"other"), method="GET")
    assert await store.count_bodies() == 2
    for i in range(3):
        got = await store.get_fetch("GET", f"https://m{i}.example.com/")
        assert got is not None and got.body == body


# --------------------------------------------------------------------------------------------
# Versions, baselines, diff, prune
# --------------------------------------------------------------------------------------------


async def check_versions_and_diff(store: SnapshotStore) -> None:
    v1 = await store.begin_version("first")
    await store.put_fetch(fetch_result("https://s.example.com/a", body=b"A1"), method="GET")
    await store.put_fetch(fetch_result("https://s.example.com/b", body=b"B"), method="GET")
    await store.put_search(
        SearchRecord(query="q", provider="p", results=[SearchResult(url="https://s.example.com/a")])
    )
    await store.record_verdict("case-1", verdict(True, validity=(True, 1.0), freshness=(True, 0.9)))
    await store.record_verdict("case-2", verdict(True, validity=(True, 1.0)))

    v2 = await store.begin_version("second")
    assert v2 == v1 + 1 and await store.current_version() == v2
    # a re-snapshot: /a changed, /c is new, /b not re-fetched (inherited); a search moved
    await store.put_fetch(fetch_result("https://s.example.com/a", body=b"A2"), method="GET")
    await store.put_fetch(
        fetch_result(
            "https://s.example.com/c",
            body=None,
            status=CitationStatus.GONE,
            reason="410",
            http_status=410,
        ),
        method="GET",
    )
    await store.put_search(
        SearchRecord(query="q", provider="p", results=[SearchResult(url="https://s.example.com/c")])
    )
    await store.record_verdict(
        "case-1", verdict(False, validity=(False, 0.5), freshness=(True, 0.9))
    )
    await store.record_verdict("case-3", verdict(True, validity=(True, 1.0)))

    # reads resolve at the active version: v2 sees its own entries and the inherited /b
    a = await store.get_fetch("GET", "https://s.example.com/a")
    assert a is not None and a.body == b"A2"
    b = await store.get_fetch("GET", "https://s.example.com/b")
    assert b is not None and b.body == b"B"
    v = await store.get_verdict("case-1")
    assert v is not None and v.passed is False
    # pinned to v1, nothing written later is visible, and nothing falls back beyond it
    await store.use_version(v1)
    a1 = await store.get_fetch("GET", "https://s.example.com/a")
    assert a1 is not None and a1.body == b"A1"
    assert await store.get_fetch("GET", "https://s.example.com/c") is None
    assert await store.get_verdict("case-3") is None
    await store.use_version(v2)

    versions = await store.list_versions()
    assert [(x.version, x.label, x.fetches, x.verdicts) for x in versions] == [
        (v1, "first", 2, 2),
        (v2, "second", 2, 2),
    ]
    detail = await store.show_version(v2)
    assert detail.visible["fetch"] == 3 and detail.visible["verdict"] == 3
    assert {(f.url, f.version) for f in detail.fetches} == {
        ("https://s.example.com/a", v2),
        ("https://s.example.com/b", v1),
        ("https://s.example.com/c", v2),
    }
    c1 = next(x for x in detail.baselines if x.case_id == "case-1")
    assert c1.passed is False and c1.axes["validity"].score == 0.5

    diff = await store.diff(v1, v2)
    pages = {p.url: p for p in diff.pages}
    assert set(pages) == {"https://s.example.com/a", "https://s.example.com/c"}
    assert pages["https://s.example.com/a"].change == "changed"
    assert (
        pages["https://s.example.com/a"].body_hash_before
        != pages["https://s.example.com/a"].body_hash_after
    )
    assert pages["https://s.example.com/c"].change == "added"
    assert pages["https://s.example.com/c"].status_after is CitationStatus.GONE
    assert [(s.query, s.change, s.urls_after) for s in diff.searches] == [
        ("q", "changed", ["https://s.example.com/c"])
    ]
    moved = {x.case_id: x for x in diff.verdicts}
    assert set(moved) == {"case-1", "case-3"}  # case-2 did not move
    assert moved["case-1"].change == "moved"
    assert (moved["case-1"].passed_before, moved["case-1"].passed_after) == (True, False)
    assert [
        (m.axis, m.passed_before, m.passed_after, m.score_after) for m in moved["case-1"].axes
    ] == [("validity", True, False, 0.5)]  # freshness did not move
    assert moved["case-3"].change == "added"
    back = await store.diff(v2, v1)
    assert {p.url: p.change for p in back.pages}["https://s.example.com/c"] == "removed"
    assert (await store.diff(v2, v2)).is_empty


async def check_prune(store: SnapshotStore) -> None:
    v1 = await store.begin_version("v1")
    await store.put_fetch(fetch_result("https://p.example.com/keep", body=b"K"), method="GET")
    await store.put_fetch(fetch_result("https://p.example.com/old", body=b"OLD"), method="GET")
    await store.record_verdict("case", verdict(True, validity=(True, 1.0)))
    v2 = await store.begin_version("v2")
    await store.put_fetch(fetch_result("https://p.example.com/old", body=b"NEW2"), method="GET")
    v3 = await store.begin_version("v3")
    await store.put_fetch(fetch_result("https://p.example.com/old", body=b"NEW3"), method="GET")
    assert await store.count_bodies() == 4

    before = {v: (await store.show_version(v)) for v in (v2, v3)}
    assert await store.prune(keep=2) == 1
    assert [x.version for x in await store.list_versions()] == [v2, v3]
    for v in (v2, v3):  # every kept version replays exactly as before
        after = await store.show_version(v)
        assert [(f.url, f.body_hash) for f in after.fetches] == [
            (f.url, f.body_hash) for f in before[v].fetches
        ]
        assert [(b.case_id, b.passed) for b in after.baselines] == [
            (b.case_id, b.passed) for b in before[v].baselines
        ]
    assert await store.count_bodies() == 3  # OLD is orphaned and gone
    await store.use_version(v2)
    keep = await store.get_fetch("GET", "https://p.example.com/keep")
    assert keep is not None and keep.body == b"K"  # inherited from the dropped v1
    assert await store.get_verdict("case") is not None
    with pytest.raises(Exception, match="no snapshot version"):
        await store.use_version(v1)
    assert await store.prune(keep=5) == 0
    assert await store.verify() == 3


# --------------------------------------------------------------------------------------------
# Concurrency
# --------------------------------------------------------------------------------------------

WRITER_SCRIPT = r"""
import asyncio, sys
from citeguard.snapshot import open_store
from citeguard.models import FetchResult, SearchRecord

location, namespace, prefix, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

async def main():
    store = open_store(location, namespace=namespace)
    await store.current_version()  # open (and migrate) before the barrier
    print("ready", flush=True)
    sys.stdin.readline()  # the barrier: every writer starts at once
    async def one(i):
        url = f"https://{prefix}.example.com/{i}"
        body = f"{prefix} body {i}".encode()
        result = FetchResult(url=url, status="ok", reason="ok", body=body)
        await store.put_fetch(result, method="GET")
        await store.put_search(SearchRecord(query=f"{prefix} {i}", provider="proc"))
    await asyncio.gather(*(one(i) for i in range(n)))
    await store.close()
    print("done", flush=True)

asyncio.run(main())
"""


async def check_concurrent_writers(
    store_factory: StoreFactory, location: str, namespace: str, *, tasks: int, per_process: int
) -> None:
    store = store_factory()
    await store.begin_version("concurrency")
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            WRITER_SCRIPT,
            location,
            namespace,
            f"proc{k}",
            str(per_process),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for k in range(2)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            assert (await p.stdout.readline()).strip() == b"ready"

        async def one(i: int) -> None:
            url = f"https://task.example.com/{i}"
            await store.put_fetch(fetch_result(url, body=f"task body {i}".encode()), method="GET")

        for p in procs:
            assert p.stdin is not None
            p.stdin.write(b"go\n")
            await p.stdin.drain()
        await asyncio.gather(*(one(i) for i in range(tasks)))
        for p in procs:
            out, _ = await p.communicate()
            assert p.returncode == 0
            assert out.strip() == b"done"
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()
        await store.close()

    fresh = store_factory()
    try:
        detail = await fresh.show_version()
        assert detail.visible["fetch"] == tasks + 2 * per_process
        assert detail.visible["search"] == 2 * per_process
        assert await fresh.count_bodies() == tasks + 2 * per_process
        for url, body in (
            ("https://task.example.com/0", b"task body 0"),
            (f"https://task.example.com/{tasks - 1}", f"task body {tasks - 1}".encode()),
            ("https://proc0.example.com/7", b"proc0 body 7"),
            (
                f"https://proc1.example.com/{per_process - 1}",
                f"proc1 body {per_process - 1}".encode(),
            ),
        ):
            got = await fresh.get_fetch("GET", url)
            assert got is not None and got.body == body
    finally:
        await fresh.close()


# --------------------------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------------------------


class NeverBuilt:
    """An inner-fetcher factory that records being called (replay must never call it)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        raise AssertionError("replay built a live fetcher")


async def check_replay_miss(store: SnapshotStore) -> None:
    await store.put_fetch(fetch_result("https://r.example.com/known"), method="GET")
    factory = NeverBuilt()
    f = SnapshotFetcher(factory, store, SnapshotMode.REPLAY)
    with pytest.raises(SnapshotMiss, match=r"https://r\.example\.com/unknown") as info:
        await f.fetch("https://r.example.com/unknown")
    assert info.value.key == "https://r.example.com/unknown"
    with pytest.raises(SnapshotMiss, match=r"https://r\.example\.com/second"):
        await f.fetch_all(["https://r.example.com/known", "https://r.example.com/second"])
    # a GET recording answers a body-less check, without the body
    head = await f.fetch("https://r.example.com/known", want_body=False)
    assert head.body is None and head.from_cache

    async def never() -> Any:
        raise AssertionError("replay called the search tool")

    with pytest.raises(SnapshotMiss, match="exa: what is new in pydantic 3"):
        await snapshot_search(store, "replay", "exa", "what is new in pydantic 3", never)
    await f.aclose()
    assert factory.calls == 0


@contextmanager
def socket_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Refuse (and log) every outgoing connection or DNS lookup while active."""
    attempts: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(repr(args[1:])[:80])
        raise OSError("network access during replay")

    async def refuse_async(*args: Any, **kwargs: Any) -> Any:
        return refuse(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(socket.socket, "connect", refuse)
        m.setattr(socket.socket, "connect_ex", refuse)
        m.setattr(socket, "create_connection", refuse)
        m.setattr(socket, "getaddrinfo", refuse)
        m.setattr(asyncio.base_events.BaseEventLoop, "create_connection", refuse_async)
        m.setattr(asyncio.base_events.BaseEventLoop, "getaddrinfo", refuse_async)
        m.setattr(asyncio.base_events.BaseEventLoop, "sock_connect", refuse_async)
        yield attempts

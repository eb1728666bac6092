"""The SnapshotStore contract, as async checks any backend must pass.

``tests/snapshot/test_snapshot.py`` (SQLite) and ``tests/snapshot/test_snapshot_redis.py`` (a real
redis-server) call these with their own stores, so both backends are held to the same behaviour.
"""

from __future__ import annotations

import asyncio
import re
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import pytest

from citeguard.errors import CiteguardError, SnapshotCorrupt, SnapshotMiss
from citeguard.models import (
    AxisResult,
    CitationStatus,
    FetchResult,
    Page,
    SearchRecord,
    SearchResult,
    Verdict,
)
from citeguard.snapshot import (
    JudgeRecord,
    SnapshotDamaged,
    SnapshotEntryCorrupt,
    SnapshotFetcher,
    SnapshotMode,
    SnapshotStore,
    VerifyReport,
    judge_key,
    snapshot_search,
)
from citeguard.snapshot.base import LAYERS, body_digest, entry_key

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


async def check_judge_layer(store: SnapshotStore) -> None:
    """The judge layer: records keyed by (model, prompts), inherited by later versions, pruned
    like the others, counted per version."""
    key = judge_key("judge-model", "system prompt", "user prompt")
    assert len(key) == 64 and key == judge_key("judge-model", "system prompt", "user prompt")
    others = {
        judge_key("other-model", "system prompt", "user prompt"),
        judge_key("judge-model", "system prompt!", "user prompt"),
        judge_key("judge-model", "system prompt", "user prompt "),
        judge_key("judge-model", "system promptuser", " prompt"),  # no ambiguous joins
    }
    assert key not in others and len(others) == 4
    assert await store.get_judge(key) is None

    answered = JudgeRecord(
        model="judge-model",
        reply={"verdicts": [{"id": "1", "label": "supported", "confidence": 0.9, "reason": "é"}]},
        requests=2,
        prompt_tokens=1234,
        completion_tokens=56,
    )
    failed_key = judge_key("judge-model", "system prompt", "another claim")
    failed = JudgeRecord(
        model="judge-model",
        error="HTTP 503",
        message="judge returned HTTP 503",
        retryable=True,
        requests=3,
    )
    await store.put_judge(key, answered)
    await store.put_judge(failed_key, failed)
    assert await store.get_judge(key) == answered
    assert await store.get_judge(failed_key) == failed
    v1 = await store.current_version()
    assert v1 is not None

    v2 = await store.begin_version("judge re-record")
    assert await store.get_judge(key) == answered  # inherited from v1
    changed = answered.model_copy(update={"prompt_tokens": 999, "requests": 1})
    await store.put_judge(key, changed)
    assert await store.get_judge(key) == changed
    await store.use_version(v1)
    assert await store.get_judge(key) == answered  # v1 never sees what v2 wrote
    await store.use_version(v2)

    counts = {x.version: x.judges for x in await store.list_versions()}
    assert counts[v1] == 2 and counts[v2] == 1
    assert (await store.show_version(v2)).visible["judge"] == 2

    assert await store.prune(keep=1) == 1
    assert await store.get_judge(key) == changed
    assert await store.get_judge(failed_key) == failed  # re-stamped to the kept version


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


# --------------------------------------------------------------------------------------------
# Integrity: whatever changes behind the store's back is caught, named, and listed by verify
# --------------------------------------------------------------------------------------------


class Tamper(Protocol):
    """Direct access to a store's stored bytes, behind its API (sqlite3 / the redis client).

    ``key`` is the stored entry key (``entry_key(...)``); ``version`` None means the entry's
    newest version.
    """

    def stored(self, layer: str, key: str, version: int | None = None) -> bytes:
        """The stored bytes of the entry a bit flip goes into (SQLite: its data; Redis: its
        whole envelope)."""
        ...

    def overwrite(self, layer: str, key: str, value: bytes, version: int | None = None) -> None:
        """Put ``value`` back where :meth:`stored` read from."""
        ...

    def data(self, layer: str, key: str) -> str:
        """The entry's data (its model's JSON)."""
        ...

    def set_data(self, layer: str, key: str, data: str) -> None:
        """Replace the entry's data, leaving everything else (its checksum included) alone."""
        ...

    def swap(self, layer: str, key_a: str, key_b: str) -> None:
        """Entry A as stored (data, checksum, everything) under key B, and B's under A."""
        ...

    def stored_body(self, body_hash: str) -> bytes: ...

    def overwrite_body(self, body_hash: str, value: bytes) -> None: ...

    def unseal(self) -> None:
        """Make every entry look written before checksums existed."""
        ...

    def names(self, layer: str, key: str) -> set[str]:
        """The names verify may give the entry when its stored key is unreadable too."""
        ...


@dataclass(frozen=True)
class Probe:
    """One entry of one layer, with the call that replays it and what it must return."""

    layer: str
    key: str  # the stored entry key
    read: Callable[[SnapshotStore], Awaitable[Any]]
    expected: Any


PROBE_URL = "https://integrity.example.com/page"
PROBE_BODY = b"<html><p>" + b"integrity matters " * 300 + b"</p></html>"
PROBE_JUDGE = judge_key("judge-model", "system prompt", "is the claim supported?")


async def write_probes(store: SnapshotStore) -> dict[str, Probe]:
    """One entry in every layer; returns them by layer."""
    fetched = fetch_result(PROBE_URL, body=PROBE_BODY)
    searched = SearchRecord(
        query="integrity query",
        provider="tavily",
        results=[SearchResult(url=PROBE_URL, title="Integrity", rank=1)],
        raw={"results": [{"url": PROBE_URL, "title": "Integrity"}]},
    )
    page = Page(url=PROBE_URL, kind="html", text="All visible text", main_text="Main", title="T")
    baseline = verdict(True, validity=(True, 1.0), freshness=(True, 0.75))
    judged = JudgeRecord(
        model="judge-model",
        reply={"verdicts": [{"id": "1", "label": "supported", "confidence": 0.9}]},
        requests=1,
        prompt_tokens=100,
        completion_tokens=20,
    )
    await store.put_fetch(fetched, method="GET")
    await store.put_search(searched)
    await store.put_page(PROBE_URL, "x1", page)
    await store.record_verdict("case-i", baseline)
    await store.mark_case("case-i")
    await store.put_judge(PROBE_JUDGE, judged)
    probes = [
        Probe(
            "fetch", entry_key("GET", PROBE_URL), lambda s: s.get_fetch("GET", PROBE_URL), fetched
        ),
        Probe(
            "search",
            entry_key("tavily", "integrity query"),
            lambda s: s.get_search("tavily", "integrity query"),
            searched,
        ),
        Probe("page", entry_key(PROBE_URL, "x1"), lambda s: s.get_page(PROBE_URL, "x1"), page),
        Probe("verdict", entry_key("case-i"), lambda s: s.get_verdict("case-i"), baseline),
        Probe("case", entry_key("case-i"), lambda s: s.has_case("case-i"), True),
        Probe("judge", entry_key(PROBE_JUDGE), lambda s: s.get_judge(PROBE_JUDGE), judged),
    ]
    assert {p.layer for p in probes} == set(LAYERS)  # every layer the store has
    return {p.layer: p for p in probes}


def fetch_probe(url: str) -> Probe:
    """A GET fetch entry (what it must return is not checked)."""

    async def read(store: SnapshotStore) -> FetchResult | None:
        return await store.get_fetch("GET", url)

    return Probe("fetch", entry_key("GET", url), read, None)


def flip(data: bytes, bit: int) -> bytes:
    """``data`` with one bit flipped (bit 0 is the lowest bit of the first byte)."""
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


async def reads_back(store: SnapshotStore, probe: Probe) -> None:
    got = await probe.read(store)
    if isinstance(probe.expected, FetchResult):
        assert isinstance(got, FetchResult)
        assert got.model_dump_json() == probe.expected.model_dump_json()
        assert got.body == probe.expected.body
    else:
        assert got == probe.expected


async def read_is_damaged(
    store: SnapshotStore, probe: Probe, problem: str | None = None
) -> SnapshotEntryCorrupt:
    """Replaying the entry raises SnapshotEntryCorrupt naming it, never another value."""
    with pytest.raises(SnapshotEntryCorrupt) as info:
        got = await probe.read(store)
        pytest.fail(f"a damaged {probe.layer} entry replayed as {got!r:.200}")
    e = info.value
    assert isinstance(e, SnapshotCorrupt)
    assert (e.layer, e.key) == (probe.layer, probe.key)
    assert f"{probe.layer} entry {probe.key}" in str(e)
    if problem is not None:
        assert re.search(problem, e.problem), e.problem
    return e


async def damage_report(store: SnapshotStore) -> VerifyReport:
    """verify() without raising, and checks that verify() raises with the same full list."""
    report = await store.verify(raise_on_damage=False)
    assert isinstance(report, VerifyReport)
    if report.ok:
        assert await store.verify() == report.bodies
        return report
    with pytest.raises(SnapshotDamaged) as info:
        await store.verify()
    assert isinstance(info.value, SnapshotCorrupt)
    assert info.value.damaged == report.damaged
    for d in report.damaged:
        assert f"{d.layer} {d.key}" in str(info.value)  # the message lists every one
    return report


def assert_listed(report: VerifyReport, tamper: Tamper, *probes: Probe) -> None:
    """verify listed exactly these entries as damaged."""
    assert len(report.damaged) == len(probes), report.damaged
    for probe in probes:
        names = tamper.names(probe.layer, probe.key)
        hits = [d for d in report.damaged if d.layer == probe.layer and d.key in names]
        assert len(hits) == 1, (probe.layer, probe.key, report.damaged)


async def check_clean_store_verifies(store: SnapshotStore) -> None:
    probes = await write_probes(store)
    for probe in probes.values():
        await reads_back(store, probe)
    report = await store.verify()
    assert report.ok and report == 1  # one body; as an int, what verify always returned
    assert report.entries == len(LAYERS) and report.checked == len(LAYERS)
    assert report.unchecked == () and report.damaged == () and report.problems == ()
    detail = await store.show_version()
    assert detail.visible["fetch"] == 1


async def check_flipped_bit(
    store: SnapshotStore, tamper: Tamper, layer: str, pick: Callable[[int], int]
) -> None:
    """One bit flipped anywhere in one entry's stored bytes (``pick(n)`` chooses which of n)."""
    probes = await write_probes(store)
    probe = probes[layer]
    original = tamper.stored(layer, probe.key)
    tamper.overwrite(layer, probe.key, flip(original, pick(len(original) * 8)))
    await read_is_damaged(store, probe)
    assert_listed(await damage_report(store), tamper, probe)
    for other in probes.values():
        if other is not probe:
            await reads_back(store, other)


async def check_flipped_bits_in_every_layer(store: SnapshotStore, tamper: Tamper) -> None:
    """In every layer, bits at the start, middle and end of the entry: each flip is caught on
    replay and by verify, the other layers still replay, and restoring the bytes heals it."""
    probes = await write_probes(store)
    for probe in probes.values():
        original = tamper.stored(probe.layer, probe.key)
        n = len(original) * 8
        for bit in sorted({0, 7, 8, n // 3, n // 2, n - 9, n - 1}):
            tamper.overwrite(probe.layer, probe.key, flip(original, bit))
            await read_is_damaged(store, probe)
            assert_listed(await damage_report(store), tamper, probe)
            for other in probes.values():
                if other is not probe:
                    await reads_back(store, other)
            tamper.overwrite(probe.layer, probe.key, original)
            await reads_back(store, probe)
    assert (await store.verify()).ok


async def check_forged_values(store: SnapshotStore, tamper: Tamper) -> None:
    """Data replaced by other *valid* data (what replays as a different verdict today): a
    status, a header, a search result, a page's text, a verdict, a judge's reply."""
    probes = await write_probes(store)
    forgeries: dict[str, Callable[[str], str]] = {
        "fetch": lambda d: d.replace('"http_status":200', '"http_status":404'),
        "search": lambda d: d.replace("integrity.example.com", "integritx.example.com"),
        "page": lambda d: d.replace("All visible text", "All visible test"),
        "verdict": lambda d: d.replace('"passed":true', '"passed":false', 1),
        "case": lambda d: '{"x":1}',
        "judge": lambda d: d.replace('"supported"', '"unsupported"'),
    }
    headers = tamper.data("fetch", probes["fetch"].key)
    assert '"etag":"\\"abc\\""' in headers
    for layer, forge in forgeries.items():
        probe = probes[layer]
        before = tamper.data(layer, probe.key)
        after = forge(before)
        assert after != before, layer
        tamper.set_data(layer, probe.key, after)
        await read_is_damaged(store, probe, "checksum mismatch")
    assert_listed(await damage_report(store), tamper, *probes.values())
    # one more: only a header changed
    fetch = probes["fetch"]
    tamper.set_data("fetch", fetch.key, headers.replace('\\"abc\\"', '\\"abd\\"'))
    await read_is_damaged(store, fetch, "checksum mismatch")


async def check_truncated_entries(store: SnapshotStore, tamper: Tamper) -> None:
    """Every layer's entry cut short at once: each replay fails naming it; verify lists all."""
    probes = await write_probes(store)
    for i, probe in enumerate(probes.values()):
        original = tamper.stored(probe.layer, probe.key)
        cut = (len(original) // 2, len(original) - 1, 0)[i % 3]
        tamper.overwrite(probe.layer, probe.key, original[:cut])
    for probe in probes.values():
        await read_is_damaged(store, probe)
    report = await damage_report(store)
    assert_listed(report, tamper, *probes.values())
    assert report.entries == len(LAYERS) and report.checked == 0


async def check_swapped_entries(store: SnapshotStore, tamper: Tamper) -> None:
    """Entry A's data under key B (and B's under A): whole entries, or only their data."""
    a_url, b_url = "https://swap.example.com/a", "https://swap.example.com/b"
    await store.put_fetch(fetch_result(a_url, body=b"A body"), method="GET")
    await store.put_fetch(
        fetch_result(b_url, body=None, status=CitationStatus.NOT_FOUND, http_status=404),
        method="GET",
    )
    await store.record_verdict("case-a", verdict(True, validity=(True, 1.0)))
    await store.record_verdict("case-b", verdict(False, validity=(False, 0.0)))
    a, b = fetch_probe(a_url), fetch_probe(b_url)
    va = Probe("verdict", entry_key("case-a"), lambda s: s.get_verdict("case-a"), None)
    vb = Probe("verdict", entry_key("case-b"), lambda s: s.get_verdict("case-b"), None)
    assert (await store.verify()).ok

    tamper.swap("fetch", a.key, b.key)
    tamper.swap("verdict", va.key, vb.key)
    for probe in (a, b, va, vb):
        await read_is_damaged(store, probe)
    assert_listed(await damage_report(store), tamper, a, b, va, vb)
    with pytest.raises(SnapshotEntryCorrupt):
        await store.show_version()  # views check what they read too
    tamper.swap("fetch", a.key, b.key)
    tamper.swap("verdict", va.key, vb.key)
    assert (await store.verify()).ok

    da, db = tamper.data("verdict", va.key), tamper.data("verdict", vb.key)
    tamper.set_data("verdict", va.key, db)
    tamper.set_data("verdict", vb.key, da)
    await read_is_damaged(store, va, "checksum mismatch")
    await read_is_damaged(store, vb, "checksum mismatch")
    assert_listed(await damage_report(store), tamper, va, vb)


async def check_damaged_bodies(store: SnapshotStore, tamper: Tamper) -> None:
    """A flipped bit in a stored (compressed) body fails every entry that uses it, by name."""
    shared, own = b"<html>shared " * 500 + b"</html>", b"<html>own body</html>"
    urls = ["https://body.example.com/1", "https://body.example.com/2"]
    for url in urls:
        await store.put_fetch(fetch_result(url, body=shared), method="GET")
    await store.put_fetch(fetch_result("https://body.example.com/own", body=own), method="GET")
    one, two, mine = (fetch_probe(u) for u in (*urls, "https://body.example.com/own"))
    packed = tamper.stored_body(body_digest(shared))
    for bit in (0, len(packed) * 4, len(packed) * 8 - 1):
        tamper.overwrite_body(body_digest(shared), flip(packed, bit))
        for probe in (one, two):
            await read_is_damaged(store, probe, "does not inflate|does not match its sha256")
        got = await store.get_fetch("GET", "https://body.example.com/own")
        assert got is not None and got.body == own
        assert_listed(await damage_report(store), tamper, one, two)
    own_packed = tamper.stored_body(body_digest(own))
    tamper.overwrite_body(body_digest(own), own_packed[: len(own_packed) // 2])  # truncated
    await read_is_damaged(store, mine, "does not inflate")
    assert_listed(await damage_report(store), tamper, one, two, mine)
    tamper.overwrite_body(body_digest(shared), packed)
    tamper.overwrite_body(body_digest(own), own_packed)
    assert (await store.verify()).ok


async def check_verify_sees_every_version(store: SnapshotStore, tamper: Tamper) -> None:
    """Damage in an entry only an older version sees: replay at the newest version is not
    affected, verify still finds it, and a replay pinned to that version fails on it."""
    url = "https://versions.example.com/"
    v1 = await store.begin_version("one")
    await store.put_fetch(fetch_result(url, body=b"first"), method="GET")
    v2 = await store.begin_version("two")
    await store.put_fetch(fetch_result(url, body=b"second"), method="GET")
    probe = fetch_probe(url)
    old = tamper.stored("fetch", probe.key, version=v1)
    tamper.overwrite("fetch", probe.key, flip(old, len(old) * 4), version=v1)
    got = await store.get_fetch("GET", url)
    assert got is not None and got.body == b"second"  # v2's own entry is intact
    report = await damage_report(store)
    assert_listed(report, tamper, probe)
    assert report.damaged[0].version == v1
    await store.use_version(v1)
    e = await read_is_damaged(store, probe)
    assert e.version == v1
    with pytest.raises(SnapshotEntryCorrupt):
        await store.diff(v1, v2)
    await store.use_version(v2)


async def check_unchecked_entries(store: SnapshotStore, tamper: Tamper) -> None:
    """Entries from before checksums: replayed as before, reported unchecked (not damaged),
    checked for structure; seal() checks and seals them, refusing while one is damaged."""
    probes = await write_probes(store)
    tamper.unseal()
    for probe in probes.values():
        await reads_back(store, probe)
    report = await store.verify()  # unchecked is not damage: no raise
    assert report.ok and report.checked == 0
    assert {(u.layer, u.key) for u in report.unchecked} == {
        (p.layer, p.key) for p in probes.values()
    }
    assert "6 unchecked" in report.summary()
    # what can still be seen without a checksum is still caught
    fetch = probes["fetch"]
    original = tamper.stored("fetch", fetch.key)
    tamper.overwrite("fetch", fetch.key, original[: len(original) // 2])
    await read_is_damaged(store, fetch)
    with pytest.raises(SnapshotDamaged):
        await store.seal()  # nothing is sealed while one of them is damaged
    report = await damage_report(store)
    assert len(report.unchecked) == len(LAYERS) - 1
    assert_listed(report, tamper, fetch)
    tamper.overwrite("fetch", fetch.key, original)

    assert await store.seal() == len(LAYERS)
    assert await store.seal() == 0
    report = await store.verify()
    assert report.ok and report.unchecked == () and report.checked == len(LAYERS)
    for probe in probes.values():
        await reads_back(store, probe)
        stored = tamper.stored(probe.layer, probe.key)
        tamper.overwrite(probe.layer, probe.key, flip(stored, len(stored) * 4 + 1))
        await read_is_damaged(store, probe)
        tamper.overwrite(probe.layer, probe.key, stored)
    # an entry written now is checked, whatever the store held before
    assert (await store.verify()).ok


async def check_prune_reseals_and_refuses_damage(store: SnapshotStore, tamper: Tamper) -> None:
    """prune() re-stamps the entries it moves with checksums for their new version, and
    refuses (changing nothing) to move a damaged one."""
    keep_url, new_url = "https://prune.example.com/keep", "https://prune.example.com/new"
    await store.begin_version("v1")
    await store.put_fetch(fetch_result(keep_url, body=b"kept"), method="GET")
    await store.record_verdict("case-p", verdict(True, validity=(True, 1.0)))
    v2 = await store.begin_version("v2")
    await store.put_fetch(fetch_result(new_url, body=b"new"), method="GET")
    assert await store.prune(keep=1) == 1
    report = await store.verify()
    assert report.ok and report.unchecked == () and report.checked == 3
    keep = fetch_probe(keep_url)
    got = await store.get_fetch("GET", keep_url)
    assert got is not None and got.body == b"kept"
    stored = tamper.stored("fetch", keep.key)
    tamper.overwrite("fetch", keep.key, flip(stored, 3))
    e = await read_is_damaged(store, keep)
    assert e.version == v2  # the moved entry, under its new version
    tamper.overwrite("fetch", keep.key, stored)

    await store.begin_version("v3")
    await store.put_fetch(fetch_result(new_url, body=b"newer"), method="GET")
    case = Probe("verdict", entry_key("case-p"), lambda s: s.get_verdict("case-p"), None)
    stored = tamper.stored("verdict", case.key)
    tamper.overwrite("verdict", case.key, flip(stored, 11))
    with pytest.raises(SnapshotEntryCorrupt) as info:
        await store.prune(keep=1)  # would move the damaged verdict up: refuses
    assert info.value.layer == "verdict" and info.value.key in tamper.names("verdict", case.key)
    assert [v.version for v in await store.list_versions()] == [v2, v2 + 1]  # nothing pruned
    tamper.overwrite("verdict", case.key, stored)
    assert await store.prune(keep=1) == 1
    assert (await store.verify()).ok


def _same(got: Any, expected: Any) -> bool:
    if isinstance(expected, FetchResult):
        return (
            isinstance(got, FetchResult)
            and got.model_dump_json() == expected.model_dump_json()
            and got.body == expected.body
        )
    return bool(got == expected)


async def damage_outcome(
    store: SnapshotStore,
    probes: dict[str, Probe],
    names: Callable[[str, str], set[str]] = lambda _layer, key: {key},
) -> str:
    """Check a store that may be damaged: verify always reports; every probe replays exactly
    as written or is refused (``SnapshotEntryCorrupt`` naming it; ``SnapshotCorrupt`` only
    where the store as a whole cannot be read), or is missing where verify reports the damage
    that hid it; where verify lists no store-level problem, exactly the listed entries are
    refused (``names``: what a report may call an entry, as Tamper.names). Returns what
    happened, for a tally."""
    report = await store.verify(raise_on_damage=False)
    assert isinstance(report, VerifyReport)
    assert report.entries == report.checked + len(report.unchecked) + sum(
        1 for d in report.damaged if d.layer != "body"
    )
    if report.ok:
        assert await store.verify() == report.bodies
    else:
        with pytest.raises(SnapshotDamaged):
            await store.verify()
    listed = {(d.layer, d.key) for d in report.damaged}

    def is_listed(probe: Probe) -> bool:
        return any((probe.layer, name) in listed for name in names(probe.layer, probe.key))

    file_readable = not report.problems
    for probe in probes.values():
        try:
            got = await probe.read(store)
        except SnapshotEntryCorrupt as e:
            assert not report.ok, f"{probe.layer} refused ({e}) but verify found nothing"
            assert (e.layer, e.key) == (probe.layer, probe.key)
            if file_readable:
                assert is_listed(probe), (probe.layer, report.damaged)
            continue
        except SnapshotCorrupt as e:  # the store as a whole cannot be read
            assert not report.ok and not file_readable, e
            continue
        except CiteguardError as e:
            pytest.fail(f"{probe.layer}: {type(e).__name__} is not a reported damage: {e}")
        if _same(got, probe.expected):
            if file_readable:
                assert not is_listed(probe), (probe.layer, report.damaged)
            continue
        # no value but the one written; a miss only where verify reports what hid it
        assert got in (None, False), f"{probe.layer} replayed as {got!r:.200}"
        assert not report.ok, f"{probe.layer} went missing and verify found nothing"
    if report.ok:
        return "intact"
    return "entries damaged" if file_readable else "store damaged"

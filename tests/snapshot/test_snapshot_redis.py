"""The Redis snapshot store against a real ``redis-server`` (started here, on a free port).

Skipped only when the ``redis-server`` binary is absent *and* ``$CI`` is unset; in CI a
missing server is a failure (``.ci/run`` installs it).
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio
import redis
import snapshot_contract as contract

from citeguard.errors import SnapshotCorrupt, SnapshotError
from citeguard.models import CitationStatus, FetchResult
from citeguard.policy import FetchPolicy
from citeguard.snapshot import SnapshotFetcher, SnapshotMode, open_store
from citeguard.snapshot.redis_store import RedisSnapshotStore
from citeguard.snapshot_cli import snapshot_main
from citeguard.web.fetch import Fetcher

if TYPE_CHECKING:
    from conftest import Farm

_READY = b"Ready to accept connections"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private redis-server for this test session: no persistence, its own tmp dir."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail(
                "redis-server is not installed (CI must run: apt-get install -y redis-server)"
            )
        pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
    workdir: Path = tmp_path_factory.mktemp("redis")
    port = _free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    log: list[bytes] = []
    ready = threading.Event()

    def pump() -> None:  # read the log until the server says it is ready (no polling sleeps)
        assert proc.stdout is not None
        for line in proc.stdout:
            log.append(line)
            if _READY in line:
                ready.set()
        ready.set()  # EOF: the server exited

    threading.Thread(target=pump, daemon=True).start()
    try:
        if not ready.wait(timeout=20) or proc.poll() is not None:
            pytest.fail("redis-server did not start:\n" + b"".join(log).decode(errors="replace"))
        url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis.from_url(url)
        assert client.ping()
        client.close()
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def namespace() -> str:
    return f"cg-test-{uuid.uuid4().hex[:12]}"


@pytest_asyncio.fixture
async def store(redis_url: str, namespace: str) -> AsyncIterator[RedisSnapshotStore]:
    s = RedisSnapshotStore(redis_url, namespace=namespace)
    try:
        yield s
    finally:
        await s.close()


# --------------------------------------------------------------------------------------------
# The contract (the same checks as the SQLite store)
# --------------------------------------------------------------------------------------------


async def test_round_trips_every_layer(store: RedisSnapshotStore) -> None:
    await contract.check_round_trips(store)


async def test_identical_bodies_are_stored_once(
    store: RedisSnapshotStore, redis_url: str, namespace: str
) -> None:
    await contract.check_body_dedup(store)
    client = redis.Redis.from_url(redis_url)
    try:  # count the keys themselves
        assert len(list(client.scan_iter(f"{namespace}:body:*"))) == 2
    finally:
        client.close()


async def test_versions_baselines_and_diff(store: RedisSnapshotStore) -> None:
    await contract.check_versions_and_diff(store)


async def test_prune_keeps_every_kept_version_replayable(store: RedisSnapshotStore) -> None:
    await contract.check_prune(store)


async def test_200_tasks_and_2_processes_lose_nothing(redis_url: str, namespace: str) -> None:
    await contract.check_concurrent_writers(
        lambda: RedisSnapshotStore(redis_url, namespace=namespace),
        redis_url,
        namespace,
        tasks=200,
        per_process=150,
    )


async def test_replay_miss_names_the_url_and_query(store: RedisSnapshotStore) -> None:
    await contract.check_replay_miss(store)


async def test_record_then_replay_never_reaches_the_web(
    redis_url: str, namespace: str, farm: Farm, fetch_policy: FetchPolicy
) -> None:
    urls = [
        farm.add("news.example.com", "/story", body="<html><p>The story.</p></html>"),
        farm.add("a.example.com", "/missing", status=404, body="nope"),
        farm.url("b.example.com", "/redirect/1"),
    ]
    rec = RedisSnapshotStore(redis_url, namespace=namespace)
    f = SnapshotFetcher(lambda: Fetcher(fetch_policy, resolver=farm.resolver), rec, "record")
    recorded = await f.fetch_all(urls)
    await f.aclose()
    await rec.close()
    assert recorded[urls[1]].status is CitationStatus.NOT_FOUND
    served = farm.count()

    # (the store itself talks to redis over a socket, so here the proof is that the fetcher
    # factory is never called and the web server sees nothing; test_snapshot.py runs the SQLite
    # replay under a socket guard)
    runs: list[list[tuple[str, str, bytes | None]]] = []
    for _ in range(2):
        factory = contract.NeverBuilt()
        replayer = RedisSnapshotStore(redis_url, namespace=namespace)
        f = SnapshotFetcher(factory, replayer, SnapshotMode.REPLAY)
        got: dict[str, FetchResult] = await f.fetch_all(urls)
        runs.append([(u, r.model_dump_json(), r.body) for u, r in got.items()])
        await f.aclose()
        await replayer.close()
        assert factory.calls == 0
    assert farm.count() == served
    assert runs[0] == runs[1]
    assert [body for _, _, body in runs[0]] == [recorded[u].body for u in urls]


# --------------------------------------------------------------------------------------------
# Redis specifics
# --------------------------------------------------------------------------------------------


async def test_unreachable_server_is_a_snapshot_error() -> None:
    s = RedisSnapshotStore(f"redis://user:secret@127.0.0.1:{_free_port()}/0", socket_timeout=2)
    with pytest.raises(SnapshotError, match="cannot reach") as info:
        await s.get_fetch("GET", "https://example.com/")
    assert "secret" not in str(info.value)  # the password is redacted
    await s.close()


async def test_corrupt_entries_are_snapshot_corrupt(
    store: RedisSnapshotStore, redis_url: str, namespace: str
) -> None:
    url = "https://k.example.com/"
    await store.put_fetch(contract.fetch_result(url, body=b"original"), method="GET")
    client = redis.Redis.from_url(redis_url)
    try:
        (body_key,) = client.scan_iter(f"{namespace}:body:*")
        client.set(body_key, b"not zlib")
        with pytest.raises(SnapshotCorrupt, match="does not inflate"):
            await store.get_fetch("GET", url)
        with pytest.raises(SnapshotCorrupt):
            await store.verify()
        (entry_key,) = client.scan_iter(f"{namespace}:e:fetch:*")
        client.hset(entry_key, "1", b"{broken json")
        with pytest.raises(SnapshotCorrupt, match="not valid JSON"):
            await store.get_fetch("GET", url)
        client.delete(entry_key)
        client.set(entry_key, b"a string where a hash belongs")
        with pytest.raises(SnapshotCorrupt, match="wrong type"):
            await store.get_fetch("GET", url)
    finally:
        client.close()


async def test_open_store_picks_redis_for_redis_urls(redis_url: str, namespace: str) -> None:
    s = open_store(redis_url, namespace=namespace)
    assert isinstance(s, RedisSnapshotStore)
    await s.begin_version("via open_store")
    await s.close()


def test_cli_reads_a_redis_store(redis_url: str, namespace: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert (
        snapshot_main(["--store", redis_url, "--namespace", namespace, "list"], out=out, err=err)
        == 0
    )
    assert "no versions yet" in out.getvalue()

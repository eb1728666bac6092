"""The Redis snapshot store against a real ``redis-server`` (started here, on a free port).

Skipped only when the ``redis-server`` binary is absent *and* ``$CI`` is unset; in CI a
missing server is a failure (``.ci/run`` installs it).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import random
import shutil
import socket
import subprocess
import threading
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio
import redis
import snapshot_contract as contract
from hypothesis import given, settings
from hypothesis import strategies as st

from citeguard.errors import SnapshotCorrupt, SnapshotError
from citeguard.models import CitationStatus, FetchResult
from citeguard.policy import FetchPolicy
from citeguard.snapshot import SnapshotEntryCorrupt, SnapshotFetcher, SnapshotMode, open_store
from citeguard.snapshot.base import LAYERS, entry_key
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


async def test_the_judge_layer_round_trips_versions_and_prunes(store: RedisSnapshotStore) -> None:
    await contract.check_judge_layer(store)


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


# --------------------------------------------------------------------------------------------
# Integrity: bits flipped in the stored values, behind the store's back
# --------------------------------------------------------------------------------------------


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:40]


class RedisTamper:
    """Edits a store's keys with the plain redis client (contract.Tamper)."""

    def __init__(self, url: str, namespace: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.ns = namespace

    def close(self) -> None:
        self.client.close()

    def _name(self, layer: str, key: str) -> str:
        return f"{self.ns}:e:{layer}:{_digest(key)}"

    def _field(self, layer: str, key: str, version: int | None) -> str:
        if version is not None:
            return str(version)
        fields = [int(f) for f in self.client.hkeys(self._name(layer, key))]
        assert fields, (layer, key)
        return str(max(fields))

    def stored(self, layer: str, key: str, version: int | None = None) -> bytes:
        value = self.client.hget(self._name(layer, key), self._field(layer, key, version))
        assert isinstance(value, bytes)
        return value

    def overwrite(self, layer: str, key: str, value: bytes, version: int | None = None) -> None:
        self.client.hset(self._name(layer, key), self._field(layer, key, version), value)

    def data(self, layer: str, key: str) -> str:
        data = json.loads(self.stored(layer, key))["d"]
        assert isinstance(data, str)
        return data

    def set_data(self, layer: str, key: str, data: str) -> None:
        env = json.loads(self.stored(layer, key))
        env["d"] = data
        self.overwrite(layer, key, json.dumps(env, ensure_ascii=False).encode())

    def swap(self, layer: str, key_a: str, key_b: str) -> None:
        a, b = self.stored(layer, key_a), self.stored(layer, key_b)
        self.overwrite(layer, key_a, b)
        self.overwrite(layer, key_b, a)

    def stored_body(self, body_hash: str) -> bytes:
        value = self.client.get(f"{self.ns}:body:{body_hash}")
        assert isinstance(value, bytes)
        return value

    def overwrite_body(self, body_hash: str, value: bytes) -> None:
        self.client.set(f"{self.ns}:body:{body_hash}", value)

    def unseal(self) -> None:
        """Envelopes as citeguard wrote them before checksums: no "c"."""
        for name in self.client.scan_iter(f"{self.ns}:e:*"):
            for field, value in self.client.hgetall(name).items():
                env = json.loads(value)
                env.pop("c")
                self.client.hset(name, field, json.dumps(env, ensure_ascii=False))

    def names(self, layer: str, key: str) -> set[str]:
        # an envelope too damaged to show its key is named by the digest of its Redis key
        return {key, f"#{_digest(key)}"}


@pytest.fixture
def tamper(redis_url: str, namespace: str) -> Iterator[RedisTamper]:
    t = RedisTamper(redis_url, namespace)
    try:
        yield t
    finally:
        t.close()


async def test_a_clean_store_verifies_every_entry(store: RedisSnapshotStore) -> None:
    await contract.check_clean_store_verifies(store)


async def test_a_flipped_bit_in_any_layer_is_caught(
    store: RedisSnapshotStore, tamper: RedisTamper
) -> None:
    await contract.check_flipped_bits_in_every_layer(store, tamper)


@settings(max_examples=30, deadline=None)
@given(layer=st.sampled_from(LAYERS), data=st.data())
def test_any_single_flipped_bit_is_caught(redis_url: str, layer: str, data: st.DataObject) -> None:
    namespace = f"cg-flip-{uuid.uuid4().hex[:12]}"

    def pick(n: int) -> int:
        return data.draw(st.integers(0, n - 1), label="bit")

    async def run() -> None:
        s = RedisSnapshotStore(redis_url, namespace=namespace)
        t = RedisTamper(redis_url, namespace)
        try:
            await contract.check_flipped_bit(s, t, layer, pick)
        finally:
            t.close()
            await s.close()

    asyncio.run(run())


async def test_forged_valid_values_are_caught(
    store: RedisSnapshotStore, tamper: RedisTamper
) -> None:
    await contract.check_forged_values(store, tamper)


async def test_truncated_entries_are_caught_and_all_listed(
    store: RedisSnapshotStore, tamper: RedisTamper
) -> None:
    await contract.check_truncated_entries(store, tamper)


async def test_swapped_entries_are_caught(store: RedisSnapshotStore, tamper: RedisTamper) -> None:
    await contract.check_swapped_entries(store, tamper)


async def test_damaged_bodies_fail_every_entry_using_them(
    store: RedisSnapshotStore, tamper: RedisTamper
) -> None:
    await contract.check_damaged_bodies(store, tamper)


async def test_verify_sees_damage_in_every_version(
    store: RedisSnapshotStore, tamper: RedisTamper
) -> None:
    await contract.check_verify_sees_every_version(store, tamper)


async def test_unchecked_entries_are_reported_and_sealed(
    store: RedisSnapshotStore, tamper: RedisTamper
) -> None:
    await contract.check_unchecked_entries(store, tamper)


async def test_prune_reseals_moved_entries_and_refuses_damaged_ones(
    store: RedisSnapshotStore, tamper: RedisTamper
) -> None:
    await contract.check_prune_reseals_and_refuses_damage(store, tamper)


async def test_entries_moved_between_versions_layers_and_keys(
    store: RedisSnapshotStore, tamper: RedisTamper, namespace: str
) -> None:
    url = "https://moved.example.com/"
    key = entry_key("GET", url)
    await store.begin_version("v1")
    await store.put_fetch(contract.fetch_result(url, body=b"one"), method="GET")
    await store.begin_version("v2")
    await store.put_fetch(contract.fetch_result(url, body=b"two"), method="GET")
    v3 = await store.begin_version("v3")
    client = tamper.client
    name = f"{namespace}:e:fetch:{_digest(key)}"

    # the v2 entry moved to version 3 (its hash field renamed): v3's replay reads it and fails
    client.hset(name, "3", client.hget(name, "2") or b"")
    client.hdel(name, "2")
    with pytest.raises(SnapshotEntryCorrupt, match="checksum mismatch") as info:
        await store.get_fetch("GET", url)
    assert (info.value.layer, info.value.key, info.value.version) == ("fetch", key, v3)
    report = await store.verify(raise_on_damage=False)
    assert [(d.layer, d.key, d.version) for d in report.damaged] == [("fetch", key, 3)]
    client.hset(name, "2", client.hget(name, "3") or b"")
    client.hdel(name, "3")
    client.hset(name, "x", b"{}")  # a field that is not a version
    with pytest.raises(SnapshotEntryCorrupt, match="bad version field"):
        await store.get_fetch("GET", url)
    client.hdel(name, "x")
    assert (await store.verify()).ok

    # the entry copied into another layer (same key): the layer is in the checksum
    page_name = f"{namespace}:e:page:{_digest(key)}"
    client.hset(page_name, "2", client.hget(name, "2") or b"")
    report = await store.verify(raise_on_damage=False)
    assert [(d.layer, d.key) for d in report.damaged] == [("page", key)]
    assert any("missing from the page index" in p for p in report.problems)  # found by SCAN
    client.delete(page_name)

    # an envelope whose "c" became another field, or has one twice
    good = tamper.stored("fetch", key, version=2)
    for bad in (good.replace(b'"c":', b'"a":'), good.replace(b'"c":', b'"b":')):
        client.hset(name, "2", bad)
        with pytest.raises(SnapshotEntryCorrupt, match=r"fields|twice"):
            await store.get_fetch("GET", url)
    client.hset(name, "2", good)
    assert (await store.verify()).ok


def _flip_somewhere(client: redis.Redis, keys: list[bytes], rng: random.Random) -> None:
    """One bit flipped in one stored value of the namespace: a string, a hash field's name or
    value, or a set member."""
    name = rng.choice(keys)
    kind = client.type(name)
    if kind == b"string":
        value = client.get(name)
        assert isinstance(value, bytes)
        client.set(name, contract.flip(value, rng.randrange(len(value) * 8)))
    elif kind == b"hash":
        fields = client.hgetall(name)
        field = rng.choice(sorted(fields))
        if rng.random() < 0.5:
            value = fields[field]
            client.hset(name, field, contract.flip(value, rng.randrange(len(value) * 8)))
        else:
            client.hdel(name, field)
            client.hset(name, contract.flip(field, rng.randrange(len(field) * 8)), fields[field])
    elif kind == b"set":
        members = sorted(client.smembers(name))
        member = rng.choice(members)
        client.srem(name, member)
        client.sadd(name, contract.flip(member, rng.randrange(len(member) * 8)))


def test_random_bit_flips_end_as_reported_damage_or_intact_replay(
    redis_url: str, namespace: str
) -> None:
    """The SQLite file's fuzz test, for Redis: 1-4 bits flipped across the namespace's values
    (entries, index members, version records, counters, bodies), fixed seeds."""

    async def write() -> dict[str, contract.Probe]:
        store = RedisSnapshotStore(redis_url, namespace=namespace)
        try:
            return await contract.write_probes(store)
        finally:
            await store.close()

    async def outcome() -> str:
        store = RedisSnapshotStore(redis_url, namespace=namespace)
        try:
            return await contract.damage_outcome(store, probes, tamper.names)
        finally:
            await store.close()

    probes = asyncio.run(write())
    tamper = RedisTamper(redis_url, namespace)
    client = tamper.client
    try:
        keys = sorted(client.scan_iter(match=f"{namespace}:*"))
        saved = {k: client.dump(k) for k in keys}
        tally: Counter[str] = Counter()
        for seed in range(120):
            rng = random.Random(seed)
            for _ in range(rng.randint(1, 4)):
                _flip_somewhere(client, keys, rng)
            try:
                tally[asyncio.run(outcome())] += 1
            except AssertionError as e:
                raise AssertionError(f"seed {seed}: {e}") from e
            client.delete(*client.scan_iter(match=f"{namespace}:*"))
            for k, v in saved.items():
                client.restore(k, 0, v)
    finally:
        tamper.close()
    assert min(tally["entries damaged"], tally["store damaged"]) >= 5, tally

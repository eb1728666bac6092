"""The SQLite snapshot store, the record/replay wrappers and ``citeguard snapshot``.

Real parts only: SQLite files in a temp dir, the real ``Fetcher`` against the ``farm`` (aiohttp
on 127.0.0.1), real OS processes for the concurrent-writer test.
"""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio
import snapshot_contract as contract
from hypothesis import given, settings
from hypothesis import strategies as st

from citeguard.errors import PolicyError, SnapshotCorrupt, SnapshotError
from citeguard.models import CitationStatus, FetchResult, Page, SearchRecord
from citeguard.policy import FetchPolicy
from citeguard.snapshot import (
    SnapshotDamaged,
    SnapshotEntryCorrupt,
    SnapshotFetcher,
    SnapshotMode,
    SQLiteSnapshotStore,
    prepare_snapshot,
    snapshot_page,
    snapshot_search,
    snapshot_url_key,
)
from citeguard.snapshot.base import LAYERS, UNCHECKED, body_digest, entry_key
from citeguard.snapshot.sqlite_store import MIGRATIONS, migrate
from citeguard.snapshot_cli import snapshot_main
from citeguard.web.fetch import Fetcher

if TYPE_CHECKING:
    from conftest import Farm


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteSnapshotStore]:
    s = SQLiteSnapshotStore(tmp_path / "snap.sqlite")
    try:
        yield s
    finally:
        await s.close()


# --------------------------------------------------------------------------------------------
# The contract
# --------------------------------------------------------------------------------------------


async def test_round_trips_every_layer(store: SQLiteSnapshotStore) -> None:
    await contract.check_round_trips(store)


async def test_the_judge_layer_round_trips_versions_and_prunes(store: SQLiteSnapshotStore) -> None:
    await contract.check_judge_layer(store)


async def test_identical_bodies_are_stored_once(store: SQLiteSnapshotStore) -> None:
    await contract.check_body_dedup(store)
    with sqlite3.connect(store.path) as db:  # count the rows themselves
        assert db.execute("SELECT count(*) FROM bodies").fetchone()[0] == 2
        assert db.execute("SELECT count(*) FROM entries WHERE layer = 'fetch'").fetchone()[0] == 5
        # compressed: the 20 kB repetitive body takes far less room than itself
        size = db.execute("SELECT max(length(data)) FROM bodies").fetchone()[0]
        assert size < 1000


async def test_versions_baselines_and_diff(store: SQLiteSnapshotStore) -> None:
    await contract.check_versions_and_diff(store)


async def test_prune_keeps_every_kept_version_replayable(store: SQLiteSnapshotStore) -> None:
    await contract.check_prune(store)


async def test_200_tasks_and_2_processes_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    await contract.check_concurrent_writers(
        lambda: SQLiteSnapshotStore(path), str(path), "-", tasks=200, per_process=150
    )


async def test_replay_miss_names_the_url_and_query(store: SQLiteSnapshotStore) -> None:
    await contract.check_replay_miss(store)


# --------------------------------------------------------------------------------------------
# Record with the real fetcher, replay with no network at all
# --------------------------------------------------------------------------------------------


def _farm_site(farm: Farm) -> list[str]:
    return [
        farm.add("news.example.com", "/story", body="<html><p>The story.</p></html>"),
        farm.add("a.example.com", "/missing", status=404, body="nope"),
        farm.url("b.example.com", "/redirect/2"),
        farm.add("example.org", "/doc.pdf", body=b"%PDF-1.4 fake", content_type="application/pdf"),
    ]


async def test_record_then_replay_opens_no_socket(
    tmp_path: Path, farm: Farm, fetch_policy: FetchPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    urls = _farm_site(farm)
    path = tmp_path / "case.sqlite"
    recorder = SQLiteSnapshotStore(path)
    assert await prepare_snapshot(recorder, SnapshotMode.RECORD, label="rec") == 1
    live = SnapshotFetcher(
        lambda: Fetcher(fetch_policy, resolver=farm.resolver), recorder, "record"
    )
    recorded = await live.fetch_all(urls)
    single = await live.fetch(urls[0], want_body=False)
    await live.aclose()
    await recorder.close()
    assert recorded[urls[1]].status is CitationStatus.NOT_FOUND  # failures are recorded too
    assert recorded[urls[2]].redirects
    served = farm.count()

    def replay_json(results: dict[str, FetchResult]) -> list[tuple[str, str, bytes | None]]:
        return [(u, r.model_dump_json(), r.body) for u, r in results.items()]

    runs = []
    for _ in range(2):
        factory = contract.NeverBuilt()
        replayer = SQLiteSnapshotStore(path)
        with contract.socket_guard(monkeypatch) as attempts:
            f = SnapshotFetcher(factory, replayer, SnapshotMode.REPLAY)
            runs.append(replay_json(await f.fetch_all(urls)))
            head = await f.fetch(urls[0], want_body=False)
            await f.aclose()
        await replayer.close()
        assert factory.calls == 0
        assert attempts == []
        assert head.model_dump(exclude={"from_cache"}) == single.model_dump(exclude={"from_cache"})
    assert farm.count() == served  # nothing reached the server
    assert runs[0] == runs[1]  # byte-identical on every replay
    for u, data, body in runs[0]:
        replayed = json.loads(data)
        assert replayed.pop("from_cache") is True
        original = json.loads(recorded[u].model_dump_json())
        original.pop("from_cache")
        assert replayed == original
        assert body == recorded[u].body

    # control: the guard does catch a live fetch, so "no attempts" above means something
    with contract.socket_guard(monkeypatch) as attempts:
        async with Fetcher(fetch_policy, resolver=farm.resolver) as live_fetcher:
            await live_fetcher.fetch(urls[0])
    assert attempts


async def test_refresh_writes_a_new_version_and_diff_shows_the_change(
    tmp_path: Path, farm: Farm, fetch_policy: FetchPolicy
) -> None:
    urls = _farm_site(farm)
    store = SQLiteSnapshotStore(tmp_path / "r.sqlite")
    try:

        def factory() -> Fetcher:
            return Fetcher(fetch_policy, resolver=farm.resolver)

        await prepare_snapshot(store, "record")
        f = SnapshotFetcher(factory, store, "record")
        await f.fetch_all(urls)
        await f.aclose()
        farm.add("news.example.com", "/story", body="<html><p>Updated story.</p></html>")
        farm.add("a.example.com", "/missing", body="back again")
        assert await prepare_snapshot(store, "refresh", label="weekly") == 2
        f = SnapshotFetcher(factory, store, "refresh")
        await f.fetch_all(urls)
        await f.aclose()
        diff = await store.diff(1, 2)
        changed = {p.url: p for p in diff.pages}
        assert set(changed) == {urls[0], urls[1]}
        assert changed[urls[1]].status_before is CitationStatus.NOT_FOUND
        assert changed[urls[1]].status_after is CitationStatus.OK
        await store.use_version(1)
        old = await store.get_fetch("GET", urls[0])
        assert old is not None and old.body is not None and b"The story" in old.body
    finally:
        await store.close()


async def test_snapshot_search_modes(store: SQLiteSnapshotStore) -> None:
    calls: list[str] = []
    raw = {"results": [{"url": "https://example.com/a", "title": "A", "published": "2025-01-02"}]}

    async def search() -> Any:
        calls.append("called")
        return raw

    assert await snapshot_search(store, "live", "tavily", "q", search) is raw
    assert await store.get_search("tavily", "q") is None  # live writes nothing
    assert await snapshot_search(store, "record", "tavily", "q", search) is raw
    rec = await store.get_search("tavily", "q")
    assert rec is not None and [r.url for r in rec.results] == ["https://example.com/a"]
    assert await snapshot_search(store, "replay", "tavily", "q", search) == raw
    assert calls == ["called", "called"]


async def test_snapshot_page_replay_miss_extracts_without_writing(
    store: SQLiteSnapshotStore,
) -> None:
    page = Page(url="https://example.com/", kind="html", text="hello")

    async def extract() -> Page:
        return page

    assert await snapshot_page(store, "replay", "https://example.com/", "x1", extract) == page
    assert await store.get_page("https://example.com/", "x1") is None
    await snapshot_page(store, "record", "https://example.com/", "x1", extract)
    assert await store.get_page("https://example.com/", "x1") == page


async def test_wrappers_refuse_bad_configuration(store: SQLiteSnapshotStore) -> None:
    with pytest.raises(PolicyError):
        SnapshotFetcher(None, store, "record")
    with pytest.raises(PolicyError):
        SnapshotFetcher(None, None, "replay")
    with pytest.raises(ValueError):
        SnapshotFetcher(None, store, "sometimes")
    assert await prepare_snapshot(None, "live") is None
    assert await prepare_snapshot(store, "replay") is None  # empty store: nothing to replay


def test_url_keys() -> None:
    assert snapshot_url_key("HTTPS://Ex.COM:443/a?b=1#frag") == "https://ex.com/a?b=1"
    assert snapshot_url_key("http://ex.com:8080") == "http://ex.com:8080/"
    assert snapshot_url_key("http://[::1]:80/x") == "http://[::1]/x"
    assert snapshot_url_key("http://[::1/x") == "http://[::1/x"  # unparseable: as written
    assert snapshot_url_key("not a url") == "not a url"


# --------------------------------------------------------------------------------------------
# SQLite specifics: migrations, corruption, misuse
# --------------------------------------------------------------------------------------------


def test_migrations_apply_once_to_a_blank_database() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    assert migrate(db) == [m.__name__ for m in MIGRATIONS]
    assert migrate(db) == []
    names = [r[0] for r in db.execute("SELECT name FROM citeguard_migrations")]
    assert names == [m.__name__ for m in MIGRATIONS]


async def _real_store(path: Path) -> None:
    s = SQLiteSnapshotStore(path)
    for i in range(300):
        body = f"<html>{i} ".encode() * 200
        await s.put_fetch(
            contract.fetch_result(f"https://c.example.com/{i}", body=body), method="GET"
        )
    await s.close()


def _truncate(path: Path, keep: float) -> None:
    assert not Path(f"{path}-wal").exists()  # closed cleanly: everything is in the main file
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


async def test_garbage_file_is_snapshot_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "garbage.sqlite"
    path.write_bytes(b"this is not a database at all \x00\x01\x02" * 200)
    s = SQLiteSnapshotStore(path)
    with pytest.raises(SnapshotCorrupt, match=r"garbage\.sqlite.*corrupted or truncated"):
        await s.get_fetch("GET", "https://c.example.com/1")
    await s.close()


@pytest.mark.parametrize("keep", [0.5, 0.9])
async def test_truncated_file_is_snapshot_corrupt(tmp_path: Path, keep: float) -> None:
    path = tmp_path / "store.sqlite"
    await _real_store(path)
    _truncate(path, keep)
    s = SQLiteSnapshotStore(path)
    with pytest.raises(SnapshotCorrupt, match=r"store\.sqlite"):
        for i in range(300):  # some read touches a missing page
            await s.get_fetch("GET", f"https://c.example.com/{i}")
    await s.close()


async def test_tampered_body_is_snapshot_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    s = SQLiteSnapshotStore(path)
    await s.put_fetch(
        contract.fetch_result("https://t.example.com/", body=b"original"), method="GET"
    )
    assert await s.verify() == 1
    with sqlite3.connect(path) as db:
        db.execute("UPDATE bodies SET data = ?", (zlib.compress(b"forged"),))
    with pytest.raises(SnapshotCorrupt, match="does not match its sha256"):
        await s.get_fetch("GET", "https://t.example.com/")
    with pytest.raises(SnapshotCorrupt):
        await s.verify()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE bodies SET data = ?", (b"not zlib",))
    with pytest.raises(SnapshotCorrupt, match="does not inflate"):
        await s.get_fetch("GET", "https://t.example.com/")
    await s.close()


async def test_misuse_is_a_snapshot_error(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE invoices (id INTEGER)")
    s = SQLiteSnapshotStore(other)
    with pytest.raises(SnapshotError, match="not a citeguard snapshot store"):
        await s.list_versions()
    await s.close()
    with pytest.raises(SnapshotError, match="closed"):
        await s.list_versions()

    missing = SQLiteSnapshotStore(tmp_path / "nope.sqlite", create=False)
    with pytest.raises(SnapshotError, match="no snapshot store at"):
        await missing.list_versions()
    await missing.close()
    assert not (tmp_path / "nope.sqlite").exists()

    s = SQLiteSnapshotStore(tmp_path / "ok.sqlite")
    with pytest.raises(SnapshotError, match="no snapshot version 3"):
        await s.use_version(3)
    with pytest.raises(PolicyError):
        await s.prune(0)
    await s.close()
    pinned = SQLiteSnapshotStore(tmp_path / "ok.sqlite", version=9)
    with pytest.raises(SnapshotError, match="no snapshot version 9"):
        await pinned.current_version()
    await pinned.close()


async def test_read_only_store_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "bundled.sqlite"
    await _real_store(path)
    ro = SQLiteSnapshotStore(path, read_only=True)
    got = await ro.get_fetch("GET", "https://c.example.com/7")
    assert got is not None and got.body == b"<html>7 " * 200
    assert _sidecars(path) == []  # immutable: no -wal / -shm next to a bundled file
    with pytest.raises(SnapshotError, match="read-only"):
        await ro.put_fetch(contract.fetch_result("https://c.example.com/new"), method="GET")
    with pytest.raises(SnapshotError, match="read-only"):
        await ro.begin_version("nope")
    await ro.close()
    blank = tmp_path / "blank.sqlite"
    sqlite3.connect(blank).execute("CREATE TABLE t (x)").connection.close()
    bad = SQLiteSnapshotStore(blank, read_only=True)
    with pytest.raises(SnapshotError, match="not a citeguard snapshot store"):
        await bad.list_versions()
    await bad.close()
    missing = SQLiteSnapshotStore(tmp_path / "absent.sqlite", read_only=True)
    with pytest.raises(SnapshotError, match="no snapshot store at"):
        await missing.list_versions()
    await missing.close()


def _sidecars(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f"{path.name}-"))


async def test_search_records_survive_with_raw_json(store: SQLiteSnapshotStore) -> None:
    rec = SearchRecord(query="q", provider="p", raw={"nested": [1, "two", None]})
    await store.put_search(rec)
    assert await store.get_search("p", "q") == rec


# --------------------------------------------------------------------------------------------
# citeguard snapshot ...
# --------------------------------------------------------------------------------------------


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = snapshot_main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_outside_a_project_says_what_the_store_is_and_how_to_name_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # run where there is no tests/snapshots/: the default store is not there (issue 53: the
    # error said only "no snapshot store at tests/snapshots/citeguard.sqlite")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CITEGUARD_SNAPSHOT_STORE", raising=False)
    code, out, err = _cli("list")
    assert code == 2 and out == ""
    assert "no snapshot store at tests/snapshots/citeguard.sqlite" in err
    assert str(tmp_path / "tests" / "snapshots" / "citeguard.sqlite") in err  # where it looked
    assert "the default" in err and "snapshot store is the SQLite file" in err  # what it is
    assert "--store" in err and "CITEGUARD_SNAPSHOT_STORE" in err  # how to name another
    assert not (tmp_path / "tests").exists()  # nothing created
    # named by the environment variable: the message says so
    monkeypatch.setenv("CITEGUARD_SNAPSHOT_STORE", str(tmp_path / "elsewhere.sqlite"))
    code, _, err = _cli("list")
    assert code == 2 and "named by $CITEGUARD_SNAPSHOT_STORE" in err
    assert str(tmp_path / "elsewhere.sqlite") in err


def test_cli_list_show_diff_prune_verify(tmp_path: Path) -> None:
    path = tmp_path / "cli.sqlite"

    async def prepare() -> None:
        s = SQLiteSnapshotStore(path)
        await contract.check_versions_and_diff(s)
        await s.close()

    asyncio.run(prepare())  # the CLI runs its own loop, so this test has none
    st = ["--store", str(path)]

    code, out, _ = _cli(*st, "list")
    assert code == 0
    assert "first" in out and "second" in out and "VERDICTS" in out

    code, out, _ = _cli(*st, "show", "latest")
    assert code == 0
    assert "BASELINES" in out and "case-1" in out and "FAIL 0.50" in out
    assert "https://s.example.com/b" in out  # inherited entries are shown too

    code, out, _ = _cli(*st, "diff", "latest~1", "latest")
    assert code == 0
    assert "2 page(s) changed" in out and "2 verdict(s) moved" in out
    assert "validity pass→FAIL 1.00→0.50" in out
    assert _cli(*st, "diff", "1", "2", "--exit-code")[0] == 1
    assert _cli(*st, "diff", "2", "2", "--exit-code")[0] == 0

    code, out, _ = _cli(*st, "--json", "diff", "1", "2")
    assert json.loads(out)["v2"] == 2

    code, out, _ = _cli(*st, "verify")
    assert code == 0 and out.startswith("ok: 2 version(s)")
    code, out, _ = _cli(*st, "prune", "--keep", "1")
    assert code == 0 and "dropped 1 version(s)" in out
    code, out, _ = _cli(*st, "--json", "list")
    assert [v["version"] for v in json.loads(out)] == [2]

    code, _, err = _cli(*st, "show", "latest~5")
    assert code == 2 and "only 1 version" in err
    code, _, err = _cli(*st, "show", "yesterday")
    assert code == 2 and "bad version" in err
    code, _, err = _cli("--store", str(tmp_path / "absent.sqlite"), "list")
    assert code == 2 and "no snapshot store at" in err
    assert not (tmp_path / "absent.sqlite").exists()
    code, _, err = _cli(*st, "frobnicate")
    assert code == 2 and "invalid choice" in err
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"\x00garbage" * 100)
    code, _, err = _cli("--store", str(garbage), "list")
    assert code == 2 and "corrupted or truncated" in err


# --------------------------------------------------------------------------------------------
# Integrity: bits flipped in the file itself, behind the store's back
# --------------------------------------------------------------------------------------------


class SQLiteTamper:
    """Edits a store's rows with plain sqlite3 (contract.Tamper)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, isolation_level=None)
        try:
            yield db
        finally:
            db.close()

    @staticmethod
    def _version(db: sqlite3.Connection, layer: str, key: str, version: int | None) -> int:
        if version is not None:
            return version
        (newest,) = db.execute(
            "SELECT max(version) FROM entries WHERE layer = ? AND key = ?", (layer, key)
        ).fetchone()
        assert newest is not None, (layer, key)
        return int(newest)

    def _update(self, sql: str, *args: object) -> None:
        with self._db() as db:
            assert db.execute(sql, args).rowcount >= 1, sql

    def stored(self, layer: str, key: str, version: int | None = None) -> bytes:
        with self._db() as db:
            v = self._version(db, layer, key, version)
            (data,) = db.execute(
                "SELECT CAST(data AS BLOB) FROM entries"
                " WHERE layer = ? AND key = ? AND version = ?",
                (layer, key, v),
            ).fetchone()
        return bytes(data)

    def overwrite(self, layer: str, key: str, value: bytes, version: int | None = None) -> None:
        stored: str | bytes
        try:  # text stays text; bytes that are no longer UTF-8 go in as a blob
            stored = value.decode("utf-8")
        except UnicodeDecodeError:
            stored = value
        with self._db() as db:
            v = self._version(db, layer, key, version)
        self._update(
            "UPDATE entries SET data = ? WHERE layer = ? AND key = ? AND version = ?",
            stored,
            layer,
            key,
            v,
        )

    def data(self, layer: str, key: str) -> str:
        return self.stored(layer, key).decode("utf-8")

    def set_data(self, layer: str, key: str, data: str) -> None:
        self.overwrite(layer, key, data.encode("utf-8"))

    def swap(self, layer: str, key_a: str, key_b: str) -> None:
        cols = "data, body_hash, written_at, checksum"
        with self._db() as db:
            va = self._version(db, layer, key_a, None)
            vb = self._version(db, layer, key_b, None)
            where = " WHERE layer = ? AND key = ? AND version = ?"
            row_a = db.execute(f"SELECT {cols} FROM entries{where}", (layer, key_a, va)).fetchone()
            row_b = db.execute(f"SELECT {cols} FROM entries{where}", (layer, key_b, vb)).fetchone()
            sets = "UPDATE entries SET data = ?, body_hash = ?, written_at = ?, checksum = ?"
            db.execute(sets + where, (*row_b, layer, key_a, va))
            db.execute(sets + where, (*row_a, layer, key_b, vb))

    def stored_body(self, body_hash: str) -> bytes:
        with self._db() as db:
            (data,) = db.execute("SELECT data FROM bodies WHERE hash = ?", (body_hash,)).fetchone()
        return bytes(data)

    def overwrite_body(self, body_hash: str, value: bytes) -> None:
        self._update("UPDATE bodies SET data = ? WHERE hash = ?", value, body_hash)

    def unseal(self) -> None:
        self._update("UPDATE entries SET checksum = ?", UNCHECKED)

    def names(self, layer: str, key: str) -> set[str]:
        return {key}


@pytest.fixture
def tamper(store: SQLiteSnapshotStore) -> SQLiteTamper:
    return SQLiteTamper(store.path)


async def test_a_clean_store_verifies_every_entry(store: SQLiteSnapshotStore) -> None:
    await contract.check_clean_store_verifies(store)


async def test_a_flipped_bit_in_any_layer_is_caught(
    store: SQLiteSnapshotStore, tamper: SQLiteTamper
) -> None:
    await contract.check_flipped_bits_in_every_layer(store, tamper)


@settings(max_examples=30, deadline=None)
@given(layer=st.sampled_from(LAYERS), data=st.data())
def test_any_single_flipped_bit_is_caught(
    tmp_path_factory: pytest.TempPathFactory, layer: str, data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("flip") / "store.sqlite"

    def pick(n: int) -> int:
        return data.draw(st.integers(0, n - 1), label="bit")

    async def run() -> None:
        s = SQLiteSnapshotStore(path)
        try:
            await contract.check_flipped_bit(s, SQLiteTamper(path), layer, pick)
        finally:
            await s.close()

    asyncio.run(run())


async def test_forged_valid_values_are_caught(
    store: SQLiteSnapshotStore, tamper: SQLiteTamper
) -> None:
    await contract.check_forged_values(store, tamper)


async def test_truncated_entries_are_caught_and_all_listed(
    store: SQLiteSnapshotStore, tamper: SQLiteTamper
) -> None:
    await contract.check_truncated_entries(store, tamper)


async def test_swapped_entries_are_caught(store: SQLiteSnapshotStore, tamper: SQLiteTamper) -> None:
    await contract.check_swapped_entries(store, tamper)


async def test_damaged_bodies_fail_every_entry_using_them(
    store: SQLiteSnapshotStore, tamper: SQLiteTamper
) -> None:
    await contract.check_damaged_bodies(store, tamper)


async def test_verify_sees_damage_in_every_version(
    store: SQLiteSnapshotStore, tamper: SQLiteTamper
) -> None:
    await contract.check_verify_sees_every_version(store, tamper)


async def test_unchecked_entries_are_reported_and_sealed(
    store: SQLiteSnapshotStore, tamper: SQLiteTamper
) -> None:
    await contract.check_unchecked_entries(store, tamper)


async def test_prune_reseals_moved_entries_and_refuses_damaged_ones(
    store: SQLiteSnapshotStore, tamper: SQLiteTamper
) -> None:
    await contract.check_prune_reseals_and_refuses_damage(store, tamper)


async def test_flips_in_the_key_version_and_checksum_columns(store: SQLiteSnapshotStore) -> None:
    url = "https://columns.example.com/"
    await store.begin_version("v1")
    await store.put_fetch(contract.fetch_result(url, body=b"one"), method="GET")
    await store.begin_version("v2")
    await store.put_fetch(contract.fetch_result(url, body=b"two"), method="GET")
    await store.record_verdict("case-c", contract.verdict(True, validity=(True, 1.0)))
    await store.begin_version("v3")
    key = entry_key("GET", url)

    # the version column: 2 -> 3 (one bit) moves the v2 entry to v3; v3's replay reads it
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE entries SET version = 3 WHERE key = ? AND version = 2", (key,))
    with pytest.raises(SnapshotEntryCorrupt, match="checksum mismatch") as info:
        await store.get_fetch("GET", url)
    assert (info.value.layer, info.value.key, info.value.version) == ("fetch", key, 3)
    report = await store.verify(raise_on_damage=False)
    assert [(d.layer, d.key, d.version) for d in report.damaged] == [("fetch", key, 3)]
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE entries SET version = 2 WHERE key = ? AND version = 3", (key,))
    assert (await store.verify()).ok

    # the key and layer columns: the entry no longer sits where a lookup finds it, but verify
    # finds it wherever it is (the checksum covers both)
    flipped = entry_key("case-b")  # "c" ^ 0x01 == "b"
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE entries SET key = ? WHERE layer = 'verdict'", (flipped,))
        db.execute("UPDATE entries SET layer = 'fetci' WHERE version = 1")  # "h" ^ 0x01
    report = await store.verify(raise_on_damage=False)
    assert {(d.layer, d.key) for d in report.damaged} == {("verdict", flipped), ("fetci", key)}
    with pytest.raises(SnapshotEntryCorrupt, match="checksum mismatch"):
        await store.get_verdict("case-b")

    # the checksum column itself, and a checksum that is missing altogether
    with sqlite3.connect(store.path) as db:
        (checksum,) = db.execute(
            "SELECT checksum FROM entries WHERE version = 2 AND layer = 'fetch'"
        ).fetchone()
        bad = checksum[:10] + ("0" if checksum[10] != "0" else "1") + checksum[11:]
        db.execute("UPDATE entries SET checksum = ? WHERE version = 2 AND layer = 'fetch'", (bad,))
    with pytest.raises(SnapshotEntryCorrupt, match="checksum mismatch"):
        await store.get_fetch("GET", url)
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE entries SET checksum = NULL WHERE version = 2 AND layer = 'fetch'")
    with pytest.raises(SnapshotEntryCorrupt, match="no checksum"):
        await store.get_fetch("GET", url)


def _sql(path: Path, sql: str, *args: object) -> None:
    """One statement on its own connection, committed and closed."""
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute(sql, args)


def _legacy_store(path: Path) -> dict[str, Any]:
    """A store exactly as citeguard wrote it before checksums (migration m001 only)."""
    fetched = contract.fetch_result("https://legacy.example.com/", body=b"<html>legacy</html>")
    rec = SearchRecord(query="q", provider="p", raw={"results": []})
    baseline = contract.verdict(True, validity=(True, 1.0))
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute(
            "CREATE TABLE citeguard_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        MIGRATIONS[0](db)
        now = "2026-01-01T00:00:00+00:00"
        db.execute("INSERT INTO citeguard_migrations VALUES ('m001_initial', ?)", (now,))
        db.execute("INSERT INTO versions (label, created_at) VALUES ('old', ?)", (now,))
        body = fetched.body or b""
        db.execute(
            "INSERT INTO bodies VALUES (?, ?, ?)",
            (body_digest(body), len(body), zlib.compress(body)),
        )
        rows = [
            ("fetch", entry_key("GET", fetched.url), fetched.model_dump_json(), body_digest(body)),
            ("search", entry_key("p", "q"), rec.model_dump_json(), None),
            ("verdict", entry_key("case-old"), baseline.model_dump_json(), None),
        ]
        for layer, key, data, body_hash in rows:
            db.execute(
                "INSERT INTO entries VALUES (?, ?, 1, ?, ?, ?)", (layer, key, data, body_hash, now)
            )
    finally:
        db.close()
    return {"fetch": fetched, "search": rec, "verdict": baseline}


async def test_a_store_from_before_checksums_reads_and_reports_unchecked(tmp_path: Path) -> None:
    path = tmp_path / "legacy.sqlite"
    old = _legacy_store(path)

    # read-only (a bundled or committed store): readable as it is, nothing migrated
    ro = SQLiteSnapshotStore(path, read_only=True)
    got = await ro.get_fetch("GET", "https://legacy.example.com/")
    assert got is not None and got.body == old["fetch"].body
    assert await ro.get_verdict("case-old") == old["verdict"]
    report = await ro.verify()
    assert report.ok and report == 1 and len(report.unchecked) == 3 and report.checked == 0
    with pytest.raises(SnapshotError, match="read-only"):
        await ro.seal()
    await ro.close()

    # writable: migrated on open (m002 marks the old rows unchecked); new writes are checked
    rw = SQLiteSnapshotStore(path)
    assert await rw.get_search("p", "q") == old["search"]
    await rw.put_fetch(contract.fetch_result("https://new.example.com/"), method="GET")
    report = await rw.verify()
    assert report.ok and len(report.unchecked) == 3 and report.checked == 1
    with closing(sqlite3.connect(path)) as db:
        names = [r[0] for r in db.execute("SELECT name FROM citeguard_migrations ORDER BY name")]
        assert names == ["m001_initial", "m002_entry_checksums"]
        assert db.execute("SELECT count(*) FROM entries WHERE checksum IS NULL").fetchone() == (0,)
    # a legacy entry has no checksum: a change that keeps it valid cannot be seen, one that
    # breaks it still is
    _sql(path, "UPDATE entries SET data = substr(data, 1, 20) WHERE layer = 'verdict'")
    with pytest.raises(SnapshotEntryCorrupt, match="does not validate") as info:
        await rw.get_verdict("case-old")
    assert info.value.key == entry_key("case-old")
    with pytest.raises(SnapshotDamaged):
        await rw.seal()
    _sql(
        path,
        "UPDATE entries SET data = ? WHERE layer = 'verdict'",
        old["verdict"].model_dump_json(),
    )
    assert await rw.seal() == 3
    report = await rw.verify()
    assert report.ok and report.unchecked == () and report.checked == 4
    await rw.close()
    assert _sidecars(path) == []  # the last connection closed: everything is in the file
    ro = SQLiteSnapshotStore(path, read_only=True)
    assert (await ro.verify()).unchecked == ()
    await ro.close()


async def test_the_bundled_demo_snapshot_is_sealed_and_intact() -> None:
    from citeguard.demo import snapshot_path

    demo = SQLiteSnapshotStore(snapshot_path(), read_only=True)
    try:
        report = await demo.verify()
        assert report.ok and report.unchecked == () and report.checked == report.entries > 0
    finally:
        await demo.close()


def test_cli_verify_lists_every_damaged_entry(tmp_path: Path) -> None:
    path = tmp_path / "cli-damage.sqlite"

    async def prepare() -> None:
        s = SQLiteSnapshotStore(path)
        await contract.write_probes(s)
        await s.close()

    asyncio.run(prepare())
    st = ["--store", str(path)]
    assert _cli(*st, "verify")[0] == 0
    t = SQLiteTamper(path)
    for layer, key in (
        ("fetch", entry_key("GET", contract.PROBE_URL)),
        ("case", entry_key("case-i")),
    ):
        t.overwrite(layer, key, contract.flip(t.stored(layer, key), 5))
    code, _, err = _cli(*st, "verify")
    assert code == 2 and "2 damaged entries" in err
    assert f"fetch {entry_key('GET', contract.PROBE_URL)}" in err
    assert f"case {entry_key('case-i')}" in err

"""Bits flipped in a real SQLite snapshot file, anywhere: in entry text, in bodies, in the
SQLite page structure itself. Every outcome must be a reported damage or an intact replay:

* ``verify(raise_on_damage=False)`` always returns a report (``SnapshotDamaged`` when raising);
* a replayed entry is exactly what was written, or refused with ``SnapshotEntryCorrupt``
  naming it (``SnapshotCorrupt`` where SQLite cannot open the file at all), or missing where
  verify reports the damage that hid it (a damaged index); never another value, never
  another exception;
* where SQLite still reads the file (verify lists no problem of the file), every entry verify
  does not list as damaged replays intact, and every entry it lists is refused.

Seeded and bounded (1-8 flips per file, a fixed list of seeds), so a failure names its seed.
"""

from __future__ import annotations

import asyncio
import io
import random
import sqlite3
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import snapshot_contract as contract

from citeguard import CitationStatus, EntailmentPolicy, FetchPolicy, Guard, Policy
from citeguard.snapshot import (
    SnapshotEntryCorrupt,
    SQLiteSnapshotStore,
)
from citeguard.snapshot_cli import snapshot_main

if TYPE_CHECKING:
    from conftest import Farm

SEEDS = range(160)
PAGE = (
    "<html><head><title>Eiffel Tower</title></head><body><article>"
    "<p>The Eiffel Tower is 330 metres tall.</p></article></body></html>"
)


async def _write(path: Path) -> dict[str, contract.Probe]:
    store = SQLiteSnapshotStore(path)
    try:
        probes = await contract.write_probes(store)
        for i in range(20):
            extra = contract.fetch_result(f"https://e{i}.example.com/p", body=b"<p>x</p>" * (i + 1))
            await store.put_fetch(extra, method="GET")
    finally:
        await store.close()
    return probes


def _written(path: Path) -> dict[str, contract.Probe]:
    probes = asyncio.run(_write(path))
    assert not Path(f"{path}-wal").exists()  # closed cleanly: everything is in the main file
    return probes


def _damage(raw: bytes, seed: int) -> bytes:
    """1-8 flipped bits: for even seeds anywhere in the file, for odd ones near entry text
    (where a flip can leave a TEXT value that is not UTF-8)."""
    rng = random.Random(seed)
    data = bytearray(raw)
    near = [i for i in range(len(raw)) if raw.startswith(b'{"', i)]
    for _ in range(rng.randint(1, 8)):
        if seed % 2 == 0 or not near:
            byte = rng.randrange(len(data))
        else:
            byte = min(len(data) - 1, rng.choice(near) + rng.randrange(400))
        data[byte] ^= 1 << rng.randrange(8)
    return bytes(data)


async def _outcome(path: Path, probes: dict[str, contract.Probe], read_only: bool) -> str:
    store = SQLiteSnapshotStore(path, read_only=read_only)
    try:
        return await contract.damage_outcome(store, probes)
    finally:
        await store.close()


@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "writable"])
def test_random_bit_flips_end_as_reported_damage_or_intact_replay(
    tmp_path: Path, read_only: bool
) -> None:
    original = tmp_path / "original.sqlite"
    probes = _written(original)
    raw = original.read_bytes()
    tally: Counter[str] = Counter()
    for seed in SEEDS:
        path = tmp_path / f"damaged-{seed}.sqlite"
        path.write_bytes(_damage(raw, seed))
        try:
            tally[asyncio.run(_outcome(path, probes, read_only))] += 1
        except AssertionError as e:
            raise AssertionError(f"seed {seed}: {e}") from e
        for p in tmp_path.glob(f"damaged-{seed}.sqlite*"):
            p.unlink()
    # every route was taken: intact files, damaged entries in a readable file, damaged files
    assert min(tally["intact"], tally["entries damaged"], tally["store damaged"]) >= 5, tally


def _not_utf8(path: Path) -> dict[str, contract.Probe]:
    """A store whose search entry holds, in the file, a byte UTF-8 never has."""
    probes = _written(path)
    raw = path.read_bytes()
    at = raw.index(b'{"query":"integrity query"') + 1  # in the search entry's data
    path.write_bytes(raw[:at] + b"\xff" + raw[at + 1 :])
    return probes


def test_a_value_that_is_no_longer_utf8_is_a_damaged_entry(tmp_path: Path) -> None:
    """The case seen in the field: a flipped bit inside an entry's text in the file."""
    path = tmp_path / "store.sqlite"
    probes = _not_utf8(path)
    with sqlite3.connect(path) as db, pytest.raises(sqlite3.OperationalError, match="UTF-8"):
        db.execute("SELECT data FROM entries").fetchall()  # what sqlite3 itself makes of it

    async def run() -> None:
        store = SQLiteSnapshotStore(path, read_only=True)
        try:
            report = await store.verify(raise_on_damage=False)
            assert [(d.layer, d.key) for d in report.damaged] == [("search", probes["search"].key)]
            assert report.problems == ()
            await contract.read_is_damaged(store, probes["search"])
            for probe in probes.values():
                if probe.layer != "search":
                    await contract.reads_back(store, probe)
        finally:
            await store.close()

    asyncio.run(run())


def test_cli_verify_lists_an_entry_that_is_no_longer_utf8(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    probes = _not_utf8(path)
    out, err = io.StringIO(), io.StringIO()
    code = snapshot_main(["verify", "--store", str(path)], out=out, err=err)
    assert code == 2, (out.getvalue(), err.getvalue())
    assert "1 damaged entry" in err.getvalue()
    assert f"search {probes['search'].key} (version 1): checksum mismatch" in err.getvalue()


async def test_a_guard_replaying_a_damaged_entry_is_refused_by_name(
    farm: Farm, tmp_path: Path
) -> None:
    """End to end: a recorded check, one byte of an entry holding the cited page made non-UTF-8
    in the file, replayed: the run stops with SnapshotEntryCorrupt naming that entry, not
    another error."""
    url = farm.add("facts.example.com", "/eiffel", body=PAGE)
    answer = f"The Eiffel Tower is 330 metres tall [1].\n\n[1] {url}\n"
    path = tmp_path / "snap.sqlite"
    policy = Policy(
        fetch=FetchPolicy(allow_private_addresses=True, url_timeout=3.0, retries=0),
        entailment=EntailmentPolicy(backend="none"),
    )
    store = SQLiteSnapshotStore(path)
    try:
        async with Guard(policy, resolver=farm.resolver, cache=store, snapshot_mode="record") as g:
            recorded = await g.check(answer, question="How tall is the Eiffel Tower?")
    finally:
        await store.close()
    assert recorded.citations[0].status is CitationStatus.OK
    raw = await asyncio.to_thread(path.read_bytes)
    at = raw.index(b'{"url":"' + url.encode()) + 1
    await asyncio.to_thread(path.write_bytes, raw[:at] + b"\xff" + raw[at + 1 :])
    store = SQLiteSnapshotStore(path, read_only=True)
    try:
        async with Guard(policy, resolver=farm.resolver, cache=store, snapshot_mode="replay") as g:
            with pytest.raises(SnapshotEntryCorrupt) as info:
                await g.check(answer, question="How tall is the Eiffel Tower?")
        report = await store.verify(raise_on_damage=False)
    finally:
        await store.close()
    # the first entry holding the page's record (its fetch or its extracted page) is refused
    assert info.value.layer in ("fetch", "page") and url in info.value.key
    assert [(d.layer, d.key) for d in report.damaged] == [(info.value.layer, info.value.key)]

"""Snapshots: record every web interaction once, so CI replays it offline and never flakes.

Two runs of the same prompt hours apart return different URLs and pages; a gate that goes to the
network in CI flakes for reasons unrelated to the agent. A :class:`SnapshotStore` keeps four
layers, each keyed so a replay finds exactly what was recorded:

* **search**: provider + literal query → the full result JSON (:class:`SearchRecord`);
* **fetch**: method + normalised URL → status, reason, headers, redirect chain, final URL,
  timestamp, and the body (zlib-compressed, stored once by sha256);
* **extraction**: URL + extractor version → the extracted :class:`Page`;
* **judge**: sha256 of (model, system prompt, user prompt) → the LLM judge's reply object (or
  the error it ended with) and its token usage (:class:`JudgeRecord`), so a replayed run gives
  the same verdict with no judge running.

Modes (:class:`SnapshotMode`): ``live`` (no store), ``record`` (live, and write everything),
``replay`` (read only; a miss is a :class:`~citeguard.errors.SnapshotMiss` naming the URL or
query, never a silent network call, and no socket is ever opened), ``refresh`` (re-fetch and
write a new version).

Versions and baselines: every re-snapshot is a new version with its own baseline, the verdict
vector of each case recorded under it (:meth:`SnapshotStore.record_verdict`). A version
inherits the entries of the versions before it ("latest ≤ v", see
:mod:`citeguard.snapshot.base`). ``citeguard snapshot list | show V | diff V1 V2 | prune --keep N``
shows which pages changed and which verdicts moved.

Backends: :class:`SQLiteSnapshotStore` (one file, WAL; the default) and
:class:`RedisSnapshotStore` (many replicas, one cache; extra ``redis``).

Integrity: every entry is stored with a sha256 checksum over all of it
(:func:`entry_checksum`: layer, key, version, body hash, time, data) and every body under its
own sha256. A read checks before it uses anything: a damaged entry raises
:class:`SnapshotEntryCorrupt` naming its layer and key, never a different value.
:meth:`SnapshotStore.verify` checks every entry and body and lists *all* the damage
(:class:`VerifyReport`, :class:`SnapshotDamaged`). Stores written before checksums existed are
read as before and reported as *unchecked*; :meth:`SnapshotStore.seal` gives them checksums.

Gating tests on snapshots (pytest plugin, registered as ``pytest11`` entry point ``citeguard``)::

    @pytest.mark.citeguard_snapshot
    async def test_answer_cites_well(citeguard_snapshot):
        guard = Guard(cache=citeguard_snapshot.store, snapshot_mode=citeguard_snapshot.mode)
        ...

``pytest --citeguard-record=new`` records the cases the store lacks and replays the rest (the
default locally); ``none`` replays only (the default when the ``CI`` environment variable is
set); ``all`` re-records every case into a new version. The store defaults to
``tests/snapshots/citeguard.sqlite``; commit it.

Re-snapshotting from CI
-----------------------
The schedule is yours: weekly for a news agent, monthly for a stable how-to agent. A scheduled
job re-records everything into a new version, prints what moved, and commits the store::

    # .github/workflows/resnapshot.yml
    on:
      schedule: [{cron: "0 4 * * 1"}]        # Mondays 04:00 UTC
      workflow_dispatch: {}
    jobs:
      resnapshot:
        runs-on: ubuntu-latest
        permissions: {contents: write, pull-requests: write}
        steps:
          - uses: actions/checkout@v4
          - uses: actions/setup-python@v5
            with: {python-version: "3.11"}
          - run: pip install -e '.[test]'
          # the network is allowed here, and only here; failures are recorded like successes
          - run: pytest --citeguard-record=all || true
          - run: citeguard snapshot diff latest~1 latest
          - run: citeguard snapshot prune --keep 8
          - uses: peter-evans/create-pull-request@v6
            with: {title: "Re-snapshot citations", branch: resnapshot, add-paths: tests/snapshots}

Review the diff in the pull request like any other change: pages that changed and verdicts that
moved are the agent's real-world drift. Teams that keep the store out of git upload it as a
build artifact (or to object storage) instead and download it before the gated test run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from citeguard.errors import SnapshotCorrupt, SnapshotError, SnapshotMiss
from citeguard.snapshot.base import (
    AxisMove,
    AxisSummary,
    CaseBaseline,
    DamagedEntry,
    EntryRef,
    FetchEntry,
    JudgeRecord,
    PageChange,
    SearchChange,
    SnapshotDamaged,
    SnapshotDiff,
    SnapshotEntryCorrupt,
    SnapshotMode,
    SnapshotStore,
    VerdictChange,
    VerifyReport,
    VersionDetail,
    VersionInfo,
    entry_checksum,
    judge_key,
    snapshot_url_key,
)
from citeguard.snapshot.replay import (
    CaseSnapshot,
    FetcherLike,
    SnapshotFetcher,
    current_snapshot,
    prepare_snapshot,
    search_record,
    snapshot_page,
    snapshot_search,
)
from citeguard.snapshot.sqlite_store import SQLiteSnapshotStore

if TYPE_CHECKING:
    from citeguard.snapshot.redis_store import RedisSnapshotStore

__all__ = [
    "AxisMove",
    "AxisSummary",
    "CaseBaseline",
    "CaseSnapshot",
    "DamagedEntry",
    "EntryRef",
    "FetchEntry",
    "FetcherLike",
    "JudgeRecord",
    "PageChange",
    "RedisSnapshotStore",
    "SQLiteSnapshotStore",
    "SearchChange",
    "SnapshotCorrupt",
    "SnapshotDamaged",
    "SnapshotDiff",
    "SnapshotEntryCorrupt",
    "SnapshotError",
    "SnapshotFetcher",
    "SnapshotMiss",
    "SnapshotMode",
    "SnapshotStore",
    "VerdictChange",
    "VerifyReport",
    "VersionDetail",
    "VersionInfo",
    "current_snapshot",
    "entry_checksum",
    "judge_key",
    "open_store",
    "prepare_snapshot",
    "search_record",
    "snapshot_page",
    "snapshot_search",
    "snapshot_url_key",
]


def __getattr__(name: str) -> Any:
    # redis is an optional extra: import its store only when asked for
    if name == "RedisSnapshotStore":
        try:
            from citeguard.snapshot.redis_store import RedisSnapshotStore
        except ImportError as e:
            from citeguard.errors import MissingExtraError

            raise MissingExtraError("redis", "redis") from e
        return RedisSnapshotStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_store(
    location: str, *, namespace: str = "citeguard", create: bool = True
) -> SnapshotStore:
    """A store from a location: ``redis://`` / ``rediss://`` / ``unix://`` URLs open a
    :class:`RedisSnapshotStore`, anything else is an SQLite file path."""
    if location.startswith(("redis://", "rediss://", "unix://")):
        store: SnapshotStore = __getattr__("RedisSnapshotStore")(location, namespace=namespace)
        return store
    return SQLiteSnapshotStore(location, create=create)

"""Snapshot stores: record every web interaction once, replay it offline forever after.

See :mod:`citeguard.cache` for the overview and how to re-snapshot from CI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from citeguard.snapshot.base import (
    AxisMove,
    AxisSummary,
    CaseBaseline,
    FetchEntry,
    PageChange,
    SearchChange,
    SnapshotDiff,
    SnapshotMode,
    SnapshotStore,
    VerdictChange,
    VersionDetail,
    VersionInfo,
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
    "FetchEntry",
    "FetcherLike",
    "PageChange",
    "RedisSnapshotStore",
    "SQLiteSnapshotStore",
    "SearchChange",
    "SnapshotDiff",
    "SnapshotFetcher",
    "SnapshotMode",
    "SnapshotStore",
    "VerdictChange",
    "VersionDetail",
    "VersionInfo",
    "current_snapshot",
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

"""The snapshot store contract: modes, layers, versions, baselines and diffs.

A store holds six kinds of entry, each under a key and a *version*:

==========  =====================================  ===========================================
layer       key                                    value
==========  =====================================  ===========================================
``search``  provider + literal query               the :class:`SearchRecord` (full result JSON)
``fetch``   method + normalised URL                the :class:`FetchResult` JSON, plus its body
                                                   (zlib-compressed, stored once by sha256)
``page``    URL + extractor version                the extracted :class:`Page`
``verdict`` case id                                the baseline :class:`Verdict` of a case
``case``    case id                                "this case was recorded" (pytest plugin)
``judge``   sha256 of (model, system, user prompt) the judge's reply object (or the error it
                                                   ended with) and its token usage
                                                   (:class:`JudgeRecord`)
==========  =====================================  ===========================================

Versions
--------
Every (re-)snapshot is a version, numbered 1, 2, 3, ... :meth:`SnapshotStore.begin_version` starts
one. A version *inherits* every entry of the versions before it: reading key ``k`` at version
``v`` returns the entry of ``k`` written at the highest version ``<= v`` ("latest ≤ v"). So an
entry that did not change is stored once and shared by every later version, and a re-snapshot
that re-runs only some cases still replays the others. Reads never look *past* the active
version, and never anywhere else: a key with no entry at or below the active version is a miss,
and in replay mode a miss is a :class:`~citeguard.errors.SnapshotMiss`, never a network call.

A store pins its active version the first time it needs one (the newest version then, or the one
passed as ``version=``); :meth:`begin_version` and :meth:`use_version` move it. Writes go to the
active version; the first write to an empty store creates version 1.

:meth:`diff` compares the views of two versions (pages whose body or status changed, were added
or removed; searches whose results changed; baseline verdicts whose pass/fail or per-axis pass or
score moved). :meth:`prune` drops the oldest versions; entries still visible from the oldest kept
version are re-stamped to it, so every kept version replays exactly as before.

Integrity
---------
Every entry is stored with a checksum: sha256 (hex) over a canonical serialisation of all of it,
:func:`entry_checksum` (a format tag, then layer, key, version, body hash, written-at time and the
data, each length-prefixed). Bodies are content-addressed: their key *is* the sha256 of the
uncompressed bytes, and the entry's checksum covers that key. Every read (replay, ``show``,
``diff``, ``prune``) checks what it reads; a damaged entry raises
:class:`SnapshotEntryCorrupt` (a :class:`~citeguard.errors.SnapshotCorrupt`) naming its layer,
key and version, never a different value. :meth:`SnapshotStore.verify` checks *every* entry of
every version and every body and reports all the damage at once (:class:`VerifyReport`,
:class:`SnapshotDamaged`).

Entries written before checksums existed carry the marker :data:`UNCHECKED` instead: they are
read as before (still structurally validated), and ``verify`` lists them as *unchecked*, not
damaged. :meth:`SnapshotStore.seal` checks them and gives them checksums.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any

from citeguard.errors import SnapshotError
from citeguard.models import FetchResult, Page, SearchRecord, Verdict
from citeguard.snapshot.diff import (
    _axis_moves as _axis_moves,
)
from citeguard.snapshot.diff import (
    _compute_diff,
    _detail,
)
from citeguard.snapshot.entries import (
    CHECKSUM_FORMAT,
    UNCHECKED,
    DamagedEntry,
    Entry,
    EntryRef,
    Hit,
    RawEntry,
    SnapshotEntryCorrupt,
    View,
    body_digest,
    body_problem,
    check_shape,
    check_shape_key,
    compress_body,
    decode_hit,
    entry_checksum,
    entry_key,
    fetch_from_hit,
    judge_key,
    open_body,
    open_entry,
    snapshot_url_key,
    split_key,
    utcnow,
)
from citeguard.snapshot.entries import (
    _first_error as _first_error,
)
from citeguard.snapshot.records import (
    LAYERS,
    AxisMove,
    AxisSummary,
    CaseBaseline,
    ChangeKind,
    FetchEntry,
    JudgeRecord,
    Layer,
    PageChange,
    SearchChange,
    SnapshotDiff,
    SnapshotMode,
    VerdictChange,
    VersionDetail,
    VersionInfo,
)
from citeguard.snapshot.verify import (
    SnapshotDamaged,
    VerifyReport,
    audit,
)

# the store contract; the names of records, entries, verify and diff stay importable from here
__all__ = [
    "CHECKSUM_FORMAT",
    "LAYERS",
    "UNCHECKED",
    "AxisMove",
    "AxisSummary",
    "CaseBaseline",
    "ChangeKind",
    "DamagedEntry",
    "Entry",
    "EntryRef",
    "FetchEntry",
    "Hit",
    "JudgeRecord",
    "Layer",
    "PageChange",
    "RawEntry",
    "SearchChange",
    "SnapshotDamaged",
    "SnapshotDiff",
    "SnapshotEntryCorrupt",
    "SnapshotMode",
    "SnapshotStore",
    "VerdictChange",
    "VerifyReport",
    "VersionDetail",
    "VersionInfo",
    "View",
    "audit",
    "body_digest",
    "body_problem",
    "check_shape",
    "check_shape_key",
    "compress_body",
    "decode_hit",
    "entry_checksum",
    "entry_key",
    "fetch_from_hit",
    "judge_key",
    "open_body",
    "open_entry",
    "snapshot_url_key",
    "split_key",
    "utcnow",
    "version_record",
]


# --------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------


class SnapshotStore(ABC):
    """An async snapshot store: four data layers plus versions and per-case baselines.

    Backends implement the abstract methods; :meth:`show_version` and :meth:`diff` are computed
    here from :meth:`_view`, so every backend diffs the same way. All methods are coroutines and
    never block the event loop. Backend errors surface as
    :class:`~citeguard.errors.SnapshotError` (unreachable, locked, closed) or
    :class:`~citeguard.errors.SnapshotCorrupt` (unreadable data), never as a driver exception.
    """

    # ---- search layer
    @abstractmethod
    async def get_search(self, provider: str, query: str) -> SearchRecord | None:
        """The recorded search for (provider, literal query) at the active version."""

    @abstractmethod
    async def put_search(self, record: SearchRecord) -> None:
        """Write a search under (record.provider, record.query)."""

    # ---- fetch layer
    @abstractmethod
    async def get_fetch(self, method: str, url: str) -> FetchResult | None:
        """The recorded fetch for (method, normalised url), body included."""

    @abstractmethod
    async def put_fetch(self, result: FetchResult, *, method: str, url: str | None = None) -> None:
        """Write a fetch under (method, normalised ``url`` or ``result.url``); the body is stored
        once by content hash, compressed."""

    # ---- extraction layer
    @abstractmethod
    async def get_page(self, url: str, extractor_version: str) -> Page | None:
        """The extracted page for (url, extractor version)."""

    @abstractmethod
    async def put_page(self, url: str, extractor_version: str, page: Page) -> None:
        """Write an extracted page."""

    # ---- judge layer
    @abstractmethod
    async def get_judge(self, key: str) -> JudgeRecord | None:
        """The recorded judge question under ``key`` (:func:`judge_key`)."""

    @abstractmethod
    async def put_judge(self, key: str, record: JudgeRecord) -> None:
        """Write a judge question's outcome under ``key`` (:func:`judge_key`)."""

    # ---- versions and baselines
    @abstractmethod
    async def begin_version(self, label: str | None = None) -> int:
        """Start a new version (inheriting everything before it) and make it active."""

    @abstractmethod
    async def current_version(self) -> int | None:
        """The active version (pinned on first use to the newest); None for an empty store."""

    @abstractmethod
    async def use_version(self, version: int) -> None:
        """Pin reads and writes to an existing version (e.g. replay an older baseline)."""

    @abstractmethod
    async def record_verdict(self, case_id: str, verdict: Verdict) -> None:
        """Record a case's verdict vector as its baseline under the active version."""

    @abstractmethod
    async def get_verdict(self, case_id: str) -> Verdict | None:
        """A case's baseline verdict at the active version."""

    @abstractmethod
    async def mark_case(self, case_id: str) -> None:
        """Note that a case was recorded completely under the active version."""

    @abstractmethod
    async def has_case(self, case_id: str) -> bool:
        """Whether a case was recorded at or below the active version."""

    @abstractmethod
    async def list_versions(self) -> list[VersionInfo]:
        """Every version, oldest first."""

    @abstractmethod
    async def prune(self, keep: int) -> int:
        """Keep the newest ``keep`` versions, drop the rest and orphaned bodies; return how many
        versions were dropped. Every kept version replays exactly as before."""

    @abstractmethod
    async def verify(self, *, raise_on_damage: bool = True) -> VerifyReport:
        """Check the whole store: every entry of every layer and version (its checksum, its
        fields, its data against its layer's model, its body) and every body against its hash.

        Returns a :class:`VerifyReport` (an ``int``: the number of bodies checked, as before)
        listing the unchecked (pre-checksum) entries. When anything is damaged it raises
        :class:`SnapshotDamaged` (a :class:`~citeguard.errors.SnapshotCorrupt`) whose
        ``damaged`` lists *every* damaged entry; ``raise_on_damage=False`` returns the report
        instead."""

    @abstractmethod
    async def seal(self) -> int:
        """Give every unchecked (pre-checksum) entry its checksum; return how many were sealed.

        It checks the whole store first, as :meth:`verify` does, and raises
        :class:`SnapshotDamaged`, sealing nothing, when anything is damaged. Sealing vouches
        for the entries as they are now: run it on a store you trust (e.g. one under version
        control)."""

    @abstractmethod
    async def count_bodies(self) -> int:
        """How many distinct bodies are stored (each once, whatever refers to it)."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections and threads. Idempotent."""

    @abstractmethod
    async def _view(self, layer: Layer, version: int) -> View:
        """Every key of ``layer`` visible at ``version``, with its entry."""

    # ---- shared, computed from views

    async def _info(self, version: int) -> VersionInfo:
        for info in await self.list_versions():
            if info.version == version:
                return info
        raise SnapshotError(f"no snapshot version {version}")

    async def show_version(self, version: int | None = None) -> VersionDetail:
        """A version's counts, what it replays (own + inherited entries) and its baselines."""
        if version is None:
            version = await self.current_version()
            if version is None:
                raise SnapshotError("the snapshot store has no versions yet")
        info = await self._info(version)
        views: dict[str, View] = {layer: await self._view(layer, version) for layer in LAYERS}
        # decoding every entry is CPU work proportional to the store: keep it off the loop
        return await asyncio.to_thread(_detail, info, views)

    async def diff(self, v1: int, v2: int) -> SnapshotDiff:
        """Pages, searches and baseline verdicts that differ between versions v1 and v2."""
        await self._info(v1)
        await self._info(v2)
        three: tuple[Layer, ...] = ("fetch", "search", "verdict")
        a: dict[str, View] = {layer: await self._view(layer, v1) for layer in three}
        b: dict[str, View] = {layer: await self._view(layer, v2) for layer in three}
        return await asyncio.to_thread(_compute_diff, v1, v2, a, b)

    async def __aenter__(self) -> SnapshotStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def version_record(label: str | None) -> dict[str, Any]:
    return {"label": label, "created_at": utcnow().isoformat()}

"""The snapshot store contract: modes, layers, versions, baselines and diffs.

A store holds five kinds of entry, each under a key and a *version*:

==========  =====================================  ===========================================
layer       key                                    value
==========  =====================================  ===========================================
``search``  provider + literal query               the :class:`SearchRecord` (full result JSON)
``fetch``   method + normalised URL                the :class:`FetchResult` JSON, plus its body
                                                   (zlib-compressed, stored once by sha256)
``page``    URL + extractor version                the extracted :class:`Page`
``verdict`` case id                                the baseline :class:`Verdict` of a case
``case``    case id                                "this case was recorded" (pytest plugin)
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
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal, NamedTuple, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from citeguard.errors import SnapshotCorrupt, SnapshotError
from citeguard.models import CitationStatus, FetchResult, Page, SearchRecord, Verdict

Layer = Literal["search", "fetch", "page", "verdict", "case"]
LAYERS: tuple[Layer, ...] = ("search", "fetch", "page", "verdict", "case")

# zlib level 6 is zlib's own default: ~4x on HTML at ~50 MB/s. Higher levels gain little on
# HTML and cost record time.
_ZLIB_LEVEL = 6


class SnapshotMode(StrEnum):
    """How a guarded run uses its snapshot store.

    * ``live``: no store; every search and fetch goes to the network.
    * ``record``: go to the network and write everything into the active version.
    * ``replay``: read only; a miss raises :class:`~citeguard.errors.SnapshotMiss` naming the URL
      or query. Nothing touches the network: the real fetcher is never even built.
    * ``refresh``: go to the network and write into a new version (see :func:`prepare_snapshot`).
    """

    LIVE = "live"
    RECORD = "record"
    REPLAY = "replay"
    REFRESH = "refresh"


# --------------------------------------------------------------------------------------------
# Public result models
# --------------------------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class VersionInfo(_Model):
    """One version of a store; the counts are the entries *written* under it, per layer."""

    version: int
    label: str | None = None
    created_at: datetime
    searches: int = 0
    fetches: int = 0
    pages: int = 0
    verdicts: int = 0
    cases: int = 0


class AxisSummary(_Model):
    passed: bool
    score: float | None = None
    evaluated: bool = True


class CaseBaseline(_Model):
    """The verdict vector of one case as recorded (visible) in a version."""

    case_id: str
    version: int  # the version the verdict was written under (≤ the version shown)
    passed: bool
    axes: dict[str, AxisSummary] = Field(default_factory=dict)


class FetchEntry(_Model):
    """One visible fetch entry of a version."""

    method: str
    url: str
    version: int
    status: CitationStatus
    http_status: int | None = None
    body_hash: str | None = None
    final_url: str | None = None


class VersionDetail(_Model):
    """Everything a version replays: its own counts, what it sees (own + inherited), baselines."""

    info: VersionInfo
    visible: dict[str, int] = Field(default_factory=dict)  # layer → entries visible at this version
    fetches: list[FetchEntry] = Field(default_factory=list)
    baselines: list[CaseBaseline] = Field(default_factory=list)


ChangeKind = Literal["added", "removed", "changed"]


class PageChange(_Model):
    """A fetched page whose body hash, status or final URL differs between two versions."""

    method: str
    url: str
    change: ChangeKind
    status_before: CitationStatus | None = None
    status_after: CitationStatus | None = None
    http_status_before: int | None = None
    http_status_after: int | None = None
    body_hash_before: str | None = None
    body_hash_after: str | None = None
    final_url_before: str | None = None
    final_url_after: str | None = None


class SearchChange(_Model):
    """A search whose result URLs differ between two versions."""

    provider: str
    query: str
    change: ChangeKind
    urls_before: list[str] = Field(default_factory=list)
    urls_after: list[str] = Field(default_factory=list)


class AxisMove(_Model):
    axis: str
    passed_before: bool | None = None
    passed_after: bool | None = None
    score_before: float | None = None
    score_after: float | None = None


class VerdictChange(_Model):
    """A case whose baseline verdict moved: overall pass/fail, or any axis's pass or score."""

    case_id: str
    change: Literal["added", "removed", "moved"]
    passed_before: bool | None = None
    passed_after: bool | None = None
    axes: list[AxisMove] = Field(default_factory=list)


class SnapshotDiff(_Model):
    """What changed between the views of versions ``v1`` and ``v2``."""

    v1: int
    v2: int
    pages: list[PageChange] = Field(default_factory=list)
    searches: list[SearchChange] = Field(default_factory=list)
    verdicts: list[VerdictChange] = Field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not (self.pages or self.searches or self.verdicts)


# --------------------------------------------------------------------------------------------
# Keys and encodings shared by the backends
# --------------------------------------------------------------------------------------------

_DEFAULT_PORTS = {"http": 80, "https": 443}


def snapshot_url_key(url: str) -> str:
    """The URL part of a fetch key: scheme and host lower-cased, default port and fragment
    dropped, an empty path made ``/``. Never raises: a URL it cannot parse is used as written.

    Answers' URLs are normalised by the parser already; this only makes the key robust to the
    spellings that cannot change what a server returns.
    """
    text = url.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return text
    if not parts.scheme or not parts.netloc:
        return text
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    netloc = f"{userinfo}@{host}" if userinfo else host
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        netloc = f"{netloc}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def entry_key(*parts: str) -> str:
    """The key of an entry as one string: a JSON array, unambiguous and readable in a dump."""
    return json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"))


def split_key(key: str) -> list[str]:
    try:
        parts = json.loads(key)
    except ValueError as e:
        raise SnapshotCorrupt(f"snapshot entry key {key[:80]!r} is not valid JSON") from e
    if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
        raise SnapshotCorrupt(f"snapshot entry key {key[:80]!r} is not a list of strings")
    return parts


def body_digest(body: bytes) -> str:
    """The content address of a body: sha256 of the uncompressed bytes, hex."""
    return hashlib.sha256(body).hexdigest()


def compress_body(body: bytes) -> bytes:
    return zlib.compress(body, _ZLIB_LEVEL)


def decompress_body(data: bytes, expected_hash: str, where: str) -> bytes:
    """Inflate a stored body and check it against its content address."""
    try:
        body = zlib.decompress(data)
    except zlib.error as e:
        raise SnapshotCorrupt(f"{where}: body {expected_hash[:16]} does not inflate ({e})") from e
    if body_digest(body) != expected_hash:
        raise SnapshotCorrupt(f"{where}: body {expected_hash[:16]} does not match its sha256")
    return body


def utcnow() -> datetime:
    return datetime.now(UTC)


M = TypeVar("M", bound=BaseModel)


def decode_model(cls: type[M], data: str | bytes, where: str) -> M:
    try:
        return cls.model_validate_json(data)
    except ValidationError as e:
        raise SnapshotCorrupt(f"{where}: stored {cls.__name__} does not validate ({e})") from e


def fetch_from_entry(data: str | bytes, body: bytes | None, where: str) -> FetchResult:
    result = decode_model(FetchResult, data, where)
    return result if body is None else result.model_copy(update={"body": body})


class Entry(NamedTuple):
    """One stored entry as the backends hand it to the shared code."""

    key: str
    version: int
    data: str
    body_hash: str | None


View = dict[str, Entry]  # key → the entry visible at some version


# --------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------


class SnapshotStore(ABC):
    """An async snapshot store: three data layers plus versions and per-case baselines.

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
    async def verify(self) -> int:
        """Check the whole store (structure, every body against its hash); return the number of
        bodies checked or raise :class:`~citeguard.errors.SnapshotCorrupt`."""

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


# --------------------------------------------------------------------------------------------
# Diff helpers (pure; CPU cost is linear in the number of entries and sub-ms for test stores)
# --------------------------------------------------------------------------------------------


def _detail(info: VersionInfo, views: Mapping[str, View]) -> VersionDetail:
    return VersionDetail(
        info=info,
        visible={layer: len(view) for layer, view in views.items()},
        fetches=[_fetch_entry(e) for e in sorted(views["fetch"].values(), key=_by_key)],
        baselines=[_baseline(e) for e in sorted(views["verdict"].values(), key=_by_key)],
    )


def _compute_diff(v1: int, v2: int, a: Mapping[str, View], b: Mapping[str, View]) -> SnapshotDiff:
    return SnapshotDiff(
        v1=v1,
        v2=v2,
        pages=_diff_fetches(a["fetch"], b["fetch"]),
        searches=_diff_searches(a["search"], b["search"]),
        verdicts=_diff_verdicts(a["verdict"], b["verdict"]),
    )


def _by_key(e: Entry) -> str:
    return e.key


def _fetch_entry(e: Entry) -> FetchEntry:
    method, url = split_key(e.key)
    r = decode_model(FetchResult, e.data, f"fetch {url}")
    return FetchEntry(
        method=method,
        url=url,
        version=e.version,
        status=r.status,
        http_status=r.http_status,
        body_hash=e.body_hash,
        final_url=r.final_url,
    )


def _axes(v: Verdict) -> dict[str, AxisSummary]:
    return {
        name: AxisSummary(passed=a.passed, score=a.score, evaluated=a.evaluated)
        for name, a in sorted(v.axes.items())
    }


def _baseline(e: Entry) -> CaseBaseline:
    (case_id,) = split_key(e.key)
    v = decode_model(Verdict, e.data, f"verdict {case_id}")
    return CaseBaseline(case_id=case_id, version=e.version, passed=v.passed, axes=_axes(v))


def _diff_fetches(a: View, b: View) -> list[PageChange]:
    out: list[PageChange] = []
    for key in sorted(a.keys() | b.keys()):
        before = _fetch_entry(a[key]) if key in a else None
        after = _fetch_entry(b[key]) if key in b else None
        ref = after or before
        assert ref is not None
        if before is not None and after is not None:
            same = (
                before.body_hash == after.body_hash
                and before.status == after.status
                and before.http_status == after.http_status
                and before.final_url == after.final_url
            )
            if same:
                continue
        change: ChangeKind = (
            "added" if before is None else "removed" if after is None else "changed"
        )
        out.append(
            PageChange(
                method=ref.method,
                url=ref.url,
                change=change,
                status_before=before.status if before else None,
                status_after=after.status if after else None,
                http_status_before=before.http_status if before else None,
                http_status_after=after.http_status if after else None,
                body_hash_before=before.body_hash if before else None,
                body_hash_after=after.body_hash if after else None,
                final_url_before=before.final_url if before else None,
                final_url_after=after.final_url if after else None,
            )
        )
    return out


def _search_urls(e: Entry) -> list[str]:
    return [r.url for r in decode_model(SearchRecord, e.data, "search").results]


def _diff_searches(a: View, b: View) -> list[SearchChange]:
    out: list[SearchChange] = []
    for key in sorted(a.keys() | b.keys()):
        provider, query = split_key(key)
        before = _search_urls(a[key]) if key in a else None
        after = _search_urls(b[key]) if key in b else None
        if before == after:
            continue
        change: ChangeKind = (
            "added" if before is None else "removed" if after is None else "changed"
        )
        out.append(
            SearchChange(
                provider=provider,
                query=query,
                change=change,
                urls_before=before or [],
                urls_after=after or [],
            )
        )
    return out


def _score_moved(x: float | None, y: float | None) -> bool:
    if x is None or y is None:
        return x is not y
    return not math.isclose(x, y, rel_tol=0.0, abs_tol=1e-9)


def _diff_verdicts(a: View, b: View) -> list[VerdictChange]:
    out: list[VerdictChange] = []
    for key in sorted(a.keys() | b.keys()):
        before = _baseline(a[key]) if key in a else None
        after = _baseline(b[key]) if key in b else None
        ref = after or before
        assert ref is not None
        if before is None or after is None:
            out.append(
                VerdictChange(
                    case_id=ref.case_id,
                    change="added" if before is None else "removed",
                    passed_before=before.passed if before else None,
                    passed_after=after.passed if after else None,
                )
            )
            continue
        moves = list(_axis_moves(before.axes, after.axes))
        if moves or before.passed != after.passed:
            out.append(
                VerdictChange(
                    case_id=ref.case_id,
                    change="moved",
                    passed_before=before.passed,
                    passed_after=after.passed,
                    axes=moves,
                )
            )
    return out


def _axis_moves(
    before: Mapping[str, AxisSummary], after: Mapping[str, AxisSummary]
) -> Iterable[AxisMove]:
    for name in sorted(before.keys() | after.keys()):
        x, y = before.get(name), after.get(name)
        px, py = (x.passed if x else None), (y.passed if y else None)
        sx, sy = (x.score if x else None), (y.score if y else None)
        if px != py or _score_moved(sx, sy):
            yield AxisMove(
                axis=name, passed_before=px, passed_after=py, score_before=sx, score_after=sy
            )


def version_record(label: str | None) -> dict[str, Any]:
    return {"label": label, "created_at": utcnow().isoformat()}

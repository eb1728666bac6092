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
import hashlib
import json
import math
import re
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

Layer = Literal["search", "fetch", "page", "verdict", "case", "judge"]
LAYERS: tuple[Layer, ...] = ("search", "fetch", "page", "verdict", "case", "judge")

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
    judges: int = 0


class JudgeRecord(_Model):
    """One judge question as recorded: what it finally got and what its requests used.

    ``reply`` is the reply's JSON object the answer came from (for a partial answer, the last
    one); ``error`` / ``message`` / ``retryable`` are the :class:`~citeguard.errors.JudgeError`
    it ended with instead (its ``detail``, its message). ``requests`` counts every attempt,
    retries included; the tokens are the sum of the replies' ``usage``.
    """

    model: str
    reply: dict[str, Any] | None = None
    error: str | None = None
    message: str | None = None
    retryable: bool = False
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


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


def judge_key(model: str, system: str, user: str) -> str:
    """The key of a judge entry: sha256 (hex) of the model and the two prompts."""
    payload = json.dumps([model, system, user], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


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


class _BodyDamage(Exception):
    """A stored body that does not inflate or does not match its hash (turned into a
    SnapshotCorrupt that names the entry or the store)."""


def _inflate(data: object, expected_hash: str) -> bytes:
    if not isinstance(data, bytes):
        raise _BodyDamage(f"body {expected_hash[:16]} is {type(data).__name__}, not bytes")
    try:
        body = zlib.decompress(data)
    except zlib.error as e:
        raise _BodyDamage(f"body {expected_hash[:16]} does not inflate ({e})") from e
    if body_digest(body) != expected_hash:
        raise _BodyDamage(f"body {expected_hash[:16]} does not match its sha256")
    return body


def body_problem(data: object, expected_hash: str, size: object = None) -> str | None:
    """What is wrong with a stored body (None: it inflates to bytes whose sha256 is its hash, of
    ``size`` bytes when a size is given)."""
    try:
        body = _inflate(data, expected_hash)
    except _BodyDamage as e:
        return str(e)
    if size is not None and size != len(body):
        return f"body {expected_hash[:16]} is {len(body)} bytes, its size says {size!r}"
    return None


def utcnow() -> datetime:
    return datetime.now(UTC)


M = TypeVar("M", bound=BaseModel)


class Entry(NamedTuple):
    """One stored entry as the backends hand it to the shared code."""

    key: str
    version: int
    data: str
    body_hash: str | None


View = dict[str, Entry]  # key → the entry visible at some version


# --------------------------------------------------------------------------------------------
# Integrity: entry checksums, damaged-entry errors, verify reports
# --------------------------------------------------------------------------------------------

CHECKSUM_FORMAT = b"citeguard-entry/1\n"
# The checksum of an entry written before checksums existed (what a migration gives it).
UNCHECKED = "legacy"

_HEX64 = re.compile(r"[0-9a-f]{64}")
_KEY_PARTS: dict[str, int] = {
    "search": 2,
    "fetch": 2,
    "page": 2,
    "verdict": 1,
    "case": 1,
    "judge": 1,
}
_LAYER_MODELS: dict[str, type[BaseModel]] = {
    "search": SearchRecord,
    "fetch": FetchResult,
    "page": Page,
    "verdict": Verdict,
    "judge": JudgeRecord,
}

_Part = str | bytes | None


def entry_checksum(
    layer: str | bytes,
    key: str | bytes,
    version: int,
    body_hash: _Part,
    written_at: _Part,
    data: str | bytes,
) -> str:
    """The checksum of a stored entry: sha256 (hex) over its canonical serialisation.

    That is :data:`CHECKSUM_FORMAT`, then each field as ``<length>:<UTF-8 bytes>;`` (a missing
    one as ``-;``) in the order layer, key, version, body hash, written-at time, data. Every
    stored field of the entry is covered, so a flipped bit anywhere in it, or one entry's data
    under another key, layer or version, changes the checksum.
    """
    h = hashlib.sha256(CHECKSUM_FORMAT)
    for part in (layer, key, str(version), body_hash, written_at, data):
        if part is None:
            h.update(b"-;")
            continue
        raw = part if isinstance(part, bytes) else part.encode("utf-8", "surrogatepass")
        h.update(b"%d:" % len(raw))
        h.update(raw)
        h.update(b";")
    return h.hexdigest()


class EntryRef(_Model):
    """One stored entry: its layer, its key (the stored key string) and its version."""

    layer: str
    key: str
    version: int | None = None


class DamagedEntry(EntryRef):
    """A damaged entry and what is wrong with it. A damaged body that no readable entry refers
    to is listed with layer ``"body"``, its sha256 as key and no version; a Redis entry too
    damaged to show its own key is named ``#`` + the digest in its Redis key."""

    problem: str


class SnapshotEntryCorrupt(SnapshotCorrupt):
    """One stored entry is damaged: its checksum does not match, a field is unreadable, its data
    does not validate, or its body is missing or damaged. Names the entry (``layer``, ``key``,
    ``version``); ``problem`` says what is wrong."""

    def __init__(self, where: str, layer: str, key: str, version: int | None, problem: str) -> None:
        at = "" if version is None else f" (version {version})"
        super().__init__(
            f"{where}: {layer} entry {key}{at} is damaged: {problem}. Restore the store from "
            "version control or a backup, or re-record the case (citeguard snapshot verify "
            "lists every damaged entry)"
        )
        self.where = where
        self.layer = layer
        self.key = key
        self.version = version
        self.problem = problem

    @property
    def entry(self) -> DamagedEntry:
        return DamagedEntry(
            layer=self.layer, key=self.key, version=self.version, problem=self.problem
        )


class VerifyReport(int):
    """What :meth:`SnapshotStore.verify` found.

    As an ``int`` it is what ``verify`` has always returned, the number of bodies checked (so
    ``report == 3`` compares that number only); the attributes say the rest:

    * ``entries``: the stored entries checked (every layer, every version);
    * ``unchecked``: entries written before checksums existed (:data:`UNCHECKED`): readable and
      valid, but not provably unchanged (:meth:`SnapshotStore.seal` gives them checksums);
    * ``damaged``: every damaged entry (and every damaged body no readable entry refers to);
    * ``problems``: findings about the store as a whole (the file's own integrity check,
      entries under versions the store does not list, index gaps).
    """

    bodies: int
    entries: int
    unchecked: tuple[EntryRef, ...]
    damaged: tuple[DamagedEntry, ...]
    problems: tuple[str, ...]

    def __new__(
        cls,
        *,
        bodies: int,
        entries: int = 0,
        unchecked: Iterable[EntryRef] = (),
        damaged: Iterable[DamagedEntry] = (),
        problems: Iterable[str] = (),
    ) -> VerifyReport:
        self = super().__new__(cls, bodies)
        self.bodies = bodies
        self.entries = entries
        self.unchecked = tuple(unchecked)
        self.damaged = tuple(damaged)
        self.problems = tuple(problems)
        return self

    @property
    def ok(self) -> bool:
        """Nothing damaged and no store-level problem (unchecked entries are not damage)."""
        return not self.damaged and not self.problems

    @property
    def checked(self) -> int:
        """Entries whose checksum matched."""
        damaged = sum(1 for d in self.damaged if d.layer != "body")
        return self.entries - len(self.unchecked) - damaged

    def summary(self) -> str:
        return (
            f"{self.entries} entries ({self.checked} checked, {len(self.unchecked)} unchecked, "
            f"{len(self.damaged)} damaged), {self.bodies} bodies, {len(self.problems)} problem(s)"
        )

    def __repr__(self) -> str:
        return f"VerifyReport({self.summary()})"

    def __str__(self) -> str:
        return str(int(self))


class SnapshotDamaged(SnapshotCorrupt):
    """:meth:`SnapshotStore.verify` found damage; ``report`` holds everything it found and
    ``damaged`` every damaged entry (the message lists them all)."""

    def __init__(self, where: str, report: VerifyReport) -> None:
        lines = [
            f"{where} is damaged: {len(report.damaged)} damaged entr"
            f"{'y' if len(report.damaged) == 1 else 'ies'}, {len(report.problems)} problem(s)"
        ]
        for d in report.damaged:
            at = "" if d.version is None else f" (version {d.version})"
            lines.append(f"  {d.layer} {d.key}{at}: {d.problem}")
        lines += [f"  {p}" for p in report.problems]
        lines.append(
            "Restore the store from version control or a backup, or re-record the damaged cases."
        )
        super().__init__("\n".join(lines))
        self.report = report
        self.damaged = report.damaged


class RawEntry(NamedTuple):
    """One stored entry exactly as a backend read it; nothing is trusted yet."""

    layer: object
    key: object
    version: object
    data: object
    body_hash: object
    written_at: object
    checksum: object


class Hit(NamedTuple):
    """One stored entry after :func:`open_entry` checked it."""

    where: str
    layer: str
    key: str
    version: int
    data: str
    body_hash: str | None
    written_at: str | None
    checked: bool  # False: written before checksums (UNCHECKED), validated but not provable

    @property
    def ref(self) -> tuple[str, str, str, int]:
        """(where, layer, key, version): how a :class:`SnapshotEntryCorrupt` names it."""
        return self.where, self.layer, self.key, self.version

    def checksum_at(self, version: int) -> str:
        """The checksum of this entry stored under ``version``."""
        return entry_checksum(
            self.layer, self.key, version, self.body_hash, self.written_at, self.data
        )

    def resealed(self, version: int) -> str:
        """What this entry carries when moved to ``version`` (prune): a checked entry its new
        checksum, an unchecked one stays unchecked."""
        return self.checksum_at(version) if self.checked else UNCHECKED


def _text(x: object) -> str:
    if isinstance(x, str):
        return x
    if isinstance(x, bytes):
        return x.decode("utf-8", "backslashreplace")
    return repr(x)


def open_entry(where: str, raw: RawEntry) -> Hit:
    """Check a stored entry against its checksum (first) and its fields' types; return it.

    Raises :class:`SnapshotEntryCorrupt` naming the entry. An entry carrying :data:`UNCHECKED`
    passes without a checksum (``checked=False``).
    """
    layer, key = _text(raw.layer), _text(raw.key)
    version = raw.version if type(raw.version) is int else None

    if version is None:
        raise SnapshotEntryCorrupt(
            where, layer, key, version, f"its version {raw.version!r} is not an integer"
        )
    fields = (raw.layer, raw.key, raw.body_hash, raw.written_at, raw.data)
    if not all(f is None or isinstance(f, str | bytes) for f in fields):
        raise SnapshotEntryCorrupt(
            where, layer, key, version, "a field of it is neither text nor missing"
        )
    assert isinstance(raw.layer, str | bytes) and isinstance(raw.key, str | bytes)
    assert raw.body_hash is None or isinstance(raw.body_hash, str | bytes)
    assert raw.written_at is None or isinstance(raw.written_at, str | bytes)
    if not isinstance(raw.data, str | bytes):
        raise SnapshotEntryCorrupt(where, layer, key, version, "it has no data")
    checksum = raw.checksum
    checked = checksum != UNCHECKED
    if checked:
        if not isinstance(checksum, str):
            raise SnapshotEntryCorrupt(
                where,
                layer,
                key,
                version,
                "it has no checksum" if checksum is None else "its checksum is not text",
            )
        expected = entry_checksum(
            raw.layer, raw.key, version, raw.body_hash, raw.written_at, raw.data
        )
        if checksum != expected:
            raise SnapshotEntryCorrupt(
                where, layer, key, version, "checksum mismatch: it changed after it was written"
            )
    try:
        data = raw.data.decode("utf-8") if isinstance(raw.data, bytes) else raw.data
        body_hash = raw.body_hash.decode() if isinstance(raw.body_hash, bytes) else raw.body_hash
        written = raw.written_at.decode() if isinstance(raw.written_at, bytes) else raw.written_at
    except UnicodeDecodeError as e:
        raise SnapshotEntryCorrupt(where, layer, key, version, f"it is not UTF-8 text ({e})") from e
    if body_hash is not None and not _HEX64.fullmatch(body_hash):
        raise SnapshotEntryCorrupt(
            where, layer, key, version, f"its body hash {body_hash[:20]!r} is malformed"
        )
    return Hit(where, layer, key, version, data, body_hash, written, checked)


def open_body(hit: Hit, packed: object) -> bytes:
    """The entry's body, inflated and checked against its hash (``packed`` None: missing)."""
    assert hit.body_hash is not None
    if packed is None:
        raise SnapshotEntryCorrupt(*hit.ref, f"body {hit.body_hash[:16]} is missing")
    try:
        return _inflate(packed, hit.body_hash)
    except _BodyDamage as e:
        raise SnapshotEntryCorrupt(*hit.ref, str(e)) from e


def _first_error(e: ValidationError) -> str:
    errors = e.errors()
    first = errors[0] if errors else {"loc": (), "msg": str(e)}
    loc = ".".join(str(x) for x in first["loc"]) or "(root)"
    more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
    return f"{loc}: {first['msg']}{more}"


def decode_hit(cls: type[M], hit: Hit) -> M:
    """The entry's data as ``cls``; data that does not validate is a damaged entry."""
    try:
        return cls.model_validate_json(hit.data)
    except ValidationError as e:
        raise SnapshotEntryCorrupt(
            *hit.ref, f"stored {cls.__name__} does not validate ({_first_error(e)})"
        ) from e


def fetch_from_hit(hit: Hit, body: bytes | None) -> FetchResult:
    result = decode_hit(FetchResult, hit)
    return result if body is None else result.model_copy(update={"body": body})


def check_shape_key(hit: Hit) -> None:
    """A known layer and a key of that layer's shape, or :class:`SnapshotEntryCorrupt`."""
    if hit.layer not in _KEY_PARTS:
        raise SnapshotEntryCorrupt(
            *hit.ref, f"its layer {hit.layer!r} is not one of {list(LAYERS)}"
        )
    try:
        parts = split_key(hit.key)
    except SnapshotCorrupt as e:
        raise SnapshotEntryCorrupt(*hit.ref, f"its key is not a JSON list of strings ({e})") from e
    if len(parts) != _KEY_PARTS[hit.layer]:
        want = _KEY_PARTS[hit.layer]
        raise SnapshotEntryCorrupt(
            *hit.ref, f"its key has {len(parts)} part(s), a {hit.layer} key has {want}"
        )


def check_shape(hit: Hit) -> None:
    """What a replay of the entry would need: a known layer, a key of that layer's shape, data
    that validates as that layer's model. Raises :class:`SnapshotEntryCorrupt`."""
    check_shape_key(hit)
    model = _LAYER_MODELS.get(hit.layer)
    if model is not None:
        decode_hit(model, hit)
        return
    try:
        value = json.loads(hit.data)
    except ValueError as e:
        raise SnapshotEntryCorrupt(*hit.ref, f"its data is not JSON ({e})") from e
    if not isinstance(value, dict):
        raise SnapshotEntryCorrupt(*hit.ref, "its data is not a JSON object")


def audit(
    where: str,
    rows: Iterable[RawEntry],
    body_problems: Mapping[str, str | None],
    *,
    versions: Iterable[int] | None = None,
    problems: Iterable[str] = (),
    damaged: Iterable[DamagedEntry] = (),
) -> VerifyReport:
    """The shared part of ``verify``: check every stored entry and collect all the damage.

    ``rows``: every stored entry (all layers, all versions); ``body_problems``: every stored
    body's hash → what is wrong with it (None: intact); ``versions``: the versions the store
    lists (an entry under another one is a problem); ``problems``: the backend's own findings;
    ``damaged``: entries the backend found damaged before they could become rows.
    """
    known = None if versions is None else set(versions)
    damaged = list(damaged)
    count = len(damaged)
    unchecked: list[EntryRef] = []
    referenced: set[str] = set()
    strays: set[int] = set()
    for raw in rows:
        count += 1
        try:
            hit = open_entry(where, raw)
            check_shape(hit)
            if hit.body_hash is not None:
                referenced.add(hit.body_hash)
                missing = f"body {hit.body_hash[:16]} is missing"
                problem = body_problems.get(hit.body_hash, missing)
                if problem is not None:
                    raise SnapshotEntryCorrupt(*hit.ref, problem)
        except SnapshotEntryCorrupt as e:
            damaged.append(e.entry)
            continue
        if known is not None and hit.version not in known:
            strays.add(hit.version)
        if not hit.checked:
            unchecked.append(EntryRef(layer=hit.layer, key=hit.key, version=hit.version))
    for h, problem in sorted(body_problems.items()):
        if problem is not None and h not in referenced:
            damaged.append(DamagedEntry(layer="body", key=h, version=None, problem=problem))
    found = list(problems)
    if strays:
        found.append(f"entries under version(s) {sorted(strays)}, which the store does not list")
    damaged.sort(key=lambda d: (d.layer, d.key, -1 if d.version is None else d.version))
    unchecked.sort(key=lambda d: (d.layer, d.key, -1 if d.version is None else d.version))
    return VerifyReport(
        bodies=len(body_problems),
        entries=count,
        unchecked=unchecked,
        damaged=damaged,
        problems=found,
    )


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


def _as_hit(layer: str, e: Entry) -> Hit:
    """A view's entry (checked by the backend's ``_view``) as a :class:`Hit`, whose checks
    raise :class:`SnapshotEntryCorrupt` naming it."""
    return Hit("snapshot store", layer, e.key, e.version, e.data, e.body_hash, None, True)


def _parts(hit: Hit) -> list[str]:
    check_shape_key(hit)
    return split_key(hit.key)


def _fetch_entry(e: Entry) -> FetchEntry:
    hit = _as_hit("fetch", e)
    method, url = _parts(hit)
    r = decode_hit(FetchResult, hit)
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
    hit = _as_hit("verdict", e)
    (case_id,) = _parts(hit)
    v = decode_hit(Verdict, hit)
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
    return [r.url for r in decode_hit(SearchRecord, _as_hit("search", e)).results]


def _diff_searches(a: View, b: View) -> list[SearchChange]:
    out: list[SearchChange] = []
    for key in sorted(a.keys() | b.keys()):
        provider, query = _parts(_as_hit("search", a[key] if key in a else b[key]))
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

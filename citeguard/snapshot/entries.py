"""Entries as the backends store them: keys, compressed bodies, checksums, and opening a
stored entry (checked, decoded, or refused as :class:`SnapshotEntryCorrupt`)."""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from datetime import UTC, datetime
from typing import NamedTuple, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ValidationError

from citeguard.errors import SnapshotCorrupt
from citeguard.models import FetchResult, Page, SearchRecord, Verdict
from citeguard.snapshot.records import LAYERS, JudgeRecord, _Model

# HTML and cost record time.
_ZLIB_LEVEL = 6


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

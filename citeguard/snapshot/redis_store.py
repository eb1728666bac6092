"""A snapshot store in Redis, for many agent replicas sharing one cache (extra: ``redis``).

Same semantics as :class:`~citeguard.snapshot.sqlite_store.SQLiteSnapshotStore` (layers, "latest
≤ v" versions, bodies compressed and stored once by sha256). Layout under ``namespace``::

    {ns}:vseq                     INCR counter of versions
    {ns}:versions                 hash  version → {"label", "created_at"}
    {ns}:count:{v}                hash  layer → entries written under v
    {ns}:idx:{layer}              set   digests of the keys of a layer
    {ns}:e:{layer}:{digest}       hash  version → {"k": key, "d": data, "b": body hash, "w": time,
                                              "c": checksum}
    {ns}:body:{sha256}            zlib(body)
    {ns}:bodies                   set   every stored body hash

Writes are one Lua script each (body, entry, index and counter together), so concurrent writers
from any number of processes lose nothing and a reader never sees an entry without its body.
``prune`` is not atomic across keys: run it while no replica writes.

Every entry carries ``"c"``, :func:`~citeguard.snapshot.base.entry_checksum` over its layer (from
the Redis key), key, version (the hash field), body hash, time and data; a read checks it before
using anything of the entry, and that the entry is the one its digest names. An entry written
before checksums has no ``"c"``: it is read as before and ``verify`` lists it as unchecked
(``seal`` gives it one). Any other set of fields, or a field twice, is damage.

The client (``redis.asyncio``) binds to the event loop it first runs on: use a store from one
loop, and ``await store.close()`` there.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from citeguard.errors import PolicyError, SnapshotCorrupt, SnapshotError
from citeguard.models import FetchResult, Page, SearchRecord, Verdict
from citeguard.snapshot.base import (
    LAYERS,
    UNCHECKED,
    DamagedEntry,
    Entry,
    Hit,
    JudgeRecord,
    Layer,
    RawEntry,
    SnapshotDamaged,
    SnapshotEntryCorrupt,
    SnapshotStore,
    VerifyReport,
    VersionInfo,
    View,
    audit,
    body_digest,
    body_problem,
    compress_body,
    decode_hit,
    entry_checksum,
    entry_key,
    fetch_from_hit,
    open_body,
    open_entry,
    snapshot_url_key,
    utcnow,
    version_record,
)

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

# Bodies bigger than this are inflated and hashed in a worker thread instead of on the loop.
_INLINE_BODY_LIMIT = 256 * 1024

# KEYS: vseq, versions. ARGV: version record JSON. Atomic INCR + HSET.
_BEGIN = """
local v = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[2], v, ARGV[1])
return v
"""

# The newest version, creating version 1 when there is none (first write to an empty store).
_ENSURE = """
local ks = redis.call('HKEYS', KEYS[2])
if #ks == 0 then
  local v = redis.call('INCR', KEYS[1])
  redis.call('HSET', KEYS[2], v, ARGV[1])
  return v
end
local m = 0
for _, k in ipairs(ks) do
  local n = tonumber(k)
  if n > m then m = n end
end
return m
"""

# KEYS: entry, idx, count(v), body, bodies, versions.
# ARGV: version, envelope, digest, layer, body hash ('' = none), packed body ('' = already there).
_PUT = """
if redis.call('HEXISTS', KEYS[6], ARGV[1]) == 0 then
  return redis.error_reply('CITEGUARD_NO_VERSION')
end
if ARGV[5] ~= '' then
  if ARGV[6] ~= '' then
    redis.call('SET', KEYS[4], ARGV[6], 'NX')
  elseif redis.call('EXISTS', KEYS[4]) == 0 then
    return redis.error_reply('CITEGUARD_NEED_BODY')
  end
  redis.call('SADD', KEYS[5], ARGV[5])
end
local new = redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
if new == 1 then redis.call('HINCRBY', KEYS[3], ARGV[4], 1) end
return new
"""


# KEYS: entry. ARGV: version, old envelope, new envelope. Replace only what was checked.
_SEAL = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  return 1
end
return 0
"""

_FIELDS = frozenset({"k", "d", "b", "w", "c"})
_LEGACY_FIELDS = frozenset({"k", "d", "b", "w"})  # written before checksums


class _Malformed(Exception):
    """An envelope that is not what a writer writes (turned into a SnapshotEntryCorrupt)."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Malformed("entry has a field twice")
    return out


def _envelope(blob: object) -> dict[str, Any]:
    """A stored entry's JSON envelope, strictly: exactly the fields a writer writes, each once.
    Raises _Malformed saying what is wrong."""
    if not isinstance(blob, bytes | str):
        raise _Malformed("entry is not text")
    try:
        env = json.loads(blob, object_pairs_hook=_unique)
    except ValueError as e:
        raise _Malformed(f"entry is not valid JSON ({e})") from e
    if not isinstance(env, dict):
        raise _Malformed("entry is not a JSON object")
    if env.keys() != _FIELDS and env.keys() != _LEGACY_FIELDS:
        raise _Malformed(f"entry has the fields {sorted(env)}, not {sorted(_FIELDS)}")
    return env


def _raw(layer: str, version: int, env: dict[str, Any]) -> RawEntry:
    return RawEntry(layer, env["k"], version, env["d"], env["b"], env["w"], env.get("c", UNCHECKED))


def _recover_key(blob: object, digest: str) -> str | None:
    """The key an unreadable envelope was written for, when its ``"k"`` field survived intact
    (the key's digest proves it), to name the entry in a report."""
    if not isinstance(blob, bytes):
        return None
    text = blob.decode("utf-8", "replace")
    start = text.find('"k": ')
    if start < 0:
        return None
    try:
        key, _ = json.JSONDecoder().raw_decode(text, start + 5)
    except ValueError:
        return None
    return key if isinstance(key, str) and _digest(key) == digest else None


def _member(raw: bytes) -> str:
    """A set member or hash field as text; damaged bytes stay visible (and match nothing)."""
    return raw.decode("utf-8", "backslashreplace")


def _glob(text: str) -> str:
    """``text`` with Redis glob characters escaped (for SCAN MATCH)."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def _digest(key: str) -> str:
    """The digest naming an entry's Redis hash: sha256 of its key, 40 hex digits."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def _redact(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid redis url>"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


class RedisSnapshotStore(SnapshotStore):
    """A snapshot store in Redis (``pip install 'citeguard-agent[redis]'``)."""

    def __init__(
        self,
        url: str = DEFAULT_REDIS_URL,
        *,
        namespace: str = "citeguard",
        version: int | None = None,
        socket_timeout: float = 10.0,
        max_connections: int = 32,
    ) -> None:
        if not namespace or any(c in namespace for c in " \n\r\t"):
            raise PolicyError(f"invalid redis namespace {namespace!r}")
        self.url = _redact(url)
        self.namespace = namespace
        if max_connections < 1:
            raise PolicyError("max_connections must be at least 1")
        # A bounded pool that makes callers wait for a free connection: hundreds of concurrent
        # fetches must queue, not open hundreds of sockets (or fail with "too many connections").
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=socket_timeout,
            decode_responses=False,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_timeout,
        )
        self._redis: Any = aioredis.Redis.from_pool(pool)  # the client owns (and closes) it
        self._begin = self._redis.register_script(_BEGIN)
        self._ensure = self._redis.register_script(_ENSURE)
        self._put_script = self._redis.register_script(_PUT)
        self._seal_script = self._redis.register_script(_SEAL)
        self._requested_version = version
        self._active: int | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"RedisSnapshotStore({self.url!r}, namespace={self.namespace!r})"

    # ---------------------------------------------------------------- plumbing

    def _k(self, *parts: str) -> str:
        return ":".join((self.namespace, *parts))

    @property
    def _where(self) -> str:
        return f"snapshot store {self.url} namespace {self.namespace!r}"

    def _entry(self, layer: Layer, key: str) -> tuple[str, str]:
        digest = _digest(key)
        return self._k("e", layer, digest), digest

    def _open(
        self, layer: str, digest: str, version: int, blob: object, key: str | None = None
    ) -> Hit:
        """Check one stored envelope (``key``: the key it must hold, else the one its digest
        names) and its checksum; a damaged one raises :class:`SnapshotEntryCorrupt`."""
        return open_entry(self._where, self._unwrap(layer, digest, version, blob, key))

    def _unwrap(
        self, layer: str, digest: str, version: int, blob: object, key: str | None = None
    ) -> RawEntry:
        """One stored envelope as a row: well-formed, holding ``key`` (or the key its digest
        names). Its checksum is not checked yet."""
        name = key if key is not None else f"#{digest}"
        try:
            env = _envelope(blob)
        except _Malformed as e:
            if key is None:
                name = _recover_key(blob, digest) or name
            raise SnapshotEntryCorrupt(self._where, layer, name, version, str(e)) from e
        held = env["k"]
        if key is not None and held != key:
            problem = f"it holds the entry of another key, {str(held)[:200]!r}"
            raise SnapshotEntryCorrupt(self._where, layer, key, version, problem)
        if key is None and not (isinstance(held, str) and _digest(held) == digest):
            problem = f"it holds key {str(held)[:200]!r}, which is not the key of its digest"
            raise SnapshotEntryCorrupt(self._where, layer, name, version, problem)
        return _raw(layer, version, env)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        if self._closed:
            raise SnapshotError(f"snapshot store {self.url} is closed")
        try:
            yield
        except (redis_errors.ConnectionError, redis_errors.TimeoutError) as e:
            raise SnapshotError(f"cannot reach the snapshot store at {self.url}: {e}") from e
        except redis_errors.ResponseError as e:
            if "CITEGUARD_NO_VERSION" in str(e):
                raise SnapshotError(
                    f"snapshot store {self.url}: version {self._active} no longer exists"
                ) from e
            if "WRONGTYPE" in str(e):
                raise SnapshotCorrupt(
                    f"snapshot store {self.url} namespace {self.namespace!r} holds keys of the "
                    f"wrong type ({e}); another application may share it"
                ) from e
            raise SnapshotError(f"snapshot store {self.url}: {e}") from e
        except redis_errors.RedisError as e:
            raise SnapshotError(f"snapshot store {self.url}: {e}") from e

    async def _versions_raw(self) -> dict[int, dict[str, Any]]:
        raw = await self._redis.hgetall(self._k("versions"))
        out: dict[int, dict[str, Any]] = {}
        for k, v in raw.items():
            try:
                out[int(k)] = json.loads(v)
            except ValueError as e:
                raise SnapshotCorrupt(f"snapshot store {self.url}: bad version record {k!r}") from e
        return out

    async def _read_version(self) -> int | None:
        if self._active is None:
            if self._requested_version is not None:
                await self._require_version(self._requested_version)
                self._active = self._requested_version
            else:
                self._active = max(await self._versions_raw(), default=None)
        return self._active

    async def _write_version(self) -> int:
        if await self._read_version() is None:
            self._active = int(
                await self._ensure(
                    keys=[self._k("vseq"), self._k("versions")],
                    args=[json.dumps(version_record(None))],
                )
            )
        assert self._active is not None
        return self._active

    async def _require_version(self, version: int) -> None:
        if not await self._redis.hexists(self._k("versions"), str(version)):
            raise SnapshotError(f"no snapshot version {version} (see: citeguard snapshot list)")

    def _versions_of(self, raw: dict[bytes, bytes], layer: str, name: str) -> dict[int, bytes]:
        """An entry hash's fields by version; a field that is not a version is damage."""
        out: dict[int, bytes] = {}
        for field, blob in raw.items():
            try:
                out[int(field)] = blob
            except ValueError as e:
                problem = f"it has a bad version field {field!r}"
                raise SnapshotEntryCorrupt(self._where, layer, name, None, problem) from e
        return out

    async def _get(self, layer: Layer, key: str) -> tuple[Hit, bytes | None] | None:
        """The entry of ``key`` visible at the active version, checked (checksum first), with
        its body; a damaged one raises :class:`SnapshotEntryCorrupt`."""
        with self._errors():
            v = await self._read_version()
            if v is None:
                return None
            name, digest = self._entry(layer, key)
            fields = self._versions_of(await self._redis.hgetall(name), layer, key)
            best = max((f for f in fields if f <= v), default=None)
            if best is None:
                return None
            hit = self._open(layer, digest, best, fields[best], key)
            if hit.body_hash is None:
                return hit, None
            packed = await self._redis.get(self._k("body", hit.body_hash))
        if packed is not None and len(packed) > _INLINE_BODY_LIMIT:
            return hit, await asyncio.to_thread(open_body, hit, packed)
        return hit, open_body(hit, packed)

    async def _put(self, layer: Layer, key: str, data: str, body: bytes | None = None) -> None:
        body_hash = ""
        if body is not None:
            body_hash = (
                await asyncio.to_thread(body_digest, body)
                if len(body) > _INLINE_BODY_LIMIT
                else body_digest(body)
            )
        with self._errors():
            v = await self._write_version()
            name, digest = self._entry(layer, key)
            written = utcnow().isoformat()
            checksum = entry_checksum(layer, key, v, body_hash or None, written, data)
            env = json.dumps(
                {"k": key, "d": data, "b": body_hash or None, "w": written, "c": checksum},
                ensure_ascii=False,
            )
            body_key = self._k("body", body_hash or "none")
            packed = b""
            if body is not None and not await self._redis.exists(body_key):
                packed = await asyncio.to_thread(compress_body, body)
            keys = [
                name,
                self._k("idx", layer),
                self._k("count", str(v)),
                body_key,
                self._k("bodies"),
                self._k("versions"),
            ]
            try:
                await self._put_script(keys=keys, args=[v, env, digest, layer, body_hash, packed])
            except redis_errors.ResponseError as e:
                if "CITEGUARD_NEED_BODY" not in str(e) or body is None:
                    raise
                # A prune removed the body between our EXISTS and the script: send it.
                packed = await asyncio.to_thread(compress_body, body)
                await self._put_script(keys=keys, args=[v, env, digest, layer, body_hash, packed])

    # ---------------------------------------------------------------- layers

    async def get_search(self, provider: str, query: str) -> SearchRecord | None:
        key = entry_key(provider, query)
        hit = await self._get("search", key)
        return None if hit is None else decode_hit(SearchRecord, hit[0])

    async def put_search(self, record: SearchRecord) -> None:
        await self._put(
            "search", entry_key(record.provider, record.query), record.model_dump_json()
        )

    async def get_fetch(self, method: str, url: str) -> FetchResult | None:
        key = entry_key(method.upper(), snapshot_url_key(url))
        hit = await self._get("fetch", key)
        return None if hit is None else fetch_from_hit(*hit)

    async def put_fetch(self, result: FetchResult, *, method: str, url: str | None = None) -> None:
        key = entry_key(method.upper(), snapshot_url_key(url if url is not None else result.url))
        await self._put("fetch", key, result.model_dump_json(), result.body)

    async def get_page(self, url: str, extractor_version: str) -> Page | None:
        key = entry_key(url, extractor_version)
        hit = await self._get("page", key)
        return None if hit is None else decode_hit(Page, hit[0])

    async def put_page(self, url: str, extractor_version: str, page: Page) -> None:
        await self._put("page", entry_key(url, extractor_version), page.model_dump_json())

    async def get_judge(self, key: str) -> JudgeRecord | None:
        hit = await self._get("judge", entry_key(key))
        return None if hit is None else decode_hit(JudgeRecord, hit[0])

    async def put_judge(self, key: str, record: JudgeRecord) -> None:
        await self._put("judge", entry_key(key), record.model_dump_json())

    # ---------------------------------------------------------------- versions and baselines

    async def begin_version(self, label: str | None = None) -> int:
        with self._errors():
            self._active = int(
                await self._begin(
                    keys=[self._k("vseq"), self._k("versions")],
                    args=[json.dumps(version_record(label))],
                )
            )
        return self._active

    async def current_version(self) -> int | None:
        with self._errors():
            return await self._read_version()

    async def use_version(self, version: int) -> None:
        with self._errors():
            await self._require_version(version)
        self._active = version

    async def record_verdict(self, case_id: str, verdict: Verdict) -> None:
        await self._put("verdict", entry_key(case_id), verdict.model_dump_json())

    async def get_verdict(self, case_id: str) -> Verdict | None:
        hit = await self._get("verdict", entry_key(case_id))
        return None if hit is None else decode_hit(Verdict, hit[0])

    async def mark_case(self, case_id: str) -> None:
        await self._put("case", entry_key(case_id), "{}")

    async def has_case(self, case_id: str) -> bool:
        return await self._get("case", entry_key(case_id)) is not None

    async def list_versions(self) -> list[VersionInfo]:
        with self._errors():
            versions = await self._versions_raw()
            pipe = self._redis.pipeline(transaction=False)
            order = sorted(versions)
            for v in order:
                pipe.hgetall(self._k("count", str(v)))
            counts = await pipe.execute()
        out = []
        for v, raw in zip(order, counts, strict=True):
            rec = versions[v]
            try:
                c = {_member(k): int(n) for k, n in raw.items()}
                info = VersionInfo(
                    version=v,
                    label=rec.get("label"),
                    created_at=datetime.fromisoformat(rec["created_at"]),
                    searches=c.get("search", 0),
                    fetches=c.get("fetch", 0),
                    pages=c.get("page", 0),
                    verdicts=c.get("verdict", 0),
                    cases=c.get("case", 0),
                    judges=c.get("judge", 0),
                )
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                # pydantic's ValidationError is a ValueError
                raise SnapshotCorrupt(
                    f"snapshot store {self.url}: the record of version {v} does not read "
                    f"({e.__class__.__name__}: {str(e)[:120]})"
                ) from e
            out.append(info)
        return out

    async def _entries(self, layer: Layer) -> list[tuple[str, dict[bytes, bytes]]]:
        digests = sorted(_member(d) for d in await self._redis.smembers(self._k("idx", layer)))
        pipe = self._redis.pipeline(transaction=False)
        for d in digests:
            pipe.hgetall(self._k("e", layer, d))
        raws = await pipe.execute()
        return list(zip(digests, raws, strict=True))

    async def _view(self, layer: Layer, version: int) -> View:
        with self._errors():
            entries = await self._entries(layer)
        out: View = {}
        for digest, raw in entries:
            fields = self._versions_of(raw, layer, f"#{digest}")
            best = max((f for f in fields if f <= version), default=None)
            if best is None:
                continue
            hit = self._open(layer, digest, best, fields[best])
            out[hit.key] = Entry(hit.key, hit.version, hit.data, hit.body_hash)
        return out

    def _restamp(self, layer: str, digest: str, version: int, blob: bytes, to: int) -> str:
        """The envelope of an entry moved from ``version`` to ``to`` (prune), checked first and
        re-sealed (an unchecked one stays unchecked)."""
        hit = self._open(layer, digest, version, blob)
        env = _envelope(blob)
        if hit.checked:
            env["c"] = hit.checksum_at(to)
        return json.dumps(env, ensure_ascii=False)

    async def prune(self, keep: int) -> int:
        if keep < 1:
            raise PolicyError("prune(keep=...) must keep at least one version")
        with self._errors():
            ids = sorted(await self._versions_raw(), reverse=True)
            if len(ids) <= keep:
                return 0
            cut = ids[keep - 1]
            dropped = [v for v in ids if v < cut]
            referenced: set[str] = set()
            unsure = False  # a kept entry could not be read: keep every body
            cut_counts: dict[str, int] = {}
            # plan everything first: a damaged entry to move stops the prune before any write
            pipes = []
            for layer in LAYERS:
                pipe = self._redis.pipeline(transaction=True)
                for digest, raw in await self._entries(layer):
                    name = self._k("e", layer, digest)
                    fields = self._versions_of(raw, layer, f"#{digest}")
                    older = [f for f in fields if f < cut]
                    kept = {f: val for f, val in fields.items() if f >= cut}
                    if older and cut not in fields:
                        # the oldest kept version sees the newest older entry: move it up
                        top = max(older)
                        moved = self._restamp(layer, digest, top, fields[top], cut)
                        kept[cut] = moved.encode()
                        pipe.hset(name, str(cut), moved)
                    if older:
                        pipe.hdel(name, *(str(f) for f in older))
                    if not kept:
                        pipe.srem(self._k("idx", layer), digest)
                    if cut in kept:
                        cut_counts[layer] = cut_counts.get(layer, 0) + 1
                    for val in kept.values():
                        try:
                            body = _envelope(val)["b"]
                        except _Malformed:
                            unsure = True
                            continue
                        if isinstance(body, str) and body:
                            referenced.add(body)
                pipes.append(pipe)
            for pipe in pipes:
                await pipe.execute()
            pipe = self._redis.pipeline(transaction=True)
            pipe.hdel(self._k("versions"), *(str(v) for v in dropped))
            pipe.delete(*(self._k("count", str(v)) for v in dropped))
            pipe.delete(self._k("count", str(cut)))
            if cut_counts:
                pipe.hset(self._k("count", str(cut)), mapping=cut_counts)
            await pipe.execute()
            stored = {_member(h) for h in await self._redis.smembers(self._k("bodies"))}
            orphans = [] if unsure else sorted(stored - referenced)
            if orphans:
                pipe = self._redis.pipeline(transaction=True)
                pipe.delete(*(self._k("body", h) for h in orphans))
                pipe.srem(self._k("bodies"), *orphans)
                await pipe.execute()
        if self._active is not None and self._active < cut:
            self._active = None
        return len(dropped)

    async def _scan(self, *parts: str) -> set[str]:
        """The suffixes of every key named ``{ns}:{parts...}:*`` (SCAN, not the indexes)."""
        prefix = self._k(*parts) + ":"
        found: set[str] = set()
        async for name in self._redis.scan_iter(match=_glob(prefix) + "*", count=1000):
            found.add(name.decode("utf-8", "backslashreplace")[len(prefix) :])
        return found

    async def _stored_entries(
        self, layers: tuple[str, ...] = LAYERS
    ) -> tuple[list[tuple[str, str, int, bytes]], list[DamagedEntry], list[str]]:
        """Every stored envelope as (layer, digest, version, blob), found by SCAN; entries whose
        fields are not versions; index gaps."""
        envelopes: list[tuple[str, str, int, bytes]] = []
        damaged: list[DamagedEntry] = []
        problems: list[str] = []
        for layer in layers:
            stored = sorted(await self._scan("e", layer))
            indexed = {_member(d) for d in await self._redis.smembers(self._k("idx", layer))}
            for d in sorted(indexed - set(stored)):
                problems.append(f"the {layer} index lists {d}, which has no entry")
            for d in sorted(set(stored) - indexed):
                problems.append(f"{layer} entry #{d} is missing from the {layer} index")
            pipe = self._redis.pipeline(transaction=False)
            for d in stored:
                pipe.hgetall(self._k("e", layer, d))
            for d, raw in zip(stored, await pipe.execute(), strict=True):
                try:
                    fields = self._versions_of(raw, layer, f"#{d}")
                except SnapshotEntryCorrupt as e:
                    damaged.append(e.entry)
                    continue
                envelopes += [(layer, d, v, blob) for v, blob in sorted(fields.items())]
        return envelopes, damaged, problems

    def _rows(
        self, envelopes: list[tuple[str, str, int, bytes]], damaged: list[DamagedEntry]
    ) -> list[RawEntry]:
        """The envelopes as rows for :func:`audit`; the unreadable ones go to ``damaged``."""
        rows: list[RawEntry] = []
        for layer, digest, version, blob in envelopes:
            try:
                rows.append(self._unwrap(layer, digest, version, blob))
            except SnapshotEntryCorrupt as e:
                damaged.append(e.entry)
        return rows

    async def _body_problems(self, hashes: Iterable[str]) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        todo = sorted(hashes)
        for i in range(0, len(todo), 64):
            batch = todo[i : i + 64]
            pipe = self._redis.pipeline(transaction=False)
            for h in batch:
                pipe.get(self._k("body", h))
            blobs = await pipe.execute()

            def check(batch: list[str] = batch, blobs: list[Any] = blobs) -> list[str | None]:
                return [
                    f"body {h[:16]} is missing" if b is None else body_problem(b, h)
                    for h, b in zip(batch, blobs, strict=True)
                ]

            out.update(zip(batch, await asyncio.to_thread(check), strict=True))
        return out

    async def _audit(self) -> tuple[VerifyReport, list[tuple[str, str, int, bytes]]]:
        """Everything ``verify`` checks, and the envelopes it read."""
        with self._errors():
            problems: list[str] = []
            try:
                versions: list[int] | None = list(await self._versions_raw())
            except SnapshotCorrupt as e:
                problems.append(str(e))
                versions = None
            envelopes, damaged, gaps = await self._stored_entries()
            problems += gaps
            stored = await self._scan("body")
            listed = {_member(h) for h in await self._redis.smembers(self._k("bodies"))}
            for h in sorted(listed - stored):
                problems.append(f"the body set lists {h[:16]}, which is not stored")
            for h in sorted(stored - listed):
                problems.append(f"body {h[:16]} is stored but missing from the body set")
            bodies = await self._body_problems(stored)

        def run() -> VerifyReport:
            rows = self._rows(envelopes, damaged)
            return audit(
                self._where,
                rows,
                bodies,
                versions=versions,
                problems=problems,
                damaged=damaged,
            )

        return await asyncio.to_thread(run), envelopes

    async def verify(self, *, raise_on_damage: bool = True) -> VerifyReport:
        report, _ = await self._audit()
        if raise_on_damage and not report.ok:
            raise SnapshotDamaged(self._where, report)
        return report

    async def seal(self) -> int:
        report, envelopes = await self._audit()
        if not report.ok:
            raise SnapshotDamaged(self._where, report)
        sealed = 0
        with self._errors():
            for layer, digest, version, blob in envelopes:
                env = _envelope(blob)  # readable: the audit found nothing damaged
                if "c" in env:
                    continue
                env["c"] = self._open(layer, digest, version, blob).checksum_at(version)
                # only if it is still exactly what was checked (a writer may have replaced it)
                sealed += int(
                    await self._seal_script(
                        keys=[self._k("e", layer, digest)],
                        args=[version, blob, json.dumps(env, ensure_ascii=False)],
                    )
                )
        return sealed

    async def count_bodies(self) -> int:
        with self._errors():
            return int(await self._redis.scard(self._k("bodies")))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # closing a half-dead connection must not fail the caller
        with suppress(Exception):
            await self._redis.aclose()

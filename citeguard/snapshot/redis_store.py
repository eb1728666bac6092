"""A snapshot store in Redis, for many agent replicas sharing one cache (extra: ``redis``).

Same semantics as :class:`~citeguard.snapshot.sqlite_store.SQLiteSnapshotStore` (layers, "latest
≤ v" versions, bodies compressed and stored once by sha256). Layout under ``namespace``::

    {ns}:vseq                     INCR counter of versions
    {ns}:versions                 hash  version → {"label", "created_at"}
    {ns}:count:{v}                hash  layer → entries written under v
    {ns}:idx:{layer}              set   digests of the keys of a layer
    {ns}:e:{layer}:{digest}       hash  version → {"k": key, "d": data, "b": body hash, "w": time}
    {ns}:body:{sha256}            zlib(body)
    {ns}:bodies                   set   every stored body hash

Writes are one Lua script each (body, entry, index and counter together), so concurrent writers
from any number of processes lose nothing and a reader never sees an entry without its body.
``prune`` is not atomic across keys: run it while no replica writes.

The client (``redis.asyncio``) binds to the event loop it first runs on: use a store from one
loop, and ``await store.close()`` there.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
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
    Entry,
    Layer,
    SnapshotStore,
    VersionInfo,
    View,
    body_digest,
    compress_body,
    decode_model,
    decompress_body,
    entry_key,
    fetch_from_entry,
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
        self._requested_version = version
        self._active: int | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"RedisSnapshotStore({self.url!r}, namespace={self.namespace!r})"

    # ---------------------------------------------------------------- plumbing

    def _k(self, *parts: str) -> str:
        return ":".join((self.namespace, *parts))

    def _entry(self, layer: Layer, key: str) -> tuple[str, str]:
        digest = hashlib.sha256(key.encode()).hexdigest()[:40]
        return self._k("e", layer, digest), digest

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
                versions = await self._redis.hkeys(self._k("versions"))
                self._active = max((int(v) for v in versions), default=None)
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

    def _pick(
        self, raw: dict[bytes, bytes], version: int, where: str
    ) -> tuple[int, dict[str, Any]] | None:
        best: int | None = None
        for field in raw:
            try:
                v = int(field)
            except ValueError as e:
                raise SnapshotCorrupt(f"{where}: bad version field {field!r}") from e
            if v <= version and (best is None or v > best):
                best = v
        if best is None:
            return None
        try:
            env = json.loads(raw[str(best).encode()])
        except ValueError as e:
            raise SnapshotCorrupt(f"{where}: entry is not valid JSON") from e
        if not isinstance(env, dict) or not isinstance(env.get("d"), str):
            raise SnapshotCorrupt(f"{where}: entry has no data")
        return best, env

    async def _get(self, layer: Layer, key: str) -> tuple[str, bytes | None] | None:
        with self._errors():
            v = await self._read_version()
            if v is None:
                return None
            name, _ = self._entry(layer, key)
            where = f"snapshot store {self.url}, {layer} {key}"
            picked = self._pick(await self._redis.hgetall(name), v, where)
            if picked is None:
                return None
            env = picked[1]
            if env.get("k") != key:
                raise SnapshotCorrupt(f"{where}: entry holds key {env.get('k')!r}")
            body_hash = env.get("b")
            if body_hash is None:
                return env["d"], None
            packed = await self._redis.get(self._k("body", body_hash))
            if packed is None:
                raise SnapshotCorrupt(f"{where}: body {body_hash[:16]} is missing")
        if len(packed) > _INLINE_BODY_LIMIT:
            body = await asyncio.to_thread(decompress_body, packed, body_hash, where)
        else:
            body = decompress_body(packed, body_hash, where)
        return env["d"], body

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
            env = json.dumps(
                {"k": key, "d": data, "b": body_hash or None, "w": utcnow().isoformat()},
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
        return None if hit is None else decode_model(SearchRecord, hit[0], f"search {key}")

    async def put_search(self, record: SearchRecord) -> None:
        await self._put(
            "search", entry_key(record.provider, record.query), record.model_dump_json()
        )

    async def get_fetch(self, method: str, url: str) -> FetchResult | None:
        key = entry_key(method.upper(), snapshot_url_key(url))
        hit = await self._get("fetch", key)
        return None if hit is None else fetch_from_entry(hit[0], hit[1], f"fetch {key}")

    async def put_fetch(self, result: FetchResult, *, method: str, url: str | None = None) -> None:
        key = entry_key(method.upper(), snapshot_url_key(url if url is not None else result.url))
        await self._put("fetch", key, result.model_dump_json(), result.body)

    async def get_page(self, url: str, extractor_version: str) -> Page | None:
        key = entry_key(url, extractor_version)
        hit = await self._get("page", key)
        return None if hit is None else decode_model(Page, hit[0], f"page {key}")

    async def put_page(self, url: str, extractor_version: str, page: Page) -> None:
        await self._put("page", entry_key(url, extractor_version), page.model_dump_json())

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
        return None if hit is None else decode_model(Verdict, hit[0], f"verdict {case_id}")

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
            c = {k.decode(): int(n) for k, n in raw.items()}
            rec = versions[v]
            out.append(
                VersionInfo(
                    version=v,
                    label=rec.get("label"),
                    created_at=datetime.fromisoformat(rec["created_at"]),
                    searches=c.get("search", 0),
                    fetches=c.get("fetch", 0),
                    pages=c.get("page", 0),
                    verdicts=c.get("verdict", 0),
                    cases=c.get("case", 0),
                )
            )
        return out

    async def _entries(self, layer: Layer) -> list[tuple[str, dict[bytes, bytes]]]:
        digests = sorted(d.decode() for d in await self._redis.smembers(self._k("idx", layer)))
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
            picked = self._pick(raw, version, f"snapshot store {self.url}, {layer} {digest}")
            if picked is None:
                continue
            v, env = picked
            key = env.get("k")
            if not isinstance(key, str):
                raise SnapshotCorrupt(f"snapshot store {self.url}: {layer} {digest} has no key")
            out[key] = Entry(key, v, env["d"], env.get("b"))
        return out

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
            cut_counts: dict[str, int] = {}
            for layer in LAYERS:
                pipe = self._redis.pipeline(transaction=True)
                for digest, raw in await self._entries(layer):
                    name = self._k("e", layer, digest)
                    fields = {int(f): val for f, val in raw.items()}
                    older = [f for f in fields if f < cut]
                    kept = {f: val for f, val in fields.items() if f >= cut}
                    if older and cut not in fields:
                        # the oldest kept version sees the newest older entry: move it up
                        kept[cut] = fields[max(older)]
                        pipe.hset(name, str(cut), fields[max(older)])
                    if older:
                        pipe.hdel(name, *(str(f) for f in older))
                    if not kept:
                        pipe.srem(self._k("idx", layer), digest)
                    if cut in kept:
                        cut_counts[layer] = cut_counts.get(layer, 0) + 1
                    for val in kept.values():
                        body = json.loads(val).get("b")
                        if body:
                            referenced.add(body)
                await pipe.execute()
            pipe = self._redis.pipeline(transaction=True)
            pipe.hdel(self._k("versions"), *(str(v) for v in dropped))
            pipe.delete(*(self._k("count", str(v)) for v in dropped))
            pipe.delete(self._k("count", str(cut)))
            if cut_counts:
                pipe.hset(self._k("count", str(cut)), mapping=cut_counts)
            await pipe.execute()
            stored = {h.decode() for h in await self._redis.smembers(self._k("bodies"))}
            orphans = sorted(stored - referenced)
            if orphans:
                pipe = self._redis.pipeline(transaction=True)
                pipe.delete(*(self._k("body", h) for h in orphans))
                pipe.srem(self._k("bodies"), *orphans)
                await pipe.execute()
        if self._active is not None and self._active < cut:
            self._active = None
        return len(dropped)

    async def verify(self) -> int:
        with self._errors():
            view_hashes: set[str] = set()
            for _, raw in await self._entries("fetch"):
                for val in raw.values():
                    try:
                        h = json.loads(val).get("b")
                    except ValueError as e:
                        raise SnapshotCorrupt(f"snapshot store {self.url}: bad fetch entry") from e
                    if h:
                        view_hashes.add(h)
            stored = sorted(h.decode() for h in await self._redis.smembers(self._k("bodies")))
            missing = sorted(view_hashes - set(stored))
            if missing:
                raise SnapshotCorrupt(
                    f"snapshot store {self.url}: bodies missing: {[m[:16] for m in missing[:5]]}"
                )
            for h in stored:
                packed = await self._redis.get(self._k("body", h))
                if packed is None:
                    raise SnapshotCorrupt(f"snapshot store {self.url}: body {h[:16]} is missing")
                await asyncio.to_thread(decompress_body, packed, h, f"snapshot store {self.url}")
        return len(stored)

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

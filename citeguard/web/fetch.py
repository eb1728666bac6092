"""The fetcher: every cited URL of an answer, concurrently, safely, with one outcome each.

One :class:`Fetcher` owns one aiohttp ``ClientSession`` (created lazily inside the running loop)
and answers :meth:`Fetcher.fetch` / :meth:`Fetcher.fetch_all` with :class:`FetchResult` values.
Web outcomes are never raised: a 404, a timeout or a blocked address is a ``CitationStatus``.

How one URL is fetched:

1. The URL is normalised (:func:`citeguard.web.urls.normalize_url`); a malformed URL or a blocked
   scheme ends here.
2. A per-Fetcher TTL cache and in-flight de-duplication answer repeats (the same URL cited twice is
   fetched once).
3. At every hop the fetcher resolves the host itself through its :class:`Resolver`, refuses
   loopback/private/link-local/metadata addresses (unless the policy allows them), and hands the
   checked addresses to aiohttp through a pinned connector resolver, so the connection goes to the
   address that was checked (no DNS-rebinding gap). Host header and SNI keep the original name.
4. ``want_body=False`` sends HEAD first and falls back to GET when HEAD is refused;
   ``want_body=True`` sends one GET whose body serves every later check.
5. Redirects are followed by hand: ``Location`` is resolved as a browser resolves it (WHATWG,
   :func:`citeguard.web.urls.join_url`); a hop to another registrable domain fails without being
   fetched, as do loops, too many hops, malformed targets and hops to blocked schemes or addresses.
6. Transient failures (reset, 429, 502, 503, 504) are retried by tenacity with exponential backoff,
   honouring ``Retry-After`` up to ``policy.retry_after_cap`` and never past the deadline.
   Every request first takes a lease from the per-host limiter (:mod:`citeguard.web.limits`:
   concurrency, rate, pauses; shared across replicas with ``limits_redis``), and a 429 or a
   ``Retry-After`` pauses the host for every other request to it.
   Requests then start at most a few per turn of the event loop once many are waiting
   (:class:`_StartPacer`), so the loop keeps serving the ones already under way.
7. Bodies are streamed under a raw-size cap and a decompressed-size cap (decompression is done here,
   incrementally, so a gzip bomb never grows memory past the cap).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import ipaddress
import math
import socket
import ssl
import time
import zlib
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from http.cookies import SimpleCookie
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from tenacity import AsyncRetrying, RetryCallState, retry_if_result
from yarl import URL

from citeguard.closing import AsyncClosing
from citeguard.errors import PolicyError
from citeguard.models import CitationStatus, FetchResult, Outcome
from citeguard.policy import FetchPolicy
from citeguard.web.botwall import bot_wall_response
from citeguard.web.limits import HostLimiter, make_limiter
from citeguard.web.urls import (
    UrlProblem,
    blocked_address_reason,
    host_of,
    join_url,
    normalize_url,
    parse_ip_literal,
    registrable_domain,
    same_site,
)

__all__ = ["Fetcher", "Resolver", "StaticResolver", "SystemResolver", "parse_retry_after"]

_REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
_TRANSIENT_CODES = frozenset({429, 502, 503, 504})
# A refused HEAD is retried as GET only for these errors; a timeout or TLS failure would repeat.
_HEAD_FALLBACK_ERRORS = frozenset({CitationStatus.CONNECTION_ERROR})
# Bodies of non-2xx / redirect responses are drained (so the connection can be reused) only when
# they are this small; bigger ones are dropped with their connection.
_DRAIN_LIMIT = 64 * 1024
_CHUNK = 64 * 1024
_SMALL_BODY = 256 * 1024  # announced bodies up to this size are read in one call
_DECODE_STEP = 1024 * 1024  # the most one brotli call may inflate (memory per step)
_DNS_CACHE_SIZE = 4096
_GRACE = 0.05  # seconds a waiter gives a fetch to report its own timeout
# _StartPacer: requests that may start in one turn of the event loop when none is waiting, and
# then per turn while some wait. Paired runs, same URLs: 200 URLs 9.5% faster than unpaced,
# 2,000 URLs 1.1%; 50-citation guard checks unchanged (+0.8 ms median over 16 answers). 4 or
# 16 a turn, or a burst of 16 or 64, were no better at both sizes (benchmarks/README.md).
_STARTS_IN_BURST = 32
_STARTS_PER_TURN = 8
# fetch_all starts this many URLs, and _collect reads as many results, between two turns of the
# loop (each start ~10-30 µs, counting the task's first step)
_STARTS_PER_CALL = 64
_COLLECTED_PER_CALL = 256
# look-ups SystemResolver hands to the resolver in one turn, after a first burst (each c-ares
# call ~0.1 ms on the loop thread: 2,000 unknown hosts asked in one turn held it 20-180 ms)
_LOOKUPS_IN_BURST = 8
_LOOKUPS_PER_TURN = 4
_TICK = 0.005  # per-URL deadlines falling in one such slice share one loop timer (seconds)
# Response headers that are not worth keeping in a result (privacy, size).
_DROP_HEADERS = frozenset({"set-cookie"})
try:  # brotli is optional; without it we do not advertise "br" at all
    import brotli as _brotli  # type: ignore[import-not-found, import-untyped, unused-ignore]
except ImportError:  # pragma: no cover - depends on the environment
    _brotli = None


def _brotli_can_limit() -> bool:
    """Whether this brotli bounds each output (``output_buffer_limit``, brotli >= 1.2)."""
    try:
        _brotli.Decompressor().process(b"", output_buffer_limit=1)
    except TypeError:  # pragma: no cover - older brotli: one call may inflate without bound
        return False
    return True


if _brotli is not None and not _brotli_can_limit():  # pragma: no cover - old brotli
    # 1.6 kB of brotli can inflate to 2 GB in one process() call; without an output limit we
    # cannot stop it part-way, so "br" is neither advertised nor decoded (unsupported_type)
    _brotli = None

_ACCEPT_ENCODING = "gzip, deflate, br" if _brotli is not None else "gzip, deflate"
_EMPTY: Mapping[str, str] = MappingProxyType({})
_ACCEPT = "text/html,application/xhtml+xml,application/pdf;q=0.9,text/plain;q=0.8,*/*;q=0.5"


# --------------------------------------------------------------------------------------------
# Resolvers
# --------------------------------------------------------------------------------------------


@runtime_checkable
class Resolver(Protocol):
    """Maps a host name to IP address strings; raises ``socket.gaierror`` (OSError) on NXDOMAIN.

    An entry may also be ``"ADDR:PORT"`` / ``"[V6]:PORT"`` to connect to another port (see
    :class:`StaticResolver`).
    """

    async def resolve(self, host: str, port: int) -> list[str]:
        """Return the IP addresses of ``host`` (as strings), or raise OSError."""
        ...


def _split_address(entry: str) -> tuple[str, int | None]:
    """``"1.2.3.4"``, ``"1.2.3.4:8080"``, ``"::1"`` or ``"[::1]:8080"`` → (address, port or None).

    Raises PolicyError when the address part is not an IP address or the port is invalid.
    """
    text = entry.strip()
    port: str | None = None
    if text.startswith("["):
        addr, _, rest = text[1:].partition("]")
        if rest:
            if not rest.startswith(":"):
                raise PolicyError(f"{entry!r} is not ADDR or ADDR:PORT")
            port = rest[1:]
    elif text.count(":") == 1:
        addr, port = text.split(":")
    else:
        addr = text
    ip = parse_ip_literal(addr) if addr else None
    if ip is None or (ip.version == 4 and addr.count(".") != 3):
        raise PolicyError(f"{entry!r} is not an IP address (ADDR or ADDR:PORT)")
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        raise PolicyError(f"{entry!r} has an invalid port")
    return str(ip), (int(port) if port is not None else None)


def _join_address(addr: str, port: int | None) -> str:
    if port is None:
        return addr
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


class StaticResolver:
    """A fixed host → address map, like ``curl --resolve``.

    ``StaticResolver({"news.example.com": "127.0.0.1"})`` sends ``news.example.com`` to 127.0.0.1
    while the registrable-domain and address-safety logic still see the real name. An address may
    carry a port (``"127.0.0.1:8080"``, ``"[::1]:8080"``): connections then go to that port
    whatever the URL says (like ``curl --connect-to``), so ``http://news.example.com/`` can be
    served by a local test server. Unmapped hosts go to ``fallback`` or fail as NXDOMAIN.
    """

    def __init__(
        self, mapping: Mapping[str, str | Sequence[str]], fallback: Resolver | None = None
    ) -> None:
        table: dict[str, list[str]] = {}
        for host, addresses in mapping.items():
            entries = [addresses] if isinstance(addresses, str) else list(addresses)
            if not entries:
                raise PolicyError(f"StaticResolver: no address for {host!r}")
            try:
                parsed = [_split_address(a) for a in entries]
            except ValueError as exc:
                raise PolicyError(f"StaticResolver: {host!r}: {exc}") from None
            table[host.strip().lower().rstrip(".")] = [_join_address(a, p) for a, p in parsed]
        self._table = table
        self._fallback = fallback

    @property
    def hosts(self) -> frozenset[str]:
        """The host names this resolver maps."""
        return frozenset(self._table)

    async def resolve(self, host: str, port: int) -> list[str]:
        """Return the mapped addresses, else ask the fallback, else raise NXDOMAIN."""
        addrs = self._table.get(host.lower().rstrip("."))
        if addrs is not None:
            return list(addrs)
        if self._fallback is not None:
            return await self._fallback.resolve(host, port)
        raise socket.gaierror(socket.EAI_NONAME, f"{host}: name not known (not in StaticResolver)")


class SystemResolver:
    """The system's DNS (aiohttp's default resolver: aiodns when installed, else getaddrinfo in a
    thread), with a TTL cache and concurrent look-ups of one host merged into one."""

    def __init__(
        self,
        *,
        ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        inner: AbstractResolver | None = None,
    ) -> None:
        """``inner``: the aiohttp resolver to ask (default: ``aiohttp.DefaultResolver()``, made
        in the loop that first asks, and closed by :meth:`aclose`; one given is not closed)."""
        self._ttl = ttl
        self._clock = clock
        self._given = inner
        self._inner: AbstractResolver | None = inner
        self._cache: dict[str, tuple[float, list[str]]] = {}
        self._pending: dict[str, asyncio.Task[list[str]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pacer: _StartPacer | None = None

    async def resolve(self, host: str, port: int) -> list[str]:
        """Return the addresses of ``host``; raises OSError (``socket.gaierror``) when unknown."""
        key = host.lower()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > self._clock():
            return list(hit[1])
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # the inner resolver and pending look-ups are loop-bound
            self._inner = self._given
            self._pending.clear()
            self._loop = loop
            self._pacer = _StartPacer(loop, _LOOKUPS_PER_TURN, _LOOKUPS_IN_BURST)
        task = self._pending.get(key)
        if task is None:
            task = loop.create_task(self._lookup(host, port))
            # Retrieve the outcome even when every waiter was cancelled (no "never retrieved"
            # noise).
            task.add_done_callback(lambda t: None if t.cancelled() else t.exception())
            self._pending[key] = task
        try:
            return list(await asyncio.shield(task))
        finally:
            # a failed look-up's error, raised here, keeps this frame in its traceback: were the
            # frame to keep the task, which keeps the error, each unknown host would leave a
            # cycle (task, error, tracebacks, frames) only the collector frees, 17 objects a
            # host: 34,000 for 2,000 hosts, walked in full passes of 50-100 ms on the loop
            del task

    async def _lookup(self, host: str, port: int) -> list[str]:
        try:
            pacer = self._pacer
            if pacer is not None and not pacer.ready():
                await pacer.turn()  # in turns: each look-up is ~0.1 ms of the loop's time
            if self._inner is None:
                self._inner = aiohttp.DefaultResolver()
            infos = await self._inner.resolve(host, port, family=socket.AF_UNSPEC)
            addrs = list(dict.fromkeys(info["host"] for info in infos))
            if not addrs:
                raise socket.gaierror(socket.EAI_NONAME, f"{host}: no addresses")
            if len(self._cache) >= _DNS_CACHE_SIZE:
                self._cache.pop(next(iter(self._cache)))  # oldest first: dicts keep order
            self._cache[host.lower()] = (self._clock() + self._ttl, addrs)
            return addrs
        finally:
            self._pending.pop(host.lower(), None)

    async def aclose(self) -> None:
        """Release the underlying resolver (the default one: one given stays open)."""
        if self._inner is not None and self._inner is not self._given:
            await self._inner.close()
        self._inner = self._given


_T = TypeVar("_T")


async def fewer_than(
    limit: int, running: set[asyncio.Future[_T]], left: Callable[[], float]
) -> set[asyncio.Future[_T]]:
    """Wait until fewer than ``limit`` (at least 1) of ``running`` are unfinished, or ``left()``
    (seconds) runs out; the unfinished ones. How a big answer keeps a window of its fetches under
    way instead of all of them (each waiting fetch is ~60 objects the collector walks)."""
    limit = max(1, limit)
    running = {t for t in running if not t.done()}
    while len(running) >= limit:
        remaining = left()
        if remaining <= 0:
            break
        await asyncio.wait(running, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        running = {t for t in running if not t.done()}
    return running


class _BlockedAddress(OSError):
    """Raised inside the connector when a host resolves to a refused address."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _PinnedResolver(AbstractResolver):
    """The resolver aiohttp's connector uses: it returns only addresses the fetcher checked."""

    def __init__(self, fetcher: Fetcher) -> None:
        self._fetcher = fetcher

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addrs = await self._fetcher._checked_addresses(host, port)
        out: list[ResolveResult] = []
        for a, override in addrs:
            fam = socket.AF_INET6 if ":" in a else socket.AF_INET
            out.append(
                ResolveResult(
                    hostname=host,
                    host=a,
                    port=override if override is not None else port,
                    family=fam,
                    proto=0,
                    flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
                )
            )
        return out

    async def close(self) -> None:
        return None


# --------------------------------------------------------------------------------------------
# Bodies
# --------------------------------------------------------------------------------------------


class _TooLarge(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Unsupported(Exception):
    pass


class _Corrupt(Exception):
    """A body its Content-Encoding cannot decode (zlib reports its own ``zlib.error``)."""


class _Decoder:
    """Incremental Content-Encoding decoder whose output never exceeds ``limit`` bytes in total."""

    def __init__(self, encoding: str, limit: int) -> None:
        self.encoding = encoding
        self.limit = limit
        self.total = 0
        self._raw_deflate_tried = False
        self._zlib: Any = None
        self._brotli: Any = None
        if encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS)
        elif encoding == "br" and _brotli is not None:
            self._brotli = _brotli.Decompressor()
        elif encoding not in ("", "identity"):
            raise _Unsupported(f"content-encoding {encoding!r} is not supported")

    def _count(self, data: bytes) -> bytes:
        self.total += len(data)
        if self.total > self.limit:
            raise _TooLarge(
                f"decompressed body exceeds {self.limit} bytes ({self.encoding} bomb or huge page)"
            )
        return data

    def feed(self, chunk: bytes) -> bytes:
        if self._zlib is None and self._brotli is None:
            return self._count(chunk)
        if self._brotli is not None:
            return self._feed_brotli(chunk)
        out: list[bytes] = []
        data = chunk
        while data:
            room = self.limit - self.total + 1
            try:
                piece = self._zlib.decompress(data, room)
            except zlib.error:
                if self.encoding == "deflate" and not self._raw_deflate_tried and not self.total:
                    # Many servers send raw DEFLATE under "deflate"; retry without the header.
                    self._raw_deflate_tried = True
                    self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise
            out.append(self._count(piece))
            data = self._zlib.unconsumed_tail
            if self._zlib.eof:
                rest = self._zlib.unused_data
                if rest and self.encoding in ("gzip", "x-gzip"):
                    self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)  # next gzip member
                    data = rest
                else:
                    break
        return b"".join(out)

    def _feed_brotli(self, chunk: bytes) -> bytes:
        # Every process() call is capped at the room left (plus one byte, to detect the
        # overflow): a bomb stops at the cap instead of inflating in one call. While the output
        # limit holds data back, brotli wants empty input until it can accept more.
        out: list[bytes] = []
        data = chunk
        while True:
            room = min(self.limit - self.total + 1, _DECODE_STEP)
            try:
                piece = self._brotli.process(data, output_buffer_limit=room)
            except _brotli.error as exc:
                raise _Corrupt(str(exc)) from None
            out.append(self._count(piece))
            data = b""
            if self._brotli.is_finished() or self._brotli.can_accept_more_data():
                return b"".join(out)
            if not piece:  # pragma: no cover - defensive: no progress, no more input
                raise _Corrupt("the brotli decoder made no progress")


# --------------------------------------------------------------------------------------------
# One hop
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Hop:
    """The outcome of one HTTP request (one attempt at one hop)."""

    status: CitationStatus | None  # None: a redirect to follow
    reason: str
    method: Literal["HEAD", "GET", "NONE"] = "NONE"
    http_status: int | None = None
    headers: Mapping[str, str] | None = None  # None until a response came
    content_type: str | None = None
    location: str | None = None
    body: bytes | None = None
    truncated: bool = False
    transient: bool = False
    retry_after: float | None = None
    cookies: Mapping[str, str] | None = None


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delay-seconds or an HTTP date).

    ``None`` when the header is absent or unreadable; a date in the past gives ``0.0``. Shared
    by the fetcher and the judge client (:mod:`citeguard.checks.judge`).
    """
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _classify(code: int, phrase: str, headers: Mapping[str, str]) -> tuple[CitationStatus, str]:
    label = f"HTTP {code} {phrase}".strip()
    wall = bot_wall_response(code, headers)
    if wall is not None:
        return CitationStatus.BOT_WALL, wall
    if 200 <= code < 300:
        return CitationStatus.OK, label
    if code == 404:
        return CitationStatus.NOT_FOUND, f"{label}: the page does not exist"
    if code == 410:
        return CitationStatus.GONE, f"{label}: the page was removed"
    if code == 429:
        return CitationStatus.RATE_LIMITED, f"{label}: the site is rate-limiting requests"
    if 300 <= code < 400:
        return CitationStatus.HTTP_ERROR, f"{label} without a usable Location header"
    return CitationStatus.HTTP_ERROR, label


def _error_hop(exc: BaseException, method: Literal["HEAD", "GET"]) -> _Hop:
    """Translate a client-side exception into a hop outcome (the one place aiohttp errors map)."""
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        inner = exc.os_error
        if isinstance(inner, _BlockedAddress):
            return _Hop(CitationStatus.BLOCKED_ADDRESS, inner.reason, method)
        return _Hop(CitationStatus.UNREACHABLE, f"DNS lookup failed: {inner}", method)
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return _Hop(CitationStatus.TLS_ERROR, f"TLS certificate error: {exc.certificate_error}")
    if isinstance(exc, aiohttp.ClientSSLError | ssl.SSLError) or isinstance(
        getattr(exc, "os_error", None), ssl.SSLError
    ):
        return _Hop(CitationStatus.TLS_ERROR, f"TLS error: {exc}", method)
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return _Hop(CitationStatus.TIMEOUT, f"timed out: {exc}", method)
    if isinstance(exc, aiohttp.ClientConnectorError):
        inner = exc.os_error
        if isinstance(inner, ConnectionResetError):
            return _Hop(CitationStatus.CONNECTION_ERROR, f"connection reset: {exc}", transient=True)
        return _Hop(CitationStatus.UNREACHABLE, f"cannot connect: {exc.strerror or exc}", method)
    if isinstance(
        exc,
        aiohttp.ServerDisconnectedError
        | aiohttp.ClientPayloadError
        | aiohttp.ClientOSError
        | ConnectionResetError,
    ):
        return _Hop(
            CitationStatus.CONNECTION_ERROR,
            f"connection dropped: {type(exc).__name__}: {exc}",
            method,
            transient=True,
        )
    if isinstance(exc, aiohttp.InvalidURL | ValueError):
        return _Hop(CitationStatus.MALFORMED_URL, f"invalid URL: {exc}", method)
    if isinstance(exc, aiohttp.ClientResponseError):
        return _Hop(CitationStatus.CONNECTION_ERROR, f"invalid HTTP response: {exc.message}")
    return _Hop(CitationStatus.CONNECTION_ERROR, f"{type(exc).__name__}: {exc}", method)


# --------------------------------------------------------------------------------------------
# Fetcher
# --------------------------------------------------------------------------------------------


class _StartPacer:
    """How many requests start in one turn of the event loop: ``burst`` when none is waiting,
    then ``per_turn`` a turn, in order, until the queue is empty.

    Unpaced, a fetch of 200 URLs opens 200 connections in one turn (each task runs until it
    waits on its socket) and the loop polls none of them before all 200 are under way: measured,
    the first request went out ~55 ms after the start, and every one only after all the
    connects. Paced, the loop polls between batches, so early requests are sent (and their
    connections come back to the pool) while later ones are still starting. A small answer's
    requests (up to ``burst``) all start at once, as before.
    """

    __slots__ = ("_allowed", "_burst", "_loop", "_per_turn", "_queue", "_tick_due", "_used")

    def __init__(self, loop: asyncio.AbstractEventLoop, per_turn: int, burst: int) -> None:
        self._loop = loop
        self._per_turn = per_turn
        self._burst = burst
        self._allowed = burst
        self._queue: deque[asyncio.Future[None]] = deque()
        self._used = 0
        self._tick_due = False

    def ready(self) -> bool:
        """True when a request may start now (and counts it); else wait for :meth:`turn`."""
        if self._used < self._allowed and not self._queue:
            self._used += 1
            self._schedule()
            return True
        return False

    def turn(self) -> asyncio.Future[None]:
        """A future that completes when this request's turn comes (FIFO)."""
        fut: asyncio.Future[None] = self._loop.create_future()
        self._queue.append(fut)
        self._schedule()
        return fut

    def _schedule(self) -> None:
        if not self._tick_due:
            self._tick_due = True
            self._loop.call_soon(self._tick)

    def _tick(self) -> None:
        self._tick_due = False
        self._used = 0
        queue = self._queue
        self._allowed = self._per_turn if queue else self._burst
        while queue and self._used < self._allowed:
            fut = queue.popleft()
            if not fut.done():  # a cancelled waiter gives its place up
                fut.set_result(None)
                self._used += 1
        if queue or self._used:
            self._schedule()


@dataclass(slots=True)
class _CacheEntry:
    result: FetchResult
    expires: float
    size: int


@dataclass(slots=True)
class _InFlight:
    task: asyncio.Task[FetchResult]
    waiters: int = 0


_Started = tuple[str, _InFlight]  # (normalised URL, the fetch in flight for it)


class _Deadlines:
    """Per-URL time limits on one loop, with one timer for all deadlines in a ``_TICK`` slice.

    What ``asyncio.timeout`` does per fetch (cancel the task when its time is up, and tell that
    cancellation from any other), with the timers shared: a fetch of 2,000 URLs starts them
    within a few milliseconds, so a handful of timers replace 2,000 (each with its own handle,
    context copy and heap entry, all of them objects the GC walks while the fetches run). A
    deadline fires at most ``_TICK`` late, well inside ``_GRACE``.
    """

    __slots__ = ("_expired", "_loop", "_slices")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._slices: dict[int, set[asyncio.Task[Any]]] = {}
        self._expired: set[asyncio.Task[Any]] = set()

    def add(self, task: asyncio.Task[Any], seconds: float) -> int:
        """Cancel ``task`` in ``seconds`` (rounded up to the slice); returns its slice."""
        key = math.ceil((self._loop.time() + seconds) / _TICK)
        tasks = self._slices.get(key)
        if tasks is None:
            tasks = self._slices[key] = set()
            self._loop.call_at(key * _TICK, self._expire, key)
        tasks.add(task)
        return key

    def discard(self, task: asyncio.Task[Any], key: int) -> bool:
        """``task`` is done with its deadline; True when the deadline cancelled it."""
        tasks = self._slices.get(key)
        if tasks is not None:
            tasks.discard(task)
        if task in self._expired:
            self._expired.discard(task)
            return True
        return False

    def _expire(self, key: int) -> None:
        for task in self._slices.pop(key, ()):
            if not task.done():
                self._expired.add(task)
                task.cancel()


class Fetcher(AsyncClosing):
    """Fetches cited URLs under a :class:`FetchPolicy`; see the module docstring.

    Args:
        policy: limits and switches (default ``FetchPolicy()``).
        resolver: host → addresses (default :class:`SystemResolver`); e.g. a
            :class:`StaticResolver` to point names at a local server.
        sleep: how to wait between retries (tests record waits instead of sleeping).
        clock: monotonic clock for budgets, elapsed times and cache expiry.
        cache_size: most results kept in the per-Fetcher cache (LRU).
        cache_bytes: most body bytes kept in the cache (LRU).
        limits_redis: a Redis URL: share per-host concurrency, rate and pauses with every
            replica that uses it (:class:`~citeguard.web.limits.RedisHostLimiter`, extra
            ``redis``); default: this process's own limits.

    Use ``async with Fetcher(...) as f`` or call :meth:`aclose`. One Fetcher belongs to one event
    loop (its session is created in the first loop that uses it).
    """

    def __init__(
        self,
        policy: FetchPolicy | None = None,
        *,
        resolver: Resolver | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        cache_size: int = 1024,
        cache_bytes: int = 64 * 1024 * 1024,
        limits_redis: str | None = None,
    ) -> None:
        self.policy = policy if policy is not None else FetchPolicy()
        self._owns_resolver = resolver is None
        self.resolver: Resolver = (
            resolver if resolver is not None else SystemResolver(ttl=self.policy.dns_cache_ttl)
        )
        self._sleep = sleep
        self._clock = clock
        self._cache_size = cache_size
        self._cache_bytes = cache_bytes
        self._cache: OrderedDict[str, _CacheEntry] = OrderedDict()
        self._cached_bytes = 0
        self._inflight: dict[tuple[str, bool], _InFlight] = {}
        self._deadlines: _Deadlines | None = None
        self._pacer: _StartPacer | None = None
        self._session: aiohttp.ClientSession | None = None
        self._limits_redis = limits_redis
        self._limiter: HostLimiter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._private_hosts = frozenset(h.lower() for h in self.policy.allowed_private_hosts)
        self._closed = False

    # ---- lifecycle -------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Cancel unfinished fetches and close the session (and the resolver it created)."""
        self._closed = True
        tasks = [f.task for f in self._inflight.values()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._inflight.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._limiter is not None:
            await self._limiter.aclose()
            self._limiter = None
        if self._owns_resolver and isinstance(self.resolver, SystemResolver):
            await self.resolver.aclose()

    def _ensure_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            # Used from another event loop (e.g. a second asyncio.run): the session, semaphores
            # and fetches in flight belong to a loop that may be gone; start afresh in this one.
            self._session = None
            self._limiter = None  # its semaphores (and Redis client) belong to the old loop
            self._inflight.clear()
        if self._loop is not loop:
            self._deadlines = _Deadlines(loop)
            self._pacer = _StartPacer(loop, _STARTS_PER_TURN, _STARTS_IN_BURST)
        self._loop = loop

    def _get_session(self) -> aiohttp.ClientSession:
        session = self._session
        if session is not None and self._loop is asyncio.get_running_loop() and not session.closed:
            return session  # every request asks: the common case first
        self._ensure_loop()
        if self._session is None or self._session.closed:
            p = self.policy
            connector = aiohttp.TCPConnector(
                resolver=_PinnedResolver(self),
                # The fetcher's resolver caches; the connector must ask the pinned resolver for
                # every new connection so each one goes to a checked address.
                use_dns_cache=False,
                # the limiter (web/limits.py) is the one place limits are kept: every request
                # holds a lease, so the connector need not count them again
                limit=0,
                limit_per_host=0,
                enable_cleanup_closed=False,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(
                    total=None, connect=p.connect_timeout, sock_connect=p.connect_timeout
                ),
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                headers={
                    "User-Agent": p.user_agent,
                    "Accept": _ACCEPT,
                    "Accept-Encoding": _ACCEPT_ENCODING,
                },
                trust_env=False,
                max_field_size=32 * 1024,
                max_line_size=32 * 1024,
            )
            if self._limiter is None:
                self._limiter = make_limiter(p, self._limits_redis)
        return self._session

    @property
    def limiter(self) -> HostLimiter | None:
        """The per-host limiter (None before the first request); a
        :class:`~citeguard.web.limits.RedisHostLimiter` lists its fallbacks in ``findings``."""
        return self._limiter

    # ---- public API ------------------------------------------------------------------------

    async def fetch(self, url: str, *, want_body: bool = True) -> FetchResult:
        """Fetch one URL within ``policy.url_timeout``; never raises for web outcomes."""
        end = self._clock() + self.policy.url_timeout
        started = self._start(url, want_body, end)
        if isinstance(started, FetchResult):
            return started
        started[1].waiters += 1
        return (await self._collect([started], end))[0]

    async def fetch_all(
        self,
        urls: Sequence[str],
        *,
        want_body: bool = True,
        deadline: float | None = None,
    ) -> dict[str, FetchResult]:
        """Fetch every distinct URL, all within one deadline: up to
        ``policy.global_concurrency`` of them under way at once, the next one starting as one
        ends (a URL still waiting when the deadline passes ends as ``TIMEOUT``).

        Args:
            urls: URLs as cited; duplicates (also after normalisation) are fetched once.
            want_body: GET with the body (True) or HEAD with GET fallback (False).
            deadline: seconds from now for the whole answer (default ``policy.answer_deadline``).
                URLs unfinished then end as ``TIMEOUT``.

        Returns:
            A result for every input URL, keyed by the URL exactly as given.
        """
        budget = self.policy.answer_deadline if deadline is None else deadline
        end = self._clock() + max(0.0, budget)
        out: dict[str, FetchResult] = {}
        waiting: list[tuple[str, _Started]] = []
        # this call's fetches under way at once, at most: every one holds ~60 objects (task,
        # coroutines, futures, contexts) the collector walks while it waits, 120,000 for 2,000
        # hosts whose look-ups time out; the rest wait their turn as strings
        window = self.policy.global_concurrency
        running: set[asyncio.Future[FetchResult]] = set()
        for i, url in enumerate(dict.fromkeys(urls)):
            try:
                if i and not i % _STARTS_PER_CALL:
                    # 2,000 URLs started in one go: their normalising and their tasks' first
                    # steps (all run in the next turn) held the loop 20-60 ms; in slices, other
                    # tasks run between them
                    await asyncio.sleep(0)
                if len(running) >= window:
                    running = await fewer_than(window, running, lambda: end - self._clock())
            except BaseException:  # cancelled: the flights started so far lose this waiter
                for _u, (_n, flight) in waiting:
                    flight.waiters -= 1
                raise
            started = self._start(url, want_body, end)
            if isinstance(started, FetchResult):
                out[url] = started
            else:
                started[1].waiters += 1
                waiting.append((url, started))
                if not started[1].task.done():
                    running.add(started[1].task)
        results = await self._collect([s for _u, s in waiting], end)
        for (url, _s), result in zip(waiting, results, strict=True):
            out[url] = result
        return {url: out[url] for url in dict.fromkeys(urls)}

    # ---- cache and de-duplication ---------------------------------------------------------

    def _cache_get(self, url: str, want_body: bool) -> FetchResult | None:
        entry = self._cache.get(url)
        if entry is None:
            return None
        if entry.expires <= self._clock():
            self._cache_drop(url)
            return None
        result = entry.result
        if want_body and result.status is CitationStatus.OK and result.body is None:
            return None  # a HEAD-only success cannot serve a caller that needs the body
        self._cache.move_to_end(url)
        return result.model_copy(update={"from_cache": True})

    def _cache_drop(self, url: str) -> None:
        entry = self._cache.pop(url, None)
        if entry is not None:
            self._cached_bytes -= entry.size

    def _cache_put(self, result: FetchResult) -> None:
        outcome = result.status.outcome
        if result.status is CitationStatus.OK:
            ttl = self.policy.positive_ttl
        elif outcome is Outcome.BROKEN:
            ttl = self.policy.negative_ttl
        else:
            return  # unverifiable (timeouts, bot walls, ...) is never cached
        if result.http_status in _TRANSIENT_CODES and result.status is not CitationStatus.OK:
            return  # a 502/503/504 that outlived its retries is transient too
        if ttl <= 0 or self._cache_size <= 0:
            return
        size = len(result.body) if result.body is not None else 0
        if size > self._cache_bytes:
            return
        old = self._cache.get(result.url)
        if old is not None and old.result.body is not None and result.body is None:
            return  # keep the entry that can serve body-wanting callers too
        self._cache_drop(result.url)
        self._cache[result.url] = _CacheEntry(result, self._clock() + ttl, size)
        self._cached_bytes += size
        while self._cache and (
            len(self._cache) > self._cache_size or self._cached_bytes > self._cache_bytes
        ):
            oldest = next(iter(self._cache))
            self._cache_drop(oldest)

    def _start(self, url: str, want_body: bool, end: float | None = None) -> FetchResult | _Started:
        """Normalise ``url``; answer from the cache, or join / start the fetch in flight."""
        try:
            norm = normalize_url(url, allowed_schemes=self.policy.allowed_schemes)
        except UrlProblem as problem:
            return FetchResult(url=url, status=problem.status, reason=problem.reason)
        if self._closed:
            return FetchResult(
                url=norm, status=CitationStatus.CONNECTION_ERROR, reason="fetcher is closed"
            )
        self._ensure_loop()
        cached = self._cache_get(norm, want_body)
        if cached is not None:
            return cached
        flight = self._inflight.get((norm, True)) if not want_body else None
        if flight is None:
            flight = self._inflight.get((norm, want_body))
        if flight is None:
            # Per-URL budget: url_timeout, cut short by the answer deadline.
            until = self._clock() + self.policy.url_timeout
            if end is not None:
                until = min(until, end)
            task = asyncio.get_running_loop().create_task(self._fetch_task(norm, want_body, until))
            flight = self._inflight[(norm, want_body)] = _InFlight(task)
        return norm, flight

    async def _collect(self, started: list[_Started], end: float) -> list[FetchResult]:
        """Wait (once, for all of them) until ``end`` for flights whose waiters were counted."""
        remaining = end - self._clock()
        pending = {flight.task for _norm, flight in started if not flight.task.done()}
        try:
            if pending:
                # Each task stops itself at its own deadline; the grace lets its (more precise)
                # TIMEOUT result through, and this wait is only a safety net.
                await asyncio.wait(pending, timeout=max(0.0, remaining) + _GRACE)
        finally:
            for _norm, flight in started:
                flight.waiters -= 1
        results: list[FetchResult] = []
        for i, (norm, flight) in enumerate(started):
            if i and not i % _COLLECTED_PER_CALL:
                await asyncio.sleep(0)  # (as in fetch_all) other tasks run between slices
            task = flight.task
            if task.done():
                if task.cancelled():
                    results.append(
                        FetchResult(
                            url=norm,
                            status=CitationStatus.CONNECTION_ERROR,
                            reason="fetch was cancelled",
                        )
                    )
                else:
                    results.append(task.result())
                continue
            if flight.waiters == 0:
                task.cancel()
                for key, value in list(self._inflight.items()):
                    if value is flight:  # later callers must start afresh, not join a dying task
                        del self._inflight[key]
            results.append(
                FetchResult(
                    url=norm,
                    status=CitationStatus.TIMEOUT,
                    reason=f"the answer deadline passed before {host_of(norm)} answered",
                    elapsed_ms=max(0.0, remaining) * 1000,
                )
            )
        return results

    async def _fetch_task(self, url: str, want_body: bool, end: float) -> FetchResult:
        """The task of one fetch in flight (``_inflight[(url, want_body)]``): it leaves the
        in-flight table when it ends, however it ends, and caches what it found. (Done here, not
        in a done-callback: no callback, context copy and handle per URL.)"""
        start = self._clock()
        state = _Progress(url=url, clock=self._clock, start=start)
        task = asyncio.current_task()
        deadlines = self._deadlines
        assert task is not None and deadlines is not None
        key = None
        try:
            remaining = end - start
            if remaining <= 0:
                raise TimeoutError
            key = deadlines.add(task, remaining)
            try:
                result = await self._follow(url, want_body, end, state)
            except asyncio.CancelledError:
                # ours (the deadline), unless someone else cancelled the task too
                if deadlines.discard(task, key) and task.uncancel() == 0:
                    raise TimeoutError from None
                raise
        except TimeoutError:
            result = state.result(
                CitationStatus.TIMEOUT,
                f"no complete answer within {max(0.0, end - start):.1f} s",
            )
        except Exception as exc:  # never raise for a web outcome, whatever the server did
            result = state.result(
                CitationStatus.CONNECTION_ERROR, f"unexpected error: {type(exc).__name__}: {exc}"
            )
        finally:
            if key is not None:
                deadlines.discard(task, key)
            flight = self._inflight.get((url, want_body))
            if flight is not None and flight.task is task:
                del self._inflight[(url, want_body)]
        self._cache_put(result)
        return result

    # ---- address safety -------------------------------------------------------------------

    def _address_allowed(self, host: str) -> bool:
        return self.policy.allow_private_addresses or host.lower() in self._private_hosts

    async def _checked_addresses(self, host: str, port: int) -> list[tuple[str, int | None]]:
        """Resolve ``host`` and check every address; raises OSError (incl. _BlockedAddress).

        Returns (address, port override or None) pairs: exactly what the connector may use.
        """
        bare = host.strip("[]").rstrip(".")
        ip = parse_ip_literal(bare)
        if ip is not None:  # an IP literal: nothing to resolve, one address to check
            why = None if self._address_allowed(bare) else blocked_address_reason(ip)
            if why is not None:
                raise _BlockedAddress(why)
            return [(str(ip), None)]
        entries = await self.resolver.resolve(bare, port)
        if not entries:
            raise socket.gaierror(socket.EAI_NONAME, f"{host}: no addresses")
        out: list[tuple[str, int | None]] = []
        allowed = self._address_allowed(bare)
        for entry in entries:
            try:
                addr, override = _split_address(entry)
            except ValueError:
                raise _BlockedAddress(f"{host} resolved to {entry!r}, not an IP address") from None
            why = None if allowed else blocked_address_reason(ipaddress.ip_address(addr))
            if why is not None:
                raise _BlockedAddress(f"{host} resolves to {addr}; {why}")
            out.append((addr, override))
        return out

    async def _address_problem(self, u: URL) -> tuple[CitationStatus, str] | None:
        host = u.raw_host or ""
        try:
            await self._checked_addresses(host, u.port or 0)
        except _BlockedAddress as exc:
            return CitationStatus.BLOCKED_ADDRESS, f"refused to connect: {exc.reason}"
        except OSError as exc:
            return CitationStatus.UNREACHABLE, f"DNS lookup for {host} failed: {exc}"
        return None

    # ---- redirects -------------------------------------------------------------------------

    async def _follow(self, url: str, want_body: bool, end: float, st: _Progress) -> FetchResult:
        seen: dict[str, int] | None = None  # made at the first redirect, as are the cookies
        current = url
        cookies: Mapping[str, str] = _EMPTY
        while True:
            st.final_url = current
            # ``current`` is normalize_url's WHATWG serialisation, handed to aiohttp as it is
            # (encoded=True: yarl splits it, changes nothing), so the request goes to the host a
            # browser opens. Should the two readings of the host ever differ, nothing is sent.
            target_url = URL(current, encoded=True)
            whatwg_host = host_of(current)
            if (target_url.raw_host or "").lower() != whatwg_host:
                return st.result(
                    CitationStatus.MALFORMED_URL,
                    f"refused: the HTTP client reads the host of {current!r} as "
                    f"{target_url.raw_host!r}, a browser as {whatwg_host!r}",
                )
            problem = await self._address_problem(target_url)
            if problem is not None:
                return st.result(*problem)
            # Fast path: most hops succeed or fail for good at once; the retry loop is built
            # only for a transient outcome (per hop it costs more than the request itself on a
            # fast network, and every object a waiting fetch holds is one more for the GC).
            hop, head = await self._attempt(target_url, not want_body, want_body, cookies, end)
            st.attempts = 1
            if hop.transient:
                hop = await self._retried(hop, head, target_url, want_body, end, cookies, st)
            st.absorb(hop)
            if hop.cookies:
                cookies = {**cookies, **hop.cookies}
            if hop.status is not None:
                return st.result(hop.status, hop.reason, body=hop.body, truncated=hop.truncated)
            assert hop.location is not None
            target_raw = hop.location
            try:
                # As the browser resolves it: "\\evil.example/", "/\evil.example/" and
                # "http:\\evil.example/" name another host; a broken one is malformed_url.
                target_raw = join_url(current, hop.location)
                target = normalize_url(target_raw, allowed_schemes=self.policy.allowed_schemes)
            except UrlProblem as p:
                st.redirected(target_raw)
                return st.result(p.status, f"redirect to {target_raw!r} refused: {p.reason}")
            hops = st.redirected(target)
            st.final_url = target
            if not same_site(url, target):
                return st.result(
                    CitationStatus.CROSS_DOMAIN_REDIRECT,
                    f"redirects from {registrable_domain(url)} to another site "
                    f"({registrable_domain(target)}); not followed",
                )
            if seen is None:
                seen = {url: 1}
            visits = seen.get(target, 0)
            # A site may redirect to itself once to set a cookie; anything more is a loop.
            if visits and not (hop.cookies and visits < 2):
                return st.result(
                    CitationStatus.REDIRECT_LOOP, f"redirect loop: {target} was already visited"
                )
            if hops > self.policy.max_redirects:
                return st.result(
                    CitationStatus.TOO_MANY_REDIRECTS,
                    f"more than {self.policy.max_redirects} redirects",
                )
            seen[target] = visits + 1
            current = target

    # ---- retries ---------------------------------------------------------------------------

    async def _attempt(
        self,
        url: URL,
        use_head: bool,
        want_body: bool,
        cookies: Mapping[str, str],
        end: float,
        retry: bool = False,
    ) -> tuple[_Hop, bool]:
        """One attempt at one hop: HEAD (GET again when HEAD is refused) or GET. Returns the hop
        and whether a later attempt may still start with HEAD. ``retry``: the attempt follows
        a wait of its own (a host's pause is for the other requests)."""
        if use_head:
            hop = await self._request(url, "HEAD", want_body, cookies, end, retry)
            code = hop.http_status
            refused = code is not None and not (200 <= code < 300 or hop.status is None)
            if not refused and hop.status not in _HEAD_FALLBACK_ERRORS:
                return hop, True
            # Some servers refuse or mishandle HEAD: ask again with GET.
            if hop.transient:
                return hop, False  # the retry loop waits (Retry-After, backoff) before the GET
        return await self._request(url, "GET", want_body, cookies, end, retry), False

    async def _retried(
        self,
        hop: _Hop,
        use_head: bool,
        url: URL,
        want_body: bool,
        end: float,
        cookies: Mapping[str, str],
        st: _Progress,
    ) -> _Hop:
        """A transient first outcome, retried (it is tenacity's attempt 1); the reason says how
        many attempts were made and why they stopped early, if they did."""
        attempts, note = 1, None
        if self.policy.retries > 0:
            hop, attempts, note = await self._retry(hop, use_head, url, want_body, end, cookies)
        st.attempts = attempts
        if hop.transient and hop.status is not None:
            tried = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
            hop.reason = f"{hop.reason} ({tried}{'; ' + note if note else ''})"
        return hop

    async def _retry(
        self,
        first: _Hop,
        use_head: bool,
        url: URL,
        want_body: bool,
        end: float,
        cookies: Mapping[str, str],
    ) -> tuple[_Hop, int, str | None]:
        """Retry a transient first outcome under tenacity; (last hop, attempts, why it stopped
        early, if it did)."""
        policy = self.policy
        note: list[str] = []
        attempts = 1
        pending = [first]

        async def attempt() -> _Hop:
            nonlocal use_head, attempts
            if pending:
                return pending.pop()  # attempt 1 was made already
            attempts += 1
            hop, use_head = await self._attempt(url, use_head, want_body, cookies, end, True)
            return hop

        def wait(rs: RetryCallState) -> float:
            hop: _Hop = rs.outcome.result()  # type: ignore[union-attr]
            if hop.retry_after is not None:
                return hop.retry_after
            return float(policy.retry_backoff * (2 ** (rs.attempt_number - 1)))

        def stop(rs: RetryCallState) -> bool:
            if rs.attempt_number > policy.retries:
                return True
            hop: _Hop = rs.outcome.result()  # type: ignore[union-attr]
            delay = rs.upcoming_sleep
            if hop.retry_after is not None and hop.retry_after > policy.retry_after_cap:
                note.append(
                    f"server asked to retry after {hop.retry_after:.0f} s, "
                    f"more than the {policy.retry_after_cap:g} s cap"
                )
                return True
            if self._clock() + delay >= end:
                note.append(f"a retry in {delay:.2f} s would pass the deadline")
                return True
            return False

        def give_up(rs: RetryCallState) -> _Hop:
            return rs.outcome.result()  # type: ignore[union-attr,no-any-return]

        retrying = AsyncRetrying(
            sleep=self._sleep,
            stop=stop,
            wait=wait,
            retry=retry_if_result(lambda h: bool(h.transient)),
            retry_error_callback=give_up,
        )
        hop: _Hop = await retrying(attempt)
        return hop, attempts, (note[-1] if note else None)

    # ---- one request -----------------------------------------------------------------------

    async def _request(
        self,
        u: URL,
        method: Literal["HEAD", "GET"],
        want_body: bool,
        cookies: Mapping[str, str],
        end: float,
        retry: bool = False,
    ) -> _Hop:
        session = self._get_session()
        headers = None
        if cookies:
            headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())}
        limiter = self._limiter
        assert limiter is not None
        host = f"{u.raw_host}:{u.port}"
        lease = await limiter.acquire(host, end - self._clock(), honour_pause=not retry)
        if lease is None:
            return _Hop(
                CitationStatus.RATE_LIMITED,
                f"{u.raw_host} asked clients to wait {limiter.pause_left(host):.0f} s more "
                "(429 / Retry-After), past this URL's deadline; not asked again",
                method,
            )
        try:
            pacer = self._pacer
            assert pacer is not None
            if not pacer.ready():
                await pacer.turn()
            async with session.request(method, u, headers=headers, allow_redirects=False) as resp:
                hop = await self._read_response(resp, method, want_body)
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            hop = _error_hop(exc, method)
        finally:
            limiter.release(lease)
        if hop.transient and (hop.http_status == 429 or hop.retry_after is not None):
            # every request to this host (every replica, with a shared limiter) waits too
            pause = hop.retry_after if hop.retry_after is not None else self.policy.retry_backoff
            limiter.slow_down(host, pause)
        return hop

    async def _read_response(
        self, resp: aiohttp.ClientResponse, method: Literal["HEAD", "GET"], want_body: bool
    ) -> _Hop:
        code = resp.status
        raw_headers = resp.headers
        headers: dict[str, str] = {}
        for name, value in raw_headers.items():
            key = name.lower()
            if key in _DROP_HEADERS:
                continue
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        cookies: Mapping[str, str] | None = None
        if "Set-Cookie" in raw_headers:
            jar: SimpleCookie = SimpleCookie()
            for line in raw_headers.getall("Set-Cookie"):
                with contextlib.suppress(Exception):
                    jar.load(line)
            cookies = {k: m.value for k, m in jar.items()}
        hop = _Hop(
            status=None,
            reason="",
            method=method,
            http_status=code,
            headers=headers,
            content_type=headers.get("content-type"),
            cookies=cookies,
        )
        location = raw_headers.get("Location")
        if code in _REDIRECT_CODES and location:
            hop.location = location
            hop.reason = f"HTTP {code} redirect"
            await self._drain(resp)
            return hop
        hop.status, hop.reason = _classify(code, resp.reason or "", headers)
        if code in _TRANSIENT_CODES and hop.status is not CitationStatus.BOT_WALL:
            hop.transient = True
            hop.retry_after = parse_retry_after(raw_headers.get("Retry-After"))
        if method == "GET" and want_body and hop.status is CitationStatus.OK:
            await self._read_body(resp, hop)
        else:
            await self._drain(resp)
        return hop

    async def _drain(self, resp: aiohttp.ClientResponse) -> None:
        """Read a small leftover body so the connection can go back to the pool."""
        length = resp.content_length
        if resp.method == "HEAD" or (length is not None and length <= _DRAIN_LIMIT):
            with contextlib.suppress(aiohttp.ClientError, OSError):
                await resp.read()

    async def _read_body(self, resp: aiohttp.ClientResponse, hop: _Hop) -> None:
        p = self.policy
        length = resp.content_length
        if length is not None and length > p.max_body_bytes:
            hop.status = CitationStatus.TOO_LARGE
            hop.reason = f"body of {length} bytes exceeds the {p.max_body_bytes}-byte cap"
            hop.truncated = True
            return
        encoding = resp.headers.get("Content-Encoding", "").strip().lower()
        try:
            decoder = _Decoder(encoding, p.max_decompressed_bytes)
        except _Unsupported as exc:
            hop.status = CitationStatus.UNSUPPORTED_TYPE
            hop.reason = str(exc)
            return
        chunks: list[bytes] = []
        raw = 0
        try:
            if length is not None and length <= _SMALL_BODY:
                # Small and announced: one read (the parser stops at Content-Length), then
                # decode with the same decompressed-size cap.
                hop.body = decoder.feed(await resp.read())
                return
            async for chunk in resp.content.iter_chunked(_CHUNK):
                raw += len(chunk)
                if raw > p.max_body_bytes:
                    raise _TooLarge(f"body exceeds the {p.max_body_bytes}-byte cap")
                out = decoder.feed(chunk)
                if out:
                    chunks.append(out)
        except _TooLarge as exc:
            # Stop reading now; leaving the block closes the connection instead of draining it.
            hop.status = CitationStatus.TOO_LARGE
            hop.reason = exc.reason
            hop.truncated = True
            resp.close()
            return
        except (zlib.error, _Corrupt) as exc:
            hop.status = CitationStatus.CONNECTION_ERROR
            hop.reason = f"corrupt {encoding} body: {exc}"
            return
        hop.body = b"".join(chunks)


@dataclass(slots=True)
class _Progress:
    """What one URL's fetch has learned so far (for the result, whatever ends it).

    ``redirects`` and ``headers`` start as empty tuples/None, not new containers: thousands of
    fetches may wait at once, and each object they hold is one more for the GC to walk."""

    url: str
    clock: Callable[[], float]
    start: float
    final_url: str | None = None
    redirects: list[str] | None = None
    method: Literal["HEAD", "GET", "NONE"] = "NONE"
    http_status: int | None = None
    headers: Mapping[str, str] | None = None
    content_type: str | None = None
    attempts: int = 1

    def redirected(self, target: str) -> int:
        """Record a redirect to ``target``; returns how many there have been."""
        if self.redirects is None:
            self.redirects = []
        self.redirects.append(target)
        return len(self.redirects)

    def absorb(self, hop: _Hop) -> None:
        self.method = hop.method
        if hop.http_status is not None:
            self.http_status = hop.http_status
            self.headers = hop.headers
            self.content_type = hop.content_type

    def result(
        self,
        status: CitationStatus,
        reason: str,
        *,
        body: bytes | None = None,
        truncated: bool = False,
    ) -> FetchResult:
        return FetchResult(
            url=self.url,
            final_url=self.final_url,
            status=status,
            reason=reason,
            http_status=self.http_status,
            method=self.method,
            redirects=list(self.redirects or ()),
            headers=dict(self.headers or ()),
            content_type=self.content_type,
            body=body,
            truncated=truncated,
            attempts=self.attempts,
            elapsed_ms=(self.clock() - self.start) * 1000,
            fetched_at=datetime.now(UTC),
        )

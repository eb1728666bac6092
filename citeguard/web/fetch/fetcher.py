"""The :class:`Fetcher`: one aiohttp session, a TTL cache with in-flight de-duplication, the
addresses checked at every hop and redirects followed by hand (see :mod:`citeguard.web.fetch`);
each request, its retries and its streamed read come from :mod:`~citeguard.web.fetch.request`."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from citeguard.closing import AsyncClosing
from citeguard.models import CitationStatus, FetchResult, Outcome
from citeguard.policy import DEFAULT_DOI_RESOLVER_URL as DOI_RESOLVER
from citeguard.policy import FetchPolicy
from citeguard.web.fetch.body import _ACCEPT_ENCODING
from citeguard.web.fetch.hop import _Progress
from citeguard.web.fetch.pacing import _Deadlines, _StartPacer
from citeguard.web.fetch.request import _TRANSIENT_CODES, _Requests
from citeguard.web.fetch.resolve import (
    Resolver,
    SystemResolver,
    _BlockedAddress,
    _split_address,
    fewer_than,
)
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

_EMPTY: Mapping[str, str] = MappingProxyType({})
_ACCEPT = "text/html,application/xhtml+xml,application/pdf;q=0.9,text/plain;q=0.8,*/*;q=0.5"


# a resolver's answer for an identifier it does not know
_UNKNOWN_ID = frozenset({CitationStatus.NOT_FOUND, CitationStatus.GONE})


def _resolvers(policy: FetchPolicy) -> tuple[frozenset[str], str | None]:
    """The identifier resolvers' hosts (with the DOI mirror's) and the DOI mirror's base (None:
    doi.org itself)."""
    hosts = frozenset(h.lower() for h in policy.resolver_hosts)
    base = policy.doi_resolver_url
    if base == DOI_RESOLVER:
        return hosts, None
    base = base if base.endswith("/") else base + "/"
    return hosts | {host_of(base)}, base


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


class Fetcher(_Requests, AsyncClosing):
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
        self._resolver_hosts, self._doi_base = _resolvers(self.policy)
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
        if self._doi_base is not None and url.startswith(DOI_RESOLVER):
            current = self._doi_base + url[len(DOI_RESOLVER) :]  # the DOI resolver's mirror
        site = url  # the site redirects must stay on: the cited one, then a resolver's target
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
                reason = hop.reason
                if st.via_resolver is not None:
                    reason = f"{reason} (reached through {st.via_resolver})"
                elif hop.status in _UNKNOWN_ID and host_of(current) in self._resolver_hosts:
                    reason = (
                        f"the resolver {host_of(current)} does not know this identifier ({reason})"
                    )
                return st.result(hop.status, reason, body=hop.body, truncated=hop.truncated)
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
            if same_site(site, target):
                pass
            elif host_of(current) in self._resolver_hosts:
                # an identifier resolver is a hop: the site it sends the fetch to is the target
                st.via_resolver = st.via_resolver or host_of(current)
                site = target
            else:
                return st.result(
                    CitationStatus.CROSS_DOMAIN_REDIRECT,
                    f"redirects from {registrable_domain(site)} to another site "
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

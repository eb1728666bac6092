"""Per-host request limits: how many requests one host gets at once, and per second.

The fetcher asks a :class:`HostLimiter` before every request (``acquire``) and gives the
:class:`Lease` back after it (``release``); a 429, or a ``Retry-After`` on a transient answer,
pauses the host (``slow_down``).

* :class:`LocalHostLimiter`: one process. A global semaphore and one per host
  (``FetchPolicy.global_concurrency`` / ``per_host_concurrency``), an optional per-host rate
  (``per_host_rate``) and the hosts' pauses. With no rate and no pause in force a request costs
  two semaphore acquisitions, as before there were limiters.
* :class:`RedisHostLimiter`: every replica that uses one Redis shares each host's budget. One Lua
  script checks and takes, atomically, a concurrency lease (a sorted-set member whose score is
  its expiry, so a dead replica's leases lapse after ``url_timeout`` + 1 s) and a place in the
  rate window, and honours the host's pause (a "not before" time kept in Redis, set by any
  replica's 429 / ``Retry-After``). Times are Redis's own (``TIME``), so replicas' clocks need
  not agree. A Redis call that fails or takes longer than ``limits_redis_timeout`` sends the
  replica to its local limits for ``limits_fallback_seconds`` and records a :class:`Finding`
  (``limiter.findings``, a logged warning, ``limiter.fallbacks``).

The rate limit holds over any one-second window, bursts included. A request is granted at ``t``
only when fewer than ``rate`` grants lie in ``(t - W, t]``, a log of the last ``rate`` grants
(:class:`RateWindow`; the Lua script keeps the same log in a sorted set). ``W`` is one second
plus ``per_host_rate_margin``: the time between a grant and the request reaching the host varies
(connection set-up, a busy event loop), and the margin keeps that jitter from packing more than
``rate`` arrivals into one second at the host. A token bucket whose burst equals its rate lets
nearly twice the rate through in one second (a full bucket, then its refill); this cannot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from citeguard.errors import MissingExtraError
from citeguard.models import Finding, Severity
from citeguard.policy import FetchPolicy

__all__ = [
    "MAX_PAUSE",
    "HostLimiter",
    "Lease",
    "LocalHostLimiter",
    "RateWindow",
    "RedisHostLimiter",
    "make_limiter",
    "redis_keys",
]

_LOG = logging.getLogger(__name__)

#: The longest pause one answer of a host can impose (seconds); a longer Retry-After is cut here.
MAX_PAUSE = 3600.0
_PRUNE_AT = 1024  # per-host records (rate logs, pauses) are swept once there are this many
_POLL_MIN = 0.002  # a request waiting for a host busy elsewhere polls Redis from this interval
_POLL_MAX = 0.05  # ... doubling up to this one
_FINDINGS_KEPT = 32
_FALLBACK_CODE = "host_limits_local_fallback"


class _Permits:
    """A FIFO counting semaphore that hands a released permit straight to its first waiter.

    ``asyncio.Semaphore`` walks its waiters on every acquire (``locked()``) and skips the ones
    already woken on every release: quadratic when thousands of fetches queue for a few hosts.
    Here every operation is O(1) (a cancelled waiter removes itself).
    """

    __slots__ = ("_free", "_waiters")

    def __init__(self, permits: int) -> None:
        self._free = permits
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        if self._free > 0:  # never while someone waits: a release hands its permit over
            self._free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # handed a permit as it was cancelled: pass it on
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            raise

    def release(self) -> None:
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._free += 1


class _HostSlot:
    """One host's permits and how many requests hold them or wait for them."""

    __slots__ = ("host", "sem", "users")

    def __init__(self, host: str, limit: int) -> None:
        self.host = host
        self.sem = _Permits(limit)
        self.users = 0


class Lease:
    """One request's permission to go to its host; give it back with ``release``."""

    __slots__ = ("slot", "token")

    def __init__(self, slot: _HostSlot, token: str | None = None) -> None:
        self.slot = slot
        self.token = token  # the Redis lease, when one was taken

    @property
    def host(self) -> str:
        return self.slot.host


@runtime_checkable
class HostLimiter(Protocol):
    """What the fetcher asks before and after every request."""

    async def acquire(
        self, host: str, within: float = math.inf, *, honour_pause: bool = True
    ) -> Lease | None:
        """Wait until a request to ``host`` may go; ``None`` when the host has asked clients to
        wait longer than ``within`` seconds (the request's time left). ``honour_pause=False``:
        a retry that has already waited its own ``Retry-After``."""
        ...

    def release(self, lease: Lease) -> None:
        """The request is over (whatever its outcome)."""
        ...

    def slow_down(self, host: str, seconds: float) -> None:
        """The host answered 429 or sent ``Retry-After``: no new request before ``seconds``."""
        ...

    def pause_left(self, host: str) -> float:
        """Seconds until ``host`` may be asked again (0 when it is not paused)."""
        ...

    async def aclose(self) -> None:
        """Release what the limiter holds (connections, background work)."""
        ...


class RateWindow:
    """At most ``rate`` grants in any window of ``window`` seconds: a log of the last ``rate``.

    ``wait(now)`` is how long until a grant is allowed (0: now); ``take(now)`` records one.
    Memory is ``rate`` floats.
    """

    __slots__ = ("_log", "rate", "window")

    def __init__(self, rate: int, window: float = 1.0) -> None:
        self.rate = rate
        self.window = window
        self._log: deque[float] = deque(maxlen=rate)

    def wait(self, now: float) -> float:
        log = self._log
        if len(log) < self.rate:
            return 0.0
        return max(0.0, log[0] + self.window - now)

    def take(self, now: float) -> None:
        self._log.append(now)  # the oldest falls out: only the last ``rate`` matter

    def idle(self, now: float) -> bool:
        """No grant within the last window (the log can be forgotten)."""
        return not self._log or self._log[-1] + self.window <= now


class LocalHostLimiter:
    """Concurrency, rate and pauses for one process (see the module docstring).

    ``clock`` and ``sleep`` are injectable (tests run it on virtual time); they must agree.
    """

    def __init__(
        self,
        *,
        global_limit: int,
        host_limit: int,
        rate: int | None = None,
        window: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._global = _Permits(global_limit)
        self._host_limit = host_limit
        self._rate = rate
        self._window = window
        self._clock = clock
        self._sleep = sleep
        self._hosts: dict[str, _HostSlot] = {}
        self._windows: dict[str, RateWindow] = {}
        self._paused: dict[str, float] = {}  # host → until (clock)
        self._windows_prune = _PRUNE_AT
        self._paused_prune = _PRUNE_AT

    @classmethod
    def from_policy(
        cls,
        policy: FetchPolicy,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> LocalHostLimiter:
        """The limits ``policy`` names."""
        return cls(
            global_limit=policy.global_concurrency,
            host_limit=policy.per_host_concurrency,
            rate=policy.per_host_rate,
            window=1.0 + policy.per_host_rate_margin,
            clock=clock,
            sleep=sleep,
        )

    # ---- the request path -----------------------------------------------------------------

    async def acquire(
        self, host: str, within: float = math.inf, *, honour_pause: bool = True
    ) -> Lease | None:
        # per-host first, so a request waiting for a busy host holds no global place (inline,
        # not _host_slot: one coroutine fewer for each request waiting here)
        slot = self._hosts.get(host)
        if slot is None:
            slot = self._hosts[host] = _HostSlot(host, self._host_limit)
        slot.users += 1
        try:
            await slot.sem.acquire()
        except BaseException:
            self._drop(slot)
            raise
        try:
            if self._rate is None and not self._paused:
                await self._global.acquire()  # the common case: two semaphores, nothing else
            elif not await self._admit(slot, within, honour_pause):
                self._give_back(slot)
                return None
        except BaseException:
            self._give_back(slot)
            raise
        return Lease(slot)

    def release(self, lease: Lease) -> None:
        self._global.release()
        self._give_back(lease.slot)

    def slow_down(self, host: str, seconds: float) -> None:
        until = self._clock() + min(max(0.0, seconds), MAX_PAUSE)
        if until > self._paused.get(host, -math.inf):
            self._paused[host] = until
        if len(self._paused) > self._paused_prune:
            now = self._clock()
            self._paused = {h: t for h, t in self._paused.items() if t > now}
            self._paused_prune = max(_PRUNE_AT, 2 * len(self._paused))

    def pause_left(self, host: str) -> float:
        until = self._paused.get(host)
        if until is None:
            return 0.0
        left = until - self._clock()
        if left <= 0:
            del self._paused[host]
            return 0.0
        return left

    async def aclose(self) -> None:
        return None

    # ---- parts the Redis limiter shares ---------------------------------------------------

    async def _host_slot(self, host: str) -> _HostSlot:
        """Wait for one of this process's places at ``host`` (per-host first, so a request
        waiting for a busy host holds no global place)."""
        slot = self._hosts.get(host)
        if slot is None:
            slot = self._hosts[host] = _HostSlot(host, self._host_limit)
        slot.users += 1
        try:
            await slot.sem.acquire()
        except BaseException:
            self._drop(slot)
            raise
        return slot

    def _give_back(self, slot: _HostSlot) -> None:
        slot.sem.release()
        self._drop(slot)

    def _drop(self, slot: _HostSlot) -> None:
        slot.users -= 1
        if slot.users == 0 and self._hosts.get(slot.host) is slot:
            del self._hosts[slot.host]

    async def _admit(self, slot: _HostSlot, within: float, honour_pause: bool) -> bool:
        """With the host place held: wait out the host's pause and rate window, then take a
        global place and the grant together. False: the pause outlasts ``within``."""
        host = slot.host
        deadline = self._clock() + within
        while True:
            wait = self.pause_left(host) if honour_pause else 0.0
            if wait > 0 and self._clock() + wait > deadline:
                return False
            window = self._window_of(host)
            if wait <= 0 and window is not None:
                wait = window.wait(self._clock())
            if wait > 0:
                await self._sleep(wait)
                continue
            await self._global.acquire()
            # another request may have taken the last grant, or a pause begun, meanwhile
            now = self._clock()
            if (honour_pause and self.pause_left(host) > 0) or (
                window is not None and window.wait(now) > 0
            ):
                self._global.release()
                continue
            if window is not None:
                window.take(now)
            return True

    def _window_of(self, host: str) -> RateWindow | None:
        if self._rate is None:
            return None
        window = self._windows.get(host)
        if window is None:
            if len(self._windows) >= self._windows_prune:
                now = self._clock()
                self._windows = {h: w for h, w in self._windows.items() if not w.idle(now)}
                self._windows_prune = max(_PRUNE_AT, 2 * len(self._windows))
            window = self._windows[host] = RateWindow(self._rate, self._window)
        return window


# --------------------------------------------------------------------------------------------
# Redis
# --------------------------------------------------------------------------------------------

# KEYS: leases (zset token → expiry µs), rate log (zset token → grant µs), pause (until µs).
# ARGV: token, concurrency, rate (0: none), window µs, lease ttl µs, honour pause (1/0).
# → {1, 0, 0} granted; {0, wait µs, why}: 1 paused, 2 busy (wait: the first lease's expiry),
# 3 rate (wait: until the oldest grant leaves the window).
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if ARGV[6] == '1' then
  local p = tonumber(redis.call('GET', KEYS[3]) or '0')
  if p > now then return {0, p - now, 1} end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, tonumber(first[2]) - now, 2}
end
local rate = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
if rate > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
  if redis.call('ZCARD', KEYS[2]) >= rate then
    local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return {0, tonumber(oldest[2]) + window - now, 3}
  end
  redis.call('ZADD', KEYS[2], now, ARGV[1])
  redis.call('PEXPIRE', KEYS[2], math.ceil(window / 1000) + 1000)
end
local ttl = tonumber(ARGV[5])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.ceil(ttl / 1000) + 1000)
return {1, 0, 0}
"""

# KEYS: pause. ARGV: seconds µs. The pause only ever grows.
_PAUSE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local untilt = now + tonumber(ARGV[1])
local p = tonumber(redis.call('GET', KEYS[1]) or '0')
if untilt > p then
  redis.call('SET', KEYS[1], string.format('%.0f', untilt), 'PX',
             math.ceil(tonumber(ARGV[1]) / 1000) + 1000)
end
return 1
"""

_PAUSED, _BUSY = 1, 2
DEFAULT_PREFIX = "citeguard:hosts"


def redis_keys(host: str, prefix: str = DEFAULT_PREFIX) -> tuple[str, str, str]:
    """The Redis keys of one host's shared limits: its leases (a sorted set, token → expiry in
    µs), its rate log (a sorted set, token → grant time in µs) and its pause (until, in µs).
    One hash tag per host, so a Redis Cluster keeps them on one node."""
    base = f"{prefix}:{{{host}}}"
    return f"{base}:c", f"{base}:r", f"{base}:p"


class _RedisDown(Exception):
    """A Redis call failed or timed out (the limiter has fallen back)."""


class RedisHostLimiter:
    """Per-host limits shared by every replica using one Redis (extra ``redis``).

    ``url``: ``redis://`` / ``rediss://`` / ``unix://``. ``prefix``: the keys' prefix (one key
    set per host, :func:`redis_keys`). This process's own limits (global and per-host
    concurrency) still hold, and are all that holds while Redis is unavailable. The client
    binds to the event loop it first runs in.
    """

    def __init__(
        self,
        url: str,
        policy: FetchPolicy,
        *,
        prefix: str = DEFAULT_PREFIX,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        try:
            import redis.asyncio as aioredis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise MissingExtraError("redis", "redis") from e
        self.local = LocalHostLimiter.from_policy(policy, clock=clock, sleep=sleep)
        self.findings: deque[Finding] = deque(maxlen=_FINDINGS_KEPT)
        self.fallbacks = 0
        self._policy = policy
        self._prefix = prefix
        self._clock = clock
        self._sleep = sleep
        self._timeout = policy.limits_redis_timeout
        self._client: Any = aioredis.Redis.from_url(
            url,
            socket_timeout=self._timeout,
            socket_connect_timeout=self._timeout,
            retry=Retry(NoBackoff(), 0),  # one try: a failure falls back, it does not wait
        )
        self._take = self._client.register_script(_TAKE)
        self._pause = self._client.register_script(_PAUSE)
        self._args = (
            policy.per_host_concurrency,
            policy.per_host_rate or 0,
            round((1.0 + policy.per_host_rate_margin) * 1e6),
            round((policy.url_timeout + 1.0) * 1e6),  # no request outlives url_timeout
        )
        self._fallback_until = -math.inf
        self._me = uuid.uuid4().hex[:12]
        self._serial = 0
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def falling_back(self) -> bool:
        """Whether the local limits stand in for Redis now."""
        return self._clock() < self._fallback_until

    def _keys(self, host: str) -> list[str]:
        return list(redis_keys(host, self._prefix))

    async def acquire(
        self, host: str, within: float = math.inf, *, honour_pause: bool = True
    ) -> Lease | None:
        local = self.local
        if self.falling_back:
            return await local.acquire(host, within, honour_pause=honour_pause)
        slot = await local._host_slot(host)
        try:
            granted = await self._admit(slot, within, honour_pause)
        except BaseException:
            local._give_back(slot)
            raise
        if granted is None:
            local._give_back(slot)
        return granted

    async def _admit(self, slot: _HostSlot, within: float, honour_pause: bool) -> Lease | None:
        local = self.local
        host = slot.host
        keys = self._keys(host)
        deadline = self._clock() + within
        poll = _POLL_MIN
        while True:
            if self.falling_back:
                return Lease(slot) if await local._admit(slot, within, honour_pause) else None
            now = self._clock()
            # this process's own 429s count at once (before Redis has heard of them)
            wait = local.pause_left(host) if honour_pause else 0.0
            why = _PAUSED
            if wait <= 0:
                self._serial += 1
                token = f"{self._me}:{self._serial}"
                await local._global.acquire()
                try:
                    got, wait_us, why = await self._call(
                        self._take, keys, [token, *self._args, int(honour_pause)]
                    )
                except _RedisDown:
                    local._global.release()
                    continue
                if got:
                    return Lease(slot, token)
                local._global.release()
                now = self._clock()
                wait = wait_us / 1e6
                if why == _PAUSED:
                    local.slow_down(host, wait)  # later requests here need not ask Redis
                elif why == _BUSY:
                    wait = min(wait, poll * (0.5 + random.random() / 2))
                    poll = min(poll * 2, _POLL_MAX)
            if why == _PAUSED and now + wait > deadline:
                return None
            await self._sleep(max(0.0, min(wait, deadline - now)))

    def release(self, lease: Lease) -> None:
        self.local.release(lease)
        if lease.token is not None and not self.falling_back:
            self._spawn(self._client.zrem(self._keys(lease.host)[0], lease.token))

    def slow_down(self, host: str, seconds: float) -> None:
        seconds = min(max(0.0, seconds), MAX_PAUSE)
        self.local.slow_down(host, seconds)
        if not self.falling_back:
            self._spawn(self._pause(keys=[self._keys(host)[2]], args=[round(seconds * 1e6)]))

    def pause_left(self, host: str) -> float:
        return self.local.pause_left(host)

    async def aclose(self) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self._timeout)
        for task in self._tasks:
            task.cancel()
        await self._client.aclose()

    # ---- Redis calls ----------------------------------------------------------------------

    async def _call(self, script: Any, keys: list[str], args: list[Any]) -> list[int]:
        from redis.exceptions import RedisError

        try:
            async with asyncio.timeout(self._timeout):
                reply = await script(keys=keys, args=args)
        except (RedisError, OSError, TimeoutError) as exc:
            self._fall_back(exc)
            raise _RedisDown from exc
        return [int(x) for x in reply]

    def _spawn(self, work: Awaitable[Any]) -> None:
        """Fire and forget (a release or a pause must not make the request wait), bounded by
        the Redis timeout; a lost release lapses with its lease."""

        async def run() -> None:
            from redis.exceptions import RedisError

            try:
                async with asyncio.timeout(self._timeout):
                    await work
            except (RedisError, OSError, TimeoutError) as exc:
                self._fall_back(exc)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _fall_back(self, exc: BaseException) -> None:
        if self.falling_back:
            return
        seconds = self._policy.limits_fallback_seconds
        self._fallback_until = self._clock() + seconds
        self.fallbacks += 1
        problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        message = (
            f"the shared per-host limits in Redis are unavailable ({problem}); this replica "
            f"uses its own limits for {seconds:g} s"
        )
        _LOG.warning("%s", message)
        self.findings.append(
            Finding(
                code=_FALLBACK_CODE,
                message=message,
                severity=Severity.WARNING,
                details={"error": problem, "fallback_seconds": seconds},
            )
        )


def make_limiter(
    policy: FetchPolicy,
    redis_url: str | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> LocalHostLimiter | RedisHostLimiter:
    """The limiter for ``policy``: shared through ``redis_url`` when given, else local."""
    if redis_url is None:
        return LocalHostLimiter.from_policy(policy, clock=clock, sleep=sleep)
    return RedisHostLimiter(redis_url, policy, clock=clock, sleep=sleep)

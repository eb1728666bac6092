"""Per-host limits (citeguard/web/limits.py): the local limiter on virtual time, the shared
limiter against a real ``redis-server`` (started here, on a free port), and several OS processes
each running a Fetcher against one loopback aiohttp server that logs when every request arrives.

The Redis tests are skipped only when the ``redis-server`` binary is absent *and* ``$CI`` is
unset; in CI a missing server is a failure (``.ci/run`` installs it).
"""

from __future__ import annotations

import asyncio
import heapq
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import redis.asyncio
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citeguard.policy import FetchPolicy
from citeguard.web.limits import LocalHostLimiter, RateWindow, RedisHostLimiter, redis_keys

_READY = b"Ready to accept connections"
ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def max_in_window(times: Sequence[float], window: float = 1.0) -> int:
    """The most of ``times`` inside any half-open window ``[t, t + window)``."""
    ts = sorted(times)
    best, j = 0, 0
    for i, t in enumerate(ts):
        j = max(j, i)
        while j < len(ts) and ts[j] < t + window:
            j += 1
        best = max(best, j - i)
    return best


class VirtualTime:
    """A clock and a sleep on virtual time: ``run`` lets the tasks go until all of them wait,
    then jumps to the earliest wake-up. Nothing really sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = 0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._seq += 1
        heapq.heappush(self._heap, (self.now + max(0.0, seconds), self._seq, fut))
        await fut

    async def run(self, coros: Sequence[Awaitable[None]]) -> None:
        tasks = [asyncio.ensure_future(c) for c in coros]
        while not all(t.done() for t in tasks):
            for _ in range(50):  # let every runnable task reach its next wait
                await asyncio.sleep(0)
            if all(t.done() for t in tasks):
                break
            assert self._heap, "deadlock: requests wait and nothing is due to wake them"
            self.now = max(self.now, self._heap[0][0])
            while self._heap and self._heap[0][0] <= self.now:
                heapq.heappop(self._heap)[2].set_result(None)
        for t in tasks:
            t.result()


@dataclass
class Trace:
    grants: list[float] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0


async def _request(
    lim: LocalHostLimiter, vt: VirtualTime, trace: Trace, arrive: float, hold: float
) -> None:
    await vt.sleep(arrive)
    trace.arrivals.append(vt.now)
    lease = await lim.acquire("h:80")
    assert lease is not None
    trace.grants.append(vt.now)
    trace.in_flight += 1
    trace.max_in_flight = max(trace.max_in_flight, trace.in_flight)
    await vt.sleep(hold)
    trace.in_flight -= 1
    lim.release(lease)


def _local(vt: VirtualTime, *, rate: int | None, host_limit: int = 100) -> LocalHostLimiter:
    return LocalHostLimiter(
        global_limit=1000, host_limit=host_limit, rate=rate, clock=vt.clock, sleep=vt.sleep
    )


# --------------------------------------------------------------------------------------------
# The local limiter, on virtual time
# --------------------------------------------------------------------------------------------


def test_max_in_window_counts_half_open_windows() -> None:
    assert max_in_window([0.0, 0.5, 0.999, 1.0, 1.5]) == 3
    assert max_in_window([0.0, 1.0, 2.0]) == 1
    assert max_in_window([]) == 0


async def test_a_burst_takes_the_whole_rate_then_waits_a_full_window() -> None:
    vt = VirtualTime()
    lim = _local(vt, rate=10)
    trace = Trace()
    await vt.run([_request(lim, vt, trace, 0.0, 0.01) for _ in range(35)])
    assert max_in_window(trace.grants) == 10
    # a token bucket with burst = rate would grant ~10 more within the first second
    assert sum(1 for g in trace.grants if g < 1.0) == 10
    # ... and the limiter wastes nothing: 35 requests at 10 per second end in the 4th second
    assert max(trace.grants) <= 3.0 + 1e-9


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rate=st.integers(1, 8),
    host_limit=st.integers(1, 6),
    requests=st.lists(
        st.tuples(st.floats(0, 4, allow_nan=False), st.floats(0.001, 0.8, allow_nan=False)),
        min_size=1,
        max_size=40,
    ),
)
def test_any_one_second_window_holds_the_rate(
    rate: int, host_limit: int, requests: list[tuple[float, float]]
) -> None:
    """Whatever the arrivals and request durations: no one-second window has more than
    ``rate`` grants, no more than ``host_limit`` run at once, and a request that waited could
    not have gone earlier (its host was full, or the second before it held ``rate`` grants)."""
    vt = VirtualTime()
    lim = _local(vt, rate=rate, host_limit=host_limit)
    trace = Trace()
    done: list[tuple[float, float, float]] = []  # (arrival, grant, end)

    async def one(arrive: float, hold: float) -> None:
        await vt.sleep(arrive)
        start = vt.now
        lease = await lim.acquire("h:80")
        assert lease is not None
        trace.grants.append(vt.now)
        granted = vt.now
        trace.in_flight += 1
        trace.max_in_flight = max(trace.max_in_flight, trace.in_flight)
        await vt.sleep(hold)
        trace.in_flight -= 1
        done.append((start, granted, vt.now))
        lim.release(lease)

    asyncio.run(vt.run([one(a, h) for a, h in requests]))
    assert max_in_window(trace.grants) <= rate
    assert trace.max_in_flight <= host_limit
    for arrive, grant, _end in done:
        if grant > arrive + 1e-9:
            # just before the grant: the host was full, or the window behind it was
            t = grant - 1e-6
            running = sum(1 for _a, g, e in done if g <= t < e)
            recent = sum(1 for g in trace.grants if t - 1.0 < g <= t)
            assert running >= host_limit or recent >= rate


async def test_no_rate_limit_means_only_concurrency() -> None:
    vt = VirtualTime()
    lim = _local(vt, rate=None, host_limit=4)
    trace = Trace()
    await vt.run([_request(lim, vt, trace, 0.0, 0.1) for _ in range(40)])
    assert trace.max_in_flight == 4
    assert max(trace.grants) == pytest.approx(0.9)  # 10 rounds of 4, nothing else waits


async def test_a_pause_holds_every_request_to_the_host_and_ends_early_when_too_long() -> None:
    vt = VirtualTime()
    lim = _local(vt, rate=None)
    lim.slow_down("h:80", 5.0)
    assert lim.pause_left("h:80") == pytest.approx(5.0)
    assert await lim.acquire("h:80", within=2.0) is None  # would pass its deadline: at once
    assert vt.now == 0.0
    other = await lim.acquire("other:80", within=1.0)  # another host is not paused
    assert other is not None
    lim.release(other)
    retry = await lim.acquire("h:80", within=1.0, honour_pause=False)  # waited its own wait
    assert retry is not None
    lim.release(retry)
    grants: list[float] = []

    async def patient() -> None:
        lease = await lim.acquire("h:80", within=10.0)
        assert lease is not None
        grants.append(vt.now)
        lim.release(lease)

    await vt.run([patient(), patient()])
    assert grants == [pytest.approx(5.0)] * 2
    assert lim.pause_left("h:80") == 0.0


def test_rate_window_grants_when_the_oldest_grant_leaves() -> None:
    w = RateWindow(2, 1.0)
    w.take(0.0)
    w.take(0.3)
    assert w.wait(0.5) == pytest.approx(0.5)
    assert w.wait(1.0) == 0.0
    w.take(1.0)
    assert w.wait(1.0) == pytest.approx(0.3)


async def test_cancelled_waiters_leave_no_state_behind() -> None:
    vt = VirtualTime()
    lim = _local(vt, rate=1, host_limit=1)
    first = await lim.acquire("h:80")
    assert first is not None
    waiter = asyncio.ensure_future(lim.acquire("h:80"))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    lim.release(first)
    assert lim._hosts == {}


# --------------------------------------------------------------------------------------------
# Redis
# --------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A private redis-server: no persistence, its own directory, killable by the test."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            if os.environ.get("CI"):
                pytest.fail("redis-server is not installed (CI: apt-get install -y redis-server)")
            pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            [
                *(binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""),
                *("--appendonly", "no", "--daemonize", "no", "--dir", str(workdir)),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        ready = threading.Event()
        log: list[bytes] = []

        def pump() -> None:  # read the log until the server says it is ready (no polling)
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                log.append(line)
                if _READY in line:
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(timeout=20) or self.proc.poll() is not None:
            self.kill()
            pytest.fail("redis-server did not start:\n" + b"".join(log).decode(errors="replace"))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    try:
        yield server
    finally:
        server.kill()


def _policy(**changes: Any) -> FetchPolicy:
    base: dict[str, Any] = {
        "allow_private_addresses": True,
        "connect_timeout": 2.0,
        "url_timeout": 15.0,
        "answer_deadline": 30.0,
        "retries": 2,
        "retry_backoff": 0.05,
        "retry_after_cap": 5.0,
        "soft_404_probe": False,
    }
    return FetchPolicy(**{**base, **changes})


async def test_two_replicas_share_a_hosts_concurrency(redis_server: RedisServer) -> None:
    policy = _policy(per_host_concurrency=2)
    host = f"{uuid.uuid4().hex}.test:80"
    a = RedisHostLimiter(redis_server.url, policy)
    b = RedisHostLimiter(redis_server.url, policy)
    try:
        held = [await a.acquire(host), await a.acquire(host)]
        assert all(x is not None and x.token for x in held)
        waiting = asyncio.ensure_future(b.acquire(host))
        done, _ = await asyncio.wait({waiting}, timeout=0.3)
        assert not done  # the host's two places are taken, in another replica
        lease = held.pop()
        assert lease is not None
        a.release(lease)
        got = await asyncio.wait_for(waiting, 5)
        assert got is not None and got.token
        b.release(got)
        assert a.fallbacks == b.fallbacks == 0
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_dead_replicas_leases_lapse(redis_server: RedisServer) -> None:
    policy = _policy(per_host_concurrency=1, url_timeout=0.5, answer_deadline=1.0)
    host = f"{uuid.uuid4().hex}.test:80"
    dead = RedisHostLimiter(redis_server.url, policy)
    assert await dead.acquire(host) is not None
    await dead.aclose()  # gone without releasing its lease
    alive = RedisHostLimiter(redis_server.url, policy)
    try:
        t0 = time.monotonic()
        lease = await asyncio.wait_for(alive.acquire(host), 10)
        waited = time.monotonic() - t0
        assert lease is not None
        # the lease lasts url_timeout + 1 s: no request outlives its url_timeout
        assert 1.0 < waited < 4.0
        alive.release(lease)
    finally:
        await alive.aclose()


async def test_a_pause_reaches_other_replicas(redis_server: RedisServer) -> None:
    policy = _policy()
    host = f"{uuid.uuid4().hex}.test:80"
    a = RedisHostLimiter(redis_server.url, policy)
    b = RedisHostLimiter(redis_server.url, policy)
    try:
        warm = await b.acquire(host)  # b connected and not paused yet
        assert warm is not None
        b.release(warm)
        a.slow_down(host, 30.0)
        await asyncio.wait(a._tasks, timeout=2)  # the pause is written in the background
        t0 = time.monotonic()
        assert await b.acquire(host, within=10.0) is None  # 30 s > 10 s: refused at once
        assert time.monotonic() - t0 < 1.0
        assert b.pause_left(host) > 25.0  # and remembered, so b need not ask Redis again
        retry = await b.acquire(host, within=10.0, honour_pause=False)
        assert retry is not None
        b.release(retry)
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_redis_that_never_answers_falls_back_within_its_timeout() -> None:
    """A socket that accepts and says nothing (a hung Redis): no hang, local limits, a finding."""
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(16)
    url = f"redis://127.0.0.1:{hole.getsockname()[1]}/0"
    policy = _policy(per_host_concurrency=1, limits_redis_timeout=0.2)
    lim = RedisHostLimiter(url, policy)
    try:
        t0 = time.monotonic()
        lease = await asyncio.wait_for(lim.acquire("x.test:80"), 5)
        assert lease is not None and lease.token is None  # a local lease
        assert time.monotonic() - t0 < 2.0
        assert lim.fallbacks == 1 and lim.falling_back
        assert [f.code for f in lim.findings] == ["host_limits_local_fallback"]
        assert "Redis" in lim.findings[0].message
        # the local limits hold meanwhile: the host's one place is taken
        second = asyncio.ensure_future(lim.acquire("x.test:80"))
        done, _ = await asyncio.wait({second}, timeout=0.2)
        assert not done
        lim.release(lease)
        got = await asyncio.wait_for(second, 2)
        assert got is not None
        lim.release(got)
        assert lim.fallbacks == 1  # one fallback, one finding, until it ends
    finally:
        await lim.aclose()
        hole.close()


# --------------------------------------------------------------------------------------------
# Several processes, one loopback host
# --------------------------------------------------------------------------------------------


@dataclass
class HostLog:
    """Arrival times (the server's monotonic clock) and concurrency, per host and path."""

    arrivals: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    in_flight: dict[str, int] = field(default_factory=dict)
    max_in_flight: dict[str, int] = field(default_factory=dict)
    limited: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)
    limited_at: float = math.nan

    def times(self, host: str, prefix: str = "") -> list[float]:
        return [t for t, p in self.arrivals.get(host, []) if p.startswith(prefix)]


@dataclass
class Server:
    port: int
    log: HostLog


@pytest_asyncio.fixture
async def server() -> AsyncIterator[Server]:
    log = HostLog()
    seen_first: set[str] = set()

    async def handle(request: web.Request) -> web.StreamResponse:
        host = (request.host or "").rsplit(":", 1)[0]
        log.arrivals.setdefault(host, []).append((time.monotonic(), request.path))
        async with log.arrived:
            log.arrived.notify_all()
        now = log.in_flight.get(host, 0) + 1
        log.in_flight[host] = now
        log.max_in_flight[host] = max(log.max_in_flight.get(host, 0), now)
        try:
            if request.path == "/limited" and host not in seen_first:
                seen_first.add(host)
                log.limited_at = time.monotonic()
                log.limited.set()
                return web.Response(status=429, headers={"Retry-After": "2"})
            await asyncio.sleep(0.1)  # the time the host takes to answer
            return web.Response(text="<p>ok</p>", content_type="text/html")
        finally:
            log.in_flight[host] -= 1

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    site = web.SockSite(runner, sock)
    await site.start()
    try:
        yield Server(sock.getsockname()[1], log)
    finally:
        await runner.cleanup()


class Worker:
    """One OS process with its own Fetcher (see ``_worker`` below): started, told to go, read."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(
        cls, server: Server, host: str, paths: list[str], policy: FetchPolicy, redis: str | None
    ) -> Worker:
        spec = {
            "port": server.port,
            "host": host,
            "paths": paths,
            "policy": policy.model_dump(mode="json"),
            "redis": redis,
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            json.dumps(spec),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])},
        )
        return cls(proc)

    async def ready(self) -> None:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        assert line.strip() == b"ready", line

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")

    async def result(self, within: float) -> dict[str, Any]:
        out, err = await asyncio.wait_for(self.proc.communicate(), within)
        assert self.proc.returncode == 0, err.decode(errors="replace")[-3000:]
        parsed: dict[str, Any] = json.loads(out.splitlines()[-1])
        return parsed

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()


@pytest_asyncio.fixture
async def workers() -> AsyncIterator[list[Worker]]:
    started: list[Worker] = []
    try:
        yield started
    finally:
        for w in started:
            w.kill()
        for w in started:
            await w.proc.wait()


async def _start(
    workers: list[Worker],
    server: Server,
    host: str,
    paths: list[str],
    policy: FetchPolicy,
    redis: str | None,
) -> Worker:
    w = await Worker.start(server, host, paths, policy, redis)
    workers.append(w)
    return w


async def test_shared_limits_hold_across_processes(
    redis_server: RedisServer, server: Server, workers: list[Worker]
) -> None:
    """Three processes share one host's budget through Redis: at most 3 requests at once and 20
    in any second, at the host. Three more with local limits only, beside them, show that the
    same load without sharing goes past both."""
    policy = _policy(per_host_concurrency=3, per_host_rate=20, per_host_rate_margin=0.25)
    shared, alone = f"s{uuid.uuid4().hex[:8]}.test", f"l{uuid.uuid4().hex[:8]}.test"
    group = [
        await _start(workers, server, h, [f"/p/{i}/{n}" for n in range(16)], policy, r)
        for i in range(3)
        for h, r in ((shared, redis_server.url), (alone, None))
    ]
    for w in group:
        await w.ready()
    for w in group:
        w.go()
    results = [await w.result(60) for w in group]
    assert all(set(r["statuses"].values()) == {"ok"} for r in results)
    assert all(r["fallbacks"] == 0 for r in results)
    log = server.log
    assert len(log.times(shared)) == len(log.times(alone)) == 48
    assert log.max_in_flight[shared] <= 3
    assert max_in_window(log.times(shared)) <= 20
    assert max_in_window(log.times(shared)) >= 10  # the budget is used, not serialised away
    # the control: each process alone keeps its own 3 and 20, so three of them pass both
    assert log.max_in_flight[alone] > 3
    assert max_in_window(log.times(alone)) > 20


async def test_a_429_seen_by_one_process_pauses_the_others(
    redis_server: RedisServer, server: Server, workers: list[Worker]
) -> None:
    policy = _policy()
    host = f"r{uuid.uuid4().hex[:8]}.test"
    first = await _start(workers, server, host, ["/limited"], policy, redis_server.url)
    others = [
        await _start(workers, server, host, [f"/p/{i}/0", f"/p/{i}/1"], policy, redis_server.url)
        for i in range(2)
    ]
    for w in [first, *others]:
        await w.ready()
    # the first process writes the host's pause once it has read the 429: the others go when
    # Redis has it (a keyspace notification)
    client = redis.asyncio.Redis.from_url(redis_server.url)
    await client.config_set("notify-keyspace-events", "K$")
    events = client.pubsub()
    await events.subscribe(f"__keyspace@0__:{redis_keys(f'{host}:80')[2]}")
    try:
        first.go()
        async with asyncio.timeout(30):
            async for message in events.listen():
                if message["type"] == "message":
                    break
    finally:
        await events.aclose()
        await client.aclose()
    assert server.log.limited.is_set()  # the host said 429, Retry-After: 2
    for w in others:
        w.go()
    results = [await w.result(60) for w in [first, *others]]
    assert all(set(r["statuses"].values()) == {"ok"} for r in results)
    later = server.log.times(host, "/p/")
    assert len(later) == 4
    # every other process waited out the pause (at the host's clock)
    assert min(later) >= server.log.limited_at + 1.9
    retried = server.log.times(host, "/limited")
    assert len(retried) == 2 and retried[1] >= server.log.limited_at + 1.9


async def test_killing_redis_mid_run_falls_back_and_finishes(
    redis_server: RedisServer, server: Server, workers: list[Worker]
) -> None:
    policy = _policy(
        per_host_concurrency=2,
        per_host_rate=10,
        per_host_rate_margin=0.25,
        limits_redis_timeout=0.5,
    )
    host = f"k{uuid.uuid4().hex[:8]}.test"
    group = [
        await _start(
            workers, server, host, [f"/p/{i}/{n}" for n in range(12)], policy, redis_server.url
        )
        for i in range(3)
    ]
    for w in group:
        await w.ready()
    for w in group:
        w.go()
    # kill Redis once the shared limit has let the first requests through
    log = server.log
    async with log.arrived:
        await asyncio.wait_for(log.arrived.wait_for(lambda: len(log.times(host)) >= 6), 30)
    killed_at = time.monotonic()
    redis_server.kill()
    results = [await w.result(30) for w in group]
    assert time.monotonic() - killed_at < 20  # bounded: nothing waited on a dead Redis
    assert all(set(r["statuses"].values()) == {"ok"} for r in results)
    assert all(r["fallbacks"] >= 1 for r in results)
    assert all(
        r["findings"] and set(r["findings"]) == {"host_limits_local_fallback"} for r in results
    )
    # after the fallback each process still keeps its own limits
    for i in range(3):
        mine = [t for t in server.log.times(host, f"/p/{i}/") if t > killed_at]
        assert max_in_window(mine) <= 10


# --------------------------------------------------------------------------------------------
# The worker process
# --------------------------------------------------------------------------------------------


def _worker(spec: dict[str, Any]) -> None:
    from citeguard.web.fetch import Fetcher, StaticResolver
    from citeguard.web.limits import RedisHostLimiter

    async def main() -> dict[str, Any]:
        policy = FetchPolicy.model_validate(spec["policy"])
        resolver = StaticResolver({spec["host"]: f"127.0.0.1:{spec['port']}"})
        urls = [f"http://{spec['host']}{p}" for p in spec["paths"]]
        async with Fetcher(policy, resolver=resolver, limits_redis=spec["redis"]) as f:
            print("ready", flush=True)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, sys.stdin.readline)
            results = await f.fetch_all(urls, want_body=False)
            lim = f.limiter
            shared = lim if isinstance(lim, RedisHostLimiter) else None
            return {
                "statuses": {u: r.status.value for u, r in results.items()},
                "reasons": {u: r.reason for u, r in results.items()},
                "fallbacks": shared.fallbacks if shared else 0,
                "findings": [x.code for x in shared.findings] if shared else [],
            }

    print(json.dumps(asyncio.run(main())), flush=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _worker(json.loads(sys.argv[1]))

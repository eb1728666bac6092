"""What the scenarios share: medians and percentiles, target rows, file descriptors and memory,
GC pauses, the event-loop lag probe, the guard policy of a scenario and one URL's fetch time."""

from __future__ import annotations

import asyncio
import gc
import math
import os
import resource
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import aiohttp

from benchmarks.context import Config, Context
from citeguard.policy import EntailmentPolicy, FetchPolicy, Policy
from citeguard.runtime import Runtime

Scenario = Callable[[Config, Context], Awaitable[dict[str, Any]]]


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def med(xs: Sequence[float]) -> float:
    """Median (NaN for no samples)."""
    return statistics.median(xs) if xs else math.nan


def pct(xs: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` in [0, 100] (NaN for no samples)."""
    if not xs:
        return math.nan
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def target(name: str, goal: str, value: float, met: bool) -> dict[str, Any]:
    """One row of a scenario's ``targets``."""
    return {"name": name, "target": goal, "value": value, "met": bool(met)}


def open_fds() -> int:
    """File descriptors this process holds (Linux: ``/proc/self/fd``)."""
    return len(os.listdir("/proc/self/fd"))


def _fd_target(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "(closed)"


def maxrss_mb() -> float:
    """The process's peak resident set so far, in MiB (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def settle(seconds: float = 0.2) -> None:
    """Collect garbage and let closing connections finish before the next contender."""
    gc.collect()
    await asyncio.sleep(seconds)


class GcPauses:
    """The garbage collector's pauses (ms) while the ``with`` block runs (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self.generations: list[int] = []  # each pause's generation (2: a full collection)
        self._started: list[float] = []

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started.append(time.perf_counter())
        elif self._started:
            self.pauses.append((time.perf_counter() - self._started.pop()) * 1000)
            self.generations.append(int(info.get("generation", -1)))

    @property
    def longest_generation(self) -> int:
        """The generation of the longest pause (-1: none)."""
        if not self.pauses:
            return -1
        return self.generations[self.pauses.index(max(self.pauses))]

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._on_gc)

    @property
    def max_ms(self) -> float:
        return round(max(self.pauses, default=0.0), 2)


@asynccontextmanager
async def tuned_runtime(on: bool) -> AsyncIterator[None]:
    """With ``on``: the process as ``citeguard serve --runtime tuned`` runs it while the block
    runs (``citeguard.runtime``: applied, its collector task running; checks in flight
    throughout, so ``busy()``), restored after; without: nothing changes."""
    if not on:
        yield
        return
    runtime = Runtime(busy=lambda: True)
    runtime.apply()
    collector = asyncio.create_task(runtime.collector())
    try:
        yield
    finally:
        collector.cancel()
        runtime.restore()


class LagProbe:
    """A ticker coroutine: wakes every ``tick`` seconds and records how late it woke.

    The lateness is the event-loop lag a request handler sharing the loop would see.
    """

    def __init__(self, tick: float = 0.001) -> None:
        self.tick = tick
        self.lags: list[float] = []
        # the loop thread's CPU seconds between consecutive wake-ups: the work the loop did at
        # a stretch, which neither a descheduled process nor another thread's GIL inflates
        self.cpu: list[float] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        c0 = time.thread_time()
        while not self._stop.is_set():
            t0 = time.perf_counter()
            await asyncio.sleep(self.tick)
            self.lags.append(max(0.0, time.perf_counter() - t0 - self.tick))
            c1 = time.thread_time()
            self.cpu.append(c1 - c0)
            c0 = c1

    async def __aenter__(self) -> LagProbe:
        self._task = asyncio.create_task(self._run())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    def summary(self) -> dict[str, float]:
        """p50 / p99 / max lag in ms and the number of ticks."""
        ms = [x * 1000 for x in self.lags]
        return {
            "p50_ms": round(pct(ms, 50), 3),
            "p99_ms": round(pct(ms, 99), 3),
            "max_ms": round(max(ms, default=math.nan), 3),
            "ticks": len(ms),
            "loop_cpu_max_ms": round(max(self.cpu, default=math.nan) * 1000, 3),
        }


def guard_policy(entailment: str, **fetch: Any) -> Policy:
    """Default policy, loopback allowed, entailment ``off`` or on (any backend)."""
    ent = (
        EntailmentPolicy(check_entailment=False)
        if entailment == "off"
        else EntailmentPolicy(backend="local")
    )
    return Policy(fetch=FetchPolicy(allow_private_addresses=True, **fetch), entailment=ent)


async def fetch_alone(url: str, limit_s: float = 30.0) -> float:
    """Seconds to GET ``url`` (following redirects, reading the body) with a fresh aiohttp
    session: the least a client can wait for that URL."""
    t0 = time.perf_counter()
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=limit_s)) as session,
        session.get(url) as resp,
    ):
        await resp.read()
    return time.perf_counter() - t0

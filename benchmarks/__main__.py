"""``python -m benchmarks``: run the latency benchmark suite and write its results.

    python -m benchmarks [--quick] [--only NAME[,NAME]] [--seed N] [--repeat N] [--out DIR]

Writes ``suite.json`` (every figure), ``SUMMARY.md`` (targets and one table per scenario) and
PNG plots to ``benchmarks/results/`` (``--quick``: ``benchmarks/results/quick/``). With
``--only``, the other scenarios' results are kept from the previous ``suite.json`` in that folder.
See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.context import Config, Context, Size
from benchmarks.report import summary_markdown, write_plots
from benchmarks.scenarios import SCENARIOS

RESULTS = Path(__file__).resolve().parent / "results"


def _clean(x: Any) -> Any:
    """JSON has no NaN: write null instead."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    return x


async def run_suite(cfg: Config, names: list[str], *, log: bool = True) -> dict[str, Any]:
    """Run the named scenarios in suite order; returns ``{"meta": ..., "scenarios": ...}``.
    ``log``: a progress line on stderr as each scenario starts and ends (``main`` logs only
    when stderr is a terminal)."""
    started = time.perf_counter()
    meta: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "seed": cfg.seed,
        "size": cfg.size,
        "repeat": cfg.repeat,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": len(os.sched_getaffinity(0)),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "scenario_seconds": {},
    }
    out: dict[str, Any] = {}
    ctx = Context(cfg.seed)
    todo = [name for name in SCENARIOS if name in names]
    try:
        for i, name in enumerate(todo, start=1):
            if log:
                print(f"[benchmarks {i}/{len(todo)}] {name} …", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            res = await SCENARIOS[name](cfg, ctx)
            res["run_at"] = datetime.now(UTC).isoformat(timespec="seconds")
            meta["scenario_seconds"][name] = round(time.perf_counter() - t0, 1)
            out[name] = res
            if log:
                print(
                    f"[benchmarks {i}/{len(todo)}] {name} done in "
                    f"{meta['scenario_seconds'][name]} s "
                    f"({time.perf_counter() - started:.0f} s so far)",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        await ctx.aclose()
    meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    meta["elapsed_s"] = round(time.perf_counter() - started, 1)
    return {"meta": meta, "scenarios": out}


def write_results(results: dict[str, Any], out: Path) -> list[Path]:
    """Write ``suite.json``, ``SUMMARY.md`` and the plots into ``out``; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    clean = _clean(results)
    (out / "suite.json").write_text(json.dumps(clean, indent=2, ensure_ascii=False) + "\n")
    (out / "SUMMARY.md").write_text(summary_markdown(clean), encoding="utf-8")
    plots = write_plots(clean, out)
    return [out / "suite.json", out / "SUMMARY.md", *(out / p for p in plots)]


def main(argv: list[str] | None = None) -> int:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repetitions")
    parser.add_argument("--only", default="", help="comma-separated: " + ",".join(SCENARIOS))
    parser.add_argument("--seed", type=int, default=0, help="seed for the web and the answers")
    parser.add_argument("--repeat", type=int, default=None, help="repetitions for every scenario")
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    parser.add_argument("--nli-model", default=None, help="a local NLI cross-encoder to measure")
    parser.add_argument("--size", choices=("full", "quick", "smoke"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; choose from {list(SCENARIOS)}")
    size: Size = args.size or ("quick" if args.quick else "full")
    cfg = Config(seed=args.seed, size=size, repeat=args.repeat, nli_model=args.nli_model)
    out: Path = args.out or (RESULTS if size == "full" else RESULTS / size)
    results = asyncio.run(run_suite(cfg, names, log=sys.stderr.isatty()))
    previous = out / "suite.json"
    if set(names) != set(SCENARIOS) and previous.is_file():
        # --only: keep the other scenarios' last results so the summary stays whole
        old = json.loads(previous.read_text())
        merged = {
            k: v for k, v in old.get("scenarios", {}).items() if k not in results["scenarios"]
        }
        merged.update(results["scenarios"])
        results["scenarios"] = {k: merged[k] for k in SCENARIOS if k in merged}
        results["meta"]["merged_from_previous"] = sorted(set(merged) - set(names))
    for path in write_results(results, out):
        print(path)
    print((out / "SUMMARY.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark claim entailment on AttributionBench's human labels.

    python benchmarks/bench_entail.py [--quick] [--nli-model PATH] [--tune]

For each backend available offline — the word-overlap baseline, LocalEntailer, and NLIEntailer
when ``--nli-model`` is given — reports accuracy and macro-F1 (supported vs. not supported;
``contradicted`` and ``unsupported`` both count as "not supported") overall, per subset
(Stanford-GenSearch, ExpertQA, LFQA) and per half: LocalEntailer's weights and the baseline's
threshold were tuned on the rows whose sha1(id) is even (``tune``), so the odd half (``held_out``)
is the honest figure. Also reports throughput (pairs/second scoring 32 pairs at batch 32) and the
event-loop lag while 32 pairs are scored: the delays of ``asyncio.sleep(0.001)`` wake-ups (p50,
p99, max, count over 10 ms), next to two baselines measured in the same run — the same ticker on
an idle loop, and beside a thread that loads the CPUs without holding the GIL (torch matrix
products). On a shared machine the host's scheduler alone produces multi-millisecond spikes; the
baselines show how much of the lag is the host's rather than the GIL's.

``--tune`` refits LocalWeights and the word-overlap threshold on the tune half and prints them
(paste them into citeguard/checks/entail/local.py); the scores reported are then those of the refit.
``--quick`` uses a fixed 160-row sample and finishes in well under a minute.

Data: /work/shared/data/claims/attributionbench_dev.jsonl (see that folder's README for sources
and licences). Results: benchmarks/results/bench_entail[_quick].json.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib
import json
import math
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from citeguard.checks.entail import (  # noqa: E402
    WORD_OVERLAP_THRESHOLD,
    Entailer,
    LocalEntailer,
    LocalWeights,
    NLIEntailer,
    WordOverlapEntailer,
)
from citeguard.models import EntailmentScore  # noqa: E402
from citeguard.policy import EntailmentPolicy  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "claims" / "attributionbench_dev.jsonl"
RESULTS = ROOT / "benchmarks" / "results"
SUBSETS = ("Stanford-GenSearch", "ExpertQA", "LFQA")
QUICK_ROWS = 160
FEATURES = [f.name for f in fields(LocalWeights) if f.name != "bias"]


def load_rows(quick: bool) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]
    for r in rows:
        r["tune"] = int(hashlib.sha1(r["id"].encode()).hexdigest(), 16) % 2 == 0
        r["y"] = int(r["label"] == "supported")
    # The file is ordered by sha1(id), which interleaves subsets and labels: a prefix is a fair
    # sample.
    return rows[:QUICK_ROWS] if quick else rows


# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------


def macro_f1(y: Sequence[int], p: Sequence[int]) -> float:
    scores = []
    for cls in (0, 1):
        tp = sum(1 for a, b in zip(y, p, strict=True) if a == cls and b == cls)
        fp = sum(1 for a, b in zip(y, p, strict=True) if a != cls and b == cls)
        fn = sum(1 for a, b in zip(y, p, strict=True) if a == cls and b != cls)
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(scores) / 2


def metrics(rows: Sequence[dict[str, Any]], preds: Sequence[int]) -> dict[str, Any]:
    def block(idx: list[int]) -> dict[str, Any]:
        y = [rows[i]["y"] for i in idx]
        p = [preds[i] for i in idx]
        if not idx:
            return {"n": 0}
        said = sum(p)
        right = sum(1 for a, b in zip(y, p, strict=True) if a == b == 1)
        return {
            "n": len(idx),
            "accuracy": round(sum(a == b for a, b in zip(y, p, strict=True)) / len(idx), 4),
            "macro_f1": round(macro_f1(y, p), 4),
            "supported_precision": round(right / said, 4) if said else None,
            "supported_rate": round(said / len(idx), 4),
        }

    everything = list(range(len(rows)))
    out = {"overall": block(everything)}
    for s in SUBSETS:
        out[s] = block([i for i in everything if rows[i]["subset"] == s])
    out["tune_half"] = block([i for i in everything if rows[i]["tune"]])
    out["held_out_half"] = block([i for i in everything if not rows[i]["tune"]])
    return out


# ---------------------------------------------------------------------------------------------
# Tuning (plain numpy logistic regression; no extra dependency)
# ---------------------------------------------------------------------------------------------


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0) -> np.ndarray:
    """Newton-Raphson logistic regression with an L2 penalty (not on the bias)."""
    xb = np.c_[np.ones(len(x)), x]
    w = np.zeros(xb.shape[1])
    penalty = np.eye(xb.shape[1]) * l2
    penalty[0, 0] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-(xb @ w)))
        grad = xb.T @ (p - y) + penalty @ w
        hess = xb.T @ (xb * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def best_threshold(y: Sequence[int], scores: Sequence[float]) -> tuple[float, float]:
    """The cut-off with the best macro-F1 (ties go to the higher, more cautious cut-off)."""
    best = (-1.0, 0.5)
    for t in np.arange(0.05, 0.951, 0.01):
        f = macro_f1(y, [int(s >= t) for s in scores])
        if f >= best[0] - 1e-12:
            best = (f, float(t))
    return best[1], best[0]


def tune_local(
    rows: Sequence[dict[str, Any]], feats: Sequence[list[dict[str, float]]]
) -> LocalWeights:
    """Fit LocalWeights on the tune half; the best window is reselected under each fit."""
    idx = [i for i, r in enumerate(rows) if r["tune"] and feats[i]]
    y = np.array([rows[i]["y"] for i in idx], dtype=float)
    start = dict.fromkeys(FEATURES, 0.0)
    start["coverage"] = 1.0  # first pass: pick windows by lexical coverage alone
    weights = LocalWeights(bias=0.0, **start)
    for _ in range(4):
        chosen = [max(feats[i], key=weights.probability) for i in idx]
        x = np.array([[f[k] for k in FEATURES] for f in chosen])
        w = fit_logistic(x, y)
        weights = LocalWeights(
            bias=float(w[0]), **dict(zip(FEATURES, map(float, w[1:]), strict=True))
        )
    scores = [max(weights.probability(f) for f in feats[i]) for i in idx]
    t, _ = best_threshold([rows[i]["y"] for i in idx], scores)
    # Shift the bias so that the macro-F1-best cut-off sits at P = 0.5.
    bias = weights.bias - math.log(t / (1 - t))
    rounded = {k: round(v, 3) for k, v in asdict(weights).items()}
    rounded["bias"] = round(bias, 3)
    return LocalWeights(**rounded)


def tune_overlap(rows: Sequence[dict[str, Any]], scores: Sequence[EntailmentScore]) -> float:
    idx = [i for i, r in enumerate(rows) if r["tune"]]
    t, _ = best_threshold([rows[i]["y"] for i in idx], [scores[i].score for i in idx])
    return round(t, 2)


# ---------------------------------------------------------------------------------------------
# Speed
# ---------------------------------------------------------------------------------------------


async def ticker(stop: asyncio.Event, lags: list[float]) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append((time.perf_counter() - t0 - 0.001) * 1000)


async def lags_while(coro: Any) -> tuple[Any, list[float]]:
    """Run ``coro`` with a 1 ms ticker beside it: its result and every wake-up delay (ms)."""
    stop = asyncio.Event()
    lags: list[float] = []
    tick = asyncio.create_task(ticker(stop, lags))
    await asyncio.sleep(0)  # let the ticker start before the work does
    try:
        result = await coro
    finally:
        stop.set()
        await tick
    return result, lags


def lag_stats(lags: Sequence[float]) -> dict[str, Any]:
    a = np.asarray(lags) if lags else np.zeros(1)
    over = int((a > 10).sum())
    return {
        "ticks": len(lags),
        "p50_ms": round(float(np.median(a)), 2),
        "p99_ms": round(float(np.percentile(a, 99)), 2),
        "max_ms": round(float(a.max()), 2),
        "over_10ms": over,
        # per 10,000 ticks, so runs of different length compare
        "over_10ms_per_10k": round(over * 10_000 / max(1, len(lags)), 2),
    }


def _burn(seconds: float, threads: int) -> None:
    """GIL-free CPU load: torch matrix products, which release the GIL while they run."""
    import torch

    torch.set_num_threads(threads)
    x = torch.randn(384, 384)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        x @ x


async def lag_baselines(seconds: float) -> dict[str, Any]:
    """The ticker on an idle loop, and beside a worker thread that loads the CPUs without the GIL.

    On a shared machine the scheduler alone delays wake-ups; these say how much of the lag
    measured while scoring is the host's, not the GIL's.
    """
    from citeguard.checks.minilm import default_threads

    # Import torch here, before the ticker starts: an import holds the GIL throughout.
    importlib.import_module("torch")
    _, idle = await lags_while(asyncio.sleep(seconds))
    _, busy = await lags_while(asyncio.to_thread(_burn, seconds, default_threads()))
    return {"idle": lag_stats(idle), "gil_free_cpu_load": lag_stats(busy)}


async def speed(
    entailer: Entailer, sets: dict[str, list[tuple[str, str]]], repeats: int
) -> dict[str, Any]:
    """A cold call (includes the lazy model load), then ``repeats`` warm calls per pair set.

    Reported per set: pairs/second from the median time, and the event-loop lag — wake-up delays
    of a 1 ms ticker over all warm calls (p50, p99, max, and how many exceeded 10 ms).
    """
    first = next(iter(sets.values()))
    t0 = time.perf_counter()
    _, cold = await lags_while(entailer.score(first))
    out: dict[str, Any] = {
        "cold_seconds": round(time.perf_counter() - t0, 3),
        "cold_loop_lag": lag_stats(cold),
    }
    for name, pairs in sets.items():
        times: list[float] = []
        lags: list[float] = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            _, these = await lags_while(entailer.score(pairs))
            times.append(time.perf_counter() - t0)
            lags.extend(these)
        out[name] = {
            "pairs": len(pairs),
            "evidence_chars": sum(len(e) for _, e in pairs),
            "warm_seconds_median": round(statistics.median(times), 4),
            "pairs_per_second": round(len(pairs) / statistics.median(times), 1),
            "loop_lag": lag_stats(lags),
        }
    return out


def contradicted_check(rows: Sequence[dict[str, Any]], labels: Sequence[str]) -> str:
    """How many "contradicted" verdicts the human labels call not supported ("k of n")."""
    said = [r for r, lab in zip(rows, labels, strict=True) if lab == "contradicted"]
    return f"{sum(1 for r in said if not r['y'])} of {len(said)}"


def sweep(rows: Sequence[dict[str, Any]], scores: Sequence[EntailmentScore]) -> dict[str, Any]:
    """Precision/recall of "supported" and macro-F1 if support_threshold were set elsewhere."""
    out = {}
    y = [r["y"] for r in rows]
    for t in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
        # A contradiction, or a claim number missing from the evidence, blocks "supported" at
        # any cut-off (LocalEntailer says so in the reason).
        p = [
            int(
                s.score >= t
                and s.label != "contradicted"
                and "numbers not in evidence" not in s.reason
            )
            for s in scores
        ]
        said, right = sum(p), sum(a & b for a, b in zip(y, p, strict=True))
        out[f"{t:.1f}"] = {
            "supported_precision": round(right / said, 4) if said else None,
            "supported_recall": round(right / sum(y), 4),
            "macro_f1": round(macro_f1(y, p), 4),
        }
    return out


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rows = load_rows(args.quick)
    pairs = [(r["claim"], r["evidence"]) for r in rows]
    # Throughput sets of 32 pairs, in file order: "mixed" as the data comes (7 of them are whole
    # web pages of 4-22 kB), and "short" with evidence of at most one window.
    everything = load_rows(False)
    speed_sets = {
        "mixed": [(r["claim"], r["evidence"]) for r in everything[:32]],
        "short": [(r["claim"], r["evidence"]) for r in everything if len(r["evidence"]) <= 1200][
            :32
        ],
    }
    if args.quick:
        del speed_sets["mixed"]
    policy = EntailmentPolicy(batch_size=32)
    repeats = 3 if args.quick else 5
    out: dict[str, Any] = {
        "data": str(DATA.relative_to(ROOT.parent)),
        "rows": len(rows),
        "quick": args.quick,
        "machine": {"python": platform.python_version(), "cpus": _cpus()},
        "policy": {"window_chars": policy.window_chars, "max_windows": policy.max_windows},
        "loop_lag_baselines": await lag_baselines(2.0 if args.quick else 15.0),
        "backends": {},
    }

    overlap = WordOverlapEntailer(policy=policy)
    t0 = time.perf_counter()
    overlap_scores = await overlap.score(pairs)
    threshold = WORD_OVERLAP_THRESHOLD
    if args.tune:
        threshold = tune_overlap(rows, overlap_scores)
        print(f"WORD_OVERLAP_THRESHOLD = {threshold}")
        overlap = WordOverlapEntailer(policy=policy, threshold=threshold)
        overlap_scores = await overlap.score(pairs)
    out["backends"]["word_overlap"] = {
        "threshold": threshold,
        "seconds": round(time.perf_counter() - t0, 2),
        **metrics(rows, [int(s.label == "supported") for s in overlap_scores]),
        "speed": await speed(overlap, speed_sets, repeats),
    }

    local = LocalEntailer(policy=policy)
    try:
        speed_local = await speed(local, speed_sets, repeats)
        t0 = time.perf_counter()
        if args.tune:
            feats = await local.features(pairs)
            weights = tune_local(rows, feats)
            print(f"LocalWeights = {weights}")
            await local.aclose()
            local = LocalEntailer(policy=policy, weights=weights)
        local_scores = await local.score(pairs)
        labels = [s.label for s in local_scores]
        out["backends"]["local"] = {
            "weights": asdict(local.weights),
            "seconds": round(time.perf_counter() - t0, 2),
            **metrics(rows, [int(lab == "supported") for lab in labels]),
            "labels": {lab: labels.count(lab) for lab in sorted(set(labels))},
            "contradicted_gold_not_supported": contradicted_check(rows, labels),
            "threshold_sweep": sweep(rows, local_scores),
            "speed": speed_local,
        }
    finally:
        await local.aclose()

    if args.nli_model:
        nli = NLIEntailer(args.nli_model, policy=policy)
        try:
            speed_nli = await speed(nli, speed_sets, repeats)
            t0 = time.perf_counter()
            nli_scores = await nli.score(pairs)
            labels = [s.label for s in nli_scores]
            out["backends"]["nli"] = {
                "model": args.nli_model,
                "seconds": round(time.perf_counter() - t0, 2),
                **metrics(rows, [int(lab == "supported") for lab in labels]),
                "labels": {lab: labels.count(lab) for lab in sorted(set(labels))},
                "contradicted_gold_not_supported": contradicted_check(rows, labels),
                "threshold_sweep": sweep(rows, nli_scores),
                "speed": speed_nli,
            }
        finally:
            await nli.aclose()

    base = out["backends"]["word_overlap"]
    loc = out["backends"]["local"]
    sets = [v for k, v in loc["speed"].items() if k in speed_sets]
    p99 = max(v["loop_lag"]["p99_ms"] for v in sets)
    worst = max(v["loop_lag"]["max_ms"] for v in sets)
    out["targets"] = {
        "local_macro_f1_minus_baseline": round(
            loc["overall"]["macro_f1"] - base["overall"]["macro_f1"], 4
        ),
        "local_beats_baseline": loc["overall"]["macro_f1"] > base["overall"]["macro_f1"],
        "local_held_out_beats_baseline_held_out": loc["held_out_half"]["macro_f1"]
        > base["held_out_half"]["macro_f1"],
        "local_loop_lag_p99_ms": p99,
        "local_loop_lag_max_ms": worst,
        "baseline_gil_free_load_max_ms": out["loop_lag_baselines"]["gil_free_cpu_load"]["max_ms"],
        "local_over_10ms_per_10k_ticks": max(v["loop_lag"]["over_10ms_per_10k"] for v in sets),
        "baseline_gil_free_over_10ms_per_10k_ticks": out["loop_lag_baselines"]["gil_free_cpu_load"][
            "over_10ms_per_10k"
        ],
        "loop_lag_p99_under_10ms": p99 < 10.0,
        "loop_lag_max_under_10ms": worst < 10.0,
    }
    return out


def _cpus() -> int | None:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def summary(result: dict[str, Any]) -> str:
    base = result["loop_lag_baselines"]
    lines = [
        f"rows={result['rows']}; loop lag baselines: idle {_lag(base['idle'])}; "
        f"GIL-free CPU load {_lag(base['gil_free_cpu_load'])}"
    ]
    for name, b in result["backends"].items():
        subsets = " ".join(f"{s}={b[s]['macro_f1']}" for s in SUBSETS if b[s].get("n"))
        lines.append(
            f"{name:13s} macro-F1 {b['overall']['macro_f1']:.4f} acc {b['overall']['accuracy']:.4f}"
            f" | held-out {b['held_out_half']['macro_f1']:.4f}"
            f" tune {b['tune_half']['macro_f1']:.4f} | {subsets}"
        )
        sp = b["speed"]
        for set_name, v in sp.items():
            if isinstance(v, dict) and "pairs" in v:
                lines.append(
                    f"{'':13s} {set_name:5s}: {v['pairs_per_second']} pairs/s, "
                    f"loop lag {_lag(v['loop_lag'])}"
                )
        lines.append(
            f"{'':13s} cold call {sp['cold_seconds']} s, loop lag {_lag(sp['cold_loop_lag'])}"
        )
    lines.append(f"targets: {result['targets']}")
    return "\n".join(lines)


def _lag(s: dict[str, Any]) -> str:
    return (
        f"p50 {s['p50_ms']} / p99 {s['p99_ms']} / max {s['max_ms']} ms ({s['over_10ms']} > 10 ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"first {QUICK_ROWS} rows only")
    parser.add_argument("--nli-model", help="a local MNLI-style cross-encoder directory")
    parser.add_argument("--tune", action="store_true", help="refit on the tune half and print")
    parser.add_argument("--out", type=Path, help="result file (default benchmarks/results/...)")
    args = parser.parse_args()
    if not DATA.is_file():
        sys.exit(f"data not found: {DATA}")
    result = asyncio.run(run(args))
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = args.out or RESULTS / ("bench_entail_quick.json" if args.quick else "bench_entail.json")
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(summary(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

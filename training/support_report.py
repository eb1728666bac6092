"""Scoring the shipped claim-support model (``python -m training support --evaluate`` and the
report's ``compare`` and ``speed``): held-out comparison with the other backends, reliability
plot, throughput."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from citeguard.checks.support import (
    TORCH_ENCODER,
    SupportModel,
    SupportScorer,
)
from training.support_data import AB_SUBSETS, RESULTS, load_rows
from training.support_features import make_encoder
from training.support_fit import block, ece


def evaluate_shipped(args: argparse.Namespace) -> None:
    """Held-out comparison, reliability plot and speed of the LocalEntailer as shipped.

    Adds ``compare``, ``local_entailer``, ``speed_local_entailer`` to train_support.json and
    keeps the rest (the fit's own figures).
    """
    from citeguard.checks.entail import LocalEntailer

    rows = load_rows()
    held = [r for r in rows if r["part"] == "held_out"]
    encoder = LocalEntailer().encoder_name
    path = RESULTS / (
        "train_support.json" if encoder == TORCH_ENCODER else f"train_support_{encoder}.json"
    )
    report = json.loads(path.read_text()) if path.is_file() else {}
    report["compare"] = asyncio.run(compare_ce(held))
    report["local_entailer_encoder"] = encoder

    async def probs() -> list[Any]:
        ent = LocalEntailer(threads=2)
        scores = await ent.score([(r["claim"], r["evidence"]) for r in held])
        await ent.aclose()
        return scores

    scores = asyncio.run(probs())
    y = np.array([r["y"] for r in held])
    prob = np.array([s.score for s in scores])
    said = np.array([s.label == "supported" for s in scores]).astype(float)
    t = LocalEntailer().policy.support_threshold
    local: dict[str, Any] = {"threshold": t, "score": {"overall": block(y, prob, t)}}
    local["labels"] = {"overall": block(y, said, 0.5)}
    for s_ in AB_SUBSETS:
        m = np.array([r["subset"] == s_ for r in held])
        local["score"][s_] = block(y[m], prob[m], t)
        local["labels"][s_] = block(y[m], said[m], 0.5)
    local["label_counts"] = {
        lab: sum(s.label == lab for s in scores)
        for lab in ("supported", "unsupported", "contradicted")
    }
    report["local_entailer"] = local
    reliability_plot(y, prob, RESULTS / "support_reliability.png")
    report["reliability_png"] = "training/results/support_reliability.png"
    if not args.no_speed:
        report["speed_local_entailer_2_threads"] = speed_ce(rows)
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in report if k not in ("cv", "coefficients")}, indent=1))


def reliability_plot(y: np.ndarray, prob: np.ndarray, path: Path, bins: int = 10) -> None:
    """Observed supported share against mean predicted P(supported), per probability bin."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    edges = np.linspace(0, 1, bins + 1)
    xs, ys, ns = [], [], []
    for lo, hi in itertools.pairwise(edges):
        m = (prob >= lo) & ((prob < hi) if hi < 1 else (prob <= hi))
        if m.any():
            xs.append(prob[m].mean())
            ys.append(y[m].mean())
            ns.append(int(m.sum()))
    fig, (a, b) = plt.subplots(2, 1, figsize=(5, 6), gridspec_kw={"height_ratios": [3, 1]})
    a.plot([0, 1], [0, 1], "--", color="grey", label="perfect calibration")
    a.plot(xs, ys, "o-", label=f"LocalEntailer (ECE {ece(y, prob):.3f})")
    for x_, y_, n_ in zip(xs, ys, ns, strict=True):
        a.annotate(str(n_), (x_, y_), textcoords="offset points", xytext=(4, -10), fontsize=7)
    a.set_xlabel("predicted P(supported)")
    a.set_ylabel("observed share supported")
    a.set_title(f"AttributionBench dev, held-out half (n={len(y)})")
    a.legend(loc="upper left")
    b.hist(prob, bins=edges, color="tab:blue", alpha=0.7)
    b.set_xlabel("predicted P(supported)")
    b.set_ylabel("pairs")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


async def compare_ce(held: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Word overlap, the earlier bi-encoder LocalEntailer and the new one, on the same rows."""
    from citeguard.checks.entail import LocalEntailer, LocalWeights, WordOverlapEntailer
    from citeguard.policy import EntailmentPolicy

    pairs = [(r["claim"], r["evidence"]) for r in held]
    y = np.array([r["y"] for r in held])
    out: dict[str, Any] = {}
    backends = (
        ("word_overlap", WordOverlapEntailer()),
        # The earlier default: bi-encoder weights at its own cut-off, 0.5.
        (
            "local_biencoder_old",
            LocalEntailer(
                weights=LocalWeights(), policy=EntailmentPolicy(support_threshold=0.5), threads=2
            ),
        ),
        (
            "local_support_torch_fp32",
            LocalEntailer(policy=EntailmentPolicy(encoder="torch"), threads=2),
        ),
        ("local_support_int8", LocalEntailer(threads=2)),  # the shipped default
    )
    for name, ent in backends:
        t0 = time.perf_counter()
        scores = await ent.score(pairs)
        dt = time.perf_counter() - t0
        said = np.array([s.label == "supported" for s in scores]).astype(float)
        prob = np.array([s.score for s in scores])
        res: dict[str, Any] = {"labels": {"overall": block(y, said, 0.5)}}
        for s in AB_SUBSETS:
            m = np.array([r["subset"] == s for r in held])
            res["labels"][s] = block(y[m], said[m], 0.5)
        res["score_ece"] = round(ece(y, prob), 4)
        res["pairs_per_s"] = round(len(pairs) / dt, 1)
        out[name] = res
        print(name, json.dumps(res), flush=True)
        await ent.aclose()
    return out


def speed_ce(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """LocalEntailer pairs/s on 2 threads, as :func:`speed` measures (median of 3)."""
    from citeguard.checks.entail import LocalEntailer

    ab = [r for r in rows if r["source_name"] == "AB"]
    sets = {
        "mixed": [(r["claim"], r["evidence"]) for r in ab[:32]],
        "short": [(r["claim"], r["evidence"]) for r in ab if len(r["evidence"]) <= 1200][:32],
        "mixed_256": [(r["claim"], r["evidence"]) for r in ab[:256]],
    }

    async def run() -> dict[str, Any]:
        ent = LocalEntailer(threads=2)
        await ent.score(sets["short"][:4])
        out = {}
        for name, pairs in sets.items():
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                await ent.score(pairs)
                times.append(time.perf_counter() - t0)
            out[name] = round(len(pairs) / float(np.median(times)), 1)
        await ent.aclose()
        return out

    return asyncio.run(run())


async def compare(held: Sequence[dict[str, Any]]) -> dict[str, Any]:
    from citeguard.checks.entail import LocalEntailer, WordOverlapEntailer

    pairs = [(r["claim"], r["evidence"]) for r in held]
    y = np.array([r["y"] for r in held])
    out: dict[str, Any] = {}
    for name, ent in (("word_overlap", WordOverlapEntailer()), ("local", LocalEntailer(threads=2))):
        scores = await ent.score(pairs)
        p = np.array([s.label == "supported" for s in scores]).astype(float)
        res = {"overall": block(y, p, 0.5)}
        for s in AB_SUBSETS:
            m = np.array([r["subset"] == s for r in held])
            res[s] = block(y[m], p[m], 0.5)
        out[name] = res
        await ent.aclose()
    return out


def speed(
    rows: Sequence[dict[str, Any]], artifact: SupportModel, encoder_name: str = TORCH_ENCODER
) -> dict[str, Any]:
    """Pairs/s on 32-pair batches as bench_entail ("mixed": file order; "short": ≤ 1200 chars),
    every text embedded each time (the scorer's embedding cache off)."""
    ab = [r for r in rows if r["source_name"] == "AB"]
    sets = {
        "mixed": [(r["claim"], r["evidence"]) for r in ab[:32]],
        "short": [(r["claim"], r["evidence"]) for r in ab if len(r["evidence"]) <= 1200][:32],
        "mixed_256": [(r["claim"], r["evidence"]) for r in ab[:256]],
    }
    scorer = SupportScorer(encoder=make_encoder(encoder_name), model=artifact, cache_bytes=0)
    scorer.score(sets["short"][:4])  # load the model
    out = {}
    for name, pairs in sets.items():
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            scorer.score(pairs)
            times.append(time.perf_counter() - t0)
        out[name] = round(len(pairs) / float(np.median(times)), 1)
    return out

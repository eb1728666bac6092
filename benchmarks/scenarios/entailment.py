"""Scenario ``entail``: pairs per second per offline backend and the loop's lag (bench_entail)."""

from __future__ import annotations

import math
from typing import Any

from benchmarks.context import Config, Context
from benchmarks.scenarios.common import target
from citeguard.policy import EntailmentPolicy

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

"""Fit the claim-support model behind citeguard.checks.support and write its artifact.

    python -m training support [--k-units 2] [--compare] [--no-write]

Data (read-only, never copied): ../shared/data/claims/ — the four *_train.jsonl pools and
attributionbench_dev.jsonl (AB). AB is split as benchmarks/bench_entail.py does: rows whose
sha1(id) is even are the **tune** half, the odd rows the **held-out** half, which is scored only
at the end (the split is by row, so the halves share questions; the report also gives the
held-out rows whose question is not in the tune half). ExpertQA-pool rows whose question occurs
in the held-out half are dropped.

Steps: features for every pair (embeddings cached under /tmp/support_cache); 5-fold
group-aware cross-validation over the training rows (groups: the files' ``group`` field, AB
rows by question); gradient-boosted trees (``--model gbm``, the default and shipped; ``--model
lr``: the logistic regression they replaced; the LoRA cross-encoder tried and not shipped is
``python -m research.train_support_ce``); Platt calibration fitted on
the out-of-fold logits of the AB tune rows; the threshold that maximises macro-F1 on those
calibrated out-of-fold probabilities; a final fit on all training rows. Writes
citeguard/checks/support_model.json and training/results/train_support.json.

The steps live in modules by what they do: support_data.py (rows, split, changed-number
negatives), support_features.py (encoder, features), support_fit.py (metrics, weights, models,
export, out-of-fold logits, Platt, threshold), support_report.py (--evaluate, compare, speed);
this module is the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from citeguard.checks.support import (  # noqa: E402
    ARTIFACTS,
    FEATURE_NAMES,
    TORCH_ENCODER,
    SupportModel,
)
from training.support_data import (  # noqa: E402
    AB_SUBSETS,
    CACHE,
    K_MAX,
    RESULTS,
    SEED,
    _sha,
    augment_numbers,
    load_rows,
)
from training.support_features import compute_features  # noqa: E402
from training.support_fit import (  # noqa: E402
    FALLING,
    GBM_PARAMS,
    MONOTONIC,
    RISING,
    artifact_json,
    best_threshold,
    block,
    evaluate_cv,
    export_trees,
    logits,
    make_model,
    oof_logits,
    platt,
    sample_weights,
    sigmoid,
)
from training.support_report import compare, evaluate_shipped, speed  # noqa: E402

# what research/support_da.py, training/support_bands.py, training/whole_page_bands.py and the
# tests use from this module (its steps live in support_data, support_features, support_fit and
# support_report)
__all__ = [
    "AB_SUBSETS",
    "CACHE",
    "MONOTONIC",
    "RESULTS",
    "SEED",
    "_sha",
    "artifact_json",
    "augment_numbers",
    "best_threshold",
    "block",
    "compute_features",
    "evaluate_cv",
    "export_trees",
    "load_rows",
    "logits",
    "main",
    "make_model",
    "oof_logits",
    "platt",
    "sample_weights",
    "sigmoid",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(
        prog="python -m training support", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--k-units", type=int, default=1, help="evidence units embedded per pair")
    ap.add_argument("--c", type=float, default=1.0, help="inverse L2 strength")
    ap.add_argument(
        "--ab-weight",
        type=float,
        default=None,
        help="weight of AB tune rows (default: 3 for gbm, 1 for lr, as chosen in CV)",
    )
    ap.add_argument("--compare", action="store_true", help="also score the old backends")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument(
        "--encoder",
        choices=tuple(ARTIFACTS),
        default="minilm-onnx-int8",
        help="the sentence model the features come from (each has its own artifact)",
    )
    ap.add_argument("--search", action="store_true", help="print the CV grid")
    ap.add_argument(
        "--model",
        choices=("lr", "gbm"),
        default="gbm",
        help="gbm: gradient-boosted trees (shipped); lr: logistic regression",
    )
    ap.add_argument(
        "--evaluate",
        action="store_true",
        help="only score the shipped LocalEntailer against the baselines on the held-out half",
    )
    ap.add_argument("--no-speed", action="store_true")
    return ap.parse_args(argv)


def search_grid(rows: list[dict[str, Any]], x_all: np.ndarray, train_idx: np.ndarray) -> None:
    """``--search``: print the cross-validated grid over k, model, C and AB weight."""
    pool_idx = np.array([i for i in train_idx if rows[i]["part"] == "train"])
    ab_tune = np.array([i for i in train_idx if rows[i]["part"] == "tune"])
    for k in range(1, K_MAX + 1):
        x = x_all[:, k - 1]
        for kind, c, ab_w, use_ab in [
            ("lr", 1.0, 1.0, False),
            ("lr", 1.0, 1.0, True),
            ("lr", 1.0, 3.0, True),
            ("lr", 0.1, 3.0, True),
            ("gbm", 0.0, 3.0, True),
        ]:
            idx = train_idx if use_ab else np.concatenate([pool_idx, ab_tune])
            if not use_ab:
                # AB tune rows only calibrate: give them zero training weight.
                ab_w = 1e-6
            r = evaluate_cv(rows, x, idx, kind, c, ab_w)
            print(
                f"k={k} {kind} C={c} ab_w={ab_w:g}: tune OOF {r['ab_tune']}; "
                + " ".join(
                    f"{s}={r[s]['macro_f1']}"
                    for s in r
                    if s not in ("threshold", "platt", "ab_tune")
                ),
                flush=True,
            )


def fit_artifact(
    rows: list[dict[str, Any]],
    x: np.ndarray,
    train_idx: np.ndarray,
    cv: dict[str, Any],
    args: argparse.Namespace,
    ab_w: float,
) -> SupportModel:
    """Final fit on all training rows; Platt and threshold from the out-of-fold run."""
    k, kind, c = args.k_units, args.model, args.c
    model = make_model(kind, c)
    w = sample_weights(rows, train_idx, ab_w)
    y_train = [rows[i]["y"] for i in train_idx]
    a, b = cv["platt"]
    meta = {
        "fitted_by": "training/train_support.py",
        "seed": SEED,
        "train_rows": len(train_idx),
        "calibration": "Platt on 5-fold group-aware out-of-fold logits of AB tune rows",
    }
    if kind == "gbm":
        model.fit(x[train_idx], y_train, sample_weight=w)
        trees = export_trees(model)
        # the exported trees must predict what scikit-learn does, row for row
        raw = model._raw_predict(x[train_idx[:500]]).ravel()
        mine = np.array([trees.logit(v) for v in x[train_idx[:500]]])
        assert np.allclose(raw, mine, atol=1e-9), float(np.abs(raw - mine).max())
        artifact = SupportModel(
            features=FEATURE_NAMES,
            mean=(),
            scale=(),
            weights=(),
            bias=0.0,
            platt_a=round(a, 6),
            platt_b=round(b, 6),
            threshold=cv["threshold"],
            k_units=k,
            meta={
                **meta,
                "model": (
                    f"gradient-boosted trees {GBM_PARAMS}, monotone in "
                    f"{len(RISING) + len(FALLING)} features, AB tune weight {ab_w}, "
                    f"{sum(r['source_name'] == 'augmented_numbers' for r in rows)} "
                    "changed-number negatives"
                ),
            },
            trees=trees,
        )
    else:
        model.fit(x[train_idx], y_train, logisticregression__sample_weight=w)
        scaler, lr = model.named_steps["standardscaler"], model.named_steps["logisticregression"]
        artifact = SupportModel(
            features=FEATURE_NAMES,
            mean=tuple(round(float(v), 6) for v in scaler.mean_),
            scale=tuple(round(float(v), 6) for v in scaler.scale_),
            weights=tuple(round(float(v), 6) for v in lr.coef_[0]),
            bias=round(float(lr.intercept_[0]), 6),
            platt_a=round(a, 6),
            platt_b=round(b, 6),
            threshold=cv["threshold"],
            k_units=k,
            meta={**meta, "model": f"logistic regression C={c}, AB tune weight {ab_w}"},
        )
    return artifact


def held_out_scores(
    rows: list[dict[str, Any]], x: np.ndarray, ok: np.ndarray, artifact: SupportModel
) -> dict[str, Any]:
    """The held-out rows, scored once, at the end: overall, per AB subset and on the rows whose
    question is not in the tune half."""
    held = np.array([i for i, r in enumerate(rows) if r["part"] == "held_out"])
    prob = np.array(
        [
            artifact.probability(dict(zip(FEATURE_NAMES, x[i], strict=True))) if ok[i] else 0.0
            for i in held
        ]
    )
    y = np.array([rows[i]["y"] for i in held])
    t = artifact.threshold
    out: dict[str, Any] = {"overall": block(y, prob, t)}
    for s in AB_SUBSETS:
        m = np.array([rows[i]["subset"] == s for i in held])
        out[s] = block(y[m], prob[m], t)
    m = np.array([not rows[i]["question_in_tune"] for i in held])
    out["question_not_in_tune"] = block(y[m], prob[m], t)
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.evaluate:
        evaluate_shipped(args)
        return
    np.random.seed(SEED)
    rows = load_rows()
    if args.model == "gbm":
        rows += augment_numbers(rows)
    x_all, ok = compute_features(rows, args.encoder)
    train_idx = np.array([i for i, r in enumerate(rows) if r["part"] != "held_out" and ok[i]])
    if args.search:
        search_grid(rows, x_all, train_idx)
        return
    report: dict[str, Any] = {"rows": len(rows), "train_rows": len(train_idx)}

    k, kind, c = args.k_units, args.model, args.c
    ab_w = args.ab_weight if args.ab_weight is not None else (3.0 if kind == "gbm" else 1.0)
    x = x_all[:, k - 1]
    cv = evaluate_cv(rows, x, train_idx, kind, c, ab_w)
    report["cv"] = cv
    artifact = fit_artifact(rows, x, train_idx, cv, args, ab_w)
    artifact_path = ARTIFACTS[args.encoder]
    if not args.no_write:
        artifact_path.write_text(artifact_json(artifact), encoding="utf-8")
        print(f"wrote {artifact_path} ({artifact_path.stat().st_size} bytes)")

    report["held_out"] = held_out_scores(rows, x, ok, artifact)
    if artifact.trees is None:
        report["coefficients"] = dict(zip(FEATURE_NAMES, artifact.weights, strict=True))
    else:
        report["model"] = artifact.meta["model"]
    held = [r for r in rows if r["part"] == "held_out"]

    if args.compare:
        report["compare"] = asyncio.run(compare(held))
    if not args.no_speed:
        report["speed"] = speed(rows, artifact, args.encoder)
    report["encoder"] = args.encoder
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = (
        "train_support.json"
        if args.encoder == TORCH_ENCODER
        else f"train_support_{args.encoder}.json"
    )
    (RESULTS / name).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "cv"}, indent=1))
    print("cv:", json.dumps(cv))


if __name__ == "__main__":
    main()

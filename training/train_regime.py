"""Fit the question-regime model behind citeguard.checks.freshness and write its artifact.

    python -m training regime [--no-write] [--compare-all]

Data (read-only, never copied): ../shared/data/freshness/ — four sources with different label
sets (see ../shared/data/README.md, sections 4 and 6, and freshness/README.md):

==============  =====  ======================================================================
source          rows   training label (a set of classes; a set of two is a partial label)
==============  =====  ======================================================================
FreshQA dev     100    never → {insensitive}, slow → {slow}, fast → {fast}
SituatedQA      1,500  never → {insensitive}; changing → {slow} / {fast} where the derived
                       ``regime_fine`` says so, else {slow, fast}
RealTimeQA      700    {fast} where the question itself points at the present, else no label
PAT-Questions   840    {slow} (derived, templated Wikidata questions)
==============  =====  ======================================================================

**Licences.** Only FreshQA (Apache-2.0) allows fitting an artefact that ships; SituatedQA,
RealTimeQA and PAT-Questions have no licence upstream and are for development and testing only
(the data README's *Licences*). So the shipped model is fitted on FreshQA dev alone
(``LICENSED``), and the other three score it **out of source**. ``--compare-all`` also measures a
model fitted on all four (never written).

The model is a binary logistic regression, P(the answer changes over time), on standardised
features: the 384 all-MiniLM-L6-v2 dimensions of the question as
:func:`citeguard.checks.freshness.regime_embedding_text` reads it (lower case, no closing "?")
and the cue-rule features of :func:`citeguard.checks.freshness.regime_features` (the rules'
regime, the rule that decided, every cue that fired, years relative to the question's date).
Training labels: {insensitive} is "never", the rest "changing". Each (source, label) cell carries
the same total weight, then the two labels are scaled to the same total. L2 penalty 1/C;
L-BFGS from zeros, so the fit is deterministic. The regime is the rules', except that a question
the rules call insensitive becomes slow when P(changing) > ``t`` (``RegimeModel.decide``).

Each question is featurised at the date it was labelled (``now``): FreshQA at its April 2026
release, SituatedQA at its 2021 annotation, RealTimeQA at each quiz's ``asked_on``,
PAT-Questions at its Dec 2023 snapshot.

**Split: group-aware, by question pattern.** A row's group (``group_of``) is its PAT template,
its RealTimeQA quiz week, or else its source and first three words ("who is the", "how many
people"); the fold is the SHA-1 of the group mod 5. Each row is called by a model fitted on the
training sources' rows of the other folds, so a question's own pattern never trains the model
that calls it; rows of the other sources are scored out of source. Reported per source, beside
the rules alone at the same ``now``; fast and real-time are one class:

* FreshQA: three-class accuracy (also without the false-premise questions);
* SituatedQA: never vs changing on all 1,500, and three classes where ``regime_fine`` is known;
* RealTimeQA: the share called fast (also on the rows that point at the present);
* PAT-Questions: the share called slow.

``(C, t)`` is the best grouped out-of-fold FreshQA accuracy over ``GRID`` (ties: the higher
threshold, then the smaller C), so the FreshQA figure is optimistic by that choice; the other
sources' are not. The cue rules were written looking at all four sources, so the rules' figures
are not held out on any of them. Artifact: citeguard/checks/regime_model.json; results:
training/results/train_regime.json. Embeddings are cached under /tmp/regime_cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
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
RESULTS = ROOT / "training" / "results"
SEED = 16  # the fit has no randomness (L-BFGS from zeros); the FreshQA 5-fold split uses it
EMBED_DIM = 384
EMBED_VERSION = "minilm-l6-v2-int8-onnx-noq"  # the shipped int8 encoder, regime_embedding_text
FRESHQA_NOW = datetime(2026, 4, 21, tzinfo=UTC)
SITUATEDQA_NOW = datetime(2021, 11, 15, tzinfo=UTC)
PAT_NOW = datetime(2023, 12, 30, tzinfo=UTC)
SOURCES = ("freshqa", "situatedqa", "realtimeqa", "pat")
INS, SLO, FAS = (0, 1, 2)  # the training label's classes: insensitive, slow, fast
ALL = (INS, SLO, FAS)  # no information
# (C, t): inverse L2 strength, and the P(changing) above which the rules' insensitive is slow
GRID: tuple[tuple[float, float], ...] = tuple(
    (c, t) for c in (0.01, 0.03, 0.1, 0.3) for t in (0.5, 0.6, 0.7, 0.8)
)
#: the sources whose licence allows fitting a shipped artefact (../shared/data/README.md,
#: *Licences*): FreshQA is Apache-2.0; SituatedQA, RealTimeQA and PAT-Questions have no
#: licence upstream and are for development and testing only
LICENSED = ("freshqa",)
FOLDS = 5
#: issue 54: a seeded, group-aware part of every source kept back from rule writing: the cue
#: rules are hand-written and cannot be scored out of fold, so the rows of these question
#: patterns are not looked at while the rules change and are scored once at the end
#: (benchmarks/bench_regime.py --held-back)
HELD_BACK_SEED = "citeguard-issue-54-held-back"
HELD_BACK_SHARE = 0.25
_PRESENT_CUES = tuple(
    j
    for j, name in enumerate(REGIME_FEATURE_NAMES)
    if name.startswith(("cue=real_time:", "cue=fast:"))
)


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
    group: str = ""  # the question's pattern: rows of one group share a fold (group_of)

    @property
    def held_back(self) -> bool:
        """Whether the row's pattern is in the held-back part (:func:`is_held_back`)."""
        return is_held_back(self.group)


def _jsonl(name: str) -> list[dict[str, Any]]:
    with (DATA / f"{name}.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


_LEAD_WORDS_RE = re.compile(r"[a-z0-9']+")


def group_of(source: str, question: str, extra: str = "") -> str:
    """The question's pattern, so that near-copies never straddle a fold: a PAT template, a
    RealTimeQA quiz week (one week's questions share its news), else the source and the
    question's first three words ("who is the", "how many people", "when did the")."""
    if extra:
        return f"{source}:{extra}"
    lead = " ".join(_LEAD_WORDS_RE.findall(question.lower())[:3])
    return f"{source}:{lead}"


def is_held_back(group: str) -> bool:
    """Whether a question pattern is in the held-back part: the SHA-1 of the seed and the
    pattern, so a pattern is held back in every source's rows at once and never by label."""
    digest = hashlib.sha1(f"{HELD_BACK_SEED}:{group}".encode()).hexdigest()
    return int(digest[:8], 16) / 0x1_0000_0000 < HELD_BACK_SHARE


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
        rows[-1].group = group_of("freshqa", r["question"])
    for r in _jsonl("situatedqa_temporal"):
        if r["regime_label"] == "never":
            rows.append(Row("situatedqa", r["question"], SITUATEDQA_NOW, (INS,), "insensitive"))
            rows[-1].group = group_of("situatedqa", r["question"])
            continue
        fine = r.get("regime_fine")
        allowed = (SLO,) if fine == "slow" else (FAS,) if fine == "fast" else (SLO, FAS)
        rows.append(Row("situatedqa", r["question"], SITUATEDQA_NOW, allowed, "changing", fine))
        rows[-1].group = group_of("situatedqa", r["question"])
    for r in _jsonl("realtimeqa"):
        asked = datetime.fromisoformat(r["asked_on"]).replace(tzinfo=UTC)
        values, _ = regime_features(r["question"], now=asked)
        present = any(values[j] for j in _PRESENT_CUES)
        allowed = (FAS,) if present else ALL
        rows.append(Row("realtimeqa", r["question"], asked, allowed, "fast", present=present))
        rows[-1].group = group_of("realtimeqa", r["question"], asked.strftime("%G-W%V"))
    for r in _jsonl("pat_questions"):
        rows.append(Row("pat", r["question"], PAT_NOW, (SLO,), "slow"))
        rows[-1].group = group_of("pat", r["question"], r["template"])
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


# ---------------------------------------------------------------------------------------------
# Fit: binary logistic regression, never vs changing
# ---------------------------------------------------------------------------------------------


def changing(row: Row) -> int | None:
    """1 when the row's answer changes, 0 when it never does, None without a label."""
    if row.allowed == ALL:
        return None
    return 0 if row.allowed == (INS,) else 1


def weights(rows: Sequence[Row]) -> np.ndarray:
    """Equal total weight per (source, label) cell, then per label; mean 1 over labelled rows,
    0 for rows without a label."""
    y = [changing(r) for r in rows]
    w = np.zeros(len(rows))
    for s in sorted({r.source for r in rows}):
        for label in (0, 1):
            idx = [i for i, r in enumerate(rows) if r.source == s and y[i] == label]
            if idx:
                w[idx] = 1.0 / len(idx)
    mass = [sum(w[i] for i in range(len(rows)) if y[i] == label) for label in (0, 1)]
    for i in range(len(rows)):
        if y[i] is not None:
            w[i] *= sum(mass) / 2 / mass[y[i]]
    return w * np.count_nonzero(w) / w.sum()


def fit(x: np.ndarray, rows: Sequence[Row], c: float) -> dict[str, Any] | None:
    """The fitted model, or None when the rows hold only one label."""
    labels = [changing(r) for r in rows]
    keep = [i for i, v in enumerate(labels) if v is not None]
    y = np.array([labels[i] for i in keep], dtype=np.float64)
    if len(set(y.tolist())) < 2:
        return None
    w = weights(rows)[keep]
    xs = x[keep]
    mean = xs.mean(axis=0)
    scale = xs.std(axis=0)
    scale[scale < 1e-6] = 1.0
    z = (xs - mean) / scale
    d = z.shape[1]

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        coef, b = theta[:d], theta[d]
        m = z @ coef + b
        value = float((w * (np.logaddexp(0.0, m) - y * m)).sum()) + 0.5 / c * float(coef @ coef)
        g = w * (0.5 * (1.0 + np.tanh(0.5 * m)) - y)
        return value, np.concatenate([z.T @ g + coef / c, [g.sum()]])

    res = minimize(loss, np.zeros(d + 1), jac=True, method="L-BFGS-B", options={"maxiter": 2000})
    return {"coef": res.x[:d], "intercept": float(res.x[d]), "mean": mean, "scale": scale}


def artifact(params: dict[str, Any], threshold: float, meta: dict[str, Any]) -> dict[str, Any]:
    def r(a: np.ndarray) -> list[Any]:
        return [float(f"{v:.5g}") for v in np.asarray(a).ravel()]

    return {
        "format": "citeguard-regime-model/2",
        "classes": list(REGIME_CLASSES),
        "embedding": {
            "model": "all-MiniLM-L6-v2",
            "dim": EMBED_DIM,
            "normalized": True,
            "text": "regime_embedding_text",
        },
        "features": list(REGIME_FEATURE_NAMES),
        "threshold": threshold,
        "mean": r(params["mean"]),
        "scale": r(params["scale"]),
        "coef": r(params["coef"]),
        "intercept": float(f"{params['intercept']:.5g}"),
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
        model.decide(model.probabilities(xi), decision)
        for xi, decision in zip(x, decisions, strict=True)
    ]


def as_model(params: dict[str, Any], threshold: float) -> RegimeModel:
    return RegimeModel.from_dict(artifact(params, threshold, {}))


Config = tuple[float, float]


class Runs:
    """Fits (by training sources and C) and held-out scores, remembered."""

    def __init__(
        self, rows: Sequence[Row], x: np.ndarray, decisions: Sequence[tuple[Regime, str, str]]
    ) -> None:
        self.rows, self.x, self.decisions = rows, x, decisions
        self._fits: dict[tuple[frozenset[str], float], dict[str, Any] | None] = {}
        self._scores: dict[tuple[frozenset[str], str, Config], dict[str, Any] | None] = {}
        self.fits = 0

    def fitted(self, train: frozenset[str], c: float) -> dict[str, Any] | None:
        if (train, c) not in self._fits:
            tr = [i for i, r in enumerate(self.rows) if r.source in train]
            self._fits[train, c] = fit(self.x[tr], [self.rows[i] for i in tr], c)
            self.fits += 1
        return self._fits[train, c]

    def held_out(self, train: frozenset[str], test: str, config: Config) -> dict[str, Any] | None:
        """The held-out source's score, or None when ``train`` has a single label."""
        key = (train, test, config)
        if key not in self._scores:
            params = self.fitted(train, config[0])
            if params is None:
                self._scores[key] = None
            else:
                te = [i for i, r in enumerate(self.rows) if r.source == test]
                model = as_model(params, config[1])
                predicted = predict(model, self.x[te], [self.decisions[i] for i in te])
                self._scores[key] = score([self.rows[i] for i in te], predicted)
        return self._scores[key]

    def loso(self, sources: Sequence[str], config: Config) -> dict[str, Any]:
        every = frozenset(sources)
        return {s: self.held_out(every - {s}, s, config) for s in sources}


def mean_accuracy(table: dict[str, Any]) -> float:
    """The mean held-out accuracy over the folds that could be fitted."""
    return float(np.mean([t["accuracy"] for t in table.values() if t is not None]))


def pick(runs: Runs, sources: Sequence[str]) -> Config:
    """The configuration with the best mean leave-one-source-out accuracy over ``sources``
    (ties: the first in GRID)."""
    return max(GRID, key=lambda c: (mean_accuracy(runs.loso(sources, c)), -GRID.index(c)))


WHAT = {
    "freshqa": "3-class accuracy",
    "situatedqa": "never vs changing",
    "realtimeqa": "share called fast",
    "pat": "share called slow",
}


def _config(c: Config) -> dict[str, float]:
    return {"C": c[0], "threshold": c[1]}


def fold_of(group: str) -> int:
    """A group's fold: the SHA-1 of its pattern, so a split never depends on the labels."""
    return int(hashlib.sha1(group.encode("utf-8")).hexdigest(), 16) % FOLDS


def grouped_oof(
    rows: Sequence[Row],
    x: np.ndarray,
    decisions: Sequence[tuple[Regime, str, str]],
    train_sources: Sequence[str],
    config: Config,
) -> list[Regime]:
    """Every row's regime from a model fitted on the training sources' rows of the other folds
    (a fold is a set of question patterns, :func:`group_of`): a row's own pattern never trains
    the model that calls it, and a source outside ``train_sources`` is scored out of source."""
    fold = [fold_of(r.group) for r in rows]
    predicted: list[Regime | None] = [None] * len(rows)
    for f in range(FOLDS):
        tr = [i for i, r in enumerate(rows) if fold[i] != f and r.source in train_sources]
        te = [i for i in range(len(rows)) if fold[i] == f]
        params = fit(x[tr], [rows[i] for i in tr], config[0])
        if params is None or not te:
            for i in te:
                predicted[i] = decisions[i][0]
            continue
        model = as_model(params, config[1])
        for i, p in zip(te, predict(model, x[te], [decisions[i] for i in te]), strict=True):
            predicted[i] = p
    return [p if p is not None else d[0] for p, d in zip(predicted, decisions, strict=True)]


def per_source(rows: Sequence[Row], predicted: Sequence[Regime]) -> dict[str, Any]:
    return {
        s: score(
            [r for r in rows if r.source == s],
            [p for p, r in zip(predicted, rows, strict=True) if r.source == s],
        )
        for s in SOURCES
    }


def choose(
    rows: Sequence[Row],
    x: np.ndarray,
    decisions: Sequence[tuple[Regime, str, str]],
    train_sources: Sequence[str],
) -> tuple[Config, dict[str, dict[str, float]]]:
    """The configuration with the best grouped out-of-fold FreshQA accuracy (the source
    closest to the held-out FreshQA test set); ties: the higher threshold (the model raises
    fewer questions), then the smaller C."""
    by_config: dict[str, dict[str, float]] = {}
    best: tuple[float, float, float] | None = None
    chosen = GRID[0]
    for c in GRID:
        table = per_source(rows, grouped_oof(rows, x, decisions, train_sources, c))
        by_config[f"C={c[0]:g},t={c[1]:g}"] = {s: t["accuracy"] for s, t in table.items()}
        key = (table["freshqa"]["accuracy"], c[1], -c[0])
        print(f"config C={c[0]:g} t={c[1]:g}: {by_config[f'C={c[0]:g},t={c[1]:g}']}", flush=True)
        if best is None or key > best:
            best, chosen = key, c
    return chosen, by_config


def print_table(table: dict[str, Any]) -> None:
    print(f"{'source':<11} {'n':>5}  {'scoring':<34} {'model':>6} {'rules':>6}")
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
        "--compare-all",
        action="store_true",
        help="also measure a model fitted on all four sources (never shipped: licences)",
    )
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = load_rows()
    x, decisions = featurise(rows)
    rules_predicted = [d[0] for d in decisions]
    rules_table = per_source(rows, rules_predicted)
    shipped, by_config = choose(rows, x, decisions, LICENSED)
    oof = per_source(rows, grouped_oof(rows, x, decisions, LICENSED, shipped))
    table = {s: {"model": oof[s], "rules": rules_table[s]} for s in SOURCES}
    print(f"grouped {FOLDS}-fold, fitted on {', '.join(LICENSED)} (model vs rules):")
    print_table(table)
    results: dict[str, Any] = {
        "seed": SEED,
        "rows": {s: sum(r.source == s for r in rows) for s in SOURCES},
        "groups": {s: len({r.group for r in rows if r.source == s}) for s in SOURCES},
        "fitted_on": list(LICENSED),
        "why_fitted_on": "the shipped artefact is fitted only on data whose licence allows it: "
        "FreshQA is Apache-2.0; SituatedQA, RealTimeQA and PAT-Questions have no licence "
        "upstream (development and testing only, shared/data/README.md): they score the model "
        "out of source and guided the cue rules",
        "label_mapping": {
            "freshqa": "never-changing → insensitive, slow-changing → slow, fast-changing → fast "
            "or real_time (scored as one class); trained as never / changing",
            "situatedqa": "never → insensitive; changing → slow, fast or real_time (two-class "
            "score); regime_fine slow/fast → slow / fast or real_time (three-class score)",
            "realtimeqa": "fast → fast or real_time (one class: the share called fast)",
            "pat": "slow → slow (one class: the share called slow)",
        },
        "split": f"group-aware {FOLDS}-fold: a fold is a set of question patterns (a PAT "
        "template, a RealTimeQA quiz week, else the source and the question's first three "
        "words; sha1 of the pattern mod 5); each row is called by a model fitted on the "
        "training sources' rows of the other folds",
        "model": "P(changing) by logistic regression over the MiniLM embedding of "
        "regime_embedding_text(question) and the cue-rule features; the regime is the rules' "
        "except rules-insensitive with P(changing) > threshold → slow",
        "grid_grouped_oof_accuracy": by_config,
        "selection": "best grouped out-of-fold FreshQA accuracy (ties: higher threshold, then "
        "smaller C); the FreshQA figure is therefore optimistic by the choice among "
        f"{len(GRID)} configurations, the other sources' are not (out of source)",
        "grouped_oof": table,
        "shipped_config": _config(shipped),
        "rules_note": "the cue rules were written looking at all four sources (development "
        "use), so the rules' figures are not held out on any of them; the held-out FreshQA test "
        "set is the project's only unseen measure",
    }
    if args.compare_all:
        every = list(SOURCES)
        cmp_config, cmp_grid = choose(rows, x, decisions, every)
        cmp = per_source(rows, grouped_oof(rows, x, decisions, every, cmp_config))
        results["all_sources_not_shipped"] = {
            "config": _config(cmp_config),
            "grouped_oof_accuracy": {s: t["accuracy"] for s, t in cmp.items()},
            "grid": cmp_grid,
        }
        print(f"fitted on all four (not shipped): {results['all_sources_not_shipped']}")
    train = [i for i, r in enumerate(rows) if r.source in LICENSED]
    params = fit(x[train], [rows[i] for i in train], shipped[0])
    assert params is not None
    meta = {
        "script": "training/train_regime.py",
        "data": "shared/data/freshness/freshqa_dev.jsonl (FreshQA dev, Apache-2.0)",
        "rows": {s: sum(r.source == s for r in rows) for s in LICENSED},
        "seed": SEED,
        **_config(shipped),
    }
    art = artifact(params, shipped[1], meta)
    text = json.dumps(art, separators=(",", ":"), ensure_ascii=False)
    results["artifact_bytes"] = len(text.encode("utf-8")) + 1
    results["artifact_sha1"] = hashlib.sha1((text + "\n").encode("utf-8")).hexdigest()
    results["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"shipped: C={shipped[0]:g} t={shipped[1]:g}")
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

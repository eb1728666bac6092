"""Decomposable-attention experiment for claim support: measured, not shipped.

    python -m research.support_da [--epochs 12] [--hidden 128] [--units 2]

A small attention model (Parikh et al., 2016) over the **frozen** int8 MiniLM token vectors the
support scorer already computes: each claim token attends over the tokens of the ``--units``
evidence units that ``prepare_pair`` chooses, compares itself with what it attended to, and the
comparisons are pooled (mean, max, min, plus the mean and the lowest cosine to the attended
vector) into one logit. It is fitted on the same rows, folds and weights as
``train_support.py``'s trees (5-fold group-aware, AB tune rows weighted 3x): its out-of-fold
logits become a 24th feature of the trees, whose Platt scaling and threshold come from the AB
tune rows' out-of-fold predictions as for the shipped model. AttributionBench's held-out half is
scored once, at the end, for the trees without and with the feature, in the same run.

Result (``research/results/support_da.json``, 12 epochs, 128 hidden, 2 units): held-out
macro-F1 0.724 for the trees, 0.733 with the attention logit as a feature, 0.676 for the
attention model alone (supported precision 0.714 / 0.729 / 0.669; ExpertQA 0.671 / 0.676 /
0.589). +0.01 is too little for a second embedded unit per claim (~1.5x the encoder work), so
``LocalEntailer`` does not use it.
Needs torch and ``../shared/data/claims``; embeddings are cached under ``/tmp/support_da``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import training.train_support as ts  # noqa: E402
from citeguard.checks.support import PairFeatures, prepare_pair  # noqa: E402

ENCODER = "minilm-onnx-int8"
CACHE = Path("/tmp/support_da")
MAX_CLAIM_TOKENS, MAX_EVIDENCE_TOKENS = 64, 160
AB_WEIGHT = 3.0


def token_vectors(
    prepared: list[PairFeatures | None],
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Token vectors (float16) and content masks of every claim and chosen unit, cached."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"tokens_{ENCODER}.pkl"
    cache: dict[str, tuple[np.ndarray, np.ndarray]] = (
        pickle.loads(path.read_bytes()) if path.is_file() else {}
    )
    todo = list(
        dict.fromkeys(
            t for p in prepared if p is not None for t in (p.claim, *p.units) if t not in cache
        )
    )
    if todo:
        from citeguard.checks.onnx_minilm import OnnxMiniLMEncoder

        encoder = OnnxMiniLMEncoder(threads=2)
        for start in range(0, len(todo), 1000):
            chunk = todo[start : start + 1000]
            for text, enc in zip(chunk, encoder.encode(chunk), strict=True):
                cache[text] = (enc.token_vectors.astype(np.float16), enc.content.copy())
            print(f"embedded {start + len(chunk)}/{len(todo)} texts", flush=True)
        path.write_bytes(pickle.dumps(cache))
    return cache


def build_model(hidden: int) -> Any:
    import torch
    from torch import nn

    class Attend(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.f = nn.Sequential(nn.Linear(384, hidden), nn.ReLU())
            self.g = nn.Sequential(nn.Dropout(0.2), nn.Linear(4 * 384, hidden), nn.ReLU())
            self.h = nn.Sequential(
                nn.Dropout(0.2), nn.Linear(3 * hidden + 2, hidden), nn.ReLU(), nn.Linear(hidden, 1)
            )
            self.temp = nn.Parameter(torch.tensor(1.0))

        def forward(self, c: Any, cm: Any, e: Any, em: Any) -> Any:
            # attention: learned projections plus the raw cosine (the vectors are unit length)
            scores = torch.einsum("bmh,bnh->bmn", self.f(c), self.f(e))
            scores = scores + torch.einsum("bmd,bnd->bmn", c, e) * 10 * self.temp
            att = scores.masked_fill(~em[:, None, :], -1e4).softmax(-1)
            beta = att @ e
            v = self.g(torch.cat([c, beta, c * beta, (c - beta).abs()], -1))
            w = cm.float()[..., None]
            mean = (v * w).sum(1) / w.sum(1).clamp(min=1)
            top = v.masked_fill(~cm[..., None], -1e4).max(1).values
            low = (-v).masked_fill(~cm[..., None], -1e4).max(1).values
            cos = (c * beta).sum(-1)
            cos_min = cos.masked_fill(~cm, 9.0).min(1).values[:, None]
            cos_mean = (cos * cm).sum(1, keepdim=True) / cm.sum(1, keepdim=True).clamp(min=1)
            return self.h(torch.cat([mean, top, low, cos_min, cos_mean], -1)).squeeze(-1)

    return Attend()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--units", type=int, default=2, help="evidence units the claim attends over")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from sklearn.model_selection import GroupKFold

    torch.manual_seed(0)
    torch.set_num_threads(2)
    started = time.perf_counter()
    rows = ts.load_rows()
    rows += ts.augment_numbers(rows)
    x_all, ok = ts.compute_features(rows, ENCODER)
    prepared: list[PairFeatures | None] = []
    for i, r in enumerate(rows):
        p = prepare_pair(r["claim"], r["evidence"], k_units=args.units) if ok[i] else None
        prepared.append(p if p is not None and not p.empty else None)
    tokens = token_vectors(prepared)

    def batch(ids: Any) -> tuple[Any, Any, Any, Any]:
        parts = []
        for i in ids:
            p = prepared[i]
            assert p is not None
            c, cm = tokens[p.claim]
            c, cm = c[:MAX_CLAIM_TOKENS], cm[:MAX_CLAIM_TOKENS]
            if not cm.any():
                cm = np.ones(len(c), dtype=bool)
            e = np.concatenate([tokens[u][0] for u in p.units])[:MAX_EVIDENCE_TOKENS]
            parts.append((c, cm, e))
        m, n = max(len(c) for c, _, _ in parts), max(len(e) for _, _, e in parts)
        cb, cmb = torch.zeros(len(parts), m, 384), torch.zeros(len(parts), m, dtype=torch.bool)
        eb, emb = torch.zeros(len(parts), n, 384), torch.zeros(len(parts), n, dtype=torch.bool)
        for j, (c, cm, e) in enumerate(parts):
            cb[j, : len(c)] = torch.from_numpy(c.astype(np.float32))
            cmb[j, : len(c)] = torch.from_numpy(cm)
            eb[j, : len(e)] = torch.from_numpy(e.astype(np.float32))
            emb[j, : len(e)] = True
        return cb, cmb, eb, emb

    def fit(idx: np.ndarray) -> Any:
        model = build_model(args.hidden)
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
        y = torch.tensor([rows[i]["y"] for i in idx], dtype=torch.float32)
        w = torch.tensor(ts.sample_weights(rows, idx, AB_WEIGHT), dtype=torch.float32)
        rng = np.random.default_rng(0)
        for _ in range(args.epochs):
            model.train()
            order = rng.permutation(len(idx))
            for s in range(0, len(order), 32):
                o = order[s : s + 32]
                out = model(*batch(idx[o]))
                loss = F.binary_cross_entropy_with_logits(out, y[o], reduction="none")
                loss = (loss * w[o]).sum() / w[o].sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
        return model

    @torch.no_grad()
    def predict(model: Any, idx: np.ndarray) -> np.ndarray:
        model.eval()
        out = [model(*batch(idx[s : s + 128])).numpy() for s in range(0, len(idx), 128)]
        return np.concatenate(out) if out else np.zeros(0)

    usable = np.array([p is not None for p in prepared])
    train_idx = np.array([i for i, r in enumerate(rows) if r["part"] != "held_out" and usable[i]])
    held = np.array([i for i, r in enumerate(rows) if r["part"] == "held_out"])
    logit = np.zeros(len(rows))
    groups = [rows[i]["group"] for i in train_idx]
    folds = GroupKFold(n_splits=5, shuffle=True, random_state=ts.SEED)
    for k, (tr, te) in enumerate(folds.split(train_idx, groups=groups)):
        logit[train_idx[te]] = predict(fit(train_idx[tr]), train_idx[te])
        print(f"fold {k + 1}/5: {time.perf_counter() - started:.0f}s", flush=True)
    held_ok = np.array([i for i in held if usable[i]])
    logit[held_ok] = predict(fit(train_idx), held_ok)

    y_held = np.array([rows[i]["y"] for i in held])

    def held_blocks(prob: np.ndarray, t: float) -> dict[str, Any]:
        out = {"overall": ts.block(y_held, prob, t)}
        for s in ts.AB_SUBSETS:
            m = np.array([rows[i]["subset"] == s for i in held])
            out[s] = ts.block(y_held[m], prob[m], t)
        return out

    def trees(x: np.ndarray, monotonic: list[int]) -> dict[str, Any]:
        cv = ts.evaluate_cv(rows, x, train_idx, "gbm", 0.0, AB_WEIGHT, monotonic)
        model = ts.make_model("gbm", 0.0, monotonic)
        w = ts.sample_weights(rows, train_idx, AB_WEIGHT)
        model.fit(x[train_idx], [rows[i]["y"] for i in train_idx], sample_weight=w)
        a, b = cv["platt"]
        z = np.where(ok[held], ts.logits(model, x[held]), -10.0)
        return {
            "cv_ab_tune": cv["ab_tune"],
            "held_out": held_blocks(ts.sigmoid(a * z + b), cv["threshold"]),
        }

    x = x_all[:, 0]  # the shipped trees' input: one evidence unit
    monotonic = list(ts.MONOTONIC)
    report: dict[str, Any] = {
        "settings": vars(args),
        "trees": trees(x, monotonic),
        "trees_plus_attention": trees(np.concatenate([x, logit[:, None]], axis=1), [*monotonic, 1]),
    }
    is_ab = np.array([rows[i]["source_name"] == "AB" for i in train_idx])
    y_tune = np.array([rows[i]["y"] for i in train_idx])[is_ab]
    a, b = ts.platt(logit[train_idx][is_ab], y_tune)
    t = ts.best_threshold(y_tune, ts.sigmoid(a * logit[train_idx][is_ab] + b))
    report["attention_alone"] = {"held_out": held_blocks(ts.sigmoid(a * logit[held] + b), t)}
    report["seconds"] = round(time.perf_counter() - started, 1)
    out = Path(__file__).resolve().parent / "results" / "support_da.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    for name in ("trees", "trees_plus_attention", "attention_alone"):
        o, eq = report[name]["held_out"]["overall"], report[name]["held_out"]["ExpertQA"]
        print(
            f"{name}: held-out macro-F1 {o['macro_f1']}, supported precision "
            f"{o['supported_precision']}, ExpertQA {eq['macro_f1']}"
        )


if __name__ == "__main__":
    main()

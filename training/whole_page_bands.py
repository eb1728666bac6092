"""The whole-page bands: chosen on whole-page P(supported) out of fold (issue 42) and written to
``citeguard/checks/support_bands_whole_page.json``.

    python -m training whole-page-bands [--no-write]

Measured through the guard on rows never tuned on: ``python -m benchmarks --only
whole_page_bands`` (``benchmarks/bench_longpage_bands.py``).

The whole-page bands were chosen on the 217 AB-long band-dev rows alone: too few for any
rejection band to show 90% precision over 20 rows, so none was allowed. The support model was
fitted on AttributionBench's *tune* half, so the shipped model's scores there are in-sample;
but ``python -m training support-bands`` (``training/support_bands.py``) already scores that
half **out of fold** (the shipped recipe refitted in 5 group-aware folds). This module does the
same on whole pages:

1. each AB tune row's evidence placed inside a real page's text (as
   :func:`benchmarks.ab_long.ab_long_rows` does for the held-out half), and its
   whole-page evidence found by the guard's own steps (:func:`guard_evidence`: the page
   extracted, the claim without its citation artefacts, :func:`~citeguard.checks.evidence.
   claim_evidence` after the page's metadata);
2. the support scorer's features of (claim, evidence) (the encoder only; no fitted model);
3. the fold models (``train_support``'s recipe, the folds of ``local_oof``: grouped by question,
   so an AB row and its question's other rows are always in the same fold), each scoring the
   rows of the fold it did not see, read through the shipped Platt calibration.

:func:`band_pool` joins them with the band-dev rows of the held-out half (even sha1 of the
question; the shipped model never saw them) scored by the shipped model: 528 + 238 rows to
choose the whole-page bands on, never the report half. Cached under ``/tmp/whole_page_oof``
(the training features take ~15 minutes on two busy cores; then seconds).
:func:`calibrate` chooses one pair of bands on the two pools (long page, short page).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import ab_long as blb
from benchmarks import bench_support_bands as bsb
from benchmarks.bench_longpage_bands import _auc
from training import train_support as ts

ROOT = Path(__file__).resolve().parents[1]
ARTEFACT = ROOT / "citeguard" / "checks" / "support_bands_whole_page.json"
CHOSEN_BY = "python -m training whole-page-bands"
CACHE = Path("/tmp/whole_page_oof")
ENCODER = "minilm-onnx-int8"


def guard_evidence(row: dict[str, Any], kind: str) -> tuple[str, str]:
    """(the claim as judged, its whole-page evidence), by the guard's own steps, on the row's
    long page (``kind`` "long") or its short evidence alone served as the page ("short")."""
    from citeguard.checks.evidence import claim_evidence
    from citeguard.checks.page_meta import without_citation_artefacts
    from citeguard.checks.pairs import ExtractedPage
    from citeguard.web.page import extract_page

    # the URL the guard benchmarks serve the row at (its host is in the page's metadata)
    page = bsb.claim_pages([row])[0]
    body, url = page.body, page.url
    if kind == "long":
        body = blb._html(row["question"], row["page_paragraphs"])
    ext = ExtractedPage.of(extract_page(body, url=url))
    judged = without_citation_artefacts(row["claim"])
    return judged, claim_evidence(judged, ext.text, ext.head)


def _key(*parts: str) -> str:
    return hashlib.sha1("\x00".join(parts).encode()).hexdigest()


def features(pairs: Sequence[tuple[str, str]]) -> list[dict[str, float] | None]:
    """The support scorer's features of each (claim, evidence), cached on disk."""
    from citeguard.checks.entail import LocalEntailer

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"features_{ENCODER}.pkl"
    cache: dict[str, dict[str, float] | None] = (
        pickle.loads(path.read_bytes()) if path.is_file() else {}
    )
    todo = list(dict.fromkeys(p for p in pairs if _key(*p) not in cache))
    if todo:
        scorer = LocalEntailer()._scorer()
        for start in range(0, len(todo), 64):
            chunk = todo[start : start + 64]
            for p, f in zip(chunk, scorer.features(chunk), strict=True):
                cache[_key(*p)] = f
        path.write_bytes(pickle.dumps(cache))
    return [cache[_key(*p)] for p in pairs]


def _vector(f: dict[str, float]) -> list[float]:
    from citeguard.checks.support import FEATURE_NAMES

    return [f[name] for name in FEATURE_NAMES]


def fold_models() -> tuple[list[Any], dict[str, int]]:
    """The shipped recipe refitted in the folds of ``bench_support_bands.local_oof`` (5
    group-aware folds over the training files and AB's tune half), and each group's fold."""
    from sklearn.model_selection import GroupKFold

    from citeguard.checks.support import ARTIFACTS, SupportModel

    path = CACHE / f"fold_models_{ENCODER}.pkl"
    if path.is_file():
        models, fold_of = pickle.loads(path.read_bytes())
        return models, fold_of
    shipped = SupportModel.load(ARTIFACTS[ENCODER])
    rows = ts.load_rows()
    rows += ts.augment_numbers(rows)
    x_all, ok = ts.compute_features(rows, ENCODER)
    x = x_all[:, shipped.k_units - 1]
    idx = np.array([i for i, r in enumerate(rows) if r["part"] != "held_out" and ok[i]])
    groups = [rows[i]["group"] for i in idx]
    models: list[Any] = []
    fold_of: dict[str, int] = {}
    folds = GroupKFold(n_splits=5, shuffle=True, random_state=ts.SEED)
    for k, (tr, te) in enumerate(folds.split(idx, groups=groups)):
        m = ts.make_model("gbm", 0.0)
        m.fit(
            x[idx[tr]],
            [rows[i]["y"] for i in idx[tr]],
            sample_weight=ts.sample_weights(rows, idx[tr], 3.0),
        )
        models.append(m)
        for j in te:
            fold_of[groups[j]] = k
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps((models, fold_of)))
    return models, fold_of


def tune_oof(kind: str) -> tuple[list[dict[str, Any]], np.ndarray]:
    """AB tune rows on whole-page evidence (``kind`` "long": inside a real page; "short": the
    passage alone as the page) and their out-of-fold P(supported) (NaN: nothing to score)."""
    from citeguard.checks.support import ARTIFACTS, SupportModel

    shipped = SupportModel.load(ARTIFACTS[ENCODER])
    rows = blb.ab_long_half("tune")
    pairs = [guard_evidence(r, kind) for r in rows]
    feats = features(pairs)
    models, fold_of = fold_models()
    prob = np.full(len(rows), np.nan)
    for i, (r, f) in enumerate(zip(rows, feats, strict=True)):
        if f is None:
            continue
        z = ts.logits(models[fold_of[r["group"]]], np.array([_vector(f)]))[0]
        prob[i] = float(ts.sigmoid(np.array(shipped.platt_a * z + shipped.platt_b)))
    return rows, prob


def band_dev(kind: str) -> tuple[list[dict[str, Any]], np.ndarray]:
    """The held-out half's band-dev rows (even sha1 of the question) on whole-page evidence,
    scored by the shipped model (which never saw them)."""
    from citeguard.checks.entail import LocalEntailer

    rows = [r for r in blb.ab_long_rows() if r["part"] == "band_dev"]
    pairs = [guard_evidence(r, kind) for r in rows]
    feats = features(pairs)
    model = LocalEntailer()._scorer().model
    prob = np.array([np.nan if f is None else model.probability(f) for f in feats])
    return rows, prob


def band_pool(kind: str) -> dict[str, Any]:
    """Rows to choose the bands on: AB tune out of fold + band-dev (shipped model), with
    ``y``, ``p`` and ``source`` arrays (rows with nothing to score left out)."""
    tune, p_tune = tune_oof(kind)
    dev, p_dev = band_dev(kind)
    y = np.array([r["y"] for r in tune] + [r["y"] for r in dev])
    p = np.concatenate([p_tune, p_dev])
    source = np.array(["ab_tune_oof"] * len(tune) + ["band_dev"] * len(dev))
    keep = ~np.isnan(p)
    return {"y": y[keep], "p": p[keep], "source": source[keep]}


def choose_per_kind(pools: dict[str, dict[str, Any]]) -> tuple[float, float]:
    """One pair of bands that keeps the confident gate's rules on every kind of evidence at
    once: ``reject_below`` the highest cut (0.01 steps) below which rejections are at least 90%
    right on each pool (over at least 20 of its rows; none: 0), ``accept_from`` the lowest
    from which acceptances are at least 85% right on each (none: 1). The guard reads every
    unquoted claim's evidence, short page or long, with these bands."""
    from benchmarks.bench_support_bands import (
        ACCEPT_PRECISION,
        GRID,
        MIN_ROWS,
        REJECT_PRECISION,
    )

    def holds(t: float, below: bool) -> bool:
        for pool in pools.values():
            m = pool["p"] < t if below else pool["p"] >= t
            want, need = (0, REJECT_PRECISION) if below else (1, ACCEPT_PRECISION)
            if m.sum() < MIN_ROWS or (pool["y"][m] == want).mean() < need:
                return False
        return True

    reject = max((float(t) for t in GRID if holds(float(t), True)), default=0.0)
    accept = min((float(t) for t in GRID if holds(float(t), False)), default=1.0)
    return round(reject, 2), round(max(accept, reject), 2)


def calibrate(*, write: bool = True) -> dict[str, Any]:
    """Choose the whole-page bands on whole-page P(supported) out of fold, per kind of
    evidence (:func:`band_pool`): AB's tune half scored by the fold
    models that did not see its question, and AB-long's band-dev rows scored by the shipped
    model — each row's evidence found by the guard's steps on its long page (``long``) and on
    its passage alone served as the page (``short``); never the report half. One pair of bands
    that keeps the rules (rejections >= 90% right, acceptances >= 85% right) on both kinds
    (:func:`choose_per_kind`). With ``write``, writes the artefact with the figures per kind
    and per source."""
    from citeguard.checks.entail import LocalEntailer

    pools = {kind: band_pool(kind) for kind in ("long", "short")}
    lo, hi = choose_per_kind(pools)
    figures: dict[str, Any] = {}
    for kind, pool in pools.items():
        figures[f"{kind}_page"] = band_figures(pool["y"], pool["p"], lo, hi)
        for source in ("ab_tune_oof", "band_dev"):
            m = pool["source"] == source
            figures[f"{kind}_page_{source}"] = band_figures(pool["y"][m], pool["p"][m], lo, hi)
    encoder = LocalEntailer().encoder_name
    rows = len(pools["long"]["y"])
    entry = {
        "reject_below": lo,
        "accept_from": hi,
        "chosen_by": CHOSEN_BY,
        "chosen_on": (
            f"whole-page P(supported) of {rows} AB rows, each with its evidence inside a real "
            "page's text (long) and alone as the page (short): AB's tune half scored out of "
            "fold by the shipped recipe refitted in 5 folds grouped by question, and AB-long's "
            "band-dev rows (AB held-out half, questions with even sha1) scored by the shipped "
            "model (training/whole_page_bands.py); the rules held on each kind"
        ),
        "rule": "rejections >= 90% right, acceptances >= 85% right (cuts of >= 20 rows)",
        "figures": figures,
    }
    if write:
        data = json.loads(ARTEFACT.read_text()) if ARTEFACT.exists() else {}
        data[encoder] = entry
        ARTEFACT.write_text(json.dumps(data, indent=2) + "\n")
    return {"encoder": encoder, **entry}


def band_figures(y: np.ndarray, p: np.ndarray, lo: float, hi: float) -> dict[str, Any]:
    """Share and precision of each band on rows ``y`` with P(supported) ``p``."""
    rej, acc = p < lo, p >= hi
    return {
        "rows": len(y),
        "auc": _auc(y, p),
        "not_supported_share": round(float(rej.mean()), 4),
        "not_supported_precision": round(float((y[rej] == 0).mean()), 4) if rej.any() else None,
        "supported_share": round(float(acc.mean()), 4),
        "supported_precision": round(float((y[acc] == 1).mean()), 4) if acc.any() else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m training whole-page-bands",
        description=" ".join(__doc__.split("\n\n")[0].split()),
    )
    ap.add_argument("--no-write", action="store_true", help="print the bands, write nothing")
    args = ap.parse_args(argv)
    print(json.dumps(calibrate(write=not args.no_write), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Claim-support bands: each backend's two thresholds, chosen out of fold, written into the
shipped artefacts.

    python -m training support-bands [--encoder minilm-onnx-int8] [--no-write]

Writes the ``bands`` of ``citeguard/checks/support_model_int8.json`` (and of the torch artefact
``support_model.json``: the same bands with a note, unless bands chosen on its own encoder are
already there) and ``citeguard/checks/word_overlap_bands.json``; the choice's figures go to
``training/results/support_bands.json``. Run it after ``python -m training support`` (which
rewrites the model without bands; ``python -m training support`` runs both). Measured on the
held-out half: ``python -m benchmarks.bench_support_bands``.

**Splits.** AttributionBench dev (AB) is split as ``training/support_data.py`` splits it: rows
whose sha1(id) is even are the *tune* half, odd rows the *held-out* half. Only the tune half
(and the training files) are read here; the held-out half is never used for the choice.

* ``local``: the shipped trees' out-of-fold scores: the same model (``train_support``'s
  ``GBM_PARAMS``, AB tune weight 3, the changed-number negatives) refitted in 5 group-aware
  folds (groups: the files' ``group``, AB rows by question) over the training files and the
  tune half, each row scored by the fit that did not see its group, read through the shipped
  Platt calibration. The shipped model itself is not refitted. Cached in
  ``/tmp/support_cache/bands_oof_<encoder>.pkl``: delete it after refitting the model.
* ``word_overlap``: content-word recall; Platt fitted in 5 group-aware folds (by question) over
  the tune half, each row's P(supported) from the fit that did not see its question.

On the AB tune rows' out-of-fold P(supported), ``reject_below`` is the highest cut (0.01 steps)
below which rejections are at least 90% right (over at least 20 rows; none: 0, nothing is
rejected); ``accept_from`` the lowest cut from which acceptances are at least 85% right (none:
1, nothing is accepted): :func:`benchmarks.bench_support_bands.choose_bands`, the rule the
suite's band tables read too.
"""

from __future__ import annotations

import argparse
import json
import pickle
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import bench_support_bands as bsb
from training import train_support as ts

CHOSEN_BY = "python -m training support-bands"
OUT = Path(__file__).resolve().parent / "results" / "support_bands.json"


def local_oof(encoder: str) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray]:
    """The AB tune rows and the training-file rows with their out-of-fold P(supported) under
    the shipped model's recipe and Platt calibration: (rows, probabilities, is AB tune).
    Cached under ``train_support``'s cache folder (the fits take minutes)."""
    from citeguard.checks.support import ARTIFACTS, SupportModel

    shipped = SupportModel.load(ARTIFACTS[encoder])
    cache = ts.CACHE / f"bands_oof_{encoder}.pkl"
    if cache.is_file():
        picked, prob, is_tune = pickle.loads(cache.read_bytes())
        return picked, prob, is_tune
    rows = ts.load_rows()
    rows += ts.augment_numbers(rows)
    x_all, ok = ts.compute_features(rows, encoder)
    x = x_all[:, shipped.k_units - 1]
    train_idx = np.array([i for i, r in enumerate(rows) if r["part"] != "held_out" and ok[i]])
    z = ts.oof_logits(rows, x, train_idx, "gbm", 0.0, 3.0)
    prob = ts.sigmoid(shipped.platt_a * z + shipped.platt_b)
    picked = [rows[i] for i in train_idx]
    is_tune = np.array([r["part"] == "tune" for r in picked])
    y = np.array([r["y"] for r in picked])
    a, b = ts.platt(z[is_tune], y[is_tune])
    print(
        f"refitted Platt on the OOF logits: a={a:.4f} b={b:.4f} "
        f"(shipped a={shipped.platt_a} b={shipped.platt_b})",
        flush=True,
    )
    cache.write_bytes(pickle.dumps((picked, prob, is_tune)))
    return picked, prob, is_tune


def _word_recall(rows: Sequence[dict[str, Any]]) -> np.ndarray:
    from citeguard.checks.entail import word_overlap_recall

    out = np.zeros(len(rows))
    for i, r in enumerate(rows):
        got = word_overlap_recall(r["claim"], r["evidence"])
        out[i] = got[0] if got is not None else 0.0
    return out


def word_overlap_oof(tune: Sequence[dict[str, Any]]) -> tuple[np.ndarray, float, float]:
    """Out-of-fold P(supported) of word overlap on the tune rows (Platt per fold, folds by
    question), and the Platt fitted on all of them."""
    from sklearn.model_selection import GroupKFold

    recall = _word_recall(tune)
    y = np.array([r["y"] for r in tune])
    groups = [r["group"] for r in tune]
    prob = np.zeros(len(tune))
    folds = GroupKFold(n_splits=5, shuffle=True, random_state=ts.SEED)
    for tr, te in folds.split(recall, groups=groups):
        a, b = ts.platt(recall[tr], y[tr])
        prob[te] = ts.sigmoid(a * recall[te] + b)
    a, b = ts.platt(recall, y)
    return prob, a, b


def calibrate(encoder: str, *, write: bool = True) -> dict[str, Any]:
    """Choose the bands (see the module doc) and, with ``write``, write them into the
    artefacts."""
    from citeguard.checks.bands import WORD_OVERLAP_BANDS_PATH, SupportBands
    from citeguard.checks.support import ARTIFACTS, SupportModel

    report: dict[str, Any] = {
        "rule": f"rejections >= {bsb.REJECT_PRECISION:.0%} right, acceptances >= "
        f"{bsb.ACCEPT_PRECISION:.0%} right, on out-of-fold AB tune rows "
        f"(cuts of >= {bsb.MIN_ROWS} rows)"
    }
    picked, prob, is_tune = local_oof(encoder)
    y = np.array([r["y"] for r in picked])
    chosen = bsb.choose_bands(y[is_tune], prob[is_tune])
    pool = ~is_tune & np.array([r["source_name"] != "augmented_numbers" for r in picked])
    lo, hi = chosen["reject_below"], chosen["accept_from"]
    chosen["training_files_out_of_fold"] = {
        "rows": int(pool.sum()),
        "not_supported_precision": round(float((y[pool & (prob < lo)] == 0).mean()), 4),
        "supported_precision": round(float((y[pool & (prob >= hi)] == 1).mean()), 4),
        "uncertain_share": round(float((pool & (prob >= lo) & (prob < hi)).sum() / pool.sum()), 4),
    }
    report["local"] = {"encoder": encoder, **chosen}
    meta = {
        "chosen_by": CHOSEN_BY,
        "chosen_on": f"out-of-fold P(supported) of {int(is_tune.sum())} AttributionBench tune "
        f"rows ({encoder} features; 5 group-aware folds, the shipped recipe and Platt)",
        "rule": report["rule"],
        "out_of_fold": chosen["out_of_fold"],
    }
    for name, path in ARTIFACTS.items():
        model = SupportModel.load(path)
        if name == encoder:
            this = SupportBands(lo, hi, source="", meta={**meta, "encoder": name})
        elif model.bands is not None and model.bands.meta.get("encoder") == name:
            continue  # chosen on its own encoder's scores earlier: kept
        else:
            note = f"chosen on the {encoder} encoder's scores: this artefact's trees share its "
            note += "features and recipe, but were not scored out of fold themselves"
            this = SupportBands(lo, hi, source="", meta={**meta, "note": note})
        if write:
            path.write_text(ts.artifact_json(replace(model, bands=this)), encoding="utf-8")
            print(f"wrote bands {lo} / {hi} into {path.name}", flush=True)

    # word overlap
    tune = [r for r in bsb.ab_rows() if r["part"] == "tune"]
    wprob, a, b = word_overlap_oof(tune)
    wy = np.array([r["y"] for r in tune])
    wchosen = bsb.choose_bands(wy, wprob)
    report["word_overlap"] = {"platt": [round(a, 6), round(b, 6)], **wchosen}
    artefact = {
        "platt_a": round(a, 6),
        "platt_b": round(b, 6),
        "bands": {
            "reject_below": wchosen["reject_below"],
            "accept_from": wchosen["accept_from"],
            "chosen_by": CHOSEN_BY,
            "chosen_on": f"out-of-fold P(supported) of {len(tune)} AttributionBench tune rows "
            "(content-word recall; Platt in 5 folds grouped by question)",
            "rule": report["rule"],
            "out_of_fold": wchosen["out_of_fold"],
        },
    }
    if write:
        WORD_OVERLAP_BANDS_PATH.write_text(json.dumps(artefact, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {WORD_OVERLAP_BANDS_PATH.name}: {json.dumps(wchosen)}", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m training support-bands",
        description=" ".join(__doc__.split("\n\n")[0].split()),
    )
    ap.add_argument("--encoder", default="minilm-onnx-int8", help="whose out-of-fold scores")
    ap.add_argument("--no-write", action="store_true", help="print the bands, write nothing")
    args = ap.parse_args(argv)
    report = calibrate(args.encoder, write=not args.no_write)
    if not args.no_write:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps({"calibration": report}, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

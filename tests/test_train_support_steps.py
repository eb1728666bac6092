"""The steps ``training/train_support.py``'s command line runs: its arguments, the final fit of
the shipped artifact, the held-out scores and the cross-validated grid, on small synthetic rows
whose label one rising feature carries."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import pytest

from citeguard.checks.support import FEATURE_NAMES
from training.train_support import (
    AB_SUBSETS,
    fit_artifact,
    held_out_scores,
    parse_args,
    search_grid,
)


def _data(n: int = 240) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray]:
    """Rows (train pool, AB tune, held-out AB) and (n, 2, features) features: the label rides on
    the first feature, its noise is small."""
    from training.support_fit import RISING

    rng = np.random.default_rng(7)
    signal = FEATURE_NAMES.index(next(f for f in FEATURE_NAMES if f in RISING))
    rows: list[dict[str, Any]] = []
    for i in range(n):
        part = ("train", "tune", "held_out")[i % 3]
        rows.append(
            {
                "y": int(i % 2 == 0),
                "part": part,
                "source_name": "pool" if part == "train" else "AB",
                "subset": AB_SUBSETS[i % len(AB_SUBSETS)] if part != "train" else "pool",
                "group": f"g{i // 4}",
                "question_in_tune": i % 5 == 0,
            }
        )
    x = rng.normal(scale=0.3, size=(n, 2, len(FEATURE_NAMES)))
    x[:, :, signal] += np.array([2.0 * r["y"] for r in rows])[:, None]
    train_idx = np.array([i for i, r in enumerate(rows) if r["part"] != "held_out"])
    return rows, x, train_idx


def test_parse_args_reads_the_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.argv", ["train_support.py"])
    args = parse_args()
    assert (args.model, args.k_units, args.search, args.no_write) == ("gbm", 1, False, False)
    monkeypatch.setattr("sys.argv", ["train_support.py", "--model", "lr", "--k-units", "2"])
    args = parse_args()
    assert (args.model, args.k_units) == ("lr", 2)


@pytest.mark.parametrize("kind", ["lr", "gbm"])
def test_fit_artifact_learns_the_carried_label(kind: str) -> None:
    rows, x_all, train_idx = _data()
    args = argparse.Namespace(k_units=1, model=kind, c=1.0)
    cv = {"platt": [1.0, 0.0], "threshold": 0.5}
    artifact = fit_artifact(rows, x_all[:, 0], train_idx, cv, args, 1.0)
    assert (artifact.k_units, artifact.threshold, artifact.platt_a) == (1, 0.5, 1.0)
    assert (artifact.trees is not None) is (kind == "gbm")
    assert artifact.meta["train_rows"] == len(train_idx)
    supported = [
        artifact.probability(dict(zip(FEATURE_NAMES, x_all[i, 0], strict=True))) for i in (0, 2)
    ]
    unsupported = [
        artifact.probability(dict(zip(FEATURE_NAMES, x_all[i, 0], strict=True))) for i in (1, 3)
    ]
    assert min(supported) > 0.5 > max(unsupported)


def test_held_out_scores_count_only_held_out_rows_and_unusable_ones_as_unsupported() -> None:
    rows, x_all, train_idx = _data()
    x = x_all[:, 0]
    args = argparse.Namespace(k_units=1, model="lr", c=1.0)
    artifact = fit_artifact(rows, x, train_idx, {"platt": [1.0, 0.0], "threshold": 0.5}, args, 1.0)
    held = [i for i, r in enumerate(rows) if r["part"] == "held_out"]
    ok = np.ones(len(rows), bool)
    out = held_out_scores(rows, x, ok, artifact)
    assert out["overall"]["n"] == len(held) and out["overall"]["macro_f1"] > 0.95
    assert sum(out[s]["n"] for s in AB_SUBSETS) == len(held)
    assert out["question_not_in_tune"]["n"] == sum(not rows[i]["question_in_tune"] for i in held)
    # rows without features score 0: every supported one among them is missed
    ok[[i for i in held if rows[i]["y"] == 1]] = False
    missed = held_out_scores(rows, x, ok, artifact)
    assert missed["overall"]["supported_precision"] is None  # nothing said supported


def test_search_grid_prints_one_line_per_setting(capsys: pytest.CaptureFixture[str]) -> None:
    rows, x_all, train_idx = _data()
    search_grid(rows, x_all, train_idx)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 * 5  # k = 1, 2; five model settings each
    assert [line.split()[0] for line in lines] == ["k=1"] * 5 + ["k=2"] * 5
    assert all("tune OOF" in line for line in lines)

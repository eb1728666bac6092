"""The long-page support harness (``benchmarks/bench_longpage.py``): its metrics on hand-built
inputs, its out-of-fold band choice, and a tiny run through a real Guard on synthetic pages
served on 127.0.0.1 (no shared data needed)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import bench_longpage as bl  # noqa: E402
from benchmarks.longdata import PageSpec, group_fold, sample  # noqa: E402
from citeguard.checks.bands import SupportBands  # noqa: E402


def test_auc_counts_pairs_and_ties() -> None:
    # positives 0.9, 0.4; negatives 0.6, 0.1: 3 of the 4 pairs ordered right
    assert bl.roc_auc([1, 1, 0, 0], [0.9, 0.4, 0.6, 0.1]) == pytest.approx(0.75)
    assert bl.roc_auc([1, 0], [0.5, 0.5]) == pytest.approx(0.5)  # a tie counts half
    assert bl.roc_auc([1, 1], [0.2, 0.3]) is None  # one class: no AUC


def test_metrics_on_a_hand_built_case() -> None:
    y = [1, 1, 0, 0]
    p = [0.9, 0.4, 0.6, 0.1]
    labels = ["supported", "uncertain", "supported", "not_supported"]
    m = bl.metrics(y, p, labels)
    assert m["auc"] == 0.75
    assert m["band_shares"]["supported"] == 0.5
    assert m["band_shares"]["uncertain"] == 0.25
    assert m["band_shares"]["not_supported"] == 0.25
    assert m["acceptance_precision"] == 0.5  # one of the two acceptances is right
    assert m["rejection_precision"] == 1.0
    assert m["coverage"] == 0.75
    assert m["supported_hard_rejected"] == 0.0
    assert m["unsupported_silently_passed"] == 0.5
    assert m["supported_passed_clean"] == 0.5
    # the guard's outcomes win over the labels: a supported claim rejected on another ground
    g = bl.metrics(y, [None, 0.4, 0.6, 0.1], labels, ["rejected", "flagged", "passed", "rejected"])
    assert g["supported_hard_rejected"] == 0.5
    assert g["supported_passed_clean"] == 0.0
    assert g["scored_rows"] == 3
    assert g["auc"] == 0.5  # 0.4 against 0.6 and 0.1


def _rows(n_per: int) -> list[dict[str, Any]]:
    """Separable scores: negatives 0.00-0.29, positives 0.70-0.99, groups over 5 folds."""
    rows = []
    for i in range(n_per * 2):
        y = i % 2
        p = round((0.70 if y else 0.0) + (i // 2 % 30) / 100, 2)
        g = f"g{i // 4}"
        rows.append({"y": y, "p": p, "group": g, "fold": group_fold(g), "kind": "whole_page"})
    return rows


def test_fit_bands_out_of_fold_ignores_held_out_rows() -> None:
    dev = [{**r, "split": "dev"} for r in _rows(150)]
    fitted = bl.fit_bands(dev)
    k = fitted["kinds"]["whole_page"]
    # by hand: each score 5 times; rejecting below 0.73 takes the 150 negatives and the 15
    # positives at 0.70-0.72 (150 / 165 = 0.909 >= 0.9; below 0.74: 150 / 170 < 0.9); accepting
    # could start at 0.25 (150 / 175 >= 0.85) but never under the rejection cut: one cut, 0.73
    assert (k["reject_below"], k["accept_from"]) == (0.73, 0.73)
    assert k["in_sample"]["rejection_precision"] == pytest.approx(150 / 165, abs=1e-4)
    oof = k["out_of_fold"]
    assert oof["coverage"] == 1.0 and oof["acceptance_precision"] == 1.0
    assert 0.85 < oof["rejection_precision"] < 1.0
    assert len(k["per_fold"]) == len({r["fold"] for r in dev}) > 1
    # held-out rows, however wrong, change nothing
    junk = [{**r, "split": "held_out", "y": 1 - r["y"]} for r in _rows(150)]
    assert bl.fit_bands(dev + junk)["kinds"] == fitted["kinds"]
    # the band table is what the guard's SupportBands read
    table = bl.band_table(fitted, "test")
    bands = SupportBands.from_json(table["kinds"]["whole_page"], source="t")
    assert bands.label(0.1) == "not_supported" and bands.label(0.95) == "supported"
    # held out with these bands: the flipped rows are all wrong
    held = bl.held_out_with_bands(junk, fitted, lambda r: r["p"])
    assert held["all/whole_page"]["acceptance_precision"] == 0.0


def test_fit_bands_with_a_noisy_fold_keeps_out_of_fold_figures_honest() -> None:
    rows = [{**r, "split": "dev"} for r in _rows(150)]
    bad = min(r["fold"] for r in rows)
    for r in rows:
        if r["fold"] == bad:
            r["y"] = 1 - r["y"]  # this fold disagrees with the others
    k = bl.fit_bands(rows)["kinds"]["whole_page"]
    # on the rows that chose them the acceptances meet the rule; out of fold the flipped
    # fold is labelled by the other folds' bands, and the figure shows the rule broken
    assert k["in_sample"]["acceptance_precision"] >= 0.85
    assert k["out_of_fold"]["acceptance_precision"] < 0.85


def test_every_set_mode_keeps_the_rules_on_each_set() -> None:
    a = [{**r, "split": "dev", "set": "a"} for r in _rows(800)]
    # set b: every score 0.70-0.99 eight times, half supported: no cut of b's
    # rows is 85% right when it accepts or 90% right when it rejects
    b = [
        {"y": y, "p": round(0.70 + k % 30 / 100, 2), "group": f"b{k}", "kind": "whole_page"}
        for k in range(120)
        for y in (0, 1)
    ]
    b = [{**r, "fold": group_fold(r["group"]), "split": "dev", "set": "b"} for r in b]
    pooled = bl.fit_bands(a + b)["kinds"]["whole_page"]
    strict = bl.fit_bands(a + b, mode="every_set")["kinds"]["whole_page"]
    assert pooled["accept_from"] < 1.0  # the mix of the two sets meets the rule
    assert (strict["reject_below"], strict["accept_from"]) == (0.0, 1.0)  # b's does not
    assert strict["out_of_fold"]["coverage"] == 0.0
    # a set too small to choose cuts of its own is not asked
    small = [{**r, "set": "c"} for r in b[:20]]
    alone_a = bl.fit_bands(a)["kinds"]["whole_page"]
    with_small = bl.fit_bands(a + small, mode="every_set")["kinds"]["whole_page"]
    assert with_small["accept_from"] < 1.0
    assert alone_a["accept_from"] < 1.0


def test_sample_is_stratified_and_seeded() -> None:
    rows = [{"id": str(i), "y": int(i < 30)} for i in range(100)]
    a, b = sample(rows, 10), sample(rows, 10)
    assert a == b and len(a) == 10 and sum(r["y"] for r in a) == 3


def _synthetic() -> dict[str, list[dict[str, Any]]]:
    filler = [
        f"The harbour council met on day {k} to discuss the railway budget and the museum."
        for k in range(60)
    ]
    fact = "The Orvell bridge was opened in 1931 by the engineer Marta Lindqvist."
    blocks = [("h1", "Bridges of the north"), ("h2", "History")]
    blocks += [("p", t) for t in filler[:30]] + [("p", fact)] + [("p", t) for t in filler[30:]]
    page = PageSpec("Bridges of the north", tuple(blocks), host="bridges.example.org")
    rows = []
    for i, (claim, y) in enumerate(
        (
            ("The Orvell bridge was opened in 1931 by the engineer Marta Lindqvist.", 1),
            ("Photosynthesis in desert cacti relies on crassulacean acid metabolism.", 0),
        )
    ):
        rows.append(
            {
                "id": f"syn:{i}",
                "set": "synthetic",
                "kind": "whole_page",
                "claim": claim,
                "y": y,
                "group": f"syn{i}",
                "fold": 1,
                "split": "dev",
                "model_trained_on": False,
                "subset": "synthetic",
                "page": page,
                "evidence_chars": len(page.text()),
            }
        )
    return {"synthetic": rows}


async def test_harness_runs_rows_through_the_guard() -> None:
    from citeguard.checks.entail import WordOverlapEntailer

    res = await bl.run(
        WordOverlapEntailer(), sets=["synthetic"], limit=None, rows_by_set=_synthetic()
    )
    assert res["rows"] == 2
    by_y = {r["y"]: r for r in res["scored"]}
    # the unrelated claim is rejected, the one the page states is not
    assert by_y[0]["guard"]["outcome"] == "rejected"
    assert by_y[1]["guard"]["outcome"] != "rejected"
    assert by_y[1]["guard"]["status"] == "ok"
    assert by_y[1]["alone"]["p"] > by_y[0]["alone"]["p"]
    s = res["summary"]["synthetic/whole_page/dev"]
    assert s["guard"]["rows"] == 2 and s["alone"]["auc"] == 1.0
    assert s["guard"]["supported_hard_rejected"] == 0.0


def test_whole_page_bands_keep_the_rules_on_each_kind_of_evidence() -> None:
    """``training.whole_page_bands.choose_per_kind``: one pair of bands whose cuts hold the
    confident gate's rules on every pool; a pool whose low scores are mixed pulls the reject
    cut down."""
    import numpy as np

    from training.whole_page_bands import choose_per_kind

    p = np.round(np.arange(200) / 200, 3)  # 0.000 .. 0.995, one row each
    clean = {"y": (p >= 0.5).astype(int), "p": p}  # every cut is right
    # the same scores, but every second row from 0.15 to 0.3 is supported: rejections below t are
    # >= 90% right only where few mixed rows fall under t
    y = (p >= 0.5).astype(int)
    y[(np.arange(200) % 2 == 0) & (p > 0.15) & (p < 0.3)] = 1
    mixed = {"y": y, "p": p}
    lo_clean, hi_clean = choose_per_kind({"long": clean})
    lo, hi = choose_per_kind({"long": clean, "short": mixed})
    # a clean pool: the cuts meet at the class boundary (rejections below it >= 90% right)
    assert 0.5 <= lo_clean == hi_clean < 0.6
    assert 0.1 <= lo < 0.3 and lo < lo_clean
    for pool in (clean, mixed):
        below = pool["p"] < lo
        assert below.sum() >= 20 and (pool["y"][below] == 0).mean() >= 0.90
        above = pool["p"] >= hi
        assert above.sum() >= 20 and (pool["y"][above] == 1).mean() >= 0.85
    # nothing to choose on: nothing rejected, nothing accepted
    empty = {"y": np.zeros(0, dtype=int), "p": np.zeros(0)}
    assert choose_per_kind({"long": empty}) == (0.0, 1.0)


def test_hard_rejects_puts_each_rejection_under_its_rule() -> None:
    from benchmarks.hard_rejects import rule_of, table

    def row(
        y: int, split: str, outcome: str, status: str, label: Any, reason: str
    ) -> dict[str, Any]:
        return {
            "y": y,
            "split": split,
            "outcome": outcome,
            "status": status,
            "label": label,
            "reason": reason,
        }

    rows = [
        row(0, "dev", "rejected", "not_entailed", "not_supported", "the passage does not ..."),
        row(1, "dev", "rejected", "not_entailed", "not_supported", "the passage does not ..."),
        row(0, "dev", "rejected", "not_entailed", "contradicted", "number differs: claim '4'"),
        row(1, "dev", "rejected", "passage_missing", None, "paraphrase drifts too far"),
        row(0, "dev", "rejected", "passage_missing", None, "the quote is not on the page"),
        row(1, "dev", "flagged", "ok", "uncertain", "uncertain: negation differs"),
        row(1, "held_out", "rejected", "not_entailed", "contradicted", "negation differs"),
    ]
    assert [rule_of(r) for r in rows] == [
        "band_not_supported",
        "band_not_supported",
        "contra_number",
        "missing_paraphrase",
        "missing_quote",
        None,
        "contra_negation",
    ]
    got = table({"s": rows})
    band = got["dev"]["rules"]["band_not_supported"]
    assert (band["rejections"], band["right"], band["share_right"]) == (2, 1, 0.5)
    assert band["per_set"] == {"s_right": 1, "s_wrong": 1}
    # dev: 3 supported rows, 2 hard-rejected; held out: 1 of 1
    assert got["dev"]["sets"]["s"]["supported_hard_rejected"] == round(2 / 3, 4)
    assert got["held_out"]["sets"]["s"]["supported_hard_rejected"] == 1.0
    assert set(got["held_out"]["rules"]) == {"contra_negation"}

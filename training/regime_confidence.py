"""Choose how far each freshness rule's regime is trusted, and measure the gate it makes.

    python -m training regime-confidence [--no-write] [--model]

A freshness hard reject applies the floor of the regime the gate believes (real-time 2 days,
fast 30, slow 365, insensitive none). When the question is truly slower than that regime, an
honest answer citing an older source is rejected. This script measures, per labelled source,
the share of questions **gated on a regime faster than their true one** (the error a hard
reject can make), for today's gate (the rules' regime, or the learned model's) and for the
confident gate, which gates on the slowest *plausible* regime (``FreshnessClass.gate_regime``).

The table (citeguard/checks/regime_confidence.json). For each rule that decides a regime
(``regime|label``, ``_rule_decision``'s label; the learned model's "insensitive → slow" is the
label ``model raise``) and each candidate gate g at or below its regime (fast, slow), the
*error* is the share of questions decided by that rule whose true regime is slower than g, the
worst over the training sources that have such questions (one source, FreshQA dev, in the
shipped table), each source's rate shrunk towards that
source's rate over the rule's whole regime by ``PRIOR`` pseudo-questions. The gate is the
fastest g whose error is at most ``alpha``; the plausible regimes run from the rule's regime
down to it. Real time and fast are one class in every source (none labels real time), so a
real-time rule is judged as fast.

Truth per source (see ../shared/data/README.md, sections 4 and 6): FreshQA's never / slow /
fast; SituatedQA's never (insensitive) and changing (slower than fast only where the derived
``regime_fine`` says slow; unknown where it is null, so those rows do not count at the fast
gate); RealTimeQA fast (as asked that week); PAT slow. A source vouches for a gate only if its
labels can show an error there (it has questions slower than the gate): RealTimeQA never does,
PAT only at the fast gate; a rule no source can vouch for is not trusted.

Nothing is tuned: ``alpha`` is the issue's target itself (5%), ``PRIOR`` is 2, and a gate is
trusted only on at least 1 / alpha (20) of the rule's own questions (``min_questions``): with
fewer, one error is already more than alpha, so no error seen says little.

**Licences (issue 54).** The table ships, so it is built from FreshQA dev alone
(``LICENSED``: Apache-2.0); SituatedQA, RealTimeQA and PAT-Questions have no licence upstream
and only score it. FreshQA is scored **out of fold** (five folds by question pattern,
``train_regime.fold_of``; each fold gated by a table built on the other four), the other three
**out of source**. A rule with too few FreshQA questions to show its error within ``alpha``
is not trusted (its regime stays a guess: gated leniently and asked about, never a hard
reject). Results: training/results/regime_confidence.json.

``--model`` adds the learned model's rows (train_regime.py's FreshQA fit, grouped out of fold)
and the shipped table's ``model raise`` row from FreshQA's out-of-fold raises.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from citeguard.checks.freshness import (  # noqa: E402
    MODEL_RAISE_LABEL,
    REGIME_CONFIDENCE_PATH,
    Regime,
    RegimeConfidence,
    merged_regime,
    regime_features,
)
from training.train_regime import DATA, FOLDS, SOURCES, Row, fold_of, load_rows  # noqa: E402

RESULTS = ROOT / "training" / "results"
#: the sources the shipped table may be built from: FreshQA dev (Apache-2.0). SituatedQA,
#: RealTimeQA and PAT-Questions have no licence upstream (development and testing only,
#: shared/data/README.md): they score the table out of source
LICENSED = ("freshqa",)
TARGET = 0.05  # issue 32: hard rejects on a truly slower question, per source
PRIOR = 2.0  # pseudo-questions at the regime's pooled rate, per source cell
ORDER = ("insensitive", "slow", "fast")
GATES = ("fast", "slow")  # the candidate gates with a floor, fastest first


@dataclass
class Item:
    row: Row
    regime: Regime  # the decision to gate on today
    label: str  # the rule (or "model raise") that decided it

    @property
    def merged(self) -> str:
        return merged_regime(self.regime)


def slower_than(row: Row, gate: str) -> bool | None:
    """Whether the row's true regime is slower than ``gate`` (None: the label cannot tell)."""
    if row.gold in ("insensitive", "slow", "fast"):
        return ORDER.index(row.gold) < ORDER.index(gate)
    # SituatedQA "changing": slower than slow never; slower than fast where regime_fine says
    if gate == "slow":
        return False
    return None if row.fine is None else row.fine == "slow"


AGGREGATE = "max"  # every training source must vouch for a rule; "mean": their average


def build_table(items: Sequence[Item], alpha: float) -> dict[str, Any]:
    """The confidence table (RegimeConfidence's JSON) from ``items``' decisions and truth."""
    # a source vouches for a gate only if its labels can show an error there (some question
    # slower than the gate): PAT and RealTimeQA say nothing about never-changing questions
    expressive = {
        gate: {it.row.source for it in items if slower_than(it.row, gate)} for gate in GATES
    }
    # cells[(key, gate)][source] = [errors, known]
    cells: dict[tuple[str, str], dict[str, list[int]]] = {}
    for it in items:
        if it.merged == "insensitive":
            continue
        for key in (f"{it.merged}|{it.label}", f"{it.merged}|*"):
            for gate in GATES[GATES.index(it.merged) :]:
                wrong = slower_than(it.row, gate)
                if wrong is None or it.row.source not in expressive[gate]:
                    continue
                cell = cells.setdefault((key, gate), {}).setdefault(it.row.source, [0, 0])
                cell[0] += int(wrong)
                cell[1] += 1
    decisions: dict[str, Any] = {}
    for key in sorted({k for k, _ in cells}):
        regime = key.split("|", 1)[0]
        error: dict[str, float] = {}
        n: dict[str, int] = {}
        gate_of = "insensitive"
        for gate in GATES[GATES.index(regime) :]:
            by_source = cells.get((key, gate))
            pooled = cells.get((f"{regime}|*", gate))
            if not by_source or not pooled:
                continue
            # each source's cell shrunk towards that source's rate over the whole regime
            rates = [
                (k + PRIOR * pooled[src][0] / pooled[src][1]) / (m + PRIOR)
                for src, (k, m) in by_source.items()
            ]
            error[gate] = round(max(rates) if AGGREGATE == "max" else sum(rates) / len(rates), 4)
            n[gate] = sum(m for _, m in by_source.values())
        for gate in GATES[GATES.index(regime) :]:
            if gate in error and error[gate] <= alpha and n[gate] >= min_questions(alpha):
                gate_of = gate
                break
        decisions[key] = {"gate": gate_of, "error": error, "n": n}
    return {
        "format": "citeguard-regime-confidence/1",
        "alpha": alpha,
        "decisions": decisions,
    }


def min_questions(alpha: float) -> int:
    """The fewest questions of a rule that can vouch for its gate: 1 / alpha, rounded up (20
    at 5%). Fewer cannot show an error rate within alpha (one error among them is already
    more), whatever the prior says."""
    return math.ceil(1.0 / alpha - 1e-9)


def gated(table: RegimeConfidence, it: Item) -> Regime:
    plausible, _ = table.assess(it.regime, it.label)
    return min([*plausible, it.regime], key=list(Regime).index) if plausible else it.regime


def evaluate(items: Sequence[Item], gate: Callable[[Item], Regime]) -> dict[str, Any]:
    """Per source: the share of questions gated faster than their truth, the share left
    uncertain, and the share of truly fast questions still gated fast."""
    wrong = known = uncertain = fast_n = fast_kept = 0
    for it in items:
        g = gate(it)
        uncertain += g is not it.regime
        m = merged_regime(g)
        if m != "insensitive":
            w = slower_than(it.row, m)
            if w is not None:
                known += 1
                wrong += int(w)
        else:
            known += 1
        if it.row.gold == "fast" or it.row.fine == "fast":
            fast_n += 1
            fast_kept += m == "fast"
    return {
        "n": len(items),
        "n_known": known,
        "gated_faster_than_truth": round(wrong / known, 4) if known else None,
        "uncertain_share": round(uncertain / len(items), 4) if items else None,
        "n_truly_fast": fast_n,
        "truly_fast_gated_fast": round(fast_kept / fast_n, 4) if fast_n else None,
    }


def today(it: Item) -> Regime:
    return it.regime


def rules_items(rows: Sequence[Row]) -> list[Item]:
    out = []
    for r in rows:
        _, (regime, label, _) = regime_features(r.question, now=r.now)
        out.append(Item(r, regime, label))
    return out


def model_items(rows: Sequence[Row]) -> list[Item]:
    """Items decided by the learned model as ``train_regime.py`` fits it (FreshQA dev only,
    its configuration): every row called by a model fitted on the FreshQA rows of the other
    pattern folds (grouped out of fold; the other sources out of source)."""
    from training.train_regime import LICENSED as FIT_ON
    from training.train_regime import choose, featurise, grouped_oof

    x, decisions = featurise(rows)
    config, _ = choose(rows, x, decisions, FIT_ON)
    predicted = grouped_oof(rows, x, decisions, FIT_ON, config)
    return [
        Item(r, p, MODEL_RAISE_LABEL if p is not d[0] else d[1])
        for r, p, d in zip(rows, predicted, decisions, strict=True)
    ]


def licensed_table(items: Sequence[Item], alpha: float) -> dict[str, Any]:
    """The table from the licensed sources' questions only (what ships)."""
    return build_table([it for it in items if it.row.source in LICENSED], alpha)


def run(items: Sequence[Item], name: str, alpha: float = TARGET) -> dict[str, Any]:
    """Each source gated by a table built on FreshQA dev: FreshQA out of fold (five folds by
    question pattern, each gated by a table built on the other four), the other sources out of
    source."""
    out: dict[str, Any] = {}
    shipped = RegimeConfidence(licensed_table(items, alpha))
    for held in SOURCES:
        test = [it for it in items if it.row.source == held]
        if held in LICENSED:
            by_fold = {
                f: RegimeConfidence(
                    licensed_table([it for it in items if fold_of(it.row.group) != f], alpha)
                )
                for f in range(FOLDS)
            }
            tables = {id(it): by_fold[fold_of(it.row.group)] for it in test}
        else:
            tables = {id(it): shipped for it in test}

        def gate(it: Item, tables: dict[int, RegimeConfidence] = tables) -> Regime:
            return gated(tables[id(it)], it)

        out[held] = {"today": evaluate(test, today), "confident": evaluate(test, gate)}
        t, c = out[held]["today"], out[held]["confident"]
        print(
            f"{name:<6} {held:<11} n={t['n']:>4}  gated faster than truth "
            f"{t['gated_faster_than_truth']:.3f} -> {c['gated_faster_than_truth']:.3f}  "
            f"uncertain {c['uncertain_share']:.3f}  truly fast gated fast "
            f"{_f(t['truly_fast_gated_fast'])} -> {_f(c['truly_fast_gated_fast'])}",
            flush=True,
        )
    return out


def _f(v: float | None) -> str:
    return "  n/a" if v is None else f"{v:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--model", action="store_true", help="also the learned model's rows")
    args = ap.parse_args(argv)
    if not DATA.is_dir():
        print(f"no data at {DATA}", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    rows = load_rows()
    ritems = rules_items(rows)
    results: dict[str, Any] = {
        "alpha": TARGET,
        "prior_pseudo_questions": PRIOR,
        "aggregate": AGGREGATE,
        "fitted_on": list(LICENSED),
        "scored": "FreshQA dev out of fold (5 folds by question pattern), SituatedQA, "
        "RealTimeQA and PAT-Questions out of source",
        "metric": "share of a source's questions gated on a regime faster than their true one "
        "(real time and fast merged; SituatedQA 'changing' rows without regime_fine are left "
        "out at a fast gate); uncertain_share: questions gated on a slower regime than the "
        "rules'/model's guess; truly_fast_gated_fast: of the questions labelled fast (SituatedQA: "
        "regime_fine fast), the share still gated on the fast floor",
        "rules": run(ritems, "rules"),
    }
    # not shipped: what a looser per-rule error allowance would buy, scored the same way
    results["sensitivity_alpha"] = {f"{a:g}": run(ritems, f"a={a:g}", a) for a in (0.1, 0.2)}
    shipped = licensed_table(ritems, TARGET)
    if args.model:
        mitems = model_items(rows)
        results["model"] = run(mitems, "model")
        # the shipped table's "model raise" row: FreshQA's out-of-fold raises
        raise_only = [it for it in mitems if it.label == MODEL_RAISE_LABEL]
        extra = licensed_table([*ritems, *raise_only], TARGET)["decisions"]
        key = f"slow|{MODEL_RAISE_LABEL}"
        if key in extra:
            shipped["decisions"][key] = extra[key]
    shipped["trained"] = {
        "script": "training/regime_confidence.py",
        "data": "shared/data/freshness/freshqa_dev.jsonl (FreshQA dev, Apache-2.0) only",
        "aggregate": AGGREGATE,
        "prior_pseudo_questions": PRIOR,
    }
    results["seconds"] = round(time.perf_counter() - t0, 1)
    if not args.no_write:
        REGIME_CONFIDENCE_PATH.write_text(json.dumps(shipped, indent=1) + "\n", encoding="utf-8")
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "regime_confidence.json").write_text(
            json.dumps(results, indent=2) + "\n", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Every hard reject the guard makes on claims, rule by rule: how often it is right (issue 42).

A hard reject is what a user sees as "this citation is wrong". The confident gate holds its
probability band to "rejections >= 90% right"; this benchmark holds every *other* rule that
rejects a claim's citation to the same bar, on the four long-page development sets of
:mod:`benchmarks.longdata` (WiCE and ExpertQA with their own pages, AttributionBench with its
evidence inside a real page and alone), each row one answer citing one page, checked by
``Guard.check`` (default policy, local model) against a loopback server.

Each rejected row is put under the rule that rejected it, read from its status and reason:

- ``band_not_supported``: the model's P(supported) under the rejection band;
- ``contra_number``: a number the evidence states otherwise (``conflicting_numbers``);
- ``contra_negation``: a "not" on one side only (before this review: a contradiction);
- ``missing_paraphrase``: the passage step's relevance floor ("paraphrase drifts too far");
- ``missing_quote`` / ``passage_altered``: a quotation not on the page / changed;
- ``bot_wall`` and the rest as their status.

"Right" means the row's human label is unsupported. Rules are judged on the ``dev`` split
(WiCE and ExpertQA: group folds 1-4; AB: its tune half) and shown on ``held_out`` (never
decided on). Rows that are quotations are judged on the quote as much as on the claim, so the
quote rules' figures say how often a quote failure is also an unsupported claim, not whether
the quote was exact.

    python -m benchmarks.hard_rejects            # writes results/hard_rejects.json (~45 s)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks import bench_longpage as blp
from benchmarks import longdata as ld

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "hard_rejects.json"
SETS = ("wice", "expertqa", "ab_long", "ab_short")


def rule_of(row: dict[str, Any]) -> str | None:
    """The rule that hard-rejected ``row`` (None: not rejected)."""
    if row["outcome"] != "rejected":
        return None
    status, why = row["status"], row["reason"]
    if status == "not_entailed":
        if row["label"] == "contradicted":
            if "number differs" in why:
                return "contra_number"
            return "contra_negation" if "negation" in why else "contra_other"
        return f"band_{row['label']}"
    if status == "passage_missing":
        if "paraphrase drifts" in why:
            return "missing_paraphrase"
        return "missing_quote" if "quote" in why or "passage" in why else "missing_other"
    return str(status)


async def run_sets(limit: int | None = None) -> dict[str, list[dict[str, Any]]]:
    """Each set's rows through the guard: label, split, outcome, status, reason, P."""
    data = ld.load_sets(list(SETS))
    out: dict[str, list[dict[str, Any]]] = {}
    for name in SETS:
        rows = ld.sample(data[name], limit)
        if not rows:
            continue
        got = await blp.run_guard_local(rows)
        out[name] = [
            {"y": r["y"], "split": r["split"], "claim": r["claim"][:300], **g}
            for r, g in zip(rows, got, strict=True)
        ]
    return out


def table(scored: Mapping[str, Sequence[dict[str, Any]]]) -> dict[str, Any]:
    """Per split and rule: rejections, how many right, the share right, per set; and per set
    the share of supported rows hard-rejected."""
    out: dict[str, Any] = {}
    for split in ("dev", "held_out"):
        rules: dict[str, Counter[str]] = defaultdict(Counter)
        supported: dict[str, Any] = {}
        for name, rows in scored.items():
            these = [r for r in rows if r["split"] == split]
            sup = [r for r in these if r["y"] == 1]
            for r in these:
                rule = rule_of(r)
                if rule is not None:
                    rules[rule]["right" if r["y"] == 0 else "wrong"] += 1
                    rules[rule][f"{name}_{'right' if r['y'] == 0 else 'wrong'}"] += 1
            supported[name] = {
                "rows": len(these),
                "supported_rows": len(sup),
                "supported_hard_rejected": round(
                    sum(r["outcome"] == "rejected" for r in sup) / len(sup), 4
                )
                if sup
                else None,
            }
        out[split] = {
            "rules": {
                rule: {
                    "rejections": c["right"] + c["wrong"],
                    "right": c["right"],
                    "share_right": round(c["right"] / (c["right"] + c["wrong"]), 4),
                    "per_set": {k: v for k, v in sorted(c.items()) if "_" in k},
                }
                for rule, c in sorted(rules.items())
            },
            "sets": supported,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="rows a set (seeded sample)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    scored = asyncio.run(run_sets(args.limit))
    if not scored:
        print("no data: ../shared/data is absent")
        return 0
    res = {
        "what": __doc__.splitlines()[0],
        "policy": "default (local model, minilm-onnx-int8), loopback allowed, attempt 1",
        "load_average": list(os.getloadavg()),
        "now": table(scored),
    }
    previous = json.loads(args.out.read_text()) if args.out.is_file() else {}
    for key in ("before", "before_commit"):
        if key in previous:
            res[key] = previous[key]
    args.out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res["now"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

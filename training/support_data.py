"""The claim-support training data (``train_support.py``): the labelled pairs read from
../shared/data/claims (read-only) with their tune / held-out split, and the changed-number
negatives added to them."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

DATA = ROOT.parent / "shared" / "data" / "claims"
CACHE = Path("/tmp/support_cache")
RESULTS = ROOT / "training" / "results"
TRAIN_FILES = ("wice_train", "expertqa_pool_train", "factcheckgpt_train", "summedits_train")
AB_SUBSETS = ("Stanford-GenSearch", "ExpertQA", "LFQA")
SEED = 13
K_MAX = 2  # units prepared and embedded; smaller k are prefixes of these
# SummEdits is out of domain and the largest pool: a group-wise sample of it keeps fitting cheap.
SUMMEDITS_GROUP_SHARE = 0.25
EMBED_VERSION = "v1"


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def load_rows() -> list[dict[str, Any]]:
    ab = [json.loads(x) for x in (DATA / "attributionbench_dev.jsonl").open(encoding="utf-8")]
    held_questions = set()
    for r in ab:
        r["part"] = "tune" if int(_sha(r["id"]), 16) % 2 == 0 else "held_out"
        r["group"] = "AB:" + r["question"]
        r["source_name"] = "AB"
        if r["part"] == "held_out":
            held_questions.add(r["question"])
    tune_questions = {r["question"] for r in ab if r["part"] == "tune"}
    for r in ab:
        r["question_in_tune"] = r["question"] in tune_questions
    rows: list[dict[str, Any]] = []
    for name in TRAIN_FILES:
        for line in (DATA / f"{name}.jsonl").open(encoding="utf-8"):
            r = json.loads(line)
            if name == "expertqa_pool_train":
                if r["question"] in held_questions:
                    continue
                # Same question as AB tune rows: keep them in one fold.
                r["group"] = "AB:" + r["question"]
            if (
                name == "summedits_train"
                and int(_sha(r["group"]), 16) % 100 >= 100 * SUMMEDITS_GROUP_SHARE
            ):
                continue
            r["part"] = "train"
            r["source_name"] = name
            rows.append(r)
    # AB first, so a partial embedding cache covers the rows that matter most.
    rows = ab + rows
    for r in rows:
        r["y"] = int(r["label"] == "supported")
    return rows


_NUMBER_RE = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?(?![\w])")


def _changed_number(token: str, h: int) -> str:
    """A different number of the same shape: a year a few years off, any other number scaled."""
    digits = token.replace(",", "")
    if "." in digits:
        whole, frac = digits.split(".", 1)
        last = (int(frac[-1]) + 1 + h % 8) % 10
        return f"{whole}.{frac[:-1]}{last}"
    value = int(digits)
    if "," not in token and len(digits) == 4 and 1000 <= value <= 2100:
        return str(value + (1 + h % 9) * (1 if h % 2 else -1))
    changed = value * (2 + h % 3) + (1 if value == 0 else 0)
    return f"{changed:,}" if "," in token else str(changed)


def augment_numbers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Synthetic negatives for what a guard must never pass: a supported training pair whose
    claim states a number the evidence also states, with that number changed ("opened in 1937"
    → "opened in 1941"), labelled not supported. The data hold too few such conflicts (70 of
    ~6,500 rows) for trees to learn them. Training rows only (never AB's held-out half); each
    copy keeps its source row's group, so it lands in the same fold."""
    out: list[dict[str, Any]] = []
    for r in rows:
        if r["part"] == "held_out" or r["y"] != 1:
            continue
        for m in _NUMBER_RE.finditer(r["claim"]):
            token = m.group(0)
            if token not in r["evidence"]:
                continue
            h = int(_sha("aug:" + r["claim"]), 16)
            claim = r["claim"][: m.start()] + _changed_number(token, h) + r["claim"][m.end() :]
            out.append(
                {
                    **r,
                    "id": f"aug:{r.get('id', _sha(r['claim']))}",
                    "claim": claim,
                    "label": "not_supported",
                    "y": 0,
                    "part": "train",
                    "source_name": "augmented_numbers",
                    "subset": "augmented-numbers",
                }
            )
            break
    return out


# ---------------------------------------------------------------------------------------------
# Features, with an on-disk cache of the embedding-dependent part
# ---------------------------------------------------------------------------------------------

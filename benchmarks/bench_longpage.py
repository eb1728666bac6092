"""Claim support where the evidence is: the long-page development sets through the guard
(issue 42), the entailer alone on the whole page, and support bands chosen out of fold.

    python -m benchmarks.bench_longpage                     # dev folds, 60 rows a set
    python -m benchmarks.bench_longpage --split held_out --limit 0   # every held-out row
    python -m benchmarks.bench_longpage --sets wice,ab_long --limit 30 --no-alone

Rows come from :mod:`benchmarks.longdata` (``../shared/data``; nothing without it). Each row's
page (title, headings, paragraphs, its metadata in the head) is served on 127.0.0.1 by
``bench_quotes``' loopback server at a URL of its own, and its claim goes through
``Guard.check`` as a one-claim answer citing that URL: default policy (loopback allowed),
entailment ``local`` (the shipped model and bands), attempt 1. Per row: the citation's status
and outcome (``passed`` clean / ``flagged`` uncertain / ``rejected``), the per-claim view's
label, P(supported) and backend (``Verdict.claims``), and the check's seconds (4 checks at once:
a row's time includes its neighbours'). Beside it, the same local entailer called directly on
(claim, the page's whole text): the issue's "entailer alone".

Figures per set × kind × split (:func:`metrics`): ROC AUC of P(supported), band shares,
precision of acceptances and of rejections, coverage of confident decisions, supported
hard-rejected, unsupported silently passed, supported passed clean.

Bands (:func:`fit_bands`): per evidence kind, on dev rows only, the two thresholds under the
confident gate's rules (``bench_support_bands.choose_bands``: rejections >= 90% right,
acceptances >= 85% right, cuts of >= 20 rows), chosen on all dev folds but one and applied to
that one (folds by group), so the precision and coverage they report are out of fold; the
thresholds written are those chosen on every dev row, in the format ``SupportBands.from_json``
reads (``results/longpage_bands.json``). The held-out rows are never used to choose them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import longdata as ld
from benchmarks.bench_support_bands import (
    ACCEPT_PRECISION,
    MIN_ROWS,
    REJECT_PRECISION,
    ClaimPage,
    _outcome,
    choose_bands,
    page_server,
)
from benchmarks.context import NOW, Config, Context

RESULTS = Path(__file__).resolve().parent / "results"
OUT = RESULTS / "longpage.json"
BANDS_OUT = RESULTS / "longpage_bands.json"
ORACLE_OUT = RESULTS / "longpage_oracle.json"
ROWS_OUT = Path("/tmp/citeguard_longpage/rows.jsonl")
REJECT = ("not_supported", "contradicted")
BAND_LABELS = ("supported", "uncertain", "not_supported", "contradicted")
CONCURRENCY = 4
MIN_SET_ROWS = 100  # every_set bands: a set smaller than this is not asked


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


def roc_auc(y: Sequence[int], p: Sequence[float]) -> float | None:
    """ROC AUC of ``p`` for ``y`` (ties count half; sklearn's); None with one class only."""
    from sklearn.metrics import roc_auc_score

    if len(set(y)) < 2:
        return None
    return float(roc_auc_score(np.asarray(y), np.asarray(p, dtype=float)))


def _share(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def metrics(
    y: Sequence[int],
    prob: Sequence[float | None],
    labels: Sequence[str | None],
    outcomes: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The figures of one group of rows.

    ``labels``: the support label per row (None: nobody judged it); ``outcomes``: the guard's
    ``passed`` / ``flagged`` / ``rejected`` per row (None: read from the labels — ``supported``
    passes, a rejecting label rejects, the rest is flagged). AUC over the rows with a P.
    """
    n = len(y)
    if outcomes is None:
        outcomes = [
            "passed" if lab == "supported" else "rejected" if lab in REJECT else "flagged"
            for lab in labels
        ]
    scored = [(yy, pp) for yy, pp in zip(y, prob, strict=True) if pp is not None]
    acc = [yy for yy, lab in zip(y, labels, strict=True) if lab == "supported"]
    rej = [yy for yy, lab in zip(y, labels, strict=True) if lab in REJECT]
    sup = [o for yy, o in zip(y, outcomes, strict=True) if yy == 1]
    uns = [o for yy, o in zip(y, outcomes, strict=True) if yy == 0]
    auc = roc_auc([a for a, _ in scored], [b for _, b in scored]) if scored else None
    counts = Counter(lab or "none" for lab in labels)
    return {
        "rows": n,
        "supported_rows": sum(y),
        "scored_rows": len(scored),
        "auc": None if auc is None else round(auc, 4),
        "band_shares": {lab: _share(counts[lab], n) for lab in (*BAND_LABELS, "none")},
        "acceptance_precision": _share(sum(acc), len(acc)),
        "rejection_precision": _share(len(rej) - sum(rej), len(rej)),
        "coverage": _share(len(acc) + len(rej), n),
        "supported_hard_rejected": _share(sup.count("rejected"), len(sup)),
        "unsupported_silently_passed": _share(uns.count("passed"), len(uns)),
        "supported_passed_clean": _share(sup.count("passed"), len(sup)),
    }


# --------------------------------------------------------------------------------------------
# Running rows through the guard and the entailer
# --------------------------------------------------------------------------------------------


def claim_page(row: dict[str, Any]) -> ClaimPage:
    """The row's page at a URL of its own (its source's host where it has one) and the
    one-claim answer citing it."""
    page: ld.PageSpec = row["page"]
    slug = f"{ld._sha(row['id']):x}"[:14]
    host = page.host or f"docs{ld._sha(row['group']) % 17}.example.org"
    url = f"http://{host}/{row['set']}/{slug}"
    answer = f"{row['claim']} [1]\n\nSources:\n[1] {url}\n"
    return ClaimPage(row, url, page.html(), answer)


def guard_policy() -> Any:
    """The default policy with loopback allowed and the local backend."""
    from citeguard.policy import EntailmentPolicy, FetchPolicy, Policy

    return Policy(
        fetch=FetchPolicy(allow_private_addresses=True),
        entailment=EntailmentPolicy(backend="local"),
    )


async def run_guard(
    rows: Sequence[dict[str, Any]], entailer: Any, *, policy: Any = None, progress: int = 0
) -> list[dict[str, Any]]:
    """Each row's claim through ``Guard.check`` (see the module doc); one result dict a row."""
    from citeguard import Guard

    pages = [claim_page(r) for r in rows]
    server = page_server(pages)
    await server.start()
    sem = asyncio.Semaphore(CONCURRENCY)
    done: list[int] = []
    try:
        async with Guard(
            policy or guard_policy(), entailer=entailer, resolver=server.resolver(), now=lambda: NOW
        ) as guard:

            async def one(p: ClaimPage) -> dict[str, Any]:
                async with sem:
                    t0 = time.perf_counter()
                    v = await guard.check(p.answer)
                    took = time.perf_counter() - t0
                done.append(1)
                if progress and len(done) % progress == 0:
                    print(f"[longpage] {len(done)}/{len(pages)} rows", file=sys.stderr, flush=True)
                cit = v.citations[0] if v.citations else None
                cl = v.claims[0] if v.claims else None
                return {
                    "status": cit.status.value if cit else "none",
                    "reason": (cit.reason if cit else "")[:200],
                    "outcome": _outcome(v),
                    "label": None if cl is None else cl.label,
                    "p": None if cl is None else cl.probability,
                    "backend": None if cl is None else cl.backend,
                    "evidence_chars": len(cl.evidence or "") if cl is not None else 0,
                    "seconds": round(took, 4),
                }

            return list(await asyncio.gather(*(one(p) for p in pages)))
    finally:
        await server.aclose()


async def run_guard_local(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`run_guard` with a fresh local entailer (the default backend), closed after."""
    from citeguard.checks.entail import LocalEntailer

    entailer = LocalEntailer()
    try:
        return await run_guard(rows, entailer)
    finally:
        await entailer.aclose()


async def run_alone(rows: Sequence[dict[str, Any]], entailer: Any) -> list[dict[str, Any]]:
    """The entailer called directly on (claim, the page's whole text), a row at a time."""
    out: list[dict[str, Any]] = []
    for r in rows:
        t0 = time.perf_counter()
        [s] = await entailer.score([(r["claim"], r["page"].text())])
        out.append({"label": s.label, "p": s.score, "seconds": round(time.perf_counter() - t0, 4)})
    return out


async def score_rows(
    rows: Sequence[dict[str, Any]], entailer: Any, *, alone: bool = True, policy: Any = None
) -> list[dict[str, Any]]:
    """The rows with ``guard`` (and ``alone``) results; the page is left out of the result.
    ``policy``: the guard's (default: :func:`guard_policy`)."""
    progress = 100 if len(rows) >= 200 else 0
    guard = await run_guard(rows, entailer, policy=policy, progress=progress)
    solo = await run_alone(rows, entailer) if alone else [None] * len(rows)
    return [
        {
            **{k: v for k, v in r.items() if k != "page"},
            "guard": g,
            **({"alone": a} if a is not None else {}),
        }
        for r, g, a in zip(rows, guard, solo, strict=True)
    ]


async def oracle(entailer: Any, split: str = "both") -> dict[str, Any]:
    """WiCE rows: the entailer on (claim, the annotators' supporting lines) against (claim,
    whole page): how much a perfect evidence finder would give the model. Per split."""
    rows = [r for r in ld.load_sets(["wice"])["wice"] if r.get("oracle_evidence")]
    out: dict[str, Any] = {}
    for s in ("dev", "held_out") if split == "both" else (split,):
        part = [r for r in rows if r["split"] == s]
        if not part:
            continue
        pairs = [(r["claim"], r["oracle_evidence"]) for r in part]
        best = await entailer.score(pairs)
        whole = await entailer.score([(r["claim"], r["page"].text()) for r in part])
        y = [r["y"] for r in part]
        out[f"wice/{s}"] = {
            "oracle_lines": metrics(y, [x.score for x in best], [x.label for x in best]),
            "whole_page": metrics(y, [x.score for x in whole], [x.label for x in whole]),
        }
    return out


def summarise(scored: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Figures per ``set/kind/split`` (and per ``kind/split`` over the sets), for the guard
    and the entailer alone, with the guard's statuses and seconds per claim."""
    keys: dict[str, list[dict[str, Any]]] = {}
    for r in scored:
        keys.setdefault(f"{r['set']}/{r['kind']}/{r['split']}", []).append(r)
        keys.setdefault(f"all/{r['kind']}/{r['split']}", []).append(r)
        if not r.get("model_trained_on", True) and r["set"] in ("wice", "expertqa"):
            # the shipped support model was fitted on the rest of these sets' rows
            keys.setdefault(f"{r['set']}/{r['kind']}/{r['split']}_model_unseen", []).append(r)
        if r["split"] == "held_out" and r.get("question_in_dev") is False:
            # AB's held-out half is split by row: these rows' questions have no dev rows
            keys.setdefault(f"{r['set']}/{r['kind']}/held_out_new_question", []).append(r)
    out: dict[str, Any] = {}
    for key, rs in sorted(keys.items()):
        y = [r["y"] for r in rs]
        g = [r["guard"] for r in rs]
        block: dict[str, Any] = {
            "guard": metrics(
                y, [x["p"] for x in g], [x["label"] for x in g], [x["outcome"] for x in g]
            ),
            "statuses": dict(Counter(x["status"] for x in g).most_common()),
            "backends": dict(Counter(str(x["backend"]) for x in g).most_common()),
            "guard_seconds_median": round(float(np.median([x["seconds"] for x in g])), 4),
            "evidence_chars_median": int(np.median([r["evidence_chars"] for r in rs])),
        }
        if all("alone" in r for r in rs):
            a = [r["alone"] for r in rs]
            block["alone"] = metrics(y, [x["p"] for x in a], [x["label"] for x in a])
            block["alone_seconds_median"] = round(float(np.median([x["seconds"] for x in a])), 4)
        out[key] = block
    return out


# --------------------------------------------------------------------------------------------
# Bands out of fold
# --------------------------------------------------------------------------------------------


def _apply(lo: float, hi: float, p: float) -> str:
    return "supported" if p >= hi else "not_supported" if p < lo else "uncertain"


def _choose(y: np.ndarray, p: np.ndarray, sets: np.ndarray, mode: str) -> tuple[float, float]:
    """``pooled``: ``choose_bands`` on all the rows; ``every_set``: each set's own choice (sets
    of at least :data:`MIN_SET_ROWS` rows; none: pooled), the lowest rejection cut and the
    highest acceptance cut of them (the rules then hold on every set the rows come from, not
    only on their mix)."""
    if mode == "pooled":
        c = choose_bands(y, p)
        return c["reject_below"], c["accept_from"]
    names = [s for s in sorted(set(sets.tolist())) if (sets == s).sum() >= MIN_SET_ROWS]
    if not names:
        return _choose(y, p, sets, "pooled")
    cuts = [choose_bands(y[sets == s], p[sets == s]) for s in names]
    lo = min(c["reject_below"] for c in cuts)
    return lo, max(lo, *(c["accept_from"] for c in cuts))


def fit_bands(
    rows: Sequence[dict[str, Any]],
    *,
    p_of: Callable[[dict[str, Any]], float | None] | None = None,
    mode: str = "pooled",
) -> dict[str, Any]:
    """Per evidence kind: thresholds chosen on the dev rows, with out-of-fold figures.

    ``rows``: dicts with ``y``, ``fold``, ``kind``, ``split`` and a P(supported) (``p_of(row)``;
    default ``row["p"]``, else the guard's). Held-out rows are ignored. For each dev fold the
    thresholds are chosen (``choose_bands``) on the other dev folds and each row of the fold is
    labelled with them: the ``out_of_fold`` figures are :func:`metrics` over those labels. The
    ``bands`` are chosen on every dev row of the kind (``SupportBands.from_json``'s format).
    ``mode``: ``pooled`` (the rules on the kind's rows together) or ``every_set`` (on each
    set's rows: :func:`_choose`).
    """

    def default_p(r: dict[str, Any]) -> float | None:
        if "p" in r:
            return r["p"]  # type: ignore[no-any-return]
        return r["guard"]["p"]  # type: ignore[no-any-return]

    get = p_of or default_p
    out: dict[str, Any] = {
        "rule": f"rejections >= {REJECT_PRECISION:.0%} right, acceptances >= "
        f"{ACCEPT_PRECISION:.0%} right, cuts of >= {MIN_ROWS} rows; out of fold by group "
        f"(the dev folds of benchmarks/longdata.py)",
        "mode": mode,
        "kinds": {},
    }
    for kind in sorted({r["kind"] for r in rows}):
        dev = [r for r in rows if r["kind"] == kind and r["split"] == "dev" and get(r) is not None]
        if not dev:
            continue
        y = np.array([r["y"] for r in dev])
        p = np.array([float(get(r)) for r in dev])  # type: ignore[arg-type]
        folds = np.array([r["fold"] for r in dev])
        sets = np.array([r.get("set", "?") for r in dev])
        oof_labels: list[str] = [""] * len(dev)
        per_fold: dict[str, Any] = {}
        for f in sorted(set(folds.tolist())):
            tr, te = folds != f, folds == f
            if not tr.any():
                continue
            lo, hi = _choose(y[tr], p[tr], sets[tr], mode)
            per_fold[str(f)] = [lo, hi]
            for i in np.flatnonzero(te):
                oof_labels[i] = _apply(lo, hi, p[i])
        lo, hi = _choose(y, p, sets, mode)
        in_sample = metrics(y.tolist(), p.tolist(), [_apply(lo, hi, x) for x in p])
        oof = metrics(y.tolist(), p.tolist(), oof_labels)
        out["kinds"][kind] = {
            "reject_below": lo,
            "accept_from": hi,
            "chosen_on": f"{len(dev)} dev rows ({dict(Counter(r.get('set', '?') for r in dev))})",
            "in_sample": in_sample,  # on the rows that chose them
            "out_of_fold": oof,
            "per_fold": per_fold,
        }
    return out


def held_out_with_bands(
    rows: Sequence[dict[str, Any]],
    bands: dict[str, Any],
    p_of: Callable[[dict[str, Any]], float | None],
) -> dict[str, Any]:
    """The held-out rows labelled with ``bands`` (per kind): :func:`metrics` per set and kind."""
    out: dict[str, Any] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["split"] == "held_out" and r["kind"] in bands["kinds"] and p_of(r) is not None:
            groups.setdefault(f"{r.get('set', '?')}/{r['kind']}", []).append(r)
            groups.setdefault(f"all/{r['kind']}", []).append(r)
    for key, rs in sorted(groups.items()):
        b = bands["kinds"][rs[0]["kind"]]
        ps = [float(p_of(r)) for r in rs]  # type: ignore[arg-type]
        labels = [_apply(b["reject_below"], b["accept_from"], x) for x in ps]
        out[key] = metrics([r["y"] for r in rs], ps, labels)
    return out


def kind_by_chars(rows: Sequence[dict[str, Any]], chars: int) -> list[dict[str, Any]]:
    """The rows with ``kind`` read from what the guard can see, the page's length: ``whole_page``
    from ``chars`` characters of page text, else ``short_passage`` (the sets' own kinds are
    how each was built)."""
    return [
        {**r, "kind": "whole_page" if r["evidence_chars"] >= chars else "short_passage"}
        for r in rows
    ]


def bands_report(scored: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Bands per kind fitted on the guard's P and on the entailer alone's, each with its
    held-out figures; and the guard's fitted per set (for comparison only)."""
    out: dict[str, Any] = {}
    getters: dict[str, Callable[[dict[str, Any]], float | None]] = {
        "guard": lambda r: r["guard"]["p"],
        "alone": lambda r: r.get("alone", {}).get("p"),
    }
    for name, p_of in getters.items():
        for mode in ("pooled", "every_set"):
            key = name if mode == "pooled" else f"{name}_every_set"
            bands = fit_bands(scored, p_of=p_of, mode=mode)
            out[f"bands_{key}"] = bands
            out[f"held_out_{key}"] = held_out_with_bands(scored, bands, p_of)
    by_set: dict[str, Any] = {}
    for name in sorted({r["set"] for r in scored}):
        rows = [r for r in scored if r["set"] == name]
        bands = fit_bands(rows, p_of=getters["guard"])
        by_set[name] = {
            "bands": {k: [v["reject_below"], v["accept_from"]] for k, v in bands["kinds"].items()},
            "out_of_fold": {k: v["out_of_fold"] for k, v in bands["kinds"].items()},
            "held_out": held_out_with_bands(rows, bands, getters["guard"]),
        }
    out["bands_guard_by_set"] = by_set
    return out


def band_table(
    bands: dict[str, Any], source: str, every_set: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The artefact: per kind ``{"reject_below", "accept_from", ...meta}``, as
    ``citeguard.checks.bands.SupportBands.from_json`` reads it (``kinds``: ``bands``, pooled;
    ``kinds_every_set``: the bands that hold on every set, when given)."""

    def kinds(b: dict[str, Any]) -> dict[str, Any]:
        return {
            k: {
                "reject_below": v["reject_below"],
                "accept_from": v["accept_from"],
                "mode": b["mode"],
                "chosen_on": v["chosen_on"],
                "out_of_fold": v["out_of_fold"],
            }
            for k, v in b["kinds"].items()
        }

    out = {
        "chosen_by": "benchmarks/bench_longpage.py --fit-bands",
        "p_source": source,
        "rule": bands["rule"],
        "kinds": kinds(bands),
    }
    if every_set is not None:
        out["kinds_every_set"] = kinds(every_set)
    return out


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


async def run(
    entailer: Any,
    *,
    sets: Sequence[str] = ld.SETS,
    split: str = "dev",
    limit: int | None = 60,
    alone: bool = True,
    rows_by_set: dict[str, list[dict[str, Any]]] | None = None,
    policy: Any = None,
) -> dict[str, Any]:
    """Score a sample of each set's ``split`` rows (``both``: dev and held out; ``limit`` rows
    a set and split, None: all) and summarise them. ``rows_by_set`` replaces the shared data
    (tests give synthetic rows); ``policy`` the guard's (default :func:`guard_policy`)."""
    data = rows_by_set if rows_by_set is not None else ld.load_sets(sets)
    splits = ("dev", "held_out") if split == "both" else (split,)
    picked: list[dict[str, Any]] = []
    for name in sets:
        for s in splits:
            picked += ld.sample([r for r in data.get(name, []) if r["split"] == s], limit)
    t0 = time.perf_counter()
    scored = await score_rows(picked, entailer, alone=alone, policy=policy)
    return {
        "rows": len(scored),
        "sets": list(sets),
        "splits": list(splits),
        "limit_per_set_split": limit,
        "seconds": round(time.perf_counter() - t0, 1),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "summary": summarise(scored),
        "scored": scored,
    }


async def longpage_scenario(cfg: Config, ctx: Context) -> dict[str, Any]:
    """The suite's ``longpage`` scenario: a small sample of each set's dev rows (smoke: 3 rows
    a set, word overlap; quick: 12; full: 60), no bands fitted."""
    limit: int = cfg.pick(60, 12, 3)
    entailer = ctx.entailer(cfg.pick("local", "local", "word_overlap"))
    res = await run(entailer, limit=limit, alone=cfg.size != "smoke")
    res.pop("scored")
    return res


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(ld.SETS))
    ap.add_argument("--split", choices=("dev", "held_out", "both"), default="dev")
    ap.add_argument("--limit", type=int, default=60, help="rows a set and split (0: all)")
    ap.add_argument("--no-alone", action="store_true", help="skip the entailer alone")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--fit-bands", action="store_true", help="fit bands on the scored rows")
    ap.add_argument(
        "--rows-out",
        type=Path,
        default=ROWS_OUT,
        help="every scored row, with its claim (kept out of the repository)",
    )
    ap.add_argument("--bands-out", type=Path, default=BANDS_OUT, help="the band table")
    ap.add_argument(
        "--oracle", action="store_true", help="WiCE: supporting lines vs whole page, alone"
    )
    ap.add_argument(
        "--kind-by-chars",
        type=int,
        default=0,
        help="kinds from the page's length (whole_page from this many characters)",
    )
    ap.add_argument(
        "--from-rows", type=Path, default=None, help="summarise a rows file instead of scoring"
    )
    args = ap.parse_args(argv)
    sets = [s for s in args.sets.split(",") if s]

    async def go() -> dict[str, Any]:
        from citeguard.checks.entail import LocalEntailer

        entailer = LocalEntailer()
        try:
            return await run(
                entailer,
                sets=sets,
                split=args.split,
                limit=args.limit or None,
                alone=not args.no_alone,
            )
        finally:
            await entailer.aclose()

    if args.oracle:

        async def go_oracle() -> dict[str, Any]:
            from citeguard.checks.entail import LocalEntailer

            entailer = LocalEntailer()
            try:
                return await oracle(entailer, args.split)
            finally:
                await entailer.aclose()

        got = asyncio.run(go_oracle())
        ORACLE_OUT.write_text(json.dumps(_finite(got), indent=1) + "\n", encoding="utf-8")
        print(json.dumps(_finite(got), indent=1))
        return 0
    if args.from_rows is not None:
        scored = [json.loads(x) for x in args.from_rows.open(encoding="utf-8") if x.strip()]
        res = {"rows": len(scored), "from_rows": str(args.from_rows), "scored": scored}
        res["summary"] = summarise(scored)
    else:
        res = asyncio.run(go())
    if args.kind_by_chars:
        res["scored"] = kind_by_chars(res["scored"], args.kind_by_chars)
        res["summary"] = summarise(res["scored"])
        res["kind_by_chars"] = args.kind_by_chars
    if args.fit_bands:
        res.update(bands_report(res["scored"]))
        table = band_table(
            res["bands_guard"], "the guard's per-claim P(supported)", res["bands_guard_every_set"]
        )
        args.bands_out.write_text(json.dumps(_finite(table), indent=1) + "\n", encoding="utf-8")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.rows_out.parent.mkdir(parents=True, exist_ok=True)
    with args.rows_out.open("w", encoding="utf-8") as f:
        for r in res["scored"]:
            f.write(json.dumps(_finite(r), default=str) + "\n")
    # the committed file holds figures only: rows (with the data's text) stay in rows_out
    res.pop("scored")
    res["rows_file"] = str(args.rows_out)
    args.out.write_text(json.dumps(_finite(res), indent=1, default=str) + "\n", encoding="utf-8")
    print(json.dumps(_finite(res["summary"]), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

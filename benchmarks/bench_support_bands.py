"""Claim-support bands measured on held-out rows: each backend's band tables, and the whole guard.

    python -m benchmarks.bench_support_bands               # band tables on held-out rows
    python -m benchmarks.bench_support_bands --guard       # + the whole guard (loopback pages)

Data (read-only, never copied): ``../shared/data/claims/`` and ``../shared/data/passages/``.

**Splits.** AttributionBench dev (``attributionbench_dev.jsonl``, AB) is split as
``training/support_data.py`` splits it: rows whose sha1(id) is even are the *tune* half, odd
rows the *held-out* half. The support model was fitted on the four training files and the tune
half; the held-out half was never used for fitting, calibration or threshold choice, and every
figure below is reported on it. The split is by row, so the halves share questions; the report
also gives the held-out rows whose question is not in the tune half (``question_not_in_tune``).

**Choosing the bands** is training: ``python -m training support-bands``
(``training/support_bands.py``) chooses them out of fold on the tune half with
:func:`choose_bands` and writes them into the shipped artefacts; this module measures them.

**Band tables** (default): every backend that can run here scores the held-out rows through its
entailer (what the guard calls); per label: share of rows and precision (supported: share
human-supported; not_supported / contradicted: share human-unsupported; uncertain: share
human-supported), overall and per subset. NLI: no MNLI model is on disk here (skipped, said so);
judge: no judge endpoint (skipped).

**Whole guard** (``--guard``): a real :class:`citeguard.Guard` with the default policy (only
loopback allowed), a real aiohttp server on 127.0.0.1 serving pages at their URLs, one
``Guard.check`` per answer (attempt 1):

a. each held-out AB row's evidence served as a page at its cited URL (LFQA rows and repeats get
   a made-up one), the claim (citation markers removed) citing it: share of human-supported
   claims hard-rejected, share of unsupported ones rejected / flagged uncertain / silently
   passed; beside it, in the same run, the behaviour before the bands (one cut, 0.52 for the
   local model, recall 0.64 for word overlap; everything under it rejected ``not_entailed``);
b. verbatim quotes from ``shared/data/passages`` (``bench_quotes``' templates, one labelled
   quote per page): share accepted;
c. injected broken citations on those pages: a dead link (404), a made-up host, an altered
   quote and a fabricated quote (the data's ``altered`` / ``fabricated`` rows): share rejected.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from benchmarks.longdata import CLAIM_MARKERS
from training import support_data as sd

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OUT = RESULTS / "support_bands.json"
REJECT_PRECISION = 0.90
ACCEPT_PRECISION = 0.85
MIN_ROWS = 20
GRID = np.round(np.arange(0.01, 1.0, 0.01), 2)
LABELS = ("supported", "uncertain", "not_supported", "contradicted")


# --------------------------------------------------------------------------------------------
# Choosing thresholds
# --------------------------------------------------------------------------------------------


def choose_bands(y: np.ndarray, prob: np.ndarray) -> dict[str, Any]:
    """``reject_below`` and ``accept_from`` on out-of-fold probabilities (see the module doc),
    with the out-of-fold figures they give."""
    reject = 0.0
    for t in GRID:
        m = prob < t
        if m.sum() >= MIN_ROWS and (y[m] == 0).mean() >= REJECT_PRECISION:
            reject = float(t)
    accept = 1.0
    for t in GRID[::-1]:
        m = prob >= t
        if m.sum() >= MIN_ROWS and (y[m] == 1).mean() >= ACCEPT_PRECISION:
            accept = float(t)
    accept = max(accept, reject)
    lo, hi = prob < reject, prob >= accept
    mid = ~lo & ~hi
    n = len(y)
    return {
        "reject_below": round(reject, 2),
        "accept_from": round(accept, 2),
        "out_of_fold": {
            "rows": n,
            "not_supported_share": round(float(lo.mean()), 4),
            "not_supported_precision": round(float((y[lo] == 0).mean()), 4) if lo.any() else None,
            "supported_share": round(float(hi.mean()), 4),
            "supported_precision": round(float((y[hi] == 1).mean()), 4) if hi.any() else None,
            "uncertain_share": round(float(mid.mean()), 4),
            "uncertain_supported_share": round(float((y[mid] == 1).mean()), 4)
            if mid.any()
            else None,
        },
    }


def ab_rows() -> list[dict[str, Any]]:
    """AttributionBench dev with its ``part`` (tune / held_out), ``group`` and ``y``."""
    return [r for r in sd.load_rows() if r["source_name"] == "AB"]


# --------------------------------------------------------------------------------------------
# Band tables on the held-out half
# --------------------------------------------------------------------------------------------


def band_table(y: np.ndarray, labels: Sequence[str]) -> dict[str, Any]:
    """Per label: rows, share, precision (see the module doc)."""
    n = len(y)
    out: dict[str, Any] = {"rows": n}
    for lab in LABELS:
        m = np.array([x == lab for x in labels], dtype=bool)
        k = int(m.sum())
        want = 1 if lab in ("supported", "uncertain") else 0
        out[lab] = {
            "rows": k,
            "share": round(k / n, 4) if n else None,
            "precision" if lab != "uncertain" else "supported_share": round(
                float((y[m] == want).mean()), 4
            )
            if k
            else None,
        }
    sup, uns = y == 1, y == 0
    rej = np.array([x in ("not_supported", "contradicted") for x in labels], dtype=bool)
    unc = np.array([x == "uncertain" for x in labels], dtype=bool)
    out["supported_rejected"] = round(float(rej[sup].mean()), 4) if sup.any() else None
    out["unsupported_rejected"] = round(float(rej[uns].mean()), 4) if uns.any() else None
    out["unsupported_uncertain"] = round(float(unc[uns].mean()), 4) if uns.any() else None
    out["unsupported_passed"] = round(float((~rej & ~unc)[uns].mean()), 4) if uns.any() else None
    return out


def tables(rows: Sequence[dict[str, Any]], labels: Sequence[str]) -> dict[str, Any]:
    """Overall, per subset, and the rows whose question is not in the tune half."""
    y = np.array([r["y"] for r in rows])
    out = {"overall": band_table(y, labels)}
    for s in sd.AB_SUBSETS:
        m = [i for i, r in enumerate(rows) if r["subset"] == s]
        out[s] = band_table(y[m], [labels[i] for i in m])
    m = [i for i, r in enumerate(rows) if not r["question_in_tune"]]
    out["question_not_in_tune"] = band_table(y[m], [labels[i] for i in m])
    return out


async def backend_labels(name: str, rows: Sequence[dict[str, Any]]) -> list[str] | str:
    """Each row's label from the backend's entailer, or why it cannot run here."""
    from citeguard.checks.entail import LocalEntailer, WordOverlapEntailer

    if name == "nli":
        return "skipped: no MNLI cross-encoder on disk (its bands are uncalibrated defaults)"
    if name == "judge":
        return "skipped: no judge endpoint here (a judge's labels are its own)"
    entailer: Any = WordOverlapEntailer() if name == "word_overlap" else LocalEntailer(threads=2)
    try:
        scores = await entailer.score([(r["claim"], r["evidence"]) for r in rows])
    finally:
        await entailer.aclose()
    return [s.label for s in scores]


async def band_report() -> dict[str, Any]:
    held = [r for r in ab_rows() if r["part"] == "held_out"]
    out: dict[str, Any] = {"held_out_rows": len(held)}
    for name in ("local", "word_overlap", "nli", "judge"):
        t = time.perf_counter()
        labels = await backend_labels(name, held)
        if isinstance(labels, str):
            out[name] = {"skipped": labels}
            continue
        out[name] = {**tables(held, labels), "seconds": round(time.perf_counter() - t, 1)}
        print(name, json.dumps(out[name]["overall"]), flush=True)
    return out


# --------------------------------------------------------------------------------------------
# The whole guard
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimPage:
    row: dict[str, Any]
    url: str
    body: bytes
    answer: str


def claim_pages(rows: Sequence[dict[str, Any]]) -> list[ClaimPage]:
    """Each row's evidence as an HTML page at its cited URL (``http``; a made-up URL for LFQA
    rows and for a URL an earlier row took), and a one-claim answer citing it."""
    out: list[ClaimPage] = []
    taken: set[tuple[str, str]] = set()
    for k, r in enumerate(rows):
        url = next(iter(r.get("urls") or []), None)
        parts = urlsplit(url or "")
        host = (parts.hostname or "").lower()
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        # a URL the answer's parser would cut (a closing bracket or full stop at its end)
        # gets a made-up one: what is measured is the support judgement, not URL parsing
        odd = re.search(r"[\[\]() \"'<>]|[.,;:!?]$", path)
        if not host or (host, path) in taken or odd:
            host, path = f"claims{k % 17}.example.org", f"/row/{sd._sha(r['id'])[:12]}"
        taken.add((host, path))
        served = f"http://{host}{path}"
        paras = "".join(
            f"<p>{html.escape(p.strip())}</p>" for p in r["evidence"].split("\n") if p.strip()
        )
        title = html.escape(r["question"][:80])
        body = (
            f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title></head>'
            f"<body><article>"
            f"<h1>{title}</h1>{paras}</article></body></html>"
        ).encode()
        claim = CLAIM_MARKERS.sub("", r["claim"]).strip()
        out.append(ClaimPage(r, served, body, f"{claim} [1]\n\nSources:\n[1] {served}\n"))
    return out


def page_server(pages: Sequence[ClaimPage]) -> Any:
    """``bench_quotes``' loopback server (Host and path tell pages apart; a 404 for anything
    else), holding these pages."""
    from benchmarks.bench_quotes import QuoteServer, _key

    server = QuoteServer([])
    for p in pages:
        parts = urlsplit(p.url)
        path_qs = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        server.by_key[_key(parts.hostname or "", path_qs)] = p.body
    server.hosts = sorted({urlsplit(p.url).hostname or "" for p in pages})
    return server


def _policy(on_uncertain: str | None, backend: str = "auto") -> Any:
    from citeguard.policy import EntailmentPolicy, FetchPolicy, Policy

    return Policy(
        fetch=FetchPolicy(allow_private_addresses=True),
        entailment=EntailmentPolicy(backend=backend, on_uncertain=on_uncertain),  # type: ignore[arg-type]
    )


# the two-way cut each backend had before the bands (EntailmentPolicy.support_threshold's old
# default for the local model; WORD_OVERLAP_THRESHOLD, a recall, for word overlap)
BEFORE_LOCAL = 0.52


def _before(backend: str) -> Any:
    """The behaviour before the bands: one cut, everything under it rejected."""
    from citeguard.checks.bands import WordOverlapCalibration
    from citeguard.checks.entail import WORD_OVERLAP_THRESHOLD

    t = BEFORE_LOCAL
    if backend == "word_overlap":
        t = round(WordOverlapCalibration.load().probability(WORD_OVERLAP_THRESHOLD), 4)
    policy = _policy("fail", backend)
    return policy.replace(entailment={"reject_below": t, "accept_from": t})


async def _check_all(guard: Any, answers: Sequence[str], question: str = "") -> list[Any]:
    sem = asyncio.Semaphore(4)

    async def one(a: str) -> Any:
        async with sem:
            return await guard.check(a, question=question)

    return list(await asyncio.gather(*(one(a) for a in answers)))


def _outcome(verdict: Any) -> str:
    """rejected / flagged (passed with support uncertain) / passed."""
    c = verdict.citations[0] if verdict.citations else None
    if c is None or c.status.value != "ok":
        return "rejected"
    flagged = any(f.code == "validity.support_uncertain" for f in verdict.axes["validity"].findings)
    return "flagged" if flagged else "passed"


def claim_tally(rows: Sequence[dict[str, Any]], outcomes: Sequence[str]) -> dict[str, Any]:
    def share(sel: list[int], what: str) -> float | None:
        return round(sum(outcomes[i] == what for i in sel) / len(sel), 4) if sel else None

    sup = [i for i, r in enumerate(rows) if r["y"] == 1]
    uns = [i for i, r in enumerate(rows) if r["y"] == 0]
    return {
        "supported_rows": len(sup),
        "unsupported_rows": len(uns),
        "supported_hard_rejected": share(sup, "rejected"),
        "supported_flagged": share(sup, "flagged"),
        "supported_passed": share(sup, "passed"),
        "unsupported_rejected": share(uns, "rejected"),
        "unsupported_flagged": share(uns, "flagged"),
        "unsupported_silently_passed": share(uns, "passed"),
    }


async def guard_claims(backend: str = "auto") -> dict[str, Any]:
    """(a): the held-out AB rows as pages, under the default policy and as before the bands."""
    from citeguard import Guard

    held = [r for r in ab_rows() if r["part"] == "held_out"]
    pages = claim_pages(held)
    out: dict[str, Any] = {"rows": len(pages), "backend": backend}
    server = page_server(pages)
    await server.start()
    try:
        for name, policy in (("default", _policy(None, backend)), ("before", _before(backend))):
            t = time.perf_counter()
            async with Guard(policy, resolver=server.resolver()) as guard:
                verdicts = await _check_all(guard, [p.answer for p in pages])
            outcomes = [_outcome(v) for v in verdicts]
            statuses = Counter(
                (v.citations[0].status.value if v.citations else "none") for v in verdicts
            )
            block: dict[str, Any] = {
                "overall": claim_tally(held, outcomes),
                "statuses": dict(statuses.most_common()),
                "seconds": round(time.perf_counter() - t, 1),
            }
            for s in sd.AB_SUBSETS:
                idx = [i for i, r in enumerate(held) if r["subset"] == s]
                block[s] = claim_tally([held[i] for i in idx], [outcomes[i] for i in idx])
            idx = [i for i, r in enumerate(held) if not r["question_in_tune"]]
            block["question_not_in_tune"] = claim_tally(
                [held[i] for i in idx], [outcomes[i] for i in idx]
            )
            sup_rejects = Counter(
                verdicts[i].citations[0].status.value
                for i, r in enumerate(held)
                if r["y"] == 1 and outcomes[i] == "rejected" and verdicts[i].citations
            )
            block["supported_reject_statuses"] = dict(sup_rejects.most_common())
            out[name] = block
            print(name, json.dumps(block["overall"]), flush=True)
    finally:
        await server.aclose()
    return out


async def guard_quotes_and_injected(n_pages: int | None) -> dict[str, Any]:
    """(b) and (c) on the shared passages' pages."""
    from benchmarks import bench_quotes as bq
    from benchmarks.context import NOW, QUESTION
    from citeguard import Guard

    pages = bq.load_quote_pages(n_pages, 0)
    cases = [c for c in bq.build_cases(pages, 0, all_quotes=False) if c.template in bq.NO_CONTENT]
    index = [json.loads(x) for x in (bq.PASSAGES / "passages.jsonl").open(encoding="utf-8")]
    by_file = {p.file: p for p in pages}
    injected: list[tuple[str, str]] = []
    for p in pages:
        injected.append(
            (
                "dead_link_404",
                f"This is stated on the page [1].\n\n[1] {p.url.rstrip('/')}/no-such-page-7d1\n",
            )
        )
        injected.append(
            (
                "made_up_host",
                f"This is stated on the page [1].\n\n[1] http://{p.domain.split('.')[0]}-archive.invalid/{p.file}\n",
            )
        )
    for r in index:
        p = by_file.get(r["file"])
        if (
            p is None
            or r["kind"] not in ("altered", "fabricated")
            or bq._UNSAFE_QUOTE.search(r["quote"])
        ):
            continue
        q = " ".join(r["quote"].split())
        injected.append(
            (f"{r['kind']}_quote", f'The article states that "{q}" [1].\n\n[1] {p.url}\n')
        )
    server = bq.QuoteServer(pages)
    await server.start()
    out: dict[str, Any] = {"pages": len(pages)}
    try:
        async with Guard(_policy(None), resolver=server.resolver(), now=lambda: NOW) as guard:
            t = time.perf_counter()
            verdicts = await _check_all(guard, [c.answer for c in cases], QUESTION)
            ok = Counter(
                c.template
                for c, v in zip(cases, verdicts, strict=True)
                if v.citations and v.citations[0].status.value == "ok"
            )
            n = Counter(c.template for c in cases)
            flagged = Counter(
                c.template for c, v in zip(cases, verdicts, strict=True) if _outcome(v) == "flagged"
            )
            out["verbatim"] = {
                t_: {
                    "answers": n[t_],
                    "accepted_share": round(ok[t_] / n[t_], 4),
                    "flagged": flagged[t_],
                }
                for t_ in bq.NO_CONTENT
                if n[t_]
            }
            out["verbatim_accepted_pooled"] = round(sum(ok.values()) / sum(n.values()), 4)
            out["verbatim_seconds"] = round(time.perf_counter() - t, 1)
            verdicts = await _check_all(guard, [a for _, a in injected], QUESTION)
            kinds = Counter(k for k, _ in injected)
            rejected = Counter(
                k for (k, _), v in zip(injected, verdicts, strict=True) if _outcome(v) == "rejected"
            )
            statuses: dict[str, Counter[str]] = {}
            for (k, _), v in zip(injected, verdicts, strict=True):
                statuses.setdefault(k, Counter())[
                    v.citations[0].status.value if v.citations else "none"
                ] += 1
            out["injected"] = {
                k: {
                    "answers": kinds[k],
                    "rejected_share": round(rejected[k] / kinds[k], 4),
                    "statuses": dict(statuses[k]),
                }
                for k in kinds
            }
            out["injected_rejected_pooled"] = round(sum(rejected.values()) / len(injected), 4)
    finally:
        await server.aclose()
    return out


def targets(res: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    g = res.get("guard_claims", {}).get("default", {}).get("overall")
    if g:
        out.append(
            {
                "name": "human-supported claims hard-rejected",
                "target": "<= 0.08",
                "value": g["supported_hard_rejected"],
                "met": g["supported_hard_rejected"] <= 0.08,
            }
        )
        out.append(
            {
                "name": "unsupported claims silently passed",
                "target": "<= 0.20",
                "value": g["unsupported_silently_passed"],
                "met": g["unsupported_silently_passed"] <= 0.20,
            }
        )
    q = res.get("guard_passages")
    if q:
        out.append(
            {
                "name": "verbatim quotes accepted (pooled)",
                "target": ">= 0.98",
                "value": q["verbatim_accepted_pooled"],
                "met": q["verbatim_accepted_pooled"] >= 0.98,
            }
        )
        out.append(
            {
                "name": "injected broken citations rejected at attempt 1",
                "target": "== 1.0",
                "value": q["injected_rejected_pooled"],
                "met": q["injected_rejected_pooled"] == 1.0,
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--guard", action="store_true", help="also the whole-guard measures")
    ap.add_argument("--guard-only", action="store_true", help="only the whole-guard measures")
    ap.add_argument("--pages", type=int, default=None, help="passages pages (default: all)")
    args = ap.parse_args(argv)
    res: dict[str, Any] = json.loads(OUT.read_text()) if OUT.is_file() else {}
    RESULTS.mkdir(parents=True, exist_ok=True)

    def save(key: str, value: Any) -> None:  # each part as it is done
        res[key] = value
        OUT.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")

    if not args.guard_only:
        save("bands", asyncio.run(band_report()))
    if args.guard or args.guard_only:
        save("guard_claims", asyncio.run(guard_claims()))
        save("guard_claims_word_overlap", asyncio.run(guard_claims("word_overlap")))
        save("guard_passages", asyncio.run(guard_quotes_and_injected(args.pages)))
        save("targets", targets(res))
    print(json.dumps(res.get("targets", []), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

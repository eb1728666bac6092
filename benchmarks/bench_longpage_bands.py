"""Claim support on whole pages, through the guard: band tables per kind of evidence, with the
whole-page bands ``python -m training whole-page-bands`` chose on development rows.

    python -m benchmarks.bench_longpage_bands --held-out    # every held-out figure (the table)
    python -m benchmarks.bench_longpage_bands               # AB-long report + WiCE sample
    python -m benchmarks.bench_longpage_bands --judge       # judge prompt tokens per claim
    python -m benchmarks.bench_longpage_bands --latency     # time per claim, 50-150 kB pages

Sets (``../shared/data``):

- **AB-long**: AttributionBench dev pairs, each evidence passage placed, at a random position
  (seeded by the row), inside the text of a real page of ``passages/`` (5-300 kB), served as an
  HTML page at the row's URL. AB's *held-out* half (``training/train_support.py``: the
  support model never saw it) is split again by question group: the **band-dev** half
  (``sha1(question)`` even) takes part in the band choice, the **report** half (odd) is never
  tuned on. AB's *tune* half (the model was fitted on it) takes part in the band choice only
  through out-of-fold scores (:mod:`training.whole_page_bands`).
- **WiCE**: claims with the full text of the article they cite. The support model was fitted on
  these rows (``wice_train``): its figures are shown, but are in-sample for the model and
  take no part in the band choice. :func:`held_out` reads
  :mod:`benchmarks.longdata`'s held-out groups of WiCE and ExpertQA.

Every row is one answer citing one page, checked by ``Guard.check`` against a loopback server,
default policy (local model), four checks in flight. Per set: ROC AUC of the P(supported) the
guard reports, the outcome shares (hard-rejected / flagged uncertain / passed clean) per label,
the confident gate's coverage and agreement (labels ``supported`` / ``not_supported``), and the
share the user sees settled (``decided``: passed clean or rejected, whatever the status) with
its agreement. The short-passage rows of the same AB half (``bench_support_bands``) are the
other kind of evidence. ``python -m benchmarks --only whole_page_bands`` runs :func:`held_out`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import bench_support_bands as bsb
from benchmarks import longdata as ld
from benchmarks.ab_long import _html, ab_long_rows
from training import support_data as sd

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "benchmarks" / "results" / "whole_page_bands.json"
ARTEFACT = ROOT / "citeguard" / "checks" / "support_bands_whole_page.json"


def wice_rows(limit: int | None = None) -> list[dict[str, Any]]:
    rows = []
    for line in (DATA / "claims" / "wice_train.jsonl").open(encoding="utf-8"):
        r = json.loads(line)
        r["y"] = int(r["label"] == "supported")
        r["question"] = r.get("wiki_title") or ""
        r["urls"] = []
        r["page_paragraphs"] = r["evidence"].split("\n")
        r["part"] = "in_sample"
        rows.append(r)
    if limit:
        rows = random.Random(0).sample(rows, min(limit, len(rows)))
    return rows


def _pages(rows: Sequence[dict[str, Any]]) -> list[bsb.ClaimPage]:
    pages = bsb.claim_pages(rows)
    return [
        bsb.ClaimPage(p.row, p.url, _html(p.row["question"], p.row["page_paragraphs"]), p.answer)
        for p in pages
    ]


async def through_guard(rows: Sequence[dict[str, Any]], policy: Any = None) -> list[dict[str, Any]]:
    """Each row's outcome, status, support label and P(supported) under ``policy`` (default:
    the default policy, local model)."""
    from citeguard import Guard

    pages = _pages(rows)
    server = bsb.page_server(pages)
    await server.start()
    try:
        async with Guard(policy or bsb._policy(None), resolver=server.resolver()) as guard:
            verdicts = await bsb._check_all(guard, [p.answer for p in pages])
    finally:
        await server.aclose()
    out = []
    for v in verdicts:
        c = v.citations[0] if v.citations else None
        claim = v.claims[0] if v.claims else None
        check = claim.checks[0] if claim is not None and claim.checks else None
        ent = check.entailment if check is not None else None
        out.append(
            {
                "outcome": bsb._outcome(v),
                "status": c.status.value if c is not None else "none",
                "label": ent.label if ent is not None else None,
                "p": ent.score if ent is not None else 0.0,
                "backend": ent.backend if ent is not None else None,
            }
        )
    return out


def _auc(y: np.ndarray, p: np.ndarray) -> float | None:
    from sklearn.metrics import roc_auc_score

    return round(float(roc_auc_score(y, p)), 4) if 0 < y.sum() < len(y) else None


def summary(rows: Sequence[dict[str, Any]], got: Sequence[dict[str, Any]]) -> dict[str, Any]:
    y = np.array([r["y"] for r in rows])
    p = np.array([g["p"] for g in got])
    labels = [g["label"] for g in got]

    def labelled(*kinds: str) -> tuple[list[int], int]:
        rows_of = [i for i, lab in enumerate(labels) if lab in kinds]
        return rows_of, sum((labels[i] == "supported") == (y[i] == 1) for i in rows_of)

    confident, agree = labelled("supported", "not_supported")
    # a contradiction (a number the page states otherwise) is a confident decision too
    firm, firm_agree = labelled("supported", "not_supported", "contradicted")
    sup = [i for i in range(len(rows)) if y[i] == 1]
    # what the user sees settled: passed clean or rejected (any status), not flagged uncertain
    decided = [i for i, g in enumerate(got) if g["outcome"] != "flagged"]
    right = sum((got[i]["outcome"] == "passed") == (y[i] == 1) for i in decided)
    return {
        **bsb.claim_tally(rows, [g["outcome"] for g in got]),
        "auc_through_guard": _auc(y, p),
        "confident_coverage": round(len(confident) / len(rows), 4) if rows else None,
        "confident_agreement": round(agree / len(confident), 4) if confident else None,
        "confident_with_contradicted_coverage": round(len(firm) / len(rows), 4) if rows else None,
        "confident_with_contradicted_agreement": round(firm_agree / len(firm), 4) if firm else None,
        "decided_coverage": round(len(decided) / len(rows), 4) if rows else None,
        "decided_agreement": round(right / len(decided), 4) if decided else None,
        "labels": dict(Counter(str(lab) for lab in labels).most_common()),
        "supported_reject_statuses": dict(
            Counter(got[i]["status"] for i in sup if got[i]["outcome"] == "rejected")
        ),
    }


async def report(wice_limit: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rows = [r for r in ab_long_rows() if r["part"] == "report"]
    t = time.perf_counter()
    out["ab_long_report"] = {**summary(rows, await through_guard(rows))}
    out["ab_long_report"]["seconds"] = round(time.perf_counter() - t, 1)
    print("ab_long_report", json.dumps(out["ab_long_report"]), flush=True)
    if wice_limit:
        rows = wice_rows(wice_limit)
        out["wice_in_sample"] = summary(rows, await through_guard(rows))
        print("wice_in_sample", json.dumps(out["wice_in_sample"]), flush=True)
    return out


async def held_out(*, other_sets: bool = True, limit: int | None = None) -> dict[str, Any]:
    """Every figure on rows no band, coefficient or choice was tuned on, through
    ``Guard.check`` (default policy, local model, attempt 1):

    - ``ab_long_report``: AB-long's report half (AB held-out rows whose question's sha1 is odd;
      the bands were chosen on AB's tune half out of fold and the even half);
    - ``ab_short_report``: the same rows with their short evidence alone as the page, and
      ``ab_short_held_out``: every AB held-out row so (the issue's "held-out AttributionBench
      through the guard"; its even-question rows' long-page variants took part in the band
      choice);
    - ``wice_held_out`` / ``expertqa_held_out``: :mod:`benchmarks.longdata`'s held-out groups
      (fold 0 by article / question; nothing here was tuned on them, but the support model was
      fitted on WiCE and on most ExpertQA pool rows: in-sample for the model).

    ``limit``: at most so many rows a set (a seeded sample stratified by label; the smoke run's).
    """
    from benchmarks import bench_longpage as blp

    out: dict[str, Any] = {}
    long_rows = ld.sample([r for r in ab_long_rows() if r["part"] == "report"], limit)
    out["ab_long_report"] = summary(long_rows, await through_guard(long_rows))
    held = [dict(r, page_paragraphs=r["evidence"].split("\n")) for r in bsb.ab_rows()]
    held = ld.sample([r for r in held if r["part"] == "held_out"], limit)
    got = await through_guard(held)
    odd = [i for i, r in enumerate(held) if int(sd._sha(r["question"]), 16) % 2 == 1]
    out["ab_short_report"] = summary([held[i] for i in odd], [got[i] for i in odd])
    out["ab_short_held_out"] = summary(held, got)
    if other_sets:
        data = ld.load_sets(["wice", "expertqa"])
        for name in ("wice", "expertqa"):
            rows = ld.sample([r for r in data[name] if r["split"] == "held_out"], limit)
            if not rows:
                continue
            res = await blp.run_guard_local(rows)
            out[f"{name}_held_out"] = summary(
                rows,
                [
                    {**g, "p": g["p"] if g["p"] is not None else 0.0, "status": g["status"]}
                    for g in res
                ],
            )
    for key, block in out.items():
        print(key, json.dumps(block), flush=True)
    return out


def held_out_targets(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 42's targets that these rows can show (the research-report set is not here)."""

    def row(name: str, value: float | None, target: str) -> dict[str, Any]:
        op, goal = target.split()
        met = value is not None and bool(
            value <= float(goal) if op == "<=" else value >= float(goal)
        )
        return {"name": name, "target": target, "value": value, "met": met}

    long, short = res["ab_long_report"], res["ab_short_held_out"]
    return [
        row("AB-long report: AUC through the guard", long["auc_through_guard"], ">= 0.80"),
        row("AB-long report: confident coverage", long["confident_coverage"], ">= 0.30"),
        row("AB-long report: confident agreement", long["confident_agreement"], ">= 0.80"),
        row("AB-long report: decided (passed or rejected)", long["decided_coverage"], ">= 0.30"),
        row("AB-long report: decided, agreeing", long["decided_agreement"], ">= 0.80"),
        row("AB-long report: supported hard-rejected", long["supported_hard_rejected"], "<= 0.05"),
        row("AB-long report: supported passed clean", long["supported_passed"], ">= 0.25"),
        row(
            "AB short held-out: supported hard-rejected",
            short["supported_hard_rejected"],
            "<= 0.08",
        ),
        row(
            "AB short held-out: unsupported silently passed",
            short["unsupported_silently_passed"],
            "<= 0.20",
        ),
        row("AB short held-out: supported passed clean", short["supported_passed"], ">= 0.40"),
    ]


async def whole_page_bands_scenario(cfg: Any, ctx: Any) -> dict[str, Any]:
    """The suite's ``whole_page_bands`` scenario: :func:`held_out` (full: every held-out row,
    WiCE and ExpertQA held-out groups too; quick: the AB rows; smoke: 8 AB rows a set), the
    bands in use, the targets (none without the shared data)."""
    from citeguard.checks.entail import LocalEntailer

    if not (DATA / "claims" / "attributionbench_dev.jsonl").is_file():
        return {"skipped": "no ../shared/data", "targets": []}
    t = time.perf_counter()
    res = await held_out(other_sets=cfg.size == "full", limit=cfg.pick(None, None, 8))
    return {
        **res,
        "bands": json.loads(ARTEFACT.read_text()).get(LocalEntailer().encoder_name),
        "seconds": round(time.perf_counter() - t, 1),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "targets": held_out_targets(res) if cfg.size != "smoke" else [],
    }


async def judge_tokens() -> dict[str, Any]:
    """The cascade on AB-long's report rows: a scripted chat-completions judge on 127.0.0.1
    (it answers "uncertain" and counts each request's prompt) stands in for the paid API; the
    prompt tokens per uncertain claim are estimated at 4 characters a token (system prompt
    included)."""
    from aiohttp import web

    from citeguard.policy import JudgePolicy

    prompts: list[tuple[int, int]] = []  # (characters, claims asked)

    async def handle(request: web.Request) -> web.Response:
        body = await request.json()
        text = "".join(m["content"] for m in body["messages"])
        user = body["messages"][1]["content"]
        try:
            claims = json.loads(user)["claims"]
            reply: Any = {
                "verdicts": [
                    {"id": c["id"], "label": "uncertain", "confidence": 0.5, "reason": "?"}
                    for c in claims
                ]
            }
        except (ValueError, KeyError, TypeError):
            claims, reply = [None], {"label": "uncertain", "confidence": 0.5, "reason": "?"}
        prompts.append((len(text), len(claims)))
        usage = {"prompt_tokens": len(text) // 4, "completion_tokens": 10}
        message = {"role": "assistant", "content": json.dumps(reply)}
        return web.json_response({"choices": [{"index": 0, "message": message}], "usage": usage})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    policy = bsb._policy(None).replace(
        judge=JudgePolicy(base_url=f"http://127.0.0.1:{port}/v1", model="scripted", retries=0),
        entailment={"on_uncertain": "judge"},
    )
    rows = [r for r in ab_long_rows() if r["part"] == "report"]
    try:
        await through_guard(rows, policy)
    finally:
        await runner.cleanup()
    chars = sum(c for c, _ in prompts)
    claims = sum(n for _, n in prompts)
    return {
        "rows": len(rows),
        "judge_requests": len(prompts),
        "claims_asked": claims,
        "prompt_tokens_per_uncertain_claim": round(chars / 4 / claims, 1) if claims else None,
        "note": "tokens estimated at 4 characters each; every request counted",
    }


async def latency(reps: int = 3) -> dict[str, Any]:
    """Time per paraphrased claim on real pages of 50-150 kB (``passages/``), 10 and 50
    citations an answer, each claim a sentence of its page behind a lead-in (the support model
    judges each): wall and process CPU time of ``Guard.check``, with entailment off in the same
    run as the baseline (the fetch, extraction and passage work alone)."""
    from citeguard import Guard
    from citeguard.text import sentence_spans
    from citeguard.web.page import extract_page

    rnd = random.Random(1)
    pages = []
    for k, f in enumerate(sorted((DATA / "passages").glob("*.html"))):
        body = f.read_bytes()
        if not 50_000 <= len(body) <= 150_000:
            continue
        page = extract_page(body, url=f"http://long{k}.example.org/")
        text = page.main_text or page.text
        sents = [text[a:b] for a, b in sentence_spans(text) if 60 < b - a < 240]
        if sents:
            pages.append((k, body, "In short: " + rnd.choice(sents).rstrip(".")))
    runs = [(mode, n, rep) for mode in ("off", "local") for n in (3, 10, 50) for rep in range(reps)]
    served: dict[tuple[str, int, int], list[bsb.ClaimPage]] = {}
    for mode, n, rep in runs:  # every check its own URLs: no cache hit
        sel = rnd.sample(pages, min(n, len(pages)))
        served[(mode, n, rep)] = [
            bsb.ClaimPage({}, f"http://long{k}.example.org/{mode}/{n}/{rep}", body, claim)
            for k, body, claim in sel
        ]
    server = bsb.page_server([p for ps in served.values() for p in ps])
    await server.start()
    out: dict[str, Any] = {"pages": len(pages)}
    try:
        for mode in ("off", "local"):
            policy = bsb._policy("warn").replace(entailment={"check_entailment": mode != "off"})
            async with Guard(policy, resolver=server.resolver()) as guard:
                for n in (3, 10, 50):  # 3: the warm-up (the model, the pools)
                    walls, cpus = [], []
                    for rep in range(reps):
                        sel = served[(mode, n, rep)]
                        c0, w0 = time.process_time(), time.perf_counter()
                        await guard.check(_answer(sel))
                        cpus.append(time.process_time() - c0)
                        walls.append(time.perf_counter() - w0)
                    if n == 3:
                        continue
                    out[f"{mode}_{n}"] = {
                        "wall_ms_per_claim": round(1000 * sorted(walls)[reps // 2] / len(sel), 1),
                        "cpu_ms_per_claim": round(1000 * sorted(cpus)[reps // 2] / len(sel), 1),
                    }
    finally:
        await server.aclose()
    return out


def _answer(pages: Sequence[bsb.ClaimPage]) -> str:
    body = " ".join(f"{p.answer} [{i}]." for i, p in enumerate(pages, 1))
    return body + "\n\n" + "".join(f"[{i}] {p.url}\n" for i, p in enumerate(pages, 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--judge", action="store_true", help="judge prompt tokens per claim")
    ap.add_argument("--latency", action="store_true", help="time per claim on long pages")
    ap.add_argument("--wice", type=int, default=300, help="WiCE rows (0: none)")
    ap.add_argument("--held-out", action="store_true", help="every held-out figure (the table)")
    args = ap.parse_args()
    if args.held_out:
        got = asyncio.run(held_out())
        got["targets"] = held_out_targets(got)
        got["load_average"] = list(os.getloadavg())
        old = json.loads(OUT.read_text()) if OUT.exists() else {}
        old["held_out"] = got
        OUT.write_text(json.dumps(old, indent=2) + "\n")
        return
    if args.latency:
        got = asyncio.run(latency())
        got["load_average"] = list(os.getloadavg())
        print(json.dumps(got, indent=2))
        old = json.loads(OUT.read_text()) if OUT.exists() else {}
        old["latency_long_pages"] = got
        OUT.write_text(json.dumps(old, indent=2) + "\n")
        return
    if args.judge:
        got = asyncio.run(judge_tokens())
        print(json.dumps(got, indent=2))
        old = json.loads(OUT.read_text()) if OUT.exists() else {}
        old["judge_tokens_ab_long_report"] = got
        OUT.write_text(json.dumps(old, indent=2) + "\n")
        return
    res = asyncio.run(report(args.wice if args.wice else 0))
    old = json.loads(OUT.read_text()) if OUT.exists() else {}
    old["after"] = res
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(old, indent=2) + "\n")


if __name__ == "__main__":
    main()

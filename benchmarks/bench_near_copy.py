"""One edit from the page is not support: the ``near_copy`` scenario of the benchmark suite.

Three measurements, each through what a user runs:

* **edits, by kind and language** (whole guard, default policy, real sockets): the real pages
  of ``shared/data/passages`` served on loopback at their own URLs; each ``altered`` row (a
  page segment with one meaning-changing edit: a name swapped, a number changed, a "not"
  added or dropped, an antonym, another word) cited **without quotation marks**
  (``<segment> [1].`` + ``Sources: [1] URL``), and its unedited original as the control.
  Per kind of edit and page language: passed clean (status ``ok`` and support ``supported``),
  rejected (any failing status), uncertain (passed with its support uncertain).
* **Chinese** (whole guard, default policy): pages built from the premises of
  ``shared/data/claims/ocnli_dev.jsonl`` (evaluation only, CC BY-NC: nothing here is fitted on
  it), 12 sentences a page, one genre a page. Claims: a page's sentence verbatim (control), the
  same with one Arabic number changed, a sentence of another genre's page, and a hypothesis the
  annotators labelled entailed by one of the page's sentences (the false-reject control).
* **false-reject control** (the pure matcher): the supported and unsupported claims of every
  development set (AttributionBench, ExpertQA, WiCE, FactCheckGPT, SummEdits) against their
  evidence; how many of each the near-copy rule rejects (``altered``) or caps at uncertain (a
  word replaced), and the precision of its hard rejects. The same rows give the precision of
  the blind-language rejection rule (none of the claim's numbers and < 30% of its words in the
  evidence), which reads no language's wording.

Run alone: ``python -m benchmarks.bench_near_copy [--quick]``; in the suite:
``python -m benchmarks --only near_copy``. Results: ``benchmarks/results/near_copy.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.bench_quotes import QuotePage, QuoteServer, served_url
from benchmarks.context import NOW, Config, Context
from citeguard import CitationStatus, FetchPolicy, Guard, Policy, Verdict
from citeguard.checks._consistency import check_consistency
from citeguard.checks.near_copy import find_near_copy
from citeguard.checks.passage import prepare_text
from citeguard.web.page import extract_page

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
PASSAGES = DATA / "passages"
CLAIMS = DATA / "claims"
RESULTS = Path(__file__).resolve().parent / "results" / "near_copy.json"
QUESTION = "What does the page say?"
DEV_SETS = {
    "attributionbench": "attributionbench_dev.jsonl",
    "expertqa": "expertqa_pool_train.jsonl",
    "wice": "wice_train.jsonl",
    "factcheckgpt": "factcheckgpt_train.jsonl",
    "summedits": "summedits_train.jsonl",
}
ZH_SENTENCES_PER_PAGE = 12
_DIGITS = re.compile(r"\d+")


# --------------------------------------------------------------------------------------------
# Outcomes
# --------------------------------------------------------------------------------------------


def outcome(verdict: Verdict) -> tuple[str, str]:
    """(clean | rejected | uncertain, reason) of an answer's one citation."""
    if not verdict.citations:
        return "rejected", "no citation parsed"
    report = verdict.citations[0]
    if report.status is not CitationStatus.OK:
        return "rejected", f"{report.status.value}: {report.reason}"
    labels = [c.entailment.label for cl in verdict.claims for c in cl.checks if c.entailment]
    if labels and all(label == "supported" for label in labels):
        return "clean", ""
    return "uncertain", "; ".join(
        c.entailment.reason for cl in verdict.claims for c in cl.checks if c.entailment
    )[:200]


def _tally(rows: list[tuple[str, str, str]]) -> dict[str, Any]:
    """Shares of clean / rejected / uncertain per group, from (group, outcome, reason) rows."""
    by: dict[str, Counter[str]] = defaultdict(Counter)
    reasons: dict[str, Counter[str]] = defaultdict(Counter)
    for group, out, reason in rows:
        for g in (group, "all"):
            by[g][out] += 1
            if out == "rejected":
                reasons[g][reason.split(":", 1)[0]] += 1
    table: dict[str, Any] = {}
    for g, c in sorted(by.items()):
        n = sum(c.values())
        table[g] = {
            "n": n,
            "clean": round(c["clean"] / n, 4),
            "rejected": round(c["rejected"] / n, 4),
            "uncertain": round(c["uncertain"] / n, 4),
            "reject_statuses": dict(reasons[g].most_common(4)),
        }
    return table


async def _check_all(
    server: QuoteServer, answers: list[tuple[str, str]], concurrency: int = 4
) -> list[tuple[str, str, str]]:
    """(group, outcome, reason) of each (group, answer), through one default Guard."""
    policy = Policy(fetch=FetchPolicy(allow_private_addresses=True))
    sem = asyncio.Semaphore(concurrency)
    async with Guard(policy, resolver=server.resolver(), now=lambda: NOW) as guard:
        await guard.warm_up()

        async def one(group: str, answer: str) -> tuple[str, str, str]:
            async with sem:
                out, reason = outcome(await guard.check(answer, question=QUESTION))
                return group, out, reason

        return list(await asyncio.gather(*(one(g, a) for g, a in answers)))


def _answer(claim: str, url: str) -> str:
    return f"{claim.rstrip(' .')} [1].\n\nSources:\n[1] {url}\n"


# --------------------------------------------------------------------------------------------
# Edits by kind and language (shared/data/passages)
# --------------------------------------------------------------------------------------------


def _passage_pages(limit: int | None, seed: int) -> tuple[list[QuotePage], list[dict[str, Any]]]:
    rows = [
        json.loads(line)
        for line in (PASSAGES / "passages.jsonl").read_text(encoding="utf-8").splitlines()
        if line
    ]
    altered = [r for r in rows if r["kind"] == "altered" and (PASSAGES / r["file"]).is_file()]
    if limit is not None and limit < len(altered):
        altered = random.Random(f"{seed}|near_copy").sample(altered, limit)
    pages: dict[str, QuotePage] = {}
    for r in altered:
        if r["file"] in pages:
            continue
        body = (PASSAGES / r["file"]).read_bytes()
        url = served_url(r["url"], r["file"])
        page = extract_page(body, url=url, content_type="text/html", date_fallback=False)
        pages[r["file"]] = QuotePage(
            file=r["file"],
            url=url,
            source_url=r["url"],
            lang=r.get("lang_guess") or "",
            body=body,
            title=page.title,
            text=page.text,
            main_text=page.main_text or page.text,
            quotes=(),
        )
    # two files at one URL: keep the first
    seen: set[tuple[str, str]] = set()
    kept: dict[str, QuotePage] = {}
    for f, p in pages.items():
        parts = urlsplit(p.url)
        key = (parts.hostname or "", parts.path + parts.query)
        if key not in seen:
            seen.add(key)
            kept[f] = p
    return list(kept.values()), [r for r in altered if r["file"] in kept]


async def edits(limit: int | None, seed: int) -> dict[str, Any]:
    """Altered segments and their originals, unquoted, through the guard."""
    pages, rows = _passage_pages(limit, seed)
    url_of = {p.file: p.url for p in pages}
    answers = [
        (f"{r['alteration']}|{r.get('lang_guess')}", _answer(r["quote"], url_of[r["file"]]))
        for r in rows
    ]
    # the unedited segment, and whether it is sentence-like (5 words or more: the shape of a
    # claim; shorter ones are fragments no verbatim rule settles)
    controls = [
        (
            f"unedited|{r.get('lang_guess')}|{len(r['original_quote'].split()) >= 5}",
            _answer(r["original_quote"], url_of[r["file"]]),
        )
        for r in rows
    ]
    server = QuoteServer(pages)
    await server.start()
    try:
        t0 = time.perf_counter()
        edited = await _check_all(server, answers)
        unedited = await _check_all(server, controls)
        seconds = time.perf_counter() - t0
    finally:
        await server.aclose()
    by_kind = _tally([(g.split("|")[0], o, r) for g, o, r in edited])
    by_lang = _tally([(g.split("|")[1], o, r) for g, o, r in edited])
    control = _tally([(g.split("|")[1], o, r) for g, o, r in unedited])
    control_by_shape = _tally(
        [("five_words_or_more" if g.endswith("True") else "fragment", o, r) for g, o, r in unedited]
    )
    return {
        "pages": len(pages),
        "altered_rows": len(rows),
        "by_kind": by_kind,
        "by_language": by_lang,
        "unedited_by_language": control,
        "unedited_by_shape": control_by_shape,
        "seconds": round(seconds, 1),
    }


# --------------------------------------------------------------------------------------------
# Chinese (OCNLI premises as pages; evaluation only)
# --------------------------------------------------------------------------------------------


def _entailed() -> dict[str, list[str]]:
    """Each premise's hypotheses labelled entailment (what a paraphrase that holds looks like)."""
    out: dict[str, list[str]] = defaultdict(list)
    for line in (CLAIMS / "ocnli_dev.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if r["label"] == "entailment":
            out[r["sentence1"].strip()].append(r["sentence2"].strip())
    return out


def _zh_pages(limit: int | None, seed: int) -> dict[str, list[str]]:
    premises: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    for line in (CLAIMS / "ocnli_dev.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        s = r["sentence1"].strip()
        if s in seen or len(s) < 12:
            continue
        seen.add(s)
        premises[r["genre"]].append(s)
    pages: dict[str, list[str]] = {}
    for genre, sents in sorted(premises.items()):
        for k in range(0, len(sents) - ZH_SENTENCES_PER_PAGE + 1, ZH_SENTENCES_PER_PAGE):
            pages[f"{genre}-{k // ZH_SENTENCES_PER_PAGE}"] = sents[k : k + ZH_SENTENCES_PER_PAGE]
    names = sorted(pages)
    if limit is not None and limit < len(names):
        names = sorted(random.Random(f"{seed}|zh").sample(names, limit))
    return {n: pages[n] for n in names}


def _changed_number(sentence: str, rng: random.Random) -> str | None:
    found = list(_DIGITS.finditer(sentence))
    if not found:
        return None
    m = rng.choice(found)
    old = m.group()
    new = str(int(old) + rng.choice((1, 2, 3, 5, 7)))
    return sentence[: m.start()] + new + sentence[m.end() :]


async def chinese(limit: int | None, seed: int) -> dict[str, Any]:
    """Verbatim, number-changed and other-page sentences cited to Chinese pages."""
    pages = _zh_pages(limit, seed)
    entailed = _entailed()
    rng = random.Random(f"{seed}|zh-cases")
    served: list[QuotePage] = []
    answers: list[tuple[str, str]] = []
    names = list(pages)
    for name in names:
        genre = name.split("-")[0]
        url = f"http://zh-{name}.example.cn/report"
        body = (
            f"<html><head><meta charset='utf-8'><title>{name}</title></head><body><article>"
            + "".join(f"<p>{s}</p>" for s in pages[name])
            + "</article></body></html>"
        ).encode()
        served.append(QuotePage(name, url, url, "zh", body, name, "", "", ()))
        sents = pages[name]
        answers.append(("verbatim", _answer(rng.choice(sents), url)))
        numbered = [s for s in sents if _DIGITS.search(s)]
        if numbered:
            changed = _changed_number(rng.choice(numbered), rng)
            if changed is not None:
                answers.append(("number_changed", _answer(changed, url)))
        # a sentence a human labelled entailed by one of the page's sentences: the false-reject
        # control (an inference, often shorter and more reworded than a cited claim)
        held = [h for p in sents for h in entailed.get(p, ())]
        if held:
            answers.append(("entailed_hypothesis", _answer(rng.choice(held), url)))
        donors = [n for n in names if n.split("-")[0] != genre]
        if donors:
            answers.append(("other_page", _answer(rng.choice(pages[rng.choice(donors)]), url)))
    server = QuoteServer(served)
    await server.start()
    try:
        rows = await _check_all(server, answers)
    finally:
        await server.aclose()
    return {"pages": len(served), "cases": _tally(rows)}


# --------------------------------------------------------------------------------------------
# The false-reject control on the development sets (the pure matcher)
# --------------------------------------------------------------------------------------------


def dev_control(limit: int | None) -> dict[str, Any]:
    """Near-copy and blind-language rejections on every development set's labelled rows."""
    out: dict[str, Any] = {}
    total: Counter[str] = Counter()
    for name, file in DEV_SETS.items():
        c: Counter[str] = Counter()
        lines = (CLAIMS / file).read_text(encoding="utf-8").splitlines()
        for line in lines[:limit]:
            r = json.loads(line)
            if not r["evidence"]:
                continue
            label = "supported" if r["label"] == "supported" else "not_supported"
            c[f"{label}_rows"] += 1
            found = find_near_copy(r["claim"], prepare_text(r["evidence"]))
            if found is not None:
                c[f"{label}_{'altered' if found.altered else 'word_replaced'}"] += 1
            cons = check_consistency(r["claim"], r["evidence"][:20_000])
            if (
                cons.n_numbers
                and len(cons.missing_numbers) == cons.n_numbers
                and cons.coverage < 0.3
            ):
                c[f"{label}_blind_rule"] += 1
        out[name] = dict(c)
        total.update(c)

    def precision(kind: str) -> float | None:
        hit = total[f"not_supported_{kind}"] + total[f"supported_{kind}"]
        return round(total[f"not_supported_{kind}"] / hit, 4) if hit else None

    out["all"] = dict(total)
    out["altered_precision"] = precision("altered")
    out["blind_rule_precision"] = precision("blind_rule")
    out["supported_altered_share"] = round(
        total["supported_altered"] / max(1, total["supported_rows"]), 4
    )
    out["supported_word_replaced_share"] = round(
        total["supported_word_replaced"] / max(1, total["supported_rows"]), 4
    )
    return out


# --------------------------------------------------------------------------------------------
# The suite scenario
# --------------------------------------------------------------------------------------------


async def bench(size: str, seed: int = 0) -> dict[str, Any]:
    """Every measurement at ``size`` (full | quick | smoke)."""
    limits = {"full": (None, None, None), "quick": (40, 12, 300), "smoke": (6, 3, 40)}[size]
    res: dict[str, Any] = {"size": size, "seed": seed}
    if (PASSAGES / "passages.jsonl").is_file():
        res["edits"] = await edits(limits[0], seed)
    if (CLAIMS / "ocnli_dev.jsonl").is_file():
        res["chinese"] = await chinese(limits[1], seed)
    if (CLAIMS / "attributionbench_dev.jsonl").is_file():
        res["dev_control"] = await asyncio.to_thread(dev_control, limits[2])
    return res


def _targets(res: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(name: str, target: str, value: float | None, met: bool) -> None:
        rows.append({"name": name, "target": target, "value": value, "met": met})

    edited = res.get("edits", {}).get("by_kind", {}).get("all")
    if edited:
        add("one-edit segments passed clean", "<= 0.05", edited["clean"], edited["clean"] <= 0.05)
        add("one-edit segments rejected", ">= 0.60", edited["rejected"], edited["rejected"] >= 0.6)
    control = res.get("edits", {}).get("unedited_by_language", {}).get("all")
    if control:
        add("unedited segments passed clean", ">= 0.90", control["clean"], control["clean"] >= 0.9)
    zh = res.get("chinese", {}).get("cases", {})
    if "number_changed" in zh:
        v = zh["number_changed"]["rejected"]
        add("Chinese: a changed number rejected", ">= 0.60", v, v >= 0.6)
    if "other_page" in zh:
        v = zh["other_page"]["clean"]
        add("Chinese: another page's sentence passed clean", "== 0", v, v == 0)
    dev = res.get("dev_control", {})
    if dev.get("altered_precision") is not None:
        v = dev["altered_precision"]
        add("near-copy hard rejects right on the development sets", ">= 0.90", v, v >= 0.9)
    return rows


async def scenario(cfg: Config, ctx: Context) -> dict[str, Any]:
    """``near_copy``: full (every row), quick, smoke."""
    res = await bench(cfg.size, cfg.seed)
    res["targets"] = _targets(res)
    return res


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    size = "quick" if args.quick else "full"
    res = asyncio.run(bench(size, args.seed))
    res["targets"] = _targets(res)
    if size == "full":
        RESULTS.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(res, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())

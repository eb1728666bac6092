"""Guard latency on long pages (issue 42): the ``guard`` scenario's measurement on pages of
50-150 kB.

    python -m benchmarks --only guard_long          # full sizes (1, 5, 10, 25, 50 citations)
    python -m benchmarks --quick --only guard_long  # 1, 10, 50

The loopback web (:mod:`benchmarks.web`, its hosts and seeded latencies) serves
:func:`long_pages` instead of the shared pages: each page is a real page of
``../shared/data/passages`` (its main text as citeguard extracts it) followed by the main texts
of the next pages, one section each under its own heading, until its HTML reaches a seeded size
of 50-150 kB. The quotes an answer uses are sentences from anywhere on the page, so a claim's
evidence is as often deep in the page as near its top. Without the data folder, generated pages
are repeated up to the same sizes.

What runs is ``scenarios.guard_latency`` itself on that web: ``Guard.check`` time for answers
of N citations against the slowest of their URLs fetched alone (the same run, seconds apart);
entailment off, the local model on quoting answers, and ``local_paraphrase`` (every claim a
paraphrase behind a lead-in, so the model judges each: the issue's "50-citation paraphrase
ratio", target <= 1.6; 10 citations <= 1.2). Reported beside the ratios: time per claim
(guard time / citations) and the pages' sizes.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace
from functools import cache
from typing import Any

from benchmarks.context import Config, Context
from benchmarks.longdata import PageSpec, host_files, host_page
from benchmarks.web import LoopbackWeb, PageSet

N_PAGES = 60  # a 50-citation answer cites 50 distinct pages
MIN_BYTES, MAX_BYTES = 50_000, 150_000
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-ZÄÖÜÀ-Ý0-9])")


def _quotes(paragraphs: list[str], rng: random.Random, k: int = 3) -> tuple[str, ...]:
    """``k`` sentences of the page (30-200 characters, no quotation marks or brackets)."""
    sentences = [
        s.strip()
        for p in paragraphs
        for s in _SENTENCE.split(p)
        if 30 <= len(s.strip()) <= 200 and not any(c in s for c in '"[]“”„')
    ]
    return tuple(rng.sample(sentences, min(k, len(sentences))))


@cache
def long_pages(seed: int, n_pages: int = N_PAGES) -> PageSet:
    """``n_pages`` pages of 50-150 kB (see the module doc), with quotes on each. The shared
    pages are extracted as a long page needs them (by file name, in turn)."""
    files = host_files(None)
    names: list[str] = []
    quotes: list[tuple[str, ...]] = []
    bodies: list[bytes] = []
    if not files:
        from benchmarks.web import load_pages

        gen = load_pages(seed)  # generated pages: their sentences are the paragraphs
        for i in range(n_pages):
            rng = random.Random(f"{seed}|long|{i}")
            body = gen.body(i % len(gen), seed)
            unit = body.split(b"<article>", 1)[1].split(b"</article>", 1)[0]
            target = rng.randint(MIN_BYTES, MAX_BYTES)
            copies = target // max(1, len(unit)) + 1
            while copies > 1 and len(body) + (copies - 1) * len(unit) > MAX_BYTES:
                copies -= 1
            bodies.append(body.replace(unit, unit * copies, 1))
            names.append(f"generated-long-{i}")
            quotes.append(gen.quotes[i % len(gen)])
        return PageSet(tuple(names), tuple(quotes), generated=True, bodies=tuple(bodies))
    for i in range(n_pages):
        rng = random.Random(f"{seed}|long|{i}")
        target = rng.randint(MIN_BYTES, MAX_BYTES)
        blocks: list[tuple[str, str]] = []
        paragraphs: list[str] = []
        first = None
        size = 0
        k = 0
        while size < target and k < len(files):
            h = host_page(files[(i + k) % len(files)])
            k += 1
            if h is None:
                continue
            first = first or h
            blocks.append(("h2", h.title))
            blocks += [("p", p) for p in h.paragraphs]
            paragraphs += h.paragraphs
            size += sum(len(p.encode()) + 8 for p in h.paragraphs) + len(h.title.encode())
        if first is None:
            break
        blocks.insert(0, ("h1", first.title))
        page = PageSpec(first.title, tuple(blocks))
        body = page.html()
        while len(body) > MAX_BYTES and len(blocks) > 3:  # the last section made it too long
            blocks.pop()
            body = replace(page, blocks=tuple(blocks)).html()
        kept = {t for tag, t in blocks if tag == "p"}
        names.append(f"long-{i}-{first.file}")
        quotes.append(_quotes([p for p in paragraphs if p in kept], rng))
        bodies.append(body)
    return PageSet(tuple(names), tuple(quotes), generated=False, bodies=tuple(bodies))


async def guard_long(cfg: Config, ctx: Context) -> dict[str, Any]:
    """``guard_latency`` on the long-page web (see the module doc)."""
    from benchmarks.scenarios.guard import guard_latency

    web = LoopbackWeb(cfg.seed, pages=cfg.pick("long", "long", "long:8"))
    # the suite's entailer (the model loads once per run), on a web of long pages
    long_ctx = Context(cfg.seed, _web=web, _local=ctx._local)
    try:
        res = await guard_latency(cfg, long_ctx)
    finally:
        web.close()
        ctx._local = long_ctx._local  # keep a model it loaded for the scenarios after it
    sizes = [len(web.pages.body(i, cfg.seed)) for i in range(len(web.pages))]
    for row in res["rows"].values():
        row["guard_ms_per_claim_median"] = round(row["guard_ms_median"] / row["citations"], 2)
    targets = []
    for t in res["targets"]:
        if "paraphrase" not in t["name"]:
            continue
        n = int(t["name"].split()[1])
        goal = 1.2 if n == 10 else 1.6
        targets.append(
            {
                **t,
                "name": f"long pages: {t['name']}",
                "target": f"<= {goal}",
                "met": t["value"] <= goal,
            }
        )
    res["targets"] = targets
    res["pages"] = {
        "count": len(sizes),
        "bytes_min": min(sizes),
        "bytes_median": sorted(sizes)[len(sizes) // 2],
        "bytes_max": max(sizes),
        "generated": web.pages.generated,
    }
    res["notes"] = [
        *res["notes"],
        "pages: 50-150 kB each (benchmarks/bench_guard_long.py), quotes from anywhere on them",
        "issue 42's targets: paraphrases, 10 citations <= 1.2, 50 citations <= 1.6",
    ]
    return res


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.bench_guard_long [--size quick]``: run the scenario alone and
    write ``results/guard_long.json``."""
    import argparse
    import asyncio
    import json
    import os
    from pathlib import Path

    from benchmarks.__main__ import _clean, run_suite

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=("full", "quick", "smoke"), default="quick")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "guard_long.json"
    )
    args = ap.parse_args(argv)
    res = asyncio.run(run_suite(Config(seed=args.seed, size=args.size), ["guard_long"]))
    res["meta"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.write_text(json.dumps(_clean(res), indent=1) + "\n", encoding="utf-8")
    for k, row in res["scenarios"]["guard_long"]["rows"].items():
        print(k, row["ratio_median"], row["guard_ms_per_claim_median"], row["statuses"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

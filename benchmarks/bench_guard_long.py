"""Guard latency on long pages (issue 42): the ``guard`` scenario's measurement on pages of
50-150 kB.

    python -m benchmarks --only guard_long          # full sizes (1, 5, 10, 25, 50 citations)
    python -m benchmarks --quick --only guard_long  # 1, 10, 50

The loopback web (:mod:`benchmarks.web`, its hosts and seeded latencies) serves
:func:`benchmarks.long_pages.long_pages` instead of the shared pages: each page is a real page of
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

from typing import Any

from benchmarks.context import Config, Context
from benchmarks.web import LoopbackWeb


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

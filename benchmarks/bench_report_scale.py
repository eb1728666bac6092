"""Report-scale guard latency (issue 56): a research report of 100, 200 or 300 citations over
long pages, checked by a fresh Guard, against the slowest of its pages fetched alone and
against the fetch-only floor.

    python -m benchmarks --only report_scale           # 100, 200, 300 citations, 3 runs each
    python -m benchmarks --quick --only report_scale   # 100 and 200, 1 run each
    python -m benchmarks.bench_report_scale --profile 200   # one 200-citation run under
                                                           # cProfile, where the time goes

The web (:class:`benchmarks.web.LoopbackWeb`, ``host_set="report"``, ``pages="report"``): 12
hosts on loopback at their own names, every URL delayed 50-400 ms (seeded per URL), the real
pages of ``../shared/data/passages`` as they are (20-320 kB of HTML with their markup and
boilerplate; :func:`benchmarks.long_pages.report_pages`), each URL its own bytes (no two URLs
share a body). Most of those pages are German, so most claims are in a language the support
model is not shown to judge (``EntailmentPolicy.model_languages``), as half of a public
deep-research benchmark's reports are Chinese. A report of N citations cites S sources
(100: 55, 200: 66, 300: 72, the held-out reports' shapes), about three quarters of them on one
host (49 of 66 in the 200-citation report: a report built on one site's pages), 3% of them
404s. Each citation is a sentence of its source's page: a quarter quoted, the rest stated as
the report's own claim behind a lead-in, so the support model judges it. Claims sit in
paragraphs of five under headings, and a numbered reference list closes the report.

Each run: a fresh ``Guard`` (the local support model), ``warm_up()``, then a 5-citation check on
other URLs (a service's first request), then the slowest page of the report fetched alone by a
fresh aiohttp session, then every URL of the report fetched by a fresh citeguard ``Fetcher``
under the same policy (the floor: what fetching alone costs at the policy's per-host
concurrency), then ``Guard.check`` on the report, timed. Ratios: check time / slowest page, and
check time / fetch floor. Reported beside them: the time at which the last page had arrived
(the fetch floor measured inside the check: ``after_last_page_ms`` is what the checks added).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import random
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from benchmarks.context import NOW, QUESTION, Config, Context
from benchmarks.web import LoopbackWeb, PlannedUrl, build_answer
from citeguard import Guard, Policy
from citeguard.web.fetch import Fetcher

#: citations → sources, as in the held-out reports
REPORTS: dict[int, int] = {100: 55, 200: 66, 300: 72}
HEAVY_SHARE = 0.74  # sources on the one heavy host (49 of 66)
MISSING_SHARE = 0.03
QUOTED_SHARE = 0.25
PARAGRAPH = 5  # claims a paragraph
GOALS = {200: 3.0, 300: 3.5}  # issue 56: check time / slowest page


def plan_report(
    web: LoopbackWeb, n_citations: int, n_sources: int, tag: str
) -> tuple[list[PlannedUrl], list[int]]:
    """The report's sources (one URL each) and, per citation, the source it cites."""
    rng = random.Random(f"{web.seed}|report|{tag}")
    hosts = list(web.answering_hosts)
    heavy, others = hosts[0], hosts[1:]
    pages = list(range(len(web.pages)))
    rng.shuffle(pages)
    urls: list[PlannedUrl] = []
    for s in range(n_sources):
        host = heavy if rng.random() < HEAVY_SHARE else others[s % len(others)]
        kind = "missing" if rng.random() < MISSING_SHARE else "ok"
        urls.append(web.planned(host, kind, f"{tag}-{s}", pages[s % len(pages)], unique=True))
    cites = list(range(n_sources))
    # the rest skewed: a report leans on a few sources (a source's weight 1/(rank+1))
    weights = [1.0 / (k + 1) for k in range(n_sources)]
    cites += rng.choices(range(n_sources), weights=weights, k=max(0, n_citations - n_sources))
    rng.shuffle(cites)
    return urls, cites


def build_report(
    web: LoopbackWeb, urls: Sequence[PlannedUrl], cites: Sequence[int], tag: str
) -> str:
    """The report's text: paragraphs of claims under headings, a numbered reference list."""
    rng = random.Random(f"{web.seed}|report-text|{tag}")
    used: Counter[int] = Counter()
    claims: list[str] = []
    for s in cites:
        u = urls[s]
        quotes = web.pages.quotes[u.page] if u.page is not None else ()
        if not quotes:
            claims.append(f"Source {s + 1} covers this part of the topic as well [{s + 1}].")
            continue
        q = quotes[used[s] % len(quotes)]
        used[s] += 1
        if rng.random() < QUOTED_SHARE:
            claims.append(f'One source puts it this way: "{q}" [{s + 1}].')
        else:
            claims.append(f"In short: {q.rstrip('.!?。 ')} [{s + 1}].")
    parts = ["# Findings", ""]
    for i in range(0, len(claims), PARAGRAPH):
        if i and i % (PARAGRAPH * 4) == 0:
            parts += [f"## Part {i // (PARAGRAPH * 4) + 1}", ""]
        parts += [" ".join(claims[i : i + PARAGRAPH]), ""]
    parts += ["## References", ""]
    parts += [f"[{k}] {web.url(u)}" for k, u in enumerate(urls, 1)]
    return "\n".join(parts) + "\n"


async def fetch_floor(web: LoopbackWeb, urls: Sequence[PlannedUrl], policy: Policy) -> float:
    """Seconds for a fresh citeguard Fetcher (the guard's policy) to fetch every URL with its
    body: the least the guard can take at that per-host concurrency."""
    async with Fetcher(policy.fetch, resolver=web.resolver()) as fetcher:
        t0 = time.perf_counter()
        await fetcher.fetch_all([web.url(u) for u in urls], want_body=True)
        return time.perf_counter() - t0


async def one_report(
    web: LoopbackWeb, n: int, tag: str, *, entailment: str = "local", profile: bool = False
) -> dict[str, Any]:
    """One run (see the module doc); ``profile``: the check under cProfile (its text kept)."""
    from benchmarks.scenarios.common import fetch_alone, guard_policy, settle

    policy = guard_policy(entailment)
    urls, cites = plan_report(web, n, REPORTS.get(n, max(1, n // 3)), tag)
    report = build_report(web, urls, cites, tag)
    async with Guard(policy, resolver=web.resolver(), now=lambda: NOW) as guard:
        t_warm = time.perf_counter()
        await guard.warm_up()
        warm_s = time.perf_counter() - t_warm
        small = web.plan(5, tag=f"{tag}-first", distinct_pages=True, share_missing=0.0)
        await guard.check(build_answer(web, small, quoted=False), question=QUESTION)
        answering = [u for u in urls if u.delay_ms is not None and u.kind != "missing"]
        slowest = max(answering, key=lambda u: u.delay_ms or 0.0)
        await settle(0.05)
        alone = await fetch_alone(web.url(slowest, by_name=False))
        floor = await fetch_floor(web, urls, policy)
        await settle(0.05)
        prof = cProfile.Profile() if profile else None
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        if prof is not None:
            prof.enable()
        verdict = await guard.check(report, question=QUESTION)
        took = time.perf_counter() - t0
        if prof is not None:
            prof.disable()
        cpu = time.process_time() - cpu0
    statuses = Counter(c.status.value for c in verdict.citations)
    row: dict[str, Any] = {
        "citations": len(verdict.citations),
        "sources": len(urls),
        "report_chars": len(report),
        "warm_up_ms": round(warm_s * 1000, 1),
        "guard_ms": round(took * 1000, 1),
        "guard_cpu_ms": round(cpu * 1000, 1),
        "slowest_alone_ms": round(alone * 1000, 1),
        "fetch_floor_ms": round(floor * 1000, 1),
        "ratio_to_slowest": round(took / alone, 3),
        "ratio_to_floor": round(took / floor, 3),
        "after_floor_ms": round((took - floor) * 1000, 1),
        "statuses": dict(statuses),
        # what failed besides the planned 404s: a status and its reason per URL
        "failed": sorted(
            {
                f"{c.status.value}: {c.reason[:120]}"
                for c in verdict.citations
                if c.status.value not in ("ok", "not_found")
            }
        ),
    }
    if prof is not None:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(60)
        row["profile"] = out.getvalue()
    return row


async def report_scale(cfg: Config, ctx: Context) -> dict[str, Any]:
    """The scenario (see the module doc)."""
    from benchmarks.scenarios.common import med, target

    sizes: tuple[int, ...] = cfg.pick((100, 200, 300), (100, 200), (20,))
    reps = cfg.reps(3, 1)
    rows: dict[str, dict[str, Any]] = {}
    with LoopbackWeb(cfg.seed, pages="report", host_set="report") as web:
        for n in sizes:
            runs = [await one_report(web, n, f"r{n}-{rep}") for rep in range(reps)]
            rows[str(n)] = {
                "citations": n,
                "sources": runs[0]["sources"],
                "reps": reps,
                "ratio_to_slowest_median": round(med([r["ratio_to_slowest"] for r in runs]), 3),
                "ratio_to_floor_median": round(med([r["ratio_to_floor"] for r in runs]), 3),
                "guard_ms_median": round(med([r["guard_ms"] for r in runs]), 1),
                "guard_cpu_ms_median": round(med([r["guard_cpu_ms"] for r in runs]), 1),
                "slowest_alone_ms_median": round(med([r["slowest_alone_ms"] for r in runs]), 1),
                "fetch_floor_ms_median": round(med([r["fetch_floor_ms"] for r in runs]), 1),
                "runs": runs,
            }
        sizes_kb = sorted(len(web.pages.body(i, cfg.seed)) // 1000 for i in range(len(web.pages)))
    targets = [
        target(
            f"report of {n} citations: check time / slowest page",
            f"<= {goal}",
            rows[str(n)]["ratio_to_slowest_median"],
            rows[str(n)]["ratio_to_slowest_median"] <= goal,
        )
        for n, goal in GOALS.items()
        if str(n) in rows
    ]
    return {
        "sizes": list(sizes),
        "rows": rows,
        "pages_kb": {
            "min": sizes_kb[0],
            "median": sizes_kb[len(sizes_kb) // 2],
            "max": sizes_kb[-1],
        },
        "targets": targets,
        "notes": [
            "a fresh Guard each run (local support model), warm_up() and a 5-citation check "
            "first; the slowest page fetched alone and the fetch floor measured seconds before",
            "12 hosts, 50-400 ms a URL, ~74% of the sources on one host, pages 5-380 kB",
        ],
    }


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", type=int, default=0, help="one run of N citations, profiled")
    parser.add_argument("--sizes", default="200", help="citations a report, comma-separated")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--entailment", default="local", choices=("local", "off"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sizes = [args.profile] if args.profile else [int(n) for n in args.sizes.split(",")]

    async def main() -> None:
        with LoopbackWeb(args.seed, pages="report", host_set="report") as web:
            for n in sizes:
                for k in range(args.runs):
                    row = await one_report(
                        web, n, f"r{n}-{k}", entailment=args.entailment, profile=bool(args.profile)
                    )
                    text = row.pop("profile", "")
                    print(json.dumps({"n": n, **row}), flush=True)
                    if text:
                        print(text)

    asyncio.run(main())
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())

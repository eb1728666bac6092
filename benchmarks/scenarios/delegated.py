"""The scenarios that run a ``bench_*`` module: ``snapshot``, ``axes``, ``quotes``, ``dates``,
``stream``, ``repair``, ``report_parse``, ``soft404_load`` and ``scholarly``."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from benchmarks.context import Config, Context
from benchmarks.scenarios.common import target
from benchmarks.web import DATA

# --------------------------------------------------------------------------------------------
# 5. Replay from a snapshot (bench_snapshot)
# --------------------------------------------------------------------------------------------


async def snapshot(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Replaying a 10-URL answer from the SQLite store vs fetching it live on loopback
    (``bench_snapshot.bench``)."""
    from benchmarks import bench_snapshot

    runs = cfg.pick(300, 50, 5)
    if cfg.repeat is not None:
        runs = max(5, cfg.repeat * 20)
    live = cfg.pick(10, 5, 2)
    res = await bench_snapshot.bench(runs, live)
    res["targets"] = [
        target(
            "replay of a 10-URL answer, median (ms)",
            f"< {bench_snapshot.TARGET_MS}",
            res["replay"]["median_ms"],
            res["replay"]["median_ms"] < bench_snapshot.TARGET_MS,
        )
    ]
    return res


# --------------------------------------------------------------------------------------------
# 7. Answer-level axes (bench_axes)
# --------------------------------------------------------------------------------------------


async def axes(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Diversity µs per answer and score_query µs per pair against their same-run baselines,
    and freshness-regime accuracy on FreshQA (``bench_axes``)."""
    from benchmarks import bench_axes

    repeat = cfg.reps(15, 5, 1)
    div = bench_axes.diversity_speed(repeat)
    query = bench_axes.query_speed(repeat)
    acc = bench_axes.regime_accuracy()
    return {
        "repeat": repeat,
        "diversity": div,
        "query": query,
        "regime_accuracy": acc,
        "ratios": {
            "diversity_vs_count_hosts": round(div["ratio_domain_given_vs_baseline"], 3),
            "score_query_vs_tokenise": round(query["ratio_vs_baseline"], 3),
        },
        "targets": [
            target(
                "check_diversity µs per 10-citation answer",
                "< 100",
                round(div["us_per_answer_domain_given"], 2),
                div["us_per_answer_domain_given"] < 100,
            )
        ],
    }


# --------------------------------------------------------------------------------------------
# 8. Whole-guard false rejects of verbatim quotes (bench_quotes)
# --------------------------------------------------------------------------------------------


async def quotes(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Verbatim quotes of real pages, bare, framed, as an inline link, with added content and
    with a dropped negation, through the default guard and with entailment off
    (``bench_quotes``)."""
    from benchmarks import bench_quotes

    return await bench_quotes.scenario(cfg, ctx)


async def near_copy(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Page segments with one meaning-changing edit cited unquoted, by kind and language;
    Chinese sentences with a number changed or from another page; the development sets'
    labelled claims as the false-reject control (``bench_near_copy``)."""
    from benchmarks import bench_near_copy

    return await bench_near_copy.scenario(cfg, ctx)


# --------------------------------------------------------------------------------------------
# 9. Publication dates per subset (bench_dates)
# --------------------------------------------------------------------------------------------


async def dates(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Publication-date accuracy per subset of the shared dates set, citeguard against htmldate
    in the same run, on a tuning and a held-out half, and the time per page of the date stages
    alone and of the whole of ``extract_page`` (``bench_dates.run``)."""
    if not (DATA / "dates" / "dates.jsonl").is_file():
        return {"skipped": f"shared data absent ({DATA}/dates)"}
    from benchmarks import bench_dates

    res = await asyncio.to_thread(
        bench_dates.run, cfg.reps(3, 1), bench_dates.DATA, cfg.pick(None, 60, 4)
    )
    res.pop("pages_detail", None)
    table = res["table"]
    margin = min(
        table[name][half]["citeguard"]["accuracy"] - table[name][half]["htmldate"]["accuracy"]
        for name in table
        for half in ("tuning", "held_out", "both")
        if table[name][half]["citeguard"]["n"]
    )
    overall = table["all"]["both"]["citeguard"]["accuracy"]
    median = float(res["time"]["extract_page"].get("median_ms", math.nan))
    # extract_page's date stages alone: the work htmldate.find_date does (no page text)
    dates_median = float(res["time"]["date_stages"].get("median_ms", math.nan))
    res["targets"] = [
        target(
            "date accuracy − htmldate's, worst subset and half",
            ">= 0",
            round(margin, 4),
            margin >= 0,
        ),
        target("date accuracy, all pages", ">= 0.93", overall, overall >= 0.93),
        target(
            "date stages median per page, dates set (ms)",
            "<= 2.0",
            dates_median,
            dates_median <= 2.0,
        ),
        target("extract_page median per page, dates set (ms)", "<= 2.0", median, median <= 2.0),
    ]
    return res


# --------------------------------------------------------------------------------------------
# Verifying while the answer streams (bench_stream)
# --------------------------------------------------------------------------------------------


async def stream(cfg: Config, ctx: Context) -> dict[str, Any]:
    """``Guard.stream`` on a timed stream of 10 citations: last chunk → verdict against the
    remaining fetch time of the last-cited URL, beside ``check()`` after the stream
    (``bench_stream``)."""
    from benchmarks import bench_stream

    return await bench_stream.scenario(cfg, ctx)


# --------------------------------------------------------------------------------------------
# Repair before regenerate (bench_repair)
# --------------------------------------------------------------------------------------------


async def repair(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Scripted agents whose first answer cites a dead or wrong URL while their searches hold
    the right page: answer-function calls and wall time under ``Policy(repair="off" |
    "citations" | "full")``, and the share of repairs a fresh ``check()`` confirms
    (``bench_repair``)."""
    from benchmarks import bench_repair

    return await bench_repair.scenario(cfg, ctx)


# --------------------------------------------------------------------------------------------
# Report parse rate (bench_report_parse)
# --------------------------------------------------------------------------------------------


async def report_parse(cfg: Config, ctx: Context) -> dict[str, Any]:
    """Seeded synthetic reports, English and Chinese, in every shape of issue 43: the share of
    markers bound to their URL, reference errors per report, ``blocked_scheme`` findings
    (``bench_report_parse``)."""
    from benchmarks import bench_report_parse

    return await bench_report_parse.scenario(cfg, ctx)


async def soft404_load(cfg: Config, ctx: Context) -> dict[str, Any]:
    """200 checks x 10 short templated pages in flight (one in seven states a height of 404
    metres): false ``soft_404`` (target 0), and real not-found pages in 7 languages still caught
    (``bench_soft404_load``)."""
    from benchmarks import bench_soft404_load

    return await bench_soft404_load.scenario(cfg, ctx)


# --------------------------------------------------------------------------------------------
# Scholarly references, closed world (bench_scholarly)
# --------------------------------------------------------------------------------------------


async def scholarly(cfg: Config, ctx: Context) -> dict[str, Any]:
    """HALLMARK's dev split rendered in seven citation styles, checked through the guard against
    a local DOI resolver, landing pages and Crossref-format API holding the real papers:
    detection, false positives and F1 per kind, tune and held-out halves
    (``bench_scholarly``)."""
    from benchmarks import bench_scholarly

    return await bench_scholarly.scenario(cfg, ctx)

"""Scenario ``extract``: extraction and passage matching (``bench_extract``)."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from benchmarks.context import Config, Context
from benchmarks.scenarios.common import target
from benchmarks.web import DATA

# --------------------------------------------------------------------------------------------
# 3. Extraction + passage matching (bench_extract)
# --------------------------------------------------------------------------------------------


async def extraction(cfg: Config, ctx: Context) -> dict[str, Any]:
    """CPU per page: citeguard's extraction + passage matching vs trafilatura and htmldate,
    via ``bench_extract.bench_passages`` (single thread, so wall ≈ CPU; each timing is the
    minimum over its repetitions, trafilatura's a single run)."""
    if not (DATA / "passages" / "passages.jsonl").is_file():
        return {"skipped": f"shared data absent ({DATA}/passages)"}
    from benchmarks import bench_extract

    limit = cfg.pick(None, 30, 2)
    reps = cfg.reps(3, 1)
    cpu0 = time.process_time()
    res = await asyncio.to_thread(bench_extract.bench_passages, limit, reps)
    cpu = time.process_time() - cpu0
    t = res["time"]

    def m(key: str) -> float:
        return float(t.get(key, {}).get("median_ms", math.nan))

    quotes_per_page = sum(res["quotes"].values()) / max(1, res["pages"])
    ours = (
        m("extract_page")
        + m("prepare_text_per_page")
        + quotes_per_page * m("find_passage_per_quote")
    )
    ours_no_dates = (
        m("extract_page_date_fallback_off")
        + m("prepare_text_per_page")
        + quotes_per_page * m("find_passage_per_quote")
    )
    ratios = {
        "extract_page_vs_trafilatura": round(m("extract_page") / m("trafilatura_extract"), 4),
        "extract_page_vs_htmldate": round(m("extract_page") / m("htmldate_find_date"), 4),
        "extract_and_match_vs_trafilatura_plus_htmldate": round(
            ours / (m("trafilatura_extract") + m("htmldate_find_date")), 4
        ),
        "find_passage_vs_plain_fuzzy": round(
            m("find_passage_per_quote") / m("plain_fuzzy_baseline_per_quote"), 4
        ),
    }
    return {
        "pages": res["pages"],
        "quotes": res["quotes"],
        "reps": reps,
        "quotes_per_page": round(quotes_per_page, 2),
        "median_ms": {
            k: m(k)
            for k in (
                "extract_page",
                "extract_page_date_fallback_off",
                "prepare_text_per_page",
                "find_passage_per_quote",
                "plain_fuzzy_baseline_per_quote",
                "trafilatura_extract",
                "htmldate_find_date",
            )
        },
        "extract_and_match_ms_per_page": round(ours, 4),
        "extract_and_match_ms_per_page_no_date_fallback": round(ours_no_dates, 4),
        "ratios": ratios,
        "acceptance": res["acceptance"].get("page_text"),
        "process_cpu_s": round(cpu, 2),
        "targets": [
            target(
                "extraction + matching per page / (trafilatura + htmldate)",
                "< 1.0",
                ratios["extract_and_match_vs_trafilatura_plus_htmldate"],
                ratios["extract_and_match_vs_trafilatura_plus_htmldate"] < 1.0,
            )
        ],
    }

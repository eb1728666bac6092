"""Benchmark page extraction, publication dates and passage matching on the shared dev sets.

    python benchmarks/bench_extract.py [--quick] [--reps N] [--out PATH]

Data: ``shared/data/dates`` (250 pages with human-labelled first-publication dates, htmldate's
evaluation set) and ``shared/data/passages`` (150 pages, 820 quotes labelled exact, boilerplate,
altered or fabricated, from trafilatura's evaluation set); see ``shared/data/README.md``.

Reported, everything measured in the same run:

* **dates** (day granularity, htmldate's scoring: a right date is a true positive, a wrong one a
  false positive, none a false negative; accuracy = TP / n): ``citeguard.extract_page`` on the raw
  bytes, against ``htmldate.find_date`` on the page decoded as htmldate's benchmark does (UTF-8,
  else charset_normalizer) with ``original_date=True`` and ``extensive_search=True`` (its best
  setting; ``extensive_search=False`` is reported too). Both get the page URL.
* **passages**: acceptance rate per kind (exact, boilerplate, altered, fabricated), searching the
  whole visible text and, separately, the cheap main-text heuristic (``Page.main_text``) and
  trafilatura's ``extract()`` main text; beside the baseline "plain fuzzy at 90":
  ``rapidfuzz.fuzz.partial_ratio(quote, text) >= 90`` over the lower-cased full text. Paraphrase
  mode (``find_paraphrase``) acceptance per kind is reported for reference.
* **time**: median / p90 per page for ``extract_page`` (and its split: pages whose date came from
  metadata vs. from the htmldate fallback; and with ``date_fallback=False``),
  ``htmldate.find_date`` and ``trafilatura.extract``;
  per quote for ``find_passage`` on a prepared page (``prepare_text`` per page reported apart)
  and for the plain-fuzzy baseline. Each timing is the minimum over ``--reps`` repetitions
  (default 3) to damp noise from other processes; trafilatura is timed once per page.

Targets: exact found ≥ 0.99, altered accepted ≤ 0.05, fabricated accepted = 0; date accuracy ≥
htmldate's; extraction median ≤ 2 ms per page; matching median ≤ 1 ms per quote.
``--quick`` uses 60 date pages, 40 passage pages and one repetition.
Results: ``benchmarks/results/bench_extract[_quick].json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
sys.path.insert(0, str(ROOT))

from citeguard.checks.passage import (  # noqa: E402
    PreparedText,
    find_paraphrase,
    find_passage,
    prepare_text,
)
from citeguard.models import Page  # noqa: E402
from citeguard.web.page import extract_page  # noqa: E402

KINDS = ("exact", "boilerplate", "altered", "fabricated")


def _timed(fn: Callable[[], Any], reps: int) -> tuple[Any, float]:
    best = float("inf")
    result: Any = None
    for _ in range(max(1, reps)):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return result, best * 1000.0


def _stats(ms: list[float]) -> dict[str, float | int]:
    if not ms:
        return {"n": 0}
    ordered = sorted(ms)
    return {
        "n": len(ordered),
        "median_ms": round(statistics.median(ordered), 4),
        "p90_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))], 4),
        "mean_ms": round(statistics.fmean(ordered), 4),
    }


def _decode_like_htmldate(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes

        best = from_bytes(body).best()
        return str(best) if best is not None else body.decode("utf-8", "replace")


def _score(results: list[tuple[str | None, str]]) -> dict[str, float | int]:
    tp = sum(1 for got, want in results if got == want)
    fp = sum(1 for got, want in results if got is not None and got != want)
    fn = sum(1 for got, _ in results if got is None)
    n = len(results)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "n": n,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "accuracy": round(tp / n, 4) if n else 0.0,
        "f1": round(f1, 4),
    }


def bench_dates(limit: int | None, reps: int) -> dict[str, Any]:
    import htmldate

    rows = [json.loads(line) for line in (DATA / "dates" / "dates.jsonl").open(encoding="utf-8")]
    if limit is not None:
        rows = rows[:limit]
    now = datetime.now(UTC)
    ours: list[tuple[str | None, str]] = []
    hd_ext: list[tuple[str | None, str]] = []
    hd_fast: list[tuple[str | None, str]] = []
    t_ours: list[float] = []
    t_ours_nofallback: list[float] = []
    t_ours_meta: list[float] = []
    t_ours_fallback: list[float] = []
    t_hd: list[float] = []
    sources: Counter[str] = Counter()
    for row in rows:
        body = (DATA / "dates" / row["file"]).read_bytes()
        want = row["expected_date"]
        page, ms = _timed(
            partial(extract_page, body, url=row["url"], content_type="text/html", now=now), reps
        )
        t_ours.append(ms)
        no_fallback = partial(
            extract_page,
            body,
            url=row["url"],
            content_type="text/html",
            now=now,
            date_fallback=False,
        )
        t_ours_nofallback.append(_timed(no_fallback, reps)[1])
        source = page.date_source or "none"
        sources[source] += 1
        (t_ours_fallback if source in ("htmldate", "none") else t_ours_meta).append(ms)
        ours.append((page.published.date().isoformat() if page.published else None, want))
        html = _decode_like_htmldate(body)
        found, ms = _timed(
            partial(
                htmldate.find_date, html, url=row["url"], original_date=True, extensive_search=True
            ),
            reps,
        )
        t_hd.append(ms)
        hd_ext.append((found, want))
        fast = htmldate.find_date(html, url=row["url"], original_date=True, extensive_search=False)
        hd_fast.append((fast, want))
    return {
        "pages": len(rows),
        "citeguard": {
            **_score(ours),
            "settings": "structured metadata first; htmldate fallback with original_date=True, "
            "extensive_search=True",
            "date_sources": dict(sources.most_common()),
        },
        "htmldate": {
            **_score(hd_ext),
            "settings": "find_date(original_date=True, extensive_search=True, url=...)",
        },
        "htmldate_fast": {
            **_score(hd_fast),
            "settings": "find_date(original_date=True, extensive_search=False, url=...)",
        },
        "time": {
            "extract_page": _stats(t_ours),
            "extract_page_date_fallback_off": _stats(t_ours_nofallback),
            "extract_page_metadata_dates": _stats(t_ours_meta),
            "extract_page_htmldate_fallback": _stats(t_ours_fallback),
            "htmldate_find_date": _stats(t_hd),
        },
    }


def _prepare_page(page: Page) -> tuple[PreparedText, PreparedText | None]:
    main = prepare_text(page.main_text) if page.main_text is not None else None
    return prepare_text(page.text), main


def _plain_fuzzy(quote: str, text_lower: str) -> bool:
    from rapidfuzz import fuzz

    return fuzz.partial_ratio(" ".join(quote.lower().split()), text_lower) >= 90


def bench_passages(limit: int | None, reps: int) -> dict[str, Any]:
    import trafilatura

    rows = [
        json.loads(line) for line in (DATA / "passages" / "passages.jsonl").open(encoding="utf-8")
    ]
    files = list(dict.fromkeys(r["file"] for r in rows))
    if limit is not None:
        keep = set(files[:limit])
        rows = [r for r in rows if r["file"] in keep]
        files = files[:limit]
    urls = {r["file"]: r["url"] for r in rows}
    prepared: dict[str, tuple[PreparedText, PreparedText | None, PreparedText, str]] = {}
    t_extract: list[float] = []
    t_extract_nofallback: list[float] = []
    t_extract_meta: list[float] = []
    t_extract_fallback: list[float] = []
    t_prepare: list[float] = []
    t_traf: list[float] = []
    t_htmldate: list[float] = []
    no_main = 0
    import htmldate

    for name in files:
        body = (DATA / "passages" / name).read_bytes()
        extract = partial(extract_page, body, url=urls[name], content_type="text/html")
        page, ms = _timed(extract, reps)
        t_extract.append(ms)
        t_extract_nofallback.append(_timed(partial(extract, date_fallback=False), reps)[1])
        if page.date_source in (None, "htmldate"):
            t_extract_fallback.append(ms)
        else:
            t_extract_meta.append(ms)
        (text_p, main_p), ms = _timed(partial(_prepare_page, page), reps)
        t_prepare.append(ms)
        no_main += main_p is None
        start = time.perf_counter()
        traf = trafilatura.extract(body) or ""
        t_traf.append((time.perf_counter() - start) * 1000.0)
        html = _decode_like_htmldate(body)
        _, ms = _timed(
            partial(
                htmldate.find_date, html, url=urls[name], original_date=True, extensive_search=True
            ),
            reps,
        )
        t_htmldate.append(ms)
        prepared[name] = (text_p, main_p, prepare_text(traf), page.text.lower())

    accepted: dict[str, Counter[str]] = defaultdict(Counter)
    altered_flagged: Counter[str] = Counter()
    by_alteration: dict[str, Counter[str]] = defaultdict(Counter)
    t_match: list[float] = []
    t_fuzzy_baseline: list[float] = []
    n_kind: Counter[str] = Counter()
    hows: dict[str, Counter[str]] = defaultdict(Counter)
    exact_misses: list[dict[str, str]] = []
    for row in rows:
        kind = row["kind"]
        n_kind[kind] += 1
        text_p, main_p, traf_p, lower = prepared[row["file"]]
        quote = row["quote"]
        match, ms = _timed(partial(find_passage, quote, text_p, main_text=main_p), reps)
        t_match.append(ms)
        hows[kind][match.how] += 1
        accepted["page_text"][kind] += match.found
        accepted["main_text"][kind] += bool(match.found and match.in_main_text)
        accepted["trafilatura_main_text"][kind] += find_passage(quote, traf_p).found
        accepted["paraphrase_mode"][kind] += find_paraphrase(quote, text_p).found
        altered_flagged[kind] += match.altered
        if kind == "altered":
            by_alteration[row["alteration"]]["n"] += 1
            by_alteration[row["alteration"]]["accepted"] += match.found
            by_alteration[row["alteration"]]["flagged_altered"] += match.altered
        if kind == "exact" and not match.found:
            exact_misses.append({"file": row["file"], "quote": quote[:120], "reason": match.reason})
        ok, ms = _timed(partial(_plain_fuzzy, quote, lower), 1)
        t_fuzzy_baseline.append(ms)
        accepted["plain_fuzzy_90_baseline"][kind] += ok

    def rates(counter: Counter[str]) -> dict[str, float]:
        return {k: round(counter[k] / n_kind[k], 4) if n_kind[k] else 0.0 for k in KINDS}

    return {
        "pages": len(files),
        "quotes": dict(n_kind),
        "pages_without_main_text": no_main,
        "acceptance": {mode: rates(c) for mode, c in accepted.items()},
        "flagged_altered": rates(altered_flagged),
        "altered_by_type": {k: dict(v) for k, v in sorted(by_alteration.items())},
        "how": {k: dict(v) for k, v in hows.items()},
        "exact_misses": exact_misses,
        "time": {
            "extract_page": _stats(t_extract),
            "extract_page_date_fallback_off": _stats(t_extract_nofallback),
            "extract_page_metadata_dates": _stats(t_extract_meta),
            "extract_page_htmldate_fallback": _stats(t_extract_fallback),
            "htmldate_find_date": _stats(t_htmldate),
            "trafilatura_extract": _stats(t_traf),
            "prepare_text_per_page": _stats(t_prepare),
            "find_passage_per_quote": _stats(t_match),
            "plain_fuzzy_baseline_per_quote": _stats(t_fuzzy_baseline),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="subset, one repetition")
    parser.add_argument("--reps", type=int, default=None, help="timing repetitions (min taken)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not (DATA / "dates" / "dates.jsonl").exists():
        print(f"shared data not found at {DATA}", file=sys.stderr)
        return 2
    reps = args.reps if args.reps is not None else (1 if args.quick else 3)
    started = time.perf_counter()
    dates = bench_dates(60 if args.quick else None, reps)
    passages = bench_passages(40 if args.quick else None, reps)
    exact = passages["acceptance"]["page_text"]
    all_extract = (
        dates["time"]["extract_page"]["median_ms"],
        passages["time"]["extract_page"]["median_ms"],
    )
    result = {
        "benchmark": "bench_extract",
        "quick": args.quick,
        "reps": reps,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {platform.node()}",
        "dates": dates,
        "passages": passages,
        "targets": {
            "exact_found>=0.99": exact["exact"] >= 0.99,
            "altered_accepted<=0.05": exact["altered"] <= 0.05,
            "fabricated_accepted==0": exact["fabricated"] == 0.0,
            "date_accuracy>=htmldate": dates["citeguard"]["accuracy"]
            >= dates["htmldate"]["accuracy"],
            "extract_median<=2ms (dates, passages)": [m <= 2.0 for m in all_extract],
            "match_median<=1ms": passages["time"]["find_passage_per_quote"]["median_ms"] <= 1.0,
        },
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    out = args.out or ROOT / "benchmarks" / "results" / (
        "bench_extract_quick.json" if args.quick else "bench_extract.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    _print_summary(result)
    print(f"\nwritten to {out}")
    return 0


def _print_summary(r: dict[str, Any]) -> None:
    d, p = r["dates"], r["passages"]
    print(f"dates ({d['pages']} pages), day granularity")
    for key in ("citeguard", "htmldate", "htmldate_fast"):
        s = d[key]
        print(
            f"  {key:<14} acc {s['accuracy']:.3f}  P {s['precision']:.3f}  R {s['recall']:.3f}  "
            f"F1 {s['f1']:.3f}  (TP {s['tp']} FP {s['fp']} FN {s['fn']})"
        )
    print(f"passages ({p['pages']} pages, {sum(p['quotes'].values())} quotes): acceptance")
    print(f"  {'mode':<26}" + "".join(f"{k:>13}" for k in KINDS))
    for mode, rates in p["acceptance"].items():
        print(f"  {mode:<26}" + "".join(f"{rates[k]:>13.3f}" for k in KINDS))
    print("time (ms): median / p90")
    for section, times in (("dates", d["time"]), ("passages", p["time"])):
        for name, s in times.items():
            if s.get("n"):
                print(f"  {section:<9}{name:<34}{s['median_ms']:>9.3f} {s['p90_ms']:>9.3f}")
    print("targets:", json.dumps(r["targets"]))


if __name__ == "__main__":
    raise SystemExit(main())

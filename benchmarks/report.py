"""Turn the suite's results into ``SUMMARY.md`` and PNG plots (matplotlib, Agg backend)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _f(x: Any, digits: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "–"
        return f"{x:.{digits}f}"
    return str(x)


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += [
        "| " + " | ".join(_f(c) if not isinstance(c, str) else c for c in r) + " |" for r in rows
    ]
    return [*out, ""]


def _targets_section(sc: dict[str, Any]) -> list[str]:
    """The targets table: every scenario's targets, one row each."""
    lines: list[str] = []
    rows = []
    for name, res in sc.items():
        for t in res.get("targets", []):
            rows.append([name, t["name"], t["target"], _f(t["value"], 3), t["met"]])
    lines += _table(["scenario", "what", "target", "measured", "met"], rows)

    return lines


def _guard_section(sc: dict[str, Any]) -> list[str]:
    """Guard verification time against the slowest URL, and the answer with a dead host."""
    lines: list[str] = []
    g = sc.get("guard")
    if g and "rows" in g:
        lines += ["## Guard verification time vs the slowest URL (ideal 1.0)", ""]
        lines += [f"Question: “{g['question']}”. " + " ".join(g.get("notes", [])), ""]
        rows = [
            [
                r["entailment"],
                r["citations"],
                r["guard_ms_median"],
                r["slowest_alone_ms_median"],
                r["added_ms_median"],
                _f(r["ratio_median"], 3),
                _f(r["ratio_max"], 3),
                r["reps"],
            ]
            for r in g["rows"].values()
        ]
        lines += _table(
            [
                "entailment",
                "citations",
                "guard ms (median)",
                "slowest URL alone ms",
                "added ms",
                "ratio (median)",
                "ratio (worst)",
                "reps",
            ],
            rows,
        )
        to = g.get("timeout_answer", {})
        if "ratio_to_url_timeout_median" in to:
            lines += [
                f"An answer of 10 citations, one on a host that never answers: "
                f"{_f(to['ratio_to_url_timeout_median'], 3)} × the URL timeout "
                f"({to['url_timeout_s']} s; ideal 1.0).",
                "",
            ]
    return lines


def _throughput_section(sc: dict[str, Any]) -> list[str]:
    """URL-check throughput per URL count: every contender, the like-for-like ratios and the
    farm's floor."""
    lines: list[str] = []
    t = sc.get("throughput")
    if t and "runs" in t:
        lines += ["## URL-check throughput (same URLs, same farm, same run)", ""]
        for n, run in t["runs"].items():
            load = run.get("load_average")
            lines += [
                f"**{n} URLs** ({run['kinds']}"
                + (f"; load average {load[0]}–{load[1]} over the runs" if load else "")
                + "):",
                "",
            ]
            rows = []
            for name, c in run["contenders"].items():
                ratio = run["throughput_ratios"].get(f"citeguard_vs_{name}")
                label = name + (
                    f" (first {run['sequential_measured_urls']} URLs, scaled)"
                    if name == "sequential" and run["sequential_scaled"]
                    else ""
                )
                rows.append(
                    [
                        label,
                        c.get("limits", ""),
                        c["wall_s_median"],
                        c["urls_per_s"],
                        _f(c.get("cpu_s_median"), 3),
                        "1.00" if name == "citeguard" else _f(ratio, 3),
                        f"{c['tally'].get('ok')} ok / {c['tally'].get('errors')} broken",
                        len(c["walls"]),
                    ]
                )
            lines += _table(
                [
                    "contender",
                    "limits",
                    "wall s",
                    "URLs/s",
                    "CPU s",
                    "citeguard (16/host) speed ÷ this",
                    "verdicts",
                    "runs",
                ],
                rows,
            )
            like = [
                (k, v)
                for k, v in run["throughput_ratios"].items()
                if k.startswith("citeguard_256_vs_")
            ]
            if like:
                lines += [
                    "Same limits on both sides: "
                    + "; ".join(f"{k.replace('_vs_', ' ÷ ')} {_f(v, 3)}" for k, v in like)
                    + "; citeguard ÷ lychee_16 "
                    + _f(run["throughput_ratios"].get("citeguard_vs_lychee_16"), 3)
                    + " (speed ratios, > 1: citeguard faster).",
                    "",
                ]
            floors = run.get("latency_floor_s")
            if floors:
                lines += [
                    "The farm's delays alone (no CPU, 256 in all): "
                    + "; ".join(f"{k} {v:.3f} s" for k, v in floors.items())
                    + ".",
                    "",
                ]
        lines += [
            f"lychee: {t.get('lychee') or t.get('lychee_missing')} "
            f"(`{' '.join(t.get('lychee_args', []))}`); LinkChecker: "
            f"{t.get('linkchecker') or t.get('linkchecker_missing')} (10 threads, no robots.txt, "
            "no recursion, rate cap lifted); `lychee_16` adds `--host-concurrency 16`. citeguard: "
            "`Fetcher.fetch_all(want_body=False)` (HEAD, GET fallback) at its default limits "
            "(256 in all, 16 per host); `citeguard_256` with `per_host_concurrency=256`; "
            "`citeguard_get` fetches bodies, as the guard does; `citeguard_by_name` reaches hosts "
            "by name through StaticResolver. Walls: citeguard and aiohttp from a fresh session to "
            "the last result (the interpreter is running); lychee and LinkChecker from process "
            "start to exit (lychee's start and report ~25–35 ms here). CPU s: user + system of "
            "the checker (this process, or the child and its threads); the farm's own CPU is "
            "not in it.",
            "",
        ]
    return lines


def _extract_section(sc: dict[str, Any]) -> list[str]:
    """Extraction + passage matching per page (or why it was skipped)."""
    lines: list[str] = []
    e = sc.get("extract")
    if e and "median_ms" in e:
        lines += ["## Extraction + passage matching per page", ""]
        rows = [[k, v] for k, v in e["median_ms"].items()]
        rows.append(
            ["citeguard extraction + matching per page", e["extract_and_match_ms_per_page"]]
        )
        lines += _table(["median ms", "value"], rows)
        lines += _table(["ratio", "value"], [[k, _f(v, 3)] for k, v in e["ratios"].items()])
    elif e:
        lines += ["## Extraction", "", f"Skipped: {e.get('skipped')}", ""]
    return lines


def _entail_section(sc: dict[str, Any]) -> list[str]:
    """Entailment throughput per backend and pair set."""
    lines: list[str] = []
    en = sc.get("entail")
    if en and "backends" in en:
        lines += ["## Entailment throughput", "", f"Pairs: {en['source']}.", ""]
        rows = [
            [
                k,
                s,
                v[s]["pairs"],
                v[s]["pairs_per_second"],
                v[s]["warm_seconds_median"],
                v["cold_seconds"],
                v[s]["lag_p99_ms"],
                v[s]["lag_max_ms"],
            ]
            for k, v in en["backends"].items()
            for s in en["sets"]
        ]
        lines += _table(
            [
                "backend",
                "pair set",
                "pairs",
                "pairs/s",
                "warm s",
                "cold s",
                "loop lag p99 ms",
                "loop lag max ms",
            ],
            rows,
        )
        lines += [
            "Ratios: "
            + ", ".join(f"{k} {_f(v, 3)}" for k, v in en["ratios"].items())
            + ". Not measured: "
            + "; ".join(f"{k}: {v}" for k, v in en["not_measured"].items() if v),
            "",
        ]
    return lines


def _snapshot_section(sc: dict[str, Any]) -> list[str]:
    """Replay from a snapshot against the live loopback fetch."""
    lines: list[str] = []
    s = sc.get("snapshot")
    if s and "replay" in s:
        lines += ["## Replay from a snapshot (10-URL answer)", ""]
        lines += _table(
            ["mode", "median ms", "p95 ms"],
            [
                ["replay (store open)", s["replay"]["median_ms"], s["replay"]["p95_ms"]],
                ["replay (cold store)", s["cold_replay"]["median_ms"], s["cold_replay"]["p95_ms"]],
                ["live loopback", s["live_loopback"]["median_ms"], s["live_loopback"]["p95_ms"]],
                ["record", s["record"]["median_ms"], s["record"]["p95_ms"]],
            ],
        )
        lines += [
            f"Replay / live loopback = {_f(s['replay_over_live_loopback'], 4)}; "
            f"record / live = {_f(s['record_over_live_loopback'], 3)}.",
            "",
        ]
    return lines


def _inflight_section(sc: dict[str, Any]) -> list[str]:
    """Guarded answers in flight: wall, loop lag, memory, file descriptors."""
    lines: list[str] = []
    i = sc.get("inflight")
    if i and "wall_s_median" in i:
        lines += [f"## {i['answers']} guarded answers in flight (entailment {i['entailment']})", ""]
        lines += _table(
            ["measure", "value"],
            [
                ["wall s (median)", i["wall_s_median"]],
                ["answers/s", i["answers_per_s"]],
                ["bare aiohttp GET of the same URLs, s", i["bare_aiohttp_wall_s_median"]],
                ["wall ÷ bare aiohttp", _f(i["ratio_wall_vs_bare_aiohttp"], 3)],
                ["passed / attempts", f"{i['passed']} / {i['attempts']}"],
                ["event-loop lag p99 ms (median of runs)", i["loop_lag_p99_ms_median"]],
                ["idle-loop lag p99 ms", i["idle_loop_lag"]["p99_ms"]],
                [
                    "extraction in a niced worker process: wall s / answers/s / lag p99 ms",
                    f"{_f(i['process_pool']['wall_s_median'])} / "
                    f"{_f(i['process_pool']['answers_per_s'])} / "
                    f"{_f(i['process_pool']['loop_lag_p99_ms_median'])}",
                ],
                ["tracemalloc peak MiB", i["tracemalloc_peak_mb"]],
                ["ru_maxrss growth MiB", i["maxrss_growth_mb"]],
                [
                    "open fds before / after close",
                    f"{i['fds']['before']} / {i['fds']['after_close']} "
                    f"(after the traced pass {i['fds']['after_traced_pass']})",
                ],
            ],
        )
    return lines


def _load_section(sc: dict[str, Any]) -> list[str]:
    """Load: loop lag, GC pauses and checks/s per runtime variant."""
    lines: list[str] = []
    ld = sc.get("load")
    if ld and "runs" in ld:
        lines += [
            f"## Load: {ld['checks']} checks x {ld['citations_per_check']} citations in flight",
            "",
        ]
        lines += _table(
            [
                "variant",
                "lag p50 ms",
                "lag p99 ms",
                "lag max ms",
                "loop CPU at a stretch ms",
                "longest GC pause ms",
                "checks/s",
                "load average",
            ],
            [
                [
                    r["variant"],
                    r["loop_lag"]["p50_ms"],
                    r["loop_lag"]["p99_ms"],
                    r["loop_lag"]["max_ms"],
                    r["loop_lag"].get("loop_cpu_max_ms", "-"),
                    r["gc_pause_max_ms"],
                    r["checks_per_s"],
                    r["loadavg"][0],
                ]
                for r in ld["runs"]
            ],
        )
        lines += [
            "",
            "`default`: the interpreter as it comes; `gc_frozen`: `gc.freeze()` after warm-up;"
            " `tuned`: `citeguard.runtime.Runtime().apply()` (as `citeguard serve`: no automatic"
            " full collection, GIL switch interval 0.1 ms). Target: p99 <= 20 ms in `default`.",
            "",
        ]
    return lines


def _stalls_section(sc: dict[str, Any]) -> list[str]:
    """One hostile input at a time: the longest event-loop stall."""
    lines: list[str] = []
    st = sc.get("stalls")
    if st and "inputs" in st:
        lines += ["## One hostile input at a time: the longest event-loop stall", ""]
        lines += _table(
            [
                "input",
                "claims checked",
                "cut",
                "wall s",
                "max stall ms",
                "loop CPU at a stretch ms",
                "longest GC pause ms",
                "full collections",
                "max stall ms, tuned runtime",
            ],
            [
                [
                    k,
                    v["claims"],
                    "yes" if v.get("cut") else "no",
                    v["wall_s"],
                    v["loop_lag"]["max_ms"],
                    v["loop_lag"].get("loop_cpu_max_ms", "-"),
                    v.get("gc_pause_max_ms", "-"),
                    v.get("full_collections", "-"),
                    st.get("tuned", {}).get(k, {}).get("loop_lag", {}).get("max_ms", "-"),
                ]
                for k, v in st["inputs"].items()
            ],
        )
        lines += [
            "",
            "Cut: the answer is over `Policy.max_claims` (2,000) or `max_citations` (500); its"
            " leading claims are checked, or none when it holds more than four times"
            " `max_citations` markers and links, and it fails validity with `answer_too_large`."
            " Full collections: gen-2 passes during the check (each walks the whole heap)."
            " The uncapped row is for"
            " contrast: its stalls are the collector's full passes over a heap of 20,000"
            " claims, not citeguard's own steps. Tuned runtime: the same check after"
            " `citeguard.runtime.Runtime().apply()` (start-up heap frozen, no automatic full"
            " collection, GIL switch interval 0.1 ms), as `citeguard serve` runs.",
            "",
        ]
        if "idle_full_gc_ms" in st:
            lines += [
                f"One full collection of the idle process (a Guard up, nothing in flight):"
                f" {st['idle_full_gc_ms']} ms over {st['idle_tracked_objects']:,} tracked"
                " objects. In the default configuration a full collection can start inside any"
                " check and holds the loop at least that long, wherever it runs; the tuned"
                " runtime runs them only between checks.",
                "",
            ]
    return lines


def _axes_section(sc: dict[str, Any]) -> list[str]:
    """The answer-level axes' costs and the regime accuracy."""
    lines: list[str] = []
    a = sc.get("axes")
    if a and "diversity" in a:
        lines += ["## Answer-level axes", ""]
        d, q = a["diversity"], a["query"]
        rows = [
            ["check_diversity µs/answer", d["us_per_answer_domain_given"]],
            ["count distinct hosts (baseline) µs/answer", d["us_per_answer_baseline_urlsplit"]],
            ["score_query µs/pair", q["us_per_pair"]],
            ["tokenise (baseline) µs/pair", q["us_per_pair_baseline_tokenise"]],
        ]
        acc = a.get("regime_accuracy")
        if acc:
            rows.append(
                ["freshness regime accuracy, held-out half", acc["held_out_half"]["accuracy"]]
            )
        lines += _table(["measure", "value"], rows)
    return lines


def _delegated_section(sc: dict[str, Any]) -> list[str]:
    """The sections the scenarios' own modules write (quotes, repair, report parsing)."""
    lines: list[str] = []
    qs = sc.get("quotes")
    if qs and "configs" in qs:
        from benchmarks.bench_quotes import summary_lines

        lines += summary_lines(qs)
    rp = sc.get("repair")
    if rp and "by_mode" in rp:
        from benchmarks.bench_repair import summary_lines as repair_lines

        lines += repair_lines(rp)
    rps = sc.get("report_parse")
    if rps and "overall" in rps:
        from benchmarks.bench_report_parse import summary_lines as report_parse_lines

        lines += report_parse_lines(rps)
    return lines


def _skipped_section(sc: dict[str, Any]) -> list[str]:
    """The scenarios that were skipped, and why."""
    lines: list[str] = []
    skipped = [f"- {k}: {v['skipped']}" for k, v in sc.items() if "skipped" in v]
    if skipped:
        lines += ["## Skipped", "", *skipped, ""]
    return lines


#: The summary's sections after its heading, in order: each renders its scenario's results
#: (nothing when the scenario did not run).
SECTIONS: tuple[Callable[[dict[str, Any]], list[str]], ...] = (
    _targets_section,
    _guard_section,
    _throughput_section,
    _extract_section,
    _entail_section,
    _snapshot_section,
    _inflight_section,
    _load_section,
    _stalls_section,
    _axes_section,
    _delegated_section,
    _skipped_section,
)


def summary_markdown(results: dict[str, Any]) -> str:
    """The Markdown summary: a targets table, then one table per scenario."""
    meta = results["meta"]
    sc: dict[str, Any] = results["scenarios"]
    lines = [
        "# citeguard benchmark summary",
        "",
        f"Run {meta['started']} · seed {meta['seed']} · size `{meta['size']}` · "
        f"Python {meta['python']} · {meta['cpus']} CPUs · load average at start "
        f"{meta['loadavg_start']} · {meta['elapsed_s']:.0f} s. "
        "Absolute times are context on a shared machine; the ratios (measured in the same run, "
        "contenders interleaved) are the result. Regenerate with `python -m benchmarks`.",
        "",
        "## Targets",
        "",
    ]
    for section in SECTIONS:
        lines += section(sc)
    return "\n".join(lines).rstrip() + "\n"


def write_plots(results: dict[str, Any], out: Path) -> list[str]:
    """Write the PNG plots; returns the file names written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    written: list[str] = []
    sc = results["scenarios"]
    g = sc.get("guard")
    if g and g.get("rows"):
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        for mode in g["modes"]:
            rows = [r for r in g["rows"].values() if r["entailment"] == mode]
            ax.plot(
                [r["citations"] for r in rows],
                [r["ratio_median"] for r in rows],
                marker="o",
                label=f"entailment {mode}",
            )
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.set_yscale("log")  # entailment-on ratios are an order of magnitude above the rest
        ax.plot([10], [1.15], "rv", label="target (10: 1.15, 50: 1.3)")
        ax.plot([50], [1.3], "rv")
        ax.set_xlabel("citations in the answer")
        ax.set_ylabel("guard time ÷ slowest URL alone (log)")
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title("Guard verification time vs the slowest URL")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "guard_latency.png", dpi=110)
        plt.close(fig)
        written.append("guard_latency.png")
    t = sc.get("throughput")
    if t and t.get("runs"):
        runs = t["runs"]
        fig, axs = plt.subplots(1, len(runs), figsize=(5.2 * len(runs), 4.0), squeeze=False)
        for ax, (n, run) in zip(axs[0], runs.items(), strict=True):
            names = list(run["contenders"])
            vals = [run["contenders"][k]["urls_per_s"] for k in names]
            colors = ["tab:blue" if k.startswith("citeguard") else "tab:grey" for k in names]
            ax.barh(names, vals, color=colors)
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel("URLs checked per second (log)")
            ax.set_title(f"{n} URLs")
        fig.suptitle("URL-check throughput on the loopback web")
        fig.tight_layout()
        fig.savefig(out / "throughput.png", dpi=110)
        plt.close(fig)
        written.append("throughput.png")
    e = sc.get("extract")
    if e and e.get("median_ms"):
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        names = ["citeguard extract + match", "trafilatura.extract", "htmldate.find_date"]
        vals = [
            e["extract_and_match_ms_per_page"],
            e["median_ms"]["trafilatura_extract"],
            e["median_ms"]["htmldate_find_date"],
        ]
        ax.barh(names, vals, color=["tab:blue", "tab:grey", "tab:grey"])
        ax.set_xlabel("median ms per page")
        ax.set_title(f"Extraction per page ({e['pages']} pages)")
        fig.tight_layout()
        fig.savefig(out / "extract.png", dpi=110)
        plt.close(fig)
        written.append("extract.png")
    en = sc.get("entail")
    if en and en.get("backends"):
        fig, ax = plt.subplots(figsize=(6.4, 3.0))
        set_name = "short" if "short" in en["sets"] else next(iter(en["sets"]))
        names = list(en["backends"])
        ax.barh(names, [en["backends"][k][set_name]["pairs_per_second"] for k in names])
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("pairs per second (log)")
        ax.set_title(f"Entailment throughput ({set_name} pairs)")
        fig.tight_layout()
        fig.savefig(out / "entail.png", dpi=110)
        plt.close(fig)
        written.append("entail.png")
    i = sc.get("inflight")
    if i and i.get("loop_lag"):
        fig, ax = plt.subplots(figsize=(6.4, 3.0))
        pooled = i.get("process_pool", {}).get("loop_lag", [])
        labels = (
            ["idle loop"]
            + [f"threads, run {k + 1}" for k in range(len(i["loop_lag"]))]
            + [f"worker process, run {k + 1}" for k in range(len(pooled))]
        )
        runs = [i["idle_loop_lag"], *i["loop_lag"], *pooled]
        p99 = [x["p99_ms"] for x in runs]
        mx = [x["max_ms"] for x in runs]
        ax.barh(labels, mx, color="tab:grey", label="max")
        ax.barh(labels, p99, color="tab:blue", label="p99")
        ax.axvline(20, color="red", ls=":", label="target p99 < 20 ms")
        ax.set_xlabel("event-loop lag, ms")
        ax.set_title(
            f"{i['answers']} guarded answers in flight (extraction in threads / a process)"
        )
        ax.legend(loc="lower right")
        fig.tight_layout()
        fig.savefig(out / "inflight_lag.png", dpi=110)
        plt.close(fig)
        written.append("inflight_lag.png")
    return written

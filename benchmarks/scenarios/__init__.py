"""The scenarios of the benchmark suite (``python -m benchmarks``).

Every scenario is ``async def NAME(cfg: Config, ctx: Context) -> dict``. It measures its
contenders in the same run, interleaved, and reports medians over repetitions and the ratios
between them: these machines are shared and noisy, so absolute times are context and the
ratios are the result. Each result carries ``targets``: a list of
``{"name", "target", "value", "met"}`` rows that the summary collects.

Sizes come from :class:`Config`: ``full`` (the default run), ``quick`` (``--quick``) and
``smoke`` (the smoke test: seconds, every code path, no meaningful numbers).

One module per scenario family: ``common`` (what they share: medians, targets, the loop-lag
probe, GC pauses, the guard policy), ``guard``, ``throughput``, ``extraction``, ``entailment``,
``inflight``, ``load``, ``stalls``, and ``delegated`` (the scenarios that run a ``bench_*``
module). :data:`SCENARIOS` here names them all, in run order.
"""

from __future__ import annotations

from benchmarks.bench_guard_long import guard_long
from benchmarks.bench_longpage import longpage_scenario
from benchmarks.bench_longpage_bands import whole_page_bands_scenario
from benchmarks.bench_report_scale import report_scale
from benchmarks.context import NOW, QUESTION, Config, Context
from benchmarks.scenarios.common import Scenario
from benchmarks.scenarios.delegated import (
    axes,
    dates,
    near_copy,
    quotes,
    repair,
    report_parse,
    scholarly,
    snapshot,
    soft404_load,
    stream,
)
from benchmarks.scenarios.entailment import entailment
from benchmarks.scenarios.extraction import extraction
from benchmarks.scenarios.guard import guard_latency
from benchmarks.scenarios.inflight import inflight
from benchmarks.scenarios.load import load
from benchmarks.scenarios.stalls import stalls
from benchmarks.scenarios.throughput import throughput

__all__ = ["NOW", "QUESTION", "SCENARIOS", "Config", "Context", "Scenario", "guard_latency"]


# Run order: the in-flight scenario first, so its memory growth is not hidden under the peak
# that loading the entailment model leaves behind.
SCENARIOS: dict[str, Scenario] = {
    "inflight": inflight,
    "load": load,
    "stalls": stalls,
    "throughput": throughput,
    "guard": guard_latency,
    "snapshot": snapshot,
    "extract": extraction,
    "entail": entailment,
    "axes": axes,
    "quotes": quotes,
    "near_copy": near_copy,
    "dates": dates,
    "stream": stream,
    "repair": repair,
    "report_parse": report_parse,
    "scholarly": scholarly,
    "soft404_load": soft404_load,
    "longpage": longpage_scenario,
    "guard_long": guard_long,
    "report_scale": report_scale,
    "whole_page_bands": whole_page_bands_scenario,
}

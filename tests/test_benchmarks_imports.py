"""The benchmark modules import without a loop: what the scenarios and the benchmarks they run
share lives in ``benchmarks/context.py``, below both (the rule and scanner of test_imports)."""

from __future__ import annotations

from test_imports import ROOT, find_cycle, import_graph


def test_benchmarks_have_no_import_cycle() -> None:
    graph = import_graph(ROOT, "benchmarks")
    assert {"benchmarks.scenarios", "benchmarks.bench_quotes", "benchmarks.context"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])

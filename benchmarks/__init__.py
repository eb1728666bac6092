"""citeguard's benchmark suite: ``python -m benchmarks`` (see ``benchmarks/README.md``).

The ``bench_*.py`` scripts measure one stage each and still run on their own; the suite
(:mod:`benchmarks.scenarios`) imports them, adds the end-to-end scenarios on a loopback web
(:mod:`benchmarks.web`) and writes ``results/suite.json``, ``results/SUMMARY.md`` and plots.
What the scenarios and the ``bench_*`` modules share (``Config``, ``Context``, the fixed clock
and question) lives in :mod:`benchmarks.context`, which imports neither: no import loops.

This package only measures. What builds the artefacts citeguard ships is ``training/``
(``python -m training``); what was measured and not shipped is ``research/``.
"""

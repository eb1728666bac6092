"""What was measured and not shipped: each experiment with its result file under
``research/results/`` and a line in ``research/README.md`` on what it showed. Nothing in
``citeguard/``, ``benchmarks/`` or ``training/`` imports this package."""

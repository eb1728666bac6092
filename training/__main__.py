"""``python -m training NAME [ARGS]``: rebuild one shipped artefact end to end.

    python -m training                      # the commands and what each writes
    python -m training NAME --help          # one command's options
    python -m training support              # the claim-support model, then its bands

Every command that writes an artefact takes ``--no-write`` (``minilm``: ``--check``) to build
it and write nothing into ``citeguard/``; ``git diff citeguard/`` after a run shows what a
rebuild changed (``training/README.md``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Command:
    """One artefact's command: the module whose ``main(argv)`` builds it, and what it writes."""

    module: str
    writes: str


COMMANDS: dict[str, Command] = {
    "support": Command(
        "training.train_support",
        "citeguard/checks/support_model_int8.json (--encoder torch: support_model.json), "
        "then support-bands",
    ),
    "support-bands": Command(
        "training.support_bands",
        "the bands of citeguard/checks/support_model*.json, citeguard/checks/"
        "word_overlap_bands.json",
    ),
    "whole-page-bands": Command(
        "training.whole_page_bands", "citeguard/checks/support_bands_whole_page.json"
    ),
    "regime": Command("training.train_regime", "citeguard/checks/regime_model.json"),
    "regime-confidence": Command(
        "training.regime_confidence", "citeguard/checks/regime_confidence.json"
    ),
    "minilm": Command("training.build_minilm_onnx", "citeguard/models_data/minilm/"),
}


def usage() -> str:
    """The commands, one line each."""
    width = max(map(len, COMMANDS))
    lines = [(__doc__ or "").split("\n")[0], "", "commands:"]
    lines += [f"  {name:<{width}}  writes {c.writes}" for name, c in COMMANDS.items()]
    return "\n".join(lines) + "\n"


def entry(name: str) -> Callable[[list[str]], Any]:
    """The command's ``main``, its module imported only now (some need torch or the data)."""
    main: Callable[[list[str]], Any] = importlib.import_module(COMMANDS[name].module).main
    return main


def support(argv: list[str]) -> int:
    """``support``: fit the model, then choose its bands again on the new model's out-of-fold
    scores (the fit writes the artefact without bands). ``--no-write``, ``--search`` and
    ``--evaluate`` write no artefact, so no bands follow."""
    from training.support_data import CACHE

    entry("support")(argv)
    if {"--no-write", "--search", "--evaluate", "-h", "--help"} & set(argv):
        return 0
    for stale in CACHE.glob("bands_oof_*.pkl"):  # out-of-fold scores of the previous fit
        stale.unlink()
    return int(entry("support-bands")([]) or 0)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        sys.stderr.write(f"unknown command {name!r}\n\n{usage()}")
        return 2
    program, sys.argv[0] = sys.argv[0], f"python -m training {name}"  # each --help's prog
    try:
        if name == "support":
            return support(rest)
        return int(entry(name)(rest) or 0)
    finally:
        sys.argv[0] = program


if __name__ == "__main__":
    raise SystemExit(main())

"""Rooms a person can hold (issue 46): no module of the package, the benchmarks, the training
or the research code over 1,000 lines, and no function anywhere in the repository (those, the
tests and the examples) over a cyclomatic complexity of 40 (radon's measure; issue 55 extended
both from the package to the rooms outside it)."""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 1_000
MAX_COMPLEXITY = 40
FOLDERS = ("citeguard", "benchmarks", "training", "research")
EVERY_FOLDER = (*FOLDERS, "tests", "examples")


def _modules(*folders: str) -> list[Path]:
    found = sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))
    assert len(found) > 100, found  # the package and the rooms, not an empty folder
    assert all(any((ROOT / f).rglob("*.py")) for f in folders), folders
    return found


def test_no_module_is_over_1000_lines() -> None:
    over = {
        str(p.relative_to(ROOT)): n
        for p in _modules(*FOLDERS)
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert over == {}


def test_no_function_is_over_complexity_40() -> None:
    over = {
        f"{p.relative_to(ROOT)}:{block.lineno} {block.fullname}": block.complexity
        for p in _modules(*EVERY_FOLDER)
        for block in cc_visit(p.read_text(encoding="utf-8"))
        if block.complexity > MAX_COMPLEXITY
    }
    assert over == {}


def test_the_rule_sees_a_long_module_and_a_branchy_function() -> None:
    """The two measures above can fail: a 1,001-line text and a function of 41 branches."""
    assert len(("x = 1\n" * 1_001).splitlines()) > MAX_LINES
    body = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(40))
    (block,) = cc_visit(f"def f(x):\n{body}    return -1\n")
    assert block.complexity == 41

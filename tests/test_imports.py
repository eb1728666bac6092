"""No import loops anywhere in ``citeguard/``, and the rooms outside the package stay outside.

Every ``import`` statement of every module is read with :mod:`ast` — at module level, inside
functions, and inside ``if TYPE_CHECKING:`` blocks alike — and the resulting graph of
citeguard modules must be acyclic. A package's ``__init__`` is the module of that package's
name. Only explicit imports are edges: importing ``citeguard.a.b`` is an edge to
``citeguard.a.b``, not to the packages above it.

Outside the package (issue 55): ``benchmarks/`` measures the product, ``training/`` builds the
artefacts it ships, ``research/`` records what was tried and not shipped. Nothing in
``citeguard/`` imports any of the three (the wheel holds none of them), and neither the suite
nor the training imports ``research/`` (its tests may).
"""

from __future__ import annotations

import ast
import fnmatch
import tomllib
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "citeguard"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root``, by dotted name."""
    return {
        _module_name(p, root): p
        for p in sorted((root / package).rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([target] if target else [])])


def imports_of(
    module: str, path: Path, known: Mapping[str, Path], package: str = PACKAGE
) -> set[str]:
    """The modules of ``known`` that ``module`` imports anywhere in its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _resolve_relative(module, is_package, node.level, node.module)
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                # `from pkg import mod` imports the submodule; `from mod import name` the module
                found.add(sub if sub in known else base)
    return {m for m in found if m in known and m != module and (m + ".").startswith(package + ".")}


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    known = modules(root, package)
    return {name: imports_of(name, path, known, package) for name, path in known.items()}


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path ``[a, b, ..., a]``, or ``None`` when it is acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle is not None:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle is not None:
                return cycle
    return None


# ---------------------------------------------------------------------- the rule


def test_citeguard_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 20, "the scan found too few modules: is the package path right?"
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


ROOMS = ("benchmarks", "training", "research")


def top_level_imports(path: Path) -> set[str]:
    """The first name of every absolute import in ``path``'s source, wherever it stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def room_imports(folder: str, rooms: tuple[str, ...], root: Path = ROOT) -> dict[str, set[str]]:
    """The modules under ``folder`` that import one of ``rooms``, with the rooms they import."""
    out: dict[str, set[str]] = {}
    for path in sorted((root / folder).rglob("*.py")):
        if hits := top_level_imports(path) & set(rooms):
            out[str(path.relative_to(root))] = hits
    return out


def test_the_package_imports_nothing_from_outside_it() -> None:
    assert len(list((ROOT / PACKAGE).rglob("*.py"))) > 20
    assert room_imports(PACKAGE, ROOMS) == {}


def test_neither_the_suite_nor_the_training_imports_research() -> None:
    for folder in ("benchmarks", "training", "examples"):
        assert room_imports(folder, ("research",)) == {}, folder


def test_the_wheel_holds_only_the_package() -> None:
    """setuptools' package discovery (pyproject) matches none of the rooms outside it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    assert include and fnmatch.fnmatch(PACKAGE, include[0])
    for room in ROOMS:
        assert (ROOT / room / "__init__.py").is_file(), room
        assert not any(fnmatch.fnmatch(room, pattern) for pattern in include), room


# ---------------------------------------------------------------------- the scanner itself


def test_the_room_scanner_sees_imports_anywhere(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/a.py": "def f():\n    from training.support_data import load_rows\n",
            "pkg/b.py": "import benchmarks.web as w\nfrom . import a\n",
            "pkg/c.py": "import json\nfrom research_notes import x\n",
        },
    )
    assert room_imports("pkg", ROOMS, tmp_path) == {
        "pkg/a.py": {"training"},
        "pkg/b.py": {"benchmarks"},
    }


def _write(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("from pkg.b import X\n", "module level"),
        ("def f():\n    from pkg.b import X\n", "inside a function"),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import X\n",
            "under TYPE_CHECKING",
        ),
        ("from . import b\n", "relative import of a sibling"),
        ("import pkg.b\n", "plain import"),
    ],
)
def test_scanner_sees_every_kind_of_import(tmp_path: Path, source: str, why: str) -> None:
    _write(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/a.py": source, "pkg/b.py": "from pkg.a import Y\n"},
    )
    cycle = find_cycle(import_graph(tmp_path, "pkg"))
    assert cycle is not None, why
    assert cycle[0] == cycle[-1]
    assert set(cycle) == {"pkg.a", "pkg.b"}


def test_scanner_reports_the_whole_path_of_a_longer_cycle(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/sub/__init__.py": "from pkg.sub.c import Z\n",
            "pkg/a.py": "from pkg.b import X\n",
            "pkg/b.py": "import json\nfrom pkg import sub\n",
            "pkg/sub/c.py": "from ..a import Y\n",
        },
    )
    assert find_cycle(import_graph(tmp_path, "pkg")) == [
        "pkg.a",
        "pkg.b",
        "pkg.sub",
        "pkg.sub.c",
        "pkg.a",
    ]


def test_scanner_accepts_a_tree_and_ignores_outside_imports(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import X\n",
            "pkg/a.py": "import os\nfrom pkg.b import Y\nimport other.a\n",
            "pkg/b.py": "from collections import abc\n",
        },
    )
    graph = import_graph(tmp_path, "pkg")
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": set()}
    assert find_cycle(graph) is None

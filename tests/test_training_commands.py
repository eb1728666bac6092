"""``python -m training``: one command per shipped artefact, each with a ``--help`` that runs
without the data, and every fitted artefact of the package named by one command (issue 55)."""

from __future__ import annotations

import importlib
import re
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest

from training.__main__ import COMMANDS, main, usage

ROOT = Path(__file__).resolve().parents[1]


def test_every_shipped_artefact_has_a_command() -> None:
    """Every JSON table or model in ``citeguard/checks/`` except the hand-written ones, and the
    MiniLM folder, is named in some command's ``writes``."""
    writes = " ".join(c.writes for c in COMMANDS.values())
    named = [p.rsplit("/", 1)[-1] for p in re.findall(r"[\w./*-]+\.json", writes)]
    artefacts = sorted(p.name for p in (ROOT / "citeguard" / "checks").glob("*.json"))
    assert len(artefacts) >= 6
    for name in artefacts:
        assert any(fnmatch(name, pattern) for pattern in named), name
    assert not any(fnmatch("hand_written.json", pattern) for pattern in named)
    assert "citeguard/models_data/minilm/" in writes


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_shows_its_options(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert callable(importlib.import_module(COMMANDS[name].module).main)
    with pytest.raises(SystemExit) as stop:
        main([name, "--help"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m training {name}")
    assert not sys.argv[0].startswith("python -m training")  # put back


def test_the_listing_names_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out == usage()
    assert all(f"  {name} " in out for name in COMMANDS)
    assert main(["no-such-artefact"]) == 2

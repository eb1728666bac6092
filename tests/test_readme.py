"""The README's first commands say what a new user needs before running them (issue 53): a
virtual environment before ``pip install -e .`` (Debian's system Python refuses it:
externally-managed-environment), and what ``bash scripts/test`` installs, takes and costs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
INSTALL = (ROOT / "docs" / "install.md").read_text()


def _first_commands(text: str) -> list[str]:
    """The command lines of the first bash block that installs the package."""
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        if "pip install -e ." in block:
            return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    raise AssertionError("no bash block with pip install -e .")


def test_a_virtual_environment_comes_before_pip_install() -> None:
    for text in (README, INSTALL):
        lines = _first_commands(text)
        venv = next(i for i, line in enumerate(lines) if "-m venv" in line)
        pip = next(i for i, line in enumerate(lines) if "pip install -e ." in line)
        assert venv <= pip and "activate" in " ".join(lines[venv : pip + 1])
        assert "externally-managed-environment" in text


def test_the_test_suite_command_says_what_it_installs_needs_and_takes() -> None:
    for text in (README, INSTALL):
        # the prose that stands before the command, from the section's start
        before = " ".join(text.split("bash scripts/test\n```", 1)[0].rsplit("\n#", 1)[-1].split())
        assert "apt" in before and "chromium" in before and "redis" in before
        assert re.search(r"\d(\.\d)? GB of disk", before), before
        assert ".venv-litellm" in before and "torch" in before
        assert re.search(r"\d+ minutes", before), before

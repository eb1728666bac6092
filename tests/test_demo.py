"""The README's main command: the bundled scenario replays offline, identically, and passes."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from typing import Any

import pytest

from citeguard import CitationStatus, GuardResult
from citeguard.demo import run_scenario
from citeguard.models import Severity


@pytest.fixture(scope="module")
def replayed() -> GuardResult:
    return asyncio.run(run_scenario())


def test_demo_fails_first_then_passes(replayed: GuardResult) -> None:
    assert replayed.passed and replayed.outcome == "passed"
    assert len(replayed.attempts) == 2
    first = replayed.attempts[0].verdict
    statuses = {c.status for c in first.citations}
    assert CitationStatus.NOT_FOUND in statuses  # the dead URL
    assert CitationStatus.PASSAGE_MISSING in statuses  # the invented quote
    # "the latest stable release" looks fast, but held-out questions like it are often slower
    # (issue 32): the stale source and the missing caveat are warnings, not a hard reject
    assert first.axes["freshness"].passed
    fresh = {f.code: f.severity for f in first.axes["freshness"].findings}
    assert fresh["freshness.regime_uncertain"] is Severity.WARNING
    assert fresh["freshness.missing_caveat"] is Severity.WARNING
    final = replayed.verdict
    assert all(final.axes[a].passed for a in ("validity", "diversity", "freshness"))
    assert not (replayed.attempts[1].excluded_urls & {c.url for c in final.citations})


def test_replay_opens_no_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("replay tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    result = asyncio.run(run_scenario())
    assert result.passed


def test_replay_is_byte_identical_across_processes() -> None:
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-m", "citeguard.cli", "demo", "--json"],
            capture_output=True,
            env=env,
            timeout=180,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        outs.append(proc.stdout)
    assert outs[0] == outs[1]
    data = json.loads(outs[0])
    assert data["passed"] is True and len(data["attempts"]) == 2


def test_the_text_output_lists_every_warning_with_its_citation(replayed: GuardResult) -> None:
    """The README's promise: the demo's stale source is flagged, in the text output too (issue
    53: it showed "freshness: pass 1.00" and no warning); every warning of each attempt, with
    the citation it is about."""
    proc = subprocess.run(
        [sys.executable, "-m", "citeguard.cli", "demo"], capture_output=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    blocks = proc.stdout.decode().split("== attempt ")[1:]
    assert len(blocks) == len(replayed.attempts)
    for attempt, block in zip(replayed.attempts, blocks, strict=True):
        shown = [line.strip() for line in block.splitlines() if line.strip().startswith("warning:")]
        warnings = [
            f
            for axis in attempt.verdict.axes.values()
            for f in axis.findings
            if f.severity is Severity.WARNING and f.code != "validity.support_uncertain"
        ]
        assert len(shown) == len(warnings), block
        for f in warnings:
            assert any(
                f.message in line
                and line.startswith(f"warning: {f.axis}")
                and (f.url is None or f.url in line)
                for line in shown
            ), (f, shown)
    stale = [f for f in replayed.attempts[0].verdict.axes["freshness"].findings if f.url]
    assert stale and stale[0].code == "freshness.stale_source"
    assert any(
        stale[0].url in line and "warning: freshness" in line for line in blocks[0].splitlines()
    )

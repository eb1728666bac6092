"""``python -m benchmarks`` reports progress on a terminal and stays quiet otherwise.

Run as a user runs it: a real process, its stderr once a pipe (CI, a log file) and once a
pseudo-terminal, on the smallest scenario at its smoke size."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pty and 127.0.0.2+ loopback")


def _suite(out: Path, stderr: int) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", "--size", "smoke", "--only", "dates", "--out", out],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=stderr,
        timeout=300,
        check=False,
    )


def test_quiet_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    done = _suite(tmp_path, subprocess.PIPE)
    assert done.returncode == 0, done.stderr
    assert b"[benchmarks" not in done.stderr
    assert (tmp_path / "suite.json").is_file()


def test_progress_on_a_terminal(tmp_path: Path) -> None:
    import pty

    leader, follower = pty.openpty()
    try:
        done = _suite(tmp_path, follower)
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert done.returncode == 0
    shown = b"".join(chunks).decode()
    assert "[benchmarks 1/1] dates …" in shown
    assert "[benchmarks 1/1] dates done in " in shown

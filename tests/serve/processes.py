"""Real ``citeguard serve`` processes for the tests: started with flags and environment, their
log read as it comes (the pipe never fills), stopped by the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import NamedTuple

import httpx


class Served(NamedTuple):
    proc: subprocess.Popen[str]
    url: str
    log: list[str]  # stderr lines after "listening", read as they come (the pipe never fills)
    reader: threading.Thread
    started: list[str]  # stderr lines up to "listening" (the start log)


def start(args: list[str], env: dict[str, str], *, command: list[str] | None = None) -> Served:
    """``citeguard serve ARGS`` (or ``command``) with ``env`` over this process's environment."""
    proc = subprocess.Popen(
        command or [sys.executable, "-m", "citeguard", "serve", *args],
        env={**os.environ, **env},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    started: list[str] = []
    for line in proc.stderr:
        started.append(line)
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("event") == "listening":
            log: list[str] = []
            reader = threading.Thread(target=log.extend, args=(proc.stderr,), daemon=True)
            reader.start()
            return Served(proc, event["url"], log, reader, started)
    proc.wait(30)
    raise AssertionError(
        f"citeguard serve exited {proc.returncode} before listening: {''.join(started)[-2000:]}"
    )


def stop(served: Served) -> None:
    if served.proc.poll() is None:
        served.proc.kill()
        served.proc.wait(30)


def wait_ready(url: str) -> None:
    with httpx.Client(timeout=60) as client:
        while client.get(f"{url}/readyz").status_code != 200:
            pass


def run_bare(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``citeguard serve ARGS`` with no ``CITEGUARD_*`` variable, to its end (one that refuses
    to start)."""
    return subprocess.run(
        [sys.executable, "-m", "citeguard", "serve", *args],
        env={k: v for k, v in os.environ.items() if not k.startswith("CITEGUARD_")},
        capture_output=True,
        text=True,
        timeout=60,
    )

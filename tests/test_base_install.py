"""The base install works: ``pip install citeguard-agent`` alone (no ``[local]`` extra, so no
torch, no sentence-transformers, no model) gives a working ``Guard()`` and ``citeguard check``.

A fresh virtual environment is built from this checkout (pip takes the dependencies from the
package index, as a user's install does), and an answer quoting a page served on loopback is
checked there, through the API and through the CLI. ``backend="auto"`` judges claims by word
overlap and says so: a finding in the verdict, a header line in the CLI output.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# runs inside the base venv: a loopback page, an answer that quotes it, Guard().check and the CLI
SCRIPT = r"""
import asyncio, json, os, subprocess, sys
from aiohttp import web

PAGE = (
    "<html><head><title>Helix 5.0 released</title>"
    "<meta property='article:published_time' content='2026-11-20'></head><body><article>"
    "<h1>Helix 5.0 released</h1><p>The Helix project released version 5.0 of its database "
    "on 20 November 2026. The release adds a columnar storage engine and faster joins.</p>"
    "</article></body></html>"
)

async def main():
    try:
        import torch  # noqa: F401
        sys.exit("torch is importable: this is not a base install")
    except ImportError:
        pass
    app = web.Application()
    app.router.add_get("/helix", lambda r: web.Response(text=PAGE, content_type="text/html"))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}/helix"
    answer = (
        'The Helix project "released version 5.0 of its database on 20 November 2026" [1].'
        f"\n\n[1]: {url}"
    )
    from citeguard import Guard, Policy

    async with Guard(Policy.for_tests()) as guard:
        verdict = await guard.check(answer, question="When was Helix 5.0 released?")
    with open("answer.md", "w") as f:
        f.write(answer)
    cli = await asyncio.create_subprocess_exec(
        os.path.join(os.path.dirname(sys.executable), "citeguard"), "check", "answer.md",
        "--allow-private",
        "--question", "When was Helix 5.0 released?",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    out, err = await cli.communicate()
    await runner.cleanup()
    print(json.dumps({
        "verdict": verdict.model_dump(mode="json"),
        "cli_rc": cli.returncode, "cli_out": out.decode(), "cli_err": err.decode(),
    }))

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("base-venv")
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    python = where / "bin" / "python"
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return python


def test_base_install_checks_an_answer(base_venv: Path, tmp_path: Path) -> None:
    import json

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(
        [str(base_venv), "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    verdict = got["verdict"]
    assert verdict["passed"] is True, verdict
    validity = verdict["axes"]["validity"]
    assert validity["passed"] is True
    (citation,) = verdict["citations"]
    assert citation["status"] == "ok"
    # the claim was judged, by the cheaper tier, and the verdict says so with the full hint
    fallback = [f for f in validity["findings"] if f["code"] == "validity.entailment_fallback"]
    assert len(fallback) == 1 and fallback[0]["severity"] == "warning"
    assert "torch --index-url https://download.pytorch.org/whl/cpu" in fallback[0]["message"]
    assert "citeguard-agent[local]" in fallback[0]["message"]
    # the CLI works too: exit 0, the tier named in its first line, nothing on stderr
    assert got["cli_rc"] == 0, got["cli_err"]
    assert got["cli_out"].splitlines()[0].startswith("claim support: claims were judged by word")
    assert "verdict: PASSED" in got["cli_out"]
    assert got["cli_err"] == ""


def test_this_environment_is_not_the_base_one() -> None:
    """The venv above is isolated: the suite's own interpreter has the local model."""
    from citeguard.checks.minilm import local_extra_missing

    assert local_extra_missing() is None, sys.executable

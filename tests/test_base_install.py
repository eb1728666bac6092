"""The base install works: ``pip install citeguard-agent`` alone (no extra: no torch, no
sentence-transformers) gives a working ``Guard()`` and ``citeguard check`` with the local model.

A fresh virtual environment is built from this checkout (pip takes the dependencies from the
package index, as a user's install does), and an answer quoting a page served on loopback is
checked there, through the API and through the CLI. ``backend="auto"`` judges claims with the
int8 MiniLM model shipped in the package (onnxruntime + tokenizers), torch unimportable; the
learned regime model answers the question's freshness.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# a fresh venv's install from the index (onnxruntime, numpy, ...) takes minutes on a busy box
pytestmark = pytest.mark.timeout(900)

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
    # a paraphrase (no quote to verify, no copy of a page sentence): the local model must
    # judge it
    answer = (
        "Version 5.0 of the Helix database came out in November 2026 [1]."
        f"\n\n[1]: {url}"
    )
    from citeguard import Guard, Policy

    from citeguard.checks.entail import LocalEntailer

    async with Guard(Policy.for_tests()) as guard:
        verdict = await guard.check(answer, question="When was Helix 5.0 released?")
    encoder = LocalEntailer().encoder_name
    heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "sentence_transformers"})
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
        "verdict": verdict.model_dump(mode="json"), "encoder": encoder, "heavy": heavy,
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
    # the claim was judged by the local model, with no fallback to a weaker tier
    assert citation["entailment"]["backend"] == "local", citation["entailment"]
    assert citation["entailment"]["label"] == "supported"
    codes = {f["code"] for axis in verdict["axes"].values() for f in axis["findings"]}
    assert "validity.entailment_fallback" not in codes
    assert "freshness.regime_fallback" not in codes  # the regime model ran too
    assert got["heavy"] == [] and got["encoder"] == "minilm-onnx-int8"
    # the CLI works too: exit 0, no tier warning, nothing on stderr
    assert got["cli_rc"] == 0, got["cli_err"]
    assert "word overlap" not in got["cli_out"]
    assert "verdict: PASSED" in got["cli_out"]
    assert got["cli_err"] == ""


def test_the_wheel_carries_the_model(tmp_path: Path) -> None:
    """The built wheel holds the int8 model, its tokenizer, manifest and licence notice, and
    nothing of the rooms outside the package (benchmarks, training, research)."""
    import zipfile

    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = tmp_path.glob("citeguard_agent-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("model_int8.onnx", "tokenizer.json", "manifest.json", "LICENSE", "NOTICE"):
        assert f"citeguard/models_data/minilm/{name}" in names
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert packages == {"citeguard"}, packages


def test_the_base_install_is_within_300_mb(base_venv: Path) -> None:
    """The whole virtual environment (pip and setuptools included) after the base install:
    341 MB when the tokenizer was ``tokenizers`` (with huggingface-hub, hf-xet, fsspec): 278 MB
    without it (2026-12-06), htmldate (the dates' last resort) still in."""
    where = base_venv.parent.parent
    size = sum(
        (Path(d) / f).stat().st_size
        for d, _, files in os.walk(where)
        for f in files
        if not (Path(d) / f).is_symlink()
    )
    assert size <= 300 * 1024 * 1024, f"{size / 2**20:.0f} MB"
    heavy = ("tokenizers", "huggingface_hub")
    code = f"import importlib.util as u; print([m for m in {heavy!r} if u.find_spec(m)])"
    out = subprocess.run([str(base_venv), "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

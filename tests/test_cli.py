"""The command line, run as users run it: a real process against the farm on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from conftest import Farm

PAGE = "<html><body><p>The Eiffel Tower is 330 metres tall.</p></body></html>"


async def _cli(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "citeguard.cli",
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _answer(farm: Farm, tmp_path: Path) -> tuple[Path, str, str]:
    good = farm.add("facts.example.com", "/eiffel", body=PAGE)
    dead = farm.add("gone.example.org", "/eiffel", status=404)
    text = (
        f'The Eiffel Tower is "330 metres tall" [1]. It was painted gold in 2020 [2].\n\n'
        f"[1] {good}\n[2] {dead}\n"
    )
    path = tmp_path / "answer.md"
    path.write_text(text)
    return path, good, dead


def _resolve(farm: Farm, *hosts: str) -> list[str]:
    out: list[str] = []
    for h in hosts:
        out += ["--resolve", f"{h}:{farm.port}:127.0.0.1"]
    return out


async def test_check_prints_a_table_and_fails_on_a_dead_link(farm: Farm, tmp_path: Path) -> None:
    path, good, dead = _answer(farm, tmp_path)
    rc, out, err = await _cli(
        "check",
        str(path),
        "--allow-private",
        "--entailment",
        "none",
        *_resolve(farm, "facts.example.com", "gone.example.org"),
    )
    assert rc == 1, err
    lines = out.splitlines()
    assert any(line.startswith("ok") and good in line for line in lines)
    assert any(line.startswith("not_found") and "404" in line and dead in line for line in lines)
    assert "330 metres tall" in out and "#:~:text=" in out
    assert "REJECTED" in out


async def test_check_json_and_stdin(farm: Farm, tmp_path: Path) -> None:
    path, _, dead = _answer(farm, tmp_path)
    rc, out, _ = await _cli(
        "check",
        "-",
        "--json",
        "--allow-private",
        "--entailment",
        "none",
        *_resolve(farm, "facts.example.com", "gone.example.org"),
        stdin=path.read_bytes(),
    )
    assert rc == 1
    verdict = json.loads(out)
    statuses = {c["url"]: c["status"] for c in verdict["citations"]}
    assert statuses[dead] == "not_found"
    assert set(verdict["axes"]) == {"validity", "diversity", "freshness", "query"}


async def test_private_addresses_are_refused_unless_allowed(farm: Farm, tmp_path: Path) -> None:
    path, good, _ = _answer(farm, tmp_path)
    rc, out, _ = await _cli(
        "check",
        str(path),
        "--json",
        "--entailment",
        "none",
        *_resolve(farm, "facts.example.com", "gone.example.org"),
    )
    assert rc == 1
    statuses = {c["url"]: c["status"] for c in json.loads(out)["citations"]}
    assert statuses[good] == "blocked_address"


async def test_usage_errors_exit_2(tmp_path: Path) -> None:
    rc, _, err = await _cli("check", str(tmp_path / "missing.md"))
    assert rc == 2 and "no such file" in err
    rc, _, _ = await _cli("check")
    assert rc == 2
    rc, _, _ = await _cli("check", "x.md", "--resolve", "nohostaddress")
    assert rc == 2
    rc, _, _ = await _cli("frobnicate")
    assert rc == 2


async def test_report_reads_logged_cases(tmp_path: Path) -> None:
    verdict = {
        "passed": False,
        "axes": {
            "validity": {"passed": True, "findings": []},
            "query": {
                "passed": False,
                "findings": [{"code": "dropped_year", "message": "dropped the year 2026"}],
            },
        },
    }
    log = tmp_path / "cases.jsonl"
    log.write_text(
        json.dumps({"prompt": "laptops 2026", "queries": ["laptops"], "verdict": verdict}) + "\n"
    )
    rc, out, err = await _cli("report", str(log))
    assert rc == 0, err
    assert "query" in out and "1" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    rc, _, err = await _cli("report", str(bad))
    assert rc == 2 and "not JSON" in err

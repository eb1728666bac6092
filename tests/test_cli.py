"""The command line, run as users run it: a real process against the farm on 127.0.0.1."""

from __future__ import annotations

import asyncio
import importlib.metadata
import io
import json
import os
import re
import sys
from pathlib import Path

import pytest
from conftest import Farm

import citeguard.cli

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


async def test_check_claims_prints_the_per_claim_view(farm: Farm, tmp_path: Path) -> None:
    path, good, dead = _answer(farm, tmp_path)
    hosts = _resolve(farm, "facts.example.com", "gone.example.org")
    args = ("check", str(path), "--allow-private", "--entailment", "word_overlap", *hosts)
    rc, out, err = await _cli(*args, "--claims")
    assert rc == 1, err
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("CLAIM"))
    citations = next(i for i, line in enumerate(lines) if line.startswith("STATUS"))
    verdict_line = next(i for i, line in enumerate(lines) if line.startswith("verdict:"))
    assert citations < header < verdict_line  # under the citation table
    view = lines[header:verdict_line]
    assert all(w in view[0] for w in ("SUPPORT", "P", "BACKEND", "GATED", "TEXT"))
    rows = {line.split()[0]: line for line in view[1:] if line.split()[:1] in (["0"], ["1"])}
    assert "330 metres tall" in rows["0"] and " yes " not in rows["0"]
    assert "painted gold" in rows["1"] and " yes " in rows["1"]  # the dead link gated it
    assert any(line.strip() == f"not_found (gated): {dead}" for line in view)
    assert any(line.strip() == f"ok: {good}" for line in view)
    assert any("evidence: “" in line and "330 metres tall" in line for line in view)
    assert any(line.strip().startswith(f"open at evidence: {good}#:~:text=") for line in view)
    # without --claims the view is not printed; the JSON verdict always carries it
    rc, plain, _ = await _cli(*args)
    assert rc == 1 and not any(line.lstrip().startswith("CLAIM") for line in plain.splitlines())
    rc, raw, _ = await _cli(*args, "--json")
    claims = json.loads(raw)["claims"]
    assert [c["gated"] for c in claims] == [False, True]
    assert claims[1]["urls"] == [dead] and claims[1]["checks"][0]["gated"] is True
    assert claims[0]["text_fragment_url"].startswith(f"{good}#:~:text=")


async def test_resolve_maps_only_the_hosts_it_names(farm: Farm, tmp_path: Path) -> None:
    # like curl's --resolve: facts.example.com goes where it is mapped; localhost, not named,
    # resolves as it would without the option (to the same farm, through the system resolver)
    mapped = farm.add("facts.example.com", "/eiffel", body=PAGE)
    unmapped = farm.add("localhost", "/eiffel", body=PAGE)
    path = tmp_path / "answer.md"
    text = f'The Eiffel Tower is "330 metres tall" [1][2].\n\n[1] {mapped}\n[2] {unmapped}\n'
    path.write_text(text)
    rc, out, err = await _cli(
        "check",
        str(path),
        "--json",
        "--allow-private",
        "--entailment",
        "none",
        *_resolve(farm, "facts.example.com"),
    )
    verdict = json.loads(out)
    statuses = {c["url"]: (c["status"], c["reason"]) for c in verdict["citations"]}
    assert statuses[mapped][0] == "ok" and statuses[unmapped][0] == "ok", statuses
    assert rc == 0, err
    assert ("GET", "localhost", "/eiffel") in farm.requests


def _warnings(verdict: dict[str, object]) -> list[dict[str, object]]:
    """Every warning of a JSON verdict's axes, but a claim's uncertain support (the table
    shows it under its citation)."""
    axes = verdict["axes"]
    assert isinstance(axes, dict)
    return [
        f
        for axis in axes.values()
        for f in axis["findings"]
        if f["severity"] == "warning" and f["code"] != "validity.support_uncertain"
    ]


async def test_check_prints_every_warning_with_its_citation(farm: Farm, tmp_path: Path) -> None:
    # a year-old page cited for "the latest" (freshness warns: the regime is uncertain) and a
    # search that drifts from the question (the advisory query axis warns)
    dated = (
        '<html><head><meta property="article:published_time" content="2024-01-10"></head>'
        "<body><p>The latest Helix release is Helix 4.0, with a columnar storage engine.</p>"
        "</body></html>"
    )
    url = farm.add("facts.example.com", "/helix", body=dated)
    answer = tmp_path / "answer.md"
    answer.write_text(f'The latest Helix release is "Helix 4.0" [1].\n\n[1] {url}\n')
    searches = tmp_path / "searches.json"
    searches.write_text(json.dumps(["helix columnar engine benchmarks vendors pricing"]))
    args = (
        "check",
        str(answer),
        "-q",
        "What is the latest stable release of the Helix database?",
        "--searches",
        str(searches),
        "--allow-private",
        "--entailment",
        "none",
        *_resolve(farm, "facts.example.com"),
    )
    _, raw, err = await _cli(*args, "--json")
    warnings = _warnings(json.loads(raw))
    assert {f["axis"] for f in warnings} >= {"freshness", "query"}, (warnings, err)
    _, text, _ = await _cli(*args)
    shown = [line.strip() for line in text.splitlines() if line.strip().startswith("warning:")]
    assert len(shown) == len(warnings), text
    for f in warnings:
        assert any(
            str(f["message"]) in line
            and f"warning: {f['axis']}" in line
            and (f["url"] is None or str(f["url"]) in line)
            for line in shown
        ), (f, shown)


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


# ---------------------------------------------------------------------- bad input: one line, exit 2

_BAD_INPUT = [
    # (name, argv, stdin, what the one line on stderr says)
    (
        "resolve-not-an-ip",
        ["check", "{ok}", "--resolve", "host:not-an-ip"],
        None,
        "argument --resolve: 'not-an-ip' is not an IP address",
    ),
    (
        "resolve-port",
        ["check", "{ok}", "--resolve", "host:99999:127.0.0.1"],
        None,
        "argument --resolve: 99999 is not a port",
    ),
    (
        "resolve-no-addr",
        ["check", "{ok}", "--resolve", "nohostaddress"],
        None,
        "expected HOST:ADDR or HOST:PORT:ADDR, got 'nohostaddress'",
    ),
    (
        "resolve-bad-v6",
        ["check", "{ok}", "--resolve", "host:443:[::zz]"],
        None,
        "'[::zz]' is not an IP address",
    ),
    (
        "timeout-negative",
        ["check", "{ok}", "--timeout", "-3"],
        None,
        "argument --timeout: '-3': give a number of seconds above 0 and at most 3600",
    ),
    ("timeout-zero", ["check", "{ok}", "--timeout", "0"], None, "'0': give a number of seconds"),
    ("timeout-nan", ["check", "{ok}", "--timeout", "nan"], None, "'nan': give a number"),
    ("timeout-inf", ["check", "{ok}", "--timeout", "inf"], None, "'inf': give a number"),
    ("timeout-huge", ["check", "{ok}", "--timeout", "1e9"], None, "'1e9': give a number"),
    (
        "timeout-word",
        ["check", "{ok}", "--timeout", "soon"],
        None,
        "argument --timeout: 'soon' is not a number of seconds",
    ),
    ("directory", ["check", "{dir}"], None, "{dir} is a directory, not a file"),
    ("missing", ["check", "{missing}"], None, "no such file: {missing}"),
    ("dangling-link", ["check", "{dangling}"], None, "no such file: {dangling}"),
    (
        "latin-1",
        ["check", "{latin}"],
        None,
        "{latin} is not UTF-8 text (byte 0xe9 at offset 3); save it as UTF-8",
    ),
    ("binary", ["check", "{png}"], None, "{png} looks binary (a NUL byte at offset 8)"),
    ("utf-16", ["check", "{utf16}"], None, "{utf16} is UTF-16 text; save it as UTF-8"),
    ("stdin-latin-1", ["check", "-"], b"caf\xe9\n", "stdin is not UTF-8 text (byte 0xe9"),
    (
        "searches-not-json",
        ["check", "{ok}", "--searches", "{badjson}"],
        None,
        "{badjson}: not JSON (Expecting property name enclosed in double quotes at line 1",
    ),
    (
        "searches-empty",
        ["check", "{ok}", "--searches", "{nosearch}"],
        None,
        "{nosearch}: no searches in it",
    ),
    ("searches-directory", ["check", "{ok}", "--searches", "{dir}"], None, "is a directory"),
    ("searches-latin-1", ["check", "{ok}", "--searches", "{latin}"], None, "is not UTF-8 text"),
    ("searches-missing", ["check", "{ok}", "--searches", "{missing}"], None, "no such file"),
    (
        "both-stdin",
        ["check", "-", "--searches", "-"],
        b"[]",
        "the answer and --searches cannot both be - (stdin)",
    ),
    ("no-file", ["check"], None, "the following arguments are required: file"),
    (
        "unknown-option",
        ["check", "{ok}", "--frobnicate"],
        None,
        "unrecognized arguments: --frobnicate",
    ),
    ("unknown-command", ["frobnicate"], None, "invalid choice: 'frobnicate'"),
]
if sys.platform == "linux":  # a file the kernel refuses to read, whoever runs the test
    _BAD_INPUT.append(
        (
            "read-error",
            ["check", "/proc/self/mem"],
            None,
            "cannot read /proc/self/mem: Input/output error",
        )
    )


def _bad_files(tmp_path: Path) -> dict[str, str]:
    files = {
        "ok": tmp_path / "ok.md",
        "dir": tmp_path / "a-directory",
        "missing": tmp_path / "missing.md",
        "dangling": tmp_path / "dangling.md",
        "latin": tmp_path / "latin1.md",
        "png": tmp_path / "image.png",
        "utf16": tmp_path / "utf16.md",
        "badjson": tmp_path / "searches-bad.json",
        "nosearch": tmp_path / "searches-none.json",
    }
    files["ok"].write_text("Nothing cited here.\n")
    files["dir"].mkdir()
    files["dangling"].symlink_to(tmp_path / "nowhere")
    files["latin"].write_bytes(b"caf\xe9 [1]\n\n[1] https://example.com/\n")
    files["png"].write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    files["utf16"].write_bytes("Paris [1]\n".encode("utf-16"))
    files["badjson"].write_text("{query: 1}")
    files["nosearch"].write_text(json.dumps({"status": "ok", "took_ms": 3}))
    return {k: str(v) for k, v in files.items()}


@pytest.mark.parametrize(
    ("argv", "stdin", "expected"),
    [case[1:] for case in _BAD_INPUT],
    ids=[case[0] for case in _BAD_INPUT],
)
def test_every_bad_input_is_one_line_and_exit_2(
    argv: list[str],
    stdin: bytes | None,
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # in process, through main() as the console script calls it (the subprocess test below
    # runs a few of these as a user does)
    files = _bad_files(tmp_path)
    monkeypatch.delenv("CITEGUARD_DEBUG", raising=False)  # the catch-all must not re-raise
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin or b"")))
    rc = citeguard.cli.main([a.format(**files) for a in argv])
    out, err = capsys.readouterr()
    assert (rc, out) == (2, "")
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), err
    assert lines[0].startswith("citeguard"), lines[0]
    assert expected.format(**files) in lines[0]
    assert "Error (" not in lines[0]  # not the catch-all: each of these has its own message


async def test_bad_input_from_a_real_process_is_one_line_and_exit_2(tmp_path: Path) -> None:
    files = _bad_files(tmp_path)
    picked = {"resolve-not-an-ip", "timeout-negative", "directory", "binary", "stdin-latin-1"}
    cases = [c for c in _BAD_INPUT if c[0] in picked]
    assert len(cases) == len(picked)
    results = await asyncio.gather(
        *(_cli(*(a.format(**files) for a in argv), stdin=stdin) for _, argv, stdin, _ in cases)
    )
    for (name, _, _, expected), (rc, out, err) in zip(cases, results, strict=True):
        assert (rc, out) == (2, ""), (name, err)
        assert err.count("\n") == 1 and expected.format(**files) in err, (name, err)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
async def test_an_unreadable_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "secret.md"
    path.write_text("x")
    path.chmod(0)
    try:
        rc, out, err = await _cli("check", str(path))
    finally:
        path.chmod(0o600)
    assert (rc, out) == (2, "")
    assert err == f"citeguard: error: cannot read {path}: permission denied\n"


def test_an_unexpected_exception_is_one_line_unless_debugging(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # the catch-all at main(): whatever escapes a command ends as one line and exit 2
    def broken(args: object, out: object) -> int:
        raise RuntimeError("went wrong\n  on two lines")

    monkeypatch.setattr(citeguard.cli, "_check", broken)
    monkeypatch.delenv("CITEGUARD_DEBUG", raising=False)
    assert citeguard.cli.main(["check", str(tmp_path / "x.md")]) == 2
    err = capsys.readouterr().err
    assert err == (
        "citeguard: error: went wrong on two lines "
        "(RuntimeError; CITEGUARD_DEBUG=1 shows the traceback)\n"
    )
    monkeypatch.setenv("CITEGUARD_DEBUG", "1")
    with pytest.raises(RuntimeError, match="went wrong"):
        citeguard.cli.main(["check", str(tmp_path / "x.md")])


async def test_good_resolve_forms_are_accepted() -> None:
    assert citeguard.cli._resolve_arg("a.example:127.0.0.1") == ("a.example", "127.0.0.1")
    assert citeguard.cli._resolve_arg("a.example:8080:127.0.0.1") == ("a.example", "127.0.0.1")
    assert citeguard.cli._resolve_arg("a.example:443:[::1]") == ("a.example", "[::1]")
    assert citeguard.cli._resolve_arg("a.example:::1") == ("a.example", "::1")
    # ADDR:PORT connects to that port whatever the URL says (StaticResolver's connect-to form)
    assert citeguard.cli._resolve_arg("a.example:127.0.0.1:9000") == (
        "a.example",
        "127.0.0.1:9000",
    )


async def test_version() -> None:
    rc, out, err = await _cli("--version")
    assert (rc, err) == (0, "")
    assert out == f"citeguard {importlib.metadata.version('citeguard-agent')}\n"


# ---------------------------------------------------------------------- --searches, score scales

_SCORE = re.compile(r"(validity|diversity|freshness|query): (?:pass|FAIL|n/a) ([\d.]+) \(([^)]+)\)")


async def test_searches_file_feeds_the_query_axis(farm: Farm, tmp_path: Path) -> None:
    good = farm.add("facts.example.com", "/eiffel", body=PAGE)
    answer = tmp_path / "answer.md"
    answer.write_text(f'The Eiffel Tower is "330 metres tall" [1].\n\n[1] {good}\n')
    question = "How tall is the Eiffel Tower in 2026?"
    # a raw Tavily response: its query dropped the year the question asked for
    tavily = {
        "query": "eiffel tower height",
        "answer": None,
        "images": [],
        "results": [{"title": "Eiffel", "url": good, "content": "330 metres", "score": 0.9}],
        "response_time": 0.8,
    }
    tav = tmp_path / "tavily.json"
    tav.write_text(json.dumps(tavily))
    listed = tmp_path / "searches.json"
    listed.write_text(
        json.dumps([{"query": "eiffel tower height 2026", "results": tavily["results"]}])
    )
    base = ["--allow-private", "--entailment", "none", "-q", question]
    base += _resolve(farm, "facts.example.com")

    # (one source, undated, for a question about 2026: the gate fails on diversity and
    # freshness; what is checked here is the query axis and the output)
    rc, out, err = await _cli("check", str(answer), "--json", *base)
    assert rc in (0, 1) and err == "", err
    assert json.loads(out)["axes"]["query"]["evaluated"] is False  # no searches: nothing to judge

    rc, out, err = await _cli("check", str(answer), "--json", "--searches", str(tav), *base)
    assert rc in (0, 1) and err == "", err
    query = json.loads(out)["axes"]["query"]
    assert query["evaluated"] is True and query["score"] < 5
    assert [q["query"] for q in query["details"]["queries"]] == ["eiffel tower height"]
    assert any("2026" in f["message"] for f in query["findings"]), query["findings"]

    rc, out, err = await _cli("check", str(answer), "--json", "--searches", str(listed), *base)
    verdict = json.loads(out)
    assert verdict["axes"]["query"]["score"] == 5.0
    assert not any(f["code"] == "not_retrieved" for f in verdict["axes"]["validity"]["findings"])

    # the table labels each score with its scale (the query axis is 1-5, the others 0-1)
    rc, out, err = await _cli("check", str(answer), "--searches", str(tav), *base)
    assert err == ""
    vector = next(line for line in out.splitlines() if line.startswith("verdict:"))
    scales = {axis: scale for axis, _, scale in _SCORE.findall(vector)}
    assert scales["query"] == "1–5" and scales["validity"] == "0–1", vector
    assert set(scales) - {"query"} and all(
        scale == "0–1" for axis, scale in scales.items() if axis != "query"
    )

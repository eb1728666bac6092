"""``citeguard rescore``: logged runs re-checked under a new policy, replayed from their snapshot
(or live when asked), in process and on a local Ray, with what moved.

Traffic is recorded for real: guarded runs against the farm on 127.0.0.1, into a SQLite
snapshot store, logged by ``Guard(log_to=...)``. Half the answers cite one site, half two, so a
stricter diversity floor must move exactly the one-site answers.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
from collections.abc import Iterator
from contextlib import redirect_stderr
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import Farm

from citeguard import Guard, Policy
from citeguard.cli import main
from citeguard.policy import EntailmentPolicy, FetchPolicy
from citeguard.report import report_file
from citeguard.rescore import (
    CaseOutcome,
    GuardPool,
    RescoreSummary,
    iter_rescore,
    rescore_file,
    rescore_on_ray,
)
from citeguard.snapshot import SQLiteSnapshotStore

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)
ELIOT = """<html><head><title>Middlemarch</title></head><body><article>
<p>Middlemarch is a novel by the English author George Eliot, first published in eight
installments in 1871 and 1872.</p></article></body></html>"""
LIBRARY = """<html><head><title>George Eliot</title></head><body><main>
<p>George Eliot was the pen name of Mary Ann Evans, who wrote Middlemarch.</p>
</main></body></html>"""
N_CASES = 8


def _policy() -> Policy:
    fetch = FetchPolicy(
        allow_private_addresses=True, url_timeout=3.0, answer_deadline=5.0, retries=0
    )
    return Policy(fetch=fetch, entailment=EntailmentPolicy(check_entailment=False))


STRICT = {"diversity": {"domain_floor": {"lookup": 2, "comparison": 2, "synthesis": 4}}}


def _one_site(i: int) -> bool:
    return i % 2 == 0


async def _record(farm: Farm, tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """N_CASES guarded runs, logged and snapshotted; returns (log, store path, urls)."""
    urls = {
        "good": farm.add("books.example.com", "/middlemarch", body=ELIOT),
        "also": farm.add("library.example.org", "/eliot", body=LIBRARY),
    }
    log, snap = tmp_path / "cases.jsonl", tmp_path / "snap.sqlite"
    store = SQLiteSnapshotStore(snap)
    guard = Guard(
        _policy(), resolver=farm.resolver, cache=store, now=lambda: NOW, log_to=log, entailer=None
    )

    async def search(query: str) -> list[dict[str, str]]:
        return [{"url": urls["good"], "title": "Middlemarch"}, {"url": urls["also"]}]

    searched = guard.wrap_search(search)

    async def agent(q: str, *, exclude_urls: frozenset[str] = frozenset(), **kw: Any) -> str:
        await searched(f"Middlemarch author {q[-3:]}")
        text = 'Middlemarch is "a novel by the English author George Eliot" [1].'
        if kw["one_site"]:
            return text + f"\n\n[1] {urls['good']}\n"
        return (
            text + " George Eliot was the pen name of Mary Ann Evans [2].\n\n"
            f"[1] {urls['good']}\n[2] {urls['also']}\n"
        )

    try:
        for i in range(N_CASES):  # one after the other: line i+1 is case i
            result = await guard.run(agent, f"Who wrote Middlemarch? ({i})", one_site=_one_site(i))
            assert result.passed
    finally:
        await guard.aclose()
        await store.close()
    return log, snap, urls


def _policy_file(tmp_path: Path, policy: Policy, name: str = "policy.json") -> Path:
    path = tmp_path / name
    path.write_text(policy.model_dump_json(), encoding="utf-8")
    return path


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stderr(err):
        code = main(["rescore", *argv], out=out)
    return code, out.getvalue(), err.getvalue()


async def _in_thread(*argv: str) -> tuple[int, str, str]:
    # the CLI runs its own event loop: off the test's loop
    return await asyncio.to_thread(_cli, *argv)


# --------------------------------------------------------------------------------------------
# In process
# --------------------------------------------------------------------------------------------


async def test_replay_under_the_logged_policy_moves_nothing(farm: Farm, tmp_path: Path) -> None:
    log, _snap, _urls = await _record(farm, tmp_path)
    requests = len(farm.requests)
    summary = await asyncio.to_thread(
        rescore_file, log, _policy(), out=tmp_path / "new.jsonl", diff=tmp_path / "diff.json"
    )
    assert len(farm.requests) == requests  # replayed: not one request to the web
    assert (summary.lines, summary.rescored, summary.replayed, summary.live) == (8, 8, 8, 0)
    assert summary.moved == 0 and summary.changes == [] and summary.skipped_count == 0
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    new = [json.loads(line) for line in (tmp_path / "new.jsonl").read_text().splitlines()]
    for before, after in zip(logged, new, strict=True):
        assert after["prompt"] == before["prompt"] and after["rescore"]["mode"] == "replay"
        vb, va = before["verdict"], after["verdict"]
        assert va["passed"] == vb["passed"] is True
        assert {k: (a["passed"], a["score"]) for k, a in va["axes"].items()} == {
            k: (a["passed"], a["score"]) for k, a in vb["axes"].items()
        }
    assert RescoreSummary.model_validate_json((tmp_path / "diff.json").read_text()) == summary


async def test_a_stricter_diversity_floor_moves_exactly_the_one_site_answers(
    farm: Farm, tmp_path: Path
) -> None:
    log, _snap, _urls = await _record(farm, tmp_path)
    strict = _policy_file(tmp_path, _policy().replace(**STRICT))
    new, diff = tmp_path / "new.jsonl", tmp_path / "diff.json"
    code, out, err = await _in_thread(
        str(log), "--policy", str(strict), "--out", str(new), "--diff", str(diff)
    )
    assert (code, err) == (0, "")
    summary = RescoreSummary.model_validate_json(diff.read_text())
    one_site = [i + 1 for i in range(N_CASES) if _one_site(i)]  # their line numbers
    assert [d.line for d in summary.changes] == one_site
    for d in summary.changes:
        assert (d.passed_before, d.passed_after, d.mode) == (True, False, "replay")
        (move,) = d.axes
        assert move.axis == "diversity"
        assert (move.passed_before, move.passed_after) == (True, False)
        assert d.citations == []  # the pages did not change, only the policy
    assert (summary.moved, summary.newly_failed, summary.newly_passed) == (4, 4, 0)
    assert [(a.axis, a.moved, a.newly_failed) for a in summary.axes] == [("diversity", 4, 4)]
    # the human table names the axis and the counts
    assert "verdicts moved: 4 (pass→fail 4, fail→pass 0)" in out
    assert any(line.split()[:2] == ["diversity", "4"] for line in out.splitlines())
    # the new cases are the report's input
    report = report_file(new)
    rates = {a.axis: (a.evaluated, a.failed) for a in report.axes}
    assert report.cases == 8 and report.passed == 4 and rates["diversity"] == (8, 4)


async def test_old_lines_without_searches_rescore_with_their_queries(
    farm: Farm, tmp_path: Path
) -> None:
    log, snap, _urls = await _record(farm, tmp_path)
    old = tmp_path / "old.jsonl"
    with old.open("w") as f:  # the case format before searches and snapshots were logged
        for line in log.read_text().splitlines():
            case = json.loads(line)
            keep = ("timestamp", "prompt", "queries", "answer", "outcome", "attempts", "verdict")
            f.write(json.dumps({k: case[k] for k in keep}) + "\n")
    policy = _policy_file(tmp_path, _policy())
    code, _out, err = await _in_thread(str(old), "--policy", str(policy))
    assert code == 2 and len(err.splitlines()) == 1
    assert "no case could be rescored" in err and "no snapshot to replay" in err
    code, out, err = await _in_thread(str(old), "--policy", str(policy), "--store", str(snap))
    assert (code, err) == (0, "")
    assert "8 case(s) were logged without searches" in out
    summary = RescoreSummary.model_validate_json(
        (tmp_path / "old.jsonl.rescored.diff.json").read_text()
    )
    assert summary.rescored == 8 and summary.queries_only == 8
    # with queries only the query axis still sees them, and no verdict moves
    assert summary.moved == 0


async def test_a_case_without_a_snapshot_is_checked_live_only_when_asked(
    farm: Farm, tmp_path: Path
) -> None:
    log, _snap, _urls = await _record(farm, tmp_path)
    cases = [json.loads(line) for line in log.read_text().splitlines()]
    cases[0]["snapshot"] = None
    cases[1]["answer"] += f"\nSee also {farm.url('books.example.com', '/never-recorded')}\n"
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("".join(json.dumps(c) + "\n" for c in cases))
    requests = len(farm.requests)

    def run(live: bool) -> RescoreSummary:
        return rescore_file(
            mixed, _policy(), out=tmp_path / "new.jsonl", live=live, resolver=farm.resolver
        )

    replayed = await asyncio.to_thread(run, False)
    assert len(farm.requests) == requests
    assert replayed.rescored == 6 and replayed.skipped_count == 2
    assert replayed.skipped[0] == "line 1: no snapshot to replay (--live checks it live)"
    assert replayed.skipped[1].startswith("line 2: ") and "never-recorded" in replayed.skipped[1]
    live = await asyncio.to_thread(run, True)
    assert len(farm.requests) > requests  # line 1 went to the web ...
    assert (live.rescored, live.replayed, live.live) == (7, 6, 1) and live.moved == 0
    new = [json.loads(line) for line in (tmp_path / "new.jsonl").read_text().splitlines()]
    assert new[0]["rescore"] == {"line": 1, "mode": "live"} and new[0]["verdict"]["passed"]


async def test_bad_lines_are_counted_and_skipped(farm: Farm, tmp_path: Path) -> None:
    log, _snap, _urls = await _record(farm, tmp_path)
    good = log.read_text().splitlines()
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_bytes(
        b"\n".join(
            [
                good[0].encode(),
                b"{not json",
                b'"a string"',
                json.dumps({"answer": 5, "verdict": {"passed": True, "axes": {}}}).encode(),
                json.dumps({"answer": "x", "verdict": "[1, 2"}).encode(),
                b"\xff\xfe not utf-8",
                b"[" * 20_000,
                b'{"answer": "' + b"x" * 100_000 + b'"}',
                good[1].encode(),
            ]
        )
        + b"\n"
    )
    summary = await asyncio.to_thread(
        rescore_file, hostile, _policy(), out=tmp_path / "new.jsonl", max_line_bytes=64_000
    )
    assert summary.lines == 9 and summary.rescored == 2 and summary.skipped_count == 7
    why = dict(s.split(": ", 1) for s in summary.skipped)
    assert why["line 2"].startswith("not JSON")
    assert why["line 3"] == "not an object"
    assert why["line 4"].startswith("not a case (answer: Input should be a valid string")
    assert why["line 5"].startswith("Expecting")  # the report's verdict reader
    assert why["line 6"].startswith("not UTF-8")
    assert why["line 7"] == "not JSON (nested too deep)"
    assert why["line 8"] == "longer than 64,000 bytes"
    assert len((tmp_path / "new.jsonl").read_text().splitlines()) == 2


def _write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("policy-not-json", "p0.json: not a policy (invalid Policy"),
        ("policy-bad-value", "max_attempts"),
        ("policy-missing", "no such file"),
        ("policy-binary", "looks binary"),
        ("log-missing", "no such file"),
        ("log-directory", "is a directory"),
        ("log-gzip", "gzip"),
        ("workers-inprocess", "--workers needs --engine ray"),
        ("out-is-input", "is the input log"),
        ("workers-zero", "expected 1 to 256"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: str, expected: str) -> None:
    log = _write(tmp_path / "cases.jsonl", '{"answer": "x", "verdict": {"axes": {}}}\n')
    policy = _policy_file(tmp_path, _policy())
    bad = {
        "policy-not-json": lambda: ["--policy", str(_write(tmp_path / "p0.json", "{nope"))],
        "policy-bad-value": lambda: [
            "--policy",
            str(_write(tmp_path / "p1.json", '{"max_attempts": "many"}')),
        ],
        "policy-missing": lambda: ["--policy", str(tmp_path / "nope.json")],
        "policy-binary": lambda: ["--policy", str(_write(tmp_path / "p2.json", b"\x00\x01"))],
        "log-missing": lambda: [str(tmp_path / "missing.jsonl"), "--policy", str(policy)],
        "log-directory": lambda: [str(tmp_path), "--policy", str(policy)],
        "log-gzip": lambda: [
            str(_write(tmp_path / "c.gz", b"\x1f\x8b\x08")),
            "--policy",
            str(policy),
        ],
        "workers-inprocess": lambda: ["--policy", str(policy), "--workers", "2"],
        "out-is-input": lambda: ["--policy", str(policy), "--out", str(log)],
        "workers-zero": lambda: ["--policy", str(policy), "--engine", "ray", "--workers", "0"],
    }
    argv = bad[case]()
    if not case.startswith("log-"):
        argv = [str(log), *argv]
    code, out, err = _cli(*argv)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and expected in err and "Traceback" not in err


async def test_outcomes_come_back_in_input_order_with_bounded_lookahead(
    farm: Farm, tmp_path: Path
) -> None:
    log, _snap, _urls = await _record(farm, tmp_path)
    cases = [json.loads(line) for line in log.read_text().splitlines()]
    taken: list[int] = []

    def items() -> Iterator[tuple[int, Any, str | None]]:
        for i, c in enumerate(cases * 4, start=1):
            taken.append(i)
            yield i, c, None

    guards = GuardPool(_policy())
    seen: list[int] = []
    try:
        async for o in iter_rescore(items(), guards, concurrency=2):
            seen.append(o.line)
            # never more than 2 x concurrency cases read ahead of the one handed out
            assert len(taken) - len(seen) <= 4
            assert o.diff is not None and not o.diff.moved
    finally:
        await guards.aclose()
    assert seen == list(range(1, 33))


# --------------------------------------------------------------------------------------------
# On Ray
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    """One local Ray (2 CPUs) for this module; skipped without the ``ray`` extra, except in CI
    (``CI=true``), where it fails."""
    try:
        import ray
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("ray is not installed: the Ray rescore tests must run in CI")
        pytest.skip("ray is not installed (pip install 'citeguard-agent[ray]')")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        # the workers import citeguard from this checkout, as the tests do
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
    try:
        yield ray
    finally:
        ray.shutdown()


# A hang, not a busy machine, should reach the timeout: Ray starts its actor processes, each
# importing citeguard and its model runtime, twice here (the function, then the command); at
# load average 5-7 on two cores the test took 210-230 s (about 50 s idle).
@pytest.mark.timeout(600)
async def test_ray_gives_the_same_outcomes_and_files_as_in_process(
    farm: Farm, tmp_path: Path, ray_local: Any
) -> None:
    log, _snap, _urls = await _record(farm, tmp_path)
    with log.open("a") as f:
        f.write("{not json\n")  # a bad line: skipped the same way by both
    strict = _policy().replace(**STRICT)
    items = [
        (i, json.loads(line), None) for i, line in enumerate(log.read_text().splitlines()[:-1], 1)
    ] + [(N_CASES + 1, None, "not JSON")]

    async def inprocess() -> list[CaseOutcome]:
        guards = GuardPool(strict)
        try:
            return [o async for o in iter_rescore(items, guards)]
        finally:
            await guards.aclose()

    here = await inprocess()
    on_ray = await asyncio.to_thread(rescore_on_ray, items, strict, workers=2, batch_size=3)
    assert on_ray == here
    assert [o.line for o in here] == list(range(1, N_CASES + 2))
    assert sum(1 for o in here if o.diff is not None and o.diff.moved) == 4
    # the command line: the same new cases, byte for byte, and the same diff
    policy = _policy_file(tmp_path, strict)
    runs = {}
    for engine in ("inprocess", "ray"):
        out, diff = tmp_path / f"{engine}.jsonl", tmp_path / f"{engine}.diff.json"
        argv = [str(log), "--policy", str(policy), "--out", str(out), "--diff", str(diff)]
        argv += ["--engine", engine] + (["--workers", "2"] if engine == "ray" else [])
        code, _stdout, err = await _in_thread(*argv)
        assert code == 0 and err.startswith("citeguard: warning:") and len(err.splitlines()) == 1
        summary = RescoreSummary.model_validate_json(diff.read_text())
        runs[engine] = (out.read_bytes(), summary)
    assert runs["ray"][0] == runs["inprocess"][0]
    timing = {"engine", "workers", "seconds", "cases_per_second"}
    assert runs["ray"][1].model_dump(exclude=timing) == runs["inprocess"][1].model_dump(
        exclude=timing
    )
    assert (runs["ray"][1].engine, runs["ray"][1].workers) == ("ray", 2)


def test_progress_shows_on_a_terminal_only() -> None:
    from citeguard.rescore import _RescoreProgress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Terminal(), io.StringIO()
    for stream in (tty, pipe):
        ticks = iter([0.0, 0.1, 1.0])
        meter = _RescoreProgress(stream, 10, ticks.__next__)
        meter.update(1, 1)  # too soon after the start: nothing yet
        meter.update(3, 2)
        meter.close()
    assert pipe.getvalue() == ""
    shown = tty.getvalue()
    assert shown.startswith("\rciteguard rescore: 3 of 10 lines, 2 rescored")
    assert "1 of 10" not in shown and shown.endswith("\r")  # erased at the end

"""``Guard(log_to=path)``: every guarded run appends one whole case line, off the event loop,
that ``citeguard report`` and ``citeguard rescore`` read. Real runs against the farm on
127.0.0.1, a real SQLite snapshot store."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import Farm

from citeguard import CitationRejected, Guard, Policy, PolicyError
from citeguard.cli import main
from citeguard.models import SearchRecord, Verdict
from citeguard.policy import EntailmentPolicy, FetchPolicy
from citeguard.report import report_file
from citeguard.snapshot import SQLiteSnapshotStore

NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)
PAGE = """<html><head><title>Middlemarch</title></head><body><article>
<p>Middlemarch is a novel by the English author George Eliot, first published in eight
installments in 1871 and 1872.</p></article></body></html>"""
DEV_FULL = Path("/dev/full")  # every write to it fails with ENOSPC
HAS_PROC_FD = Path("/proc/self/fd").is_dir()


def _policy(**kw: Any) -> Policy:
    fetch = FetchPolicy(
        allow_private_addresses=True, url_timeout=3.0, answer_deadline=5.0, retries=0
    )
    return Policy(fetch=fetch, entailment=EntailmentPolicy(check_entailment=False), **kw)


def _site(farm: Farm) -> tuple[str, str]:
    good = farm.add("books.example.com", "/middlemarch", body=PAGE)
    dead = farm.add("gone.example.net", "/middlemarch", status=404, body="nope")
    return good, dead


def _agent(guard: Guard, good: str, dead: str) -> Any:
    async def search(query: str) -> list[dict[str, Any]]:
        return [{"url": good, "title": "Middlemarch", "snippet": "a novel by George Eliot"}]

    searched = guard.wrap_search(search)

    async def agent(q: str, *, exclude_urls: frozenset[str] = frozenset(), **_: Any) -> str:
        await searched(f"{q} author")
        # a long answer: lines of many kB, so torn or interleaved writes would show
        padding = " ".join(f"Filler sentence {i} about nothing." for i in range(300))
        text = f'Middlemarch is "a novel by the English author George Eliot" [1]. {padding}'
        if "fail" in q:
            return text + f" It was first published in 1871 [2].\n\n[1] {good}\n[2] {dead}\n"
        return text + f"\n\n[1] {good}\n"

    return agent


async def test_concurrent_runs_append_whole_lines_that_report_reads(
    farm: Farm, tmp_path: Path
) -> None:
    good, dead = _site(farm)
    log = tmp_path / "cases.jsonl"
    store = SQLiteSnapshotStore(tmp_path / "snap.sqlite")
    questions = [f"Who wrote Middlemarch? ({i}{' fail' if i % 4 == 0 else ''})" for i in range(24)]
    guard = Guard(
        _policy(on_fail="report"),
        resolver=farm.resolver,
        entailer=None,
        cache=store,
        now=lambda: NOW,
        log_to=log,
    )
    try:
        agent = _agent(guard, good, dead)
        results = await asyncio.gather(*(guard.run(agent, q) for q in questions))
    finally:
        await guard.aclose()
        await store.close()
    lines = log.read_bytes().split(b"\n")
    assert lines[-1] == b""  # every line ends with a newline
    cases = [json.loads(line) for line in lines[:-1]]
    assert len(cases) == len(questions)
    assert all(len(line) > 8000 for line in lines[:-1])
    by_prompt = {c["prompt"]: c for c in cases}
    assert set(by_prompt) == set(questions)
    for q, result in zip(questions, results, strict=True):
        case = by_prompt[q]
        assert Verdict.model_validate(case["verdict"]) == result.verdict
        assert case["answer"] == result.answer
        assert case["timestamp"] == NOW.isoformat()
        # what rescore needs: the searches with their results, and where the pages were recorded
        (search,) = [SearchRecord.model_validate(s) for s in case["searches"]]
        assert search.query == f"{q} author" and [r.url for r in search.results] == [good]
        assert search.raw is None  # the tool's raw JSON is left out
        assert case["queries"] == [f"{q} author"]
        assert case["snapshot"] == {
            "store": str(tmp_path / "snap.sqlite"),  # tmp_path is absolute
            "namespace": None,
            "version": 1,
        }
        assert case["excluded_urls"] == [] and case["structured"] is None
    # the log is the report's input
    report = report_file(log)
    assert report.cases == 24 and report.passed == 18 and not report.skipped_count
    out = io.StringIO()
    assert main(["report", str(log), "--json"], out=out) == 0
    assert json.loads(out.getvalue())["passed"] == 18


async def test_a_raising_run_is_logged_and_a_bare_check_is_not(farm: Farm, tmp_path: Path) -> None:
    good, dead = _site(farm)
    log = tmp_path / "cases.jsonl"
    guard = Guard(
        _policy(on_fail="raise", max_attempts=1, repair="off"),
        resolver=farm.resolver,
        entailer=None,
        now=lambda: NOW,
        log_to=log,
    )
    try:
        await guard.check(f"Middlemarch is a novel [1].\n\n[1] {good}\n", question="Middlemarch?")
        assert not log.exists()  # check() is not a guarded run: nothing logged
        with pytest.raises(CitationRejected):
            await guard.run(_agent(guard, good, dead), "Who wrote Middlemarch? fail")
    finally:
        await guard.aclose()
    (case,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert case["outcome"] == "failed" and not case["verdict"]["passed"]
    assert case["snapshot"] is None  # no store: nothing to point to
    assert {c["status"] for c in case["verdict"]["citations"]} == {"ok", "not_found"}


@pytest.mark.skipif(not HAS_PROC_FD, reason="needs /proc to tell the log's descriptor apart")
async def test_lines_are_written_off_the_event_loop_thread(farm: Farm, tmp_path: Path) -> None:
    good, dead = _site(farm)
    log = tmp_path / "cases.jsonl"
    guard = Guard(_policy(), resolver=farm.resolver, entailer=None, now=lambda: NOW, log_to=log)
    writers: list[str] = []
    real_write = os.write

    def spy(fd: int, data: Any) -> int:
        with contextlib.suppress(OSError):  # which file: the log, or someone else's pipe
            if os.readlink(f"/proc/self/fd/{fd}") == str(log):
                writers.append(threading.current_thread().name)
        return real_write(fd, data)

    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(os, "write", spy)
            await guard.run(_agent(guard, good, dead), "Who wrote Middlemarch?")
    finally:
        await guard.aclose()
    assert writers and threading.main_thread().name not in writers
    assert all(name.startswith("citeguard-log") for name in writers)
    assert len(log.read_text().splitlines()) == 1


@pytest.mark.skipif(not DEV_FULL.exists(), reason="no /dev/full on this system")
async def test_a_line_that_cannot_be_written_is_counted_not_raised(
    farm: Farm, caplog: pytest.LogCaptureFixture
) -> None:
    good, dead = _site(farm)
    guard = Guard(
        _policy(), resolver=farm.resolver, entailer=None, now=lambda: NOW, log_to=DEV_FULL
    )
    try:
        with caplog.at_level(logging.WARNING, logger="citeguard.case_log"):
            result = await guard.run(_agent(guard, good, dead), "Who wrote Middlemarch?")
    finally:
        await guard.aclose()
    assert result.passed  # the user still gets the answer
    log = guard._case_log
    assert log is not None and (log.written, log.dropped) == (0, 1)
    assert any("cannot append a case" in r.getMessage() for r in caplog.records)


def test_log_to_a_directory_or_into_a_missing_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="is a directory"):
        Guard(_policy(), log_to=tmp_path)
    with pytest.raises(PolicyError, match="no folder"):
        Guard(_policy(), log_to=tmp_path / "missing" / "cases.jsonl")

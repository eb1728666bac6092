"""The extraction child process (citeguard/extract_worker.py) and the extract stage's use of it.

Real child processes, real pages served by the loopback farm; no mocks.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from citeguard import Guard, Policy
from citeguard.extract_stage import _extract, _prepared
from citeguard.extract_worker import ExtractionFailed, ProcessExtractor
from citeguard.models import CitationStatus
from citeguard.policy import EntailmentPolicy, FetchPolicy
from tests.conftest import Farm

NOW = datetime(2026, 12, 1, tzinfo=UTC)
CLAIM = (
    'The lighthouse "opened its doors to visitors again on Tuesday after a restoration that took'
    ' three years" [1].'
)
ARTICLE = (Path(__file__).parent / "fixtures" / "pages" / "article.html").read_bytes()


@pytest.fixture
def worker() -> Iterator[ProcessExtractor]:
    ex = ProcessExtractor(job_timeout=5.0)
    try:
        yield ex
    finally:
        ex.shutdown(wait=True)


def test_jobs_run_in_the_child_in_order_and_return_their_results(
    worker: ProcessExtractor,
) -> None:
    futures = [worker.submit(os.getpid) for _ in range(3)] + [worker.submit(pow, 2, 10)]
    pids = {f.result(timeout=60) for f in futures[:3]}
    assert futures[3].result(timeout=60) == 1024
    assert len(pids) == 1 and os.getpid() not in pids  # one child, not this process
    assert worker.completed == 4 and worker.restarts == 0


def test_a_page_extracts_in_the_child_with_its_index_built(worker: ProcessExtractor) -> None:
    job = functools.partial(
        _extract,
        ARTICLE,
        url="https://example.com/a",
        content_type="text/html",
        headers={},
        date_fallback=False,
        limits=None,
    )
    ext = worker.submit(_prepared, job).result(timeout=60)
    assert ext.page.kind == "html" and ext.page.text
    assert ext.indexed  # a short page comes back ready for paraphrase search


def test_a_job_past_its_time_fails_alone_and_the_next_runs_in_a_new_child() -> None:
    ex = ProcessExtractor(job_timeout=0.5)
    try:
        assert ex.wait_ready(60)
        first_pid = ex.submit(os.getpid).result(timeout=60)
        slow = ex.submit(time.sleep, 30)
        after = ex.submit(os.getpid)
        t0 = time.monotonic()
        with pytest.raises(ExtractionFailed, match=r"longer than 0\.5 s"):
            slow.result(timeout=60)
        assert time.monotonic() - t0 < 20  # killed, not waited for
        assert after.result(timeout=60) != first_pid
        assert ex.restarts == 1
    finally:
        ex.shutdown()


def test_a_crashing_job_fails_alone(worker: ProcessExtractor) -> None:
    crash = worker.submit(os._exit, 7)
    after = worker.submit(pow, 3, 3)
    with pytest.raises(ExtractionFailed, match="died"):
        crash.result(timeout=60)
    assert after.result(timeout=60) == 27
    assert worker.restarts == 1


def test_memory_is_capped_and_an_exception_comes_back_as_itself() -> None:
    ex = ProcessExtractor(memory_limit_mb=512)
    try:
        with pytest.raises(MemoryError):
            ex.submit(bytearray, 1 << 30).result(timeout=60)  # 1 GiB > the 512 MiB cap
        with pytest.raises(ZeroDivisionError):
            ex.submit(divmod, 1, 0).result(timeout=60)
        assert ex.restarts == 0  # the child survives both
    finally:
        ex.shutdown()


def test_what_a_job_prints_does_not_corrupt_the_replies(worker: ProcessExtractor) -> None:
    assert worker.submit(print, "x" * 100_000).result(timeout=60) is None
    assert worker.submit(pow, 2, 5).result(timeout=60) == 32


def test_shutdown_stops_the_child_and_refuses_new_jobs() -> None:
    ex = ProcessExtractor()
    pid = ex.submit(os.getpid).result(timeout=60)
    ex.shutdown(wait=True)
    with pytest.raises(RuntimeError):
        ex.submit(os.getpid)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)  # polling a process table under a deadline, not fixing a race
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _meet(here: Path, me: str, other: str) -> list[str]:
    """A job that says it has started (a file named ``me``) and ends only once the job named
    ``other`` has started too: two of them end only if they run at the same time."""
    wait = (
        f'touch "{here / me}"; i=0; while [ ! -e "{here / other}" ]; do '
        'i=$((i + 1)); [ "$i" -lt 3000 ] || exit 1; sleep 0.01; done'
    )  # (gives up after ~30 s: no shell left polling after a failed run)
    return ["sh", "-c", wait]


def test_two_workers_run_jobs_side_by_side_and_a_crash_fails_only_its_job(
    tmp_path: Path,
) -> None:
    ex = ProcessExtractor(workers=2, job_timeout=20.0)
    try:
        assert ex.wait_ready(120)
        # two jobs that each wait for the other to start: they end only if they run in two
        # children at once (one child would run the first until its 20 s timeout kills it)
        both = [
            ex.submit(functools.partial(subprocess.run, _meet(tmp_path, a, b), check=True))
            for a, b in (("a", "b"), ("b", "a"))
        ]
        assert [f.result(timeout=60).returncode for f in both] == [0, 0]
        pids = {ex.submit(os.getpid).result(timeout=60) for _ in range(8)}
        assert os.getpid() not in pids
        # a crash in one lane fails that job; the next jobs still run (in either child)
        crash = ex.submit(os._exit, 3)
        after = [ex.submit(pow, 3, k) for k in range(6)]
        with pytest.raises(ExtractionFailed, match="died"):
            crash.result(timeout=60)
        assert [f.result(timeout=60) for f in after] == [3**k for k in range(6)]
        assert ex.restarts == 1
    finally:
        ex.shutdown(wait=True)


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ProcessExtractor(workers=0)


def test_the_users_main_script_is_not_run_again_in_the_child(tmp_path: Path) -> None:
    # ProcessPoolExecutor(spawn) re-runs a script's top level in every child; a script with no
    # ``if __name__ == "__main__"`` then spawns again and fails. The extraction child does not.
    marker = tmp_path / "runs.txt"
    script = tmp_path / "service.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os
            from citeguard.extract_worker import ProcessExtractor
            with open({str(marker)!r}, "a") as f:
                f.write(str(os.getpid()) + "\\n")
            ex = ProcessExtractor()
            print(ex.submit(pow, 6, 2).result(timeout=60))
            ex.shutdown()
            """
        )
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "36"
    assert len(marker.read_text().split()) == 1


# ---------------------------------------------------------------------- through the Guard


def _policy(**fetch: object) -> Policy:
    return Policy(
        fetch=FetchPolicy(
            allow_private_addresses=True,
            url_timeout=3.0,
            answer_deadline=10.0,
            retries=0,
            **fetch,  # type: ignore[arg-type]
        ),
        entailment=EntailmentPolicy(check_entailment=False),
    )


async def test_extract_in_process_checks_pages_in_the_child(farm: Farm) -> None:
    url = farm.add("example.com", "/article", body=ARTICLE, content_type="text/html")
    async with Guard(_policy(extract_in="process"), resolver=farm.resolver, now=lambda: NOW) as g:
        verdict = await g.check(f"{CLAIM}\n\n[1] {url}\n")
        worker = g._pages.worker
        assert worker is not None and worker.completed >= 1
    assert verdict.citations[0].status is CitationStatus.OK


async def test_a_page_the_child_cannot_finish_in_time_fails_with_that_reason(farm: Farm) -> None:
    # 2 MB of text: normalising it alone takes hundreds of milliseconds, far past 10 ms
    body = ("The lighthouse opened its doors to visitors again on Tuesday. " * 32_000).encode()
    url = farm.add("example.com", "/long", body=body, content_type="text/plain")
    policy = _policy(extract_in="process", extract_timeout=0.01, max_body_bytes=4 << 20)
    async with Guard(policy, resolver=farm.resolver, now=lambda: NOW) as g:
        verdict = await g.check(f"{CLAIM}\n\n[1] {url}\n")
    (c,) = verdict.citations
    assert c.status is CitationStatus.UNSUPPORTED_TYPE
    assert "longer than 0.01 s" in c.reason
    assert not verdict.axes["validity"].passed


async def test_auto_keeps_a_one_off_check_in_the_thread(farm: Farm) -> None:
    url = farm.add("example.com", "/article", body=ARTICLE, content_type="text/html")
    g = Guard(_policy(), resolver=farm.resolver, now=lambda: NOW)
    try:
        verdict = await g.check(f"{CLAIM}\n\n[1] {url}\n")
        assert g._pages.worker is None  # no child started for one page
    finally:
        await g.aclose()
    assert verdict.citations[0].status is CitationStatus.OK


async def test_auto_starts_the_child_at_warm_up_and_thread_mode_never(farm: Farm) -> None:
    async with Guard(_policy(), resolver=farm.resolver, now=lambda: NOW) as g:
        assert g._pages.worker is not None  # started by `async with`
        await g.warm_up()  # and waited for here
        worker = g._pages.worker
        assert worker is not None and worker.ready
    async with Guard(_policy(extract_in="thread"), resolver=farm.resolver, now=lambda: NOW) as g:
        assert g._pages.worker is None


def _long_answer(url: str) -> str:
    # over the inline-parse size: parsed off the loop
    filler = " ".join(["The lighthouse reopened on Tuesday."] * 100)
    return f"{filler} {CLAIM}\n\n[1] {url}\n"


async def test_a_long_answer_is_parsed_in_the_child_once_it_is_up(farm: Farm) -> None:
    # a parse in a thread makes the loop wait for the GIL after every select(): 9-18 ms stalls
    # for a 100 kB answer; in the child 1-9 ms. The page is missing: nothing to extract, so the
    # parse is the child's one job
    url = farm.add("example.com", "/article", body=ARTICLE, content_type="text/html")
    url = url.replace("/article", "/missing")
    policy = _policy(extract_in="thread")
    async with Guard(policy, resolver=farm.resolver, now=lambda: NOW) as g:
        in_thread = await g.check(_long_answer(url))
    async with Guard(_policy(), resolver=farm.resolver, now=lambda: NOW) as g:
        await g.warm_up()
        worker = g._pages.worker
        assert worker is not None and worker.ready
        before = worker.completed
        verdict = await g.check(_long_answer(url))
        assert worker.completed - before == 1
        # a caller's references may not pickle: that parse stays in the thread
        await g.check(_long_answer(url), references={"x": url})
        assert worker.completed - before == 1
    assert verdict.claims == in_thread.claims  # the same parse
    assert [(c.url, c.status, c.claim_indices) for c in verdict.citations] == [
        (c.url, c.status, c.claim_indices) for c in in_thread.citations
    ]
    assert verdict.citations[0].status is CitationStatus.NOT_FOUND


async def test_a_parse_the_child_fails_is_done_in_a_thread(farm: Farm) -> None:
    # 0.1 ms is too short for any job: the child is killed on the parse (the page is missing,
    # so the parse is its one job), and the thread parses
    url = farm.add("example.com", "/article", body=ARTICLE, content_type="text/html")
    url = url.replace("/article", "/missing")
    policy = _policy(extract_timeout=0.000_1)
    async with Guard(policy, resolver=farm.resolver, now=lambda: NOW) as g:
        await g.warm_up()
        worker = g._pages.worker
        assert worker is not None and worker.ready
        verdict = await g.check(_long_answer(url))
        assert worker.restarts == 1
    assert verdict.citations[0].url == url
    assert verdict.citations[0].status is CitationStatus.NOT_FOUND
    assert len(verdict.claims) > 1


# a child that never says it is ready: it records its pid, then sleeps (the suite's own stand-in
# for a child still importing citeguard on a busy machine)
NEVER_READY = """#!/bin/sh
echo $$ >> "{pids}"
exec sleep 600
"""


def _never_ready(tmp_path: Path) -> tuple[str, Path]:
    pids = tmp_path / "pids"
    script = tmp_path / "python"
    script.write_text(NEVER_READY.format(pids=pids))
    script.chmod(0o755)
    return str(script), pids


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_shutdown_stops_a_child_that_is_still_starting(tmp_path: Path) -> None:
    python, pids = _never_ready(tmp_path)
    ex = ProcessExtractor(workers=2, python=python)
    ex.start()
    while not pids.is_file() or len(pids.read_text().split()) < 2:  # both spawned
        time.sleep(0.01)
    ex.shutdown(wait=True)  # before: waited up to 120 s for the hello
    assert all(_gone(int(p)) for p in pids.read_text().split())
    assert not ex.ready


async def test_async_with_does_not_wait_for_the_child_and_closing_stops_it(
    farm: Farm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `async with Guard(...)` starts the child and goes on: pages go to the thread meanwhile;
    # `await guard.warm_up()` is what waits (a service's start-up)
    import citeguard.extract_stage as stage

    python, pids = _never_ready(tmp_path)
    never = functools.partial(ProcessExtractor, python=python)
    monkeypatch.setattr(stage, "ProcessExtractor", never)
    url = farm.add("example.com", "/article", body=ARTICLE, content_type="text/html")
    async with Guard(_policy(), resolver=farm.resolver, now=lambda: NOW) as g:
        worker = g._pages.worker
        assert worker is not None and not worker.ready
        verdict = await g.check(f"{CLAIM}\n\n[1] {url}\n")
        assert worker.completed == 0  # extracted in the thread
    assert verdict.citations[0].status is CitationStatus.OK
    assert all(_gone(int(p)) for p in pids.read_text().split())  # closing the Guard stopped them


def _extraction_children() -> set[int]:
    """This process's live children running the extraction worker (from /proc)."""
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and b"extract_worker" in cmd:
            out.add(int(entry))
    return out


async def test_no_extraction_child_outlives_the_guard(farm: Farm) -> None:
    others = _extraction_children()  # (another test's, if any: not this Guard's)
    async with Guard(_policy(), resolver=farm.resolver, now=lambda: NOW) as g:
        await g.warm_up()
        mine = _extraction_children() - others
        assert len(mine) == 2  # Policy.fetch.extract_processes
    assert not mine & _extraction_children()  # before: left to read the end of their input


# a page whose one date string no dateparser locale reads: htmldate hands it to dateparser,
# which loads every locale the first time (1.3-2.5 s of CPU) unless the child was warmed
ODD_DATE_PAGE = (
    "<html><head><title>Notes</title></head><body><div>"
    "<p>Zuletzt geändert: 30. Thermidor 2021, 9 Uhr</p></div></body></html>"
)


def _date_search_cpu(ex: ProcessExtractor) -> float:
    """CPU seconds one child spends on the date search of :data:`ODD_DATE_PAGE` (the child
    runs one job at a time: its CPU clock read before and after)."""
    from citeguard.web.page.dates import _htmldate_published

    before = ex.submit(time.process_time).result(timeout=60)
    job = functools.partial(_htmldate_published, ODD_DATE_PAGE, "https://example.com/n", NOW)
    ex.submit(job).result(timeout=60)
    return float(ex.submit(time.process_time).result(timeout=60) - before)


def test_a_child_and_its_replacement_are_warm_before_their_first_page() -> None:
    # what a child loads on first use is loaded once wait_warm returns (a first child loads it
    # beside its first jobs), and by a replacement before it says it is ready: a cold child
    # spends 1.3-2.5 s of CPU on this page's date search, a warm one a few milliseconds
    ex = ProcessExtractor(job_timeout=30.0)
    try:
        assert ex.wait_ready(120) and ex.wait_warm(120)
        assert _date_search_cpu(ex) < 0.5
        with pytest.raises(ExtractionFailed, match="died"):
            ex.submit(os._exit, 3).result(timeout=60)  # the child dies: a new one comes up
        assert _date_search_cpu(ex) < 0.5
        assert ex.restarts == 1
    finally:
        ex.shutdown(wait=True)


def test_waiting_for_every_lane_waits_for_every_child() -> None:
    ex = ProcessExtractor(workers=2)
    try:
        assert ex.wait_ready(120, every_lane=True)
        assert ex.live == 2
    finally:
        ex.shutdown(wait=True)

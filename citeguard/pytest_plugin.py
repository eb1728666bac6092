"""pytest plugin: gate an agent on snapshots with one decorator.

Registered as the ``pytest11`` entry point ``citeguard``, so installing citeguard enables it.

``@pytest.mark.citeguard_snapshot`` (optionally ``case_id="..."``, ``record="none|new|all"``)
or the ``citeguard_snapshot`` fixture gives a test a :class:`~citeguard.snapshot.CaseSnapshot`:
``.store``, ``.mode`` and ``.case_id`` (the test's node id), plus ``.fetcher(factory)``,
``.search(...)``, ``.record_verdict(verdict)`` and ``.baseline()``. While the test runs it is
also :func:`citeguard.snapshot.current_snapshot`.

``--citeguard-record`` (the record modes of the common HTTP cassette plugins):

* ``none``: replay only. A search or fetch that was never recorded fails the test with
  :class:`~citeguard.errors.SnapshotMiss` naming the URL or query; nothing touches the network.
  The default when the ``CI`` environment variable is set.
* ``new``: cases the store has never recorded completely are recorded (live), the others
  replay. The default otherwise: the first run records, every later run replays.
* ``all``: every case is re-recorded, into one new version per session (a re-snapshot).

A case counts as recorded once its test passed in a recording run, so a test that failed while
recording is recorded again next time. ``--citeguard-store PATH`` (default
``tests/snapshots/citeguard.sqlite``, relative to the rootdir) picks the SQLite file; commit it.
Run re-snapshots without ``-n`` (pytest-xdist): each worker would begin its own version.

Async tests need no other plugin: an ``async def`` test that uses the marker or the fixture is
run by this plugin on an event loop of its own (``asyncio.run``) when nothing else runs it, so
pytest-asyncio is optional. Where pytest-asyncio runs a test (auto mode, or its marker), or
anyio/trio does (their markers), that plugin runs it as before. The plugin's own fixtures are
synchronous; async fixtures of your own still need an async plugin.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import pytest

from citeguard.errors import SnapshotError
from citeguard.snapshot import (
    CaseSnapshot,
    SnapshotMode,
    SnapshotStore,
    SQLiteSnapshotStore,
    prepare_snapshot,
)

T = TypeVar("T")

RECORD_MODES = ("none", "new", "all")
DEFAULT_STORE = "tests/snapshots/citeguard.sqlite"
MARKER = "citeguard_snapshot"

_STATE = pytest.StashKey["_PluginState"]()
_CALL_REPORT = pytest.StashKey[pytest.TestReport]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("citeguard", "citeguard snapshots")
    group.addoption(
        "--citeguard-record",
        choices=RECORD_MODES,
        default=None,
        help="none: replay only; new: record missing cases, replay the rest; all: re-record "
        "every case into a new version (default: none when $CI is set, else new)",
    )
    group.addoption(
        "--citeguard-store",
        default=None,
        metavar="PATH",
        help=f"the SQLite snapshot store (default: {DEFAULT_STORE})",
    )
    parser.addini("citeguard_store", f"the SQLite snapshot store (default: {DEFAULT_STORE})")
    parser.addini("citeguard_record", "default --citeguard-record mode")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(case_id=None, record=None): record this test's searches and fetches once, "
        "replay them after (see --citeguard-record)",
    )
    record = config.getoption("--citeguard-record") or config.getini("citeguard_record") or None
    if record is None:
        record = "none" if os.environ.get("CI") else "new"
    if record not in RECORD_MODES:
        raise pytest.UsageError(f"citeguard_record must be one of {RECORD_MODES}, not {record!r}")
    store = (
        config.getoption("--citeguard-store") or config.getini("citeguard_store") or DEFAULT_STORE
    )
    if str(store).startswith(("redis://", "rediss://", "unix://")):
        raise pytest.UsageError(
            "--citeguard-store takes an SQLite path; a Redis store binds to one event loop and "
            "pytest-asyncio gives each test its own"
        )
    path = Path(store)
    if not path.is_absolute():
        path = config.rootpath / path
    config.stash[_STATE] = _PluginState(path, record)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None:
        state.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[_CALL_REPORT] = report
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run an ``async def`` test that uses citeguard snapshots when no async plugin does: an
    async plugin that runs it has replaced ``obj`` with a synchronous wrapper by now."""
    test = pyfuncitem.obj
    if not inspect.iscoroutinefunction(test) or not _uses_snapshot(pyfuncitem):
        return None
    if any(pyfuncitem.get_closest_marker(m) is not None for m in _OTHER_RUNNERS):
        return None
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(test(**kwargs))
    return True


_OTHER_RUNNERS = ("anyio", "trio")


def _uses_snapshot(item: pytest.Item) -> bool:
    return item.get_closest_marker(MARKER) is not None or MARKER in getattr(
        item, "fixturenames", ()
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    state = config.stash.get(_STATE, None)
    if state is None:
        return None
    return f"citeguard snapshots: {state.path} (record={state.record})"


class _PluginState:
    """Per-session state: the store (opened on first use) and the refresh version."""

    def __init__(self, path: Path, record: str) -> None:
        self.path = path
        self.record = record
        self._store: SQLiteSnapshotStore | None = None
        self._refresh_version: int | None = None
        # Store calls from sync fixtures run on a loop of their own in this thread, so they
        # never touch (or close) the event loop pytest-asyncio gives the test.
        self._runner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="citeguard-plugin")

    def run(self, aw: Awaitable[T]) -> T:
        return self._runner.submit(asyncio.run, _awaited(aw)).result()

    def store(self, record: str) -> SnapshotStore:
        if self._store is None:
            if record == "none" and not self.path.exists():
                raise SnapshotError(
                    f"no snapshot store at {self.path}: record one with --citeguard-record=new"
                )
            self._store = SQLiteSnapshotStore(self.path, create=record != "none")
        return self._store

    def mode_for(self, store: SnapshotStore, case_id: str, record: str) -> SnapshotMode:
        if record == "none":
            return SnapshotMode.REPLAY
        if record == "all":
            if self._refresh_version is None:
                label = f"pytest --citeguard-record=all {datetime.now(UTC):%Y-%m-%d %H:%M}"
                self._refresh_version = self.run(
                    prepare_snapshot(store, SnapshotMode.REFRESH, label=label)
                )
            return SnapshotMode.REFRESH
        if self.run(store.has_case(case_id)):
            return SnapshotMode.REPLAY
        self.run(prepare_snapshot(store, SnapshotMode.RECORD, label="pytest"))
        return SnapshotMode.RECORD

    def close(self) -> None:
        try:
            if self._store is not None:
                self.run(self._store.close())
        finally:
            self._runner.shutdown(wait=True)


async def _awaited(aw: Awaitable[T]) -> T:  # asyncio.run wants a coroutine
    return await aw


@pytest.fixture
def citeguard_snapshot(request: pytest.FixtureRequest) -> Iterator[CaseSnapshot]:
    """This test's snapshot: record on the first run, replay after (see --citeguard-record)."""
    state = request.config.stash[_STATE]
    marker = request.node.get_closest_marker(MARKER)
    kwargs = marker.kwargs if marker is not None else {}
    case_id = str(kwargs.get("case_id") or request.node.nodeid)
    record = str(kwargs.get("record") or state.record)
    if record not in RECORD_MODES:
        raise pytest.UsageError(f"{MARKER}(record=...) must be one of {RECORD_MODES}")
    store = state.store(record)
    snap = CaseSnapshot(store=store, mode=state.mode_for(store, case_id, record), case_id=case_id)
    token = snap.activate()
    try:
        yield snap
    finally:
        CaseSnapshot.deactivate(token)
    report = request.node.stash.get(_CALL_REPORT, None)
    if snap.mode is not SnapshotMode.REPLAY and report is not None and report.passed:
        state.run(store.mark_case(case_id))


@pytest.fixture(autouse=True)
def _citeguard_snapshot_marker(request: pytest.FixtureRequest) -> None:
    # The marker alone enables the fixture, so a test needs no extra argument.
    if request.node.get_closest_marker(MARKER) is not None:
        request.getfixturevalue("citeguard_snapshot")

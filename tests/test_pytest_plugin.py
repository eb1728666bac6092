"""The pytest plugin, run for real with ``pytester`` against a real local web server.

Each scenario runs an inner pytest session (in process) whose tests fetch from an aiohttp
server on 127.0.0.1 (in a thread, so it answers while the inner session runs) through the
real ``Fetcher``, and then checks which mode each inner test ran in, what reached the server,
and what the store holds.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import socket
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

import citeguard.pytest_plugin
import citeguard.web.fetch  # imported here so in-process runs reuse it (faster)
from citeguard.snapshot import SQLiteSnapshotStore

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]


class _Site:
    """An aiohttp server on 127.0.0.1:<OS port> in its own thread, counting requests."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.revision = 1
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._ready = threading.Event()

    async def _handle(self, request: web.Request) -> web.Response:
        self.hits.append(request.path)
        name = request.match_info["name"]
        return web.Response(
            text=f"<html><p>{name} page, revision {self.revision}.</p></html>",
            content_type="text/html",
        )

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_get("/{name}", self._handle)
        runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._loop.run_until_complete(web.SockSite(runner, sock).start())
        self.port = sock.getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())
        self._loop.close()

    def start(self) -> None:
        self._thread.start()
        assert self._ready.wait(10), "test site did not start"

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture(scope="module")
def site() -> Iterator[_Site]:
    s = _Site()
    s.start()
    try:
        yield s
    finally:
        s.stop()


_CONFTEST = '''
import asyncio, json, os, socket
import pytest
from citeguard.policy import FetchPolicy
from citeguard.snapshot import current_snapshot
from citeguard.web.fetch import Fetcher

BASE = os.environ["CG_PLUGIN_BASE"]
POLICY = FetchPolicy(allow_private_addresses=True, connect_timeout=2, url_timeout=5,
                     answer_deadline=10, retries=0)

def make_fetcher():
    return Fetcher(POLICY)

def note(mode):
    with open(os.environ["CG_PLUGIN_LOG"], "a") as f:
        f.write(json.dumps([os.environ["PYTEST_CURRENT_TEST"].split(" ")[0], mode]) + "\\n")

@pytest.fixture(autouse=True)
def no_network_in_replay(monkeypatch):
    """In replay runs every connection attempt fails the test loudly."""
    if os.environ.get("CG_PLUGIN_NO_NET") != "1":
        yield
        return
    def refuse(*a, **k):
        raise AssertionError("network access during replay")
    async def refuse_async(*a, **k):
        refuse()
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "create_connection", refuse_async)
    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "getaddrinfo", refuse_async)
    yield
'''

_TESTS = """
import pytest
from conftest import BASE, make_fetcher, note
from citeguard.snapshot import current_snapshot

@pytest.mark.citeguard_snapshot
async def test_story():
    snap = current_snapshot()
    note(snap.mode.value)
    f = snap.fetcher(make_fetcher)
    r = await f.fetch(BASE + "/story")
    await f.aclose()
    assert r.status == "ok" and b"story page" in r.body

    async def search():
        return {"results": [{"url": BASE + "/story", "title": "Story"}]}

    got = await snap.search("web", "the story", search)
    assert got["results"][0]["url"] == BASE + "/story"

async def test_fixture(citeguard_snapshot):
    note(citeguard_snapshot.mode.value)
    assert citeguard_snapshot.case_id.endswith("test_cases.py::test_fixture")
    f = citeguard_snapshot.fetcher(make_fetcher)
    r = await f.fetch(BASE + "/other")
    await f.aclose()
    assert b"other page" in r.body

def test_plain():
    from citeguard.snapshot import current_snapshot
    assert current_snapshot() is None  # no marker, no fixture: no snapshot
"""

_NEW_TEST = """
import pytest
from conftest import BASE, make_fetcher, note

@pytest.mark.citeguard_snapshot(case_id="shared-case")
async def test_added_later(citeguard_snapshot):
    note(citeguard_snapshot.mode.value)
    assert citeguard_snapshot.case_id == "shared-case"
    f = citeguard_snapshot.fetcher(make_fetcher)
    r = await f.fetch(BASE + "/later")
    await f.aclose()
    assert b"later page" in r.body
"""

_FLAKY = """
import os, pytest
from conftest import BASE, make_fetcher, note

@pytest.mark.citeguard_snapshot
async def test_flaky(citeguard_snapshot):
    note(citeguard_snapshot.mode.value)
    f = citeguard_snapshot.fetcher(make_fetcher)
    await f.fetch(BASE + "/flaky")
    await f.aclose()
    assert os.environ.get("CG_FLAKY_PASS") == "1"
"""


def _plugin_args() -> list[str]:
    # Installed (pip install -e .), the entry point loads the plugin; before that, load it by
    # module name. Both at once would register it twice.
    eps = importlib.metadata.entry_points(group="pytest11", name="citeguard")
    return [] if eps else ["-p", "citeguard.pytest_plugin"]


class _Inner:
    def __init__(self, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, site: _Site):
        self.pytester = pytester
        self.monkeypatch = monkeypatch
        self.log = pytester.path / "modes.jsonl"
        monkeypatch.setenv("CG_PLUGIN_BASE", f"http://127.0.0.1:{site.port}")
        monkeypatch.setenv("CG_PLUGIN_LOG", str(self.log))
        monkeypatch.delenv("CI", raising=False)
        pytester.makeini(
            "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
        )
        pytester.makeconftest(_CONFTEST)
        pytester.makepyfile(test_cases=_TESTS)

    def run(self, *args: str, no_net: bool = False) -> tuple[pytest.RunResult, dict[str, str]]:
        self.monkeypatch.setenv("CG_PLUGIN_NO_NET", "1" if no_net else "0")
        self.log.write_text("")
        result = self.pytester.runpytest(
            *_plugin_args(), "-p", "no:cacheprovider", "-p", "no:hypothesispytest", *args
        )
        modes = {}
        for line in self.log.read_text().splitlines():
            node, mode = json.loads(line)
            modes[node.split("::")[-1]] = mode
        return result, modes

    def versions(self, path: Path | None = None) -> list[tuple[int, str | None]]:
        async def read() -> list[tuple[int, str | None]]:
            store = SQLiteSnapshotStore(
                path or self.pytester.path / "tests/snapshots/citeguard.sqlite"
            )
            try:
                return [(v.version, v.label) for v in await store.list_versions()]
            finally:
                await store.close()

        return asyncio.run(read())


def test_record_once_then_replay_offline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, site: _Site
) -> None:
    inner = _Inner(pytester, monkeypatch, site)
    hits = len(site.hits)

    result, modes = inner.run("--citeguard-record=new")
    result.assert_outcomes(passed=3)
    assert modes == {"test_story": "record", "test_fixture": "record"}
    assert len(site.hits) == hits + 2
    assert (pytester.path / "tests/snapshots/citeguard.sqlite").exists()  # default location
    result.stdout.fnmatch_lines(["citeguard snapshots: *citeguard.sqlite (record=new)"])

    # replay: no network at all (socket guard), nothing reaches the site
    for _ in range(2):
        result, modes = inner.run("--citeguard-record=none", no_net=True)
        result.assert_outcomes(passed=3)
        assert modes == {"test_story": "replay", "test_fixture": "replay"}
    assert len(site.hits) == hits + 2

    # a new, never-recorded case fails in replay with the URL named; the others still pass
    pytester.makepyfile(test_new=_NEW_TEST)
    result, modes = inner.run("--citeguard-record=none", no_net=True)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*SnapshotMiss*no recorded fetch (GET) for *later*"])
    assert len(site.hits) == hits + 2

    # new: records only the missing case, replays the rest
    result, modes = inner.run("--citeguard-record=new")
    result.assert_outcomes(passed=4)
    assert modes == {"test_story": "replay", "test_fixture": "replay", "test_added_later": "record"}
    assert site.hits[hits + 2 :] == ["/later"]
    assert inner.versions() == [(1, "pytest")]

    # all: a re-snapshot into a new version, picking up the site's change
    site.revision = 2
    result, modes = inner.run("--citeguard-record=all")
    result.assert_outcomes(passed=4)
    assert set(modes.values()) == {"refresh"}
    versions = inner.versions()
    assert [v for v, _ in versions] == [1, 2]
    assert (versions[1][1] or "").startswith("pytest --citeguard-record=all")

    async def changed() -> set[str]:
        store = SQLiteSnapshotStore(pytester.path / "tests/snapshots/citeguard.sqlite")
        try:
            return {p.url.rsplit("/", 1)[1] for p in (await store.diff(1, 2)).pages}
        finally:
            await store.close()

    assert asyncio.run(changed()) == {"story", "other", "later"}


def test_a_case_that_fails_while_recording_is_recorded_again(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, site: _Site
) -> None:
    inner = _Inner(pytester, monkeypatch, site)
    pytester.makepyfile(test_flaky=_FLAKY)
    store = pytester.path / "snaps" / "s.sqlite"
    result, modes = inner.run("--citeguard-record=new", f"--citeguard-store={store}", "-k", "flaky")
    result.assert_outcomes(failed=1, deselected=3)
    assert modes == {"test_flaky": "record"}
    monkeypatch.setenv("CG_FLAKY_PASS", "1")
    result, modes = inner.run("--citeguard-record=new", f"--citeguard-store={store}", "-k", "flaky")
    result.assert_outcomes(passed=1, deselected=3)
    assert modes == {"test_flaky": "record"}  # not marked recorded the first time
    result, modes = inner.run("--citeguard-record=new", f"--citeguard-store={store}", "-k", "flaky")
    assert modes == {"test_flaky": "replay"}
    assert inner.versions(store) == [(1, "pytest")]


def test_default_mode_is_new_locally_and_none_in_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, site: _Site
) -> None:
    inner = _Inner(pytester, monkeypatch, site)
    # CI with no store: a clear error, and no store file appears
    monkeypatch.setenv("CI", "true")
    result, _ = inner.run("-k", "story")
    result.assert_outcomes(errors=1, deselected=2)
    result.stdout.fnmatch_lines(["*no snapshot store at*record one with --citeguard-record=new*"])
    assert not (pytester.path / "tests/snapshots/citeguard.sqlite").exists()
    # locally the first run records ...
    monkeypatch.delenv("CI")
    result, modes = inner.run("-k", "story")
    result.assert_outcomes(passed=1, deselected=2)
    assert modes == {"test_story": "record"}
    # ... and CI replays it
    monkeypatch.setenv("CI", "1")
    result, modes = inner.run("-k", "story", no_net=True)
    result.assert_outcomes(passed=1, deselected=2)
    assert modes == {"test_story": "replay"}


def test_bad_options_are_usage_errors(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, site: _Site
) -> None:
    inner = _Inner(pytester, monkeypatch, site)
    result, _ = inner.run("--citeguard-record=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result, _ = inner.run("--citeguard-store=redis://127.0.0.1:6379/0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*takes an SQLite path*"])


def test_marker_is_registered_and_the_entry_point_declared() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["pytest11"] == {"citeguard": "citeguard.pytest_plugin"}
    plugin = citeguard.pytest_plugin
    assert callable(plugin.pytest_addoption) and callable(plugin.citeguard_snapshot)


_NO_ASYNC_PLUGIN = """
import json, os
import pytest

def test_no_async_plugin_is_loaded(request):
    assert not request.config.pluginmanager.has_plugin("asyncio")

async def test_not_a_citeguard_test():
    # an async test that uses no snapshot is not the citeguard plugin's to run
    with open(os.environ["CG_PLUGIN_LOG"], "a") as f:
        f.write(json.dumps(["test_not_a_citeguard_test", "ran"]) + "\\n")
"""


def test_async_tests_run_without_pytest_asyncio(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, site: _Site
) -> None:
    inner = _Inner(pytester, monkeypatch, site)
    pytester.makeini("[pytest]\n")  # no asyncio_mode: pytest-asyncio is not there
    pytester.makepyfile(test_plain_pytest=_NO_ASYNC_PLUGIN)
    hits = len(site.hits)
    args = ["-p", "no:asyncio", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]

    def run(*more: str, no_net: bool = False) -> tuple[pytest.RunResult, dict[str, str]]:
        monkeypatch.setenv("CG_PLUGIN_NO_NET", "1" if no_net else "0")
        inner.log.write_text("")
        # a real pytest process, so pytest-asyncio (installed here) is surely not loaded
        result = pytester.runpytest_subprocess(*_plugin_args(), *args, *more)
        modes = dict(json.loads(line) for line in inner.log.read_text().splitlines())
        return result, {k.split("::")[-1]: v for k, v in modes.items()}

    result, modes = run("--citeguard-record=new", "-k", "not not_a_citeguard")
    result.assert_outcomes(passed=4, deselected=1)
    assert modes == {"test_story": "record", "test_fixture": "record"}
    assert len(site.hits) == hits + 2
    result, modes = run("--citeguard-record=none", "-k", "not not_a_citeguard", no_net=True)
    result.assert_outcomes(passed=4, deselected=1)
    assert modes == {"test_story": "replay", "test_fixture": "replay"}
    assert len(site.hits) == hits + 2
    # pytest's own answer to an async test no plugin runs, untouched by citeguard's
    result, modes = run("-k", "not_a_citeguard")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*async def functions are not natively supported*"])
    assert modes == {}


def test_pytest_asyncio_in_strict_mode_leaves_unmarked_snapshot_tests_to_citeguard(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, site: _Site
) -> None:
    inner = _Inner(pytester, monkeypatch, site)
    pytester.makeini(
        "[pytest]\nasyncio_mode = strict\nasyncio_default_fixture_loop_scope = function\n"
    )
    # one test pytest-asyncio runs (its marker), the others unmarked: run by citeguard
    pytester.makepyfile(
        test_marked=_NEW_TEST.replace(
            "@pytest.mark.citeguard_snapshot(",
            "@pytest.mark.asyncio\n@pytest.mark.citeguard_snapshot(",
        )
    )
    result, modes = inner.run("--citeguard-record=new")
    result.assert_outcomes(passed=4)
    assert modes == {"test_story": "record", "test_fixture": "record", "test_added_later": "record"}

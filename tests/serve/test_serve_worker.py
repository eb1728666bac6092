"""The guard loop (serve/worker.py) and the tuned runtime (citeguard/runtime.py): work handed to
the guard loop comes back with its result, its error or its cancellation; a stream handed over
is closed there when its reader stops; the HTTP loop answers while the guard loop is busy; the
tuned runtime's switches are applied and restored, and its full collections run only when due."""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from prometheus_client import CollectorRegistry, Histogram

from citeguard.runtime import FULL_GC_EVERY, SWITCH_INTERVAL, Runtime
from citeguard.serve.worker import GuardLoop
from serve.answers import good
from serve.servers import KEY, FakeUpstream, Pages, Service, make_settings

AUTH = {"authorization": f"Bearer {KEY}"}


@pytest.fixture
def worker() -> Iterator[GuardLoop]:
    w = GuardLoop()
    w.start()
    yield w
    asyncio.run(w.stop())


def test_result_and_error_come_back(worker: GuardLoop) -> None:
    async def on_guard_loop() -> str:
        return threading.current_thread().name

    async def fails() -> None:
        raise ValueError("from the guard loop")

    async def main() -> None:
        assert await worker.run(on_guard_loop()) == "citeguard-guard-loop"
        with pytest.raises(ValueError, match="from the guard loop"):
            await worker.run(fails())

    asyncio.run(main())


def test_cancelling_the_caller_cancels_the_work(worker: GuardLoop) -> None:
    started = threading.Event()
    cancelled = threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def main() -> None:
        task = asyncio.create_task(worker.run(forever()))
        await asyncio.to_thread(started.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await asyncio.to_thread(cancelled.wait, 30)

    asyncio.run(main())


def test_a_stream_is_closed_on_the_guard_loop_when_its_reader_stops(worker: GuardLoop) -> None:
    closed_on: list[str] = []

    async def numbers() -> AsyncIterator[int]:
        try:
            for i in range(1000):
                yield i
        finally:
            closed_on.append(threading.current_thread().name)

    async def main() -> list[int]:
        got = []
        items = worker.iterate(numbers())
        async for n in items:
            got.append(n)
            if n == 2:
                break
        await items.aclose()  # type: ignore[attr-defined]
        return got

    assert asyncio.run(main()) == [0, 1, 2]
    assert closed_on == ["citeguard-guard-loop"]


def test_a_stream_error_reaches_the_reader(worker: GuardLoop) -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield b"a"
        raise RuntimeError("upstream went away")

    async def main() -> list[bytes]:
        got = []
        async for chunk in worker.iterate(broken()):
            got.append(chunk)
        return got

    with pytest.raises(RuntimeError, match="upstream went away"):
        asyncio.run(main())


def test_the_http_loop_answers_while_the_guard_loop_is_busy(
    upstream_server: FakeUpstream, pages: Pages
) -> None:
    """The guard loop held by a blocked callback: /healthz and /metrics still answer; a check
    waits for it and then completes."""
    service = Service(make_settings(upstream_server))
    release = threading.Event()
    held = threading.Event()

    def hold() -> None:
        held.set()
        release.wait(60)

    try:
        service.app.state.worker.loop.call_soon_threadsafe(hold)
        assert held.wait(30)
        with httpx.Client(timeout=30) as client:
            assert client.get(service.url + "/healthz").status_code == 200
            metrics = client.get(service.url + "/metrics", headers=AUTH).text
            assert "citeguard_guard_loop_lag_seconds_bucket" in metrics
            assert "citeguard_event_loop_lag_seconds_bucket" in metrics
            release.set()
            r = client.post(
                service.url + "/v1/check",
                json={"answer": good(pages), "question": "How tall is the Eiffel Tower?"},
                headers=AUTH,
            )
        assert r.status_code == 200, r.text
        assert r.json()["passed"] is True
    finally:
        release.set()
        service.close()


def _runtime(busy: list[bool]) -> tuple[Runtime, Histogram]:
    pauses = Histogram("t_gc_full_seconds", "test", registry=CollectorRegistry())
    return Runtime(busy=lambda: busy[0], on_full=pauses.observe), pauses


def test_tuned_runtime_is_applied_and_restored() -> None:
    thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
    runtime, _ = _runtime([False])
    runtime.apply()
    try:
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL)
        assert gc.get_threshold()[:2] == thresholds[:2]
        assert gc.get_threshold()[2] > 10**6  # no automatic full collection
        assert gc.get_freeze_count() > 0
    finally:
        runtime.restore()
    assert gc.get_threshold() == thresholds
    assert sys.getswitchinterval() == pytest.approx(interval)
    assert gc.get_freeze_count() == 0


def test_full_collections_run_when_idle_or_due() -> None:
    busy = [True]
    runtime, pauses = _runtime(busy)
    assert runtime.collect_if_due() is False  # not applied: the interpreter's own collector
    runtime.apply()
    try:
        gc.collect(1)  # a young collection: gen 2 has something pending
        assert runtime.collect_if_due() is False  # busy, and not due yet
        busy[0] = False
        gc.collect(1)
        assert runtime.collect_if_due() is True  # idle with something pending
        assert runtime.collect_if_due() is False  # nothing pending since
        busy[0] = True
        runtime._last_full -= FULL_GC_EVERY + 1
        assert runtime.collect_if_due() is True  # busy for longer than FULL_GC_EVERY
        count = next(
            s.value for s in pauses.collect()[0].samples if s.name == "t_gc_full_seconds_count"
        )
        assert count == 2
    finally:
        runtime.restore()


def test_young_collections_run_as_the_interpreter_would_choose_them() -> None:
    """Under load every object freed lowers the count that starts a young collection, so the
    young generation grew to 50,000-98,000 objects before one ran (15-90 ms each): the tuned
    runtime runs them itself, gen 1 once enough gen-0 collections have run."""
    runtime, _ = _runtime([True])
    assert runtime.collect_young() == -1  # not applied: the interpreter's own collector
    runtime.apply()
    try:
        threshold1 = gc.get_threshold()[1]
        young = [[i] for i in range(5_000)]
        gc.collect(1)  # counts from zero: no gen-0 collection since the last gen-1 one
        young.extend([i] for i in range(500))  # young objects, fewer than the threshold
        assert gc.get_count()[0] > 0
        generations = [runtime.collect_young() for _ in range(threshold1 + 1)]
        assert generations[:threshold1] == [0] * threshold1
        assert generations[threshold1] == 1  # the gen-0 collections since the last reached it
        assert gc.get_count()[0] < 100
        assert young  # kept alive through the collections
    finally:
        runtime.restore()


async def test_the_collector_runs_young_collections_on_a_timer() -> None:
    runtime, _ = _runtime([True])
    ran = asyncio.Event()
    started_by_collector: list[int] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] < 2:
            started_by_collector.append(info["generation"])
            if len(started_by_collector) >= 3:
                ran.set()

    runtime.apply()
    gc.callbacks.append(on_gc)
    task = asyncio.create_task(runtime.collector())
    try:
        await asyncio.wait_for(ran.wait(), timeout=30)  # three ticks of YOUNG_EVERY
    finally:
        task.cancel()
        gc.callbacks.remove(on_gc)
        runtime.restore()
    assert set(started_by_collector) <= {0, 1}

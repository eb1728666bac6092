"""Pacing on the event loop: how many requests start per turn (:class:`_StartPacer`) and
per-URL deadlines sharing one timer a slice (:class:`_Deadlines`)."""

from __future__ import annotations

import asyncio
import math
from collections import deque
from typing import Any

_TICK = 0.005  # per-URL deadlines falling in one such slice share one loop timer (seconds)


# --------------------------------------------------------------------------------------------
# Fetcher
# --------------------------------------------------------------------------------------------


class _StartPacer:
    """How many requests start in one turn of the event loop: ``burst`` when none is waiting,
    then ``per_turn`` a turn, in order, until the queue is empty.

    Unpaced, a fetch of 200 URLs opens 200 connections in one turn (each task runs until it
    waits on its socket) and the loop polls none of them before all 200 are under way: measured,
    the first request went out ~55 ms after the start, and every one only after all the
    connects. Paced, the loop polls between batches, so early requests are sent (and their
    connections come back to the pool) while later ones are still starting. A small answer's
    requests (up to ``burst``) all start at once, as before.
    """

    __slots__ = ("_allowed", "_burst", "_loop", "_per_turn", "_queue", "_tick_due", "_used")

    def __init__(self, loop: asyncio.AbstractEventLoop, per_turn: int, burst: int) -> None:
        self._loop = loop
        self._per_turn = per_turn
        self._burst = burst
        self._allowed = burst
        self._queue: deque[asyncio.Future[None]] = deque()
        self._used = 0
        self._tick_due = False

    def ready(self) -> bool:
        """True when a request may start now (and counts it); else wait for :meth:`turn`."""
        if self._used < self._allowed and not self._queue:
            self._used += 1
            self._schedule()
            return True
        return False

    def turn(self) -> asyncio.Future[None]:
        """A future that completes when this request's turn comes (FIFO)."""
        fut: asyncio.Future[None] = self._loop.create_future()
        self._queue.append(fut)
        self._schedule()
        return fut

    def _schedule(self) -> None:
        if not self._tick_due:
            self._tick_due = True
            self._loop.call_soon(self._tick)

    def _tick(self) -> None:
        self._tick_due = False
        self._used = 0
        queue = self._queue
        self._allowed = self._per_turn if queue else self._burst
        while queue and self._used < self._allowed:
            fut = queue.popleft()
            if not fut.done():  # a cancelled waiter gives its place up
                fut.set_result(None)
                self._used += 1
        if queue or self._used:
            self._schedule()


class _Deadlines:
    """Per-URL time limits on one loop, with one timer for all deadlines in a ``_TICK`` slice.

    What ``asyncio.timeout`` does per fetch (cancel the task when its time is up, and tell that
    cancellation from any other), with the timers shared: a fetch of 2,000 URLs starts them
    within a few milliseconds, so a handful of timers replace 2,000 (each with its own handle,
    context copy and heap entry, all of them objects the GC walks while the fetches run). A
    deadline fires at most ``_TICK`` late, well inside ``_GRACE``.
    """

    __slots__ = ("_expired", "_loop", "_slices")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._slices: dict[int, set[asyncio.Task[Any]]] = {}
        self._expired: set[asyncio.Task[Any]] = set()

    def add(self, task: asyncio.Task[Any], seconds: float) -> int:
        """Cancel ``task`` in ``seconds`` (rounded up to the slice); returns its slice."""
        key = math.ceil((self._loop.time() + seconds) / _TICK)
        tasks = self._slices.get(key)
        if tasks is None:
            tasks = self._slices[key] = set()
            self._loop.call_at(key * _TICK, self._expire, key)
        tasks.add(task)
        return key

    def discard(self, task: asyncio.Task[Any], key: int) -> bool:
        """``task`` is done with its deadline; True when the deadline cancelled it."""
        tasks = self._slices.get(key)
        if tasks is not None:
            tasks.discard(task)
        if task in self._expired:
            self._expired.discard(task)
            return True
        return False

    def _expire(self, key: int) -> None:
        for task in self._slices.pop(key, ()):
            if not task.done():
                self._expired.add(task)
                task.cancel()

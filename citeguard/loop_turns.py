"""Sharing the event loop's turns among many checks' CPU-bound steps (:class:`LoopTurns`).

A turn of an asyncio loop runs every callback that was ready when it began, then polls its
timers and sockets. Under load (``citeguard serve`` with 200 streams in flight) hundreds of
checks are ready in the same turn, each with a few milliseconds of Python to run (a page's
claims verified, a verdict rolled up, a stream's text parsed): one turn took 250-700 ms, and
every timer, socket read and hand-over to the HTTP loop waited that long. Each check's own
budgets (``Turns``, the inline verification budget) bound one check, not two hundred.

:class:`LoopTurns` is one budget for the whole loop, shared by every check of a ``Guard``: a
step that awaits :meth:`LoopTurns.turn` before its CPU work goes on at once while the gated
steps of this turn have run for less than ``budget`` seconds and nobody is waiting; otherwise
it waits its turn, first come first served. Each later turn lets waiters go by how many steps
of the measured cost fit in the budget (at least one), so a turn runs about ``budget`` of gated
work and then lets the loop poll: backpressure that keeps the checks' order, not an unbounded
pile-up inside one turn.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

__all__ = ["LoopTurns"]

#: The gated CPU work one turn of the loop runs before the rest wait for the next.
TURN_BUDGET_S = 0.01


class LoopTurns:
    """One loop's budget of gated work a turn; see the module doc. Not thread-safe: one event
    loop uses it (a new loop, e.g. ``asyncio.run`` again, starts afresh)."""

    __slots__ = (
        "_admitted",
        "_budget",
        "_cost",
        "_loop",
        "_scheduled",
        "_started",
        "_waiting",
    )

    def __init__(self, budget: float = TURN_BUDGET_S) -> None:
        self._budget = budget
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._started: float | None = None  # when this turn's first gated step began
        self._admitted = 0  # gated steps let go since then
        self._cost = budget  # the measured cost of a gated step (moving average)
        self._scheduled = False

    @property
    def waiting(self) -> int:
        """Steps waiting for a turn now."""
        return len(self._waiting)

    async def turn(self) -> None:
        """Return when this step may run its CPU work: at once while the turn has budget
        left and nobody waits, else in a later turn, in order of arrival."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._waiting, self._started, self._scheduled = loop, deque(), None, False
            self._admitted = 0
        if not self._waiting:
            now = time.perf_counter()
            if self._started is None:
                self._started, self._admitted = now, 1
                self._schedule()
                return
            if now - self._started < self._budget:
                self._admitted += 1
                return
        fut: asyncio.Future[None] = loop.create_future()
        self._waiting.append(fut)
        self._schedule()
        await fut

    def _schedule(self) -> None:
        if not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._next_turn)

    def _next_turn(self) -> None:
        """At the start of the next turn (after what the last one let go has run): measure a
        step's cost, then let as many waiters go as fit in the budget."""
        self._scheduled = False
        now = time.perf_counter()
        if self._started is not None and self._admitted:
            per_step = (now - self._started) / self._admitted
            self._cost = 0.5 * self._cost + 0.5 * per_step
        self._started, self._admitted = None, 0
        room = max(1, int(self._budget / max(self._cost, 1e-6)))
        while self._waiting and self._admitted < room:
            fut = self._waiting.popleft()
            if fut.done():  # a cancelled waiter gives its place up
                continue
            fut.set_result(None)
            self._admitted += 1
        if self._admitted:
            # they run in the next turn, before this callback's next run measures them
            self._started = time.perf_counter()
            self._schedule()

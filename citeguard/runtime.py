"""The interpreter tuned for a long-running guard: process-wide switches, so an application
opts in (``Runtime(...).apply()`` once warmed up); ``citeguard serve`` does when the process is
its own (``--runtime tuned``, its default).

Two process-wide costs stall an event loop whatever the loop runs, both measured in
``citeguard serve`` with 200 concurrent streams (``benchmarks/bench_serve.py``) and in the
hostile-input benchmark (``python -m benchmarks --only stalls``):

* **The GIL hand-over.** Each socket write or ``select`` on the HTTP loop gives up the GIL and
  then waits for it: up to ``sys.getswitchinterval()`` (5 ms) while the guard thread computes,
  so an HTTP loop turn with a hundred writes waited 0.5 s. The interval is set to 0.1 ms.
* **Full garbage collections.** A gen-2 collection walks every tracked object with the GIL
  held, whichever thread triggers it: 60-170 ms with 200 streams in flight, 50-100 ms for one
  2,000-citation answer (a small process holds ~63,000 objects once citeguard is imported: a
  ~16 ms walk here). After warm-up, start-up's objects are frozen (``gc.freeze()``: modules,
  the model) and automatic gen-2 collections are off; young collections (gen 0 and 1) run
  every ``YOUNG_EVERY`` seconds as well as when the interpreter starts them (see
  :meth:`Runtime.collect_young`), and a full collection runs when no check is in flight
  (``busy()``, asked every second by :meth:`Runtime.collector`) and at least every
  ``FULL_GC_EVERY`` seconds under constant load, so cyclic garbage that outlives the young
  generations is still freed.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from collections.abc import Callable
from typing import Literal

__all__ = ["FULL_GC_EVERY", "SWITCH_INTERVAL", "YOUNG_EVERY", "Runtime", "RuntimeMode"]

RuntimeMode = Literal["tuned", "default"]

SWITCH_INTERVAL = 0.0001
FULL_GC_EVERY = 60.0
YOUNG_EVERY = 0.02
_IDLE_CHECK = 1.0
_NO_AUTOMATIC_GEN2 = 1_000_000_000


class Runtime:
    """The tuning of one process: ``apply`` after warm-up, ``restore`` at shutdown,
    ``collector`` (a task) runs the full collections."""

    def __init__(
        self,
        *,
        busy: Callable[[], bool] = lambda: False,
        on_full: Callable[[float], None] | None = None,
    ) -> None:
        """``busy()``: whether work is in flight (no full collection then, unless one is due);
        ``on_full(seconds)``: told of each full collection run."""
        self._busy = busy
        self._on_full = on_full
        self._saved: tuple[tuple[int, int, int], float] | None = None
        self._last_full = time.monotonic()

    def apply(self) -> None:
        if self._saved is not None:
            return
        self._saved = (gc.get_threshold(), sys.getswitchinterval())
        gc.collect()
        gc.freeze()
        t0, t1, _ = gc.get_threshold()
        gc.set_threshold(t0, t1, _NO_AUTOMATIC_GEN2)
        sys.setswitchinterval(SWITCH_INTERVAL)
        self._last_full = time.monotonic()

    def restore(self) -> None:
        if self._saved is None:
            return
        thresholds, interval = self._saved
        gc.set_threshold(*thresholds)
        sys.setswitchinterval(interval)
        gc.unfreeze()
        self._saved = None

    def collect_if_due(self) -> bool:
        """Run a full collection when none is running automatically and one is due: nothing is
        in flight and young collections promoted objects since the last, or ``FULL_GC_EVERY``
        has passed. Whether it ran."""
        if self._saved is None:
            return False
        now = time.monotonic()
        idle = not self._busy() and gc.get_count()[2] > 0
        if not idle and now - self._last_full < FULL_GC_EVERY:
            return False
        t0 = time.perf_counter()
        gc.collect()
        if self._on_full is not None:
            self._on_full(time.perf_counter() - t0)
        self._last_full = time.monotonic()
        return True

    def collect_young(self) -> int:
        """One young collection, the one the interpreter would run (generation 1 once enough
        generation-0 collections ran since the last); the generation collected, -1 when not
        applied.

        The interpreter starts a young collection when allocations minus deallocations pass a
        threshold (700), and every object freed lowers that count, old ones included. Under load
        a process frees about as much as it allocates, so the count stays low while the young
        generation grows: measured with 200 checks in flight, 50,000-98,000 young objects when
        a collection finally ran, 15-90 ms each, with nothing to free. Run on a timer, each one
        walks what the last ``YOUNG_EVERY`` seconds left."""
        if self._saved is None:
            return -1
        threshold1 = gc.get_threshold()[1]
        generation = 1 if gc.get_count()[1] >= threshold1 else 0
        gc.collect(generation)
        return generation

    async def collector(self) -> None:
        """Until cancelled: :meth:`collect_young` every ``YOUNG_EVERY`` seconds and
        :meth:`collect_if_due` every second."""
        last = time.monotonic()
        while True:
            await asyncio.sleep(YOUNG_EVERY)
            self.collect_young()
            now = time.monotonic()
            if now - last >= _IDLE_CHECK:
                last = now
                self.collect_if_due()

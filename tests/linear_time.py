"""Linear-time checks that hold on a loaded machine (CI runs on a busy 2-core box).

The work is timed in this thread's CPU time (``time.thread_time``: time the scheduler gives to
other processes is not counted), the best of several runs, at three sizes: ``n``, ``10 n`` and
``100 n``. Over those two decades linear work grows about 100x and quadratic work about
10,000x; :func:`assert_linear` allows up to 1,000x (a growth exponent of 1.5), a margin of ten
either way, where one wall-clock ratio over a single decade (10x against 100x) left a factor
of about three and failed under load (36x for 10x the input, limit 35).
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: the largest growth allowed over 100 times the input (linear: ~100, quadratic: ~10,000)
LIMIT_100X = 1000.0


def cpu_best(fn: Callable[[str], object], text: str, repeats: int) -> float:
    """The least CPU time (seconds, this thread) of ``repeats`` calls of ``fn(text)``."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.thread_time()
        fn(text)
        best = min(best, time.thread_time() - t0)
    return best


def repeat_to(unit: str, size: int) -> str:
    """``unit`` repeated to exactly ``size`` characters."""
    return (unit * (size // len(unit) + 1))[:size]


def growth(fn: Callable[[str], object], unit: str, base: int = 10_000) -> tuple[float, float]:
    """How much more CPU time ``fn`` takes for 10x and for 100x the input (``base`` chars)."""
    t1 = cpu_best(fn, repeat_to(unit, base), 7)
    t10 = cpu_best(fn, repeat_to(unit, 10 * base), 5)
    t100 = cpu_best(fn, repeat_to(unit, 100 * base), 3)
    floor = max(t1, 1e-6)
    return t10 / floor, t100 / floor


def assert_linear(fn: Callable[[str], object], unit: str, base: int = 10_000) -> None:
    """Fail when ``fn``'s CPU time over ``unit`` repeated grows faster than about linearly."""
    r10, r100 = growth(fn, unit, base)
    assert r100 < LIMIT_100X, (
        f"{r10:.0f}x the CPU time for 10x the input, {r100:.0f}x for 100x "
        f"(linear: ~10x and ~100x; quadratic: ~100x and ~10,000x)"
    )

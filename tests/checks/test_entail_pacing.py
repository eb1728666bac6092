"""The local entailer's worker lets the event loop have the GIL about once a millisecond, not
after every evidence window (each yield hands the GIL over and, on a busy machine, the core)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import citeguard.checks.entail.windows as windows
from citeguard.checks.entail.local import support_input
from citeguard.checks.entail.windows import PACE_SECONDS, Pacer
from citeguard.policy import EntailmentPolicy


@pytest.fixture
def yields(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    count = [0]

    def counted() -> None:
        count[0] += 1

    monkeypatch.setattr(windows, "_yield_gil", counted)
    yield count


def test_a_pacer_yields_once_its_interval_has_passed(yields: list[int]) -> None:
    now = [0.0]
    pace = Pacer(clock=lambda: now[0])
    for _ in range(50):  # 50 steps inside one interval: no yield
        now[0] += PACE_SECONDS / 100
        pace()
    assert yields[0] == 0
    now[0] += PACE_SECONDS
    pace()
    assert yields[0] == 1
    pace()  # the interval starts again after a yield
    assert yields[0] == 1
    now[0] += 2 * PACE_SECONDS
    pace()
    assert yields[0] == 2


def test_support_input_paces_between_its_windows(yields: list[int]) -> None:
    policy = EntailmentPolicy(window_chars=200)
    evidence = " ".join(f"Sentence {i} says the harbour moved {i} boxes." for i in range(60))
    steps = [0]

    def step() -> None:
        steps[0] += 1

    got = support_input("The harbour moved 7 boxes.", evidence, policy, pace=step)
    assert got is not None
    assert steps[0] > 1  # once a window, through the given pace
    assert yields[0] == 0  # and never the unpaced yield

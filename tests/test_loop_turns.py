"""LoopTurns: one budget of CPU work a turn of the event loop, shared by every check."""

from __future__ import annotations

import asyncio
import time

from citeguard.loop_turns import LoopTurns


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def _count_turns(stop: asyncio.Event, log: list[int], marks: list[int]) -> None:
    """Ticks once a turn (a callback that reschedules itself runs once per turn), writing how
    many gated steps ran since the last tick."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def tick() -> None:
        log.append(len(marks))
        marks.clear()
        if stop.is_set():
            done.set_result(None)
        else:
            loop.call_soon(tick)

    loop.call_soon(tick)
    await done


async def test_steps_beyond_the_budget_wait_for_later_turns() -> None:
    turns = LoopTurns(budget=0.01)
    stop = asyncio.Event()
    per_turn: list[int] = []
    marks: list[int] = []

    async def step(i: int) -> None:
        await turns.turn()
        marks.append(i)
        _spin(0.002)

    ticker = asyncio.ensure_future(_count_turns(stop, per_turn, marks))
    await asyncio.sleep(0)
    await asyncio.gather(*(step(i) for i in range(60)))
    stop.set()
    await ticker
    # without the gate all 60 steps (120 ms) run in one turn; with it, about 10 ms a turn
    assert sum(per_turn) == 60
    assert max(per_turn) <= 8
    assert turns.waiting == 0


async def test_waiters_go_in_order_of_arrival_and_a_cancelled_one_gives_its_place_up() -> None:
    turns = LoopTurns(budget=0.0)  # one step a turn
    order: list[int] = []

    async def step(i: int) -> None:
        await turns.turn()
        order.append(i)

    tasks = [asyncio.ensure_future(step(i)) for i in range(6)]
    await asyncio.sleep(0)  # every step has asked: the first went on, the rest wait
    assert turns.waiting == 5
    tasks[3].cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert order == [0, 1, 2, 4, 5]


async def test_steps_within_the_budget_go_on_in_the_same_turn() -> None:
    turns = LoopTurns(budget=10.0)
    ran: list[int] = []

    async def step(i: int) -> None:
        await turns.turn()
        ran.append(i)

    await asyncio.gather(*(step(i) for i in range(20)))
    assert ran == list(range(20)) and turns.waiting == 0


def test_a_new_event_loop_starts_afresh() -> None:
    turns = LoopTurns(budget=0.0)

    async def many() -> None:
        await asyncio.gather(*(turns.turn() for _ in range(5)))

    asyncio.run(many())
    asyncio.run(many())  # nothing of the first loop (its futures) carries over
    assert turns.waiting == 0

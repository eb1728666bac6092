"""How much of a big answer's fetching happens in one turn of the event loop, and how much of it
is under way at once (issue 33: 2,000 hosts whose look-ups never answer held the loop 20-180 ms
at a stretch, and their 2,000 waiting fetches ~120,000 objects every full collection walked).

A turn is counted by a callback that re-schedules itself with ``call_soon``: it runs once per
turn, after the handles that were ready when the turn began.
"""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp.abc import AbstractResolver, ResolveResult

from citeguard.models import CitationStatus, FetchResult
from citeguard.policy import FetchPolicy
from citeguard.web.fetch import Fetcher, SystemResolver


@asynccontextmanager
async def turn_counter() -> AsyncIterator[list[int]]:
    """Yields a one-item list holding the number of the loop's current turn."""
    loop = asyncio.get_running_loop()
    turn = [0]
    running = True

    def tick() -> None:
        turn[0] += 1
        if running:
            loop.call_soon(tick)

    loop.call_soon(tick)
    try:
        yield turn
    finally:
        running = False


class UnknownHosts:
    """A resolver (citeguard's Resolver protocol) that knows no host: each look-up waits until
    :meth:`answer` lets them all fail, and records the turn it started in and how many were
    waiting at once."""

    def __init__(self, turn: list[int]) -> None:
        self.turn = turn
        self.started: list[int] = []
        self.waiting = 0
        self.most_waiting = 0
        self._answered = asyncio.Event()
        self._changed = asyncio.Event()

    def answer(self) -> None:
        self._answered.set()

    async def until_waiting(self, n: int) -> None:
        """Return once ``n`` look-ups are waiting at once."""
        while self.waiting < n:
            self._changed.clear()
            await self._changed.wait()

    async def resolve(self, host: str, port: int) -> list[str]:
        self.started.append(self.turn[0])
        self.waiting += 1
        self.most_waiting = max(self.most_waiting, self.waiting)
        self._changed.set()
        try:
            await self._answered.wait()
        finally:
            self.waiting -= 1
        raise socket.gaierror(socket.EAI_NONAME, f"{host}: unknown")


@dataclass
class _Held:
    """What one fetch_all of unknown hosts had under way while every look-up it let start
    waited: look-ups and fetch tasks; then its results, once the look-ups failed."""

    urls: list[str]
    resolver: UnknownHosts
    held: int = 0
    fetch_tasks: int = 0
    results: dict[str, FetchResult] = field(default_factory=dict)


async def _fetch_unknown_hosts(n: int, *, concurrency: int, waiting: int) -> _Held:
    async with turn_counter() as turn:
        out = _Held([f"http://h{i}.example.com/" for i in range(n)], UnknownHosts(turn))
        policy = FetchPolicy(global_concurrency=concurrency)
        async with Fetcher(policy, resolver=out.resolver) as f:
            fetch = asyncio.create_task(f.fetch_all(out.urls, deadline=30))
            # every look-up the fetcher lets start is under way
            await out.resolver.until_waiting(waiting)
            for _ in range(50):  # and no more start, however many turns pass
                await asyncio.sleep(0)
            out.held = out.resolver.most_waiting
            out.fetch_tasks = sum(
                1
                for t in asyncio.all_tasks()
                if getattr(t.get_coro(), "__qualname__", "") == "Fetcher._fetch_task"
            )
            out.resolver.answer()
            out.results = await fetch
    return out


async def test_one_call_has_at_most_global_concurrency_fetches_under_way() -> None:
    out = await _fetch_unknown_hosts(200, concurrency=8, waiting=8)
    assert out.held == 8  # before: all 200 at once
    assert out.fetch_tasks == 8  # the other 192 wait as strings, not as tasks
    results = out.results
    assert isinstance(results, dict)
    assert list(results) == out.urls
    assert {r.status for r in results.values()} == {CitationStatus.UNREACHABLE}
    assert len(out.resolver.started) == 200  # the rest started as the first ones ended


async def test_a_call_starts_its_urls_in_slices_of_turns() -> None:
    out = await _fetch_unknown_hosts(300, concurrency=1000, waiting=300)
    assert out.held == 300
    per_turn = Counter(out.resolver.started)
    assert max(per_turn.values()) <= 64  # before: all 300 in one turn
    assert len(per_turn) >= 5


class _CountingInner(AbstractResolver):
    """aiohttp's resolver interface, standing in for aiodns inside SystemResolver: it records
    the turn each look-up reached it in and fails it."""

    def __init__(self, turn: list[int]) -> None:
        self.turn = turn
        self.started: list[int] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.started.append(self.turn[0])
        await asyncio.sleep(0)
        raise OSError(f"{host}: unknown")

    async def close(self) -> None:
        return None


async def test_system_resolver_hands_look_ups_to_the_resolver_in_turns() -> None:
    """Each aiodns call is ~0.1 ms on the loop thread (up to 1 ms), so 2,000 in one turn held
    the loop: the resolver now gets a burst of 8, then 4 a turn."""
    async with turn_counter() as turn:
        inner = _CountingInner(turn)
        resolver = SystemResolver(inner=inner)

        async def unknown(i: int) -> bool:
            try:
                await resolver.resolve(f"h{i}.example.com", 80)
            except OSError:
                return True
            return False

        failed = await asyncio.gather(*(unknown(i) for i in range(100)))
        await resolver.aclose()
    assert all(failed)
    assert len(inner.started) == 100
    per_turn = Counter(inner.started)
    assert max(per_turn.values()) <= 8  # before: 100 in one turn
    assert len(per_turn) >= 20


async def test_a_check_has_at_most_global_concurrency_urls_under_way() -> None:
    """The guard's fetch (a task per URL, its extraction starting as its page arrives) keeps a
    window of ``global_concurrency`` URLs under way; the rest wait as strings."""
    from citeguard import Guard, Policy

    async with turn_counter() as turn:
        resolver = UnknownHosts(turn)
        policy = Policy(fetch=FetchPolicy(global_concurrency=8))
        answer = " ".join(f"See http://h{i}.example.com/p [{i}]." for i in range(1, 101))
        guard = Guard(policy, entailer=None, resolver=resolver)
        try:
            check = asyncio.create_task(guard.check(answer))
            await resolver.until_waiting(8)
            for _ in range(50):
                await asyncio.sleep(0)
            held = resolver.most_waiting
            url_tasks = sum(
                1
                for t in asyncio.all_tasks()
                if "ExtractStage.fetch" in getattr(t.get_coro(), "__qualname__", "")
            )
            resolver.answer()
            verdict = await check
        finally:
            await guard.aclose()
    assert held == 8  # before: all 100 at once
    assert url_tasks == 8
    assert len(resolver.started) == 100
    assert {c.status for c in verdict.citations} == {CitationStatus.UNREACHABLE}

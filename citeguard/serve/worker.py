"""The guard's own event loop, on its own thread.

``citeguard serve`` answers HTTP on uvicorn's event loop (the *HTTP loop*) and does everything
else on this one (the *guard loop*): the Guard (parsing, fetching, extraction hand-offs,
checks, the model's hand-offs), the upstream client, the relay of a stream's events. The HTTP
loop only reads requests, hands them over and writes what comes back, so a burst of checks
queues on the guard loop instead of delaying every connection the server holds: 200 streams
at once made the single loop fall 100-500 ms behind; the HTTP loop now runs its timers on time
while the guard loop works through them (``benchmarks/bench_serve.py``; both loops' lag are in
``/metrics``).

The two threads share the GIL: the interpreter hands it to a waiting thread every
``sys.getswitchinterval()`` (5 ms), so the HTTP loop waits at most that long for it.
Cancellation crosses over: a request cancelled on the HTTP loop (its client went away, a
timeout) cancels its work on the guard loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine
from contextlib import suppress
from typing import Any, TypeVar

__all__ = ["GuardLoop"]

T = TypeVar("T")


class GuardLoop:
    """An event loop running on a thread of its own (``start`` / ``stop``)."""

    def __init__(self, name: str = "citeguard-guard-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def start(self) -> None:
        self._thread.start()

    async def stop(self) -> None:
        """Stop the loop (its tasks cancelled) and wait for its thread, off the caller's loop."""
        if not self._thread.is_alive():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        await asyncio.to_thread(self._thread.join, 30)

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the guard loop and await its result from the caller's loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    async def iterate(self, items: AsyncIterator[T]) -> AsyncIterator[T]:
        """Items of an async iterator that runs on the guard loop, one hand-over each (so a
        slow reader holds the producer back), closed there when the reader stops."""
        try:
            while True:
                done, item = await self.run(_step(items))
                if done:
                    return
                yield item
        finally:
            with suppress(Exception):
                await asyncio.shield(self.run(_close(items)))


async def _step(items: AsyncIterator[T]) -> tuple[bool, Any]:
    try:
        return False, await anext(items)
    except StopAsyncIteration:
        return True, None


async def _close(items: AsyncIterator[Any]) -> None:
    close = getattr(items, "aclose", None)
    if close is not None:
        with suppress(RuntimeError):  # still running: its cancellation closes it
            await close()

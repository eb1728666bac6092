"""The one-thread pool the model backends run inference in (:class:`_ExecutorOwner`)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from citeguard.checks.minilm import default_threads
from citeguard.closing import AsyncClosing

# --------------------------------------------------------------------------------------------
# Shared executor plumbing for the model backends
# --------------------------------------------------------------------------------------------


class _ExecutorOwner(AsyncClosing):
    """A one-thread pool, created on first use and released by :meth:`aclose`.

    One thread because the model is one object and torch already parallelises inside a call;
    two threads would only contend for the same two cores.
    """

    _thread_name = "citeguard-entail"

    def __init__(self, *, threads: int | None = None) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self._threads = threads

    def _pool(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=1,
                    thread_name_prefix=self._thread_name,
                    initializer=self._init_thread,
                )
            return self._executor

    def _init_thread(self) -> None:
        # torch's OpenMP thread count is set per calling thread, so this caps only the worker's
        # intra-op parallelism. By default it leaves one core to the event loop: when torch's
        # threads take every core, the loop thread waits for a CPU (and for the GIL the worker
        # holds between ops), and wake-ups arrive tens of milliseconds late on a busy machine.
        try:
            import torch
        except ImportError:  # reported with an install hint when the model loads
            return
        torch.set_num_threads(self._threads or default_threads())

    def _load(self) -> Any:
        raise NotImplementedError

    async def warm_up(self) -> None:
        """Load the model now (in the worker thread) instead of on the first :meth:`score`.

        Importing torch and reading weights holds the GIL in long C calls, which can stall the
        event loop for a few hundred milliseconds; do it at start-up, not mid-request.
        """
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._pool(), self._load)

    async def aclose(self) -> None:
        """Shut the worker thread down. The loaded model is kept; a later call starts a new pool."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            # Wait in another thread: a batch still running must not block the loop.
            await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)

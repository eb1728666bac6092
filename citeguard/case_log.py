"""``Guard(log_to=path)``: every guarded run appended to a JSONL log, one case a line.

Each line is :meth:`GuardResult.to_case <citeguard.models.GuardResult.to_case>` of a run (the
prompt, the answer, the searches, the verdict, and where the Guard has a snapshot store, a
:class:`~citeguard.models.SnapshotRef` to it), the input of ``citeguard report`` and
``citeguard rescore``. The event loop never touches the file: building the line and writing it
happen on one writer thread the log owns, so lines from runs that finish together queue up
and are written whole, one after the other, each with a single ``write(2)`` on a descriptor
opened with ``O_APPEND`` (processes sharing the file do not tear each other's lines either).
``aclose()`` waits for the lines already queued, then closes the file.

A line that cannot be written (a full disk, a file made read-only) is not the user's problem:
the run still returns, the failure is logged as a warning (``logging``, logger
``citeguard.case_log``) and counted in :attr:`CaseLog.dropped`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from citeguard.errors import PolicyError
from citeguard.models import GuardResult, SnapshotRef
from citeguard.snapshot import SnapshotStore, SQLiteSnapshotStore

_LOG = logging.getLogger(__name__)

__all__ = ["CaseLog", "snapshot_ref"]


def snapshot_ref(store: SnapshotStore, version: int | None) -> SnapshotRef | None:
    """Where ``store`` lies, as ``citeguard rescore`` opens it again: an SQLite store's absolute
    path, or a Redis store's URL (its password left out) and namespace; None for another kind."""
    if isinstance(store, SQLiteSnapshotStore):
        return SnapshotRef(store=os.path.abspath(store.path), version=version)
    url, namespace = getattr(store, "url", None), getattr(store, "namespace", None)
    if isinstance(url, str) and isinstance(namespace, str):  # a RedisSnapshotStore
        return SnapshotRef(store=url, namespace=namespace, version=version)
    return None


class CaseLog:
    """An append-only JSONL log of guarded runs (see the module docstring). ``path``'s folder
    must exist; the file is created on the first line."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise PolicyError(f"log_to={str(self.path)!r} is a directory, not a file")
        if not self.path.parent.is_dir():
            raise PolicyError(f"log_to={str(self.path)!r}: no folder {str(self.path.parent)!r}")
        self.written = 0  # lines written
        self.dropped = 0  # lines that could not be written
        self._fd: int | None = None  # only touched on the writer thread
        self._writer: ThreadPoolExecutor | None = None

    async def log(
        self,
        result: GuardResult,
        prompt: str,
        *,
        timestamp: datetime,
        store: SnapshotStore | None = None,
    ) -> None:
        """Append ``result`` as one line (returns once it is written, or dropped)."""
        ref = snapshot_ref(store, await store.current_version()) if store is not None else None
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="citeguard-log")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._writer, self._write, result, prompt, timestamp, ref)

    def _write(
        self, result: GuardResult, prompt: str, timestamp: datetime, ref: SnapshotRef | None
    ) -> None:
        try:
            case = result.to_case(prompt, timestamp=timestamp, snapshot=ref)
            # ASCII escapes: a lone surrogate in an answer cannot make the line unencodable
            data = (json.dumps(case, default=str) + "\n").encode("ascii")
            if self._fd is None:
                flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
                self._fd = os.open(self.path, flags, 0o644)
            view = memoryview(data)
            while view:  # a regular file takes it whole; a short write is finished, not lost
                view = view[os.write(self._fd, view) :]
            self.written += 1
        except (OSError, ValueError, TypeError, RecursionError) as e:
            self.dropped += 1
            _LOG.warning("citeguard: cannot append a case to %s: %s", self.path, e)

    async def aclose(self) -> None:
        """Wait for the lines already queued, then close the file (a later run reopens it)."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(writer, self._close)
        finally:
            writer.shutdown(wait=False)

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):  # every line was written whole, or counted
                os.close(fd)

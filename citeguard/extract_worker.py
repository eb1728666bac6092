"""Page extraction in a child process: the event loop never waits for the GIL behind a parser.

An extraction thread holds the GIL while lexbor or pypdf parse, and every time the event loop
comes back from ``select()`` it waits up to the interpreter's switch interval (5 ms) to get it
back: with 200 answers in flight that convoy made the loop-lag p99 ~110 ms. Niced child
processes do the same work on other cores without touching the loop's GIL (measured: ~8 ms).

:class:`ProcessExtractor` is a :class:`concurrent.futures.Executor` over ``workers`` children
(``python -m citeguard.extract_worker``), each reading pickled callables from its stdin and
writing their results to a private copy of its stdout. Unlike ``ProcessPoolExecutor`` it never
imports the user's ``__main__`` in a child (a script without ``if __name__ == "__main__"`` would
run again there), and it bounds each job:

- **time**: a job running past ``job_timeout`` seconds kills the child; that job fails with
  :class:`ExtractionFailed`, the jobs queued behind it go to a fresh child;
- **memory**: the child's address space is capped at ``memory_limit_mb`` (``RLIMIT_AS``); a page
  that needs more fails with the ``MemoryError`` it raised;
- **crashes**: a child that dies (a parser's segfault, the OOM killer) fails the job it was
  running and only that one.

One helper thread per child moves bytes (it sleeps in ``read``/``write``, holding no GIL while it
waits); each child runs one job at a time, the jobs leaving the queue in submission order.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import IO, Any

from citeguard.errors import CiteguardError, InputError

_HEADER = struct.Struct("!Q")
_READY = -1  # job id of the child's hello


class ExtractionFailed(CiteguardError):
    """The extraction worker could not finish a job: it ran out of time or died."""


class ExtractorShutDown(ExtractionFailed, RuntimeError):
    """The :class:`ProcessExtractor` was shut down (``RuntimeError``, as executors raise)."""


class ProcessExtractor(Executor):
    """Runs picklable callables in ``workers`` lower-priority child processes, each one job at
    a time, in the order they were submitted.

    The children start on the first :meth:`submit` (or :meth:`start`), each in a helper thread
    of its own, and import citeguard (~1 s); :attr:`ready` says when one has. ``nice``: the
    children's niceness increment (the OS prefers the event loop when the cores are busy).
    With two children one extracts while the other's result is read and unpickled here: one
    child sat idle for that part of every page (~15 ms a page round trip under load, ~7 ms of
    it the child's own work).
    """

    def __init__(
        self,
        *,
        workers: int = 1,
        nice: int = 10,
        job_timeout: float = 30.0,
        memory_limit_mb: int | None = 2048,
        python: str = sys.executable,
    ) -> None:
        if workers < 1:
            raise InputError("workers must be at least 1")
        self._workers = workers
        self._nice = nice
        self._job_timeout = job_timeout
        self._memory_limit_mb = memory_limit_mb
        self._python = python
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._jobs: deque[tuple[int, Callable[[], Any], Future[Any]]] = deque()  # not yet sent
        self._wake = threading.Condition(self._lock)
        self._shutdown = False
        self._ready = threading.Event()
        self._tried = threading.Event()  # a start was attempted (ready, or failed)
        self._lanes_tried = 0  # lanes whose first child's start was attempted
        self._every_lane_tried = threading.Event()
        self._threads: list[threading.Thread] = []
        self._live = 0  # children started and not yet replaced or stopped
        self._restarts = 0
        self._completed = 0
        self._starting: set[subprocess.Popen[bytes]] = set()  # spawned, not yet ready

    # ------------------------------------------------------------------ the Executor API

    @property
    def ready(self) -> bool:
        """Whether the child has started and imported what it needs."""
        return self._ready.is_set()

    @property
    def completed(self) -> int:
        """Jobs the child finished (with a result or the exception it raised)."""
        return self._completed

    @property
    def restarts(self) -> int:
        """Children replaced after a timeout or a crash."""
        return self._restarts

    @property
    def live(self) -> int:
        """Children up now (ready for jobs)."""
        return self._live

    def wait_ready(self, timeout: float | None = None, *, every_lane: bool = False) -> bool:
        """Start the children if needed and block until one is ready (``True``) or its start
        failed or ``timeout`` passed (``False``); ``every_lane``: until every lane's first
        child has started (or failed to), so that no page waits for a child still warming."""
        self.start()
        (self._every_lane_tried if every_lane else self._tried).wait(timeout)
        return self.ready

    def wait_warm(self, timeout: float | None = None) -> bool:
        """Wait (after :meth:`wait_ready`) until every child has loaded what its first pages
        would otherwise load (a first child does that beside its first jobs): one job a lane,
        each waiting in its child for the warm-up. ``False`` when a child failed it or
        ``timeout`` passed."""
        jobs = [self.submit(_warmed) for _ in range(self._live or 1)]
        try:
            return all(f.result(timeout=timeout) for f in jobs)
        except Exception:  # a child gone or slow: the pages will tell
            return False

    def start(self) -> None:
        """Start the child now (in the background) rather than on the first job."""
        with self._lock:
            if self._shutdown:
                raise ExtractorShutDown("cannot start a ProcessExtractor after shutdown")
            if not self._threads:
                for lane in range(self._workers):
                    thread = threading.Thread(
                        target=self._run, name=f"citeguard-extract-worker-{lane}", daemon=True
                    )
                    self._threads.append(thread)
                    thread.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        call: Callable[[], Any] = _Call(fn, args, kwargs) if (args or kwargs) else fn
        fut: Future[Any] = Future()
        with self._lock:
            if self._shutdown:
                raise ExtractorShutDown("cannot schedule new futures after shutdown")
            self._jobs.append((next(self._ids), call, fut))
            self._wake.notify()
        self.start()
        return fut

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            if cancel_futures:
                while self._jobs:
                    self._jobs.popleft()[2].cancel()
            self._wake.notify_all()
            threads = list(self._threads)
            starting = list(self._starting)
        for proc in starting:  # still importing: stopped now, not left to finish for nothing
            with contextlib.suppress(OSError):
                proc.kill()
        if wait:
            for thread in threads:
                thread.join()

    # ------------------------------------------------------------------ the helper thread

    def _run(self) -> None:
        """One lane: start a child, then send it jobs and read their results, one in flight at
        a time, replacing the child after a timeout or a crash (the replacement warms up before
        it says it is ready; the first child warms up beside its first jobs, so a service is
        ready sooner: :meth:`wait_warm`)."""
        proc: subprocess.Popen[bytes] | None = None
        with contextlib.suppress(ExtractionFailed):
            proc = self._spawn(warm_first=False)  # before the first job needs it
        with self._lock:
            self._lanes_tried += 1
            if self._lanes_tried >= self._workers:
                self._every_lane_tried.set()
        while True:
            with self._lock:
                while not self._jobs and not self._shutdown:
                    self._wake.wait()
                if not self._jobs:
                    break  # shut down, nothing left to run
                if len(self._jobs) > 1:
                    self._wake.notify()  # another lane may take the next one
                job = None if proc is None or proc.poll() is not None else self._jobs.popleft()
            if job is None or proc is None:
                if proc is not None:  # died between jobs
                    self._replace(proc)
                try:
                    proc = self._spawn()
                except ExtractionFailed as exc:
                    with self._lock:
                        others = self._live
                    if others:
                        return  # the other lanes run the jobs
                    self._fail_all(exc)  # every waiting job hears why
                continue
            job_id, call, fut = job
            if fut.set_running_or_notify_cancel() and not self._one(proc, job_id, call, fut):
                proc = None
        self._stop(proc)

    def _one(
        self, proc: subprocess.Popen[bytes], job_id: int, call: Callable[[], Any], fut: Future[Any]
    ) -> bool:
        """Run one job; ``False`` when the child was killed or died on it."""
        assert proc.stdin is not None and proc.stdout is not None
        try:
            payload = pickle.dumps((job_id, call), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # not picklable: the caller's error
            fut.set_exception(exc)
            return True
        # the job's time runs from when it is sent: a deadline taken after the write let a
        # child finish a job under a 0.1 ms limit while this thread waited for the GIL after
        # the write's system call (seen once in a CI run at load 3)
        # waiting for a child's warm-up is no page: the page time limit does not apply
        limit = max(self._job_timeout, _WARM_TIMEOUT) if call is _warmed else self._job_timeout
        deadline = time.monotonic() + limit
        try:
            proc.stdin.write(_HEADER.pack(len(payload)) + payload)
            proc.stdin.flush()
            reply = _read_frame(proc.stdout, deadline=deadline)
        except TimeoutError:
            self._replace(proc)
            fut.set_exception(
                ExtractionFailed(f"page extraction took longer than {self._job_timeout:g} s")
            )
            return False
        except (OSError, EOFError, ValueError):
            code = proc.poll()
            self._replace(proc)
            fut.set_exception(ExtractionFailed(f"the extraction worker died (exit status {code})"))
            return False
        got_id, ok, value = pickle.loads(reply)  # our own child's reply
        if got_id != job_id:  # cannot happen: one job in flight
            self._replace(proc)
            fut.set_exception(ExtractionFailed("the extraction worker lost track of its jobs"))
            return False
        with self._lock:
            self._completed += 1
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)
        return True

    def _spawn(self, *, warm_first: bool = True) -> subprocess.Popen[bytes]:
        args = [
            self._python,
            "-m",
            "citeguard.extract_worker",
            str(self._nice),
            str(self._memory_limit_mb or 0),
            "1" if warm_first else "0",
        ]
        try:
            proc = subprocess.Popen(  # our own interpreter and module
                args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError as exc:
            self._tried.set()
            raise ExtractionFailed(f"cannot start the extraction worker: {exc}") from None
        assert proc.stdout is not None
        with self._lock:
            self._starting.add(proc)
            shut = self._shutdown
        if shut:  # shut down while it was being spawned
            with contextlib.suppress(OSError):
                proc.kill()
        try:
            hello = pickle.loads(_read_frame(proc.stdout, deadline=time.monotonic() + 120.0))
        except (TimeoutError, OSError, EOFError, ValueError) as exc:
            _kill(proc)
            self._tried.set()
            raise ExtractionFailed(f"the worker did not start ({exc!r})") from None
        finally:
            with self._lock:
                self._starting.discard(proc)
        if hello != (_READY, True, "ready"):
            _kill(proc)
            self._tried.set()
            raise ExtractionFailed("the worker did not start (unexpected hello)")
        with self._lock:
            self._live += 1
        self._ready.set()
        self._tried.set()
        return proc

    def _gone(self) -> None:
        with self._lock:
            self._live -= 1
            if not self._live:
                self._ready.clear()

    def _replace(self, proc: subprocess.Popen[bytes]) -> None:
        _kill(proc)
        self._gone()
        with self._lock:
            self._restarts += 1

    def _fail_all(self, exc: BaseException) -> None:
        with self._lock:
            jobs = list(self._jobs)
            self._jobs.clear()
        for _, _, fut in jobs:
            if fut.set_running_or_notify_cancel():
                fut.set_exception(exc)

    def _stop(self, proc: subprocess.Popen[bytes] | None) -> None:
        self._fail_all(ExtractorShutDown("the ProcessExtractor was shut down"))
        if proc is not None:
            self._gone()
            # no job is in flight here and the child keeps no state: killed and reaped now
            # rather than left to read the end of its input (niced, on a busy machine that
            # took seconds, its pipes open all the while)
            _kill(proc)


class _Call:
    """``fn(*args, **kwargs)`` as a picklable callable."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]):
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def __call__(self) -> Any:
        return self.fn(*self.args, **self.kwargs)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def _read_exact(stream: IO[bytes], n: int, deadline: float | None) -> bytes:
    fd = stream.fileno()
    chunks: list[bytes] = []
    while n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _read_frame(stream: IO[bytes], *, deadline: float | None) -> bytes:
    (size,) = _HEADER.unpack(_read_exact(stream, _HEADER.size, deadline))
    return _read_exact(stream, size, deadline)


# ---------------------------------------------------------------------- the child


_WARM_THREAD = "citeguard-warm-dates"
_WARM_TIMEOUT = 120.0


def _warmed(timeout: float = _WARM_TIMEOUT) -> bool:
    """In a child: wait for its warm-up thread (none: warmed before it said it was ready)."""
    for thread in threading.enumerate():
        if thread.name == _WARM_THREAD:
            thread.join(timeout)
            return not thread.is_alive()
    return True


def _child(nice: int, memory_limit_mb: int, warm_first: bool = True) -> None:
    # the replies go to a private copy of stdout; anything a library prints goes nowhere
    out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    with contextlib.suppress(OSError):
        os.nice(nice)
    if memory_limit_mb > 0:
        import resource

        limit = memory_limit_mb * 2**20
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # the imports every extraction job needs, paid once
    import citeguard.checks.validity
    import citeguard.web.page  # noqa: F401
    from citeguard.lang import warm_up
    from citeguard.web.page.dates import warm_up as warm_dates

    warm_up(identify=False)  # the word dictionary a page's sentence index reads
    # dateparser's locales, which htmldate loads on the first date string no locale reads
    # (1.3-2.5 s of CPU): a replacement child pays it before it says it is ready; a first
    # child beside its first jobs, in a thread (a service is ready ~1.5 s sooner), which
    # Guard.warm_up waits for (ProcessExtractor.wait_warm)
    if warm_first:
        warm_dates()
    else:
        threading.Thread(target=warm_dates, name=_WARM_THREAD, daemon=True).start()

    def send(obj: object) -> None:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        out.write(_HEADER.pack(len(data)) + data)
        out.flush()

    send((_READY, True, "ready"))
    stdin = sys.stdin.buffer
    while True:
        try:
            frame = _read_frame(stdin, deadline=None)
        except EOFError:
            return
        job_id, call = pickle.loads(frame)  # from our parent
        try:
            result: tuple[int, bool, Any] = (job_id, True, call())
            send(result)
        except BaseException as exc:  # the parent re-raises it
            try:
                send((job_id, False, exc))
            except Exception:  # an exception that cannot be pickled
                send((job_id, False, ExtractionFailed(f"{type(exc).__name__}: {exc}")))


if __name__ == "__main__":
    _child(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:4] != ["0"])

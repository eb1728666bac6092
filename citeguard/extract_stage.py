"""The extract stage: fetched bodies → pages, once per body, off the event loop.

One :class:`ExtractStage` per Guard holds what outlives a request: the page LRU (512 pages,
keyed by URL, body and extractor version), the extractions in flight (concurrent checks that
cite the same page share one), and the executor that parses. With a snapshot store, every
extraction goes through :func:`citeguard.snapshot.snapshot_page`, the snapshot package's one
set of rules for record, replay and refresh.

Extraction overlaps the fetches: :meth:`ExtractStage.fetch` starts each page's extraction as
soon as its own body arrives, so parsing hides behind the wait for the slowest URL.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from citeguard.checks.validity import ExtractedPage
from citeguard.errors import SnapshotMiss
from citeguard.extract_worker import ExtractionFailed, ProcessExtractor
from citeguard.models import Answer, CitationStatus, FetchResult, Page
from citeguard.parse import parse_answer
from citeguard.policy import FetchPolicy
from citeguard.snapshot import FetcherLike, SnapshotMode, SnapshotStore, snapshot_page
from citeguard.web.fetch import fewer_than
from citeguard.web.page import EXTRACTION_VERSION, extract_page
from citeguard.web.page.dates import warm_up as warm_dates

_T = TypeVar("_T")
_INLINE_PARSE_CHARS = 2_000  # measured: a 10 kB answer parses in ~4 ms, 800 chars in 0.7
_INLINE_PARSE_ITEMS = 32  # structured items parsed on the event loop, at most

_PAGE_CACHE_SIZE = 512
# "auto": the extraction child starts once this many pages are extracting at once
_WORKER_AT_IN_FLIGHT = 8
# fetches one check starts in one turn of the event loop, at most
_START_BATCH = 16
_RESULTS_PER_TURN = 256  # extraction results read between two turns of the loop
# (url, body length, body hash, extraction version): the in-process page cache key
_PageKey = tuple[str, int, int, str]
_Early = dict[str, "asyncio.Future[ExtractedPage | None]"]
SpanFactory = Callable[..., AbstractContextManager[Any]]
# whether pages need the htmldate fallback: known, or still being decided
DateFallback = bool | asyncio.Future[bool]
# told of each page as its fetch completes, with the page's extraction (already started)
PageHook = Callable[[str, FetchResult, "asyncio.Future[ExtractedPage | None]"], None]


class Turns:
    """At most ``per_turn`` callers of :meth:`slot` go on in one turn of the event loop; the
    others wait their turn in order, so a burst of completions (every fetch of a 2,000-URL
    answer failing at once) is spread over turns instead of holding one."""

    def __init__(self, per_turn: int) -> None:
        self._per_turn = per_turn
        self._used = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None

    async def slot(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new loop (asyncio.run again): nothing carries over
            self._loop, self._used, self._scheduled = loop, 0, False
            self._waiting = deque()
        if self._used < self._per_turn and not self._waiting:
            self._used += 1
            self._next_turn()
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        self._next_turn()
        await fut

    def _next_turn(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._turn)

    def _turn(self) -> None:
        self._scheduled = False
        self._used = 0
        released = 0
        while self._waiting and released < self._per_turn:
            fut = self._waiting.popleft()
            if not fut.done():  # a cancelled waiter gives its place up
                fut.set_result(None)
                released += 1
        if self._waiting:
            self._next_turn()


class ExtractStage:
    """Pages of fetched bodies: cached, de-duplicated in flight, extracted in ``executor``.

    ``executor`` is the caller's and is not shut down here. Without one, the stage extracts in
    one thread of its own and, as ``Policy.fetch.extract_in`` says, in one niced child process
    (:class:`~citeguard.extract_worker.ProcessExtractor`): lexbor and pypdf hold the GIL while
    they parse, and a thread doing it makes the event loop wait for the GIL after every
    ``select()``; the child does not. ``"auto"`` starts the child at :meth:`start` (``async
    with Guard(...)``, which does not wait for it), :meth:`warm_up` (which does) or once 8 pages
    are extracting at once, and uses the thread until it is ready; a one-off check never pays
    its start (~1 s of CPU a child, niced: on a busy machine it can take many seconds).
    """

    def __init__(
        self,
        *,
        store: SnapshotStore | None,
        mode: SnapshotMode,
        executor: Executor | None = None,
        span: SpanFactory,
        limits: FetchPolicy | None = None,
    ) -> None:
        self._limits = limits  # the page bounds (size, depth, nodes, PDF work) of Policy.fetch
        self._store = store
        self._mode = mode
        self._given_executor = executor
        self._owned_executor: ThreadPoolExecutor | None = None
        self._worker: ProcessExtractor | None = None
        self._span = span
        self._pages: OrderedDict[_PageKey, ExtractedPage] = OrderedDict()
        self._extracting: dict[_PageKey, asyncio.Task[ExtractedPage]] = {}

    @property
    def worker(self) -> ProcessExtractor | None:
        """The extraction child this stage started, if any."""
        return self._worker

    def ready_worker(self) -> ProcessExtractor | None:
        """The extraction children when they are up (others' CPU work may go there too:
        :meth:`LocalEntailer.offload_to <citeguard.checks.entail.LocalEntailer.offload_to>`),
        else None."""
        worker = self._worker
        return worker if worker is not None and worker.ready else None

    def start(self) -> None:
        """Start the extraction child in the background (``async with Guard(...)``), unless
        this stage extracts in a given executor or in its thread: pages go to the thread until
        the child is ready, and closing the stage before then kills the child mid-start."""
        self._start_worker()

    async def aclose(self) -> None:
        """Shut down the extraction thread and child this stage started (a given executor is
        left), waiting (in a thread, off the loop) until the children are gone: no process or
        pipe of this stage outlives it."""
        if self._owned_executor is not None:
            self._owned_executor.shutdown(wait=False, cancel_futures=True)
            self._owned_executor = None
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=False, cancel_futures=True)  # queued jobs cancelled now
            await asyncio.to_thread(worker.shutdown, True)

    async def warm_up(self, *, every_child: bool = True) -> None:
        """Start the extraction children now and wait until every one is ready, warmed (a
        service's start-up; ``every_child=False``: the first one up, the children still
        loading dateparser's locales beside their first pages: ~1.5 s sooner); extracting in
        its own thread, that thread loads what the date search loads on first use
        (:func:`~citeguard.web.page.dates.warm_up`)."""
        worker = self._start_worker()
        loop = asyncio.get_running_loop()
        if worker is not None:
            ready = functools.partial(worker.wait_ready, 120.0, every_lane=every_child)
            await loop.run_in_executor(None, ready)
            if every_child:
                await loop.run_in_executor(None, worker.wait_warm, 120.0)
        elif self._given_executor is None:
            await loop.run_in_executor(self._executor(), warm_dates)

    def _start_worker(self) -> ProcessExtractor | None:
        if self._given_executor is not None or self._where() == "thread":
            return None
        if self._worker is None:
            limits = self._limits or FetchPolicy()
            self._worker = ProcessExtractor(
                workers=limits.extract_processes,
                job_timeout=limits.extract_timeout,
                memory_limit_mb=limits.extract_memory_mb,
            )
            self._worker.start()
        return self._worker

    def _where(self) -> str:
        return self._limits.extract_in if self._limits is not None else "auto"

    async def off_loop(self, fn: Callable[[], _T], *, child: bool) -> _T:
        """A check's CPU work that is not extraction (parsing a long answer) off the event loop:
        in the extraction child when it is up and ``child`` says the call pickles cheaply and
        surely, else in a thread. A thread doing it makes the loop wait for the GIL after every
        ``select()`` (up to the 5 ms switch interval a time): a 100 kB answer's parse stalled
        the loop 9-18 ms that way, 4-9 ms with the work in the child. A child that fails the
        job (killed, timed out, died) leaves it to the thread."""
        loop = asyncio.get_running_loop()
        worker = self._worker
        if child and worker is not None and worker.ready:  # (no child with a given executor)
            try:
                return await loop.run_in_executor(worker, fn)
            except ExtractionFailed:
                pass
        return await loop.run_in_executor(None, fn)

    async def parse(self, answer: object, schemes: frozenset[str], **sources: Any) -> Answer:
        """:func:`~citeguard.parse.parse_answer` of ``answer``: on the event loop when that
        is quick, else off it (:meth:`off_loop`; in the extraction child for a text)."""
        if isinstance(answer, str):
            offload = len(answer) > _INLINE_PARSE_CHARS
        elif isinstance(answer, Sequence) and not isinstance(answer, bytes | bytearray):
            offload = len(answer) > _INLINE_PARSE_ITEMS
        else:
            # a provider response (SDK object or dict): its text's length and its citation
            # objects are known only once read (8,000 annotations: ~0.3 s of parsing)
            offload = True
        if offload:
            # long answers cost more than a millisecond to parse: keep them off the event loop,
            # in the extraction child when it is up for a text (a string pickles in
            # microseconds; an SDK object, or a caller's references, may not pickle at all)
            parse = functools.partial(parse_answer, answer, allowed_schemes=schemes, **sources)
            plain = sources.get("references") is None and sources.get("documents") is None
            return await self.off_loop(parse, child=isinstance(answer, str) and plain)
        return parse_answer(answer, allowed_schemes=schemes, **sources)

    def _executor(self) -> Executor:
        if self._given_executor is not None:
            return self._given_executor
        where = self._where()
        if where != "thread":
            worker = self._worker
            if worker is None and (
                where == "process" or len(self._extracting) >= _WORKER_AT_IN_FLIGHT
            ):
                worker = self._start_worker()
            if worker is not None and (where == "process" or worker.ready):
                return worker
        if self._owned_executor is None:
            self._owned_executor = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="citeguard-extract"
            )
        return self._owned_executor

    async def fetch(
        self,
        fetcher: FetcherLike,
        urls: Sequence[str],
        *,
        want_body: bool,
        date_fallback: DateFallback,
        deadline: float | None,
        on_page: PageHook | None = None,
        window: int | None = None,
    ) -> tuple[dict[str, FetchResult], _Early]:
        """Fetch every URL within the answer deadline; with bodies, each page's extraction starts
        as soon as its own fetch completes (measured: ~3 ms a page, 150 ms for a 50-citation
        answer when done after the fetches), and ``on_page(url, result, extraction)`` hears of
        it then. Returns the results and the extractions started.

        ``window`` (with a ``deadline``): URLs under way at once, at most; the next starts as
        one ends, within what is left of the deadline. Each URL under way holds ~60 objects
        (tasks, coroutines, futures, contexts) that every full collection walks: 2,000 hosts
        whose look-ups time out kept ~120,000, walked in 50-80 ms on the loop."""
        early: _Early = {}
        if not want_body or len(urls) < 2:
            return await fetcher.fetch_all(urls, want_body=want_body, deadline=deadline), early

        turns = Turns(_START_BATCH)
        loop = asyncio.get_running_loop()
        no_page: asyncio.Future[ExtractedPage | None] = loop.create_future()
        no_page.set_result(None)
        end = None if deadline is None else loop.time() + deadline

        async def one(url: str) -> None:
            left = deadline if end is None else end - loop.time()
            if left is not None and left <= 0:
                res = FetchResult(
                    url=url,
                    status=CitationStatus.TIMEOUT,
                    reason="the answer deadline passed before this URL's turn to be fetched",
                )
            else:
                res = (await fetcher.fetch_all([url], want_body=True, deadline=left))[url]
            # fetches that fail at once (2,000 unresolvable hosts) all finish in one turn
            await turns.slot()
            if res.body is None or not res.status.is_ok():
                job = no_page  # nothing to extract: no task (with its coroutine and context)
            else:
                wanted = await _wanted(date_fallback)
                job = asyncio.ensure_future(self._extract_one(url, res, wanted))
            early[url] = job
            if on_page is not None:
                on_page(url, res, job)
            results[url] = res

        distinct = list(dict.fromkeys(urls))
        results: dict[str, FetchResult] = {}
        # started a batch a turn of the event loop: 2,000 URLs started in one turn held the
        # loop for 50-80 ms (normalising, address checks and a task step each). Only the
        # unfinished tasks are held (a finished one's result is in ``results``): 2,000 finished
        # tasks kept ~6,000 objects (task, coroutine, context) for the collector to walk.
        live: set[asyncio.Future[None]] = set()
        failed: list[BaseException] = []

        def finished(task: asyncio.Future[None]) -> None:
            live.discard(task)
            error = None if task.cancelled() else task.exception()
            if error is not None:
                failed.append(error)

        batch = min(_START_BATCH, max(1, window)) if window is not None else _START_BATCH
        try:
            for k in range(0, len(distinct), batch):
                if k:
                    await asyncio.sleep(0)
                if window is not None and end is not None and live:
                    # room for this batch: fewer than window - batch + 1 left under way
                    await fewer_than(window - batch + 1, set(live), lambda: end - loop.time())
                if failed:
                    error = failed[0]
                    raise error
                for u in distinct[k : k + batch]:
                    fut = asyncio.ensure_future(one(u))
                    live.add(fut)
                    fut.add_done_callback(finished)
            while live and not failed:
                await asyncio.wait(set(live), return_when=asyncio.FIRST_EXCEPTION)
            if failed:  # as gather: the first error raised, the other fetches cancelled
                error = failed[0]
                raise error
        except BaseException:
            for pending in list(live):
                pending.cancel()
            raise
        return {u: results[u] for u in distinct}, early

    async def extract_all(
        self,
        fetched: Mapping[str, FetchResult],
        *,
        date_fallback: DateFallback,
        early: Mapping[str, asyncio.Future[ExtractedPage | None]] | None = None,
    ) -> dict[str, ExtractedPage]:
        """Every fetched body's page, extracted once per content, off the event loop."""
        date_fallback = await _wanted(date_fallback)
        jobs: dict[str, asyncio.Future[ExtractedPage | None]] = {}
        for url, res in fetched.items():
            job = early.get(url) if early else None
            if job is None and res.body is not None and res.status.is_ok():
                job = asyncio.ensure_future(self._extract_one(url, res, date_fallback))
            if job is not None:
                jobs[url] = job
        out: dict[str, ExtractedPage] = {}
        if jobs:
            with self._span("citeguard.extract", kind="TOOL", input=f"{len(jobs)} pages"):
                # only the jobs still running are waited on (gather over 2,000 futures, most of
                # them done, held the loop ~10 ms in one step), and the results are read in
                # slices; a job that failed raises here, as gather would
                pending = [job for job in jobs.values() if not job.done()]
                if pending:
                    try:
                        await asyncio.wait(pending)
                    except BaseException:  # cancelled: so are the jobs (as with gather)
                        for job in pending:
                            job.cancel()
                        raise
            for i, (url, job) in enumerate(jobs.items()):
                if i and not i % _RESULTS_PER_TURN:
                    await asyncio.sleep(0)
                extracted = job.result()
                if extracted is not None:
                    out[url] = extracted
        return out

    async def fetch_page(
        self, fetcher: FetcherLike, url: str, *, deadline: float | None
    ) -> Page | None:
        """The page at one URL, fetched and extracted (``None``: no readable 200 page). A
        snapshot in replay mode that never recorded the URL gives ``None``, not a miss: this
        serves optional requests (soft-404 probes) that older snapshots lack."""
        try:
            res = (await fetcher.fetch_all([url], want_body=True, deadline=deadline))[url]
        except SnapshotMiss:
            return None
        extracted = await self._extract_one(url, res, False)
        return extracted.page if extracted is not None else None

    async def _extract_one(
        self, url: str, res: FetchResult, date_fallback: bool
    ) -> ExtractedPage | None:
        """The page of one fetched body: from the page cache, from an extraction of the same
        body already in progress (concurrent checks citing one page share it), or extracted."""
        if res.body is None or not res.status.is_ok():
            return None
        # htmldate's fallback costs ~3 ms a page; only questions whose freshness matters pay it
        version = EXTRACTION_VERSION + ("+dates" if date_fallback else "")
        # bytes cache their hash and compute it holding the GIL; hashlib releases the GIL on
        # large inputs, and re-acquiring it behind a parsing thread stalled the loop (measured:
        # p99 lag 280 ms with 200 answers in flight). The stable digest is for the store only.
        key = (url, len(res.body), hash(res.body), version)
        hit = self._pages.get(key)
        if hit is not None:
            self._pages.move_to_end(key)
            return hit
        task = self._extracting.get(key)
        if task is None:
            task = asyncio.ensure_future(self._extract_body(key, url, res, date_fallback))
            self._extracting[key] = task
            task.add_done_callback(functools.partial(self._extracted, key))
        # shielded: one cancelled check must not cancel the extraction other checks wait for
        return await asyncio.shield(task)

    def _extracted(self, key: _PageKey, task: asyncio.Task[ExtractedPage]) -> None:
        if self._extracting.get(key) is task:
            del self._extracting[key]
        if not task.cancelled():
            task.exception()  # retrieved here, so a failure nobody awaited is not logged twice

    async def _extract_body(
        self, key: _PageKey, url: str, res: FetchResult, date_fallback: bool
    ) -> ExtractedPage:
        assert res.body is not None
        loop = asyncio.get_running_loop()
        # HTML parsing, PDF text and text normalisation are CPU work: keep them off the loop
        extract = functools.partial(
            _extract,
            res.body,
            url=res.final_url or url,
            content_type=res.content_type,
            headers=res.headers,
            date_fallback=date_fallback,
            limits=self._limits,
        )
        if self._store is None:
            try:
                extracted = await loop.run_in_executor(self._executor(), _prepared, extract)
            except ExtractionFailed as exc:
                extracted = ExtractedPage.of(_unreadable(url, exc))
        else:

            async def parse() -> Page:
                try:
                    return await loop.run_in_executor(self._executor(), extract)
                except ExtractionFailed as exc:
                    return _unreadable(url, exc)

            digest = await loop.run_in_executor(self._executor(), _digest, res.body)
            page = await snapshot_page(self._store, self._mode, url + "#" + digest, key[3], parse)
            extracted = await loop.run_in_executor(self._executor(), ExtractedPage.of, page)
        self._pages[key] = extracted
        if len(self._pages) > _PAGE_CACHE_SIZE:
            self._pages.popitem(last=False)
        return extracted


async def _wanted(date_fallback: DateFallback) -> bool:
    """The answer of a ``date_fallback`` that may still be deciding (the question's regime is
    classified while the first fetches are in flight)."""
    if isinstance(date_fallback, bool):
        return date_fallback
    return await asyncio.shield(date_fallback)


def _prepared(extract: Callable[[], Page]) -> ExtractedPage:
    return ExtractedPage.of(extract())


def _unreadable(url: str, exc: ExtractionFailed) -> Page:
    """The page of a body the extraction child ran out of time or memory on, or died on: this
    page alone fails (``unsupported_type``, with the reason)."""
    return Page(url=url, kind="unsupported", problem=str(exc))


def _digest(body: bytes) -> str:
    return hashlib.blake2b(body, digest_size=16).hexdigest()


def _extract(
    body: bytes,
    *,
    url: str,
    content_type: str | None,
    headers: Mapping[str, str],
    date_fallback: bool,
    limits: FetchPolicy | None,
) -> Page:
    try:
        return extract_page(
            body,
            url=url,
            content_type=content_type,
            headers=headers,
            date_fallback=date_fallback,
            limits=limits,
        )
    except Exception:  # a page no parser can read is a status on its citation, not a crash
        return Page(url=url, kind="unsupported")


__all__ = ["ExtractStage"]

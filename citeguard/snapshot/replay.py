"""Record and replay wrappers: a fetcher, a search call and an extraction, each behind a mode.

=========  ==================================  ============================================
mode       network                             store
=========  ==================================  ============================================
live       yes                                 not touched
record     yes                                 written (active version)
replay     **never** (the fetcher is never     read only; a miss raises ``SnapshotMiss``
           built, so no socket can open)       naming the URL or query
refresh    yes                                 written into a new version (see
                                               :func:`prepare_snapshot`)
=========  ==================================  ============================================

Failures are recorded too (a 404, a timeout): replay must reproduce them exactly.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic_core import to_jsonable_python

from citeguard.errors import PolicyError, SnapshotMiss
from citeguard.models import FetchResult, Page, SearchRecord, Verdict
from citeguard.search import normalize_search_results
from citeguard.snapshot.base import SnapshotMode, SnapshotStore

T = TypeVar("T")

_WRITES = (SnapshotMode.RECORD, SnapshotMode.REFRESH)


@runtime_checkable
class FetcherLike(Protocol):
    """What :class:`SnapshotFetcher` wraps and provides: the interface of ``web.fetch.Fetcher``."""

    async def fetch(self, url: str, *, want_body: bool = True) -> FetchResult: ...

    async def fetch_all(
        self, urls: Sequence[str], *, want_body: bool = True, deadline: float | None = None
    ) -> dict[str, FetchResult]: ...

    async def aclose(self) -> None: ...


def _method(want_body: bool) -> str:
    # The key says what was asked for: a GET when the body is wanted, a HEAD-style check
    # otherwise (the fetcher may still have used GET; FetchResult.method says what it did).
    return "GET" if want_body else "HEAD"


async def prepare_snapshot(
    store: SnapshotStore | None, mode: SnapshotMode | str, *, label: str | None = None
) -> int | None:
    """Get a store ready for one run in ``mode``; return the version the run uses.

    Call once per run (the pytest plugin calls it once per session): ``refresh`` begins a new
    version here, so every search, fetch and page of the run lands in the same one; ``record``
    writes into the newest version (creating version 1 in an empty store); ``replay`` reads the
    newest (or the one the store was opened at); ``live`` uses no store.
    """
    mode = SnapshotMode(mode)
    if mode is SnapshotMode.LIVE:
        return None
    if store is None:
        raise PolicyError(f"snapshot mode {mode.value!r} needs a snapshot store")
    if mode is SnapshotMode.REFRESH:
        return await store.begin_version(label)
    current = await store.current_version()
    if current is None and mode is SnapshotMode.RECORD:
        return await store.begin_version(label)
    return current


class SnapshotFetcher:
    """A fetcher that records to or replays from a :class:`SnapshotStore`.

    ``inner_factory`` builds the real fetcher, lazily, on the first network call; in replay it
    is never called, so replay cannot open a socket. Closing this fetcher closes the inner one
    (if it was built) but not the store, which its owner closes.
    """

    def __init__(
        self,
        inner_factory: Callable[[], FetcherLike] | None,
        store: SnapshotStore | None,
        mode: SnapshotMode | str,
    ) -> None:
        self.mode = SnapshotMode(mode)
        if self.mode is not SnapshotMode.LIVE and store is None:
            raise PolicyError(f"snapshot mode {self.mode.value!r} needs a snapshot store")
        if self.mode is not SnapshotMode.REPLAY and inner_factory is None:
            raise PolicyError(f"snapshot mode {self.mode.value!r} needs a fetcher to go live")
        self._factory = inner_factory
        self._store = store
        self._inner: FetcherLike | None = None

    @property
    def store(self) -> SnapshotStore | None:
        return self._store

    def _live(self) -> FetcherLike:
        if self.mode is SnapshotMode.REPLAY:  # defence in depth: replay never goes live
            raise PolicyError("a replaying SnapshotFetcher must not build a live fetcher")
        if self._inner is None:
            assert self._factory is not None
            self._inner = self._factory()
        return self._inner

    async def _replay(self, url: str, want_body: bool) -> FetchResult:
        assert self._store is not None
        hit = await self._store.get_fetch(_method(want_body), url)
        if hit is None and not want_body:
            # A recorded GET answers a body-less question as well (deterministically).
            hit = await self._store.get_fetch("GET", url)
            if hit is not None:
                hit = hit.model_copy(update={"body": None})
        if hit is None:
            raise SnapshotMiss(f"fetch ({_method(want_body)})", url)
        return hit.model_copy(update={"from_cache": True})

    async def _write(self, url: str, result: FetchResult, want_body: bool) -> None:
        assert self._store is not None
        await self._store.put_fetch(result, method=_method(want_body), url=url)

    async def fetch(self, url: str, *, want_body: bool = True) -> FetchResult:
        """Fetch one URL according to the mode."""
        if self.mode is SnapshotMode.REPLAY:
            return await self._replay(url, want_body)
        result = await self._live().fetch(url, want_body=want_body)
        if self.mode in _WRITES:
            await self._write(url, result, want_body)
        return result

    async def fetch_all(
        self, urls: Sequence[str], *, want_body: bool = True, deadline: float | None = None
    ) -> dict[str, FetchResult]:
        """Fetch many URLs; in replay the first miss (in the given order) raises."""
        if self.mode is SnapshotMode.REPLAY:
            unique = list(dict.fromkeys(urls))
            got = await asyncio.gather(
                *(self._replay(u, want_body) for u in unique), return_exceptions=True
            )
            for g in got:  # deterministic: report the first miss in input order
                if isinstance(g, BaseException):
                    raise g
            return {u: g for u, g in zip(unique, got, strict=True) if isinstance(g, FetchResult)}
        results = await self._live().fetch_all(urls, want_body=want_body, deadline=deadline)
        if self.mode in _WRITES:
            await asyncio.gather(*(self._write(u, r, want_body) for u, r in results.items()))
        return results

    async def aclose(self) -> None:
        """Close the live fetcher if one was built."""
        if self._inner is not None:
            inner, self._inner = self._inner, None
            await inner.aclose()


async def snapshot_search(
    store: SnapshotStore,
    mode: SnapshotMode | str,
    provider: str,
    query: str,
    call: Callable[[], Awaitable[Any]],
) -> Any:
    """Run one search call under ``mode``.

    ``call`` performs the real search and returns whatever the tool returns. Record and refresh
    store it (as JSON, with its rows read by :func:`~citeguard.search.normalize_search_results`)
    under (provider, literal query) and hand the original back; replay hands back the stored
    JSON (dicts and lists: objects the tool returned come back in their JSON form) or raises
    :class:`~citeguard.errors.SnapshotMiss` naming the query.
    """
    mode = SnapshotMode(mode)
    if mode is SnapshotMode.LIVE:
        return await call()
    if mode is SnapshotMode.REPLAY:
        rec = await store.get_search(provider, query)
        if rec is None:
            raise SnapshotMiss("search", f"{provider}: {query}")
        return rec.raw
    raw = await call()
    await store.put_search(search_record(provider, query, raw))
    return raw


def search_record(provider: str, query: str, raw: Any, *, elapsed_ms: float = 0.0) -> SearchRecord:
    """The record stored for a search: the literal query, the tool's result JSON and its rows."""
    return SearchRecord(
        query=query,
        provider=provider,
        results=normalize_search_results(raw),
        raw=to_jsonable_python(raw, fallback=str),
        elapsed_ms=elapsed_ms,
    )


async def snapshot_page(
    store: SnapshotStore,
    mode: SnapshotMode | str,
    url: str,
    extractor_version: str,
    extract: Callable[[], Awaitable[Page]],
) -> Page:
    """Run one extraction under ``mode``.

    Extraction is a pure function of the (snapshotted) body and the extractor version, so a
    replay miss is not an error: the page is extracted again, without touching the network,
    and not written (replay is read only).
    """
    mode = SnapshotMode(mode)
    if mode is SnapshotMode.LIVE:
        return await extract()
    if mode is SnapshotMode.REPLAY:
        hit = await store.get_page(url, extractor_version)
        return hit if hit is not None else await extract()
    page = await extract()
    await store.put_page(url, extractor_version, page)
    return page


# --------------------------------------------------------------------------------------------
# One test case's snapshot (what the pytest fixture hands out)
# --------------------------------------------------------------------------------------------

_CURRENT: contextvars.ContextVar[CaseSnapshot | None] = contextvars.ContextVar(
    "citeguard_case_snapshot", default=None
)


def current_snapshot() -> CaseSnapshot | None:
    """The snapshot of the test case running now (set by the pytest plugin), or None."""
    return _CURRENT.get()


@dataclass(frozen=True)
class CaseSnapshot:
    """A store, the mode this case runs in, and the case id its baseline is recorded under."""

    store: SnapshotStore
    mode: SnapshotMode
    case_id: str

    def fetcher(self, inner_factory: Callable[[], FetcherLike] | None = None) -> SnapshotFetcher:
        """A fetcher for this case (``inner_factory`` is never called in replay)."""
        return SnapshotFetcher(inner_factory, self.store, self.mode)

    async def search(self, provider: str, query: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """Run a search call under this case's mode (see :func:`snapshot_search`)."""
        return await snapshot_search(self.store, self.mode, provider, query, call)

    async def record_verdict(self, verdict: Verdict) -> None:
        """Record the verdict as this case's baseline (record/refresh only; replay is read only)."""
        if self.mode in _WRITES:
            await self.store.record_verdict(self.case_id, verdict)

    async def baseline(self) -> Verdict | None:
        """This case's recorded baseline verdict."""
        return await self.store.get_verdict(self.case_id)

    @property
    def is_replay(self) -> bool:
        return self.mode is SnapshotMode.REPLAY

    def activate(self) -> contextvars.Token[CaseSnapshot | None]:
        """Make this the :func:`current_snapshot` (the plugin does this around each test)."""
        return _CURRENT.set(self)

    @staticmethod
    def deactivate(token: contextvars.Token[CaseSnapshot | None]) -> None:
        _CURRENT.reset(token)

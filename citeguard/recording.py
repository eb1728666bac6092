"""What a guarded run records: the agent's searches, each literal query with its results.

The searches of one run live in a :class:`contextvars.ContextVar`, not in global state: each
run (task) sees its own list, and tasks the agent spawns inherit it. :func:`wrap_search` wraps
the agent's search tool so every call is recorded (and snapshotted, and traced) while the agent
gets back exactly what the tool returned.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, ParamSpec, TypeVar, cast

from citeguard.models import SearchRecord
from citeguard.search import normalize_search_results
from citeguard.snapshot import SnapshotMode, SnapshotStore, snapshot_search
from citeguard.trace import Tracing

P = ParamSpec("P")
T = TypeVar("T")

_RUN_SEARCHES: contextvars.ContextVar[list[SearchRecord] | None] = contextvars.ContextVar(
    "citeguard_run_searches", default=None
)


@contextmanager
def recording_run() -> Iterator[list[SearchRecord]]:
    """Record the searches made inside this block (one guarded run) into the list it yields."""
    searches: list[SearchRecord] = []
    token = _RUN_SEARCHES.set(searches)
    try:
        yield searches
    finally:
        _RUN_SEARCHES.reset(token)


def run_searches() -> list[SearchRecord]:
    """A copy of the searches the current run has recorded so far (none outside a run)."""
    return list(_RUN_SEARCHES.get() or [])


def wrap_search(
    search_fn: Callable[P, T],
    *,
    provider: str | None,
    tracing: Tracing,
    store: SnapshotStore | None,
    mode: SnapshotMode,
    now: Callable[[], datetime] | None = None,
) -> Callable[P, T]:
    """The search tool, recorded: see the module docstring. ``now`` is the clock result ages
    ("3 days ago") are read against (the Guard's)."""
    name: str = provider or str(getattr(search_fn, "__name__", "search"))

    def _record(query: str, raw: Any, elapsed: float) -> SearchRecord:
        rec = SearchRecord(
            query=query,
            provider=name,
            results=normalize_search_results(raw, now=now() if now is not None else None),
            raw=_json_safe(raw),
            # replays are compared byte for byte: wall-clock times are zeroed there
            elapsed_ms=0.0 if mode is SnapshotMode.REPLAY else elapsed * 1000.0,
        )
        runs = _RUN_SEARCHES.get()
        if runs is not None:
            runs.append(rec)
        return rec

    if inspect.iscoroutinefunction(search_fn):

        @functools.wraps(search_fn)
        async def awrapper(*args: Any, **kwargs: Any) -> Any:
            query = _query_of(args, kwargs)
            t0 = time.perf_counter()
            # RETRIEVER span around the whole call; the wire call gets its own TOOL child
            # (absent on a snapshot replay, where nothing goes over the wire)
            with tracing.retriever_span(query, provider=name) as traced:

                async def call() -> Any:
                    with traced.tool():
                        fn = cast(Callable[..., Awaitable[Any]], search_fn)
                        return await fn(*args, **kwargs)

                if store is not None:
                    raw = await snapshot_search(store, mode, name, query, call)
                else:
                    raw = await call()
                traced.record(_record(query, raw, time.perf_counter() - t0))
            return raw

        return cast(Callable[P, T], awrapper)

    @functools.wraps(search_fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        query = _query_of(args, kwargs)
        t0 = time.perf_counter()
        with tracing.retriever_span(query, provider=name) as traced:
            with traced.tool():
                raw = search_fn(*args, **kwargs)
            traced.record(_record(query, raw, time.perf_counter() - t0))
        return raw

    return wrapper


def _query_of(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    for k in ("query", "q", "search_query", "input"):
        if isinstance(kwargs.get(k), str):
            return str(kwargs[k])
    return str(args[0]) if args else ""


def _json_safe(raw: Any) -> Any:
    try:
        return json.loads(json.dumps(raw, default=str))
    except (TypeError, ValueError):
        return repr(raw)


__all__ = ["recording_run", "run_searches", "wrap_search"]

"""What the framework callback handlers share: runs grouped under their root, the searches
recorded per root, and the check when the root ends.

A framework reports a run tree as events: each run (a chain, a chat-model call, a tool call, a
retrieval, a query) has an id and its parent's id. :class:`Runs` maps every live run to its
root, so the searches of concurrent roots never mix, and forgets a root and all its runs when
the root ends or fails: memory is bounded by what is in flight (and capped even when a framework
never reports an end). :class:`RunChecker` checks a root's answer with :meth:`Guard.check` on the
searches recorded under it, inside a ``citeguard.callback`` span, keeps the most recent verdicts
by run id, and hands each one to the user's hook.

No framework is imported here: ``langchain_callback`` and ``llamaindex_handler`` use it.
"""

from __future__ import annotations

import inspect
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from citeguard import Attempt, CitationRejected, Guard, GuardResult, SearchRecord, Verdict
from citeguard.errors import PolicyError
from citeguard.feedback import render_feedback
from citeguard.search import as_search_record

__all__ = [
    "MAX_LIVE_ROOTS",
    "MAX_SEARCHES_PER_RUN",
    "HandlerMode",
    "RunChecker",
    "RunVerdict",
    "Runs",
    "VerdictHook",
]

K = TypeVar("K", bound=Hashable)

HandlerMode = Literal["report", "raise"]
"""``report``: keep each verdict (and hand it to the hook); ``raise``: also raise
:class:`~citeguard.CitationRejected` for a failing answer."""

#: Roots in flight at once, at most; past it the oldest is forgotten (a framework that never
#: reports a root's end must not grow the handler without bound).
MAX_LIVE_ROOTS = 4096
#: Searches recorded per root, at most (an agent looping on its search tool).
MAX_SEARCHES_PER_RUN = 256


class RunVerdict(BaseModel):
    """The verdict on one root run's answer, with what it was checked on.

    ``verdict`` equals ``await guard.check(answer, question=question, searches=searches)``.
    """

    model_config = ConfigDict(frozen=True)

    run_id: str
    framework: Literal["langchain", "llamaindex"]
    question: str
    answer: str
    searches: list[SearchRecord]
    verdict: Verdict

    @property
    def passed(self) -> bool:
        """Whether the answer passed the gate."""
        return self.verdict.passed

    def result(self) -> GuardResult:
        """This run as a one-attempt :class:`~citeguard.GuardResult` (nothing was regenerated):
        what :class:`~citeguard.CitationRejected` carries in ``raise`` mode. Its message is the
        guard's feedback on a failing answer (what failed, which URLs not to cite again)."""
        verdict = self.verdict
        feedback = render_feedback(
            verdict, attempt=1, exclude_urls=frozenset(verdict.offending_urls)
        )
        return GuardResult(
            answer=self.answer,
            passed=verdict.passed,
            verdict=verdict,
            attempts=[
                Attempt(number=1, answer=self.answer, verdict=verdict, searches=self.searches)
            ],
            outcome="passed" if verdict.passed else "failed",
            message="passed on attempt 1" if verdict.passed else feedback.message,
        )


VerdictHook = Callable[[RunVerdict], Awaitable[None] | None]
"""Called with each verdict (sync or async) before the handler returns it or raises."""


@dataclass
class _Root(Generic[K]):
    """One root run in flight: its question, its searches, the runs under it."""

    question: str = ""
    searches: list[SearchRecord] = field(default_factory=list)
    members: set[K] = field(default_factory=set)
    # search runs started and not ended: run id -> (query, provider, start time)
    pending: dict[K, tuple[str, str, float]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # what a framework keeps per root


class Runs(Generic[K]):
    """Live runs, each mapped to its root; see the module docstring.

    A run whose parent is unknown (``None``, or a run this handler never saw) is a root.
    """

    def __init__(self, *, max_roots: int = MAX_LIVE_ROOTS) -> None:
        self._root_of: dict[K, K] = {}
        self._roots: OrderedDict[K, _Root[K]] = OrderedDict()
        self._max_roots = max_roots

    def __len__(self) -> int:
        """How many runs are in flight (roots and the runs under them)."""
        return len(self._root_of)

    def enter(self, run_id: K, parent_id: K | None) -> _Root[K]:
        """A run started; returns its root's state."""
        root_id = self._root_of.get(parent_id) if parent_id is not None else None
        root = self._roots.get(root_id) if root_id is not None else None
        if root is None or root_id is None:
            root_id, root = run_id, _Root()
            self._roots[run_id] = root
            if len(self._roots) > self._max_roots:
                self.close(next(iter(self._roots)))
        self._root_of[run_id] = root_id
        root.members.add(run_id)
        return root

    def is_root(self, run_id: K) -> bool:
        """Whether ``run_id`` is a root in flight."""
        return run_id in self._roots

    def root(self, run_id: K) -> _Root[K] | None:
        """The state of the root ``run_id`` belongs to (``None`` for an unknown run)."""
        root_id = self._root_of.get(run_id)
        return self._roots.get(root_id) if root_id is not None else None

    def exit(self, run_id: K) -> None:
        """A run under a root ended (a root ends with :meth:`close`)."""
        root = self.root(run_id)
        if root is not None and run_id not in self._roots:
            root.members.discard(run_id)
            root.pending.pop(run_id, None)
            del self._root_of[run_id]

    def close(self, root_id: K) -> _Root[K] | None:
        """Forget the root ``root_id`` and every run under it; returns its state."""
        root = self._roots.pop(root_id, None)
        if root is None:
            return None
        for member in root.members:
            self._root_of.pop(member, None)
        self._root_of.pop(root_id, None)
        return root

    def begin_search(self, run_id: K, parent_id: K | None, query: str, provider: str) -> None:
        """A search run (a retriever, a search tool) started with this literal query."""
        root = self.enter(run_id, parent_id)
        root.pending[run_id] = (query, provider, time.perf_counter())

    def end_search(
        self, run_id: K, raw: Any, *, keep_empty: bool = True, now: datetime | None = None
    ) -> SearchRecord | None:
        """The search run ended with ``raw`` (what the tool returned, in any shape
        :func:`~citeguard.search.normalize_search_results` reads): recorded under its root,
        as :meth:`Guard.wrap_search` records it. ``keep_empty=False``: a call that returned
        no result with a URL is not recorded (a tool that may not be a search)."""
        root = self.root(run_id)
        started = root.pending.pop(run_id, None) if root is not None else None
        self.exit(run_id)
        if root is None or started is None or len(root.searches) >= MAX_SEARCHES_PER_RUN:
            return None
        query, provider, t0 = started
        record = as_search_record((query, raw), provider=provider, now=now)
        if not record.results and not keep_empty:
            return None
        record = record.model_copy(update={"elapsed_ms": (time.perf_counter() - t0) * 1000.0})
        root.searches.append(record)
        return record


class _Bounded(Mapping[str, RunVerdict]):
    """The most recent verdicts by run id (a read-only view; oldest dropped past ``keep``)."""

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._items: OrderedDict[str, RunVerdict] = OrderedDict()

    def add(self, verdict: RunVerdict) -> None:
        self._items[verdict.run_id] = verdict
        self._items.move_to_end(verdict.run_id)
        while len(self._items) > self._keep:
            self._items.popitem(last=False)

    def __getitem__(self, key: str) -> RunVerdict:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class RunChecker:
    """Checks a root run's answer and delivers the verdict (see the module docstring)."""

    def __init__(
        self,
        guard: Guard,
        *,
        framework: Literal["langchain", "llamaindex"],
        mode: HandlerMode = "report",
        on_verdict: VerdictHook | None = None,
        keep: int = 1000,
    ) -> None:
        if mode not in ("report", "raise"):
            raise PolicyError(f"mode must be 'report' or 'raise', not {mode!r}")
        if keep < 1:
            raise PolicyError(f"keep must be at least 1, not {keep!r}")
        if not isinstance(guard, Guard):
            raise PolicyError("guard must be a citeguard.Guard")
        self.guard = guard
        self.framework: Literal["langchain", "llamaindex"] = framework
        self.mode: HandlerMode = mode
        self.on_verdict = on_verdict
        self._verdicts = _Bounded(keep)

    @property
    def verdicts(self) -> Mapping[str, RunVerdict]:
        """The most recent verdicts by run id."""
        return self._verdicts

    async def check(
        self, run_id: str, *, question: str, answer: str, searches: list[SearchRecord]
    ) -> RunVerdict:
        """Check ``answer`` with the root's searches; keep the verdict, then call the hook.
        Raises nothing for a failing answer (see :meth:`deliver`)."""
        guard = self.guard
        with guard.tracing.span(
            "citeguard.callback",
            kind="GUARDRAIL",
            input=question or answer,
            attributes={
                "citeguard.framework": self.framework,
                "citeguard.run_id": run_id,
                "citeguard.queries": [s.query for s in searches],
            },
        ) as span:
            verdict = await guard.check(answer, question=question, searches=searches)
            guard.tracing.record_verdict(span, verdict, output=answer, axis_spans=False)
        got = RunVerdict(
            run_id=run_id,
            framework=self.framework,
            question=question,
            answer=answer,
            searches=searches,
            verdict=verdict,
        )
        self._verdicts.add(got)
        if self.on_verdict is not None:
            out = self.on_verdict(got)
            if inspect.isawaitable(out):
                await out
        return got

    def deliver(self, got: RunVerdict) -> RunVerdict:
        """``got``, or in ``raise`` mode :class:`~citeguard.CitationRejected` when it failed."""
        if self.mode == "raise" and not got.passed:
            result = got.result()
            raise CitationRejected(result.message, result)
        return got

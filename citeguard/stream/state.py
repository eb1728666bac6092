"""What one stream holds: the text so far, when each chunk arrived, the early fetches and
sentences, what was released or held; the events queue."""

from __future__ import annotations

import asyncio
import bisect
import contextvars
import time
from collections.abc import (
    Callable,
    Mapping,
    Sequence,
)
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from citeguard.checks.entail import Entailer
from citeguard.checks.freshness import RegimeClassifier
from citeguard.checks.judge_usage import JudgeMeter
from citeguard.checks.validity import (
    ExtractedPage,
    ScoreCache,
)
from citeguard.exclusions import current_failures, split_excluded
from citeguard.extract_stage import ExtractStage
from citeguard.loop_turns import LoopTurns
from citeguard.models import (
    Answer,
    Claim,
    FetchResult,
    FreshnessClass,
    SearchRecord,
    Verdict,
)
from citeguard.policy import Policy
from citeguard.snapshot import SnapshotFetcher
from citeguard.stream.events import (
    StreamEvent,
    StreamMode,
)
from citeguard.stream.sentences import (
    _Key,
    _Unit,
)
from citeguard.trace import Tracing
from citeguard.web.fetch import Fetcher
from citeguard.web.soft404 import CatchAllProbes
from citeguard.web.urls import normalize_all

# --------------------------------------------------------------------------------------------
# What the stream needs of the Guard
# --------------------------------------------------------------------------------------------


class _GuardParts(Protocol):
    """The Guard's long-lived pieces this module shares (so the pages it fetches early are the
    ones ``check()`` finds)."""

    @property
    def policy(self) -> Policy: ...
    @property
    def tracing(self) -> Tracing: ...
    @property
    def _scores(self) -> ScoreCache: ...
    @property
    def _pages(self) -> ExtractStage: ...
    @property
    def _regimes(self) -> RegimeClassifier: ...
    @property
    def _now(self) -> Callable[[], datetime]: ...
    @property
    def turns(self) -> LoopTurns: ...

    def _get_fetcher(self) -> Fetcher | SnapshotFetcher: ...
    def _get_entailer(self) -> Entailer | None: ...
    def _judge_run(self) -> AbstractContextManager[JudgeMeter]: ...
    async def _prepare_snapshot(self) -> None: ...
    def _catch_all_probes(self) -> CatchAllProbes: ...

    async def check(
        self,
        answer: str | Sequence[Mapping[str, Any]],
        *,
        question: str = "",
        searches: Sequence[SearchRecord] | None = None,
        exclude_urls: frozenset[str] | set[str] = frozenset(),
    ) -> Verdict: ...

    async def run(self, answer_fn: Callable[..., Any], question: str, /, **kwargs: Any) -> Any: ...


@dataclass
class _Fetched:
    """A URL fetched (and its page extracted) ahead of the verdict."""

    result: FetchResult | None = None
    page: ExtractedPage | None = None
    soft_404: str | None = None
    failed: bool = False  # the early work raised (e.g. a snapshot miss): check() reports it


@dataclass
class _Sentence:
    claim: Claim
    answer: Answer  # the one-claim answer its citations are verified in
    task: asyncio.Task[None] | None = None
    verifying: bool = False  # its pages are in; only passage and entailment remain
    passed: bool | None = None
    failing: list[str] = field(default_factory=list)
    reason: str = ""
    # passed, but cites a source stale under an uncertain faster regime (fresher mode): waits
    # for the verdict
    fresh_wait: bool = False


class _StreamState:
    """The state of one stream (its session's attributes), and its events queue."""

    def __init__(
        self,
        guard: _GuardParts,
        *,
        question: str,
        mode: StreamMode,
        searches: list[SearchRecord] | None,
        exclude_urls: frozenset[str],
        late_citations: bool = False,
        fresher: bool = False,
    ) -> None:
        self.guard = guard
        self.policy = guard.policy
        self.question = question
        self.mode = mode
        # hold: a sentence citing nothing inline may be cited by a citation object still to
        # come; it waits for the verdict
        self.late_citations = late_citations and mode == "hold"
        # hold, in stream_run: a sentence citing a source stale under an uncertain faster
        # regime waits for the verdict, which may keep it pending for a fresher attempt
        self.fresher = fresher and mode == "hold"
        self.deferred = False
        self.searches = searches
        self.exclude_urls = exclude_urls
        # the run's record of why each URL was excluded (citeguard.exclusions): a URL an earlier
        # attempt failed keeps that failure; one excluded for its claims is checked again
        self._failures = current_failures()
        self.excluded, self._carried = split_excluded(normalize_all(exclude_urls), self._failures)
        self.queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
        policy = self.policy
        self.need_body = policy.passage.check_passages or (
            policy.entailment.check_entailment and policy.entailment.backend != "none"
        )
        self.t0 = time.perf_counter()
        self.text = ""
        self._chunk_ends: list[int] = []
        self._chunk_times: list[float] = []
        self.ended_at: float | None = None
        self.fetches: dict[str, asyncio.Task[_Fetched]] = {}
        self.early_urls = 0  # URLs whose fetch began before the stream ended
        self.sentences: dict[_Key, _Sentence] = {}
        self.units: list[_Unit] = []
        self.released_upto = 0
        self.stopped = False  # hold: a sentence failed; nothing more is released
        self.hold_ms: list[float] = []
        self.held_sentences = 0
        self.released_parts: list[str] = []
        self.held_parts: list[str] = []
        self._dirty = asyncio.Event()
        self._cut = 0
        self._next_parse = 0.0
        self._span: Any = None
        self._check_ctx: contextvars.Context | None = None
        self._regime: asyncio.Task[FreshnessClass] | None = None
        self._entailer: Entailer | None = None
        self._after_ms = 0.0

    # ---------------------------------------------------------------- driving

    def _ms(self) -> float:
        return (time.perf_counter() - self.t0) * 1000.0

    def emit(self, event: StreamEvent) -> None:
        self.queue.put_nowait(event)

    def _arrived(self, offset: int) -> float:
        """When the character at ``offset`` arrived."""
        i = bisect.bisect_right(self._chunk_ends, offset)
        return self._chunk_times[min(i, len(self._chunk_times) - 1)]


def _retrieve(task: asyncio.Future[Any]) -> None:
    if task.done() and not task.cancelled():
        task.exception()  # retrieved: a failure nobody awaited is not logged


def _span_event(span: Any, name: str, attrs: Mapping[str, Any]) -> None:
    if span is None:
        return
    with suppress(Exception):
        span.add_event(name, {k: v for k, v in attrs.items() if v is not None})


def _set_attrs(span: Any, attrs: Mapping[str, Any]) -> None:
    if span is None:
        return
    for key, value in attrs.items():
        with suppress(Exception):
            span.set_attribute(key, value)

"""Guard: run the gate on an answer, and the reject-and-regenerate loop around an answer function.

Data flows one way: parse → fetch → extract → check → verdict → regenerate. The Guard owns the
long-lived pieces (one fetcher with its connection pool and TTL cache, the entailer, the snapshot
store) and nothing else; every run's state lives in that run.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import inspect
import json
import os
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar, cast

from pydantic import BaseModel, ConfigDict

from citeguard.cache import (
    SnapshotFetcher,
    SnapshotMode,
    SnapshotStore,
    prepare_snapshot,
    snapshot_search,
)
from citeguard.checks.diversity import check_diversity, classify_source
from citeguard.checks.entail import Entailer, make_entailer
from citeguard.checks.freshness import (
    FreshnessClass,
    JudgeFreshnessClassifier,
    Regime,
    check_freshness,
    classify_freshness,
)
from citeguard.checks.query import JudgeQueryScorer, check_queries
from citeguard.checks.validity import ExtractedPage, check_validity
from citeguard.errors import CitationRejected, PolicyError
from citeguard.feedback import Feedback, render_feedback, strip_answer
from citeguard.models import (
    Answer,
    Attempt,
    AxisName,
    AxisResult,
    CitationReport,
    FetchResult,
    GuardResult,
    Page,
    SearchRecord,
    Verdict,
)
from citeguard.parse import parse_answer
from citeguard.policy import FreshnessPolicy, Policy, QueryPolicy
from citeguard.search import normalize_search_results
from citeguard.trace import Tracing
from citeguard.web.fetch import Fetcher, Resolver
from citeguard.web.page import EXTRACTION_VERSION, extract_page
from citeguard.web.urls import UrlProblem, normalize_url

P = ParamSpec("P")
T = TypeVar("T")

_DEFAULT: Any = object()
_PAGE_CACHE_SIZE = 512
# (url, body length, body hash, extraction version): the in-process page cache key
_PageKey = tuple[str, int, int, str]
_INLINE_PARSE_CHARS = 4_000  # measured: a 10 kB answer parses in ~4 ms

# The searches recorded during one guarded run. A ContextVar, not global state: each run (task)
# sees its own list, and tasks the agent spawns inherit it.
_RUN_SEARCHES: contextvars.ContextVar[list[SearchRecord] | None] = contextvars.ContextVar(
    "citeguard_run_searches", default=None
)


class Synthesis(BaseModel):
    """What an answer function may return instead of a plain string, to report its cost."""

    model_config = ConfigDict(frozen=True)

    text: str
    cost: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


AnswerFn = Callable[..., Awaitable[str | Synthesis] | str | Synthesis]


class Guard:
    """The citation guard.

    ``policy``: every threshold and switch. ``entailer``: an :class:`Entailer`, ``None`` to
    disable entailment, or omitted to build the one ``policy.entailment.backend`` names.
    ``resolver``: e.g. ``StaticResolver({"news.example.com": "127.0.0.1"})``. ``cache`` and
    ``snapshot_mode``: a :class:`SnapshotStore` to record or replay every web interaction.
    ``now``: the clock for freshness (injectable for tests). ``extract_executor``: where page
    extraction runs (default: the loop's thread pool). A service with many answers in flight
    can pass a ``ProcessPoolExecutor`` (e.g. ``ProcessPoolExecutor(1, initializer=os.nice,
    initargs=(10,))``): extraction threads compete with the event loop for the GIL and the CPU,
    which raises its lag (benchmarks/README.md). The Guard does not shut it down.
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        cache: SnapshotStore | None = None,
        snapshot_mode: SnapshotMode | str | None = None,
        entailer: Entailer | None = _DEFAULT,
        resolver: Resolver | None = None,
        tracer_provider: Any = None,
        now: Callable[[], datetime] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        extract_executor: Executor | None = None,
    ) -> None:
        self.policy = policy if policy is not None else Policy()
        if not isinstance(self.policy, Policy):
            raise PolicyError("policy must be a citeguard.Policy")
        self.cache = cache
        if snapshot_mode is None:
            mode = SnapshotMode.RECORD if cache is not None else SnapshotMode.LIVE
        else:
            mode = SnapshotMode(snapshot_mode)
        if mode is not SnapshotMode.LIVE and cache is None:
            raise PolicyError(f"snapshot_mode={mode.value!r} needs a cache (a SnapshotStore)")
        self.snapshot_mode = mode
        self._resolver = resolver
        self._sleep = sleep
        self._now = now or (lambda: datetime.now(UTC))
        self._entailer_given = entailer is not _DEFAULT
        self._owns_entailer = False
        self._entailer: Entailer | None = entailer if self._entailer_given else None
        self._fetcher: Fetcher | SnapshotFetcher | None = None
        self._pages: OrderedDict[_PageKey, ExtractedPage] = OrderedDict()
        # extractions in progress, shared by concurrent checks that cite the same page
        self._extracting: dict[_PageKey, asyncio.Task[ExtractedPage]] = {}
        # One extraction thread by default: lexbor and pypdf hold the GIL while they parse, so
        # more threads add no throughput on CPython but make the event loop queue behind them.
        self._given_executor = extract_executor
        self._owned_executor: ThreadPoolExecutor | None = None
        self.tracing = Tracing(tracer_provider, now=self._now)
        self._snapshot_ready = False
        self._fjudge: JudgeFreshnessClassifier | None = None
        self._regimes: dict[str, FreshnessClass] = {}
        self._qjudge: JudgeQueryScorer | None = None

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Guard:
        await self.warm_up()
        return self

    async def warm_up(self) -> None:
        """Load the entailment model now rather than inside the first request.

        Importing torch and reading weights holds the GIL for long stretches; doing it at
        start-up keeps that stall out of a user's answer. ``async with Guard(...)`` calls this.
        """
        entailer = self._get_entailer()
        warm = getattr(entailer, "warm_up", None)
        if warm is not None:
            await warm()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool and the entailer's executor."""
        if self._fetcher is not None:
            await self._fetcher.aclose()
            self._fetcher = None
        for judge in (self._fjudge, self._qjudge):
            if judge is not None:
                await judge.aclose()
        self._fjudge = self._qjudge = None
        # an entailer the caller passed in is the caller's to close
        closer = getattr(self._entailer, "aclose", None) if self._owns_entailer else None
        if closer is not None:
            await closer()
        if self._owned_executor is not None:
            self._owned_executor.shutdown(wait=False, cancel_futures=True)
            self._owned_executor = None

    def _executor(self) -> Executor:
        if self._given_executor is not None:
            return self._given_executor
        if self._owned_executor is None:
            self._owned_executor = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="citeguard-extract"
            )
        return self._owned_executor

    def _get_fetcher(self) -> Fetcher | SnapshotFetcher:
        if self._fetcher is None:
            policy, resolver, sleep = self.policy.fetch, self._resolver, self._sleep

            def factory() -> Fetcher:
                return Fetcher(policy, resolver=resolver, sleep=sleep)

            if self.cache is None:
                self._fetcher = factory()
            else:
                self._fetcher = SnapshotFetcher(factory, self.cache, self.snapshot_mode)
        return self._fetcher

    def _freshness_judge(self) -> JudgeFreshnessClassifier | None:
        if self._fjudge is None:
            self._fjudge = _judge_for(self.policy.freshness, JudgeFreshnessClassifier)
        return self._fjudge

    def _query_judge(self) -> JudgeQueryScorer | None:
        if self._qjudge is None:
            self._qjudge = _judge_for(self.policy.query, JudgeQueryScorer)
        return self._qjudge

    def _get_entailer(self) -> Entailer | None:
        if not self.policy.entailment.check_entailment:
            return None
        if not self._entailer_given and self._entailer is None:
            self._entailer = make_entailer(self.policy.entailment)
            self._entailer_given = self._owns_entailer = True
        return self._entailer

    # ------------------------------------------------------------------ the gate

    async def check(
        self,
        answer: str | Sequence[Mapping[str, Any]],
        *,
        question: str = "",
        searches: Sequence[SearchRecord] | None = None,
        exclude_urls: frozenset[str] | set[str] = frozenset(),
    ) -> Verdict:
        """Run the four-axis gate on an answer you already have."""
        t0 = time.perf_counter()
        if searches is None:
            searches = list(_RUN_SEARCHES.get() or [])
        await self._prepare_snapshot()
        with self.tracing.span("citeguard.check", kind="GUARDRAIL", input=_as_text(answer)) as sp:
            parsed = await self._parse(answer)
            excluded = _normalise_all(exclude_urls)
            urls = [u for u in parsed.urls if u not in excluded]
            need_body = self.policy.passage.check_passages or (
                self.policy.entailment.check_entailment and self.policy.entailment.backend != "none"
            )
            fetcher = self._get_fetcher()
            now = self._now()
            fjudge = self._freshness_judge()
            if fjudge is None:
                fclass = classify_freshness(question, now=now)
            else:
                # one judge call per question, not per attempt
                fclass = self._regimes.get(question) or await fjudge.classify(question, now=now)
                if fclass.cues[:1] and fclass.cues[0].startswith("judge:"):
                    # a fallback (judge down) is not remembered: the next check asks again
                    self._regimes[question] = fclass
                    if len(self._regimes) > _PAGE_CACHE_SIZE:
                        del self._regimes[next(iter(self._regimes))]
            wants_dates = self.policy.freshness.enabled and fclass.regime is not Regime.INSENSITIVE
            early: dict[str, asyncio.Future[ExtractedPage | None]] = {}
            with self.tracing.span(
                "citeguard.fetch", kind="TOOL", input=f"{len(urls)} URLs"
            ) as fetch_span:
                fetched = await self._fetch_all(
                    fetcher, urls, want_body=need_body, date_fallback=wants_dates, early=early
                )
            extracted = (
                await self._extract_all(fetched, date_fallback=wants_dates, early=early)
                if need_body
                else {}
            )
            pages = {u: e.page for u, e in extracted.items()}
            retrieved: frozenset[str] | None = None
            if searches:
                retrieved = _normalise_all({r.url for s in searches for r in s.results})
            validity = await check_validity(
                parsed,
                fetched,
                extracted,
                policy=self.policy,
                entailer=self._get_entailer(),
                excluded=excluded,
                retrieved=retrieved,
            )
            citations = _with_source_kinds(validity.citations, pages)
            self.tracing.citation_spans(citations, fetch_span=fetch_span)
            text = parsed.text
            diversity = (
                check_diversity(question, citations, self.policy.diversity)
                if self.policy.diversity.enabled
                else _skipped("diversity")
            )
            search_dates = {
                r.url: r.published for s in searches for r in s.results if r.published is not None
            }
            freshness = (
                check_freshness(
                    question,
                    text,
                    citations,
                    self.policy.freshness,
                    now=now,
                    search_dates=search_dates,
                    fclass=fclass,
                )
                if self.policy.freshness.enabled
                else _skipped("freshness")
            )
            queries = [s.query for s in searches]
            qjudge = self._query_judge()
            if not self.policy.query.enabled:
                query = _skipped("query")
            elif qjudge is not None:
                query = await qjudge.check_queries(question, queries, self.policy.query)
            else:
                query = check_queries(question, queries, self.policy.query)
            axes = {a.name: a for a in (validity.axis, diversity, freshness, query)}
            passed = all(a.passed for a in axes.values() if a.gating)
            offending = set(validity.offending_urls)
            for a in (diversity, freshness):
                if a.gating:
                    offending.update(a.offending_urls)
            verdict = Verdict(
                passed=passed,
                axes=axes,
                citations=citations,
                claims=validity.claims,
                findings=list(parsed.findings),
                offending_urls=frozenset(offending),
                elapsed_ms=(time.perf_counter() - t0) * 1000.0,
            )
            if self.snapshot_mode is SnapshotMode.REPLAY:
                verdict = _without_timings(verdict)
            self.tracing.record_verdict(sp, verdict)
            return verdict

    async def _prepare_snapshot(self) -> None:
        # once per Guard: in refresh mode every page of this Guard's runs lands in one new version
        if self.cache is not None and not self._snapshot_ready:
            self._snapshot_ready = True
            await prepare_snapshot(self.cache, self.snapshot_mode)

    async def _parse(self, answer: str | Sequence[Mapping[str, Any]]) -> Answer:
        schemes = self.policy.fetch.allowed_schemes
        if isinstance(answer, str) and len(answer) > _INLINE_PARSE_CHARS:
            # long answers cost more than a millisecond to parse: keep them off the event loop
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                None, functools.partial(parse_answer, answer, allowed_schemes=schemes)
            )
        return parse_answer(answer, allowed_schemes=schemes)

    async def _fetch_all(
        self,
        fetcher: Fetcher | SnapshotFetcher,
        urls: Sequence[str],
        *,
        want_body: bool,
        date_fallback: bool,
        early: dict[str, asyncio.Future[ExtractedPage | None]],
    ) -> dict[str, FetchResult]:
        """Fetch every URL within the answer deadline.

        With bodies, each page's extraction starts (into ``early``) as soon as its own fetch
        completes, so parsing overlaps the wait for the slowest URL instead of following it
        (measured: ~3 ms a page, 150 ms for a 50-citation answer when done after the fetches).
        """
        deadline = self.policy.fetch.answer_deadline
        if not want_body or len(urls) < 2:
            return await fetcher.fetch_all(urls, want_body=want_body, deadline=deadline)

        async def one(url: str) -> FetchResult:
            res = (await fetcher.fetch_all([url], want_body=True, deadline=deadline))[url]
            early[url] = asyncio.ensure_future(self._extract_one(url, res, date_fallback))
            return res

        distinct = list(dict.fromkeys(urls))
        results = await asyncio.gather(*(one(u) for u in distinct))
        return dict(zip(distinct, results, strict=True))

    async def _extract_all(
        self,
        fetched: Mapping[str, FetchResult],
        *,
        date_fallback: bool,
        early: Mapping[str, asyncio.Future[ExtractedPage | None]] | None = None,
    ) -> dict[str, ExtractedPage]:
        """Extract every fetched body once (per content hash), off the event loop."""
        jobs: dict[str, asyncio.Future[ExtractedPage | None]] = {}
        for url, res in fetched.items():
            job = early.get(url) if early else None
            if job is None and res.body is not None and res.status.is_ok():
                job = asyncio.ensure_future(self._extract_one(url, res, date_fallback))
            if job is not None:
                jobs[url] = job
        out: dict[str, ExtractedPage] = {}
        if jobs:
            with self.tracing.span("citeguard.extract", kind="TOOL", input=f"{len(jobs)} pages"):
                done = await asyncio.gather(*jobs.values())
            for url, extracted in zip(jobs, done, strict=True):
                if extracted is not None:
                    out[url] = extracted
        return out

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
        version = key[3]
        stored = None
        store_key = ""
        if self.cache is not None:
            digest = await loop.run_in_executor(self._executor(), _digest, res.body)
            store_key = url + "#" + digest
            stored = await self.cache.get_page(store_key, version)
        # HTML parsing, PDF text and text normalisation are CPU work: keep them off the loop
        extracted = await loop.run_in_executor(
            self._executor(),
            functools.partial(
                _extract,
                res.body,
                url=res.final_url or url,
                content_type=res.content_type,
                headers=res.headers,
                date_fallback=date_fallback,
                page=stored,
            ),
        )
        self._remember(key, extracted)
        if self.cache is not None and self.snapshot_mode in (
            SnapshotMode.RECORD,
            SnapshotMode.REFRESH,
        ):
            await self.cache.put_page(store_key, version, extracted.page)
        return extracted

    def _remember(self, key: _PageKey, page: ExtractedPage) -> None:
        self._pages[key] = page
        if len(self._pages) > _PAGE_CACHE_SIZE:
            self._pages.popitem(last=False)

    # ------------------------------------------------------------------ searches

    def wrap_search(
        self, search_fn: Callable[P, T], *, provider: str | None = None
    ) -> Callable[P, T]:
        """Wrap the agent's search tool: each literal query and its results are recorded (and
        snapshotted, and traced) while the agent gets back exactly what the tool returned."""
        name: str = provider or str(getattr(search_fn, "__name__", "search"))
        guard = self

        def _query_of(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
            for k in ("query", "q", "search_query", "input"):
                if isinstance(kwargs.get(k), str):
                    return str(kwargs[k])
            return str(args[0]) if args else ""

        def _record(query: str, raw: Any, elapsed: float) -> SearchRecord:
            rec = SearchRecord(
                query=query,
                provider=name,
                results=normalize_search_results(raw),
                raw=_json_safe(raw),
                # replays are compared byte for byte: wall-clock times are zeroed there
                elapsed_ms=0.0 if guard.snapshot_mode is SnapshotMode.REPLAY else elapsed * 1000.0,
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
                with guard.tracing.retriever_span(query, provider=name) as traced:

                    async def call() -> Any:
                        with traced.tool():
                            fn = cast(Callable[..., Awaitable[Any]], search_fn)
                            return await fn(*args, **kwargs)

                    if guard.cache is not None:
                        raw = await snapshot_search(
                            guard.cache, guard.snapshot_mode, name, query, call
                        )
                    else:
                        raw = await call()
                    traced.record(_record(query, raw, time.perf_counter() - t0))
                return raw

            return cast(Callable[P, T], awrapper)

        @functools.wraps(search_fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
            query = _query_of(args, kwargs)
            t0 = time.perf_counter()
            with guard.tracing.retriever_span(query, provider=name) as traced:
                with traced.tool():
                    raw = search_fn(*args, **kwargs)
                traced.record(_record(query, raw, time.perf_counter() - t0))
            return raw

        return wrapper

    # ------------------------------------------------------------------ the loop

    def wrap(self, answer_fn: AnswerFn) -> Callable[..., Awaitable[GuardResult]]:
        """Decorator: ``await answer(question, **kwargs)`` now returns a :class:`GuardResult`."""

        @functools.wraps(answer_fn)
        async def guarded(question: str, /, **kwargs: Any) -> GuardResult:
            return await self.run(answer_fn, question, **kwargs)

        return guarded

    async def run(self, answer_fn: AnswerFn, question: str, /, **kwargs: Any) -> GuardResult:
        """Attempt → verdict → on failure regenerate without the offending URLs, within budget.

        Exceptions raised by ``answer_fn`` propagate unchanged: citeguard never hides the
        caller's own errors.
        """
        token = _RUN_SEARCHES.set([])
        try:
            with self.tracing.span(
                "citeguard.run", kind="GUARDRAIL", input=question, question=question
            ) as root:
                result = await self._loop(answer_fn, question, kwargs)
                self.tracing.record_result(root, result)
        finally:
            _RUN_SEARCHES.reset(token)
        if not result.passed and self.policy.on_fail == "raise":
            raise CitationRejected(result.message or "the answer failed the citation guard", result)
        return result

    async def _loop(
        self, answer_fn: AnswerFn, question: str, kwargs: dict[str, Any]
    ) -> GuardResult:
        policy = self.policy
        start = time.perf_counter()
        accepts_feedback = _accepts(answer_fn, "feedback")
        excluded: set[str] = set(kwargs.pop("exclude_urls", ()) or ())
        feedback: Feedback | None = None
        attempts: list[Attempt] = []
        total_cost = 0.0
        max_attempts = 1 if policy.on_fail == "report" else policy.max_attempts
        stop_reason = f"no passing answer after {max_attempts} attempt(s)"
        searches = _RUN_SEARCHES.get()
        assert searches is not None
        for number in range(1, max_attempts + 1):
            t0 = time.perf_counter()
            call_kwargs = dict(kwargs)
            call_kwargs["exclude_urls"] = frozenset(excluded)
            if accepts_feedback:
                call_kwargs["feedback"] = feedback
            searches_before = len(searches)
            with self.tracing.span(
                "citeguard.synthesize",
                kind="LLM",
                input=question,
                attributes={
                    "citeguard.attempt": number,
                    "citeguard.excluded_urls": sorted(excluded),
                    "citeguard.feedback": feedback.message if feedback else None,
                },
            ) as llm_span:
                out = await _call(answer_fn, question, call_kwargs)
                synth = out if isinstance(out, Synthesis) else Synthesis(text=str(out))
                self.tracing.record_llm(llm_span, synth)
            verdict = await self.check(
                synth.text,
                question=question,
                searches=searches[:] if searches else [],
                exclude_urls=frozenset(excluded),
            )
            attempts.append(
                Attempt(
                    number=number,
                    answer=synth.text,
                    verdict=verdict,
                    excluded_urls=frozenset(excluded),
                    feedback=feedback.message if feedback else None,
                    searches=searches[searches_before:],
                    elapsed_ms=0.0
                    if self.snapshot_mode is SnapshotMode.REPLAY
                    else (time.perf_counter() - t0) * 1000.0,
                    cost=synth.cost,
                )
            )
            total_cost += synth.cost or 0.0
            if verdict.passed:
                return GuardResult(
                    answer=synth.text,
                    passed=True,
                    verdict=verdict,
                    attempts=attempts,
                    outcome="passed",
                    message=f"passed on attempt {number}",
                )
            excluded |= set(verdict.offending_urls)
            feedback = render_feedback(verdict, attempt=number, exclude_urls=frozenset(excluded))
            elapsed = time.perf_counter() - start
            if policy.time_budget is not None and elapsed >= policy.time_budget:
                stop_reason = (
                    f"time budget of {policy.time_budget:g}s spent after {number} attempt(s)"
                )
                break
            if policy.cost_budget is not None and total_cost >= policy.cost_budget:
                stop_reason = (
                    f"cost budget of {policy.cost_budget:g} spent after {number} attempt(s)"
                )
                break
        return await self._exhausted(attempts, stop_reason)

    async def _exhausted(self, attempts: list[Attempt], why: str) -> GuardResult:
        last = attempts[-1]
        mode = self.policy.on_fail
        if mode == "report":
            return GuardResult(
                answer=last.answer,
                passed=False,
                verdict=last.verdict,
                attempts=attempts,
                outcome="reported",
                message="the answer failed the gate; findings are reported, nothing regenerated",
            )
        if mode == "strip":
            parsed = parse_answer(last.answer)
            text, n_claims, n_marks = strip_answer(parsed, last.verdict.offending_urls)
            note = (
                f"[citeguard removed {n_claims} claim(s) and {n_marks} citation(s) "
                "whose sources failed verification]"
            )
            text = f"{text}\n\n{note}" if text else note
            verdict = await self.check(text, exclude_urls=frozenset())
            return GuardResult(
                answer=text,
                passed=verdict.passed,
                verdict=verdict,
                attempts=attempts,
                outcome="stripped",
                message=f"{why}; stripped {n_claims} claim(s) and {n_marks} citation(s)",
            )
        # "return" and "raise": the best attempt (fewest failing axes, then fewest offenders)
        best = min(
            attempts,
            key=lambda a: (
                sum(1 for ax in a.verdict.axes.values() if ax.gating and not ax.passed),
                len(a.verdict.offending_urls),
                -a.number,
            ),
        )
        return GuardResult(
            answer=best.answer,
            passed=False,
            verdict=best.verdict,
            attempts=attempts,
            outcome="failed",
            message=why,
        )


# ---------------------------------------------------------------------- helpers


def _digest(body: bytes) -> str:
    return hashlib.blake2b(body, digest_size=16).hexdigest()


def _extract(
    body: bytes,
    *,
    url: str,
    content_type: str | None,
    headers: Mapping[str, str],
    date_fallback: bool,
    page: Page | None,
) -> ExtractedPage:
    if page is None:
        try:
            page = extract_page(
                body,
                url=url,
                content_type=content_type,
                headers=headers,
                date_fallback=date_fallback,
            )
        except Exception:  # a page no parser can read is a status on its citation, not a crash
            page = Page(url=url, kind="unsupported")
    return ExtractedPage.of(page)


_J = TypeVar("_J", JudgeFreshnessClassifier, JudgeQueryScorer)


def _judge_for(section: FreshnessPolicy | QueryPolicy, cls: type[_J]) -> _J | None:
    """The judge a policy section names, or None when it names none (or is disabled)."""
    if not (section.enabled and section.judge_base_url and section.judge_model):
        return None
    return cls(
        section.judge_base_url, section.judge_model, os.environ.get(section.judge_api_key_env)
    )


def _without_timings(verdict: Verdict) -> Verdict:
    """Replays are compared byte for byte; wall-clock timings would differ, so they are zeroed."""
    return verdict.model_copy(
        update={
            "elapsed_ms": 0.0,
            "citations": [c.model_copy(update={"elapsed_ms": 0.0}) for c in verdict.citations],
        }
    )


def _skipped(name: AxisName) -> AxisResult:
    return AxisResult(name=name, passed=True, evaluated=False, gating=False)


def _with_source_kinds(
    citations: list[CitationReport], pages: Mapping[str, Page]
) -> list[CitationReport]:
    out = []
    for c in citations:
        page = pages.get(c.normalized_url or "")
        kind = classify_source(
            c.final_url or c.url, page_types=page.types if page else (), title=c.title
        )
        out.append(c.model_copy(update={"primary": kind.primary}))
    return out


def _normalise_all(urls: set[str] | frozenset[str]) -> frozenset[str]:
    out: set[str] = set()
    for u in urls:
        try:
            out.add(normalize_url(u))
        except UrlProblem:
            out.add(u)
    return frozenset(out)


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return name in sig.parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()
    )


async def _call(fn: AnswerFn, question: str, kwargs: dict[str, Any]) -> str | Synthesis:
    if inspect.iscoroutinefunction(fn):
        return await fn(question, **kwargs)  # type: ignore[no-any-return]
    # a sync answer function (an LLM SDK call) blocks: run it in a thread (to_thread carries
    # the contextvars, so searches it makes are still recorded for this run)
    out = await asyncio.to_thread(fn, question, **kwargs)
    if inspect.isawaitable(out):
        return await out
    return out


def _as_text(answer: str | Sequence[Mapping[str, Any]]) -> str:
    if isinstance(answer, str):
        return answer
    return repr(list(answer))[:4000]


def _json_safe(raw: Any) -> Any:
    try:
        return json.loads(json.dumps(raw, default=str))
    except (TypeError, ValueError):
        return repr(raw)

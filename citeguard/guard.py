"""Guard: wires the stages into the gate, and the gate into the regenerate loop.

Data flows one way: parse → fetch → extract → verify citations → run the checks → build the
verdict → (in a guarded run) regenerate. Each stage has its own room; the Guard owns the
long-lived pieces (one fetcher with its connection pool and TTL cache, the extract stage with
its page cache, the entailer, the checks and their judges, the snapshot store) and nothing else:
every run's state lives in that run.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from citeguard.case_log import CaseLog
from citeguard.checks.base import CheckContext
from citeguard.checks.entail import Entailer, JudgeEntailer, make_entailer
from citeguard.checks.freshness import JudgeFreshnessClassifier, RegimeClassifier, dates_wanted
from citeguard.checks.judge import judge_for
from citeguard.checks.judge_usage import JudgeMeter, judge_run
from citeguard.checks.registry import build_checks
from citeguard.checks.scholarly import check_references
from citeguard.checks.sources import with_source_kinds
from citeguard.checks.validity import EarlyValidity, ScoreCache, check_validity, uncited_references
from citeguard.errors import CitationRejected, PolicyError
from citeguard.exclusions import carried_failures, exclusion_run, remember_failures
from citeguard.extract_stage import ExtractStage, Turns
from citeguard.loop import ON_FAIL, AnswerFn, Recheck, regenerate
from citeguard.loop_turns import LoopTurns
from citeguard.models import (
    Answer,
    FetchResult,
    GuardResult,
    SearchRecord,
    Verdict,
)
from citeguard.parse import AnswerLimits
from citeguard.policy import Policy
from citeguard.providers.resolve import resolve_answer
from citeguard.recording import recording_run, run_searches, wrap_search
from citeguard.repair import Repairer, repairer_for
from citeguard.search import as_search_records
from citeguard.snapshot import SnapshotFetcher, SnapshotMode, SnapshotStore, prepare_snapshot
from citeguard.stream import (
    ChunkSource,
    EventStream,
    StreamAnswerFn,
    StreamMode,
    stream_answer,
    stream_run,
)
from citeguard.trace import Tracing, answer_shown
from citeguard.verdict import build_verdict
from citeguard.warm import warm_parts
from citeguard.web.fetch import Fetcher, Resolver
from citeguard.web.soft404 import CatchAllProbes
from citeguard.web.urls import normalize_all

P = ParamSpec("P")
T = TypeVar("T")

_DEFAULT: Any = object()
_STARTS_PER_TURN = 4  # checks that start in one turn of the event loop, at most (~1 ms each)
_INLINE_CITATIONS = 64  # citations classified by the source table on the event loop, at most
_SPANS_PER_TURN = 128  # citation spans written between two turns of the event loop


class Guard:
    """The citation guard.

    ``policy``: every threshold and switch. ``entailer``: an :class:`Entailer`, ``None`` to
    disable entailment, or omitted to build the one ``policy.entailment.backend`` names.
    ``resolver``: e.g. ``StaticResolver({"news.example.com": "127.0.0.1"})``. ``cache`` and
    ``snapshot_mode``: a :class:`SnapshotStore` to record or replay every web interaction.
    ``now``: the clock for freshness (injectable for tests). ``extract_executor``: where page
    extraction runs instead of ``Policy.fetch.extract_in``'s choice (a thread for one-off
    checks, the niced extraction child once warmed up or under load; ``extract_worker``); the
    Guard does not shut a given one down.
    ``limits_redis``: a Redis URL whose per-host limits every replica using it shares
    (``Policy.fetch.per_host_concurrency`` / ``per_host_rate``, 429 pauses; extra ``redis``).
    ``log_to``: a JSONL file every guarded run (:meth:`run`, :meth:`wrap`, :meth:`stream_run`;
    not a bare :meth:`check`) appends its case to (:mod:`citeguard.case_log`), off the event
    loop; :meth:`aclose` closes it.
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
        limits_redis: str | None = None,
        log_to: str | os.PathLike[str] | None = None,
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
        self._limits_redis = limits_redis
        self._sleep = sleep
        self._now = now or (lambda: datetime.now(UTC))
        self._entailer_given = entailer is not _DEFAULT
        self._owns_entailer = False
        self._entailer: Entailer | None = entailer if self._entailer_given else None
        # the judge uncertain claims go to (Policy.on_uncertain_mode "judge"), built on first use
        self._cascade: JudgeEntailer | None = None
        self._fetcher: Fetcher | SnapshotFetcher | None = None
        self.tracing = Tracing(tracer_provider, now=self._now)
        self._pages = ExtractStage(
            store=cache,
            mode=mode,
            executor=extract_executor,
            span=self.tracing.span,
            limits=self.policy.fetch,
        )
        self._snapshot_ready = False
        # checks that begin their synchronous start (parse, pairs) in one turn of the loop: 200
        # started at once held it for ~270 ms
        self._starts = Turns(_STARTS_PER_TURN)
        self._turns = LoopTurns()  # the loop's turns, shared by this Guard's checks' CPU work
        self._case_log = CaseLog(log_to) if log_to is not None else None
        self._checks = build_checks(self.policy)
        # entailment scores by (backend, claim, evidence): later attempts reuse earlier ones
        self._scores = ScoreCache()
        self._regimes = RegimeClassifier(
            judge_for(
                self.policy,
                JudgeFreshnessClassifier,
                self.policy.freshness.enabled and self.policy.freshness.use_judge,
            ),
            model="default" if self.policy.freshness.regime_model else None,
            only_uncertain=self.policy.freshness.judge_only_uncertain,
        )

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Guard:
        await self._warm(wait_for_extraction=False)
        return self

    async def warm_up(self, *, every_child: bool = True) -> None:
        """Load the entailment model and start the extraction process now rather than inside
        the first request, and wait until the extraction process is ready (a service's
        start-up: ``citeguard serve`` calls this).

        Importing torch and reading weights holds the GIL for long stretches; doing it at
        start-up keeps that stall out of a user's answer. ``async with Guard(...)`` does the
        same but does not wait for the extraction process (niced, it imports citeguard in
        ~1 s of CPU, many seconds on a busy machine): pages are extracted in a thread until it
        is ready, and closing the Guard before then stops it. ``every_child=False``: return
        once one extraction child is up, the children loading what a date search reads
        (dateparser's locales, ~1.3-2.5 s of CPU each) beside their first pages.
        """
        await self._warm(wait_for_extraction=True, every_child=every_child)

    async def _warm(self, *, wait_for_extraction: bool, every_child: bool = True) -> None:
        await warm_parts(
            self._pages,
            self._get_entailer,
            self._regimes,
            wait_for_extraction=wait_for_extraction,
            every_child=every_child,
        )

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool, the judges, the entailer's executor, the extract thread
        and the extraction children (waited for, off the loop)."""
        if self._fetcher is not None:
            await self._fetcher.aclose()
            self._fetcher = None
        await self._regimes.aclose()
        for check in self._checks:
            await check.aclose()
        # an entailer the caller passed in is the caller's to close
        closer = getattr(self._entailer, "aclose", None) if self._owns_entailer else None
        if closer is not None:
            await closer()
        if self._cascade is not None:
            await self._cascade.aclose()
            self._cascade = None
        await self._pages.aclose()
        if self._case_log is not None:
            await self._case_log.aclose()

    @property
    def turns(self) -> LoopTurns:
        """The loop's turns this Guard's checks share their CPU work by (``citeguard serve``'s
        relays too): :meth:`LoopTurns.turn` before a stretch of it."""
        return self._turns

    def now(self) -> datetime:
        """The guard's clock (the ``now`` it was given, else the current UTC time): what it
        dates findings by and reads search results' relative ages ("3 days ago") against."""
        return self._now()

    def _get_fetcher(self) -> Fetcher | SnapshotFetcher:
        if self._fetcher is None:
            policy, resolver, sleep = self.policy.fetch, self._resolver, self._sleep
            limits = self._limits_redis

            def factory() -> Fetcher:
                return Fetcher(policy, resolver=resolver, sleep=sleep, limits_redis=limits)

            if self.cache is None:
                self._fetcher = factory()
            else:
                self._fetcher = SnapshotFetcher(factory, self.cache, self.snapshot_mode)
        return self._fetcher

    def _get_entailer(self) -> Entailer | None:
        if not self.policy.entailment.check_entailment:
            return None
        if not self._entailer_given and self._entailer is None:
            self._entailer = make_entailer(self.policy.entailment, self.policy.judge)
            self._entailer_given = self._owns_entailer = True
            offload = getattr(self._entailer, "offload_to", None)
            if offload is not None:  # its pure-Python work may go to the extraction children
                offload(self._pages.ready_worker, self.policy.fetch.extract_processes)
        return self._entailer

    def _get_cascade(self) -> JudgeEntailer | None:
        """The judge for the claims the entailer leaves uncertain: built when
        ``Policy.on_uncertain_mode`` is "judge" (``Policy.judge`` is configured), unless the
        entailer is itself a judge."""
        policy = self.policy
        if policy.on_uncertain_mode != "judge" or not policy.entailment.check_entailment:
            return None
        if isinstance(self._get_entailer(), JudgeEntailer):
            return None
        if self._cascade is None:
            self._cascade = JudgeEntailer(policy=policy.entailment, judge=policy.judge)
        return self._cascade

    # ------------------------------------------------------------------ the gate

    async def check(
        self,
        answer: str | Sequence[Mapping[str, Any]] | object,
        *,
        question: str = "",
        searches: Sequence[SearchRecord | Any] | Mapping[str, Any] | object | None = None,
        exclude_urls: frozenset[str] | set[str] = frozenset(),
        references: Sequence[Any] | Mapping[Any, Any] | None = None,
        documents: Mapping[int | str, str] | None = None,
    ) -> Verdict:
        """Run the four-axis gate on an answer you already have.

        ``answer``: text, structured items, or a provider response (OpenAI, Anthropic, Gemini,
        Perplexity: :mod:`citeguard.providers`). ``searches``: the agent's searches, as
        :func:`~citeguard.search.as_search_records` reads them: records, raw search responses
        in any shape :func:`~citeguard.search.normalize_search_results` reads (a Tavily, Exa,
        Brave or SerpAPI response dict on its own or in a list; a ``(query, response)`` pair
        names the query), or ``{"query": ..., "results": [...]}`` dicts; ``None``: the run's
        recorded searches. ``references`` and ``documents``: see
        :func:`~citeguard.parse.parse_answer`."""
        t0 = time.perf_counter()
        await self._starts.slot()
        await self._turns.turn()
        shown = answer_shown(answer)
        searches = (
            run_searches() if searches is None else as_search_records(searches, now=self._now())
        )
        await self._prepare_snapshot()
        policy = self.policy
        with (
            self._judge_run() as judged,
            self.tracing.span("citeguard.check", kind="GUARDRAIL", input=shown) as sp,
        ):
            # parse
            parsed = await self._parse(answer, references=references, documents=documents)
            # provider redirects resolved; the searches the response reports joined to the run's
            parsed, searches = await resolve_answer(
                parsed,
                searches,
                policy=policy.fetch,
                resolver=self._resolver,
                sleep=self._sleep,
                store=self.cache,
                mode=self.snapshot_mode,
                now=self._now(),
            )
            # a URL this run excluded after it failed keeps that failure (citeguard.exclusions)
            excluded, carried = carried_failures(normalize_all(exclude_urls))
            # the uncited entries of a reference list are shown to the user: fetched too
            uncited = uncited_references(parsed)
            listed = [u for u in uncited if u not in excluded]
            urls = [u for u in parsed.urls if u not in excluded] + listed
            now = self._now()
            # the question's regime is classified while the first pages are fetched; pages
            # wait for it only to know whether they need the date fallback
            regime_task = asyncio.ensure_future(self._regimes.classify(question, now=now))
            dates = asyncio.ensure_future(dates_wanted(regime_task, policy.freshness))
            # fetch, each page's extraction starting as soon as its body arrives
            need_body = (
                policy.passage.check_passages
                or (policy.entailment.check_entailment and policy.entailment.backend != "none")
                # a scholarly reference (an entry that reads as a paper) is compared with its
                # landing page's metadata
                or (policy.scholarly.enabled and any(c.reference for c in parsed.citations))
            )
            # each page is verified and handed to the entailer as soon as it is extracted
            entailer = self._get_entailer()
            begun = await EarlyValidity.begin(
                parsed,
                policy=policy,
                entailer=entailer,
                excluded=excluded,
                cache=self._scores,
                turns=self._turns,
            )
            probes = self._catch_all_probes() if policy.fetch.soft_404_probe else None

            def arrived(url: str, res: FetchResult, job: asyncio.Future[Any]) -> None:
                begun.page_arrived(url, res, job)
                if probes is not None:
                    probes.watch(url, job)

            try:
                with self.tracing.span(
                    "citeguard.fetch", kind="TOOL", input=f"{len(urls)} URLs"
                ) as fs:
                    fetched, early = await self._pages.fetch(
                        self._get_fetcher(),
                        urls,
                        want_body=need_body,
                        date_fallback=dates,
                        deadline=policy.fetch.answer_deadline,
                        on_page=arrived,
                        window=policy.fetch.global_concurrency,
                    )
                # extract
                extracted = (
                    await self._pages.extract_all(fetched, date_fallback=dates, early=early)
                    if need_body
                    else {}
                )
                pages = {u: e.page for u, e in extracted.items()}
                soft_404s = await probes.matches(pages) if probes and need_body else {}
                # verify each citation: resolves, passage present, claim entailed
                retrieved = (
                    normalize_all({r.url for s in searches for r in s.results})
                    if searches
                    else None
                )
                # scholarly references: the paper each names (its page's metadata, else a
                # metadata service; an entry with no link looked up by its title)
                papers = await check_references(
                    parsed, fetched, fetcher=self._get_fetcher(), policy=policy.scholarly
                )
                cited = await check_validity(
                    parsed,
                    fetched,
                    extracted,
                    policy=policy,
                    entailer=entailer,
                    excluded=excluded,
                    retrieved=retrieved,
                    early=begun,
                    cache=self._scores,
                    soft_404s=soft_404s,
                    cascade=self._get_cascade(),
                    carried=carried,
                    scholarly=papers,
                )
                regime = await regime_task
            except BaseException:
                begun.cancel()
                if probes is not None:
                    probes.cancel()
                regime_task.cancel()
                dates.cancel()
                raise
            if len(cited.citations) > _INLINE_CITATIONS:
                # ~0.1 ms a citation: 2,000 held the event loop for 200 ms
                citations = await asyncio.to_thread(with_source_kinds, cited.citations, pages)
            else:
                citations = with_source_kinds(cited.citations, pages)
            for i in range(0, len(citations), _SPANS_PER_TURN):
                if i:
                    await asyncio.sleep(0)  # 2,000 spans at once held the loop 10-20 ms
                self.tracing.citation_spans(citations[i : i + _SPANS_PER_TURN], fetch_span=fs)
            # run the checks (the other axes weigh the answer's citations: a reference-list
            # entry no marker cites is checked for validity only)
            ctx = CheckContext(
                question=question,
                answer=parsed,
                policy=policy,
                now=now,
                regime=regime,
                citations=[c for c in citations if c.normalized_url not in uncited],
                claims=cited.claims,
                pages=pages,
                fetched=fetched,
                searches=searches,
                validity=cited.axis,
            )
            axes = [await check.run(ctx) for check in self._checks]
            # the verdict
            verdict = build_verdict(
                axes,
                citations=citations,
                claims=cited.claims,
                findings=parsed.findings,
                regime=regime.regime.value,
                elapsed_ms=(time.perf_counter() - t0) * 1000.0,
                replay=self.snapshot_mode is SnapshotMode.REPLAY,
                judge_usage=judged.usage(),
            )
            self.tracing.record_verdict(sp, verdict)
            remember_failures(verdict)
            return verdict

    def _catch_all_probes(self) -> CatchAllProbes:
        """Soft-404 probes of one check (lychee's made-up path), through the fetcher and the
        extract stage, so snapshots record them."""
        fetch = functools.partial(
            self._pages.fetch_page, self._get_fetcher(), deadline=self.policy.fetch.url_timeout
        )
        return CatchAllProbes(fetch)

    def _judge_run(self) -> AbstractContextManager[JudgeMeter]:
        # one run's judge budget, usage, snapshot layer and LLM spans (checks/judge_usage.py)
        policy, store, mode = self.policy, self.cache, self.snapshot_mode
        return judge_run(budget=policy.cost_budget, store=store, mode=mode, span=self.tracing.span)

    async def _prepare_snapshot(self) -> None:
        # once per Guard: in refresh mode every page of this Guard's runs lands in one new version
        if self.cache is not None and not self._snapshot_ready:
            self._snapshot_ready = True
            await prepare_snapshot(self.cache, self.snapshot_mode)

    async def _parse(self, answer: object, **sources: Any) -> Answer:
        sources["limits"] = AnswerLimits.of(self.policy)
        return await self._pages.parse(answer, self.policy.fetch.allowed_schemes, **sources)

    # ------------------------------------------------------------------ searches

    def wrap_search(
        self, search_fn: Callable[P, T], *, provider: str | None = None
    ) -> Callable[P, T]:
        """Wrap the agent's search tool: each literal query and its results are recorded (and
        snapshotted, and traced) while the agent gets back exactly what the tool returned."""
        return wrap_search(
            search_fn,
            provider=provider,
            tracing=self.tracing,
            store=self.cache,
            mode=self.snapshot_mode,
            now=self._now,
        )

    # ------------------------------------------------------------------ the loop

    def wrap(self, answer_fn: AnswerFn) -> Callable[..., Awaitable[GuardResult]]:
        """Decorator: ``await answer(question, **kwargs)`` now returns a :class:`GuardResult`."""

        @functools.wraps(answer_fn)
        async def guarded(question: str, /, **kwargs: Any) -> GuardResult:
            return await self.run(answer_fn, question, **kwargs)

        return guarded

    async def run(self, answer_fn: AnswerFn, question: str, /, **kwargs: Any) -> GuardResult:
        """Attempt → verdict → on failure regenerate without the offending URLs, within budget
        (:mod:`citeguard.loop`). Exceptions raised by ``answer_fn`` propagate unchanged."""

        async def recheck(
            answer: str | Sequence[Mapping[str, Any]] | object,
            q: str,
            searches: list[SearchRecord] | None,
            exclude: frozenset[str],
        ) -> Verdict:
            return await self.check(answer, question=q, searches=searches, exclude_urls=exclude)

        with recording_run() as searches, exclusion_run(), self._judge_run():
            # the run span carries the question's regime (judged once, inside the run's judge
            # budget and snapshot; every check reuses it)
            regime = await self._regimes.classify(question, now=self._now())
            with self.tracing.span(
                "citeguard.run",
                kind="GUARDRAIL",
                input=question,
                question=question,
                regime=regime.regime.value,
            ) as root:
                result = await regenerate(
                    answer_fn,
                    question,
                    kwargs,
                    policy=self.policy,
                    recheck=recheck,
                    tracing=self.tracing,
                    searches=searches,
                    replay=self.snapshot_mode is SnapshotMode.REPLAY,
                    repair=self.repairer(recheck),
                )
                self.tracing.record_result(root, result)
        if self._case_log is not None:
            await self._case_log.log(result, question, timestamp=self._now(), store=self.cache)
        if not result.passed and ON_FAIL[self.policy.on_fail].raises:
            raise CitationRejected(result.message or "the answer failed the citation guard", result)
        return result

    def repairer(self, recheck: Recheck, *, policy: Policy | None = None) -> Repairer | None:
        """The repair hook (:mod:`citeguard.repair`) over this Guard's fetcher, pages, entailer
        and scores, under ``policy`` (default: the Guard's); ``None`` when it repairs nothing."""
        return repairer_for(
            self.policy if policy is None else policy,
            fetcher=self._get_fetcher,
            pages=self._pages,
            entailer=self._get_entailer(),
            scores=self._scores,
            tracing=self.tracing,
            recheck=recheck,
            replay=self.snapshot_mode is SnapshotMode.REPLAY,
        )

    # ------------------------------------------------------------------ streaming

    def stream(
        self,
        chunks: ChunkSource,
        *,
        question: str = "",
        mode: StreamMode = "hold",
        searches: Sequence[SearchRecord | Any] | Mapping[str, Any] | object | None = None,
        exclude_urls: frozenset[str] | set[str] = frozenset(),
        late_citations: bool = False,
    ) -> EventStream:
        """Verify an answer while it streams (:mod:`citeguard.stream`): ``async for event in
        guard.stream(chunks, question=...)`` yields released and held text, each citation's
        status as it lands, and last the verdict, equal to :meth:`check` on the whole text.
        ``searches``: as :meth:`check` takes them. ``late_citations``: the stream's citation
        objects may arrive after the text they cite (OpenAI annotations); ``hold`` then keeps a
        sentence that cites nothing inline pending until the verdict instead of releasing it."""
        records = None if searches is None else as_search_records(searches, now=self._now())
        return stream_answer(
            self,
            chunks,
            question=question,
            mode=mode,
            searches=records,
            exclude_urls=exclude_urls,
            late_citations=late_citations,
        )

    def stream_run(
        self,
        answer_stream_fn: StreamAnswerFn,
        question: str,
        /,
        *,
        mode: StreamMode = "hold",
        late_citations: bool = False,
        **kwargs: Any,
    ) -> EventStream:
        """:meth:`run` with an answer function that streams: each attempt's events, then a
        ``StreamResult`` with the :class:`GuardResult` (:func:`citeguard.stream.stream_run`;
        ``late_citations`` as :meth:`stream` takes it)."""
        return stream_run(
            self, answer_stream_fn, question, mode=mode, late_citations=late_citations, **kwargs
        )


__all__ = ["Guard"]

"""One stream (:class:`_Session`): chunks in, the text parsed as it grows, completed URLs
fetched early and completed sentences verified, release in order (``hold``/``annotate``),
and the final verdict, which is ``check()``'s."""

from __future__ import annotations

import asyncio
import bisect
import contextvars
import functools
import time
from collections.abc import (
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from citeguard.checks.entail import Entailer
from citeguard.checks.freshness import RegimeClassifier, is_weak_date_source
from citeguard.checks.freshness_ask import fresher_ask, plausible_enough
from citeguard.checks.judge_usage import JudgeMeter
from citeguard.checks.validity import (
    ExtractedPage,
    ScoreCache,
    check_validity,
    uncited_references,
)
from citeguard.dates import as_aware
from citeguard.exclusions import current_failures, exclusion_run, remember, split_excluded
from citeguard.extract_stage import ExtractStage
from citeguard.feedback import render_feedback
from citeguard.models import (
    Answer,
    Claim,
    FetchResult,
    FreshnessClass,
    Regime,
    SearchRecord,
    Severity,
    Verdict,
)
from citeguard.parse import AnswerLimits, parse_answer
from citeguard.policy import Policy
from citeguard.recording import run_searches
from citeguard.snapshot import SnapshotFetcher
from citeguard.stream.events import (
    StreamCitation,
    StreamEvent,
    StreamHeld,
    StreamMode,
    StreamText,
    StreamVerdict,
)
from citeguard.stream.sentences import (
    _INLINE_PARSE_CHARS,
    _complete_prefix,
    _errors,
    _Key,
    _one_claim,
    _Unit,
    _units,
)
from citeguard.stream_adapters import ChunkSource, text_chunks
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


class _Session:
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

    async def run(self, chunks: ChunkSource) -> None:
        parser: asyncio.Task[None] | None = None
        try:
            with self.guard.tracing.span(
                "citeguard.stream",
                kind="GUARDRAIL",
                input=self.question or None,
                attributes={
                    "citeguard.stream.mode": self.mode,
                    "citeguard.stream.late_citations": self.late_citations,
                },
            ) as span:
                self._span = span
                # the final check runs in this context: a child of this span, with its own judge
                # run (its verdict's judge usage is that of a check() on its own)
                self._check_ctx = contextvars.copy_context()
                with self.guard._judge_run():
                    await self.guard._prepare_snapshot()
                    self._entailer = self.guard._get_entailer()
                    self._regime = asyncio.create_task(
                        self.guard._regimes.classify(self.question, now=self.guard._now())
                    )
                    parser = asyncio.create_task(self._parse_loop())
                    async for chunk in text_chunks(chunks):
                        self._on_chunk(chunk)
                    self.ended_at = time.perf_counter()
                    self._dirty.set()
                    await parser
                    verdict = await self._finish()
                self._record(span, verdict)
        finally:
            self._cancel_all(parser)
            self.queue.put_nowait(None)

    def _cancel_all(self, parser: asyncio.Task[None] | None) -> None:
        tasks: list[asyncio.Future[Any]] = [*self.fetches.values()]
        tasks += [s.task for s in self.sentences.values() if s.task is not None]
        if parser is not None:
            tasks.append(parser)
        if self._regime is not None:
            tasks.append(self._regime)
        for t in tasks:
            if not t.done():
                t.cancel()
            else:
                _retrieve(t)

    def _on_chunk(self, chunk: str) -> None:
        start = len(self.text)
        self.text += chunk
        self._chunk_ends.append(len(self.text))
        self._chunk_times.append(time.perf_counter())
        if self.mode == "annotate":
            self._release_span(start, len(self.text), None)
        self._dirty.set()

    def _arrived(self, offset: int) -> float:
        """When the character at ``offset`` arrived."""
        i = bisect.bisect_right(self._chunk_ends, offset)
        return self._chunk_times[min(i, len(self._chunk_times) - 1)]

    # ---------------------------------------------------------------- parsing as text arrives

    async def _parse_loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            if self.ended_at is not None:
                return
            wait = self._next_parse - time.perf_counter()
            if wait > 0:  # parse at most half the time: chunks that arrive meanwhile coalesce
                await asyncio.sleep(wait)
                if self.ended_at is not None:
                    return
            text = self.text
            cut = _complete_prefix(text)
            if cut <= self._cut:
                continue
            self._cut = cut
            began = time.perf_counter()
            parsed = await self._parse(text[:cut])
            self._next_parse = 2 * time.perf_counter() - began
            if self.ended_at is not None:
                return
            self._advance(parsed)

    async def _parse(self, text: str) -> Answer:
        parse = functools.partial(
            parse_answer,
            text,
            allowed_schemes=self.policy.fetch.allowed_schemes,
            limits=AnswerLimits.of(self.policy),
        )
        if len(text) > _INLINE_PARSE_CHARS:
            return await asyncio.get_running_loop().run_in_executor(None, parse)
        return parse()

    def _urls(self, parsed: Answer) -> list[str]:
        # what check() fetches: the cited URLs and the reference entries nothing cites
        urls = [*parsed.urls, *uncited_references(parsed)]
        return [u for u in dict.fromkeys(urls) if u not in self.excluded]

    def _advance(self, parsed: Answer) -> None:
        """A longer prefix was parsed: fetch its new URLs, verify its newly complete claims."""
        for url in self._urls(parsed):
            if url not in self.fetches:
                self._start_fetch(url)
        self.units = _units(parsed)
        for key, claim, complete in self.units:
            if complete and key not in self.sentences and claim.end > self.released_upto:
                self._start_sentence(key, claim, parsed)
        self._release()

    # ---------------------------------------------------------------- early fetches

    def _start_fetch(self, url: str) -> None:
        if self.ended_at is None:
            self.early_urls += 1
        _span_event(self._span, "citeguard.stream.url", {"url": url, "at_ms": self._ms()})
        self.fetches[url] = asyncio.create_task(self._prefetch(url))

    async def _dates(self) -> bool:
        assert self._regime is not None
        regime = await asyncio.shield(self._regime)
        return self.policy.freshness.enabled and regime.regime is not Regime.INSENSITIVE

    async def _prefetch(self, url: str) -> _Fetched:
        policy = self.policy
        try:
            res = (
                await self.guard._get_fetcher().fetch_all(
                    [url], want_body=self.need_body, deadline=policy.fetch.answer_deadline
                )
            )[url]
        except Exception:  # a snapshot miss, a closed fetcher: check() says what it is
            return _Fetched(failed=True)
        self.emit(
            StreamCitation(
                stage="fetch",
                url=url,
                status=res.status,
                reason=res.reason,
                http_status=res.http_status,
                at_ms=self._ms(),
            )
        )
        _span_event(
            self._span,
            "citeguard.stream.fetched",
            {"url": url, "status": res.status.value, "at_ms": self._ms()},
        )
        out = _Fetched(result=res)
        if not (self.need_body and res.status.is_ok() and res.body is not None):
            return out
        try:
            dates = await self._dates()
            pages = await self.guard._pages.extract_all({url: res}, date_fallback=dates)
            out.page = pages.get(url)
            if out.page is not None and policy.fetch.soft_404_probe:
                out.soft_404 = (
                    await self.guard._catch_all_probes().matches({url: out.page.page})
                ).get(url)
        except Exception:
            out.failed = True
        return out

    # ---------------------------------------------------------------- sentences

    def _start_sentence(self, key: _Key, claim: Claim, parsed: Answer) -> None:
        sentence = _Sentence(claim=claim, answer=_one_claim(parsed, claim))
        self.sentences[key] = sentence
        _span_event(
            self._span,
            "citeguard.stream.sentence",
            {
                "claim_index": claim.index,
                "start": claim.start,
                "end": claim.end,
                "at_ms": self._ms(),
            },
        )
        if not sentence.answer.citations and not _errors(sentence.answer):
            if self.late_citations:  # pending: the verdict decides (_settle)
                return
            sentence.passed = True  # cites nothing: nothing to wait for
            return
        sentence.task = asyncio.create_task(self._verify(sentence))

    async def _verify(self, s: _Sentence) -> None:
        urls = [
            u
            for u in dict.fromkeys(c.normalized_url for c in s.answer.citations)
            if u is not None and u not in self.excluded
        ]
        for url in urls:
            if url not in self.fetches:  # defensive: its URL was not in the prefix parsed
                self._start_fetch(url)
        got = await asyncio.gather(*(asyncio.shield(self.fetches[u]) for u in urls))
        s.verifying = True
        if any(g.failed for g in got):
            return  # left to the verdict
        fetched = {u: g.result for u, g in zip(urls, got, strict=True) if g.result is not None}
        pages = {u: g.page for u, g in zip(urls, got, strict=True) if g.page is not None}
        soft = {u: g.soft_404 for u, g in zip(urls, got, strict=True) if g.soft_404 is not None}
        searches = self.searches if self.searches is not None else run_searches()
        retrieved = (
            normalize_all({r.url for rec in searches for r in rec.results}) if searches else None
        )
        outcome = await check_validity(
            s.answer,
            fetched,
            pages,
            policy=self.policy,
            entailer=self._entailer,
            excluded=self.excluded,
            retrieved=retrieved,
            cache=self.guard._scores,
            soft_404s=soft,
            carried=self._carried,
        )
        remember(self._failures, outcome.citations, outcome.offending_urls)
        failing: list[str] = []
        for report in outcome.claims:
            for check in report.checks:
                self.emit(
                    StreamCitation(
                        stage="claim",
                        url=check.url,
                        status=check.status,
                        reason=check.reason,
                        claim_index=s.claim.index,
                        claim=s.claim.text,
                        at_ms=self._ms(),
                    )
                )
                if check.url in outcome.offending_urls:
                    failing.append(f"{check.url}: {check.status.value} ({check.reason})")
        s.failing = sorted(outcome.offending_urls)
        s.passed = not outcome.offending_urls and not _errors(s.answer)
        if s.passed and self.fresher and await self._stale_for_guess(pages.values()):
            s.fresh_wait = True
        s.reason = "; ".join(failing) or "; ".join(
            f.message for f in s.answer.findings if f.severity is Severity.ERROR
        )
        _span_event(
            self._span,
            "citeguard.stream.verified",
            {"claim_index": s.claim.index, "passed": s.passed, "at_ms": self._ms()},
        )
        self._release()

    # ---------------------------------------------------------------- release (hold mode)

    def _release(self) -> None:
        """Release, in order, every complete sentence whose citations passed."""
        if self.mode != "hold" or self.stopped:
            return
        for key, claim, complete in self.units:
            if claim.end <= self.released_upto:
                continue
            sentence = self.sentences.get(key) if complete else None
            if sentence is None or sentence.passed is None or sentence.fresh_wait:
                return
            if not sentence.passed:
                self._hold(self.released_upto, claim.end, claim.index, sentence)
                return
            self._release_span(self.released_upto, claim.end, claim.index)

    async def _stale_for_guess(self, pages: Iterable[ExtractedPage]) -> bool:
        """Whether a page is dated (not from its text) past the floor of a guessed regime the
        gate is not confident of."""
        assert self._regime is not None
        fc = await asyncio.shield(self._regime)
        fp = self.policy.freshness
        floor = fp.floor_days.get(fc.regime.value)
        if floor is None or fc.gate_regime is fc.regime or fp.uncertain_regime != "lenient":
            return False
        if not plausible_enough(fc.confidence, fp):
            return False
        now = as_aware(self.guard._now())
        for extracted in pages:
            page = extracted.page
            date = page.modified or page.published
            if date is None or is_weak_date_source(page.date_source):
                continue
            if (now - as_aware(date)).total_seconds() / 86400.0 > floor:
                return True
        return False

    def _release_span(self, start: int, end: int, claim_index: int | None) -> None:
        if end <= start:
            return
        now = time.perf_counter()
        held = 0.0 if self.mode == "annotate" else (now - self._arrived(end - 1)) * 1000.0
        text = self.text[start:end]
        self.released_parts.append(text)
        if self.mode == "hold":  # annotate releases chunks; its sentences are not a frontier
            self.released_upto = end
        if claim_index is not None:
            self.hold_ms.append(held)
        if self.mode == "hold":
            _span_event(
                self._span,
                "citeguard.stream.released",
                {"claim_index": claim_index, "start": start, "end": end, "hold_ms": held},
            )
        self.emit(
            StreamText(
                text=text,
                start=start,
                end=end,
                claim_index=claim_index,
                held_ms=round(held, 3),
                at_ms=self._ms(),
            )
        )

    def _hold(self, start: int, end: int, claim_index: int | None, s: _Sentence) -> None:
        self.stopped = True
        self.held_sentences += 1
        self._held_span(start, end, claim_index, s.reason or "a citation failed", s.failing)

    def _held_span(
        self, start: int, end: int, claim_index: int | None, reason: str, urls: list[str]
    ) -> None:
        if end <= start:
            return
        text = self.text[start:end]
        self.held_parts.append(text)
        self.released_upto = end  # consumed: neither part is revisited
        _span_event(
            self._span,
            "citeguard.stream.held",
            {"claim_index": claim_index, "start": start, "end": end, "reason": reason},
        )
        self.emit(
            StreamHeld(
                text=text,
                start=start,
                end=end,
                claim_index=claim_index,
                reason=reason,
                urls=urls,
                at_ms=self._ms(),
            )
        )

    # ---------------------------------------------------------------- the end of the stream

    async def _finish(self) -> Verdict:
        text = self.text
        parsed = await self._parse(text)  # what check() parses: every URL is now complete
        for url in self._urls(parsed):
            if url not in self.fetches:
                self._start_fetch(url)
        # sentences still waiting for their pages are the verdict's to verify first, and those
        # being scored finish before it begins, so it finds their scores cached: the same pair
        # is never scored twice at once (the entailer is what costs time here)
        for key, s in list(self.sentences.items()):
            if s.task is not None and not s.verifying and not s.task.done():
                s.task.cancel()
                del self.sentences[key]
        busy = [s.task for s in self.sentences.values() if s.task is not None]
        if busy:
            await asyncio.gather(*busy, return_exceptions=True)
        check = asyncio.create_task(self._check(text), context=self._check_ctx)
        verdict = await check
        # the sentences not verified yet: everything they need is cached now
        self.units = [((c.start, c.end), c, True) for c in parsed.claims]
        for key, claim, _ in self.units:
            if key not in self.sentences and claim.end > self.released_upto:
                self._start_sentence(key, claim, parsed)
        pending = [s.task for s in self.sentences.values() if s.task is not None]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        for t in pending:
            _retrieve(t)
        self._settle(parsed, verdict)
        self._after_ms = after = (time.perf_counter() - (self.ended_at or self.t0)) * 1000.0
        feedback = None
        if not verdict.passed:
            exclude = frozenset(self.exclude_urls) | verdict.offending_urls
            feedback = render_feedback(verdict, attempt=1, exclude_urls=exclude).message
        self.emit(
            StreamVerdict(
                passed=verdict.passed,
                verdict=verdict,
                text=text,
                released="".join(self.released_parts),
                held="".join(self.held_parts),
                feedback=feedback,
                after_last_chunk_ms=round(after, 3),
                pending=text[self.released_upto :] if self.deferred else "",
                at_ms=self._ms(),
            )
        )
        return verdict

    async def _check(self, text: str) -> Verdict:
        """``check()`` on the whole answer, in the run this stream is an attempt of."""
        if self._failures is None:
            return await self._whole(text)
        with exclusion_run(self._failures):
            return await self._whole(text)

    async def _whole(self, text: str) -> Verdict:
        return await self.guard.check(
            text, question=self.question, searches=self.searches, exclude_urls=self.exclude_urls
        )

    def _settle(self, parsed: Answer, verdict: Verdict) -> None:
        """Hold mode, at the end: release or hold what is left, by the sentences' own checks
        (or the verdict, for one whose early work failed)."""
        if self.mode != "hold":
            return
        offending = verdict.offending_urls
        for i, claim in enumerate(parsed.claims):
            if self.stopped or claim.end <= self.released_upto:
                continue
            s = self.sentences.get((claim.start, claim.end))
            if s is None:  # defensive: every claim of the final parse has its sentence
                s = _Sentence(claim=claim, answer=_one_claim(parsed, claim))
            # its early work failed (a snapshot miss), or it waited for late citation objects
            # (late_citations): the verdict decides
            if s.passed is None:
                report = verdict.claims[i] if i < len(verdict.claims) else None
                bad = (
                    [ch.url for ch in report.checks if ch.url in offending or ch.failure]
                    if report
                    else []
                )
                s.passed, s.failing = not bad, bad
                s.reason = "; ".join(f"{u}: failed in the verdict" for u in bad)
            if (
                s.passed
                and s.fresh_wait
                and verdict.passed
                and fresher_ask(verdict, self.policy.freshness) is not None
            ):
                self.deferred = True  # the run asks for fresher sources: nothing more goes
                return
            if not s.passed:
                self._hold(self.released_upto, claim.end, claim.index, s)
                break
            self._release_span(self.released_upto, claim.end, claim.index)
        end = len(self.text)
        if self.stopped:
            rest = "held back after a sentence whose citation failed"
            self._held_span(self.released_upto, end, None, rest, [])
        elif verdict.passed:
            self._release_span(self.released_upto, end, None)
        else:
            failed = ", ".join(n for n, a in verdict.axes.items() if a.gating and not a.passed)
            why = f"the answer failed the gate ({failed or 'validity'})"
            self._held_span(self.released_upto, end, None, why, sorted(offending))

    # ---------------------------------------------------------------- the span

    def _record(self, span: Any, verdict: Verdict) -> None:
        hold = sorted(self.hold_ms)
        attrs: dict[str, Any] = {
            "citeguard.stream.chunks": len(self._chunk_ends),
            "citeguard.stream.chars": len(self.text),
            "citeguard.stream.urls": len(self.fetches),
            "citeguard.stream.urls_early": self.early_urls,
            "citeguard.stream.sentences": len(self.sentences),
            "citeguard.stream.sentences_released": len(hold),
            "citeguard.stream.held_sentences": self.held_sentences,
            "citeguard.stream.held_chars": sum(len(p) for p in self.held_parts),
            "citeguard.stream.after_last_chunk_ms": round(self._after_ms, 3),
            "citeguard.passed": verdict.passed,
            "output.value": "".join(self.released_parts)[:16_000],
        }
        if hold:
            attrs["citeguard.stream.hold_ms_max"] = round(hold[-1], 3)
            attrs["citeguard.stream.hold_ms_p50"] = round(hold[len(hold) // 2], 3)
            attrs["citeguard.stream.hold_ms_total"] = round(sum(hold), 3)
        _set_attrs(span, attrs)


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

"""One stream (:class:`_Session`): chunks in, the text parsed as it grows, completed URLs
fetched early and completed sentences verified, release in order (``hold``/``annotate``),
and the final verdict, which is ``check()``'s."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from typing import Any

from citeguard.checks.freshness_ask import fresher_ask
from citeguard.checks.validity import (
    uncited_references,
)
from citeguard.exclusions import exclusion_run
from citeguard.feedback import render_feedback
from citeguard.models import (
    Answer,
    Verdict,
)
from citeguard.parse import AnswerLimits, parse_answer
from citeguard.stream.early import _EarlyWork
from citeguard.stream.events import (
    StreamVerdict,
)
from citeguard.stream.sentences import (
    _INLINE_PARSE_CHARS,
    _complete_prefix,
    _one_claim,
    _units,
)
from citeguard.stream.state import _GuardParts as _GuardParts
from citeguard.stream.state import (
    _retrieve,
    _Sentence,
    _set_attrs,
)
from citeguard.stream_adapters import ChunkSource, text_chunks


class _Session(_EarlyWork):
    """One stream: chunks in, the text parsed as it grows, early work started, then the
    verdict."""

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
                await self.guard.turns.turn()  # a stream's start-up: a turn with time for it
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

    # ---------------------------------------------------------------- the end of the stream

    async def _finish(self) -> Verdict:
        text = self.text
        await self.guard.turns.turn()
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

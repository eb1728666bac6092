"""Early work: each completed URL fetched (and its page extracted) before the stream ends,
each completed sentence's citations verified as soon as its pages are in."""

from __future__ import annotations

import asyncio
from collections.abc import (
    Iterable,
)

from citeguard.checks.freshness import is_weak_date_source
from citeguard.checks.freshness_ask import plausible_enough
from citeguard.checks.validity import (
    ExtractedPage,
    check_validity,
)
from citeguard.dates import as_aware
from citeguard.exclusions import remember
from citeguard.models import (
    Answer,
    Claim,
    Regime,
    Severity,
)
from citeguard.recording import run_searches
from citeguard.stream.events import (
    StreamCitation,
)
from citeguard.stream.release import _Release
from citeguard.stream.sentences import (
    _errors,
    _Key,
    _one_claim,
)
from citeguard.stream.state import _Fetched, _Sentence, _span_event
from citeguard.web.urls import normalize_all


class _EarlyWork(_Release):
    """Early fetch and verify; a verified sentence is released in order."""

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
        await self.guard.turns.turn()  # the sentence's checks: a turn with time for them
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

"""The repairer: for one failing attempt, fetch and judge candidates in rounds, decide, write
the repairs in and verify the repaired answer again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from citeguard.checks.entail import Entailer
from citeguard.checks.validity import (
    ExtractedPage,
    ScoreCache,
    relevance_floor,
    score_pairs,
    verify_pair,
)
from citeguard.errors import SnapshotMiss
from citeguard.extract_stage import ExtractStage
from citeguard.models import (
    Answer,
    Attempt,
    CitationStatus,
    Repair,
    SearchRecord,
    Verdict,
)
from citeguard.parse import parse_answer
from citeguard.policy import Policy
from citeguard.repair.candidates import (
    _candidates,
    _corrected_quote,
    _passage_of,
    _rank,
    _support_rank,
    _trial,
    _wants_score,
)
from citeguard.repair.diagnose import _diagnose, _passing_urls
from citeguard.repair.edits import _apply
from citeguard.repair.outcome import (
    RepairMode,
    RepairOutcome,
    _as_finding,
    _as_repair,
    _record_span,
)
from citeguard.repair.records import (
    _Candidate,
    _Decision,
    _Diagnosis,
    _Found,
    _short,
)
from citeguard.snapshot import FetcherLike
from citeguard.trace import Tracing
from citeguard.web.botwall import bot_wall_reason
from citeguard.web.soft404 import soft_404_reason

# re-run the gate on an answer: (answer, question, searches, exclude_urls) -> Verdict
Recheck = Callable[[Any, str, list[SearchRecord] | None, frozenset[str]], Awaitable[Verdict]]

#: candidate pages already fetched in the run that one failing pair is tried against
MAX_FETCHED_PER_PAIR = 6
#: search results not fetched yet that one failing pair may fetch (best overlap first)
MAX_NEW_PER_PAIR = 3
#: new fetches of one repair, over all its failing pairs
MAX_NEW_FETCHES = 8
#: rounds of fetching: a pair whose candidates were refused or did not help tries the next
MAX_ROUNDS = 3


def repairer_for(
    policy: Policy,
    *,
    fetcher: Callable[[], FetcherLike],
    pages: ExtractStage,
    entailer: Entailer | None,
    scores: ScoreCache | None,
    tracing: Tracing,
    recheck: Recheck,
    replay: bool = False,
) -> Repairer | None:
    """The repair hook of one guarded run, or ``None`` when ``policy.repair`` is ``"off"`` (or
    ``on_fail="report"``, which reports the answer as it is)."""
    if policy.repair == "off" or policy.on_fail == "report":
        return None
    return Repairer(
        policy,
        fetcher=fetcher,
        pages=pages,
        entailer=entailer,
        scores=scores,
        tracing=tracing,
        recheck=recheck,
        replay=replay,
    )


class Repairer:
    """Repairs failing attempts of one guarded run (see the module docstring); call it with
    ``(attempts, question, searches, seconds_left)`` after a failing verdict."""

    def __init__(
        self,
        policy: Policy,
        *,
        fetcher: Callable[[], FetcherLike],
        pages: ExtractStage,
        entailer: Entailer | None,
        scores: ScoreCache | None,
        tracing: Tracing,
        recheck: Recheck,
        replay: bool = False,
    ) -> None:
        self._policy = policy
        self._mode: RepairMode = policy.repair
        self._fetcher = fetcher
        self._pages = pages
        self._entailer = entailer if policy.entailment.check_entailment else None
        self._floor = relevance_floor(policy, self._entailer)  # each trial's, as validity's
        self._scores = scores
        self._tracing = tracing
        self._recheck = recheck
        self._replay = replay

    async def __call__(
        self,
        attempts: Sequence[Attempt],
        question: str,
        searches: list[SearchRecord],
        time_left: float | None,
    ) -> RepairOutcome:
        attempt = attempts[-1]
        if self._mode == "off" or attempt.verdict.passed:
            return RepairOutcome()
        t0 = time.perf_counter()
        with self._tracing.span(
            "citeguard.repair",
            kind="CHAIN",
            input=f"attempt {attempt.number}",
            attributes={"citeguard.attempt": attempt.number, "citeguard.repair.mode": self._mode},
        ) as span:
            if time_left is not None and time_left <= 0:
                out = RepairOutcome(skipped="the time budget is spent")
            else:
                try:
                    async with asyncio.timeout(time_left):
                        out = await self._repair(list(attempts), question, searches, time_left, t0)
                except TimeoutError:
                    out = RepairOutcome(skipped="the time budget ran out during the repair")
                except SnapshotMiss as miss:
                    out = RepairOutcome(skipped=f"not in the snapshot: {miss}")
            _record_span(span, out)
        return out

    # ------------------------------------------------------------------ the work

    async def _repair(
        self,
        attempts: list[Attempt],
        question: str,
        searches: list[SearchRecord],
        time_left: float | None,
        t0: float,
    ) -> RepairOutcome:
        """Diagnose, search the run's pages and results for support, decide, then write the
        repairs in and verify the answer again (or say what remains unfixed)."""
        attempt = attempts[-1]
        verdict = attempt.verdict
        too_large = [f.message for f in verdict.findings if f.code == "answer_too_large"]
        if too_large:  # no URL swap makes it smaller; nor is it parsed again here, on the loop
            return RepairOutcome(unfixed=tuple(too_large))
        source: Any = attempt.structured if attempt.structured is not None else attempt.answer
        answer = parse_answer(source, allowed_schemes=self._policy.fetch.allowed_schemes)
        diag = _diagnose(answer, verdict, self._policy)
        if diag.blockers:
            # a failure repair cannot place (a provider's citation object, a marker citing no
            # reference, ...): the answer function must fix it, so no page is fetched for it
            return RepairOutcome(unfixed=tuple(diag.blockers))
        if not diag.failures:
            return RepairOutcome()
        pool = _candidates(attempts, searches, self._policy)
        ranked = {
            k: _rank(f, answer, pool) for k, f in enumerate(diag.failures) if f.claim is not None
        }
        search = await self._search(diag, answer, _Search(ranked), verdict, time_left)
        fetched = len(search.requested)
        decisions, unfixed = self._decide(diag, answer, verdict, search.found, search.corrections)
        repairs = [_as_repair(d, attempt.number) for d in decisions]
        if unfixed:
            return RepairOutcome(found=tuple(repairs), unfixed=tuple(unfixed), fetched=fetched)
        edited = _apply(answer, attempt.structured, decisions)
        if edited is None:
            return RepairOutcome(
                found=tuple(repairs),
                unfixed=("the answer's citations could not be rewritten in place",),
                fetched=fetched,
            )
        repaired = await self._verify(attempt, edited, repairs, question, searches, t0)
        return RepairOutcome(attempt=repaired, found=tuple(repairs), fetched=fetched)

    async def _search(
        self,
        diag: _Diagnosis,
        answer: Answer,
        search: _Search,
        verdict: Verdict,
        time_left: float | None,
    ) -> _Search:
        """Rounds: pages fetched already and the best new results first; a pair still without
        support (its candidates refused, broken or no help) tries the next ones. The first
        round also fetches the pages of altered quotes (``repair="full"``) and tries their
        own words."""
        altered = {
            f.url
            for f in diag.failures
            if self._mode == "full" and f.status is CitationStatus.PASSAGE_ALTERED
        }
        for round_no in range(MAX_ROUNDS):
            per_pair = search.pick(round_no)
            urls = [c.url for cs in per_pair.values() for c in cs]
            if round_no == 0:
                urls += sorted(altered)
            urls = [u for u in dict.fromkeys(urls) if u not in search.pages]
            if not per_pair and not (round_no == 0 and altered):
                break
            search.pages.update(await self._fetch(urls, verdict, time_left))
            search.requested.update(urls)
            trials = self._trials(diag, per_pair, search)
            corrections: dict[int, tuple[str, Any]] = {}
            if round_no == 0:
                corrections = self._corrections(diag, answer, altered, search.pages)
                search.corrections = corrections
            await self._score([t for _k, _c, t in trials] + [t for _q, t in corrections.values()])
            for k, c, trial in trials:
                if trial.status is CitationStatus.OK:
                    search.found.setdefault(k, []).append(_Found(c, trial, _support_rank(trial, c)))
        return search

    def _trials(
        self, diag: _Diagnosis, per_pair: Mapping[int, list[_Candidate]], search: _Search
    ) -> list[tuple[int, _Candidate, Any]]:
        """Each (failing pair, candidate page) judged as the validity axis would, up to the
        entailer's score (a page not fetched, or a pair without its validity pair, is tried
        and not judged)."""
        trials: list[tuple[int, _Candidate, Any]] = []
        for k, cands in per_pair.items():
            base = diag.failures[k].pair
            for c in cands:
                search.tried[k].add(c.url)
                ext = search.pages.get(c.url)
                if base is None or ext is None:
                    continue
                trial = _trial(base, c.url)
                verify_pair(trial, ext, self._policy, floor=self._floor)
                trials.append((k, c, trial))
        return trials

    async def _score(self, pairs: list[Any]) -> None:
        """The entailer's scores for the pairs that still want one."""
        if self._entailer is not None:
            wanting = [t for t in pairs if _wants_score(t)]
            await score_pairs(self._entailer, wanting, cache=self._scores)

    async def _verify(
        self,
        attempt: Attempt,
        edited: tuple[str, list[dict[str, Any]] | None],
        repairs: list[Repair],
        question: str,
        searches: list[SearchRecord],
        t0: float,
    ) -> Attempt:
        """The repaired answer verified again (the loop's ``recheck``), its repairs INFO
        findings of its verdict, as an attempt of the same number."""
        new_answer, items = edited
        checked = await self._recheck(
            items if items is not None else new_answer, question, searches, attempt.excluded_urls
        )
        checked = checked.model_copy(
            update={"findings": [*checked.findings, *(_as_finding(r) for r in repairs)]}
        )
        text = parse_answer(items).text if items is not None else new_answer
        return Attempt(
            number=attempt.number,
            answer=text,
            verdict=checked,
            excluded_urls=attempt.excluded_urls,
            elapsed_ms=0.0 if self._replay else (time.perf_counter() - t0) * 1000.0,
            structured=items,
            repairs=repairs,
        )

    def _corrections(
        self,
        diag: _Diagnosis,
        answer: Answer,
        altered: set[str],
        pages: Mapping[str, ExtractedPage],
    ) -> dict[int, tuple[str, Any]]:
        """For each altered quote: the cited page's own words, tried as the claim's quote."""
        out: dict[int, tuple[str, Any]] = {}
        for k, f in enumerate(diag.failures):
            if f.url not in altered or f.pair is None or f.quote is None:
                continue
            fixed = _corrected_quote(f, answer)
            ext = pages.get(f.url)
            if fixed is None or ext is None:
                continue
            claim_text = f.claim_text.replace(f.quote, fixed, 1)
            trial = _trial(f.pair, f.url, quote=fixed, claim_text=claim_text)
            verify_pair(trial, ext, self._policy, floor=self._floor)
            out[k] = (fixed, trial)
        return out

    async def _fetch(
        self, urls: list[str], verdict: Verdict, time_left: float | None
    ) -> dict[str, ExtractedPage]:
        """The usable pages of ``urls``, through the Guard's fetcher and extract stage."""
        if not urls:
            return {}
        deadline = self._policy.fetch.answer_deadline
        if time_left is not None:
            deadline = max(0.001, min(deadline, time_left))
        dates = self._policy.freshness.enabled and verdict.regime not in (None, "insensitive")
        fetched, early = await self._pages.fetch(
            self._fetcher(), urls, want_body=True, date_fallback=dates, deadline=deadline
        )
        extracted = await self._pages.extract_all(fetched, date_fallback=dates, early=early)
        out: dict[str, ExtractedPage] = {}
        for url, ext in extracted.items():
            res = fetched.get(url)
            if res is None or res.status is not CitationStatus.OK:
                continue
            if ext.page.kind in ("unsupported", "empty") or soft_404_reason(ext.page):
                continue
            if bot_wall_reason(ext.page):
                continue
            out[url] = ext
        return out

    def _decide(
        self,
        diag: _Diagnosis,
        answer: Answer,
        verdict: Verdict,
        found: Mapping[int, list[_Found]],
        corrections: Mapping[int, tuple[str, Any]],
    ) -> tuple[list[_Decision], list[str]]:
        full = self._mode == "full"
        decisions: list[_Decision] = []
        unfixed: list[str] = []
        by_claim: dict[int, list[int]] = {}
        for k, f in enumerate(diag.failures):
            if f.claim is None:
                if full:
                    decisions.append(_Decision(f, "drop_url"))
                else:
                    unfixed.append(f"{f.raw_url}: {f.reason} (listed, cited by no claim)")
                continue
            by_claim.setdefault(f.claim.index, []).append(k)
        failing_urls = {f.url for f in diag.failures}
        for ci, ks in by_claim.items():
            claim = answer.claims[ci]
            # the claim's citations that pass: the claim already stands on them
            supporting = _passing_urls(verdict, claim, failing_urls)
            used = set(supporting)
            settled: dict[int, _Decision] = {}
            for k in ks:
                best = max(
                    (x for x in found.get(k, []) if x.cand.url not in used),
                    key=lambda x: x.rank,
                    default=None,
                )
                if best is not None:
                    used.add(best.cand.url)
                    settled[k] = _Decision(
                        diag.failures[k],
                        "swap",
                        target=best.cand,
                        passage=_passage_of(best.pair),
                        evidence_url=best.cand.raw,
                    )
            if full:
                for k in ks:
                    if k in settled or k not in corrections or used:
                        continue
                    fixed, trial = corrections[k]
                    if trial.status is CitationStatus.OK:
                        f = diag.failures[k]
                        used.add(f.url)
                        settled[k] = _Decision(
                            f,
                            "correct_quote",
                            quote=fixed,
                            passage=_passage_of(trial),
                            evidence_url=f.raw_url,
                        )
            for k in ks:
                if k in settled:
                    continue
                f = diag.failures[k]
                if used:
                    # the claim stands on another citation: the failing one goes
                    to = next(iter(supporting), None) or next(
                        (d.evidence_url for d in settled.values() if d.evidence_url), None
                    )
                    settled[k] = _Decision(f, "dedup", evidence_url=to)
                elif full:
                    settled[k] = _Decision(f, "drop_claim")
                else:
                    unfixed.append(f"{_short(f.claim_text)!r}: {f.status.value} at {f.raw_url}")
            # one drop per claim, the other failures of a dropped claim go with it
            drops = [k for k in ks if k in settled and settled[k].kind == "drop_claim"]
            for k in ks:
                if k in settled and not (k in drops and k != drops[0]):
                    decisions.append(settled[k])
        cited = {c.index for c in answer.claims if c.citation_indices}
        dropped = {
            d.failure.claim.index
            for d in decisions
            if d.kind == "drop_claim" and d.failure.claim is not None
        }
        if cited and cited <= dropped:
            unfixed.append("no claim is supported: nothing would be left of the answer")
        return decisions, unfixed


# --------------------------------------------------------------------------------------------
# Diagnosis: which pairs fail, and what repair cannot fix
# --------------------------------------------------------------------------------------------


@dataclass
class _Search:
    """One repair's search for support over its rounds: each failing pair's ranked candidates,
    the URLs it tried, the pages fetched (usable ones) and requested, what supports each pair,
    the corrected quotes tried, and the new fetches left."""

    ranked: dict[int, list[_Candidate]]
    tried: dict[int, set[str]] = field(default_factory=dict)
    pages: dict[str, ExtractedPage] = field(default_factory=dict)
    requested: set[str] = field(default_factory=set)
    found: dict[int, list[_Found]] = field(default_factory=dict)
    corrections: dict[int, tuple[str, Any]] = field(default_factory=dict)
    new_budget: int = MAX_NEW_FETCHES

    def __post_init__(self) -> None:
        self.tried = {k: set() for k in self.ranked}

    def pick(self, round_no: int) -> dict[int, list[_Candidate]]:
        """The candidates each pair still without support tries this round."""
        per_pair: dict[int, list[_Candidate]] = {}
        for k, chosen in self.ranked.items():
            if self.found.get(k):
                continue
            picked = self.pick_for(k, chosen, round_no)
            if picked:
                per_pair[k] = picked
        return per_pair

    def pick_for(self, k: int, chosen: Sequence[_Candidate], round_no: int) -> list[_Candidate]:
        """Pair ``k``'s candidates this round: in the first, the pages fetched already (free,
        at most ``MAX_FETCHED_PER_PAIR``); in each, at most ``MAX_NEW_PER_PAIR`` search results
        not tried yet, each URL new to the repair spending one of ``MAX_NEW_FETCHES``. A page
        requested before and refused or broken is not tried again."""
        todo = [
            c
            for c in chosen
            if c.url not in self.tried[k] and (c.url in self.pages or c.url not in self.requested)
        ]
        picked = [c for c in todo if c.fetched][:MAX_FETCHED_PER_PAIR] if round_no == 0 else []
        fresh = 0
        for c in todo:
            if c.fetched or fresh >= MAX_NEW_PER_PAIR:
                continue
            if c.url not in self.requested:
                if self.new_budget <= 0:
                    break
                self.new_budget -= 1
                self.requested.add(c.url)
            fresh += 1
            picked.append(c)
        return picked

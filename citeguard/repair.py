"""Repair before regenerate: fix a failing answer from what the run already holds.

Regeneration costs a full LLM call per attempt, and the fix is often at hand: the run's
searches returned, and the guard may already have fetched, a page that does support the claim.
Before the answer function is called again, :class:`Repairer` looks, for each failing
(claim, cited URL) pair, among the pages cited (and so fetched) earlier in this run and the
results of the run's recorded searches. Search results are ranked by the claim's content-word
overlap with their title, snippet and URL; the best few are fetched within the time left,
through the Guard's own fetcher and extract stage (address safety, size caps, redirects, the
TTL cache and snapshots all apply), and each candidate is judged exactly as the validity axis
judges a citation (:func:`~citeguard.checks.validity.verify_pair`: the quote or paraphrase on
the page, then the Guard's entailer). What it finds is written into the answer as the agent
wrote it:

* ``swap``: the failing citation points at the supporting page. A reference list entry
  ``[n] URL`` that only failing claims use gets the new URL (and title); one shared with
  passing claims keeps its URL, and the failing markers point at a new number (or at an
  entry that already lists the page). Inline links, HTML anchors, bare URLs and structured
  ``{claim, url, quote}`` items get the URL in place. A claim whose other citation already
  supports it loses the failing one (a swap to that source).
* ``correct_quote`` (``repair="full"``): a ``passage_altered`` quote becomes the cited page's
  own words, when the claim with those words is supported there.
* ``drop`` (``repair="full"``): a claim nothing supports is removed (as ``on_fail="strip"``
  does), and so is a broken entry no claim cites.

The repaired answer is verified again like any other attempt (the loop's ``recheck``); it is
returned only if it passes, and every change is a :class:`~citeguard.models.Repair` on the
attempt, the result and an INFO finding of its verdict. A repair that cannot address every
failure is not verified at all: the answer function is called again, and its feedback names
what the repair found and what remains (:meth:`RepairOutcome.feedback`).

``Policy.repair``: ``"off"``, ``"citations"`` (the default: swaps only; the agent's claims and
quotes are kept word for word) or ``"full"`` (swaps, quote corrections and drops).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal
from urllib.parse import urlsplit

from citeguard.checks.entail import Entailer
from citeguard.checks.validity import (
    ExtractedPage,
    ScoreCache,
    build_pairs,
    score_pairs,
    verify_pair,
)
from citeguard.errors import SnapshotMiss
from citeguard.extract_stage import ExtractStage
from citeguard.feedback import Feedback
from citeguard.models import (
    Answer,
    Attempt,
    Citation,
    CitationStatus,
    Claim,
    Finding,
    GuardResult,
    Outcome,
    PassageMatch,
    Repair,
    SearchRecord,
    Severity,
    Verdict,
)
from citeguard.parse import parse_answer
from citeguard.policy import Policy
from citeguard.snapshot import FetcherLike
from citeguard.text import PARAPHRASE_STOPWORDS, PASSAGE_TOKEN_RE, normalise
from citeguard.trace import Tracing
from citeguard.web.botwall import bot_wall_reason
from citeguard.web.soft404 import soft_404_reason
from citeguard.web.urls import UrlProblem, normalize_url

__all__ = ["RepairFn", "RepairMode", "RepairOutcome", "Repairer", "repairer_for"]

RepairMode = Literal["off", "citations", "full"]

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

_REF_KINDS = frozenset({"numbered", "footnote", "reference_link"})
_TEXT_KINDS = frozenset({"inline_link", "html_anchor", "bare_url", *_REF_KINDS})
_STEM = 6
# the error findings repair addresses (a citation's status); any other error finding (a marker
# citing no reference, too few citations, ...) is the answer function's to fix
_ADDRESSED_CODES = frozenset(s.value for s in CitationStatus) | {"uncited_reference_broken"}


# --------------------------------------------------------------------------------------------
# What came out
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RepairOutcome:
    """What one repair produced.

    ``attempt``: the repaired answer and its verdict (``None`` when no repair could address
    every failure, so none was verified). ``found``: the repairs made (those of ``attempt``)
    or, without an attempt, those that were possible. ``unfixed``: what repair could not fix,
    in words, for the feedback. ``skipped``: why repair did not run (the time budget, ...).
    """

    attempt: Attempt | None = None
    found: tuple[Repair, ...] = ()
    unfixed: tuple[str, ...] = ()
    skipped: str | None = None
    fetched: int = 0  # candidate pages fetched (cache hits included)

    @property
    def passed(self) -> bool:
        return self.attempt is not None and self.attempt.verdict.passed

    def summary(self) -> str:
        """``2 swap(s), 1 drop(s)``."""
        counts = Counter(r.kind for r in self.found)
        return ", ".join(f"{n} {k}(s)" for k, n in sorted(counts.items())) or "nothing"

    def result(self, attempts: list[Attempt]) -> GuardResult:
        """The guarded run's result when the repaired attempt passed."""
        assert self.attempt is not None
        a = self.attempt
        return GuardResult(
            answer=a.answer,
            passed=a.verdict.passed,
            verdict=a.verdict,
            attempts=attempts,
            outcome="repaired",
            message=f"attempt {a.number} repaired ({self.summary()}) without regenerating",
            structured=a.structured,
            repairs=list(a.repairs),
        )

    def feedback(self, base: Feedback | None, *, exclude_urls: frozenset[str]) -> Feedback | None:
        """The next attempt's feedback: ``base`` plus what repair found and what remains."""
        if base is None or (not self.found and not self.unfixed and self.attempt is None):
            return base
        lines: list[str] = []
        swaps = [r for r in self.found if r.kind == "swap"]
        for r in swaps[:8]:
            lines.append(f"  * supported by {r.after}: {_short(r.claim)!r}")
        if swaps:
            lines.insert(0, "citeguard found sources that support these claims; cite them:")
        findings = list(base.findings)
        if self.attempt is not None and not self.attempt.verdict.passed:
            v = self.attempt.verdict
            failed = [n for n, ax in v.axes.items() if ax.gating and not ax.passed]
            lines.append(f"The repaired answer still failed ({', '.join(failed)}):")
            errors = [
                f
                for ax in v.axes.values()
                if ax.gating
                for f in ax.findings
                if f.severity is Severity.ERROR
            ]
            lines.extend(f"  * {f.message}" for f in errors[:6])
            findings.extend(errors)
        if self.unfixed:
            lines.append("Still to fix (repair could not):")
            lines.extend(f"  * {u}" for u in self.unfixed[:8])
        return Feedback(
            attempt=base.attempt,
            exclude_urls=exclude_urls,
            findings=findings,
            message="\n".join([base.message, *lines]),
        )


# the loop's hook: (attempts so far, question, the run's searches, seconds left or None)
RepairFn = Callable[
    [Sequence[Attempt], str, list[SearchRecord], float | None], Awaitable[RepairOutcome]
]


# --------------------------------------------------------------------------------------------
# Internal records
# --------------------------------------------------------------------------------------------


@dataclass
class _Candidate:
    url: str  # normalised
    raw: str  # as the search result or the earlier citation wrote it
    title: str = ""
    snippet: str = ""
    fetched: bool = False  # cited (so fetched) earlier in this run: free to try
    order: int = 0


@dataclass
class _Failure:
    """One failing (claim, cited URL) pair, or a failing URL no claim cites (``claim`` None)."""

    claim: Claim | None
    url: str  # normalised
    raw_url: str
    status: CitationStatus
    reason: str
    quote: str | None
    passage: PassageMatch | None
    citations: list[int]
    pair: Any = None  # the validity pair (checks.validity) of the claim and this URL
    claim_text: str = ""  # without markers


@dataclass
class _Found:
    """A candidate that supports a failing pair, judged as the validity axis would."""

    cand: _Candidate
    pair: Any
    rank: tuple[int, float, float]


@dataclass
class _Decision:
    failure: _Failure
    kind: Literal["swap", "dedup", "correct_quote", "drop_claim", "drop_url"]
    target: _Candidate | None = None
    quote: str | None = None
    passage: str | None = None
    evidence_url: str | None = None


@dataclass
class _Fate:
    kind: Literal["keep", "to", "remove"] = "keep"
    url: str = ""  # normalised target
    raw: str = ""
    title: str = ""


@dataclass
class _Diagnosis:
    failures: list[_Failure] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# The repairer
# --------------------------------------------------------------------------------------------


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
        attempt = attempts[-1]
        policy = self._policy
        verdict = attempt.verdict
        too_large = [f.message for f in verdict.findings if f.code == "answer_too_large"]
        if too_large:  # no URL swap makes it smaller; nor is it parsed again here, on the loop
            return RepairOutcome(unfixed=tuple(too_large))
        source: Any = attempt.structured if attempt.structured is not None else attempt.answer
        answer = parse_answer(source, allowed_schemes=policy.fetch.allowed_schemes)
        diag = _diagnose(answer, verdict, policy)
        if diag.blockers:
            # a failure repair cannot place (a provider's citation object, a marker citing no
            # reference, ...): the answer function must fix it, so no page is fetched for it
            return RepairOutcome(unfixed=tuple(diag.blockers))
        if not diag.failures:
            return RepairOutcome()
        pool = _candidates(attempts, searches, policy)
        ranked = {
            k: _rank(f, answer, pool) for k, f in enumerate(diag.failures) if f.claim is not None
        }
        altered = {
            f.url
            for f in diag.failures
            if self._mode == "full" and f.status is CitationStatus.PASSAGE_ALTERED
        }
        pages: dict[str, ExtractedPage] = {}
        requested: set[str] = set()
        found: dict[int, list[_Found]] = {}
        tried: dict[int, set[str]] = {k: set() for k in ranked}
        corrections: dict[int, tuple[str, Any]] = {}
        new_budget = MAX_NEW_FETCHES
        # rounds: pages fetched already and the best new results first; a pair still without
        # support (its candidates refused, broken or no help) tries the next ones
        for round_no in range(MAX_ROUNDS):
            per_pair: dict[int, list[_Candidate]] = {}
            for k, chosen in ranked.items():
                if found.get(k):
                    continue
                # (a page requested before and refused or broken is not tried again)
                todo = [
                    c
                    for c in chosen
                    if c.url not in tried[k] and (c.url in pages or c.url not in requested)
                ]
                picked = (
                    [c for c in todo if c.fetched][:MAX_FETCHED_PER_PAIR] if round_no == 0 else []
                )
                fresh = 0
                for c in todo:
                    if c.fetched or fresh >= MAX_NEW_PER_PAIR:
                        continue
                    if c.url not in requested:
                        if new_budget <= 0:
                            break
                        new_budget -= 1
                        requested.add(c.url)
                    fresh += 1
                    picked.append(c)
                if picked:
                    per_pair[k] = picked
            urls = [c.url for cs in per_pair.values() for c in cs]
            if round_no == 0:
                urls += sorted(altered)
            urls = [u for u in dict.fromkeys(urls) if u not in pages]
            if not per_pair and not (round_no == 0 and altered):
                break
            pages.update(await self._fetch(urls, verdict, time_left))
            requested.update(urls)
            # judge each (failing pair, candidate page) as the validity axis would
            trials: list[tuple[int, _Candidate, Any]] = []
            for k, cands in per_pair.items():
                base = diag.failures[k].pair
                for c in cands:
                    tried[k].add(c.url)
                    ext = pages.get(c.url)
                    if base is None or ext is None:
                        continue
                    trial = _trial(base, c.url)
                    verify_pair(trial, ext, policy, judged=self._entailer is not None)
                    trials.append((k, c, trial))
            if round_no == 0:
                corrections = self._corrections(diag, answer, altered, pages)
            if self._entailer is not None:
                wanting = [t for _k, _c, t in trials]
                wanting += [t for _q, t in corrections.values()] if round_no == 0 else []
                await score_pairs(
                    self._entailer, [t for t in wanting if _wants_score(t)], cache=self._scores
                )
            for k, c, trial in trials:
                if trial.status is CitationStatus.OK:
                    found.setdefault(k, []).append(_Found(c, trial, _support_rank(trial, c)))
        urls = sorted(requested)

        decisions, unfixed = self._decide(diag, answer, verdict, found, corrections)
        repairs = [_as_repair(d, attempt.number) for d in decisions]
        if unfixed:
            return RepairOutcome(found=tuple(repairs), unfixed=tuple(unfixed), fetched=len(urls))
        edited = _apply(answer, attempt.structured, decisions)
        if edited is None:
            return RepairOutcome(
                found=tuple(repairs),
                unfixed=("the answer's citations could not be rewritten in place",),
                fetched=len(urls),
            )
        new_answer, items = edited
        checked = await self._recheck(
            items if items is not None else new_answer, question, searches, attempt.excluded_urls
        )
        checked = checked.model_copy(
            update={"findings": [*checked.findings, *(_as_finding(r) for r in repairs)]}
        )
        text = parse_answer(items).text if items is not None else new_answer
        repaired = Attempt(
            number=attempt.number,
            answer=text,
            verdict=checked,
            excluded_urls=attempt.excluded_urls,
            elapsed_ms=0.0 if self._replay else (time.perf_counter() - t0) * 1000.0,
            structured=items,
            repairs=repairs,
        )
        return RepairOutcome(attempt=repaired, found=tuple(repairs), fetched=len(urls))

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
            verify_pair(trial, ext, self._policy, judged=self._entailer is not None)
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


def _norm(url: str) -> str:
    try:
        return normalize_url(url)
    except UrlProblem:
        return url


def _diagnose(answer: Answer, verdict: Verdict, policy: Policy) -> _Diagnosis:
    diag = _Diagnosis()
    validity = verdict.axes.get("validity")
    # other failing axes are left to the re-check: a swap can mend diversity (a dead citation
    # counts no domain), while what it cannot mend fails there and goes to the feedback
    if validity is None or validity.passed:
        return diag
    raw_norm: dict[str, str] = {}
    for c in answer.citations:
        raw_norm.setdefault(c.url, c.normalized_url or c.url)
    offenders = {raw_norm.get(u) or _norm(u) for u in validity.offending_urls}
    reports = {(r.normalized_url or r.url): r for r in verdict.citations}
    for f in validity.findings:
        if f.severity is Severity.ERROR and f.code not in _ADDRESSED_CODES:
            diag.blockers.append(f.message)
    pairs = {(p.claim.index, p.url): p for p in build_pairs(answer)}
    covered: set[str] = set()
    for report in verdict.claims:
        if report.index >= len(answer.claims):
            continue
        claim = answer.claims[report.index]
        for check in report.checks:
            key = raw_norm.get(check.url) or _norm(check.url)
            # an offending URL, or a claim's own failure on a page that backs other claims
            if key not in offenders and check.failure != "pair":
                continue
            url_report = reports.get(key)
            status, reason = check.status, check.reason
            if status is CitationStatus.OK:
                if url_report is None or url_report.status is not CitationStatus.NOT_RETRIEVED:
                    continue
                status, reason = url_report.status, url_report.reason
            elif status is CitationStatus.NOT_ENTAILED and (
                report.supported or not policy.entailment.fail_unsupported
            ):
                continue
            cits = [
                i
                for i in claim.citation_indices
                if (answer.citations[i].normalized_url or answer.citations[i].url) == key
            ]
            if not cits or any(answer.citations[i].kind not in _KINDS_OK for i in cits):
                diag.blockers.append(
                    f"{check.url}: the failing citation is not part of the answer's text "
                    "(a provider's citation object), so it cannot be rewritten"
                )
                continue
            pair = pairs.get((claim.index, key))
            covered.add(key)
            diag.failures.append(
                _Failure(
                    claim=claim,
                    url=key,
                    raw_url=check.url,
                    status=status,
                    reason=reason,
                    quote=check.quote,
                    passage=check.passage,
                    citations=cits,
                    pair=pair,
                    claim_text=pair.claim_text if pair is not None else claim.text,
                )
            )
    # failing URLs (or their occurrences) that no claim cites: entries of the reference list
    # and links of a "Sources:" block
    listed = {_norm(u) for u in answer.references.values()}
    for key in sorted(offenders):
        url_report = reports.get(key)
        claimless = [
            c.index
            for c in answer.citations
            if (c.normalized_url or c.url) == key and c.claim_index is None
        ]
        if key in covered and not claimless:
            continue
        if key not in covered:
            cited = url_report is not None and bool(url_report.claim_indices)
            if cited or (not claimless and key not in listed):
                # a failure repair cannot place in the answer
                why = url_report.reason if url_report is not None else "fails"
                diag.blockers.append(f"{url_report.url if url_report else key}: {why}")
                continue
        raw = url_report.url if url_report is not None else key
        diag.failures.append(
            _Failure(
                claim=None,
                url=key,
                raw_url=raw,
                status=url_report.status if url_report is not None else CitationStatus.NOT_FOUND,
                reason=url_report.reason if url_report is not None else "listed and broken",
                quote=None,
                passage=None,
                citations=claimless,
            )
        )
    diag.blockers = list(dict.fromkeys(diag.blockers))
    return diag


_KINDS_OK = _TEXT_KINDS | {"structured"}


def _passing_urls(verdict: Verdict, claim: Claim, failing: set[str]) -> list[str]:
    """The claim's cited URLs whose check passed (raw, as cited), failing URLs left out."""
    report = next((r for r in verdict.claims if r.index == claim.index), None)
    if report is None:
        return []
    out: list[str] = []
    for check in report.checks:
        if check.status is CitationStatus.OK and _norm(check.url) not in failing:
            out.append(check.url)
    return out


# --------------------------------------------------------------------------------------------
# Candidates
# --------------------------------------------------------------------------------------------


def _terms(text: str) -> frozenset[str]:
    return frozenset(
        t[:_STEM] if len(t) > _STEM else t
        for t in PASSAGE_TOKEN_RE.findall(normalise(text))
        if t not in PARAPHRASE_STOPWORDS and (len(t) > 1 or t.isdigit())
    )


def _url_words(url: str) -> str:
    parts = urlsplit(url)
    return re.sub(r"[\W_]+", " ", f"{parts.hostname or ''} {parts.path}")


def _candidates(
    attempts: Sequence[Attempt], searches: Sequence[SearchRecord], policy: Policy
) -> dict[str, _Candidate]:
    """Pages cited earlier in the run (they resolved) and the run's search results, by
    normalised URL; never one the run found broken or told the agent not to cite."""
    bad: set[str] = set()
    for a in attempts:
        bad |= {_norm(u) for u in a.excluded_urls}
        for c in a.verdict.citations:
            if c.status.outcome is not Outcome.RESOLVES or c.status is CitationStatus.NOT_RETRIEVED:
                bad.add(c.normalized_url or _norm(c.url))
    pool: dict[str, _Candidate] = {}
    for a in attempts:
        for c in a.verdict.citations:
            key = c.normalized_url
            if key is None or key in bad or key in pool:
                continue
            pool[key] = _Candidate(key, c.url, c.title or "", fetched=True, order=len(pool))
    retrieved: set[str] = set()
    for s in searches:
        for r in s.results:
            try:
                key = normalize_url(r.url, allowed_schemes=policy.fetch.allowed_schemes)
            except UrlProblem:
                continue
            retrieved.add(key)
            if key in bad:
                continue
            cand = pool.get(key)
            if cand is None:
                pool[key] = _Candidate(
                    key, r.url, r.title or "", r.snippet or "", fetched=False, order=len(pool)
                )
            else:
                cand.title = cand.title or r.title or ""
                cand.snippet = cand.snippet or r.snippet or ""
    if policy.not_retrieved_fails and searches:
        pool = {k: c for k, c in pool.items() if k in retrieved}
    return pool


def _rank(f: _Failure, answer: Answer, pool: Mapping[str, _Candidate]) -> list[_Candidate]:
    """``pool`` for one failing pair, best first: content-word overlap of the claim (and its
    quote) with the candidate's title, snippet and URL, then pages already fetched (free),
    then the order the run met them in. How many are fetched is the caller's budget."""
    assert f.claim is not None
    cited = {answer.citations[i].normalized_url for i in f.claim.citation_indices}
    want = _terms(f.claim_text + " " + (f.quote or ""))
    scored: list[tuple[float, int, _Candidate]] = []
    for c in pool.values():
        if c.url == f.url or c.url in cited:
            continue
        have = _terms(f"{c.title} {c.snippet} {_url_words(c.raw)}")
        overlap = len(want & have) / len(want) if want else 0.0
        scored.append((overlap, c.order, c))
    scored.sort(key=lambda t: (-t[0], not t[2].fetched, t[1]))
    return [c for _o, _n, c in scored]


def _trial(base: Any, url: str, **changes: Any) -> Any:
    """A fresh validity pair: ``base`` (the failing claim's pair) against another page."""
    return dataclasses.replace(
        base,
        url=url,
        judged=None,
        verified=False,
        status=CitationStatus.OK,
        reason="ok",
        passage=None,
        evidence=None,
        entailment=None,
        **changes,
    )


def _wants_score(pair: Any) -> bool:
    return pair.status is CitationStatus.OK and bool(pair.evidence) and pair.entailment is None


def _support_rank(pair: Any, cand: _Candidate) -> tuple[int, float, float]:
    m: PassageMatch | None = pair.passage
    how = 2 if m is not None and m.how in ("exact", "normalised") else 1 if m and m.found else 0
    score = pair.entailment.score if pair.entailment is not None else 0.0
    return how, score, 1.0 if cand.fetched else 0.0


def _passage_of(pair: Any) -> str | None:
    m: PassageMatch | None = pair.passage
    if m is not None and m.matched_text:
        return " ".join(m.matched_text.split())[:600]
    if pair.entailment is not None and pair.entailment.evidence:
        return " ".join(str(pair.entailment.evidence).split())[:600]
    return None


def _corrected_quote(f: _Failure, answer: Answer) -> str | None:
    """The cited page's own words for an altered quote, when the quote can be replaced in
    the claim as written."""
    m = f.passage
    if m is None or not m.altered or not m.matched_text or f.quote is None or f.claim is None:
        return None
    words = " ".join(m.matched_text.split()).strip()
    if not words or words == f.quote or any(ch in words for ch in '"“”[]\n'):
        return None
    claim = f.claim
    if claim.start >= 0 and f.quote not in answer.text[claim.start : claim.end]:
        return None
    if f.quote not in f.claim_text:
        return None
    return words


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


def _short(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _as_repair(d: _Decision, attempt: int) -> Repair:
    f = d.failure
    claim = f.claim.text if f.claim is not None else ""
    index = f.claim.index if f.claim is not None else None
    why = f"{f.status.value}: {f.reason}"
    if d.kind == "swap":
        assert d.target is not None
        return Repair(
            kind="swap",
            attempt=attempt,
            claim_index=index,
            claim=claim,
            before=f.raw_url,
            after=d.target.raw,
            status=f.status,
            evidence_url=d.target.raw,
            passage=d.passage,
            reason=f"{why}; {d.target.raw} supports the claim",
        )
    if d.kind == "dedup":
        return Repair(
            kind="swap",
            attempt=attempt,
            claim_index=index,
            claim=claim,
            before=f.raw_url,
            after=d.evidence_url or "",
            status=f.status,
            evidence_url=d.evidence_url,
            reason=f"{why}; the claim's other citation supports it, so this one is removed",
        )
    if d.kind == "correct_quote":
        return Repair(
            kind="correct_quote",
            attempt=attempt,
            claim_index=index,
            claim=claim,
            before=f.quote or "",
            after=d.quote or "",
            status=f.status,
            evidence_url=d.evidence_url,
            passage=d.passage,
            reason=f"{why}; the page's own words support the claim",
        )
    if d.kind == "drop_url":
        return Repair(
            kind="drop",
            attempt=attempt,
            claim_index=None,
            claim="",
            before=f.raw_url,
            status=f.status,
            reason=f"{why}; listed but cited by no claim, so the entry is removed",
        )
    return Repair(
        kind="drop",
        attempt=attempt,
        claim_index=index,
        claim=claim,
        before=claim,
        status=f.status,
        reason=f"{why}; no page fetched in this run or returned by its searches supports it",
    )


def _as_finding(r: Repair) -> Finding:
    what = {
        "swap": f"re-cited {r.before} → {r.after}",
        "correct_quote": f"quote corrected to the page's words: {r.after!r}",
        "drop": f"removed {_short(r.before)!r}",
    }[r.kind]
    return Finding(
        code=f"repaired_{r.kind}",
        message=f"citeguard repaired attempt {r.attempt}: {what}",
        severity=Severity.INFO,
        axis="validity",
        url=(r.evidence_url or r.before) if r.kind != "drop" else None,
        claim_index=r.claim_index,
        details={"before": r.before, "after": r.after, "reason": r.reason},
    )


def _record_span(span: Any, out: RepairOutcome) -> None:
    if span is None:
        return
    counts = Counter(r.kind for r in out.found)
    attrs: dict[str, Any] = {
        "citeguard.repair.applied": out.attempt is not None,
        "citeguard.repair.passed": out.passed,
        "citeguard.repair.swaps": counts.get("swap", 0),
        "citeguard.repair.corrections": counts.get("correct_quote", 0),
        "citeguard.repair.drops": counts.get("drop", 0),
        "citeguard.repair.candidates_fetched": out.fetched,
        "citeguard.repair.unfixed": list(out.unfixed[:20]),
        "citeguard.repairs": json.dumps(
            [r.model_dump(mode="json") for r in out.found], ensure_ascii=False
        )[:8000],
    }
    if out.skipped:
        attrs["citeguard.repair.skipped"] = out.skipped
    try:
        for k, v in attrs.items():
            span.set_attribute(k, v)
    except Exception:  # tracing never fails a repair
        return


# --------------------------------------------------------------------------------------------
# Writing the repairs into the answer
# --------------------------------------------------------------------------------------------


def _apply(
    answer: Answer, items: list[dict[str, Any]] | None, decisions: Sequence[_Decision]
) -> tuple[str, list[dict[str, Any]] | None] | None:
    """The answer with ``decisions`` applied: (text, None) for text answers, ("", items) for
    structured ones; ``None`` when an edit cannot be made in place."""
    if items is not None:
        new_items = _apply_structured(answer, items, decisions)
        return None if new_items is None else ("", new_items)
    text = _apply_text(answer, decisions)
    return None if text is None else (text, None)


def _fates(decisions: Sequence[_Decision]) -> tuple[dict[int, _Fate], set[int], dict[int, str]]:
    fates: dict[int, _Fate] = {}
    dropped: set[int] = set()
    quotes: dict[int, str] = {}
    for d in decisions:
        f = d.failure
        if d.kind == "swap" and d.target is not None:
            for i in f.citations:
                fates[i] = _Fate("to", d.target.url, d.target.raw, d.target.title)
        elif d.kind in ("dedup", "drop_url"):
            for i in f.citations:
                fates[i] = _Fate("remove")
        elif d.kind == "drop_claim" and f.claim is not None:
            dropped.add(f.claim.index)
        elif d.kind == "correct_quote" and f.claim is not None and d.quote is not None:
            quotes[f.claim.index] = d.quote
    return fates, dropped, quotes


def _apply_structured(
    answer: Answer, items: list[dict[str, Any]], decisions: Sequence[_Decision]
) -> list[dict[str, Any]] | None:
    fates, dropped, quotes = _fates(decisions)
    old_quotes = {d.failure.claim.index: d.failure.quote for d in decisions if d.failure.claim}
    # claim index → item index, as the parser counts them (items with claim text)
    owners: dict[int, int] = {}
    for pos, entry in enumerate(items):
        if isinstance(entry, Mapping):
            raw = entry.get("claim")
            if isinstance(raw, str) and raw.strip():
                owners[len(owners)] = pos
    out: list[dict[str, Any]] = [dict(i) if isinstance(i, Mapping) else i for i in items]
    gone: set[int] = set()
    for claim in answer.claims:
        n = owners.get(claim.index)
        if n is None:
            continue
        if claim.index in dropped:
            gone.add(n)
            continue
        item = out[n]
        raw_urls = item.get("url")
        urls = [raw_urls] if isinstance(raw_urls, str) else list(raw_urls or [])
        new_urls: list[str] = []
        for ci in claim.citation_indices:
            c = answer.citations[ci]
            fate = fates.get(ci, _Fate())
            url = c.url if fate.kind == "keep" else fate.raw if fate.kind == "to" else None
            if url is not None and _norm(url) not in {_norm(u) for u in new_urls}:
                new_urls.append(url)
        if [_norm(u) for u in new_urls] != [_norm(u) for u in urls if isinstance(u, str)]:
            if not new_urls:
                return None
            item["url"] = (
                new_urls[0] if isinstance(raw_urls, str) and len(new_urls) == 1 else new_urls
            )
        if claim.index in quotes:
            old = old_quotes.get(claim.index)
            new = quotes[claim.index]
            if isinstance(item.get("quote"), str) and item["quote"].strip():
                item["quote"] = new
            if old and isinstance(item.get("claim"), str) and old in item["claim"]:
                item["claim"] = item["claim"].replace(old, new, 1)
    return [i for pos, i in enumerate(out) if pos not in gone]


# reference list lines: "[1] url", "- [1]: url", "[^1]: url", "[id]: url", "1. Title — url"
_DEF_BRACKET = re.compile(r"[ \t]*(?:[-*+•][ \t]+)?\[(?P<l>[^\[\]\n]{1,200})\][.:)]?[ \t]*")
_DEF_NUMBER = re.compile(r"[ \t]*(?P<l>\d{1,3})[.)][ \t]+")
_EMPTY_ITEM = re.compile(r"[ \t]*(?:[-*+•]|\d{1,3}[.)])?[ \t]*")


def _key(label: str) -> str:
    return " ".join(label.split()).lower()


@dataclass
class _DefLine:
    start: int  # of the line
    end: int  # of the line, without its newline
    label: tuple[int, int]  # the label inside the line
    prefix: int  # where the entry's text begins (after the label's brackets)


def _def_line(text: str, label: str, url: str, claims: Sequence[Claim]) -> _DefLine | None:
    """The reference list line that defines ``label`` as ``url``."""
    pos = 0
    while pos <= len(text):
        nl = text.find("\n", pos)
        end = len(text) if nl < 0 else nl
        line = text[pos:end]
        inside = any(c.start <= pos < c.end for c in claims)
        if url in line and not inside:
            for pattern in (_DEF_BRACKET, _DEF_NUMBER):
                m = pattern.match(line)
                if m is not None and _key(m.group("l")) == label:
                    return _DefLine(pos, end, (pos + m.start("l"), pos + m.end("l")), pos + m.end())
        if nl < 0:
            break
        pos = nl + 1
    return None


def _title_of(entry: str, url: str) -> str:
    rest = entry.replace(url, " ")
    return rest.strip(" \t—–-:|()[]<>").strip()


def _clean_title(title: str) -> str:
    title = re.sub(r"[\[\]()<>\n]", " ", title)
    return _short(title, 120)


def _define(text: str, d: _DefLine, label: str, old_url: str, new_url: str, title: str) -> str:
    """``d``'s line with ``label``, ``new_url`` for ``old_url`` and ``title`` for its title."""
    head = text[d.start : d.label[0]] + label + text[d.label[1] : d.prefix]
    entry = text[d.prefix : d.end]
    old_title = _title_of(entry, old_url)
    entry = entry.replace(old_url, new_url, 1)
    if old_title:
        new_title = _clean_title(title) or (urlsplit(new_url).hostname or new_url)
        entry = entry.replace(old_title, new_title, 1)
    return head + entry


def _style(label: str) -> str:
    return "footnote" if label.startswith("^") else "number" if label.isdigit() else "name"


def _new_label(style: str, taken: set[str], like: str) -> str:
    if style == "number":
        n = max((int(t) for t in taken if t.isdigit()), default=0) + 1
        return str(n)
    if style == "footnote":
        nums = [int(t[1:]) for t in taken if t.startswith("^") and t[1:].isdigit()]
        return f"^{max(nums, default=0) + 1}"
    k = 2
    while f"{like}-{k}" in taken:
        k += 1
    return f"{like}-{k}"


def _marker(marker: str, kind: str, old: Sequence[str], new: Sequence[str]) -> str | None:
    """``marker`` citing ``new`` labels instead of ``old`` ones."""
    if kind == "numbered":
        return "[" + ", ".join(new) + "]"
    if len(new) != 1:
        return None
    if kind == "footnote":
        return f"[{new[0]}]" if new[0].startswith("^") else None
    # reference links: [text][id], [text][] and the shortcut [id]
    if marker.endswith("[]"):
        return marker[:-2] + f"[{new[0]}]"
    m = re.fullmatch(r"(\[(?:[^\[\]]|\[[^\[\]]*\])*\])(\[[^\[\]]*\])?", marker)
    if m is None:
        return None
    return m.group(1) + f"[{new[0]}]"


def _inline_target(raw: str) -> str:
    return f"<{raw}>" if re.search(r"[\s()<>]", raw) else raw


def _retarget(c: Citation, marker: str, raw: str) -> str:
    """A link, anchor or bare URL pointing at ``raw`` instead."""
    if c.kind == "inline_link":
        i = marker.rfind("](")
        j = marker.find(c.url, i) if i >= 0 else -1
        if j >= 0:
            return marker[:j] + _inline_target(raw) + marker[j + len(c.url) :]
        return f"[{c.label or raw}]({_inline_target(raw)})"
    if c.kind == "html_anchor":
        escaped = raw.replace("&", "&amp;").replace('"', "&quot;")
        new, n = re.subn(
            r"""(href\s*=\s*)(?:"[^"]*"|'[^']*'|[^\s"'>]+)""",
            lambda m: f'{m.group(1)}"{escaped}"',
            marker,
            count=1,
            flags=re.IGNORECASE,
        )
        return new if n else f'<a href="{escaped}">{c.label or raw}</a>'
    # a bare URL (or an <autolink>)
    if c.url in marker:
        return marker.replace(c.url, raw, 1)
    return f"<{raw}>" if marker.startswith("<") else raw


def _cut(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` widened over the spaces that would be left doubled or dangling."""
    s = start
    while s > 0 and text[s - 1] in " \t":
        s -= 1
    if s < start and (end >= len(text) or text[end] in " \t\n.,;:!?)"):
        return s, end
    e = end
    while e < len(text) and text[e] in " \t":
        e += 1
    return start, e


def _apply_text(answer: Answer, decisions: Sequence[_Decision]) -> str | None:
    text = answer.text
    fates, dropped, quotes = _fates(decisions)
    edits: list[tuple[int, int, str]] = []
    cuts: list[tuple[int, int]] = []
    for ci in sorted(dropped):
        claim = answer.claims[ci]
        cuts.append(_cut(text, claim.start, claim.end))
    edits.extend((s, e, "") for s, e in cuts)

    def in_cut(pos: int) -> bool:
        return any(s <= pos < e for s, e in cuts)

    old_quotes = {d.failure.claim.index: d.failure.quote for d in decisions if d.failure.claim}
    for ci, words in quotes.items():
        claim, was = answer.claims[ci], old_quotes.get(ci)
        i = text.find(was, claim.start, claim.end) if was else -1
        if i < 0 or was is None:
            return None
        edits.append((i, i + len(was), words))

    def fate_of(c: Citation) -> _Fate:
        if c.claim_index is not None and c.claim_index in dropped:
            return _Fate("remove")
        return fates.get(c.index, _Fate())

    # links, anchors and bare URLs: each occurrence on its own
    for c in answer.citations:
        if c.start < 0 or c.kind in _REF_KINDS or in_cut(c.start):
            continue
        fate = fate_of(c)
        marker = text[c.start : c.end]
        if fate.kind == "to":
            edits.append((c.start, c.end, _retarget(c, marker, fate.raw)))
        elif fate.kind == "remove":
            if c.kind in ("inline_link", "html_anchor") and c.label:
                edits.append((c.start, c.end, c.label))  # a link keeps its words
            else:
                edits.append((*_cut(text, c.start, c.end), ""))

    # reference lists: decide per label, then rewrite markers and entries
    refs = answer.references
    by_label: dict[str, list[Citation]] = {}
    for c in answer.citations:
        if c.kind in _REF_KINDS and c.label is not None and c.start >= 0:
            by_label.setdefault(c.label, []).append(c)
    final: dict[str, str] = {k: _norm(u) for k, u in refs.items()}
    redefine: dict[str, _Fate] = {}
    remove: set[str] = set()
    fates_of = {label: [fate_of(c) for c in cits] for label, cits in by_label.items()}
    stable = {
        label: final[label]
        for label, fs in fates_of.items()
        if label in final and any(f.kind == "keep" for f in fs)
    }
    for label, fs in fates_of.items():
        if label in stable:
            continue
        targets = [f for f in fs if f.kind == "to"]
        if not targets:
            remove.add(label)
            continue
        main = Counter(f.url for f in targets).most_common(1)[0][0]
        if any(u == main and _style(s) == _style(label) for s, u in stable.items()):
            remove.add(label)  # an entry that stays lists the page already: point there
            continue
        redefine[label] = next(f for f in targets if f.url == main)
        final[label] = main
    # broken entries no claim cites (decided as drop_url)
    dropped_urls = {d.failure.url for d in decisions if d.kind == "drop_url"}
    for label, url in refs.items():
        if label not in by_label and _norm(url) in dropped_urls:
            remove.add(label)
    for label in remove:
        final.pop(label, None)
    taken = set(refs)
    added: list[tuple[str, str, _Fate]] = []  # (template label, new label, target)

    def label_for(label: str, fate: _Fate) -> str:
        if final.get(label) == fate.url:
            return label
        for other, url in final.items():
            if url == fate.url and _style(other) == _style(label):
                return other
        new = _new_label(_style(label), taken, label)
        taken.add(new)
        final[new] = fate.url
        added.append((label, new, fate))
        return new

    groups: dict[tuple[int, int], list[Citation]] = {}
    for cits in by_label.values():
        for c in cits:
            groups.setdefault((c.start, c.end), []).append(c)
    for (start, end), cits in sorted(groups.items()):
        if in_cut(start):
            continue
        cits.sort(key=lambda c: c.index)
        old = [c.label or "" for c in cits]
        new: list[str] = []
        for c in cits:
            fate = fate_of(c)
            label = c.label or ""
            lab = (
                label
                if fate.kind == "keep"
                else label_for(label, fate)
                if fate.kind == "to"
                else None
            )
            if lab is not None and lab not in new:
                new.append(lab)
        if new == old:
            continue
        if not new:
            edits.append((*_cut(text, start, end), ""))
            continue
        rewritten = _marker(text[start:end], cits[0].kind, old, new)
        if rewritten is None:
            return None
        edits.append((start, end, rewritten))

    # the entries themselves
    lines: dict[str, _DefLine] = {}
    for label in {*redefine, *remove, *(t for t, _n, _f in added)}:
        found = _def_line(text, label, refs.get(label, "\0"), answer.claims)
        if found is None:
            return None
        lines[label] = found
    for label, fate in redefine.items():
        d = lines[label]
        edits.append((d.start, d.end, _define(text, d, label, refs[label], fate.raw, fate.title)))
    for label in remove:
        d = lines[label]
        edits.append((d.start, min(len(text), d.end + 1), ""))
    if added:
        kept = [d for lab, d in lines.items() if lab not in remove]
        every = [
            x
            for x in (_def_line(text, lab, u, answer.claims) for lab, u in refs.items())
            if x is not None and x.start not in {lines[r].start for r in remove}
        ]
        last = max([*kept, *every], key=lambda d: d.end)
        new_lines = [
            _define(text, lines[tmpl], new, refs[tmpl], fate.raw, fate.title)
            for tmpl, new, fate in added
        ]
        edits.append((last.end, last.end, "".join("\n" + ln for ln in new_lines)))

    edits.sort(key=lambda e: (e[0], e[1]))
    for (_s1, e1, _a), (s2, _e2, _b) in pairwise(edits):
        if s2 < e1:
            return None  # overlapping edits: the answer's layout is not one repair can follow
    out = text
    for s, e, rep in sorted(edits, key=lambda x: (x[0], x[1]), reverse=True):
        out = out[:s] + rep + out[e:]
    return _tidy(out, dropped=len(dropped))


def _tidy(text: str, *, dropped: int) -> str:
    kept = []
    for line in text.split("\n"):
        line = line.rstrip()
        if line and _EMPTY_ITEM.fullmatch(line):
            continue  # a list item whose claim was removed
        kept.append(line)
    out = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    if dropped:
        note = f"[citeguard removed {dropped} claim(s) that no source supports]"
        out = f"{out}\n\n{note}" if out else note
    return out

"""The citation-validity axis: the URL resolves, the passage is on the page, the claim is entailed.

Composed per (claim, cited URL) pair, then rolled up per distinct URL (the unit that regeneration
excludes) and per claim (the unit users read). Pure with respect to its inputs: the fetch results
and extracted pages come in, an :class:`AxisResult` and reports come out.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from citeguard.checks.base import AnnotatorKind, CheckContext, is_llm_backend
from citeguard.checks.claim_parts import claim_parts, combine
from citeguard.checks.claim_view import claim_fragment, claim_report, mark_gated
from citeguard.checks.entail import (
    Entailer,
    EntailmentRequest,
    evidence_windows,
    score_requests,
)
from citeguard.checks.evidence import claim_evidence
from citeguard.checks.failures import excludes, mark_failures, pair_findings
from citeguard.checks.freshness import find_caveat
from citeguard.checks.minilm import LOCAL_MODEL_HINT
from citeguard.checks.page_meta import page_head, quotes_page_title, without_citation_artefacts
from citeguard.checks.passage import (
    PreparedText,
    find_as_written,
    find_paraphrase,
    find_passage,
    prepare_text,
    text_fragment_url,
)
from citeguard.checks.quoted import (
    dropped_qualifier,
    residual_claim,
    sentence_around,
    words_in,
)
from citeguard.models import (
    Answer,
    AxisResult,
    CitationReport,
    CitationStatus,
    Claim,
    ClaimCheck,
    ClaimReport,
    EntailmentLabel,
    EntailmentScore,
    FailureKind,
    FetchResult,
    Finding,
    Outcome,
    Page,
    PassageMatch,
    Severity,
    Verdict,
)
from citeguard.policy import Policy
from citeguard.web.botwall import bot_wall_reason
from citeguard.web.soft404 import soft_404_reason
from citeguard.web.urls import UrlProblem, host_of, normalize_url, registrable_domain

_PASS_STATUSES = frozenset({CitationStatus.OK})
_WORDS_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


@dataclass
class _Pair:
    claim: Claim
    url: str
    claim_text: str
    quote: str | None
    # the words naming the source (its link text): attribution, not content
    label: str | None = None
    # what the entailer judges: the claim, or what a verified quote leaves of it
    judged: str | None = None
    verified: bool = False  # the passage step ran
    # judged on the whole page: a claim of several facts is judged part by part (claim_parts)
    whole_page: bool = False
    status: CitationStatus = CitationStatus.OK
    reason: str = "ok"
    passage: PassageMatch | None = None
    evidence: str | None = None
    entailment: EntailmentScore | None = None


@dataclass(frozen=True)
class ExtractedPage:
    """A page with its texts normalised once for every quote and paraphrase matched on it."""

    page: Page
    text: PreparedText
    main: PreparedText | None

    @classmethod
    def of(cls, page: Page) -> ExtractedPage:
        """The page prepared for matching. The sentence index of a text up to
        :data:`_PREBUILT_INDEX_CHARS` is built here, where the extraction runs (~0.4 µs a
        character: 4 ms for 10 kB); a longer one's is built in a thread when a pair needs it
        (:func:`_verify_pairs`): unpickled from the extraction process it would hold the GIL
        for as long in one piece."""
        main = prepare_text(page.main_text) if page.main_text else None
        text = prepare_text(page.text)
        # paraphrases are searched in the whole text only (find_paraphrase): the main text's
        # index would never be read
        if len(text.text) <= _PREBUILT_INDEX_CHARS:
            text.sentences()
        return cls(page=page, text=text, main=main)

    @functools.cached_property
    def head(self) -> str:
        """The page's metadata as evidence (title, site, date:
        :func:`~citeguard.checks.page_meta.page_head`), built once per page."""
        return page_head(self.page)

    @property
    def indexed(self) -> bool:
        """Whether the page's text has the sentence index paraphrase search reads (pairs
        verify in ~0.1 ms)."""
        return self.text.indexed


_PREBUILT_INDEX_CHARS = 50_000
# the longest one check verifies pairs on indexed pages on the event loop in one turn of it
# (~0.1-0.3 ms a pair); what is left then goes to a thread. (A count of 32 pairs a page held the
# loop 8 ms; 50 pages arriving together, 2 ms each, 25-50 ms.)
_INLINE_SECONDS = 0.002


class _TurnBudget:
    """The time one check may spend verifying on the event loop in one turn of it, shared by
    its pages (their extractions often finish together, and their verifications then all run
    in the same turn)."""

    __slots__ = ("_seconds", "_until")

    def __init__(self, seconds: float = _INLINE_SECONDS) -> None:
        self._seconds = seconds
        self._until: float | None = None

    def until(self) -> float:
        """The ``time.perf_counter()`` value this turn's inline work must stop at."""
        if self._until is None:
            self._until = time.perf_counter() + self._seconds
            asyncio.get_running_loop().call_soon(self._next_turn)
        return self._until

    def _next_turn(self) -> None:
        self._until = None


async def _verify_pairs(
    work: Sequence[tuple[_Pair, ExtractedPage]],
    policy: Policy,
    *,
    judged: bool,
    serial: asyncio.Lock | None = None,
    budget: _TurnBudget | None = None,
) -> None:
    """``verify_pair`` over ``work``: on the loop within ``budget`` (:data:`_INLINE_SECONDS` a
    turn), the rest in a thread (and all of it when a page has no index yet: a long page's first
    paraphrase search builds it, 400 ms for 1 MB). ``serial``: held while a thread runs, so one
    check's pages are verified in one thread at a time (the work holds the GIL: more threads are
    no faster, and each takes the loop's turn at the GIL)."""

    def run(items: Sequence[tuple[_Pair, ExtractedPage]]) -> None:
        for pair, ext in items:
            verify_pair(pair, ext, policy, judged=judged)

    done = 0
    if all(ext.indexed for _, ext in work):
        clock = time.perf_counter
        until = (budget or _TurnBudget()).until()
        while done < len(work) and clock() < until:
            pair, ext = work[done]
            verify_pair(pair, ext, policy, judged=judged)
            done += 1
    if done < len(work):
        async with serial or contextlib.nullcontext():
            await asyncio.to_thread(run, work[done:])


@dataclass
class ValidityOutcome:
    axis: AxisResult
    citations: list[CitationReport]
    claims: list[ClaimReport]
    offending_urls: frozenset[str] = field(default_factory=frozenset)


def claim_text_without_markers(answer: Answer, claim: Claim) -> str:
    """The claim's words with citation markers removed (what an entailer should judge)."""
    pieces: list[str] = []
    pos = claim.start
    for ci in sorted(claim.citation_indices, key=lambda i: answer.citations[i].start):
        c = answer.citations[ci]
        if c.start < 0 or c.start < pos or c.end > claim.end:
            continue
        if c.kind in ("inline_link", "reference_link", "html_anchor"):
            # keep the link text: it is part of the sentence
            pieces.append(answer.text[pos : c.start])
            pieces.append(c.label or "")
        else:
            pieces.append(answer.text[pos : c.start])
        pos = c.end
    pieces.append(answer.text[pos : claim.end])
    text = " ".join("".join(pieces).split())
    # "As of 2 December 2026, X is ..." — the caveat dates the answer, it is not a claim the
    # source must back (the freshness axis checks it)
    caveat = find_caveat(text)
    if caveat is not None:
        rest = (text[: caveat.start] + text[caveat.end :]).strip(" ,;:—–-")
        text = rest[:1].upper() + rest[1:] if caveat.start == 0 else rest
    return text or claim.text


def _evidence_window(text: str, match: PassageMatch | None, window_chars: int) -> str:
    """The sentences around the matched passage (the whole text when nothing was matched)."""
    if not text:
        return ""
    if match is None or match.start < 0:
        return text  # the entailer windows it and keeps the best windows
    # cut a bounded slice first so sentence splitting never walks the whole page
    lo = max(0, match.start - window_chars)
    hi = min(len(text), match.end + window_chars)
    windows = evidence_windows(
        text[lo:hi], window_chars=window_chars, around=(match.start - lo, match.end - lo)
    )
    return windows[0] if windows else text[lo:hi]


def _passage_for(pair: _Pair, page: ExtractedPage, policy: Policy) -> PassageMatch:
    if pair.quote:
        return find_passage(pair.quote, page.text, main_text=page.main, policy=policy.passage)
    return find_paraphrase(pair.claim_text, page.text, policy=policy.passage)


def _failed_passage(match: PassageMatch, quoted: bool) -> tuple[CitationStatus, str] | None:
    if match.found:
        return None
    if match.altered:
        toks = ", ".join(match.differing_tokens[:6])
        return CitationStatus.PASSAGE_ALTERED, (
            f"the quote differs from the page in meaning-bearing words ({toks})"
            if toks
            else "the quote differs from the page in meaning-bearing words"
        )
    if quoted:
        return (
            CitationStatus.PASSAGE_MISSING,
            match.reason or "the quoted passage is not on the page",
        )
    return CitationStatus.PASSAGE_MISSING, match.reason or "paraphrase drifts too far from the page"


def _relevant(pair: _Pair, match: PassageMatch, policy: Policy) -> bool:
    """Whether a paraphrase below the threshold still covers enough of the page to judge."""
    return (
        not pair.quote
        and match.how == "paraphrase"
        and not match.altered
        and match.score >= policy.passage.relevance_floor * 100.0
    )


def _quote_as_evidence(pair: _Pair, page: Page, window_chars: int) -> bool:
    """A verified quote is evidence: settle the pair when the quote decides it.

    Sets ``QUOTE_OUT_OF_CONTEXT`` when the page negates or hedges the quoted words right before
    them and the claim drops that word; marks the pair supported when the claim adds nothing to
    the quote but attribution, or only words that stand in the passage around it (a speaker's
    name, say); otherwise leaves what the claim adds for the entailer to judge
    (``pair.judged``). True when the pair is settled.
    """
    match = pair.passage
    if match is None or pair.quote is None:
        return False
    if _drops_qualifier(pair, page, match, "quoted words"):
        return True
    host = host_of(pair.url)
    source_words = [host.replace(".", " "), page.title or "", pair.label or ""]
    residual = residual_claim(pair.claim_text, pair.quote, source_words=source_words)
    reason = "the quote is on the page and the claim adds only attribution to it"
    if residual is not None:
        window = _evidence_window(page.text, match, window_chars)
        sentence = sentence_around(page.text, match.start, match.end)
        if not words_in(window, residual.content, sentence=sentence):
            pair.judged = residual.text  # the entailer judges what the claim adds
            return False
        reason = "the quote is on the page, and the words the claim adds are in the passage"
    pair.entailment = _by_construction(match, "quote", reason)
    return True


def _by_construction(match: PassageMatch, backend: str, reason: str) -> EntailmentScore:
    """A pair the page's own words settle: supported, no model asked."""
    return EntailmentScore(
        label="supported",
        score=1.0,
        probabilities={"supported": 1.0},
        evidence=match.matched_text,
        backend=backend,
        reason=reason,
    )


def _drops_qualifier(pair: _Pair, page: Page, match: PassageMatch, what: str) -> bool:
    """``QUOTE_OUT_OF_CONTEXT`` when the page negates or hedges the matched words right before
    them and the claim drops that word. True when it did."""
    qualifier = dropped_qualifier(page.text, match.start)
    claim_words = set(_WORDS_RE.findall(pair.claim_text.casefold().replace("’", "'")))
    if qualifier is None or qualifier in claim_words:
        return False
    pair.status = CitationStatus.QUOTE_OUT_OF_CONTEXT
    pair.reason = f"the page has {qualifier!r} right before the {what}, and the claim drops it"
    return True


# an unquoted claim shorter than this many words is not settled by being on the page: a few
# common words can stand anywhere
_VERBATIM_MIN_WORDS = 5
_TRAILING_PUNCT = " \t\n.,;:!?…。"


def _verbatim_claim(pair: _Pair, ext: ExtractedPage, policy: Policy) -> bool:
    """An unquoted claim whose words stand on the page as written (exactly, or after
    normalisation, in the main text) says what the page says: supported by construction, as
    a verified quote is, unless the page negates or hedges those words right before them.
    True when the pair is settled; otherwise the paraphrase step and the entailer decide."""
    text = pair.claim_text.strip(_TRAILING_PUNCT)
    if len(_WORDS_RE.findall(text)) < _VERBATIM_MIN_WORDS:
        return False
    # in the main text: a copy of the page's boilerplate is not the page's own statement
    match = find_as_written(text, ext.text, main_text=ext.main, policy=policy.passage)
    if match is None:
        return False
    pair.passage = match
    if _drops_qualifier(pair, ext.page, match, "claim's words"):
        return True
    pair.entailment = _by_construction(
        match, "verbatim", "the claim's words are on the page as written"
    )
    return True


def uncited_references(answer: Answer) -> dict[str, str]:
    """Reference-list entries no marker cites, normalised URL → URL as written: the user still
    sees and can click them, so the guard checks that they resolve."""
    out: dict[str, str] = {}
    cited = set(answer.urls)
    for f in answer.findings:
        if f.code != "unused_reference" or not f.url:
            continue
        try:
            key = normalize_url(f.url)
        except UrlProblem:
            continue
        if key not in cited:
            out.setdefault(key, f.url)
    return out


def build_pairs(answer: Answer) -> list[_Pair]:
    """One pair per (claim, distinct cited URL), in claim order."""
    pairs: list[_Pair] = []
    for claim in answer.claims:
        seen: set[str] = set()
        ctext = claim_text_without_markers(answer, claim)
        for ci in claim.citation_indices:
            cit = answer.citations[ci]
            key = cit.normalized_url or cit.url
            if key in seen:
                continue
            seen.add(key)
            pairs.append(
                _Pair(claim=claim, url=key, claim_text=ctext, quote=cit.quote, label=cit.label)
            )
    return pairs


def verify_pair(pair: _Pair, ext: ExtractedPage, policy: Policy, *, judged: bool) -> None:
    """The passage step for one pair on a page that resolved: find the quote or paraphrase,
    settle what a verified quote settles, and pick the evidence the entailer will read.
    ``judged`` says whether an entailer will see the pair. Sub-millisecond for typical pages
    (the page's text was normalised once, off the loop, when it was extracted)."""
    pair.verified = True
    page = ext.page
    if pair.quote and quotes_page_title(pair.quote, page):
        # the claim names the page by its title: metadata, judged with the rest of the claim
        pair.quote = None
    if policy.passage.check_passages and not pair.quote and _verbatim_claim(pair, ext, policy):
        return
    if policy.passage.check_passages and (pair.quote or pair.claim_text):
        match = _passage_for(pair, ext, policy)
        pair.passage = match
        failed = _failed_passage(match, quoted=bool(pair.quote))
        if failed is not None and judged and _relevant(pair, match, policy):
            # a paraphrase the passage step could not place: the entailer decides on the
            # whole page (where a long page states it, its parts may stand far apart)
            _judge_on_page(pair, ext)
            return
        if failed is not None:
            pair.status, pair.reason = failed
            return
        if pair.quote and policy.passage.require_main_text and match.in_main_text is False:
            pair.status = CitationStatus.PASSAGE_MISSING
            pair.reason = "the quote is only in the page's boilerplate, not its main text"
            return
        verified = match.how in ("exact", "normalised")
        window_chars = policy.entailment.window_chars
        if pair.quote and verified and _quote_as_evidence(pair, page, window_chars):
            return
    if judged and not pair.quote:
        _judge_on_page(pair, ext)
        return
    pair.evidence = _evidence_window(page.text, pair.passage, policy.entailment.window_chars)


def _judge_on_page(pair: _Pair, ext: ExtractedPage) -> None:
    """An unquoted claim is judged on the whole page (its metadata first), without the
    citation artefacts it carries (:mod:`citeguard.checks.page_meta`); the evidence shown is
    what the entailer found there."""
    judged = without_citation_artefacts(pair.claim_text)
    if judged != pair.claim_text:
        pair.judged = judged
    pair.evidence = claim_evidence(judged, ext.text, ext.head)
    pair.whole_page = True


def _wants_score(pair: _Pair) -> bool:
    return pair.status is CitationStatus.OK and bool(pair.evidence) and pair.entailment is None


OnUncertain = Literal["judge", "warn", "fail"]


def _apply_score(pair: _Pair, score: EntailmentScore, on_uncertain: OnUncertain = "fail") -> None:
    """Set the pair's score and what it does: ``not_supported`` and ``contradicted`` reject it
    (``not_entailed``); ``uncertain`` rejects it only under ``on_uncertain="fail"``, else it
    passes, to be flagged (``validity.support_uncertain``) or judged."""
    pair.entailment = score
    if score.label == "supported" or (score.label == "uncertain" and on_uncertain != "fail"):
        return
    pair.status = CitationStatus.NOT_ENTAILED
    pair.reason = (
        f"the page contradicts the claim ({score.reason})"
        if score.label == "contradicted"
        else f"the passage does not support the claim ({score.reason})"
        if score.label == "not_supported"
        else f"whether the passage supports the claim is uncertain ({score.reason})"
    ).replace(" ()", "")


def _unsettled(pair: _Pair) -> bool:
    """A pair that passed with its support uncertain."""
    return (
        pair.status is CitationStatus.OK
        and pair.entailment is not None
        and pair.entailment.label == "uncertain"
    )


class ScoreCache:
    """Entailment scores by (backend, claim, evidence), shared by a Guard's runs and attempts:
    attempt 2 of an answer that keeps most of attempt 1's claims scores only the new ones.
    A bounded LRU (``size`` entries)."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._scores: OrderedDict[tuple[str, str, str], EntailmentScore] = OrderedDict()

    def get(self, key: tuple[str, str, str]) -> EntailmentScore | None:
        hit = self._scores.get(key)
        if hit is not None:
            self._scores.move_to_end(key)
        return hit

    def put(self, key: tuple[str, str, str], score: EntailmentScore) -> None:
        self._scores[key] = score
        self._scores.move_to_end(key)
        while len(self._scores) > self._size:
            self._scores.popitem(last=False)

    def __len__(self) -> int:
        return len(self._scores)


async def score_pairs(
    entailer: Entailer,
    pairs: Sequence[_Pair],
    *,
    cache: ScoreCache | None = None,
    on_uncertain: OnUncertain = "fail",
) -> None:
    """Score ``pairs`` in one batch (what ``cache`` already knows is not sent again).
    ``on_uncertain``: what an uncertain score does (:func:`_apply_score`; "fail" by default,
    so a repair only ever swaps in a page that supports the claim)."""
    todo: list[tuple[_Pair, tuple[str, str, str]]] = []
    for p in pairs:
        key = (entailer.name, p.judged or p.claim_text, p.evidence or "")
        hit = cache.get(key) if cache is not None else None
        if hit is not None:
            _apply_score(p, hit, on_uncertain)
        else:
            todo.append((p, key))
    if not todo:
        return
    requests = [
        EntailmentRequest(
            key[1], key[2], page=p.url, claim_id=str(p.claim.index), whole_page=p.whole_page
        )
        for p, key in todo
    ]
    # a claim of several facts judged on a whole page: each part too, on the same page
    parts = [claim_parts(key[1]) if p.whole_page else [] for p, key in todo]
    for (p, key), split in zip(todo, parts, strict=True):
        if len(split) > 1:
            requests += [
                EntailmentRequest(
                    part, key[2], page=p.url, claim_id=f"{p.claim.index}.{j}", whole_page=True
                )
                for j, part in enumerate(split, 1)
            ]
    scores = await score_requests(entailer, requests)
    rest = iter(scores[len(todo) :])
    for k in range(len(todo)):
        if len(parts[k]) > 1:
            scores[k] = combine(scores[k], [(part, next(rest)) for part in parts[k]])
    for (p, key), score in zip(todo, scores[: len(todo)], strict=True):
        # a judge that could not be asked (down, out of budget) is not remembered: a later
        # attempt asks again
        if cache is not None and not score.reason.startswith("judge unavailable"):
            cache.put(key, score)
        _apply_score(p, score, on_uncertain)


async def judge_uncertain(
    judge: Entailer, pairs: Sequence[_Pair], *, cache: ScoreCache | None = None
) -> None:
    """The cascade: ask ``judge`` about the pairs that passed with their support uncertain
    (one request per page for all of its claims; within the run's judge budget, recorded in
    its snapshots). The judge's label replaces the first backend's; a judge that cannot tell,
    errs or is out of budget leaves the pair uncertain (it passes, flagged)."""
    asked = [p for p in pairs if _unsettled(p) and p.evidence]
    if not asked:
        return
    first = {id(p): p.entailment for p in asked}
    for p in asked:
        # a claim judged on a whole page goes to the judge with the evidence the first backend
        # read there at its best (the sentences it found), not all that was retrieved
        found = p.entailment.evidence if p.entailment is not None else ""
        if p.whole_page and found.strip():
            p.evidence = found
        p.whole_page = False  # the judge reads the claim whole
        p.entailment = None
    await score_pairs(judge, asked, cache=cache, on_uncertain="warn")
    for p in asked:
        before, after = first[id(p)], p.entailment
        if before is None or after is None:
            continue
        note = f"{before.backend} was uncertain, P(supported) {before.score:.2f}"
        p.entailment = after.model_copy(update={"reason": f"{after.reason} [{note}]"})
        if p.status is CitationStatus.NOT_ENTAILED:
            p.reason = f"{p.reason} [{note}]"


class EarlyValidity:
    """The validity work of one check, begun page by page as pages arrive.

    The Guard calls :meth:`page_arrived` for each page the moment its fetch completes; once
    the page is extracted, its pairs are verified (passage step) and handed to the entailer.
    Pages that arrive while the entailer is busy join the next batch, so scoring is batched
    across pages and hides behind the wait for the slowest URL. :func:`check_validity` then
    finishes what is left: pages that never arrived early, and the roll-up.
    """

    def __init__(
        self,
        answer: Answer,
        *,
        policy: Policy,
        entailer: Entailer | None,
        excluded: frozenset[str] = frozenset(),
        cache: ScoreCache | None = None,
        pairs: list[_Pair] | None = None,
    ) -> None:
        self.pairs = build_pairs(answer) if pairs is None else pairs
        self._by_url: dict[str, list[_Pair]] = {}
        for p in self.pairs:
            self._by_url.setdefault(p.url, []).append(p)
        self._policy = policy
        self._entailer = entailer if policy.entailment.check_entailment else None
        self._excluded = excluded
        self._cache = cache
        self._verifying: list[asyncio.Task[None]] = []
        self._pending: list[_Pair] = []
        self._scoring: asyncio.Task[None] | None = None
        self._batches: list[asyncio.Task[None]] = []
        self._serial = asyncio.Lock()  # one verifying thread at a time (_verify_pairs)
        self._inline = _TurnBudget()  # and so much time a turn on the loop

    @classmethod
    async def begin(
        cls,
        answer: Answer,
        *,
        policy: Policy,
        entailer: Entailer | None,
        excluded: frozenset[str] = frozenset(),
        cache: ScoreCache | None = None,
    ) -> EarlyValidity:
        """As the constructor; an answer of many claims has its pairs built in a thread."""
        many = len(answer.claims) + len(answer.citations) > _INLINE_ITEMS
        # or long claims: the caveat search over one 100 kB claim took 20-200 ms
        many = many or sum(len(c.text) for c in answer.claims) > _INLINE_CLAIM_CHARS
        pairs = await asyncio.to_thread(build_pairs, answer) if many else build_pairs(answer)
        return cls(
            answer, policy=policy, entailer=entailer, excluded=excluded, cache=cache, pairs=pairs
        )

    def page_arrived(
        self, url: str, res: FetchResult, job: asyncio.Future[ExtractedPage | None] | None
    ) -> None:
        """Begin the work for ``url`` once ``job`` (its extraction) is done."""
        if url in self._excluded or not self._by_url.get(url) or job is None:
            return
        if res.status is not CitationStatus.OK:
            return
        self._verifying.append(asyncio.ensure_future(self._verify(url, job)))

    async def _verify(self, url: str, job: asyncio.Future[ExtractedPage | None]) -> None:
        ext = await asyncio.shield(job)
        if ext is None or ext.page.kind == "unsupported":
            return  # check_validity gives the status
        judged = self._entailer is not None
        work = [(pair, ext) for pair in self._by_url[url] if not pair.verified]
        await _verify_pairs(
            work, self._policy, judged=judged, serial=self._serial, budget=self._inline
        )
        if self._entailer is not None:
            self._pending.extend(p for p in self._by_url[url] if _wants_score(p))
            if self._scoring is None or self._scoring.done():
                self._scoring = asyncio.ensure_future(self._drain(self._entailer))
                self._batches.append(self._scoring)

    async def _drain(self, entailer: Entailer) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            await score_pairs(
                entailer, batch, cache=self._cache, on_uncertain=self._policy.on_uncertain_mode
            )

    async def verified(self) -> None:
        """Wait for every page that arrived to be verified."""
        if self._verifying:
            await asyncio.gather(*self._verifying)

    async def scored(self) -> None:
        """Wait for every batch handed to the entailer."""
        while self._batches:
            batches, self._batches = self._batches, []
            await asyncio.gather(*batches)

    def cancel(self) -> None:
        """Stop the work still running (the check was cancelled or failed)."""
        for task in (*self._verifying, *self._batches):
            task.cancel()


async def check_validity(
    answer: Answer,
    fetched: Mapping[str, FetchResult],
    extracted: Mapping[str, ExtractedPage],
    *,
    policy: Policy,
    entailer: Entailer | None,
    excluded: frozenset[str] = frozenset(),
    retrieved: frozenset[str] | None = None,
    early: EarlyValidity | None = None,
    cache: ScoreCache | None = None,
    soft_404s: Mapping[str, str] | None = None,
    cascade: Entailer | None = None,
    carried: Mapping[str, CitationReport] | None = None,
) -> ValidityOutcome:
    """Compose resolution, passage presence and entailment into the validity axis.

    ``fetched`` and ``extracted`` are keyed by normalised URL. ``retrieved`` is the set of
    normalised URLs that recorded searches returned (None when no search was recorded).
    ``early`` holds the pairs of pages verified and scored as they arrived (the Guard's
    pipeline); ``cache`` the scores of earlier attempts; ``soft_404s`` the pages found to be
    their host's catch-all page (URL → reason); ``cascade`` the judge that uncertain claims go
    to when ``Policy.on_uncertain_mode`` is "judge". ``carried``: the ``excluded`` URLs that
    failed an earlier attempt of the run (normalised URL → that failure's report): each keeps
    its status and reason; any other excluded URL is the caller's (``excluded_by_policy``).
    """
    soft_404s = soft_404s or {}
    carried = carried or {}
    pages = {u: e.page for u, e in extracted.items()}
    findings: list[Finding] = list(answer.findings)
    url_status: dict[str, tuple[CitationStatus, str]] = {}
    url_claims: dict[str, dict[int, None]] = {}
    raw_url: dict[str, str] = {}
    normalized = {c.normalized_url for c in answer.citations if c.normalized_url}
    # reference-list entries no marker cites: shown to the user, so checked like citations
    many = len(answer.findings) > _INLINE_ITEMS  # each unused reference is a finding
    listed = (
        await asyncio.to_thread(uncited_references, answer) if many else uncited_references(answer)
    )
    normalized.update(listed)

    # 1. resolution (per distinct URL); in a thread for an answer of many citations
    resolve = functools.partial(
        _resolution,
        answer,
        fetched,
        pages,
        excluded=excluded,
        carried=carried,
        soft_404s=soft_404s,
        url_status=url_status,
        url_claims=url_claims,
        raw_url=raw_url,
        listed=listed,
    )
    if len(answer.citations) + len(listed) > _INLINE_ITEMS:
        await asyncio.to_thread(resolve)
    else:
        resolve()

    # 2. per (claim, URL) pairs on resolving pages (pages that arrived early were verified then)
    pairs = early.pairs if early is not None else build_pairs(answer)
    if early is not None:
        await early.verified()
    judge = entailer if policy.entailment.check_entailment else None
    fallback = getattr(judge, "fallback", None)
    if isinstance(fallback, str) and answer.claims:  # backend="auto" without the local model
        findings.append(
            Finding(
                code="validity.entailment_fallback",
                message=fallback,
                severity=Severity.WARNING,
                axis="validity",
                details={"backend": getattr(judge, "name", "?"), "hint": LOCAL_MODEL_HINT},
            )
        )
    if len(pairs) > _INLINE_ITEMS:
        work = await asyncio.to_thread(_unverified, pairs, url_status, extracted)
    else:
        work = _unverified(pairs, url_status, extracted)
    await _verify_pairs(work, policy, judged=judge is not None)

    # 3. entailment, batched across the whole answer (and begun per page as pages arrived)
    if early is not None:
        await early.scored()
    if judge is not None:
        mode = policy.on_uncertain_mode
        await score_pairs(
            judge, [p for p in pairs if _wants_score(p)], cache=cache, on_uncertain=mode
        )
        # 3b. the cascade: only the claims the first backend left uncertain go to the judge
        if mode == "judge" and cascade is not None and cascade is not judge:
            await judge_uncertain(cascade, pairs, cache=cache)

    # 4-6. the reports, on the loop when that is quick, else in a thread (a hostile answer
    # can hold 100,000 claims: building their reports takes seconds)
    roll_up = functools.partial(
        _roll_up,
        answer,
        pairs,
        fetched=fetched,
        pages=pages,
        policy=policy,
        excluded=excluded,
        carried=carried,
        retrieved=retrieved,
        findings=findings,
        url_status=url_status,
        url_claims=url_claims,
        raw_url=raw_url,
        normalized=normalized,
        listed=listed,
    )
    # per citation too: 2,000 bare URLs (no claim, no pair) held the event loop for ~100 ms;
    # and per listed reference: 3,000 that no marker cites held it for ~30 ms
    items = len(pairs) + len(answer.claims) + len(answer.citations) + len(listed)
    if items > _INLINE_ITEMS:
        return await asyncio.to_thread(roll_up)
    return roll_up()


def _unverified(
    pairs: Sequence[_Pair],
    url_status: Mapping[str, tuple[CitationStatus, str]],
    extracted: Mapping[str, ExtractedPage],
) -> list[tuple[_Pair, ExtractedPage]]:
    """Each pair's URL status applied; the pairs on resolving pages still to verify."""
    for pair in pairs:
        st, why = url_status.get(pair.url, (CitationStatus.MALFORMED_URL, "unknown URL"))
        if st is not CitationStatus.OK:
            pair.status, pair.reason = st, why
    return [
        (pair, ext)
        for pair in pairs
        if pair.status is CitationStatus.OK
        and not pair.verified
        and (ext := extracted.get(pair.url)) is not None
    ]


def _resolution(
    answer: Answer,
    fetched: Mapping[str, FetchResult],
    pages: Mapping[str, Page],
    *,
    excluded: frozenset[str],
    carried: Mapping[str, CitationReport],
    soft_404s: Mapping[str, str],
    url_status: dict[str, tuple[CitationStatus, str]],
    url_claims: dict[str, dict[int, None]],
    raw_url: dict[str, str],
    listed: Mapping[str, str],
) -> None:
    """Each distinct URL's status and reason (fetch, exclusion, unreadable page, soft 404),
    the claims citing it and its first spelling, filled into the given dicts; the ``listed``
    references no marker cites (normalised URL → as written) after the citations."""
    url_problems: dict[str, Finding] = {}
    for f in answer.findings:
        if f.url is not None and f.code in ("blocked_scheme", "malformed_url", "not_checkable"):
            url_problems.setdefault(f.url, f)
    for c in answer.citations:
        key = c.normalized_url or c.url
        raw_url.setdefault(key, c.url)
        if c.claim_index is not None:
            # claims per URL, in order, each once (a dict: linear in the citations)
            url_claims.setdefault(key, {})[c.claim_index] = None
        if key in url_status:
            continue
        if c.normalized_url is None:
            bad = url_problems.get(c.url)
            if bad is not None and bad.code == "blocked_scheme":
                url_status[key] = (CitationStatus.BLOCKED_SCHEME, bad.message)
            elif bad is not None and bad.code == "not_checkable":
                # a provider's document citation with no URL (citeguard.providers)
                url_status[key] = (CitationStatus.NOT_CHECKABLE, bad.message)
            else:
                reason = bad.message if bad is not None else "the URL cannot be parsed"
                url_status[key] = (CitationStatus.MALFORMED_URL, reason)
        else:
            url_status[key] = _fetched_status(
                c.normalized_url, fetched, pages, excluded, carried, soft_404s
            )
    for key, raw in listed.items():
        raw_url.setdefault(key, raw)
        if key not in url_status:
            url_status[key] = _fetched_status(key, fetched, pages, excluded, carried, soft_404s)


def _fetched_status(
    key: str,
    fetched: Mapping[str, FetchResult],
    pages: Mapping[str, Page],
    excluded: frozenset[str],
    carried: Mapping[str, CitationReport],
    soft_404s: Mapping[str, str],
) -> tuple[CitationStatus, str]:
    """A well-formed URL's status and reason: excluded (its failure in an earlier attempt, or
    the caller's exclusion), not fetched in time, the fetch's own, an unreadable page, or a soft
    404 (a "not found" page, or the host's catch-all)."""
    if key in excluded:
        earlier = carried.get(key)
        if earlier is not None:
            return earlier.status, earlier.reason
        return (
            CitationStatus.EXCLUDED_BY_POLICY,
            "the caller excluded this URL (exclude_urls); it was not fetched",
        )
    res = fetched.get(key)
    if res is None:
        return CitationStatus.TIMEOUT, "not fetched before the deadline"
    page = pages.get(key)
    if res.status is CitationStatus.OK and page is not None and page.kind == "unsupported":
        return (
            CitationStatus.UNSUPPORTED_TYPE,
            page.problem or f"cannot read the page (content type {res.content_type or 'unknown'})",
        )
    if res.status is CitationStatus.OK and page is not None:
        wall = bot_wall_reason(page)
        if wall is not None:
            return CitationStatus.BOT_WALL, wall
        soft = soft_404_reason(page) or soft_404s.get(key)
        if soft is not None:
            return CitationStatus.SOFT_404, soft
    return res.status, res.reason


def _final_url(fetched: Mapping[str, FetchResult], key: str) -> str | None:
    res = fetched.get(key)
    return None if res is None else res.final_url


# claims, citations or pairs handled on the event loop at once, at most, when building pairs,
# resolving URLs and writing reports (~10 µs each); more go to a thread
_INLINE_ITEMS = 64
# claim text (characters, all claims) whose pairs are built on the event loop, at most
_INLINE_CLAIM_CHARS = 8_000


def _roll_up(
    answer: Answer,
    pairs: Sequence[_Pair],
    *,
    fetched: Mapping[str, FetchResult],
    pages: Mapping[str, Page],
    policy: Policy,
    excluded: frozenset[str],
    carried: Mapping[str, CitationReport],
    retrieved: frozenset[str] | None,
    findings: list[Finding],
    url_status: Mapping[str, tuple[CitationStatus, str]],
    url_claims: Mapping[str, Mapping[int, None]],
    raw_url: dict[str, str],
    normalized: set[str],
    listed: Mapping[str, str],
) -> ValidityOutcome:
    """Claim and citation reports (the ``listed`` references no marker cites among them, cited
    by no claim) and the validity axis."""
    # 4. roll up per claim
    claim_reports: list[ClaimReport] = []
    by_claim: dict[int, list[_Pair]] = {}
    by_url: dict[str, list[_Pair]] = {}
    for p in pairs:
        by_claim.setdefault(p.claim.index, []).append(p)
        by_url.setdefault(p.url, []).append(p)
    failing_pairs: list[_Pair] = []
    for claim in answer.claims:
        cps = by_claim.get(claim.index, [])
        checks = [
            ClaimCheck(
                claim_index=claim.index,
                url=raw_url.get(p.url, p.url),
                status=p.status,
                reason=p.reason,
                quote=p.quote,
                passage=p.passage,
                entailment=p.entailment,
                text_fragment_url=claim_fragment(
                    _final_url(fetched, p.url) or raw_url.get(p.url, p.url), p.passage, p.entailment
                ),
            )
            for p in cps
        ]
        claim_reports.append(claim_report(claim, checks))
        if not cps:
            continue
        supported = any(p.status is CitationStatus.OK for p in cps)
        for p in cps:
            if p.status is CitationStatus.OK:
                continue
            # one unsupported citation is tolerated when another citation carries the claim
            if p.status is CitationStatus.NOT_ENTAILED and (
                supported or not policy.entailment.fail_unsupported
            ):
                continue
            failing_pairs.append(p)

    # 5. roll up per URL: a URL's own failure excludes it; a failing (claim, URL) pair excludes
    # it only when no claim it backs passes (checks/failures.py)
    pair_fail: dict[str, list[_Pair]] = {}
    for p in failing_pairs:
        pair_fail.setdefault(p.url, []).append(p)
    backed = {p.url for p in pairs if p.status is CitationStatus.OK}
    kinds: dict[str, FailureKind] = {}
    reports: list[CitationReport] = []
    offenders: set[str] = set()
    for key, (st, why) in url_status.items():
        url_fails = pair_fail.get(key, [])
        pf = url_fails[0] if url_fails else None
        kind: FailureKind = "url"
        if st is CitationStatus.OK and pf is not None:
            st, why, kind = pf.status, pf.reason, "pair"
        if st is CitationStatus.OK and retrieved is not None and key not in retrieved:
            msg = "no recorded search returned this URL (a common sign of a fabricated URL)"
            if policy.not_retrieved_fails:
                st, why = CitationStatus.NOT_RETRIEVED, msg
            else:
                findings.append(
                    Finding(
                        code="not_retrieved",
                        message=msg,
                        severity=Severity.WARNING,
                        axis="validity",
                        url=raw_url[key],
                    )
                )
        res = fetched.get(key)
        page = pages.get(key)
        url_pairs = by_url.get(key, [])
        shown = next((p for p in url_pairs if p.passage is not None and p.passage.found), None)
        passage = (pf.passage if pf is not None else None) or (shown.passage if shown else None)
        unsettled = [p for p in url_pairs if _unsettled(p)] if st is CitationStatus.OK else []
        ent = (
            (pf.entailment if pf is not None else None)
            or (unsettled[0].entailment if unsettled else None)
            or (shown.entailment if shown else None)
            or next((p.entailment for p in url_pairs if p.entailment is not None), None)
        )
        support = _support_of(st, pf, unsettled, url_pairs)
        findings.extend(_uncertain_finding(p, raw_url[key]) for p in unsettled)
        frag = None
        final = res.final_url if res is not None else None
        if shown is not None and shown.passage is not None and shown.passage.matched_text:
            frag = text_fragment_url(final or raw_url[key], shown.passage.matched_text)
        fails = st not in _PASS_STATUSES and (
            st.outcome is not Outcome.UNVERIFIABLE or policy.unverifiable_fails
        )
        report = CitationReport(
            url=raw_url[key],
            normalized_url=key if key in normalized else None,
            final_url=final,
            domain=_domain(key),
            status=st,
            reason=why,
            http_status=(
                res.http_status
                if res is not None
                else (earlier.http_status if (earlier := carried.get(key)) else None)
            ),
            redirects=list(res.redirects) if res is not None else [],
            claim_indices=list(url_claims.get(key, {})),
            cited_by_claim=bool(url_claims.get(key)),
            passage=passage,
            entailment=ent,
            support=support,
            published=page.published if page is not None else None,
            modified=page.modified if page is not None else None,
            date_source=page.date_source if page is not None else None,
            text_fragment_url=frag,
            title=page.title if page is not None else None,
            elapsed_ms=res.elapsed_ms if res is not None else 0.0,
            failure=kind if fails else None,
            excluded=key in excluded,
        )
        reports.append(report)
        if st in _PASS_STATUSES:
            continue
        if fails:
            kinds[key] = kind
        if fails and kind == "pair":
            excluded_here = excludes(kind, key, backed)
            findings.extend(pair_findings(raw_url[key], url_fails, excluded=excluded_here))
            if excluded_here:
                offenders.add(key)
            continue
        # a reference-list entry no marker cites is shown to the user: it must resolve too
        uncited = key in listed
        findings.append(
            Finding(
                code=(
                    st.value
                    if not uncited
                    else "uncited_reference_broken"
                    if st.outcome is Outcome.BROKEN
                    else "uncited_reference_unverifiable"
                ),
                message=(
                    f"{raw_url[key]}"
                    + (" (listed in the references, cited by no claim)" if uncited else "")
                    + f": {why}"
                ),
                severity=Severity.ERROR if fails else Severity.WARNING,
                axis="validity",
                url=raw_url[key],
                details={"outcome": st.outcome.value, "status": st.value}
                | ({"failure": "url"} if fails else {}),
            )
        )
        if fails:
            offenders.add(key)

    # the per-claim view: which (claim, URL) pairs failed the axis, and whether the URL or the
    # pair failed
    failed = {
        (p.claim.index, raw_url.get(p.url, p.url)): kinds[p.url]
        for p in failing_pairs
        if p.url in kinds
    }
    claim_reports = mark_failures(mark_gated(claim_reports, failed), failed)

    # the answer's citations (the listed references no marker cites are reported, not counted)
    counted = [r for r in reports if (r.normalized_url or r.url) not in listed]
    n = len(counted)
    ok = sum(1 for r in counted if r.status in _PASS_STATUSES)
    cited_claims = [c for c in claim_reports if c.supported is not None]
    supported_share = (
        sum(1 for c in cited_claims if c.supported) / len(cited_claims) if cited_claims else None
    )
    supports = [c.support for c in cited_claims if c.support is not None]
    mean_support = sum(supports) / len(supports) if supports else None
    share_ok = True
    if (
        supported_share is not None
        and policy.entailment.min_supported_share > 0
        and supported_share < policy.entailment.min_supported_share
    ):
        share_ok = False
        findings.append(
            Finding(
                code="low_supported_share",
                message=(
                    f"only {supported_share:.0%} of cited claims are supported; the policy asks "
                    f"for {policy.entailment.min_supported_share:.0%}"
                ),
                axis="validity",
            )
        )
    too_few = n < policy.min_citations
    if n == 0 or too_few:
        findings.append(
            Finding(
                code="no_citations" if n == 0 else "too_few_citations",
                message=(
                    "the answer cites no sources"
                    + (f"; the {len(listed)} it lists are cited by no claim" if listed else "")
                    if n == 0
                    else f"the answer cites {n} source(s); the policy asks for at least "
                    f"{policy.min_citations}"
                ),
                severity=Severity.ERROR if too_few else Severity.WARNING,
                axis="validity",
            )
        )
    # an error finding fails its axis (a marker citing no reference, a bad URL, no sources)
    errors = any(f.severity is Severity.ERROR and f.axis in (None, "validity") for f in findings)
    axis = AxisResult(
        name="validity",
        passed=not offenders and share_ok and not errors,
        score=(ok / n) if n else None,
        evaluated=n > 0 or too_few,
        findings=findings,
        offending_urls=sorted(raw_url[k] for k in offenders),
        details={
            "citations": n,
            "resolving": ok,
            "claims_cited": len(cited_claims),
            "supported_share": supported_share,
            "mean_support": mean_support,
        },
    )
    return ValidityOutcome(
        axis=axis,
        citations=reports,
        claims=claim_reports,
        offending_urls=frozenset(raw_url[k] for k in offenders),
    )


def _support_of(
    status: CitationStatus,
    failing: _Pair | None,
    unsettled: Sequence[_Pair],
    pairs: Sequence[_Pair],
) -> EntailmentLabel | None:
    """A cited URL's support: its failing claim's label (when support failed it), else
    "uncertain" when a claim passed unsettled, else "supported" when a claim's support was
    judged; None when none was."""
    if failing is not None and failing.entailment is not None:
        return failing.entailment.label
    if status is not CitationStatus.OK:
        return None
    if unsettled:
        return "uncertain"
    judged = [p for p in pairs if p.entailment is not None and p.status is CitationStatus.OK]
    return "supported" if judged else None


def _uncertain_finding(pair: _Pair, url: str) -> Finding:
    """``validity.support_uncertain``: the citation passes, but its claim's support could not be
    settled either way (what the user should read before trusting the claim)."""
    e = pair.entailment
    assert e is not None  # an unsettled pair has its score
    claim = " ".join(pair.claim_text.split())
    claim = claim if len(claim) <= 120 else claim[:119] + "…"
    return Finding(
        code="validity.support_uncertain",
        message=(
            f"{url}: could not settle whether the page supports claim {pair.claim.index + 1} "
            f"(“{claim}”): {e.reason}"
        ),
        severity=Severity.WARNING,
        axis="validity",
        url=url,
        claim_index=pair.claim.index,
        details={
            "backend": e.backend,
            "p_supported": round(e.score, 4),
            "thresholds": list(e.thresholds) if e.thresholds is not None else None,
        },
    )


def _domain(url: str) -> str | None:
    try:
        return registrable_domain(url)
    except Exception:  # a malformed URL has no domain; that is already its finding
        return None


class ValidityCheck:
    """The validity axis. Its work happens in the citation stage (:func:`check_validity`), which
    also yields the per-citation and per-claim reports every other axis reads; this check hands
    that stage's axis to the verdict."""

    name = "validity"
    hint = "Cite only pages that load and that state what you claim; quote them verbatim."
    feeds_back_when_advisory = False

    def __init__(self, policy: Policy) -> None:
        self._policy = policy

    async def run(self, ctx: CheckContext) -> AxisResult:
        assert ctx.validity is not None, "the citation stage runs before the checks"
        return ctx.validity

    def annotator(self, axis: AxisResult, verdict: Verdict) -> AnnotatorKind:
        backends = [str(axis.details.get("backend") or "")]
        backends += [c.entailment.backend for c in verdict.citations if c.entailment]
        backends += [
            ch.entailment.backend for cl in verdict.claims for ch in cl.checks if ch.entailment
        ]
        return "LLM" if any(is_llm_backend(b) for b in backends) else "CODE"

    async def aclose(self) -> None:
        return None


__all__ = [
    "OnUncertain",
    "ValidityCheck",
    "ValidityOutcome",
    "check_validity",
    "claim_text_without_markers",
    "judge_uncertain",
    "uncited_references",
]

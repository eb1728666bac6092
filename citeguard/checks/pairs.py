"""Per-pair verification: each (claim, cited URL) pair of an answer checked on its page.

The passage step (:func:`verify_pair`: the quote or paraphrase on the page, what a verified quote
or a verbatim claim settles, the evidence the entailer reads), the support step
(:func:`score_pairs`: entailment scores, cached across attempts; :func:`judge_uncertain`: the
cascade to the judge) and the pipeline that runs both page by page as pages arrive
(:class:`EarlyValidity`). The validity axis (:mod:`citeguard.checks.validity`) resolves the URLs
and reports what these steps decided.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from citeguard.checks.claim_parts import claim_parts, combine
from citeguard.checks.entail import (
    Entailer,
    EntailmentRequest,
    evidence_windows,
    score_requests,
)
from citeguard.checks.evidence import claim_evidence, with_stated_numbers
from citeguard.checks.freshness import find_caveat
from citeguard.checks.near_copy import find_near_copy
from citeguard.checks.page_meta import page_head, quotes_page_title, without_citation_artefacts
from citeguard.checks.passage import (
    PreparedText,
    find_as_written,
    find_paraphrase,
    find_passage,
    prepare_text,
)
from citeguard.checks.quoted import (
    dropped_qualifier,
    residual_claim,
    sentence_around,
    words_in,
)
from citeguard.lang import script_language, segment
from citeguard.loop_turns import LoopTurns
from citeguard.models import (
    Answer,
    CitationStatus,
    Claim,
    EntailmentScore,
    FetchResult,
    Page,
    PassageMatch,
)
from citeguard.policy import Policy
from citeguard.web.urls import host_of

_WORDS_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


# claims, citations or pairs handled on the event loop at once, at most, when building pairs,
# resolving URLs and writing reports (~10 µs each); more go to a thread
_INLINE_ITEMS = 64
# claim text (characters, all claims) whose pairs are built on the event loop, at most
_INLINE_CLAIM_CHARS = 8_000


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
    # a copy of a page sentence with a content word replaced (near_copy): not shown supported
    reworded: PassageMatch | None = None


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
    floor: float | None,
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
            verify_pair(pair, ext, policy, floor=floor)

    done = 0
    if all(ext.indexed for _, ext in work):
        clock = time.perf_counter
        until = (budget or _TurnBudget()).until()
        while done < len(work) and clock() < until:
            pair, ext = work[done]
            verify_pair(pair, ext, policy, floor=floor)
            done += 1
    if done < len(work):
        async with serial or contextlib.nullcontext():
            await asyncio.to_thread(run, work[done:])


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


# The relevance floor for an entailer that never rejects (see PassagePolicy.relevance_floor).
LEXICAL_FLOOR = 0.08


def relevance_floor(policy: Policy, entailer: object | None) -> float | None:
    """The share of a paraphrase's content words a page must hold for ``entailer`` to judge it
    when the passage step cannot place it (``None``: no entailer judges, the passage step
    decides). ``PassagePolicy.relevance_floor`` when set; otherwise 0 for an entailer that can
    reject (it decides), :data:`LEXICAL_FLOOR` for one that cannot (``can_reject`` False)."""
    if entailer is None:
        return None
    if policy.passage.relevance_floor is not None:
        return policy.passage.relevance_floor
    return 0.0 if getattr(entailer, "can_reject", True) else LEXICAL_FLOOR


def _blind_floor(pair: _Pair, policy: Policy, floor: float | None) -> float | None:
    """The relevance floor of a claim in a script written without spaces whose language the
    local model is not shown to judge (``EntailmentPolicy.model_languages``): the floor of an
    entailer that cannot reject (:data:`LEXICAL_FLOOR`), since there it cannot. Unchanged when
    a judge reads the uncertain claims, or the claim's script does not name a language."""
    if floor is None or floor >= LEXICAL_FLOOR or policy.on_uncertain_mode == "judge":
        return floor
    if policy.entailment.backend not in ("auto", "local"):
        return floor
    lang = script_language(pair.claim_text)
    if lang is None or lang in policy.entailment.model_languages:
        return floor
    return LEXICAL_FLOOR


def _relevant(pair: _Pair, match: PassageMatch, floor: float) -> bool:
    """Whether a paraphrase below the threshold still covers enough of the page to judge."""
    return (
        not pair.quote
        and match.how == "paraphrase"
        and not match.altered
        and match.score >= floor * 100.0
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
_TRAILING_PUNCT = " \t\n.,;:!?…。！？"


# a main text under this share of the page text is a sliver the extractor found, not the article
_THIN_MAIN_SHARE = 0.1


def _verbatim_claim(pair: _Pair, ext: ExtractedPage, policy: Policy) -> bool:
    """An unquoted claim whose words stand on the page as written (exactly, or after
    normalisation, in the main text) says what the page says: supported by construction, as
    a verified quote is, unless the page negates or hedges those words right before them.
    True when the pair is settled; otherwise the paraphrase step and the entailer decide."""
    text = pair.claim_text.strip(_TRAILING_PUNCT)
    if len(segment(text)) < _VERBATIM_MIN_WORDS:
        return False
    # in the main text: a copy of the page's boilerplate is not the page's own statement;
    # unless the main text found is a sliver of the page (the extractor missed the article:
    # then nothing tells the article from the rest)
    main = ext.main
    if main is not None and len(main.text) < _THIN_MAIN_SHARE * len(ext.text.text):
        main = None
    match = find_as_written(text, ext.text, main_text=main, policy=policy.passage)
    if match is None:
        return False
    pair.passage = match
    if _drops_qualifier(pair, ext.page, match, "claim's words"):
        return True
    pair.entailment = _by_construction(
        match, "verbatim", "the claim's words are on the page as written"
    )
    return True


def _altered_copy(pair: _Pair, ext: ExtractedPage) -> bool:
    """An unquoted claim that copies a page sentence with a meaning-bearing edit (a number, a
    negation, a name or a word changed: :func:`~citeguard.checks.near_copy.find_near_copy`)
    fails as an altered quote does, with the page's sentence and the edit in the reason. True
    when the pair is settled so."""
    match = find_near_copy(pair.claim_text, ext.text)
    if match is None:
        return False
    if not match.altered:
        pair.reworded = match  # a word replaced: the support step may not call it supported
        return False
    pair.passage = match
    pair.status = CitationStatus.PASSAGE_ALTERED
    pair.reason = match.reason
    return True


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


def verify_pair(pair: _Pair, ext: ExtractedPage, policy: Policy, *, floor: float | None) -> None:
    """The passage step for one pair on a page that resolved: find the quote or paraphrase,
    settle what a verified quote settles, and pick the evidence the entailer will read.
    ``floor``: ``None`` when no entailer will see the pair, else its relevance floor
    (:func:`relevance_floor`). Sub-millisecond for typical pages
    (the page's text was normalised once, off the loop, when it was extracted)."""
    pair.verified = True
    page = ext.page
    judged = floor is not None
    floor = _blind_floor(pair, policy, floor)
    if pair.quote and quotes_page_title(pair.quote, page):
        # the claim names the page by its title: metadata, judged with the rest of the claim
        pair.quote = None
    if policy.passage.check_passages and not pair.quote and _verbatim_claim(pair, ext, policy):
        return
    if policy.passage.check_passages and not pair.quote and _altered_copy(pair, ext):
        return
    if policy.passage.check_passages and (pair.quote or pair.claim_text):
        match = _passage_for(pair, ext, policy)
        pair.passage = match
        failed = _failed_passage(match, quoted=bool(pair.quote))
        if failed is not None and floor is not None and _relevant(pair, match, floor):
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
    window = _evidence_window(page.text, pair.passage, policy.entailment.window_chars)
    # what the page states of the claim's numbers the passage lacks (issue 53: a paper's year)
    pair.evidence = with_stated_numbers(pair.claim_text, window, ext.text, ext.head)


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
    if score.label == "supported" and pair.reworded is not None:
        # the claim copies a page sentence but for a replaced word: a synonym keeps what the
        # sentence says, another word does not, and nothing here tells them apart
        score = score.model_copy(
            update={"label": "uncertain", "reason": f"uncertain: {pair.reworded.reason}"}
        )
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
        p.reworded = None  # and its word on a replaced word is final
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
    across pages and hides behind the wait for the slowest URL.
    :func:`~citeguard.checks.validity.check_validity` then finishes what is left: pages that
    never arrived early, and the roll-up.
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
        turns: LoopTurns | None = None,
    ) -> None:
        self.pairs = build_pairs(answer) if pairs is None else pairs
        self._turns = turns  # the loop's turns, shared by every check of the Guard
        self._by_url: dict[str, list[_Pair]] = {}
        for p in self.pairs:
            self._by_url.setdefault(p.url, []).append(p)
        self._policy = policy
        self._entailer = entailer if policy.entailment.check_entailment else None
        self._floor = relevance_floor(policy, self._entailer)
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
        turns: LoopTurns | None = None,
    ) -> EarlyValidity:
        """As the constructor; an answer of many claims has its pairs built in a thread."""
        many = len(answer.claims) + len(answer.citations) > _INLINE_ITEMS
        # or long claims: the caveat search over one 100 kB claim took 20-200 ms
        many = many or sum(len(c.text) for c in answer.claims) > _INLINE_CLAIM_CHARS
        pairs = await asyncio.to_thread(build_pairs, answer) if many else build_pairs(answer)
        return cls(
            answer,
            policy=policy,
            entailer=entailer,
            excluded=excluded,
            cache=cache,
            pairs=pairs,
            turns=turns,
        )

    async def turn(self) -> None:
        """Wait, before a stretch of CPU work on the loop, for a turn of it with budget left
        (:class:`~citeguard.loop_turns.LoopTurns`; at once without one)."""
        if self._turns is not None:
            await self._turns.turn()

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
        work = [(pair, ext) for pair in self._by_url[url] if not pair.verified]
        await self.turn()
        await _verify_pairs(
            work, self._policy, floor=self._floor, serial=self._serial, budget=self._inline
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


__all__ = [
    "EarlyValidity",
    "ExtractedPage",
    "OnUncertain",
    "ScoreCache",
    "build_pairs",
    "claim_text_without_markers",
    "judge_uncertain",
    "score_pairs",
    "verify_pair",
]

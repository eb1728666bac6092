"""The validity axis lets the entailer judge loose paraphrases of a relevant page, and keeps
``passage_missing`` for pages that hold nothing relevant. Real aiohttp farm, real Guard."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import UTC, datetime

from aiohttp import web
from conftest import Farm

from citeguard import (
    CitationStatus,
    EntailmentPolicy,
    EntailmentScore,
    FetchPolicy,
    Guard,
    PassagePolicy,
    Policy,
)
from citeguard.checks.passage import find_paraphrase
from citeguard.checks.validity import ScoreCache

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
TEXT = (
    "Middlemarch is a novel by the English author George Eliot, first published in eight "
    "installments in 1871 and 1872. The novel is set in the fictitious Midlands town of "
    "Middlemarch during 1829 to 1832."
)
PAGE = f"<html><head><title>Middlemarch</title></head><body><article><p>{TEXT}</p></article>"
LOOSE = "The book's writer was Mary Ann Evans, publishing under a male pen name, in 1871 and 1872."
UNRELATED = "The capital of Peru is Lima, a coastal city."
LIBRARY = (
    "<html><head><title>George Eliot</title></head><body><main><p>George Eliot was the pen name "
    "of Mary Ann Evans, who wrote Middlemarch.</p></main></body></html>"
)


class Approver:
    """An entailer that supports everything and remembers what it was asked."""

    name = "approver"

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[EntailmentScore]:
        self.asked.extend(pairs)
        return [
            EntailmentScore(label="supported", score=0.9, backend=self.name, reason="yes")
            for _ in pairs
        ]


def _guard(farm: Farm, entailer: object, policy: Policy | None = None) -> Guard:
    fetch = FetchPolicy(
        allow_private_addresses=True, url_timeout=5.0, answer_deadline=8.0, retries=0
    )
    return Guard(
        policy or Policy(fetch=fetch),
        resolver=farm.resolver,
        entailer=entailer,  # type: ignore[arg-type]
        now=lambda: NOW,
    )


async def _check(
    farm: Farm, claim: str, *, entailment: bool = True, floor: float | None = None
) -> tuple[CitationStatus, Approver]:
    url = farm.add("books.example.com", "/middlemarch", body=PAGE)
    fetch = FetchPolicy(
        allow_private_addresses=True, url_timeout=3.0, answer_deadline=5.0, retries=0
    )
    passage = PassagePolicy() if floor is None else PassagePolicy(relevance_floor=floor)
    policy = Policy(
        fetch=fetch, passage=passage, entailment=EntailmentPolicy(check_entailment=entailment)
    )
    approver = Approver()
    async with Guard(policy, resolver=farm.resolver, entailer=approver, now=lambda: NOW) as g:
        verdict = await g.check(f"{claim} [1]\n\n[1] {url}\n", question="Who wrote Middlemarch?")
    (report,) = verdict.citations
    return report.status, approver


OLD_FLOOR = 0.08  # the default before the hard-reject review (benchmarks/hard_rejects.py)


def test_the_claims_sit_where_the_tests_need_them() -> None:
    # below the paraphrase threshold, above the old relevance floor; and nothing relevant at all
    policy = PassagePolicy()
    loose = find_paraphrase(LOOSE, TEXT).score / 100
    assert OLD_FLOOR <= loose < policy.paraphrase_threshold
    assert find_paraphrase(UNRELATED, TEXT).score / 100 < OLD_FLOOR


async def test_a_loose_paraphrase_of_a_relevant_page_is_judged_not_blocked(farm: Farm) -> None:
    status, approver = await _check(farm, LOOSE)
    assert status is CitationStatus.OK
    ((claim, evidence),) = approver.asked
    assert "Mary Ann Evans" in claim
    assert "George Eliot" in evidence  # the page's text, for the entailer to window


async def test_under_a_floor_a_page_with_nothing_relevant_is_passage_missing(farm: Farm) -> None:
    status, approver = await _check(farm, UNRELATED, floor=OLD_FLOOR)
    assert status is CitationStatus.PASSAGE_MISSING
    assert approver.asked == []


async def test_by_default_the_entailer_judges_a_paraphrase_the_page_barely_covers(
    farm: Farm,
) -> None:
    # a paraphrase with almost no words of the page is not rejected by the lexical step: the
    # entailer (here one that supports everything) decides, and a real one rejects what it can
    # show unsupported
    status, approver = await _check(farm, UNRELATED)
    assert status is CitationStatus.OK
    ((claim, _evidence),) = approver.asked
    assert "Lima" in claim


async def test_the_local_model_rejects_a_claim_the_page_holds_nothing_of(farm: Farm) -> None:
    # what the floor used to reject, the default entailer rejects with its own evidence
    url = farm.add("books.example.com", "/middlemarch-local", body=PAGE)
    fetch = FetchPolicy(allow_private_addresses=True, url_timeout=3.0, answer_deadline=10.0)
    async with Guard(Policy(fetch=fetch), resolver=farm.resolver, now=lambda: NOW) as g:
        verdict = await g.check(f"{UNRELATED} [1]\n\n[1] {url}\n")
    (report,) = verdict.citations
    assert report.status is CitationStatus.NOT_ENTAILED, report.reason
    assert "does not support" in report.reason
    (claim,) = verdict.claims
    assert claim.label == "not_supported"


async def test_without_an_entailer_a_loose_paraphrase_is_passage_missing(farm: Farm) -> None:
    status, approver = await _check(farm, LOOSE, entailment=False)
    assert status is CitationStatus.PASSAGE_MISSING
    assert approver.asked == []


async def test_the_floor_is_a_policy_setting(farm: Farm) -> None:
    status, approver = await _check(farm, LOOSE, floor=0.3)
    assert status is CitationStatus.PASSAGE_MISSING
    assert approver.asked == []


# --------------------------------------------------------------------------------------------
# Scoring begins per page, as pages arrive; scores are reused across runs and attempts
# --------------------------------------------------------------------------------------------


class Gatekeeper:
    """Supports everything; the first call opens ``gate`` (the slow page waits on it)."""

    name = "gatekeeper"

    def __init__(self, gate: asyncio.Event) -> None:
        self.gate = gate
        self.calls: list[list[str]] = []

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[EntailmentScore]:
        self.calls.append([claim for claim, _ in pairs])
        self.gate.set()
        return [EntailmentScore(label="supported", score=0.9, backend=self.name) for _ in pairs]


async def test_a_page_is_scored_while_a_slower_page_is_still_being_fetched(farm: Farm) -> None:
    gate = asyncio.Event()
    served_after_scoring: list[bool] = []

    async def slow(request: web.Request) -> web.Response:
        # answers once the entailer has been called, or after 3 s if it never is
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(gate.wait(), 3.0)
        served_after_scoring.append(gate.is_set())
        return web.Response(text=LIBRARY, content_type="text/html")

    fast_url = farm.add("books.example.com", "/middlemarch", body=PAGE)
    slow_url = farm.add("library.example.org", "/eliot", slow)
    answer = (
        # paraphrases: a claim copied word for word from its page needs no entailer
        "Middlemarch is a novel written by the English author George Eliot [1].\n"
        "Mary Ann Evans used the pen name George Eliot [2].\n\n"
        f"[1] {fast_url}\n[2] {slow_url}\n"
    )
    keeper = Gatekeeper(gate)
    async with _guard(farm, keeper) as guard:
        verdict = await guard.check(answer, question="Who wrote Middlemarch?")
    assert [c.status for c in verdict.citations] == [CitationStatus.OK, CitationStatus.OK]
    assert served_after_scoring == [True]  # the fast page was judged before the slow one came
    assert [c.rstrip(" .") for c in keeper.calls[0]] == [
        "Middlemarch is a novel written by the English author George Eliot"
    ]
    assert sorted(c.rstrip(" .") for call in keeper.calls for c in call) == [
        "Mary Ann Evans used the pen name George Eliot",
        "Middlemarch is a novel written by the English author George Eliot",
    ]


async def test_a_second_check_of_the_same_claims_scores_nothing_again(farm: Farm) -> None:
    url = farm.add("books.example.com", "/middlemarch", body=PAGE)
    other = farm.add("library.example.org", "/eliot", body=LIBRARY)
    first = f"Middlemarch is a novel by George Eliot [1].\n\n[1] {url}\n"
    second = (
        "Middlemarch is a novel by George Eliot [1].\n"
        "Mary Ann Evans used the pen name George Eliot [2].\n\n"
        f"[1] {url}\n[2] {other}\n"
    )
    keeper = Gatekeeper(asyncio.Event())
    async with _guard(farm, keeper) as guard:
        await guard.check(first, question="Who wrote Middlemarch?")
        verdict = await guard.check(second, question="Who wrote Middlemarch?")
    assert all(c.status is CitationStatus.OK for c in verdict.citations)
    asked = [c.rstrip(" .") for call in keeper.calls for c in call]
    assert asked == [
        "Middlemarch is a novel by George Eliot",
        "Mary Ann Evans used the pen name George Eliot",
    ]  # the repeated claim was not sent again


def test_the_score_cache_is_bounded_and_least_recently_used() -> None:
    cache = ScoreCache(size=2)
    score = EntailmentScore(label="supported", score=1.0, backend="x")
    cache.put(("x", "a", "e"), score)
    cache.put(("x", "b", "e"), score)
    assert cache.get(("x", "a", "e")) is score  # a is now the most recent
    cache.put(("x", "c", "e"), score)
    assert len(cache) == 2
    assert cache.get(("x", "b", "e")) is None
    assert cache.get(("x", "a", "e")) is score


def test_the_relevance_floor_follows_whether_the_entailer_can_reject() -> None:
    from citeguard.checks.entail import WordOverlapEntailer
    from citeguard.checks.pairs import LEXICAL_FLOOR, relevance_floor

    policy = Policy()
    overlap = WordOverlapEntailer()
    assert not overlap.can_reject  # its calibrated bands reject nothing
    assert relevance_floor(policy, None) is None
    assert relevance_floor(policy, Approver()) == 0.0  # no can_reject: an entailer decides
    assert relevance_floor(policy, overlap) == LEXICAL_FLOOR
    # a word-overlap cut that rejects can decide for itself
    assert relevance_floor(policy, WordOverlapEntailer(threshold=0.5)) == 0.0
    pinned = Policy(passage=PassagePolicy(relevance_floor=0.2))
    assert relevance_floor(pinned, overlap) == relevance_floor(pinned, Approver()) == 0.2

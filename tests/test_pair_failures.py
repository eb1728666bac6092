"""A neighbour's failure (issue 43, family 4): a failure of the URL itself excludes the URL; a
failure of one (claim, URL) pair fails the answer, names the claim in the verdict, the per-claim
view, the feedback and the spans, and excludes the URL only when no claim it backs passes.

Scripted agents answer against real pages on the 127.0.0.1 farm; the entailer is a fixed test
stand-in (as in test_guard.py), so the roll-up, not a model, is what is tested.
"""

from __future__ import annotations

from collections.abc import Sequence

from conftest import Farm
from test_guard import ELIOT, LIBRARY, QUESTION, _guard, _policy
from test_trace import Spans, attrs

from citeguard import CitationStatus, GuardResult
from citeguard.feedback import Feedback
from citeguard.models import EntailmentScore, Severity, Verdict

SUPPORTED = "Middlemarch is a novel written by George Eliot"
CONTRADICTED = "Middlemarch first came out in one volume in 1901"
PEN_NAME = "George Eliot was the pen name of the writer Mary Ann Evans"


class _ByClaim:
    """A test entailer: "contradicted" for a claim holding a word of ``bad``, else "supported"."""

    name = "fixed"

    def __init__(self, *bad: str) -> None:
        self.bad = bad

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[EntailmentScore]:
        out = []
        for claim, evidence in pairs:
            no = any(b in claim for b in self.bad)
            out.append(
                EntailmentScore(
                    label="contradicted" if no else "supported",
                    score=0.05 if no else 0.95,
                    backend=self.name,
                    evidence=evidence,
                    reason="the page says 1871" if no else "",
                )
            )
        return out


def _two_claims(page: str, *, dead: str | None = None) -> str:
    text = f"{SUPPORTED} [1]. {CONTRADICTED} [1]."
    refs = f"[1] {page}\n"
    if dead is not None:
        text += f" {PEN_NAME} [2]."
        refs += f"[2] {dead}\n"
    return f"{text}\n\n{refs}"


def _check_of(verdict: Verdict, claim: int) -> tuple[str, CitationStatus, str | None, bool]:
    (check,) = verdict.claims[claim].checks
    return check.url, check.status, check.failure, check.gated


async def test_one_failing_claim_does_not_exclude_a_page_backing_another(farm: Farm) -> None:
    page = farm.add("books.example.com", "/middlemarch", body=ELIOT)
    dead = farm.add("gone.example.net", "/eliot", status=404, body="nope")
    async with _guard(farm, entailer=_ByClaim("1901")) as guard:
        verdict = await guard.check(_two_claims(page, dead=dead), question=QUESTION)
    # the answer fails: claim 2 is contradicted by the page it cites
    assert not verdict.passed and not verdict.axes["validity"].passed
    # ... but the page backs claim 1: only the dead URL (a failure of the URL itself) offends
    assert verdict.offending_urls == {dead}
    by_url = {c.url: c for c in verdict.citations}
    assert by_url[page].status is CitationStatus.NOT_ENTAILED
    assert by_url[page].failure == "pair"
    assert by_url[dead].status is CitationStatus.NOT_FOUND and by_url[dead].failure == "url"
    # the per-claim view: claim 2 failed on the page (a pair failure), claim 1 passed on it
    assert _check_of(verdict, 0) == (page, CitationStatus.OK, None, False)
    assert _check_of(verdict, 1) == (page, CitationStatus.NOT_ENTAILED, "pair", True)
    assert _check_of(verdict, 2) == (dead, CitationStatus.NOT_FOUND, "url", True)
    assert verdict.claims[1].supported is False
    # the finding names the claim and says the page stays citable
    (pair,) = [
        f
        for f in verdict.axes["validity"].findings
        if f.url == page and f.severity is Severity.ERROR
    ]
    assert pair.claim_index == 1 and pair.details["failure"] == "pair"
    assert pair.details["excluded"] is False
    assert "claim 2" in pair.message and "1901" in pair.message
    assert "stays citable" in pair.message


async def test_a_page_no_claim_passes_on_is_excluded(farm: Farm) -> None:
    page = farm.add("books.example.com", "/middlemarch", body=ELIOT)
    async with _guard(farm, entailer=_ByClaim("1901", "novel")) as guard:
        verdict = await guard.check(_two_claims(page), question=QUESTION)
    assert not verdict.passed
    assert verdict.offending_urls == {page}
    assert verdict.citations[0].failure == "pair"
    assert [_check_of(verdict, i)[2:] for i in (0, 1)] == [("pair", True), ("pair", True)]
    findings = [f for f in verdict.axes["validity"].findings if f.url == page]
    assert sorted(f.claim_index for f in findings if f.claim_index is not None) == [0, 1]
    assert all(f.details["excluded"] is True for f in findings)


async def test_the_loop_regenerates_without_excluding_the_page(farm: Farm) -> None:
    page = farm.add("books.example.com", "/middlemarch", body=ELIOT)
    other = farm.add("library.example.org", "/eliot", body=LIBRARY)
    calls: list[frozenset[str]] = []
    told: list[Feedback | None] = []

    async def agent(
        question: str, *, exclude_urls: frozenset[str], feedback: Feedback | None = None
    ) -> str:
        calls.append(exclude_urls)
        told.append(feedback)
        if len(calls) == 1:
            return _two_claims(page)
        # the failing claim dropped; the page still backs the first
        return f"{SUPPORTED} [1]. {PEN_NAME} [2].\n\n[1] {page}\n[2] {other}\n"

    policy = _policy(max_attempts=3, repair="off")
    async with _guard(farm, policy=policy, entailer=_ByClaim("1901")) as guard:
        result = await guard.wrap(agent)(QUESTION)
    assert isinstance(result, GuardResult)
    # the first answer, with its failing pair, did not pass
    assert not result.attempts[0].verdict.passed
    assert result.passed and len(calls) == 2
    # regenerated with the page still allowed, and told which claim failed on it
    assert page not in calls[1]
    fb = told[1]
    assert fb is not None and "claim 2" in fb.message and "1901" in fb.message
    assert page not in fb.exclude_urls
    assert any(f.claim_index == 1 and f.url == page for f in fb.findings)


async def test_a_failing_pair_never_passes_when_the_agent_keeps_it(farm: Farm) -> None:
    page = farm.add("books.example.com", "/middlemarch", body=ELIOT)
    calls: list[frozenset[str]] = []

    async def stubborn(question: str, *, exclude_urls: frozenset[str]) -> str:
        calls.append(exclude_urls)
        return _two_claims(page)

    policy = _policy(max_attempts=2, repair="off")
    async with _guard(farm, policy=policy, entailer=_ByClaim("1901")) as guard:
        result = await guard.run(stubborn, QUESTION)
    assert not result.passed and result.outcome == "failed"
    assert calls == [frozenset(), frozenset()]
    assert _check_of(result.verdict, 1)[2] == "pair"


async def test_strip_removes_the_failing_claim_and_keeps_the_page(farm: Farm) -> None:
    page = farm.add("books.example.com", "/middlemarch", body=ELIOT)

    async def once(question: str, *, exclude_urls: frozenset[str]) -> str:
        return _two_claims(page)

    policy = _policy(max_attempts=1, on_fail="strip", repair="off")
    async with _guard(farm, policy=policy, entailer=_ByClaim("1901")) as guard:
        result = await guard.run(once, QUESTION)
    assert result.outcome == "stripped"
    assert result.removed_claims == [f"{CONTRADICTED} [1]."] and result.removed_urls == []
    assert "1901" not in result.answer
    assert SUPPORTED in result.answer and page in result.answer
    assert result.passed  # what is left stands on the page that backs it


async def test_the_spans_say_which_failed(farm: Farm) -> None:
    page = farm.add("books.example.com", "/middlemarch", body=ELIOT)
    dead = farm.add("gone.example.net", "/eliot", status=404, body="nope")
    spans = Spans()
    try:
        async with _guard(farm, entailer=_ByClaim("1901"), tracer_provider=spans.provider) as guard:
            await guard.check(_two_claims(page, dead=dead), question=QUESTION)
        by_url = {attrs(s)["citeguard.url"]: attrs(s) for s in spans.named("citeguard.citation")}
        check = attrs(spans.one("citeguard.check"))
    finally:
        spans.provider.shutdown()
    assert by_url[page]["citeguard.failure"] == "pair"
    assert by_url[dead]["citeguard.failure"] == "url"
    assert check["citeguard.offending_urls"] == (dead,)
    assert check["citeguard.failed_pairs"] == (
        f"claim 2: {page} [pair: not_entailed]",
        f"claim 3: {dead} [url: not_found]",
    )


async def test_one_pages_pair_findings_are_capped(farm: Farm) -> None:
    page = farm.add("books.example.com", "/middlemarch", body=ELIOT)
    bad = " ".join(f"Middlemarch sold {n} copies in 1901 [1]." for n in range(1, 26))
    text = f"{SUPPORTED} [1]. {bad}\n\n[1] {page}\n"
    async with _guard(farm, entailer=_ByClaim("1901")) as guard:
        verdict = await guard.check(text, question=QUESTION)
    assert not verdict.passed and verdict.offending_urls == frozenset()
    on_page = [f for f in verdict.axes["validity"].findings if f.url == page]
    assert [f.claim_index for f in on_page[:20]] == list(range(1, 21))
    (rest,) = on_page[20:]
    assert rest.details["more"] == 5 and "5 more claim(s)" in rest.message
    # the per-claim view still names every failing claim
    assert sum(1 for c in verdict.claims if c.checks[0].failure == "pair") == 25

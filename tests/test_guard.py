"""The guard loop: reject, regenerate without the offenders, and the on_fail modes.

Scripted agents answer against a real aiohttp farm on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from conftest import Farm

from citeguard import (
    CitationRejected,
    CitationStatus,
    FetchPolicy,
    Guard,
    GuardResult,
    Policy,
    SearchRecord,
    SearchResult,
    Synthesis,
)
from citeguard.feedback import Feedback
from citeguard.models import EntailmentScore

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
QUESTION = "Who wrote the novel Middlemarch?"

ELIOT = """<html><head><title>Middlemarch</title></head><body><article>
<p>Middlemarch is a novel by the English author George Eliot, first published in eight
installments in 1871 and 1872.</p>
<p>The novel is set in the fictitious Midlands town of Middlemarch during 1829 to 1832.</p>
</article></body></html>"""

LIBRARY = """<html><head><title>George Eliot</title></head><body><main>
<p>George Eliot was the pen name of Mary Ann Evans, who wrote Middlemarch.</p>
</main></body></html>"""


def _policy(**kw: object) -> Policy:
    fetch = FetchPolicy(
        allow_private_addresses=True, url_timeout=3.0, answer_deadline=5.0, retries=0
    )
    return Policy(fetch=fetch, **kw)  # type: ignore[arg-type]


def _guard(farm: Farm, **kw: object) -> Guard:
    policy = kw.pop("policy", None) or _policy()
    return Guard(
        policy,  # type: ignore[arg-type]
        resolver=farm.resolver,
        entailer=kw.pop("entailer", None),  # type: ignore[arg-type]
        now=lambda: NOW,
        **kw,  # type: ignore[arg-type]
    )


def _site(farm: Farm) -> dict[str, str]:
    return {
        "good": farm.add("books.example.com", "/middlemarch", body=ELIOT),
        "also": farm.add("library.example.org", "/eliot", body=LIBRARY),
        "dead": farm.add("gone.example.net", "/middlemarch", status=404, body="nope"),
        "review": farm.add("reviews.example.com", "/middlemarch", body=ELIOT),
    }


class ScriptedAgent:
    """Cites a dead URL and an invented quote first; honest sources once they are excluded."""

    def __init__(self, urls: dict[str, str]) -> None:
        self.urls = urls
        self.calls: list[frozenset[str]] = []
        self.feedback: list[Feedback | None] = []

    async def __call__(
        self, question: str, *, exclude_urls: frozenset[str], feedback: Feedback | None = None
    ) -> str:
        self.calls.append(exclude_urls)
        self.feedback.append(feedback)
        u = self.urls
        if u["dead"] not in exclude_urls:
            return (
                f"Middlemarch was written by George Eliot [1]. "
                "The critic said it was "
                f'"a book written for grown-up people and only for them" [2].\n\n'
                f"[1] {u['dead']}\n[2] {u['review']}\n"
            )
        return (
            f"Middlemarch is a novel by the English author George Eliot [1]. "
            f"George Eliot was the pen name of Mary Ann Evans [2].\n\n"
            f"[1] {u['good']}\n[2] {u['also']}\n"
        )


async def test_regenerates_after_a_dead_url_and_an_invented_quote(farm: Farm) -> None:
    urls = _site(farm)
    agent = ScriptedAgent(urls)
    async with _guard(farm) as guard:
        result = await guard.wrap(agent)(QUESTION)
    assert isinstance(result, GuardResult)
    assert result.passed and result.outcome == "passed"
    assert result.verdict_word == "passed"  # regenerated, then passing: as citeguard serve says
    assert len(result.attempts) == 2
    first = result.attempts[0].verdict
    assert not first.passed and not first.axes["validity"].passed
    by_url = {c.url: c for c in first.citations}
    assert by_url[urls["dead"]].status is CitationStatus.NOT_FOUND
    assert by_url[urls["dead"]].http_status == 404
    assert by_url[urls["review"]].status is CitationStatus.PASSAGE_MISSING
    assert first.offending_urls == {urls["dead"], urls["review"]}
    # the second call was told what to avoid and why
    assert agent.calls[1] == {urls["dead"], urls["review"]}
    fb = agent.feedback[1]
    assert fb is not None and urls["dead"] in fb.message and "404" in fb.message
    # ... and the honest answer passes all gating axes
    assert result.verdict.passed
    assert {c.status for c in result.verdict.citations} == {CitationStatus.OK}
    assert result.answer == result.attempts[1].answer


async def test_recited_excluded_url_fails_without_fetching(farm: Farm) -> None:
    urls = _site(farm)

    async def stubborn(question: str, *, exclude_urls: frozenset[str]) -> str:
        return f"Middlemarch is by George Eliot [1].\n\n[1] {urls['dead']}\n"

    async with _guard(farm, policy=_policy(max_attempts=3)) as guard:
        result = await guard.run(stubborn, QUESTION)
    assert not result.passed and result.outcome == "failed"
    assert result.verdict_word == "rejected"
    assert len(result.attempts) == 3
    first = result.attempts[0].verdict.citations[0]
    assert first.status is CitationStatus.NOT_FOUND and not first.excluded
    # a later attempt excluded it: it keeps its 404, not a status of its own (issue 44)
    for attempt in result.attempts[1:]:
        (later,) = attempt.verdict.citations
        assert later.excluded and urls["dead"] in attempt.excluded_urls
        assert (later.status, later.reason, later.http_status) == (
            CitationStatus.NOT_FOUND,
            first.reason,
            404,
        )
    assert result.verdict.citations[0].status is CitationStatus.NOT_FOUND
    # fetched once (attempt 1); the re-citations were refused without a request
    assert farm.count("gone.example.net") == 1


async def test_on_fail_raise_carries_the_result(farm: Farm) -> None:
    urls = _site(farm)

    async def bad(question: str, *, exclude_urls: frozenset[str]) -> str:
        return f"It is by George Eliot [1].\n\n[1] {urls['dead']}\n"

    async with _guard(farm, policy=_policy(max_attempts=2, on_fail="raise")) as guard:
        with pytest.raises(CitationRejected) as info:
            await guard.run(bad, QUESTION)
    result = info.value.result
    assert isinstance(result, GuardResult)
    assert len(result.attempts) == 2 and not result.passed


async def test_on_fail_report_does_not_regenerate(farm: Farm) -> None:
    urls = _site(farm)
    calls = 0

    async def bad(question: str, *, exclude_urls: frozenset[str]) -> str:
        nonlocal calls
        calls += 1
        return f"It is by George Eliot [1].\n\n[1] {urls['dead']}\n"

    async with _guard(farm, policy=_policy(max_attempts=3, on_fail="report")) as guard:
        result = await guard.run(bad, QUESTION)
    assert calls == 1
    assert result.outcome == "reported" and not result.passed
    codes = {f.code for f in result.verdict.axes["validity"].findings}
    assert "not_found" in codes


async def test_on_fail_strip_removes_claims_that_relied_only_on_failing_urls(farm: Farm) -> None:
    urls = _site(farm)

    async def mixed(question: str, *, exclude_urls: frozenset[str]) -> str:
        return (
            f"Middlemarch is a novel by the English author George Eliot [1]. "
            f"It sold ten million copies in its first week [2].\n\n"
            f"[1] {urls['good']}\n[2] {urls['dead']}\n"
        )

    async with _guard(farm, policy=_policy(max_attempts=1, on_fail="strip")) as guard:
        result = await guard.run(mixed, QUESTION)
    assert result.outcome == "stripped"
    assert "ten million" not in result.answer
    assert urls["dead"] not in result.answer
    assert "George Eliot" in result.answer and urls["good"] in result.answer
    assert "citeguard removed 1 claim" in result.answer
    assert result.passed  # what is left stands on a good source
    assert result.verdict_word == "repaired"  # citeguard changed it, and it passes


async def test_never_passing_agent_is_bounded_and_keeps_every_attempt(farm: Farm) -> None:
    urls = _site(farm)
    n = 0

    async def hopeless(question: str, *, exclude_urls: frozenset[str]) -> str:
        nonlocal n
        n += 1
        dead = farm.add("gone.example.net", f"/v{n}", status=404)
        return f"George Eliot wrote it [1].\n\n[1] {dead}\n"

    async with _guard(farm, policy=_policy(max_attempts=4)) as guard:
        result = await guard.run(hopeless, QUESTION)
    assert n == 4 and len(result.attempts) == 4
    assert [a.number for a in result.attempts] == [1, 2, 3, 4]
    assert all(not a.verdict.passed for a in result.attempts)
    # each attempt excluded everything that failed before it
    assert len(result.attempts[3].excluded_urls) == 3
    del urls


async def test_cost_budget_stops_the_loop(farm: Farm) -> None:
    urls = _site(farm)

    async def costly(question: str, *, exclude_urls: frozenset[str]) -> Synthesis:
        return Synthesis(text=f"By George Eliot [1].\n\n[1] {urls['dead']}\n", cost=1.0)

    async with _guard(farm, policy=_policy(max_attempts=10, cost_budget=1.5)) as guard:
        result = await guard.run(costly, QUESTION)
    assert len(result.attempts) == 2
    assert "cost budget" in result.message
    assert [a.cost for a in result.attempts] == [1.0, 1.0]


async def test_time_budget_stops_the_loop(farm: Farm) -> None:
    urls = _site(farm)

    async def slowish(question: str, *, exclude_urls: frozenset[str]) -> str:
        return f"By George Eliot [1].\n\n[1] {urls['dead']}\n"

    # any attempt (a real fetch over a socket) takes longer than a microsecond
    async with _guard(farm, policy=_policy(max_attempts=10, time_budget=1e-6)) as guard:
        result = await guard.run(slowish, QUESTION)
    assert len(result.attempts) == 1
    assert "time budget" in result.message


async def test_answer_function_errors_propagate(farm: Farm) -> None:
    async def broken(question: str, *, exclude_urls: frozenset[str]) -> str:
        raise RuntimeError("the LLM API is down")

    async with _guard(farm) as guard:
        with pytest.raises(RuntimeError, match="LLM API is down"):
            await guard.run(broken, QUESTION)


async def test_sync_answer_and_search_functions(farm: Farm) -> None:
    urls = _site(farm)
    async with _guard(farm) as guard:

        def search(query: str) -> list[dict[str, str]]:
            return [{"url": urls["good"], "title": "Middlemarch", "snippet": "a novel"}]

        wrapped = guard.wrap_search(search)

        def answer(question: str, *, exclude_urls: frozenset[str]) -> str:
            hits = wrapped("Middlemarch author")
            assert hits == search("x")  # the agent gets exactly what the tool returned
            return (
                "Middlemarch is a novel by the English author George Eliot [1].\n\n"
                f"[1] {urls['good']}\n"
            )

        result = await guard.run(answer, QUESTION)
    assert result.passed
    assert result.verdict.axes["query"].evaluated


async def test_cited_but_never_retrieved(farm: Farm) -> None:
    urls = _site(farm)
    text = f"Middlemarch is a novel by the English author George Eliot [1].\n\n[1] {urls['good']}\n"
    searches = [SearchRecord(query="Middlemarch author", results=[SearchResult(url=urls["also"])])]
    async with _guard(farm) as guard:
        warn = await guard.check(text, question=QUESTION, searches=searches)
    assert warn.passed
    assert "not_retrieved" in {f.code for f in warn.axes["validity"].findings}
    async with _guard(farm, policy=_policy(not_retrieved_fails=True)) as guard:
        strict = await guard.check(text, question=QUESTION, searches=searches)
    assert not strict.passed
    assert strict.citations[0].status is CitationStatus.NOT_RETRIEVED


async def test_unverifiable_fails_closed_by_default_and_open_on_request(farm: Farm) -> None:
    wall = farm.add("walled.example.com", "/a", status=403, headers={"cf-mitigated": "challenge"})
    text = f"Middlemarch is a novel by George Eliot [1].\n\n[1] {wall}\n"
    async with _guard(farm) as guard:
        closed = await guard.check(text, question=QUESTION)
    assert closed.citations[0].status is CitationStatus.BOT_WALL
    assert not closed.passed
    async with _guard(farm, policy=_policy(unverifiable_fails=False)) as guard:
        opened = await guard.check(text, question=QUESTION)
    assert opened.axes["validity"].passed


class _Always:
    """A test entailer with a fixed label, to drive the validity roll-up."""

    name = "fixed"

    def __init__(self, label: str) -> None:
        self.label = label
        self.pairs: list[tuple[str, str]] = []

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[EntailmentScore]:
        self.pairs.extend(pairs)
        return [
            EntailmentScore(
                label=self.label,
                score=0.9 if self.label == "supported" else 0.1,  # type: ignore[arg-type]
                backend=self.name,
                evidence=ev,
            )
            for _, ev in pairs
        ]


async def test_claims_are_entailed_per_claim_with_markers_removed(farm: Farm) -> None:
    urls = _site(farm)
    # a paraphrase (a claim copied word for word from its page is settled without an entailer)
    text = f"Middlemarch is a novel written by George Eliot [1].\n\n[1] {urls['good']}\n"
    yes = _Always("supported")
    async with _guard(farm, entailer=yes) as guard:
        ok = await guard.check(text, question=QUESTION)
    assert ok.passed
    claim, evidence = yes.pairs[0]
    assert "[1]" not in claim and "George Eliot" in claim
    assert "George Eliot" in evidence
    assert ok.claims[0].supported is True
    assert ok.axes["validity"].details["supported_share"] == 1.0

    no = _Always("contradicted")
    async with _guard(farm, entailer=no) as guard:
        bad = await guard.check(text, question=QUESTION)
    assert not bad.passed
    assert bad.citations[0].status is CitationStatus.NOT_ENTAILED
    assert bad.claims[0].supported is False


async def test_over_cap_citations_become_offenders(farm: Farm) -> None:
    pages = [
        farm.add(
            "news.example.com", f"/p{i}", body=f"<p>Page {i}: George Eliot wrote Middlemarch.</p>"
        )
        for i in range(4)
    ]
    text = " ".join(f"George Eliot wrote Middlemarch [{i + 1}]." for i in range(4)) + "\n\n"
    text += "\n".join(f"[{i + 1}] {u}" for i, u in enumerate(pages))
    async with _guard(farm) as guard:
        v = await guard.check(text, question=QUESTION)
    div = v.axes["diversity"]
    assert not div.passed
    assert set(div.offending_urls) == set(pages[2:])
    assert set(pages[2:]) <= v.offending_urls


async def test_a_page_of_an_unreadable_type_is_unverifiable(farm: Farm) -> None:
    png = farm.add(
        "img.example.com", "/chart", body=b"\x89PNG\r\n\x1a\n" + bytes(64), content_type="image/png"
    )
    text = f"Middlemarch is a novel by George Eliot [1].\n\n[1] {png}\n"
    async with _guard(farm) as guard:
        v = await guard.check(text, question=QUESTION)
    c = v.citations[0]
    assert c.status is CitationStatus.UNSUPPORTED_TYPE
    assert "image/png" in c.reason
    assert c.outcome.value == "unverifiable" and not v.passed

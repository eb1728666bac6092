"""Repair before regenerate (citeguard.repair): failing citations mended from pages the run
already holds, re-verified, and returned without calling the answer function again.

Scripted agents answer against the real aiohttp farm on 127.0.0.1 (tests/conftest.py); their
search tools are wrapped with ``guard.wrap_search``, so the run records what they returned.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from conftest import Farm
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from citeguard import FetchPolicy, Guard, GuardResult, Policy, SearchRecord
from citeguard.feedback import Feedback
from citeguard.models import CitationStatus, EntailmentScore, Severity
from citeguard.repair import RepairOutcome

QUESTION = "Who wrote the novel Middlemarch?"

ELIOT = """<html><head><title>Middlemarch</title></head><body><article>
<p>Middlemarch is a novel by the English author George Eliot, first published in eight
installments in 1871 and 1872.</p>
<p>The novel is set in the fictitious Midlands town of Middlemarch during 1829 to 1832.</p>
</article></body></html>"""

LIBRARY = """<html><head><title>George Eliot</title></head><body><main>
<p>George Eliot was the pen name of Mary Ann Evans, who wrote Middlemarch.</p>
</main></body></html>"""

COUNCIL = """<html><head><title>Bridge budget</title></head><body><article>
<p>On Tuesday the city council approved a budget of 12 million euros for the new river bridge,
after a debate that lasted four hours.</p>
</article></body></html>"""

CLAIM_NOVEL = "Middlemarch is a novel by the English author George Eliot"
CLAIM_PEN = "George Eliot was the pen name of Mary Ann Evans"


def _policy(**kw: Any) -> Policy:
    fetch = kw.pop("fetch", None) or FetchPolicy(
        allow_private_addresses=True, url_timeout=3.0, answer_deadline=5.0, retries=0
    )
    return Policy(fetch=fetch, **kw)


def _guard(farm: Farm, policy: Policy | None = None, **kw: Any) -> Guard:
    return Guard(
        policy or _policy(), resolver=farm.resolver, entailer=kw.pop("entailer", None), **kw
    )


def _site(farm: Farm) -> dict[str, str]:
    return {
        "books": farm.add("books.example.com", "/middlemarch", body=ELIOT),
        "library": farm.add("library.example.org", "/eliot", body=LIBRARY),
        "dead": farm.add("gone.example.net", "/middlemarch", status=404, body="nope"),
        "council": farm.add("news.example.com", "/bridge", body=COUNCIL),
    }


def _results(urls: dict[str, str], *names: str) -> list[dict[str, str]]:
    meta = {
        "books": ("Middlemarch, a novel by George Eliot", "The novel by the English author"),
        "library": ("George Eliot (Mary Ann Evans)", "The pen name of Mary Ann Evans"),
        "council": ("Council approves bridge budget", "12 million euros for the bridge"),
        "dead": ("Middlemarch", "George Eliot"),
    }
    return [{"url": urls[n], "title": meta[n][0], "snippet": meta[n][1]} for n in names]


class Agent:
    """A scripted agent: it searches (through the wrapped tool), then gives ``first`` on the
    first call and ``later`` on every call after it."""

    def __init__(
        self,
        guard: Guard,
        results: list[dict[str, str]],
        first: Any,
        later: Any,
    ) -> None:
        async def search(query: str) -> list[dict[str, str]]:
            return results

        self.search = guard.wrap_search(search)
        self.first, self.later = first, later
        self.calls = 0
        self.feedback: list[Feedback | None] = []

    async def __call__(
        self, question: str, *, exclude_urls: frozenset[str], feedback: Feedback | None = None
    ) -> Any:
        self.calls += 1
        self.feedback.append(feedback)
        await self.search(question)
        return self.first if self.calls == 1 else self.later


async def _fresh_check(farm: Farm, result: GuardResult, policy: Policy | None = None) -> None:
    """The repaired answer passes a fresh Guard's check on its own (same searches)."""
    searches: list[SearchRecord] = [s for a in result.attempts for s in a.searches]
    answer: Any = result.structured if result.structured is not None else result.answer
    async with _guard(farm, policy) as fresh:
        verdict = await fresh.check(answer, question=QUESTION, searches=searches)
    assert verdict.passed, [(c.url, c.status, c.reason) for c in verdict.citations]


# ---------------------------------------------------------------------- swaps


async def test_reference_list_swap(farm: Farm) -> None:
    urls = _site(farm)
    async with _guard(farm) as guard:
        agent = Agent(
            guard,
            _results(urls, "dead", "books"),
            first=f"{CLAIM_NOVEL} [1].\n\n[1] {urls['dead']}\n",
            later=f"{CLAIM_NOVEL} [1].\n\n[1] {urls['books']}\n",
        )
        result = await guard.run(agent, QUESTION)
    assert result.passed and result.outcome == "repaired"
    assert result.verdict_word == "repaired"
    assert agent.calls == 1  # no second LLM call
    assert result.answer == f"{CLAIM_NOVEL} [1].\n\n[1] {urls['books']}"
    (r,) = result.repairs
    assert (r.kind, r.before, r.after, r.claim_index) == ("swap", urls["dead"], urls["books"], 0)
    assert r.status is CitationStatus.NOT_FOUND and r.evidence_url == urls["books"]
    assert r.passage and "George Eliot" in r.passage
    # the attempts: the agent's, then the repaired one (same number, no synthesis call)
    assert [a.number for a in result.attempts] == [1, 1]
    assert result.attempts[1].repairs == result.repairs and not result.attempts[0].repairs
    # the verdict of the repaired attempt shows the repair
    info = [f for f in result.verdict.findings if f.code == "repaired_swap"]
    assert info and info[0].severity is Severity.INFO and info[0].claim_index == 0
    await _fresh_check(farm, result)


async def test_inline_link_swap(farm: Farm) -> None:
    urls = _site(farm)
    async with _guard(farm) as guard:
        agent = Agent(
            guard,
            _results(urls, "books"),
            first=f"[Middlemarch]({urls['dead']}) is a novel by the English author George Eliot.",
            later="unused",
        )
        result = await guard.run(agent, QUESTION)
    assert result.outcome == "repaired" and agent.calls == 1
    assert result.answer == (
        f"[Middlemarch]({urls['books']}) is a novel by the English author George Eliot."
    )
    await _fresh_check(farm, result)


async def test_bare_url_and_html_anchor_swap(farm: Farm) -> None:
    urls = _site(farm)
    first = (
        f'{CLAIM_NOVEL} ({urls["dead"]}).\n\n{CLAIM_PEN} (<a href="{urls["dead"]}?x=1">source</a>).'
    )
    farm.add("gone.example.net", "/middlemarch?x=1", status=404)
    async with _guard(farm) as guard:
        agent = Agent(guard, _results(urls, "books", "library"), first=first, later="unused")
        result = await guard.run(agent, QUESTION)
    assert result.outcome == "repaired", result.message
    assert f"{CLAIM_NOVEL} ({urls['books']})." in result.answer
    assert f'<a href="{urls["library"]}">source</a>' in result.answer
    await _fresh_check(farm, result)


async def test_shared_reference_gets_a_new_number(farm: Farm) -> None:
    urls = _site(farm)
    first = f"{CLAIM_NOVEL} [1]. {CLAIM_PEN} [1].\n\n[1] {urls['books']}\n"
    async with _guard(farm) as guard:
        agent = Agent(guard, _results(urls, "books", "library"), first=first, later="unused")
        result = await guard.run(agent, QUESTION)
    v1 = result.attempts[0].verdict
    by_claim = {c.index: c.checks[0].status for c in v1.claims}
    assert by_claim == {0: CitationStatus.OK, 1: CitationStatus.PASSAGE_MISSING}
    assert result.outcome == "repaired" and agent.calls == 1
    # [1] still serves the passing claim; the failing one points at a new entry [2]
    assert result.answer == (
        f"{CLAIM_NOVEL} [1]. {CLAIM_PEN} [2].\n\n[1] {urls['books']}\n[2] {urls['library']}"
    )
    (r,) = result.repairs
    assert (r.kind, r.claim_index, r.before, r.after) == ("swap", 1, urls["books"], urls["library"])
    await _fresh_check(farm, result)


async def test_entry_used_only_by_failing_claims_is_rewritten_with_its_title(farm: Farm) -> None:
    urls = _site(farm)
    first = (
        f"{CLAIM_PEN} [1]. {CLAIM_NOVEL} [2].\n\n"
        f"Sources:\n1. Eliot — {urls['library']}\n2. Dead page — {urls['dead']}\n"
    )
    async with _guard(farm) as guard:
        agent = Agent(guard, _results(urls, "books"), first=first, later="unused")
        result = await guard.run(agent, QUESTION)
    assert result.outcome == "repaired", result.message
    # the entry keeps its number and layout, and names the page it now points at
    assert result.answer == (
        f"{CLAIM_PEN} [1]. {CLAIM_NOVEL} [2].\n\n"
        f"Sources:\n1. Eliot — {urls['library']}\n"
        f"2. Middlemarch, a novel by George Eliot — {urls['books']}"
    )
    await _fresh_check(farm, result)


async def test_a_claim_with_another_supporting_citation_loses_the_failing_one(farm: Farm) -> None:
    urls = _site(farm)
    first = f"{CLAIM_NOVEL} [1][2].\n\n[1] {urls['books']}\n[2] {urls['dead']}\n"
    async with _guard(farm) as guard:
        agent = Agent(guard, [], first=first, later="unused")
        result = await guard.run(agent, QUESTION)
    assert result.outcome == "repaired" and agent.calls == 1
    assert result.answer == f"{CLAIM_NOVEL} [1].\n\n[1] {urls['books']}"
    (r,) = result.repairs
    assert (r.kind, r.before, r.after) == ("swap", urls["dead"], urls["books"])
    await _fresh_check(farm, result)


async def test_swaps_use_pages_fetched_earlier_in_the_run(farm: Farm) -> None:
    """No search recorded: the page another claim cited (fetched already) is the candidate,
    and it is not requested again."""
    urls = _site(farm)
    first = (
        f"{CLAIM_PEN} [1]. Mary Ann Evans wrote Middlemarch [2].\n\n"
        f"[1] {urls['library']}\n[2] {urls['dead']}\n"
    )
    async with _guard(farm) as guard:
        agent = Agent(guard, [], first=first, later="unused")
        result = await guard.run(agent, QUESTION)
    assert result.outcome == "repaired", result.message
    # entry [1] lists the page already: the marker points there and the dead entry goes
    assert result.answer == (
        f"{CLAIM_PEN} [1]. Mary Ann Evans wrote Middlemarch [1].\n\n[1] {urls['library']}"
    )
    (r,) = result.repairs
    assert (r.before, r.after) == (urls["dead"], urls["library"])
    assert farm.count("library.example.org", "/eliot") == 1
    await _fresh_check(farm, result)


async def test_footnote_and_reference_link_swaps(farm: Farm) -> None:
    urls = _site(farm)
    first = (
        f"{CLAIM_NOVEL}.[^1] {CLAIM_PEN} ([the library][lib]).\n\n"
        f"[^1]: {urls['dead']}\n[lib]: {urls['dead']}x\n"
    )
    farm.add("gone.example.net", "/middlemarchx", status=404)
    async with _guard(farm) as guard:
        agent = Agent(guard, _results(urls, "books", "library"), first=first, later="unused")
        result = await guard.run(agent, QUESTION)
    assert result.outcome == "repaired", result.message
    assert result.answer == (
        f"{CLAIM_NOVEL}.[^1] {CLAIM_PEN} ([the library][lib]).\n\n"
        f"[^1]: {urls['books']}\n[lib]: {urls['library']}"
    )
    await _fresh_check(farm, result)


# ---------------------------------------------------------------------- full: quotes and drops


async def test_altered_quote_is_corrected_to_the_page_words(farm: Farm) -> None:
    urls = _site(farm)
    first = (
        'The city council "approved a budget of 15 million euros for the new river bridge" [1].'
        f"\n\n[1] {urls['council']}\n"
    )
    async with _guard(farm, _policy(repair="full")) as guard:
        agent = Agent(guard, _results(urls, "council"), first=first, later="unused")
        result = await guard.run(agent, QUESTION)
    assert result.attempts[0].verdict.citations[0].status is CitationStatus.PASSAGE_ALTERED
    assert result.outcome == "repaired" and agent.calls == 1
    assert '"approved a budget of 12 million euros for the new river bridge" [1]' in result.answer
    (r,) = result.repairs
    assert r.kind == "correct_quote" and "15 million" in r.before and "12 million" in r.after
    assert r.evidence_url == urls["council"]
    await _fresh_check(farm, result)


async def test_altered_quote_is_not_corrected_in_citations_mode(farm: Farm) -> None:
    urls = _site(farm)
    first = (
        'The city council "approved a budget of 15 million euros for the new river bridge" [1].'
        f"\n\n[1] {urls['council']}\n"
    )
    again = farm.add("other.example.org", "/bridge", body=COUNCIL)
    later = f"The council approved a bridge budget of 12 million euros [1].\n\n[1] {again}"
    async with _guard(farm) as guard:  # the default: repair="citations"
        agent = Agent(guard, _results(urls, "council"), first=first, later=later)
        result = await guard.run(agent, QUESTION)
    assert agent.calls == 2 and result.outcome == "passed"
    assert not result.repairs
    fb = agent.feedback[1]
    assert fb is not None and "Still to fix" in fb.message and "passage_altered" in fb.message


async def test_unsupported_claim_is_dropped(farm: Farm) -> None:
    urls = _site(farm)
    first = (
        f"{CLAIM_NOVEL} [1]. It sold ten million copies in its first week [2].\n\n"
        f"[1] {urls['books']}\n[2] {urls['dead']}\n"
    )
    async with _guard(farm, _policy(repair="full")) as guard:
        agent = Agent(guard, _results(urls, "books"), first=first, later="unused")
        result = await guard.run(agent, QUESTION)
    assert result.outcome == "repaired" and agent.calls == 1
    assert "ten million" not in result.answer and urls["dead"] not in result.answer
    assert result.answer.startswith(f"{CLAIM_NOVEL} [1].\n\n[1] {urls['books']}")
    assert "citeguard removed 1 claim(s)" in result.answer
    (r,) = result.repairs
    assert r.kind == "drop" and r.claim_index == 1 and "ten million" in r.before
    await _fresh_check(farm, result)


async def test_nothing_supports_in_citations_mode_regenerates_with_what_remains(
    farm: Farm,
) -> None:
    urls = _site(farm)
    first = (
        f"{CLAIM_NOVEL} [1]. It sold ten million copies in its first week [2].\n\n"
        f"[1] {urls['dead']}\n[2] {urls['dead']}x\n"
    )
    farm.add("gone.example.net", "/middlemarchx", status=404)
    later = f"{CLAIM_NOVEL} [1].\n\n[1] {urls['books']}"
    async with _guard(farm) as guard:
        agent = Agent(guard, _results(urls, "books"), first=first, later=later)
        result = await guard.run(agent, QUESTION)
    assert agent.calls == 2 and result.passed and result.outcome == "passed"
    fb = agent.feedback[1]
    assert fb is not None
    # what repair found (claim 1 is on books) and what remains (claim 2) are both named
    assert f"supported by {urls['books']}" in fb.message
    assert "Still to fix" in fb.message and "ten million" in fb.message
    assert urls["dead"] in fb.message  # the regular feedback is still there


async def test_a_broken_source_line_no_claim_cites_is_dropped(farm: Farm) -> None:
    urls = _site(farm)
    first = f"{CLAIM_NOVEL} [1].\n\nSources:\n[1] {urls['books']}\n- {urls['dead']}\n"
    async with _guard(farm, _policy(repair="full")) as guard:
        agent = Agent(guard, [], first=first, later="unused")
        result = await guard.run(agent, QUESTION)
    assert result.outcome == "repaired", result.message
    assert result.answer == f"{CLAIM_NOVEL} [1].\n\nSources:\n[1] {urls['books']}"
    (r,) = result.repairs
    assert r.kind == "drop" and r.claim_index is None and r.before == urls["dead"]
    await _fresh_check(farm, result)


async def test_nothing_is_left_is_no_repair(farm: Farm) -> None:
    urls = _site(farm)
    first = f"It sold ten million copies in its first week [1].\n\n[1] {urls['dead']}\n"
    later = f"{CLAIM_NOVEL} [1].\n\n[1] {urls['books']}"
    async with _guard(farm, _policy(repair="full")) as guard:
        agent = Agent(guard, _results(urls, "books"), first=first, later=later)
        result = await guard.run(agent, QUESTION)
    # dropping the only claim would pass nothing to the user: the agent is asked again
    assert agent.calls == 2 and result.outcome == "passed"
    fb = agent.feedback[1]
    assert fb is not None and "nothing would be left" in fb.message


async def test_structured_answer_repaired(farm: Farm) -> None:
    urls = _site(farm)
    first: list[dict[str, Any]] = [
        {"claim": CLAIM_NOVEL, "url": urls["dead"]},
        {"claim": CLAIM_PEN, "url": [urls["library"]]},
        {"claim": "It sold ten million copies in its first week", "url": urls["dead"]},
    ]
    async with _guard(farm, _policy(repair="full")) as guard:
        agent = Agent(guard, _results(urls, "books"), first=first, later="unused")
        result = await guard.run(agent, QUESTION)
    assert result.outcome == "repaired" and agent.calls == 1
    assert result.structured == [
        {"claim": CLAIM_NOVEL, "url": urls["books"]},
        {"claim": CLAIM_PEN, "url": [urls["library"]]},
    ]
    assert [r.kind for r in result.repairs] == ["swap", "drop"]
    await _fresh_check(farm, result)


# ---------------------------------------------------------------------- off, entailer, safety


async def test_repair_off_regenerates_as_before(farm: Farm) -> None:
    urls = _site(farm)
    async with _guard(farm, _policy(repair="off")) as guard:
        agent = Agent(
            guard,
            _results(urls, "dead", "books"),
            first=f"{CLAIM_NOVEL} [1].\n\n[1] {urls['dead']}\n",
            later=f"{CLAIM_NOVEL} [1].\n\n[1] {urls['books']}\n",
        )
        result = await guard.run(agent, QUESTION)
    assert agent.calls == 2 and result.outcome == "passed"
    assert [a.number for a in result.attempts] == [1, 2]
    assert not result.repairs and not any(a.repairs for a in result.attempts)
    fb = agent.feedback[1]
    assert fb is not None and "citeguard found" not in fb.message
    assert farm.count("books.example.com", "/middlemarch") == 1  # fetched for attempt 2 only


class _Judge:
    """An entailer that supports only claims about Mary Ann Evans."""

    name = "test-judge"

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[EntailmentScore]:
        self.asked.extend(pairs)
        out = []
        for claim, evidence in pairs:
            ok = "Evans" in claim and "Evans" in evidence
            out.append(
                EntailmentScore(
                    label="supported" if ok else "unsupported",
                    score=0.9 if ok else 0.1,
                    backend=self.name,
                    evidence=evidence,
                )
            )
        return out


async def test_a_repair_that_fails_its_recheck_is_an_attempt_and_feeds_back(farm: Farm) -> None:
    facts = [
        "The Midlands town of Middlemarch is fictitious",
        "Middlemarch was first published in eight installments",
        "Middlemarch is set between 1829 and 1832",
    ]
    pages = [
        farm.add("books.example.com", f"/fact{i}", body=f"<html><body><p>{f}.</p></body></html>")
        for i, f in enumerate(facts)
    ]
    dead = [farm.add("gone.example.net", f"/f{i}", status=404) for i in range(3)]
    first = " ".join(f"{f} [{i + 1}]." for i, f in enumerate(facts)) + "\n\n"
    first += "\n".join(f"[{i + 1}] {u}" for i, u in enumerate(dead))
    results = [{"url": u, "title": f, "snippet": f} for u, f in zip(pages, facts, strict=True)]
    later = f"{facts[0]} [1].\n\n[1] {pages[0]}"
    async with _guard(farm, _policy(max_attempts=2)) as guard:
        agent = Agent(guard, results, first=first, later=later)
        result = await guard.run(agent, QUESTION)
    # three swaps to one domain: the repaired answer is over the per-domain cap
    repaired = result.attempts[1]
    assert repaired.number == 1 and len(repaired.repairs) == 3
    assert not repaired.verdict.passed and not repaired.verdict.axes["diversity"].passed
    assert agent.calls == 2 and result.passed and result.outcome == "passed"
    fb = agent.feedback[1]
    assert fb is not None and "repaired answer still failed (diversity)" in fb.message


async def test_a_provider_citation_object_is_left_to_regeneration(farm: Farm) -> None:
    """An Anthropic response cites outside its text: nothing in the text to rewrite, so the
    answer function is asked again (and the run does not break)."""
    urls = _site(farm)
    message = {
        "type": "message",
        "role": "assistant",
        "content": [
            {
                "type": "text",
                "text": f"{CLAIM_NOVEL}.",
                "citations": [
                    {
                        "type": "web_search_result_location",
                        "url": urls["dead"],
                        "title": "Middlemarch",
                        "cited_text": "Middlemarch is a novel",
                    }
                ],
            }
        ],
    }
    later = f"{CLAIM_NOVEL} [1].\n\n[1] {urls['books']}"
    async with _guard(farm) as guard:
        agent = Agent(guard, _results(urls, "books"), first=message, later=later)
        result = await guard.run(agent, QUESTION)
    assert agent.calls == 2 and result.outcome == "passed" and not result.repairs
    fb = agent.feedback[1]
    assert fb is not None and "cannot be rewritten" in fb.message


async def test_candidates_are_judged_by_the_guards_entailer(farm: Farm) -> None:
    urls = _site(farm)
    judge = _Judge()
    # a paraphrase: the judge decides (a claim copied word for word would settle itself)
    novel = "Middlemarch is a novel written by the English author George Eliot"
    first = f"{novel} [1]. {CLAIM_PEN} [2].\n\n[1] {urls['dead']}\n[2] {urls['dead']}x\n"
    farm.add("gone.example.net", "/middlemarchx", status=404)
    async with _guard(farm, entailer=judge) as guard:
        agent = Agent(guard, _results(urls, "books", "library"), first=first, later="unused")
        result = await guard.run(agent, QUESTION)
    # the judge rejects every page for the novel claim: no swap, so the agent is asked again
    assert agent.calls > 1 and [a.number for a in result.attempts][:2] == [1, 2]
    assert any(novel in c for c, _e in judge.asked)
    fb = agent.feedback[1]
    assert fb is not None and f"supported by {urls['library']}" in fb.message


async def test_a_private_address_candidate_is_refused(farm: Farm) -> None:
    urls = _site(farm)
    evil = farm.add("evil.example.com", "/middlemarch", body=ELIOT)
    literal = f"http://127.0.0.1:{farm.port}/page/middlemarch"
    trusted = frozenset({"books.example.com", "library.example.org", "gone.example.net"})
    fetch = FetchPolicy(
        allow_private_addresses=False,
        allowed_private_hosts=trusted,
        url_timeout=3.0,
        answer_deadline=5.0,
        retries=0,
    )
    title = "Middlemarch is a novel by the English author George Eliot"
    results = [
        {"url": evil, "title": title, "snippet": title},
        {"url": literal, "title": title, "snippet": title},
        {"url": "http://169.254.169.254/latest/meta-data/", "title": title, "snippet": title},
        *_results(urls, "books"),
    ]
    async with _guard(farm, _policy(fetch=fetch)) as guard:
        agent = Agent(
            guard, results, first=f"{CLAIM_NOVEL} [1].\n\n[1] {urls['dead']}\n", later="x"
        )
        result = await guard.run(agent, QUESTION)
    assert result.outcome == "repaired"
    assert result.repairs[0].after == urls["books"]  # the best-ranked, unsafe ones refused
    assert farm.count("evil.example.com") == 0
    assert farm.count("127.0.0.1") == 0
    await _fresh_check(farm, result, _policy(fetch=fetch))


async def test_the_time_budget_is_respected(farm: Farm) -> None:
    urls = _site(farm)

    async def slow(request: Any) -> Any:
        from aiohttp import web

        await farm.sleep(5.0)
        return web.Response(text=ELIOT, content_type="text/html")

    slow_url = farm.add("slow.example.com", "/middlemarch", slow)
    results = [{"url": slow_url, "title": "Middlemarch by George Eliot", "snippet": CLAIM_NOVEL}]
    budget = 1.0
    async with _guard(farm, _policy(time_budget=budget, max_attempts=3)) as guard:
        agent = Agent(
            guard, results, first=f"{CLAIM_NOVEL} [1].\n\n[1] {urls['dead']}\n", later="x"
        )
        t0 = time.perf_counter()
        result = await guard.run(agent, QUESTION)
        took = time.perf_counter() - t0
    assert agent.calls == 1 and not result.passed
    assert "time budget" in result.message
    assert took < budget + 1.5, took  # the candidate page answers after 5 s
    assert farm.count("slow.example.com", "/middlemarch") == 1  # tried, given up in time


async def test_the_repair_span(farm: Farm) -> None:
    urls = _site(farm)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with _guard(farm, tracer_provider=provider) as guard:
        agent = Agent(
            guard,
            _results(urls, "books"),
            first=f"{CLAIM_NOVEL} [1].\n\n[1] {urls['dead']}\n",
            later="x",
        )
        result = await guard.run(agent, QUESTION)
    assert result.outcome == "repaired"
    spans = exporter.get_finished_spans()
    (span,) = [s for s in spans if s.name == "citeguard.repair"]
    attrs = dict(span.attributes or {})
    assert attrs["citeguard.repair.swaps"] == 1 and attrs["citeguard.repair.passed"] is True
    assert urls["books"] in str(attrs["citeguard.repairs"])
    run = next(s for s in spans if s.name == "citeguard.run")
    assert span.parent is not None and span.parent.span_id == run.context.span_id
    assert dict(run.attributes or {})["citeguard.outcome"] == "repaired"


async def test_repair_outcome_feedback_leaves_base_alone_when_nothing_was_found() -> None:
    base = Feedback(attempt=1, exclude_urls=frozenset(), message="rejected")
    assert RepairOutcome().feedback(base, exclude_urls=frozenset()) is base
    assert RepairOutcome().feedback(None, exclude_urls=frozenset()) is None

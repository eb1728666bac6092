"""Nothing passes that should not: uncited answers, dangling markers, an answer stripped to
nothing, structured answers read as prose. Real Guard, real aiohttp farm, real CLI process."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from conftest import Farm, chat_completion
from test_cli import _cli, _resolve

from citeguard import CitationStatus, EntailmentPolicy, FetchPolicy, Guard, Policy
from citeguard.parse import AnswerLimits, parse_answer

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
PAGE = (
    "<html><head><title>Eiffel Tower</title></head><body><article>"
    "<p>The Eiffel Tower is 330 metres tall. Gustave Eiffel's company \"built the tower "
    'in 1889".</p></article></body></html>'
)


def _policy(**kw: Any) -> Policy:
    fetch = FetchPolicy(
        allow_private_addresses=True, url_timeout=3.0, answer_deadline=5.0, retries=0
    )
    return Policy(fetch=fetch, entailment=EntailmentPolicy(backend="none"), **kw)


def _guard(farm: Farm, **kw: Any) -> Guard:
    return Guard(_policy(**kw), resolver=farm.resolver, now=lambda: NOW)


# --------------------------------------------------------------------------------------------
# An answer without sources
# --------------------------------------------------------------------------------------------


async def test_an_answer_with_no_citations_fails_validity(farm: Farm) -> None:
    async with _guard(farm) as guard:
        verdict = await guard.check("The Eiffel Tower is 330 metres tall.", question="How tall?")
    assert not verdict.passed
    assert not verdict.axes["validity"].passed
    assert "no_citations" in {f.code for f in verdict.axes["validity"].findings}


async def test_min_citations_zero_lets_an_uncited_answer_pass(farm: Farm) -> None:
    async with _guard(farm, min_citations=0) as guard:
        verdict = await guard.check("The Eiffel Tower is 330 metres tall.", question="How tall?")
    assert verdict.axes["validity"].passed


async def test_fewer_citations_than_the_policy_asks_fail(farm: Farm) -> None:
    url = farm.add("facts.example.com", "/eiffel", body=PAGE)
    async with _guard(farm, min_citations=2) as guard:
        verdict = await guard.check(f"The Eiffel Tower is 330 metres tall [1].\n\n[1] {url}\n")
    assert verdict.citations[0].status is CitationStatus.OK
    assert not verdict.axes["validity"].passed
    assert "too_few_citations" in {f.code for f in verdict.axes["validity"].findings}


async def test_a_dangling_marker_fails_the_answer(farm: Farm) -> None:
    url = farm.add("facts.example.com", "/eiffel", body=PAGE)
    answer = (
        f"The Eiffel Tower is 330 metres tall [1]. It was painted gold in 2020 [2].\n\n[1] {url}\n"
    )
    async with _guard(farm) as guard:
        verdict = await guard.check(answer, question="How tall is the Eiffel Tower?")
    assert verdict.citations[0].status is CitationStatus.OK
    assert not verdict.passed
    assert "unresolved_marker" in {f.code for f in verdict.axes["validity"].findings}


async def test_cli_fails_an_empty_and_refuses_a_binary_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.md"
    empty.write_bytes(b"")
    rc, out, err = await _cli("check", str(empty), "--entailment", "none")
    assert rc == 1, (out, err)  # an empty answer cites nothing: the gate rejects it
    assert "verdict: REJECTED" in out
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 8)
    rc, out, err = await _cli("check", str(binary), "--entailment", "none")
    assert (rc, out) == (2, "")  # not an answer at all: a usage error, one line
    assert (
        err == f"citeguard: error: {binary} looks binary (a NUL byte at offset 0), not UTF-8 text\n"
    )


# --------------------------------------------------------------------------------------------
# on_fail="strip"
# --------------------------------------------------------------------------------------------


async def test_strip_that_removes_every_claim_is_not_a_pass(farm: Farm) -> None:
    dead = farm.add("gone.example.org", "/eiffel", status=404)

    async def agent(question: str, **_: Any) -> str:
        return f"The Eiffel Tower is 330 metres tall [1].\n\n[1] {dead}\n"

    async with _guard(farm, on_fail="strip", max_attempts=1) as guard:
        result = await guard.run(agent, "How tall is the Eiffel Tower?")
    assert result.outcome == "stripped"
    assert not result.passed
    assert result.removed_claims == ["The Eiffel Tower is 330 metres tall [1]."]
    assert result.removed_urls == [dead]
    assert "nothing is left" in result.message


async def test_strip_keeps_the_claims_that_stand_and_names_what_went(farm: Farm) -> None:
    good = farm.add("facts.example.com", "/eiffel", body=PAGE)
    dead = farm.add("gone.example.org", "/eiffel", status=404)

    async def agent(question: str, **_: Any) -> str:
        return (
            "The Eiffel Tower is 330 metres tall [1]. It was painted gold in 2020 [2].\n\n"
            f"[1] {good}\n[2] {dead}\n"
        )

    async with _guard(farm, on_fail="strip", max_attempts=1) as guard:
        result = await guard.run(agent, "How tall is the Eiffel Tower?")
    assert result.passed
    assert result.removed_urls == [dead]
    assert result.removed_claims == ["It was painted gold in 2020 [2]."]
    assert "gold" not in result.answer


# --------------------------------------------------------------------------------------------
# Structured answers stay structured
# --------------------------------------------------------------------------------------------


async def test_a_structured_answer_from_the_answer_function_is_checked_as_structure(
    farm: Farm,
) -> None:
    url = farm.add("facts.example.com", "/eiffel", body=PAGE)
    items = [
        {
            "claim": "Gustave Eiffel's company built the tower in 1889.",
            "url": url,
            "quote": "built the tower in 1889",
        }
    ]

    async def agent(question: str, **_: Any) -> list[dict[str, Any]]:
        return items

    async with _guard(farm) as guard:
        result = await guard.run(agent, "Who built the Eiffel Tower?")
    assert result.passed, result.verdict.findings
    assert result.structured == items
    (report,) = result.verdict.citations
    assert report.passage is not None and report.passage.found  # the item's quote was verified
    assert result.answer == items[0]["claim"]


async def test_a_structured_answer_with_a_wrong_quote_fails_on_the_quote(farm: Farm) -> None:
    url = farm.add("facts.example.com", "/eiffel", body=PAGE)
    items = [{"claim": "It was built in 1890.", "url": url, "quote": "completed the tower in 1890"}]
    async with _guard(farm) as guard:
        verdict = await guard.check(items)
    assert verdict.citations[0].status is CitationStatus.PASSAGE_ALTERED  # 1889 on the page


async def test_cli_reads_a_json_answer_as_structure(farm: Farm, tmp_path: Path) -> None:
    url = farm.add("facts.example.com", "/eiffel", body=PAGE)
    path = tmp_path / "answer.json"
    # read as prose, the quote marks of the JSON would become "quotes" and fail as missing
    path.write_text(
        json.dumps([{"claim": "The tower is 330 metres tall.", "url": url, "quote": "330 metres"}])
    )
    rc, out, err = await _cli(
        "check",
        str(path),
        "--json",
        "--allow-private",
        "--entailment",
        "none",
        *_resolve(farm, "facts.example.com"),
    )
    assert rc == 0, (out, err)
    verdict = json.loads(out)
    assert [c["status"] for c in verdict["citations"]] == ["ok"]
    assert verdict["citations"][0]["passage"]["matched_text"] == "330 metres"


# --------------------------------------------------------------------------------------------
# Reference-list entries nothing cites
# --------------------------------------------------------------------------------------------


async def test_a_broken_uncited_reference_is_a_finding_and_fails(farm: Farm) -> None:
    good = farm.add("facts.example.com", "/eiffel", body=PAGE)
    dead = farm.add("gone.example.org", "/eiffel", status=404)
    answer = f"The Eiffel Tower is 330 metres tall [1].\n\n[1] {good}\n[2] {dead}\n"
    async with _guard(farm) as guard:
        verdict = await guard.check(answer, question="How tall is the Eiffel Tower?")
    # reported beside the citation, as cited by no claim
    assert [(c.url, c.cited_by_claim) for c in verdict.citations] == [(good, True), (dead, False)]
    assert verdict.citations[1].status is CitationStatus.NOT_FOUND
    findings = verdict.axes["validity"].findings
    broken = [f for f in findings if f.code == "uncited_reference_broken"]
    assert [f.url for f in broken] == [dead]
    assert "404" in broken[0].message and "cited by no claim" in broken[0].message
    assert not verdict.passed
    assert dead in verdict.offending_urls  # a regenerated answer leaves it out


async def test_a_working_uncited_reference_only_warns(farm: Farm) -> None:
    good = farm.add("facts.example.com", "/eiffel", body=PAGE)
    extra = farm.add("more.example.org", "/eiffel", body=PAGE)
    answer = f"The Eiffel Tower is 330 metres tall [1].\n\n[1] {good}\n[2] {extra}\n"
    async with _guard(farm) as guard:
        verdict = await guard.check(answer, question="How tall is the Eiffel Tower?")
    assert verdict.axes["validity"].passed
    assert ("GET", "more.example.org", "/eiffel") in farm.requests or (
        "HEAD",
        "more.example.org",
        "/eiffel",
    ) in farm.requests  # it was checked
    (listed,) = [c for c in verdict.citations if c.url == extra]
    assert (listed.status, listed.cited_by_claim, listed.claim_indices) == (
        CitationStatus.OK,
        False,
        [],
    )
    # the other axes weigh what the claims cite: the listed entry adds no domain
    assert verdict.axes["diversity"].details["distinct_domains"] == 1


async def test_a_sources_list_no_claim_cites_is_checked_link_by_link(farm: Farm) -> None:
    """A markerless answer ending in a numbered "Sources" list (issue 33, family 2): every
    listed URL is fetched and reported, a dead link and a soft 404 among them fail validity."""
    good = farm.add("facts.example.com", "/eiffel", body=PAGE)
    dead = farm.add("gone.example.org", "/eiffel", status=404)
    soft = farm.add("soft.example.org", "/eiffel", body=SOFT_404_PAGES[0])
    answer = (
        "The Eiffel Tower is 330 metres tall. It was built for the 1889 World's Fair.\n\n"
        f"**Sources**\n1. Facts — {good}\n2. Gone — {dead}\n3. News — {soft}\n"
    )
    async with _guard(farm) as guard:
        verdict = await guard.check(answer, question="How tall is the Eiffel Tower?")
    by_url = {c.url: c for c in verdict.citations}
    assert list(by_url) == [good, dead, soft]
    assert [by_url[u].status for u in (good, dead, soft)] == [
        CitationStatus.OK,
        CitationStatus.NOT_FOUND,
        CitationStatus.SOFT_404,
    ]
    assert not any(c.cited_by_claim for c in verdict.citations)
    validity = verdict.axes["validity"]
    assert not validity.passed
    assert set(verdict.offending_urls) == {dead, soft}
    broken = {f.url: f for f in validity.findings if f.code == "uncited_reference_broken"}
    assert set(broken) == {dead, soft}
    assert broken[soft].details["status"] == "soft_404"
    # the claims cite nothing: said so, with the listed sources named as cited by no claim
    (none,) = [f for f in validity.findings if f.code == "no_citations"]
    assert "3 it lists are cited by no claim" in none.message


# --------------------------------------------------------------------------------------------
# Soft 404s
# --------------------------------------------------------------------------------------------

SOFT_404_PAGES = [
    "<html><head><title>Page not found | Example News</title></head><body><nav>Home News"
    "</nav><main><h1>Sorry</h1><p>Try the search box.</p></main></body></html>",
    "<html><head><title>Example News</title></head><body><main><h1>Oops! We can't find that "
    "page.</h1><p>It may have moved.</p></main></body></html>",
    "<html><head><title>Error 404</title></head><body><p>Back to the homepage.</p></body></html>",
    "<html><head><title>Seite nicht gefunden</title></head><body><p>Zur Startseite</p></body>"
    "</html>",
]


async def test_a_200_page_that_says_not_found_is_a_soft_404(farm: Farm) -> None:
    urls = [
        farm.add("news.example.com", f"/story/{i}", body=b) for i, b in enumerate(SOFT_404_PAGES)
    ]
    answer = "".join(f"Claim number {i} is true [{i + 1}].\n" for i in range(len(urls)))
    answer += "\n" + "".join(f"[{i + 1}] {u}\n" for i, u in enumerate(urls))
    async with _guard(farm) as guard:
        verdict = await guard.check(answer, question="What happened?")
    assert [c.status for c in verdict.citations] == [CitationStatus.SOFT_404] * len(urls)
    assert all("200" in c.reason for c in verdict.citations)
    assert not verdict.passed
    assert set(verdict.offending_urls) == set(urls)


async def test_an_article_about_404_errors_is_not_a_soft_404(farm: Farm) -> None:
    body = " ".join(["A 404 not found error means the server cannot find the page."] * 60)
    page = (
        "<html><head><title>What is a 404 not found error?</title></head>"
        f"<body><article><p>{body}</p></article></body></html>"
    )
    url = farm.add("docs.example.net", "/404-errors", body=page)
    answer = f'A 404 means "the server cannot find the page" [1].\n\n[1] {url}\n'
    async with _guard(farm) as guard:
        verdict = await guard.check(answer, question="What is a 404?")
    assert verdict.citations[0].status is CitationStatus.OK


CATCH_ALL = (
    "<html><head><title>Example Shop</title></head><body><main><p>Welcome to Example Shop."
    " Browse our latest offers.</p></main></body></html>"
)


async def test_a_page_equal_to_the_hosts_catch_all_is_a_soft_404(farm: Farm) -> None:
    # the host answers every path, real or not, with the same page and a 200
    farm.add("shop.example.co.uk", "*", body=CATCH_ALL)
    real = farm.add("facts.example.com", "/eiffel", body=PAGE)
    farm.add("facts.example.com", "*", status=404, body="no such page")
    cited = farm.url("shop.example.co.uk", "/2024/annual-report")
    answer = (
        "The Eiffel Tower is 330 metres tall [1]. The shop grew 40% in 2024 [2].\n\n"
        f"[1] {real}\n[2] {cited}\n"
    )
    async with _guard(farm) as guard:
        verdict = await guard.check(answer, question="How tall is the Eiffel Tower?")
    status = {c.url: c.status for c in verdict.citations}
    assert status == {real: CitationStatus.OK, cited: CitationStatus.SOFT_404}
    probes = [
        p for _m, h, p in farm.requests if h == "shop.example.co.uk" and p != "/2024/annual-report"
    ]
    assert len(set(probes)) == 1  # one made-up path per host


async def test_the_catch_all_probe_can_be_switched_off(farm: Farm) -> None:
    farm.add("shop.example.co.uk", "*", body=CATCH_ALL)
    cited = farm.url("shop.example.co.uk", "/2024/annual-report")
    fetch = FetchPolicy(
        allow_private_addresses=True,
        url_timeout=3.0,
        answer_deadline=5.0,
        retries=0,
        soft_404_probe=False,
    )
    policy = Policy(fetch=fetch, entailment=EntailmentPolicy(backend="none"))
    async with Guard(policy, resolver=farm.resolver, now=lambda: NOW) as guard:
        verdict = await guard.check(f"The shop grew in 2024 [1].\n\n[1] {cited}\n")
    assert verdict.citations[0].status is not CitationStatus.SOFT_404
    assert farm.count("shop.example.co.uk") == len(
        [r for r in farm.requests if r[2] == "/2024/annual-report"]
    )


async def test_the_policys_page_bounds_reach_extraction(farm: Farm) -> None:
    filler = "<p>" + "Filler words for padding. " * 400 + "</p>"
    page = (
        "<html><head><title>Long</title></head><body><article>"
        f"{filler}<p>The quoted sentence sits at the very end.</p></article></body></html>"
    )
    url = farm.add("facts.example.com", "/long", body=page)
    answer = f'The page ends with "The quoted sentence sits at the very end" [1].\n\n[1] {url}\n'
    fetch = FetchPolicy(
        allow_private_addresses=True,
        url_timeout=3.0,
        answer_deadline=5.0,
        retries=0,
        max_html_chars=len(page) // 2,
    )
    tight = Policy(fetch=fetch, entailment=EntailmentPolicy(backend="none"))
    async with Guard(tight, resolver=farm.resolver, now=lambda: NOW) as guard:
        cut = await guard.check(answer)
    async with _guard(farm) as guard:
        whole = await guard.check(answer)
    assert whole.citations[0].status is CitationStatus.OK
    assert cut.citations[0].status is CitationStatus.PASSAGE_MISSING  # past the policy's cut


# --------------------------------------------------------------------------------------------
# An answer too large to check whole is cut, and never passes
# --------------------------------------------------------------------------------------------


def _too_large(verdict: Any) -> Any:
    found = [f for f in verdict.axes["validity"].findings if f.code == "answer_too_large"]
    assert len(found) == 1, verdict.axes["validity"].findings
    return found[0]


async def test_claims_past_the_cap_are_not_checked_and_the_answer_fails(farm: Farm) -> None:
    urls = [farm.add("facts.example.com", f"/p{k}", body=PAGE) for k in range(5)]
    answer = " ".join(f"The Eiffel Tower is 330 metres tall [{k + 1}]." for k in range(5))
    answer += "\n\n" + "\n".join(f"[{k + 1}] {u}" for k, u in enumerate(urls)) + "\n"
    async with _guard(farm, max_claims=3) as guard:
        verdict = await guard.check(answer, question="How tall is the Eiffel Tower?")
    assert [c.status for c in verdict.citations] == [CitationStatus.OK] * 3
    assert len(verdict.claims) == 3
    assert farm.count(path="/p3") == farm.count(path="/p4") == 0  # never fetched
    assert min(farm.count(path=f"/p{k}") for k in range(3)) >= 1
    assert not verdict.passed
    assert not verdict.axes["validity"].passed
    f = _too_large(verdict)
    assert f.details == {"claims": 5, "citations": 5, "checked_claims": 3}


async def test_structured_items_past_the_cap_are_not_read(farm: Farm) -> None:
    url = farm.add("facts.example.com", "/eiffel", body=PAGE)
    items = [{"claim": "The Eiffel Tower is 330 metres tall.", "url": url}] * 4 + [
        {"claim": "Not read.", "url": "http://never.example.com/"}
    ]
    async with _guard(farm, max_claims=4) as guard:
        verdict = await guard.check(items, question="How tall is the Eiffel Tower?")
    assert len(verdict.claims) == 4
    assert {c.status for c in verdict.citations} == {CitationStatus.OK}
    assert farm.count("never.example.com") == 0
    assert not verdict.passed
    assert _too_large(verdict).details["claims"] == 5


async def test_the_citation_cap_keeps_whole_leading_claims(farm: Farm) -> None:
    a = farm.add("facts.example.com", "/a", body=PAGE)
    b = farm.add("facts.example.com", "/b", body=PAGE)
    answer = (
        "The Eiffel Tower is 330 metres tall [1][2]. It is 330 metres tall [1][2].\n\n"
        f"[1] {a}\n[2] {b}\n"
    )
    async with _guard(farm, max_citations=3) as guard:
        verdict = await guard.check(answer)
    assert len(verdict.claims) == 1  # the second claim's citations would be the 3rd and 4th
    assert len(verdict.citations) == 2
    assert not verdict.passed
    assert _too_large(verdict).details["checked_claims"] == 1


def _hit_cap_answers(n: int) -> dict[str, object]:
    """Answers holding ``n`` citation markers, links or annotations, one of each way in."""
    text = "The Eiffel Tower is 330 metres tall."
    return {
        "markers": text + "[1]" * (n - 1) + "\n\n[1] http://a.example.com/p\n",  # and its entry
        "bare_urls": text + " " + " ".join(f"http://h{k}.example.com/p" for k in range(n)),
        "structured": [{"claim": text, "url": [f"http://h{k}.example.com/" for k in range(n)]}],
        "annotations": chat_completion(
            text,
            [(k % len(text), k % len(text) + 1, f"http://h{k}.example.com/") for k in range(n)],
        ),
    }


def test_past_four_times_the_citation_cap_an_answer_is_not_parsed() -> None:
    # each marker, link and annotation is an object until the answer is assembled: 33,000
    # "[1]" were 66,000 objects that a full garbage collection walked while the loop waited
    limits = AnswerLimits(max_chars=10**6, max_claims=10, max_citations=3)
    assert limits.max_hits == 12
    for way, answer in _hit_cap_answers(13).items():
        over = parse_answer(answer, limits=limits)
        assert over.claims == [] and over.citations == [], way
        (finding,) = [f for f in over.findings if f.code == "answer_too_large"]
        assert finding.details == {"markers": 13}, way
        assert "more than 12 citation markers and links" in finding.message
    for way, answer in _hit_cap_answers(12).items():
        at_cap = parse_answer(answer, limits=limits)  # read, then cut to the citation cap
        (finding,) = [f for f in at_cap.findings if f.code == "answer_too_large"]
        assert "checked_claims" in finding.details, way
        # without limits the same answer is read whole
        assert len(parse_answer(answer).citations) >= 11, way


async def test_an_answer_past_the_marker_cap_fetches_nothing_and_fails(farm: Farm) -> None:
    url = farm.add("facts.example.com", "/eiffel", body=PAGE)
    answer = "The Eiffel Tower is 330 metres tall" + "[1]" * 13 + f".\n\n[1] {url}\n"
    async with _guard(farm, max_citations=3) as guard:
        verdict = await guard.check(answer)
    assert not verdict.passed
    assert verdict.citations == []
    assert _too_large(verdict).details == {"markers": 13}
    assert farm.count(path="/eiffel") == 0


async def test_listed_references_count_against_the_citation_cap(farm: Farm) -> None:
    # every entry of a reference list is fetched (the user sees it): a list of thousands was
    # thousands of fetches whatever the cap; now the claims' citations come first, then as
    # many entries as the cap leaves, and the answer fails as too large
    urls = [farm.add("facts.example.com", f"/l{k}", body=PAGE) for k in range(6)]
    answer = "The Eiffel Tower is 330 metres tall [1].\n\n" + "\n".join(
        f"[{k + 1}] {u}" for k, u in enumerate(urls)
    )
    async with _guard(farm, max_citations=3) as guard:
        verdict = await guard.check(answer)
    assert not verdict.passed
    finding = _too_large(verdict)
    assert finding.details["listed_references"] == 5
    assert "the first 1 claims and 2 listed references were checked" in finding.message
    fetched = [k for k in range(6) if farm.count(path=f"/l{k}")]
    assert fetched == [0, 1, 2]
    async with _guard(farm, max_citations=6) as guard:
        whole = await guard.check(answer)
    assert "answer_too_large" not in {f.code for f in whole.axes["validity"].findings}
    assert all(farm.count(path=f"/l{k}") for k in range(6))


async def test_a_text_over_the_character_cap_is_not_parsed(farm: Farm) -> None:
    url = farm.add("facts.example.com", "/eiffel", body=PAGE)
    answer = f"The Eiffel Tower is 330 metres tall [1].\n\n[1] {url}\n"
    async with _guard(farm, max_answer_chars=len(answer) - 1) as guard:
        verdict = await guard.check(answer)
    async with _guard(farm, max_answer_chars=len(answer)) as guard:
        at_cap = await guard.check(answer)
    assert not verdict.passed
    assert verdict.claims == [] and verdict.citations == []
    assert _too_large(verdict).details == {"chars": len(answer)}
    assert at_cap.passed  # the cap is inclusive; one fetch in all
    assert farm.count(path="/eiffel") == 1


async def test_a_run_over_the_cap_is_regenerated_with_the_reason_and_not_repaired(
    farm: Farm,
) -> None:
    urls = [farm.add("facts.example.com", f"/r{k}", body=PAGE) for k in range(4)]
    long = " ".join(f"The Eiffel Tower is 330 metres tall [{k + 1}]." for k in range(4))
    long += "\n\n" + "\n".join(f"[{k + 1}] {u}" for k, u in enumerate(urls)) + "\n"
    short = f"The Eiffel Tower is 330 metres tall [1].\n\n[1] {urls[0]}\n"
    feedback: list[Any] = []

    async def agent(question: str, **kw: Any) -> str:
        feedback.append(kw.get("feedback"))
        return long if len(feedback) == 1 else short

    async with _guard(farm, max_claims=3, max_attempts=2) as guard:
        result = await guard.run(agent, "How tall is the Eiffel Tower?")
    assert len(result.attempts) == 2
    assert not result.attempts[0].verdict.passed
    assert result.repairs == []
    assert "Policy.max_claims" in str(feedback[1])  # the answer function hears why
    assert result.passed and result.answer == short

"""A paraphrased claim is judged on the whole page (its metadata first), not on one window
around a passage match; its citation artefacts are not facts the page must repeat; a whole
page is read through one shared lexicon. Real aiohttp farm, real Guard, the real local model
where the outcome is the model's."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from conftest import Farm, RecordingEntailer
from linear_time import assert_linear

from citeguard import EntailmentPolicy, EntailmentScore, FetchPolicy, Guard, Policy
from citeguard.checks.claim_parts import claim_parts
from citeguard.checks.evidence import MAX_SENTENCES, claim_evidence
from citeguard.checks.page_lexicon import LEXICON_MIN_CHARS, PageLexicon
from citeguard.checks.page_meta import without_citation_artefacts
from citeguard.checks.passage import prepare_text
from citeguard.checks.support import prepare_pair

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _filler(n: int) -> str:
    """``n`` paragraphs of distinct sentences about nothing the claims say."""
    return "".join(
        f"<p>Paragraph {i} lists inventory item {i * 7} of the warehouse catalogue, shelf "
        f"{chr(65 + i % 26)}{i}, checked by clerk number {1000 + i}.</p>"
        for i in range(n)
    )


FACT = "<p>The harbour authority opened the new container terminal after years of planning.</p>"
YEAR = "<p>Construction of the terminal ended in 2019, on schedule and under budget.</p>"
LONG_PAGE = (
    "<html><head><title>Harbour news</title></head><body><article>"
    f"{FACT}{_filler(60)}{YEAR}{_filler(40)}</article></body></html>"
)
CLAIM = "The harbour authority opened the new container terminal in 2019."


def _policy(**entailment: object) -> Policy:
    fetch = FetchPolicy(allow_private_addresses=True, url_timeout=5.0, retries=0)
    return Policy(fetch=fetch, entailment=EntailmentPolicy(on_uncertain="warn", **entailment))


async def test_a_fact_whose_parts_stand_far_apart_is_judged_on_all_of_them(farm: Farm) -> None:
    url = farm.add("port.example.com", "/terminal", body=LONG_PAGE)
    recorder = RecordingEntailer("uncertain", 0.5, "?")
    async with Guard(_policy(), resolver=farm.resolver, entailer=recorder, now=lambda: NOW) as g:
        verdict = await g.check(f"{CLAIM} [1]\n\n[1] {url}\n")
    ((claim, evidence),) = recorder.asked
    assert claim.startswith("The harbour authority")
    # the year sits 60 paragraphs below the sentence that matches the claim: a window around
    # the match never held it
    assert "opened the new container terminal" in evidence
    assert "ended in 2019" in evidence
    assert verdict.citations[0].status.value == "ok"


PORT_PAGE = (
    "<html><head><title>Annual traffic report</title>"
    '<meta property="article:published_time" content="2025-03-14T09:00:00Z"></head>'
    "<body><article><p>Container traffic at the port rose by 12% over the year, the busiest "
    "on record.</p><p>Bulk cargo volumes were flat.</p></article></body></html>"
)


async def test_a_citation_year_that_is_the_pages_date_is_found_not_missing(farm: Farm) -> None:
    """The real local model: "(Port Authority, 2025)" is left out of what is judged, and the
    page's own date (in its metadata, not its text) is evidence: no number is missing."""
    url = farm.add("portauthority.example.org", "/report", body=PORT_PAGE)
    claim = "Container traffic at the port rose by 12% in 2025 (Port Authority, 2025)."
    async with Guard(_policy(), resolver=farm.resolver, now=lambda: NOW) as g:
        verdict = await g.check(f"{claim} [1]\n\n[1] {url}\n")
    (report,) = verdict.citations
    assert report.status.value == "ok"
    ent = verdict.claims[0].checks[0].entailment
    assert ent is not None and ent.backend == "local"
    assert "numbers not in evidence" not in ent.reason
    assert ent.label != "not_supported" and ent.label != "contradicted"


async def test_a_claim_a_long_page_never_states_is_rejected_saying_what_it_lacks(
    farm: Farm,
) -> None:
    """The real local model on a long page: a fire, a year and a cost the page never states
    fall below the whole-page bands' reject cut (chosen out of fold, where rejections were at
    least 90% right on long and on short evidence), so the citation is rejected, and its reason
    names what the page lacks; the fact the page does state still passes."""
    url = farm.add("port.example.com", "/terminal", body=LONG_PAGE)
    made_up = "A 1987 fire at the terminal killed twelve dockers and cost 45 million dollars."
    async with Guard(_policy(), resolver=farm.resolver, now=lambda: NOW) as g:
        rejected = await g.check(f"{made_up} [1]\n\n[1] {url}\n")
        stated = await g.check(f"{CLAIM} [1]\n\n[1] {url}\n")
    assert rejected.citations[0].status.value == "not_entailed"
    ent = rejected.claims[0].checks[0].entailment
    assert ent is not None and ent.backend == "local" and ent.label == "not_supported"
    assert "numbers not in evidence: 1987" in ent.reason
    assert stated.citations[0].status.value == "ok"
    assert stated.claims[0].label == "supported"


def test_citation_artefacts_are_not_part_of_what_is_judged() -> None:
    cases = {
        "Port traffic rose 12% in 2024 (Port Authority, 2025).": "Port traffic rose 12% in 2024.",
        "Smith et al. (2024) found that sleep helps [3].": "Smith et al. found that sleep helps.",
        "According to Reuters, the deal closed in May.": "The deal closed in May.",
        "Revenue was 5 bn (OECD 2021, p. 4; Lee et al., 2020).": "Revenue was 5 bn.",
        "首都是北京【1】。": "首都是北京。",
    }
    for claim, judged in cases.items():
        assert without_citation_artefacts(claim) == judged
    # a year that is the claim's own fact stays
    assert without_citation_artefacts("The bridge opened in 1932.") == "The bridge opened in 1932."
    # hostile input stays linear: a long run of capitalised words with no year
    assert without_citation_artefacts("(" + "Aa " * 50_000 + ")").startswith("(")


def test_a_shared_lexicon_reads_a_whole_page_as_the_page_text_does() -> None:
    page = " ".join(
        f"Clerk {1000 + i} checked shelf {i} of the warehouse catalogue." for i in range(400)
    )
    page += " The terminal opened in 2019 after years of planning. " + page
    assert len(page) >= LEXICON_MIN_CHARS
    lexicon = PageLexicon.build(page)
    for claim in (
        "The terminal opened in 2019.",
        "The terminal opened in 2017.",
        "Clerk 1203 checked shelf 203.",
    ):
        whole = prepare_pair(claim, page, k_units=1)
        shared = prepare_pair(claim, page, k_units=1, lexicon=lexicon)
        assert shared.units == whole.units
        assert shared.lexical == whole.lexical


TWO_FACTS = (
    "The harbour authority opened the new container terminal, and construction ended in 2019."
)


class PartJudge:
    """Supported for a claim naming the terminal alone, uncertain for anything else (the whole
    claim, the construction part)."""

    name = "part_judge"

    def __init__(self) -> None:
        self.claims: list[str] = []

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[EntailmentScore]:
        self.claims.extend(c for c, _ in pairs)
        return [
            EntailmentScore(label="supported", score=0.9, backend=self.name, reason="yes")
            if "terminal" in c and "2019" not in c
            else EntailmentScore(label="uncertain", score=0.5, backend=self.name, reason="?")
            for c, _ in pairs
        ]


async def test_a_claim_of_two_facts_says_which_part_was_not_settled(farm: Farm) -> None:
    url = farm.add("port.example.com", "/terminal", body=LONG_PAGE)
    judge = PartJudge()
    async with Guard(_policy(), resolver=farm.resolver, entailer=judge, now=lambda: NOW) as g:
        verdict = await g.check(f"{TWO_FACTS} [1]\n\n[1] {url}\n")
    assert "The harbour authority opened the new container terminal" in judge.claims
    assert "Construction ended in 2019." in judge.claims
    ent = verdict.claims[0].checks[0].entailment
    assert ent is not None and ent.label == "uncertain"
    assert "part 2 of 2" in ent.reason and "Construction ended in 2019" in ent.reason


def test_claim_parts_split_clauses_not_lists() -> None:
    assert claim_parts(TWO_FACTS) == [
        "The harbour authority opened the new container terminal",
        "Construction ended in 2019.",
    ]
    assert claim_parts("Paris is the capital of France; Berlin is the capital of Germany.") == [
        "Paris is the capital of France",
        "Berlin is the capital of Germany.",
    ]
    # a list, and a clause too short to stand alone, stay whole
    for whole in ("Apples, pears and plums grow in the valley.", "He came, and saw it."):
        assert claim_parts(whole) == [whole]
    # hostile: linear, bounded
    parts = claim_parts("; ".join(["one two three four"] * 200))
    assert len(parts) == 1  # past the length cap a claim is judged whole
    parts = claim_parts("; ".join(["one two three four five"] * 30)[:900])
    assert 1 < len(parts) <= 4


def test_hostile_pages_and_claims_stay_linear() -> None:
    """A page of one sentence repeated (every sentence holds every claim word) and a claim of
    capitalised words with no year: the evidence search and the artefact patterns stay linear;
    the evidence is bounded however long the page."""
    claim = "The terminal opened in 2019 after planning by the harbour authority"

    def evidence_of(page: str) -> str:
        return claim_evidence(claim, prepare_text(page), "Head.")

    assert_linear(evidence_of, "The harbour authority opened the terminal in 2019. ", base=5_000)
    assert_linear(without_citation_artefacts, "(Aa Bb et al., ", base=5_000)
    assert_linear(without_citation_artefacts, "According to Aa Bb Cc ", base=5_000)
    page = "The harbour authority opened the terminal in 2019. " * 20_000
    assert len(evidence_of(page).splitlines()) <= MAX_SENTENCES + 1


TITLED = (
    "<html><head><title>Annual Traffic Report of the Northern Port - Port Authority</title>"
    "</head><body><article><p>Container traffic at the port rose by 12% over the year, the "
    "busiest on record.</p><p>Bulk cargo volumes were flat.</p></article></body></html>"
)


async def test_a_claim_quoting_the_pages_title_is_not_a_missing_passage(farm: Farm) -> None:
    url = farm.add("port.example.org", "/report", body=TITLED)
    recorder = RecordingEntailer("uncertain", 0.5, "?")
    titled = "The “Annual Traffic Report of the Northern Port” says container traffic rose 12%"
    made_up = "The report says “container traffic fell sharply in every quarter”"
    async with Guard(_policy(), resolver=farm.resolver, entailer=recorder, now=lambda: NOW) as g:
        verdict = await g.check(f"{titled} [1].\n\n[1] {url}\n")
        control = await g.check(f"{made_up} [1].\n\n[1] {url}\n")
    assert verdict.citations[0].status.value == "ok"
    ((_claim, evidence),) = recorder.asked
    assert "Annual Traffic Report of the Northern Port" in evidence  # the page's metadata
    # a quote that is neither on the page nor its title is still missing
    assert control.citations[0].status.value == "passage_missing"


def _long_page(title: str, fact: str, at: int) -> str:
    return (
        f"<html><head><title>{title}</title></head><body><article>"
        f"{_filler(at)}<p>{fact}</p>{_filler(70 - at)}</article></body></html>"
    )


# A research report's paragraph: each claim carries a number shape real reports are full of
# (an end of a range, a bound, a clause about another subject) or a "not" the page does not
# have; the last one states a number the page gives otherwise.
REPORT_PAGES = {
    "/hominins": (
        "Human origins",
        "Our species, Homo sapiens, appeared between 200,000 and 300,000 years ago, long after "
        "the first hominins emerged in Africa.",
    ),
    "/apgar": (
        "Apgar score",
        "A heart rate of more than 100 beats per minute scores 2 points in the Apgar test.",
    ),
    "/buttons": (
        "Creator awards",
        "Gold Play Buttons are awarded to channels at 1 million subscribers.",
    ),
    "/europe": (
        "After the war",
        "Even if Russia withdraws its troops and Ukraine retains its sovereignty, Europe will "
        "struggle to return to the prewar status quo.",
    ),
    "/port": ("Port traffic", "Container traffic at the port rose by 12% in 2024."),
}
REPORT_CLAIMS = (
    "Hominins emerged around 6-7 million years ago",
    "A newborn's heart rate of 120 beats per minute scores 2 points in the Apgar test",
    "The Silver Play Button is awarded at 100,000 subscribers, and the Gold Play Button at 1 "
    "million subscribers",
    "Even if Russia withdraws its troops, Europe might not return to the prewar status quo",
    "Container traffic at the port rose by 15% in 2024",
)


async def test_a_reports_ranges_bounds_clauses_and_negations_are_no_contradictions(
    farm: Farm,
) -> None:
    """The real local model on long pages, one answer: none of the first four claims is
    contradicted (each was, before the hard-reject review: benchmarks/hard_rejects.py); the
    fifth, a copy of the page's sentence whose number it changed, is rejected."""
    urls = [
        farm.add("report.example.org", path, body=_long_page(title, fact, 20 + 10 * i))
        for i, (path, (title, fact)) in enumerate(REPORT_PAGES.items())
    ]
    answer = " ".join(f"{claim} [{i}]." for i, claim in enumerate(REPORT_CLAIMS, 1))
    refs = "\n".join(f"[{i}] {url}" for i, url in enumerate(urls, 1))
    async with Guard(_policy(), resolver=farm.resolver, now=lambda: NOW) as g:
        verdict = await g.check(f"# Findings\n\n{answer}\n\n## References\n{refs}\n")
    by_claim = {c.text.split(" [")[0]: c for c in verdict.claims}
    assert len(by_claim) == len(REPORT_CLAIMS)
    for text in REPORT_CLAIMS[:4]:
        ent = by_claim[text].checks[0].entailment
        assert ent is not None and ent.backend == "local", text
        assert ent.label != "contradicted", (text, ent.reason)
        assert "number differs" not in ent.reason, (text, ent.reason)
    negated = by_claim[REPORT_CLAIMS[3]].checks[0].entailment
    assert negated is not None and negated.label != "supported"
    # the fifth copies the page's sentence with its number changed: an altered passage, the
    # page's own sentence beside the edit (before near-copies were read so, the model's
    # number rule called it contradicted)
    changed = by_claim[REPORT_CLAIMS[4]].checks[0]
    assert changed.status.value == "passage_altered"
    assert "15 → 12" in changed.reason
    assert "Container traffic at the port rose by 12% in 2024." in changed.reason
    status = {c.url: c.status.value for c in verdict.citations}
    assert status[urls[4]] == "passage_altered"

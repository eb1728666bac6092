"""The diversity axis: question classes, primary/secondary sources, floor, cap and primary share."""

from __future__ import annotations

import json

import pytest

from citeguard.checks.diversity import check_diversity, classify_question
from citeguard.checks.sources import PRIMARY_CATEGORIES, classify_source
from citeguard.models import CitationReport, CitationStatus, Severity
from citeguard.policy import DiversityPolicy


def report(
    url: str,
    status: CitationStatus = CitationStatus.OK,
    *,
    title: str | None = None,
    primary: bool | None = None,
) -> CitationReport:
    return CitationReport(
        url=url,
        normalized_url=url,
        status=status,
        reason=status.value,
        title=title,
        primary=primary,
    )


POLICY = DiversityPolicy()


# --------------------------------------------------------------------------------------------
# classify_source: one case per rule family
# --------------------------------------------------------------------------------------------

PRIMARY_CASES = [
    ("https://www.cdc.gov/flu/about/index.html", "government"),
    ("https://www.gov.uk/guidance/vat-rates", "government"),
    ("https://www.economie.gouv.fr/particuliers/impots", "government"),
    ("https://commission.europa.eu/strategy/ai", "government"),
    ("https://www.who.int/news-room/fact-sheets/detail/malaria", "government"),
    ("https://www.sec.gov/news/press-release/2026-1", "regulator"),
    ("https://www.fda.gov/medical-devices/software", "regulator"),
    ("https://eur-lex.europa.eu/eli/reg/2024/1689/oj", "law"),
    ("https://www.legislation.gov.uk/ukpga/2018/12", "law"),
    ("https://www.sec.gov/Archives/edgar/data/320193/000032019325000079/aapl-10k.htm", "filing"),
    ("https://www.nature.com/articles/s41586-024-07421-0", "paper"),
    ("https://pubmed.ncbi.nlm.nih.gov/12345678/", "paper"),
    ("https://dl.acm.org/doi/10.1145/3580305.3599255", "paper"),
    ("https://arxiv.org/abs/2310.03214", "preprint"),
    ("https://www.medrxiv.org/content/10.1101/2020.01.01", "preprint"),
    ("https://doi.org/10.21105/joss.02439", "doi"),
    ("https://www.iso.org/standard/81230.html", "standard"),
    ("https://www.rfc-editor.org/rfc/rfc9110", "standard"),
    ("https://www.w3.org/TR/WCAG22/", "standard"),
    ("https://investor.apple.com/sec-filings/default.aspx", "investor_relations"),
    ("https://www.example-corp.com/investors/annual-report-2026", "investor_relations"),
    ("https://newsroom.example-corp.com/2026-01-01-results", "press_release"),
    ("https://www.example-corp.com/press/2026/new-product", "press_release"),
    ("https://www.prnewswire.com/news-releases/acme-announces-301.html", "press_release"),
    ("https://docs.python.org/3/whatsnew/3.12.html", "official_docs"),
    ("https://github.com/python/cpython", "repository"),
    ("https://cs.stanford.edu/people/jdoe/papers/thesis.pdf", "paper"),
]

SECONDARY_CASES = [
    ("https://www.nytimes.com/2026/01/01/technology/ai.html", "news"),
    ("https://www.reuters.com/technology/ai-act-2026-01-01/", "news"),
    ("https://www.nature.com/articles/d41586-024-01234-5", "news"),  # Nature's news section
    ("https://medium.com/@someone/my-take-on-ai-1234", "blog"),
    ("https://someone.substack.com/p/my-take", "blog"),
    ("https://blog.example-corp.com/engineering/how-we-scale", "blog"),
    ("https://en.wikipedia.org/wiki/Artificial_Intelligence_Act", "encyclopedia"),
    ("https://www.britannica.com/topic/law", "encyclopedia"),
    ("https://www.reddit.com/r/MachineLearning/comments/abc/", "forum"),
    ("https://stackoverflow.com/questions/1/how", "forum"),
    ("https://github.com/python/cpython/issues/12345", "forum"),
    ("https://x.com/someone/status/1", "social"),
    ("https://www.youtube.com/watch?v=abc", "social"),
    ("https://news.google.com/articles/abc", "aggregator"),
    ("https://www.statista.com/statistics/1/", "aggregator"),
    ("https://www.webmd.com/diabetes/metformin", "consumer_health"),
    ("https://some-random-site.com/page", "unknown"),
]


@pytest.mark.parametrize(("url", "category"), PRIMARY_CASES)
def test_primary_sources(url: str, category: str) -> None:
    kind = classify_source(url)
    assert kind.primary, (url, kind)
    assert kind.category == category, (url, kind)
    assert kind.category in PRIMARY_CATEGORIES
    assert kind.reason


@pytest.mark.parametrize(("url", "category"), SECONDARY_CASES)
def test_secondary_sources(url: str, category: str) -> None:
    kind = classify_source(url)
    assert not kind.primary, (url, kind)
    assert kind.category == category, (url, kind)


def test_page_types_decide_unknown_domains() -> None:
    url = "https://journal.example.org/article/42"
    assert classify_source(url, page_types=["ScholarlyArticle"]).category == "paper"
    assert classify_source(url, page_types=["ScholarlyArticle"]).primary
    assert not classify_source(url, page_types=["NewsArticle"]).primary
    assert classify_source(url, page_types=["https://schema.org/BlogPosting"]).category == "blog"
    assert classify_source(url, page_types=["Legislation"]).category == "law"
    # A government page marked up as a news article is still the government speaking.
    gov = classify_source("https://www.nasa.gov/news-release/x", page_types=["NewsArticle"])
    assert gov.primary and gov.category == "government"
    # A known news outlet does not become primary by declaring a primary-looking type.
    assert not classify_source("https://www.cnn.com/x", page_types=["Report"]).primary


def test_title_hints_only_for_unknown_domains() -> None:
    url = "https://acme.example/q3"
    assert classify_source(url, title="Acme Corp Form 10-K annual report").primary
    assert not classify_source(url, title="My blog: thoughts on Acme").primary
    assert not classify_source("https://www.nytimes.com/x", title="Press release").primary


@pytest.mark.parametrize("url", ["", "not a url", "http://[::1", "mailto:a@b.c", "https://"])
def test_bad_urls_do_not_crash(url: str) -> None:
    kind = classify_source(url)
    assert kind.primary is False
    assert kind.category == "unknown"


# --------------------------------------------------------------------------------------------
# classify_question
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("What is the capital of Costa Rica?", "lookup"),
        ("Who founded Boeing?", "lookup"),
        ("Compare the MacBook Air and the Dell XPS 13 for battery life", "comparison"),
        ("PostgreSQL vs MySQL for analytics workloads", "comparison"),
        ("What is the difference between a Roth IRA and a traditional IRA?", "comparison"),
        ("Give me an overview of the state of solid-state batteries", "synthesis"),
        ("Why did inflation rise in 2022?", "synthesis"),
        ("What are the main risks of GLP-1 drugs?", "synthesis"),
    ],
)
def test_question_kind(question: str, kind: str) -> None:
    qc = classify_question(question)
    assert qc.kind == kind, qc
    if kind != "lookup":
        assert any(c.startswith(kind) for c in qc.cues)


def test_question_topics_and_subject() -> None:
    eu = classify_question("What does the EU AI Act require for general-purpose AI models?")
    assert "regulatory" in eu.topics
    assert "europa.eu" in eu.about_domains
    med = classify_question("What is the maximum daily dose of metformin?")
    assert "medical" in med.topics
    law = classify_question("Is it legal to record a phone call in California?")
    assert "legal" in law.topics
    apple = classify_question("What did Apple report as iPhone revenue last quarter?")
    assert "apple" in apple.about_domains
    assert "financial" in apple.topics
    named = classify_question("What does openai.com say about usage limits?")
    assert "openai.com" in named.about_domains
    # "who" the pronoun is not the World Health Organization.
    assert "who.int" not in classify_question("Who painted The Starry Night?").about_domains
    assert "who.int" in classify_question("What does the WHO recommend?").about_domains


def test_question_class_serialises_deterministically() -> None:
    qc = classify_question("Is the FDA approval of this drug legal under the statute?")
    dumped = json.loads(qc.model_dump_json())
    assert dumped["topics"] == sorted(dumped["topics"])
    assert {"regulatory", "legal", "medical"} <= set(dumped["topics"])


# --------------------------------------------------------------------------------------------
# check_diversity
# --------------------------------------------------------------------------------------------


def test_monoculture_answer_fails_floor_and_cap() -> None:
    question = "Give an overview of the history of solid-state battery research"
    cites = [report(f"https://www.example.com/a{i}") for i in range(4)]
    result = check_diversity(question, cites, POLICY)
    assert result.name == "diversity"
    assert not result.passed
    floor = next(f for f in result.findings if f.code == "diversity.domain_floor")
    assert floor.message == (
        "only 1 distinct domain (example.com); a synthesis question needs at least 4"
    )
    assert "feedback" in floor.details
    # The floor is feedback, never an offender; the cap keeps the first two.
    assert result.offending_urls == ["https://www.example.com/a2", "https://www.example.com/a3"]
    cap = next(f for f in result.findings if f.code == "diversity.per_domain_cap")
    assert cap.message.startswith("4 citations from example.com exceed the cap of 2")
    assert result.details["distinct_domains"] == 1


def test_per_domain_cap_without_exemption() -> None:
    question = "Compare remote-work policies at large banks and tech firms"
    cites = [
        report("https://www.nytimes.com/2026/01/a.html"),
        report("https://www.nytimes.com/2026/01/b.html"),
        report("https://www.bloomberg.com/x"),
        report("https://www.nytimes.com/2026/01/c.html"),
    ]
    result = check_diversity(question, cites, POLICY)
    assert not result.passed
    assert result.offending_urls == ["https://www.nytimes.com/2026/01/c.html"]
    [cap] = [f for f in result.findings if f.code == "diversity.per_domain_cap"]
    assert cap.message.startswith("3 citations from nytimes.com exceed the cap of 2")
    # A higher cap lets the same answer through.
    relaxed = check_diversity(question, cites, POLICY.model_copy(update={"per_domain_cap": 3}))
    assert relaxed.passed, relaxed.findings


def test_per_domain_cap_waived_for_subject_domain() -> None:
    question = "What obligations does the EU AI Act place on providers of high-risk systems?"
    cites = [
        report("https://eur-lex.europa.eu/eli/reg/2024/1689/oj"),
        report("https://eur-lex.europa.eu/legal-content/EN/TXT/?uri=CELEX:32024R1689"),
        report("https://digital-strategy.ec.europa.eu/en/policies/regulatory-framework-ai"),
    ]
    result = check_diversity(question, cites, POLICY)
    assert result.passed, result.findings
    assert result.offending_urls == []
    assert result.details["cap_waived"] == ["europa.eu"]
    waived = next(f for f in result.findings if f.code == "diversity.cap_waived")
    assert waived.severity is Severity.INFO

    # The same three eur-lex citations on a question about something else hit the cap.
    other = check_diversity("What is the capital of Costa Rica?", cites, POLICY)
    assert not other.passed
    assert len(other.offending_urls) == 1


def test_company_question_may_cite_its_own_site() -> None:
    question = "What did Apple announce about the iPhone camera?"
    cites = [
        report("https://www.apple.com/iphone/"),
        report("https://www.apple.com/newsroom/2026/09/iphone/"),
        report("https://support.apple.com/en-us/105000"),
    ]
    result = check_diversity(question, cites, POLICY)
    assert result.passed, result.findings
    assert result.details["cap_waived"] == ["apple.com"]
    # The subject's own pages count as primary (first party).
    assert result.details["sources"]["https://www.apple.com/iphone/"]["category"] == "first_party"


def test_regulatory_question_with_only_secondary_sources_fails() -> None:
    question = "What does the FDA guidance say about AI-enabled medical device software?"
    cites = [
        report("https://www.statnews.com/2026/01/fda-ai"),
        report("https://en.wikipedia.org/wiki/Software_as_a_medical_device"),
        report("https://medium.com/@someone/fda-ai-guidance"),
    ]
    result = check_diversity(question, cites, POLICY)
    assert not result.passed
    [f] = [f for f in result.findings if f.code == "diversity.primary_share"]
    assert f.message.startswith("no primary sources among 3 citations")
    assert "feedback" in f.details
    assert result.offending_urls == []  # excluding news would not add a primary source
    # One primary source of two clears the default 34% bar; one of three (33%) does not.
    fda = report("https://www.fda.gov/regulatory-information/guidance")
    assert check_diversity(question, [cites[0], fda], POLICY).passed
    assert not check_diversity(question, [*cites[:2], fda], POLICY).passed


def test_only_resolving_citations_count() -> None:
    question = "Compare the Pixel 9 and the iPhone 16 cameras"
    cites = [
        report("https://www.theverge.com/pixel"),
        report("https://www.dead-link.example/x", CitationStatus.NOT_FOUND),
        report("https://www.slow.example/x", CitationStatus.TIMEOUT),
    ]
    result = check_diversity(question, cites, POLICY)
    assert not result.passed  # one resolving domain; a broken link does not fill the floor
    assert result.details["distinct_domains"] == 1
    # A citation that resolves but fails its passage check still counts as a source here.
    with_passage = [*cites, report("https://www.cnet.com/x", CitationStatus.PASSAGE_MISSING)]
    assert check_diversity(question, with_passage, POLICY).details["distinct_domains"] == 2


def test_nothing_resolved_is_not_evaluated() -> None:
    result = check_diversity(
        "Who founded Boeing?", [report("https://x.example/", CitationStatus.NOT_FOUND)], POLICY
    )
    assert result.passed and not result.evaluated
    assert check_diversity("Who founded Boeing?", [], POLICY).evaluated is False


def test_policy_overrides() -> None:
    cites = [report("https://www.bbc.com/a"), report("https://www.cnn.com/b")]
    lookup = "Who founded Boeing?"
    assert check_diversity(lookup, cites, POLICY).passed
    forced = POLICY.model_copy(update={"question_class": "synthesis"})
    result = check_diversity(lookup, cites, forced)
    assert not result.passed
    assert "a synthesis question needs at least 4" in result.findings[0].message
    custom = POLICY.model_copy(
        update={"question_class": "deep_research", "domain_floor": {"deep_research": 2}}
    )
    assert check_diversity(lookup, cites, custom).passed
    off = check_diversity(lookup, cites, POLICY.model_copy(update={"enabled": False}))
    assert off.passed and not off.evaluated


def test_given_primary_flag_and_domain_are_used() -> None:
    # The validity stage fills domain and may fill primary from page signals; both are trusted.
    question = "What does the HIPAA privacy rule require?"
    cites = [
        CitationReport(
            url="https://a.example/x",
            normalized_url="https://a.example/x",
            domain="a.example",
            status=CitationStatus.OK,
            reason="ok",
            primary=True,
        )
    ]
    result = check_diversity(question, cites, POLICY)
    assert result.passed, result.findings
    assert result.details["primary_share"] == 1.0
    assert result.details["sources"]["https://a.example/x"]["category"] == "page_signals"
    # When the flag agrees with the URL rules, the rule's category is kept.
    agreed = [report("https://arxiv.org/abs/1", primary=True)]
    details = check_diversity(question, agreed, POLICY).details
    assert details["sources"]["https://arxiv.org/abs/1"]["category"] == "preprint"


def test_explicit_qclass_is_used() -> None:
    cites = [report("https://www.bbc.com/a")]
    qc = classify_question("Compare A and B")
    result = check_diversity("Who founded Boeing?", cites, POLICY, qclass=qc)
    assert result.details["question_class"] == "comparison"
    assert not result.passed

"""The source table: every entry named, with an example it decides and a near miss it must not."""

from __future__ import annotations

import pytest

from citeguard.checks.diversity import check_diversity
from citeguard.checks.sources import (
    PRIMARY_CATEGORIES,
    SOURCE_TABLE,
    Sample,
    SourceRule,
    classify_source,
    source_rule,
    with_source_kinds,
)
from citeguard.models import CitationReport, CitationStatus, Page
from citeguard.policy import DiversityPolicy

RULES = pytest.mark.parametrize("rule", SOURCE_TABLE, ids=[r.name for r in SOURCE_TABLE])
DOMAIN_RULES = [r for r in SOURCE_TABLE if r.domains and r.path is None]


def expected_category(rule: SourceRule) -> str:
    if rule.category is not None:
        return rule.category
    # The JSON-LD entry: its example declares a ScholarlyArticle.
    assert rule.example.page_types == ("ScholarlyArticle",)
    return "paper"


def classify(sample: Sample, table: tuple[SourceRule, ...] = SOURCE_TABLE) -> tuple[bool, str]:
    kind = classify_source(
        sample.url, page_types=sample.page_types, title=sample.title, table=table
    )
    return kind.primary, kind.category


# --------------------------------------------------------------------------------------------
# The table's shape
# --------------------------------------------------------------------------------------------


def test_entry_names_are_unique() -> None:
    names = [r.name for r in SOURCE_TABLE]
    assert len(names) == len(set(names))
    assert all(n and n == n.strip() for n in names)


@RULES
def test_entry_has_a_one_line_why(rule: SourceRule) -> None:
    assert rule.why.strip() and "\n" not in rule.why


def test_no_domain_is_listed_by_two_plain_entries() -> None:
    seen: dict[str, str] = {}
    for rule in DOMAIN_RULES:
        for domain in rule.domains:
            assert domain not in seen, (domain, seen.get(domain), rule.name)
            seen[domain] = rule.name


def test_the_most_specific_listed_domain_decides_whatever_the_order() -> None:
    # First match wins, so an entry listing a parent (nih.gov) before an entry listing a child
    # (pubmed.ncbi.nlm.nih.gov) would take the child's hosts: it may only if it lists both.
    for i, earlier in enumerate(SOURCE_TABLE):
        for later in SOURCE_TABLE[i + 1 :]:
            for domain in later.domains:
                parents = {p for p in earlier.domains if domain.endswith("." + p)}
                assert not parents or domain in earlier.domains, (earlier.name, later.name, domain)


def test_refined_domains_fall_back_to_a_plain_entry() -> None:
    # sec.gov off its EDGAR paths is still the regulator; a journal off /news/ still a journal.
    plain = {d for r in DOMAIN_RULES for d in r.domains}
    for rule in SOURCE_TABLE:
        if rule.domains and rule.path is not None:
            assert rule.domains <= plain, rule.name


# --------------------------------------------------------------------------------------------
# Each entry: its example, the example without the entry, its near miss
# --------------------------------------------------------------------------------------------


@RULES
def test_example_is_decided_by_its_entry(rule: SourceRule) -> None:
    primary, category = classify(rule.example)
    assert category == expected_category(rule), rule.example
    assert primary is (category in PRIMARY_CATEGORIES)
    found = source_rule(
        rule.example.url, page_types=rule.example.page_types, title=rule.example.title
    )
    assert found is rule


@RULES
def test_example_classifies_otherwise_without_its_entry(rule: SourceRule) -> None:
    table = tuple(r for r in SOURCE_TABLE if r is not rule)
    _, category = classify(rule.example, table)
    assert category != expected_category(rule), rule.example


@RULES
def test_near_miss_does_not_match(rule: SourceRule) -> None:
    _, category = classify(rule.near_miss)
    assert category != expected_category(rule), rule.near_miss
    found = source_rule(
        rule.near_miss.url, page_types=rule.near_miss.page_types, title=rule.near_miss.title
    )
    assert found is not rule


@pytest.mark.parametrize("rule", DOMAIN_RULES, ids=[r.name for r in DOMAIN_RULES])
def test_page_types_demote_only_where_the_entry_allows(rule: SourceRule) -> None:
    # A NewsArticle on a journal or docs site is news; on a regulator's site it is still the
    # regulator, and a known news outlet stays news.
    plain = classify_source(rule.example.url)
    typed = classify_source(rule.example.url, page_types=["NewsArticle"])
    if rule.demoted_by_page_types:
        assert (typed.primary, typed.category) == (False, "news")
        assert "NewsArticle" in typed.reason
    else:
        assert (typed.primary, typed.category) == (plain.primary, plain.category)


def test_a_listed_subdomain_is_named_in_the_reason() -> None:
    assert classify_source("https://eur-lex.europa.eu/x").reason == (
        "eur-lex.europa.eu is a law site"
    )
    assert classify_source("https://ec.europa.eu/x").reason == "europa.eu is a government site"
    assert classify_source("https://a.b.pubmed.ncbi.nlm.nih.gov/1").category == "paper"


def test_a_primary_json_ld_type_beats_an_earlier_secondary_one() -> None:
    kind = classify_source("https://a.example/x", page_types=["NewsArticle", "Legislation"])
    assert (kind.primary, kind.category) == (True, "law")


def test_an_empty_table_knows_nothing() -> None:
    kind = classify_source("https://www.sec.gov/Archives/edgar/data/1", table=())
    assert (kind.primary, kind.category) == (False, "unknown")
    assert source_rule("https://some-random-site.com/page") is None


# --------------------------------------------------------------------------------------------
# Classified once: with_source_kinds, then check_diversity reads the reports
# --------------------------------------------------------------------------------------------


def cite(
    url: str,
    *,
    final_url: str | None = None,
    title: str | None = None,
    primary: bool | None = None,
    source_kind: str | None = None,
) -> CitationReport:
    return CitationReport(
        url=url,
        normalized_url=url,
        final_url=final_url,
        status=CitationStatus.OK,
        reason="ok",
        title=title,
        primary=primary,
        source_kind=source_kind,
    )


def test_with_source_kinds_uses_page_types_title_and_final_url() -> None:
    scholarly = "https://journal.example.org/article/42"
    cites = [
        cite(scholarly),
        cite("https://acme.example/q3", title="Acme Corp Form 10-K annual report"),
        cite("https://bit.ly/x", final_url="https://www.sec.gov/Archives/edgar/data/1/a.htm"),
        cite("https://some-random-site.com/page"),
    ]
    pages = {scholarly: Page(url=scholarly, kind="html", types=["ScholarlyArticle"])}
    out = with_source_kinds(cites, pages)
    assert [(c.primary, c.source_kind) for c in out] == [
        (True, "paper"),
        (True, "official_docs"),
        (True, "filing"),
        (False, "unknown"),
    ]
    assert [c.url for c in out] == [c.url for c in cites]
    assert all(c.source_kind is None and c.primary is None for c in cites)  # inputs untouched


def test_check_diversity_trusts_the_stored_source_kind() -> None:
    question = "What does the HIPAA privacy rule require?"
    # The URL rules alone would call these unknown and preprint; the stored kinds say otherwise.
    cites = [
        cite("https://a.example/x", source_kind="paper", primary=True),
        cite("https://arxiv.org/abs/1", source_kind="news", primary=False),
        cite("https://b.example/y", source_kind="law"),  # primary follows the category
    ]
    details = check_diversity(question, cites, DiversityPolicy()).details
    sources = details["sources"]
    assert sources["https://a.example/x"]["category"] == "paper"
    assert sources["https://arxiv.org/abs/1"] == {
        "domain": "arxiv.org",
        "primary": False,
        "category": "news",
    }
    assert sources["https://b.example/y"]["primary"] is True
    assert details["primary_share"] == round(2 / 3, 4)


def test_check_diversity_after_with_source_kinds_sees_page_signals() -> None:
    question = "What does the HIPAA privacy rule require?"
    url = "https://journal.example.org/article/42"
    bare = [cite(url)]
    assert not check_diversity(question, bare, DiversityPolicy()).passed
    kinds = with_source_kinds(bare, {url: Page(url=url, kind="html", types=["ScholarlyArticle"])})
    result = check_diversity(question, kinds, DiversityPolicy())
    assert result.details["sources"][url]["category"] == "paper"
    assert result.details["primary_share"] == 1.0

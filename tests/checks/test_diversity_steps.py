"""The named steps of the diversity axis (issue 46)."""

from __future__ import annotations

from conftest import resolving_report

from citeguard.checks.diversity import (
    QuestionClass,
    _domain_of,
    _gate_kind,
    _per_domain_cap,
    _primary_of,
    _primary_share,
    _required_share,
)
from citeguard.policy import DiversityPolicy


def test_an_uncertain_kind_is_gated_on_its_most_lenient_floor() -> None:
    policy = DiversityPolicy(domain_floor={"lookup": 1, "comparison": 2, "synthesis": 3})
    qc = QuestionClass(kind="synthesis", plausible=["synthesis", "comparison"])
    assert _gate_kind(qc, "synthesis", policy) == (True, "comparison")
    assert _gate_kind(qc, "synthesis", policy.model_copy(update={"uncertain_class": "strict"})) == (
        False,
        "synthesis",
    )
    confident = QuestionClass(kind="synthesis", plausible=["synthesis"])
    assert _gate_kind(confident, "synthesis", policy) == (False, "synthesis")


def test_the_domain_is_the_reports_else_the_registrable_domain_of_the_host() -> None:
    cache: dict[str, str] = {}
    url = "https://news.bbc.co.uk/x"
    assert _domain_of(resolving_report(url), url, cache) == "bbc.co.uk"
    assert cache == {"news.bbc.co.uk": "bbc.co.uk"}
    assert _domain_of(resolving_report(url, domain="given.example"), url, cache) == "given.example"


def test_primary_from_upstream_kind_page_signals_or_the_source_table() -> None:
    url = "https://www.nytimes.com/2025/a.html"
    assert _primary_of(resolving_report(url), url)[0] is False  # news, by the source table
    # page signals (set upstream) override the table's verdict
    assert _primary_of(resolving_report(url, primary=True), url) == (True, "page_signals")
    # a kind classified upstream is kept, its primary flag defaulting from the category
    upstream = resolving_report(url, source_kind="news", primary=None)
    assert _primary_of(upstream, url) == (False, "news")


def test_the_cap_is_waived_on_the_domain_the_question_is_about() -> None:
    per_domain = {
        "apple.com": ["a1", "a2", "a3"],
        "blog.example": ["b1", "b2", "b3", "b4"],
    }
    score, offending, exempt, findings = _per_domain_cap(per_domain, 2, frozenset({"apple"}), 7)
    assert exempt == ["apple.com"]
    assert offending == ["b3", "b4"]
    assert [f.code for f in findings] == ["diversity.per_domain_cap"]
    assert score == 1.0 - 2 / 7


def test_the_required_primary_share_is_the_highest_the_kind_or_a_topic_asks() -> None:
    policy = DiversityPolicy(min_primary_share={"lookup": 0.2, "legal": 0.5, "medical": 0.4})
    assert _required_share(policy, "lookup", frozenset({"medical", "legal"})) == (0.5, "legal")
    assert _required_share(policy, "synthesis", frozenset()) == (0.0, "")


def test_a_primary_share_below_the_requirement_fails() -> None:
    assert _primary_share(1, 2, 0.5, "legal") == (1.0, None)
    score, finding = _primary_share(0, 4, 0.5, "legal")
    assert score == 0.0
    assert finding is not None and finding.message.startswith("no primary sources among 4")
    assert _primary_share(0, 3, 0.0, "")[1] is None

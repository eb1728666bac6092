"""The named steps of the query axis's prompt analysis and scoring (issue 46)."""

from __future__ import annotations

import pytest

from citeguard.checks.query.prompt import (
    _FINDERS,
    _analyse_query,
    _Found,
    _is_lookup,
    _is_product_name,
    _Item,
    _Prompt,
)
from citeguard.checks.query.score import (
    _ITEM_RULES,
    _acronym_hit,
    _added_words,
    _check_coverage,
    _number_matches,
    _Scoring,
)


def _found(prompt: str) -> list[tuple[str, str]]:
    found = _Found()
    for finder in _FINDERS:
        finder(prompt, found)
    return [(it.kind, it.label) for _, it in sorted(found.items, key=lambda x: x[0])]


def test_a_span_one_finder_takes_is_not_read_again() -> None:
    # The year inside the quoted phrase belongs to the phrase; the lone year is its own item.
    assert _found('"Budget 2024" report 2025') == [("phrase", "Budget 2024"), ("year", "2025")]


def test_an_exclusion_cue_followed_only_by_stopwords_is_no_item() -> None:
    assert [k for k, _ in _found("laptops without the")] == []
    assert _found("laptops without Windows") == [("exclusion", "without Windows")]


@pytest.mark.parametrize(
    ("name", "product"),
    [("iPhone", True), ("Python", True), ("page", False), ("March", False), ("best", False)],
)
def test_product_names_for_a_name_and_number_version(name: str, product: bool) -> None:
    assert _is_product_name(name) is product


@pytest.mark.parametrize(
    ("prompt", "lookup"),
    [("capital of France?", True), ("How tall is it", True), ("laptops under $500", False)],
)
def test_lookup_prompts(prompt: str, lookup: bool) -> None:
    assert _is_lookup(prompt) is lookup


def _scoring(query: str, covered: frozenset[str] = frozenset()) -> _Scoring:
    return _Scoring(_analyse_query(query), covered)


def test_a_number_matches_in_a_compatible_unit_or_bare_when_unitless() -> None:
    q = _analyse_query("laptops over 10 hours battery")
    assert [n[1] for n in _number_matches(q, 10.0, "hour")] == [10.0]
    assert _number_matches(q, 10.0, "usd") == []
    assert _number_matches(_analyse_query("top 10 films"), 10.0, "") != []


@pytest.mark.parametrize(
    ("query", "code", "severity"),
    [
        ("phones under $500", "query.reversed_constraint", "error"),
        ("phones $500", "query.weakened_constraint", "warning"),
    ],
)
def test_a_kept_number_loses_its_comparator(query: str, code: str, severity: str) -> None:
    item = _Item("number", "number:500:usd", "over $500", (500.0, "usd", "up"))
    s = _scoring(query)
    _ITEM_RULES["number"](s, item)
    assert item.key in s.kept
    assert [(f.code, f.severity.value) for f in s.findings] == [(code, severity)]


def test_a_drop_another_query_keeps_is_info_and_not_counted() -> None:
    item = _Item("year", "year:2026", "2026")
    s = _scoring("laptops", covered=frozenset({"year:2026"}))
    _ITEM_RULES["year"](s, item)
    assert [f.severity.value for f in s.findings] == ["info"]
    assert s.tallies["constraints"].hard == 0
    assert s.dropped == ["year 2026"]


def test_an_exclusion_searched_for_is_inverted() -> None:
    item = _Item("exclusion", "exclusion:windows", "without Windows", ("Windows",))
    cases = [("laptops -Windows", None), ("Windows laptops", "query.inverted_exclusion")]
    for query, code in cases:
        s = _scoring(query)
        _ITEM_RULES["exclusion"](s, item)
        assert [f.code for f in s.findings] == ([code] if code else [])


def test_an_entity_kept_as_an_acronym_or_its_expansion() -> None:
    gdpr = _Item("entity", "entity:gdpr", "GDPR", ("gdpr",))
    q = _analyse_query("General Data Protection Regulation fines")
    assert _acronym_hit(gdpr, ["gdpr"], q)
    s = _Scoring(q, frozenset())
    _ITEM_RULES["entity"](s, gdpr)
    assert s.findings == []
    assert gdpr.key in s.kept
    # The expansion's words are the entity's, so they are not "added".
    assert "general" in s.entity_words


def test_every_item_kind_has_a_rule() -> None:
    kinds = {"year", "version", "number", "region", "phrase", "exclusion", "entity"}
    assert set(_ITEM_RULES) == kinds


def test_added_words_sorts_generic_names_and_terms() -> None:
    prompt = _Prompt(words={"laptops", "laptop"})
    s = _scoring("best laptops Apple battery charger 2025")
    added = _added_words(prompt, s)
    assert (added.generic, added.names) == (["best"], ["Apple"])
    assert added.terms == ["battery", "charger"]


def test_coverage_a_question_turned_into_a_bare_topic() -> None:
    prompt = _Prompt(
        content={"tall": "tall", "tower": "tower", "eiffel": "eiffel", "meter": "meters"},
        is_lookup=True,
    )
    s = _scoring("eiffel")
    _check_coverage(s, prompt)
    assert [(f.code, f.severity.value) for f in s.findings] == [("query.topic_rewrite", "error")]
    s = _scoring("eiffel tower facts and history")
    _check_coverage(s, prompt)
    assert s.findings == []

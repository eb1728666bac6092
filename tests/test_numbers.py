"""Numbers are read whole, in each locale's common forms, the same way in a claim and on a page
(citeguard/numbers.py, checks/_consistency.py), and a contradiction needs a number that differs
under every plausible reading. End to end through Guard.check with a real page on 127.0.0.1."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from conftest import Farm

from citeguard import CitationStatus, EntailmentPolicy, FetchPolicy, Guard, Policy
from citeguard.checks._consistency import check_consistency, numbers
from citeguard.numbers import read_numbers

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("It took 12.6 s.", 12.6),
        ("about 6,100.0 people", 6100.0),
        ("1,234.5 units", 1234.5),
        ("1.234,5 Einheiten", 1234.5),
        ("1 234 habitants", 1234.0),
        ("1\u00a0234,5 habitants", 1234.5),
        ("1\u202f234 habitants", 1234.0),
        ("1'234.50 CHF", 1234.5),
        ("a 12.6% rise", 12.6),
        ("ein Anstieg um 12,6 %", 12.6),
        ("1,234,567 votes", 1234567.0),
        ("1.234.567 Stimmen", 1234567.0),
    ],
)
def test_a_number_is_read_whole(written: str, value: float) -> None:
    (q,) = read_numbers(written)
    assert q.readings[0].value == value, q
    assert len(q.readings) == 1  # none of these forms is ambiguous


@pytest.mark.parametrize("written", ["1,234", "1.234", "6.100", "6,100"])
def test_a_form_two_locales_read_apart_keeps_both_readings(written: str) -> None:
    (q,) = read_numbers(written)
    assert len(q.readings) == 2


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        ("The hall seats 6,100 people.", "The hall seats 6,100 people."),
        ("The run took 12.6 s in total.", "The run took 12.6 s in total."),
        ("The hall seats 6,100 people.", "Die Halle: the hall seats 6.100 people."),
        ("The hall seats 1 234 people.", "The hall seats 1\u202f234 people."),
        ("The hall seats 1,234.5 tonnes.", "The hall seats 1.234,5 tonnes."),
        ("Prices rose 12.6% in 2024.", "Prices rose 12,6 % in 2024."),
        # "1,234" is 1234 or 1.234: a page writing 1.234 matches one reading
        ("The bridge is 1,234 km long.", "The bridge is 1.234 km long."),
    ],
)
def test_the_same_number_in_another_form_is_neither_missing_nor_contradicted(
    claim: str, evidence: str
) -> None:
    cons = check_consistency(claim, evidence)
    assert not cons.conflicting_numbers, cons
    assert not cons.missing_numbers, cons


@pytest.mark.parametrize(
    ("claim", "evidence", "claim_number", "evidence_number"),
    [
        ("The hall seats 6,400 people.", "The hall seats 6,100 people.", "6,400", "6,100"),
        ("The run took 13.6 s in total.", "The run took 12.6 s in total.", "13.6 s", "12.6 s"),
        ("Prices rose 13.6% in 2024.", "Prices rose 12.6% in 2024.", "13.6%", "12.6%"),
        ("The hall seats 6.400 people.", "The hall seats 6,100 people.", "6.400", "6,100"),
    ],
)
def test_a_changed_number_is_still_a_contradiction_and_the_reason_quotes_both(
    claim: str, evidence: str, claim_number: str, evidence_number: str
) -> None:
    cons = check_consistency(claim, evidence)
    assert cons.conflicting_numbers == ((claim_number, evidence_number),)
    (sentence,) = cons.conflict_sentences
    assert evidence_number in sentence
    reason = cons.describe()
    assert f"claim {claim_number!r} vs evidence {evidence_number!r} in “{sentence}”" in reason


def test_the_reason_names_the_sentence_its_evidence_number_stands_in() -> None:
    evidence = (
        "The stadium opened in 1998 with 40,000 seats. It was enlarged in 2012. "
        "Today the stadium holds 52,000 spectators."
    )
    cons = check_consistency("Today the stadium holds 48,000 spectators.", evidence)
    assert cons.is_contradiction
    for (_c, e), sentence in zip(cons.conflicting_numbers, cons.conflict_sentences, strict=True):
        assert e in sentence and sentence in evidence


def test_claim_and_page_read_a_number_the_same_way() -> None:
    text = "The winner finished in 12.6 s; 6,100 people and 1 234 dogs came."
    assert [n.text for n in numbers(text)] == ["12.6 s", "6,100", "1 234"]


# --------------------------------------------------------------------------------------------
# End to end: the claim's words outside a quote are read whole too
# --------------------------------------------------------------------------------------------

RACE = (
    "<html><head><title>Harbour run</title></head><body><article>"
    "<p>The harbour run took place on 12 May 2024. The winner finished in 12.6 s over the "
    'sprint course. The race drew 6,100 people, the organisers said. "It was a record day", '
    "the organisers said.</p></article></body></html>"
)


async def _check(farm: Farm, claim: str) -> tuple[CitationStatus, str, str | None]:
    url = farm.add("race.example.org", "/harbour-run", body=RACE)
    policy = Policy(
        fetch=FetchPolicy(allow_private_addresses=True, url_timeout=3.0, retries=0),
        entailment=EntailmentPolicy(backend="local"),
    )
    async with Guard(policy, resolver=farm.resolver, now=lambda: NOW) as guard:
        verdict = await guard.check(f"{claim} [1].\n\n[1] {url}\n", question="The harbour run?")
    (c,) = verdict.citations
    assert c.entailment is not None
    return c.status, c.entailment.reason, c.support


@pytest.mark.parametrize(
    "claim",
    [
        'The race drew 6,100 people, a fine result, and "It was a record day", the organisers said',
        'The winner finished in 12.6 s, a fine result, and "It was a record day", the organisers '
        "said",
    ],
)
async def test_numbers_around_a_quote_that_the_page_states_are_not_contradicted(
    farm: Farm, claim: str
) -> None:
    status, reason, support = await _check(farm, claim)
    assert status is CitationStatus.OK, reason
    assert support != "contradicted", reason
    assert "number differs" not in reason


async def test_a_changed_number_around_a_quote_is_contradicted_quoting_both(farm: Farm) -> None:
    claim = (
        'The race drew 6,400 people, a fine result, and "It was a record day", the organisers said'
    )
    status, reason, support = await _check(farm, claim)
    assert (status, support) == (CitationStatus.NOT_ENTAILED, "contradicted"), reason
    assert (
        "claim '6,400' vs evidence '6,100' in “The race drew 6,100 people, the organisers said.”"
        in reason
    )


@pytest.mark.parametrize(
    ("written", "unit", "is_year"),
    [("the 1990s", "", True), ("took 12.6s", "s", False), ("took 60 s", "s", False)],
)
def test_a_decade_is_not_seconds(written: str, unit: str, is_year: bool) -> None:
    (q,) = read_numbers(written)
    assert (q.unit, q.is_year) == (unit, is_year)

"""An unquoted claim one edit away from a sentence of its page is not support.

The pure matcher (:func:`find_near_copy`) on hand-written pages in German, English and Chinese,
each edit with its control (the same sentence unedited, or reworded without changing what it
says); then the whole guard over real sockets: the citation ends ``passage_altered`` with the
page's own sentence in its reason and in the per-claim view.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from conftest import Farm
from linear_time import assert_linear

from citeguard import CitationStatus, EntailmentPolicy, FetchPolicy, Guard, Policy
from citeguard.checks.near_copy import find_near_copy
from citeguard.checks.passage import prepare_text

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)

DE = (
    "Unser Sortiment. Alle Kaffees in unserem Sortiment sind bio-zertifiziert und fair "
    "gehandelt. Es ist schön, bunt, unkaputtbar. Die Messe findet am 14. September in Berlin "
    "statt. Der Airbus steht am Flughafen, und Bremen baut dort ein neues Trainingszentrum."
)
EN = (
    "Release notes. Helix 5.0 does not include native vector indexes; similarity search "
    "still needs the separate helix-vec extension. The release was led by Maria Lopez and "
    "shipped to 1,200 customers in March. Oyster mushrooms need to be softened by cooking "
    "before they can be eaten."
)
ZH = (
    "人口报告。据统计，到2022年，预计约为1.7亿人。国家债务在去年达到126万亿元。"
    "该地区的出生率没有明显上升。"
)


def _near(claim: str, page: str) -> Any:
    return find_near_copy(claim, prepare_text(page))


@pytest.mark.parametrize(
    ("claim", "edit"),
    [
        # a "not" added, a "not" dropped
        ("Alle Kaffees in unserem Sortiment sind nicht bio-zertifiziert und fair "
         "gehandelt.", "+nicht"),
        ("Es ist nicht schön, bunt, unkaputtbar.", "+nicht"),
        ("Helix 5.0 does include native vector indexes; similarity search still needs the "
         "separate helix-vec extension.", "-not"),
        # a number or date changed
        ("Die Messe findet am 15. September in Berlin statt.", "15 → 14"),
        ("The release was led by Maria Lopez and shipped to 1,500 customers in March.",
         "1,500 → 1,200"),
        # a name replaced by another (one that stands elsewhere on the page, too)
        ("Die Messe findet am 14. September in Bremen statt.", "Bremen → Berlin"),
        ("The release was led by Maria Garcia and shipped to 1,200 customers in March.",
         "Garcia → Lopez"),
        # the contradiction in other words: "includes" where the page says "does not include"
        ("Helix 5.0 includes native vector indexes; similarity search still needs the "
         "separate helix-vec extension.", "includes → does not include"),
    ],
)  # fmt: skip
def test_a_copied_sentence_with_one_meaning_changing_edit_is_altered(claim: str, edit: str) -> None:
    found = _near(claim, DE + " " + EN)
    assert found is not None and found.altered, found
    assert edit in found.differing_tokens
    # the page's own sentence stands beside the edit
    assert found.matched_text in DE + " " + EN
    assert found.matched_text in found.reason and edit in found.reason


@pytest.mark.parametrize(
    "claim",
    [
        # the sentence as the page has it (the verbatim rule settles it first in the guard)
        "Die Messe findet am 14. September in Berlin statt.",
        # shortened: words left out, none changed
        "Alle Kaffees in unserem Sortiment sind bio-zertifiziert.",
        "The release was led by Maria Lopez and shipped in March.",
        # a preface the page does not have (attribution)
        "Laut dem Hersteller sind alle Kaffees in unserem Sortiment bio-zertifiziert und fair "
        "gehandelt.",
        # a pronoun for the page's subject, an inflection
        "They need to be softened by cooking before they can be eaten.",
        "Oyster mushrooms needs to be softened by cooking before they can be eaten.",
        # a list in another order
        "The release was led by Maria Lopez and shipped in March to 1,200 customers.",
    ],
)
def test_a_copy_reworded_without_changing_what_it_says_is_not_altered(claim: str) -> None:
    found = _near(claim, DE + " " + EN)
    assert found is None or not found.altered, found


def test_a_content_word_replaced_is_not_shown_supported_nor_rejected() -> None:
    # "longer" for "separate": a synonym or not, nothing here can tell: the support step
    # decides, and may not call it supported (pairs.py)
    found = _near(
        "Helix 5.0 does not include native vector indexes; similarity search still needs the "
        "additional helix-vec extension.",
        EN,
    )
    assert found is not None and not found.altered
    assert "additional → separate" in found.differing_tokens


def test_a_sentence_copied_whole_behind_a_preface_is_no_edit_whatever_precedes_it() -> None:
    # the report's lead-in before a sentence copied as written; the page's previous sentence
    # ends in "noch nie": aligned to it, the claim's "Nie" read as a negation dropped
    page = (
        'Allein bei Airbus lägen über 8.000 Bestellungen vor, "so viel wie noch nie".\n'
        "Nie mehr die wichtigsten News aus Österreichs Industrie verpassen?"
    )
    claim = "In short: Nie mehr die wichtigsten News aus Österreichs Industrie verpassen."
    assert _near(claim, page) is None
    # an edit at the copy's edge is no preface: the page's sentence goes on past it
    found = _near("Die Messe findet am 14. September in Bremen statt.", DE)
    assert found is not None and found.altered


def test_a_sentence_the_page_does_not_hold_is_no_copy() -> None:
    assert _near("Gustave Eiffel built the tower in 1889 for the World's Fair.", DE + EN) is None
    assert _near("Short claim.", EN) is None  # too few words to tell from a common phrase


@pytest.mark.parametrize(
    ("claim", "edit"),
    [
        ("到2022年，预计约为2.7亿人。", "2.7 → 1.7"),
        ("国家债务在去年达到128万亿元。", "128 → 126"),
        ("该地区的出生率明显上升。", "-没有"),
    ],
)
def test_chinese_copies_with_a_number_or_a_negation_changed_are_altered(
    claim: str, edit: str
) -> None:
    found = _near(claim, ZH)
    assert found is not None and found.altered, found
    assert edit in found.differing_tokens
    assert found.matched_text in ZH


@pytest.mark.parametrize(
    "claim",
    ["到2022年，预计约为1.7亿人。", "国家债务去年达到126万亿元。", "该地区出生率没有明显增加。"],
)
def test_chinese_copies_and_rewordings_are_not_altered(claim: str) -> None:
    # the sentence itself, a character dropped, a word for another (增加 for 上升)
    found = _near(claim, ZH)
    assert found is None or not found.altered, found


def test_near_copy_search_is_linear_on_hostile_pages() -> None:
    claim = "Die Messe findet am 15. September in Berlin statt."
    for unit in ("Die Messe findet am ", "Berlin statt. 14. ", "a" * 50 + " ", "到2022年，约为"):
        assert_linear(lambda page: find_near_copy(claim, prepare_text(page)), unit)


# --------------------------------------------------------------------------------------------
# The whole guard, over real sockets
# --------------------------------------------------------------------------------------------


def _html(title: str, text: str) -> str:
    head = f"<html><head><title>{title}</title></head>"
    return f"{head}<body><article><p>{text}</p></article></body></html>"


def _guard(farm: Farm, entailment: EntailmentPolicy) -> Guard:
    fetch = FetchPolicy(allow_private_addresses=True, url_timeout=3.0, retries=0)
    return Guard(
        Policy(fetch=fetch, entailment=entailment), resolver=farm.resolver, now=lambda: NOW
    )


@pytest.mark.parametrize("backend", ["none", "word_overlap"])
async def test_the_guard_rejects_an_unquoted_altered_copy_with_the_page_sentence(
    farm: Farm, backend: str
) -> None:
    url = farm.add("kaffee.example.de", "/sortiment", body=_html("Sortiment", DE))
    answer = (
        "Alle Kaffees in unserem Sortiment sind nicht bio-zertifiziert und fair gehandelt [1]. "
        "Die Messe findet am 14. September in Berlin statt [1].\n\n"
        f"[1] {url}\n"
    )
    async with _guard(farm, EntailmentPolicy(backend=backend)) as guard:  # type: ignore[arg-type]
        verdict = await guard.check(answer, question="Sind die Kaffees bio-zertifiziert?")
    altered, faithful = verdict.claims
    # the German date did not split the second sentence into two claims
    assert len(verdict.claims) == 2
    (check,) = altered.checks
    assert check.status is CitationStatus.PASSAGE_ALTERED
    assert "+nicht" in check.reason
    page_sentence = "Alle Kaffees in unserem Sortiment sind bio-zertifiziert und fair gehandelt."
    assert page_sentence in check.reason
    assert altered.evidence == page_sentence  # the per-claim view shows the page's words
    assert not altered.supported and faithful.supported
    assert not verdict.passed


async def test_the_guard_rejects_a_chinese_copy_with_a_changed_number(farm: Farm) -> None:
    url = farm.add("stats.example.cn", "/report", body=_html("人口报告", ZH))
    answer = f"到2022年，预计约为2.7亿人[1]。该地区的出生率没有明显上升[1]。\n\n[1] {url}\n"
    async with _guard(farm, EntailmentPolicy(backend="none")) as guard:
        verdict = await guard.check(answer, question="到2022年人口是多少？")
    changed, verbatim = verdict.claims
    assert changed.checks[0].status is CitationStatus.PASSAGE_ALTERED
    assert "2.7 → 1.7" in changed.checks[0].reason
    assert verbatim.supported


# --------------------------------------------------------------------------------------------
# A contradiction in other words: a word negated on one side only
# --------------------------------------------------------------------------------------------

HELIX_PAGE = (
    "Helix 5.0 does not include native vector indexes; similarity search still needs the "
    "separate helix-vec extension."
)


def test_a_word_negated_on_one_side_only_is_found_though_both_sides_say_not() -> None:
    from citeguard.checks._consistency import check_consistency

    claim = (
        "Helix 5.0 adds native vector indexes, so similarity search no longer needs a "
        "separate extension"
    )
    found = check_consistency(claim, HELIX_PAGE)
    assert found.negation_scope and "negation differs" in found.describe()
    # the control: both sides negate the same words
    same = check_consistency("Helix 5.0 does not have native vector indexes.", HELIX_PAGE)
    assert not same.negation_scope


async def test_the_local_model_does_not_pass_a_contradiction_in_other_words() -> None:
    from citeguard.checks.entail import LocalEntailer

    e = LocalEntailer()
    (score,) = await e.score(
        [
            (
                "Helix 5.0 adds native vector indexes, so similarity search no longer needs a "
                "separate extension",
                f"Helix 5.0 release notes. {HELIX_PAGE} Other improvements include faster joins.",
            )
        ]
    )
    assert score.label != "supported", score.reason
    assert "negation differs" in score.reason
    await e.aclose()

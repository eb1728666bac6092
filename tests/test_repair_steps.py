"""The named steps of repair (citeguard.repair): the candidate budget of one search round,
when a claim check counts as failing, how a reference list entry is re-pointed, and how the
text edits are spliced. The whole repair is tested end to end in test_repair.py."""

from __future__ import annotations

from citeguard.models import CitationReport, CitationStatus, ClaimCheck, ClaimReport
from citeguard.parse import parse_answer
from citeguard.policy import Policy
from citeguard.repair.diagnose import _failed_status
from citeguard.repair.edits import _entry_target, _ref_citations, _RefPlan, _splice
from citeguard.repair.records import _Candidate, _Fate
from citeguard.repair.repairer import (
    MAX_FETCHED_PER_PAIR,
    MAX_NEW_FETCHES,
    MAX_NEW_PER_PAIR,
    _Search,
)


def _cands(prefix: str, n: int, *, fetched: bool) -> list[_Candidate]:
    urls = [f"https://{prefix}{i}.example/" for i in range(n)]
    return [_Candidate(u, u, fetched=fetched) for u in urls]


# -------------------------------------------------------------------- _Search: the budget


def test_the_first_round_tries_pages_already_fetched_then_a_few_new_ones() -> None:
    old = _cands("old", MAX_FETCHED_PER_PAIR + 2, fetched=True)
    new = _cands("new", MAX_NEW_PER_PAIR + 2, fetched=False)
    search = _Search({0: old + new})
    picked = search.pick(0)[0]
    assert picked == old[:MAX_FETCHED_PER_PAIR] + new[:MAX_NEW_PER_PAIR]
    assert search.requested == {c.url for c in new[:MAX_NEW_PER_PAIR]}
    assert search.new_budget == MAX_NEW_FETCHES - MAX_NEW_PER_PAIR


def test_later_rounds_try_only_new_results_not_tried_yet() -> None:
    old = _cands("old", 2, fetched=True)
    new = _cands("new", MAX_NEW_PER_PAIR + 2, fetched=False)
    search = _Search({0: old + new})
    first = search.pick(0)[0]
    search.tried[0].update(c.url for c in first)
    # the pages of the first round were fetched: the next round takes the next results
    search.pages.update({c.url: object() for c in first if not c.fetched})  # type: ignore[misc]
    assert search.pick(1)[0] == new[MAX_NEW_PER_PAIR:]


def test_new_fetches_are_shared_by_every_pair_of_the_repair() -> None:
    search = _Search({k: _cands(f"p{k}-", MAX_NEW_PER_PAIR, fetched=False) for k in range(4)})
    per_pair = search.pick(0)
    assert sum(len(cs) for cs in per_pair.values()) == MAX_NEW_FETCHES
    assert search.new_budget == 0
    assert len(per_pair) == -(-MAX_NEW_FETCHES // MAX_NEW_PER_PAIR)


def test_a_page_requested_and_refused_is_not_tried_again_by_another_pair() -> None:
    shared = _cands("shared", 1, fetched=False)
    search = _Search({0: list(shared), 1: list(shared)})
    assert search.pick_for(0, shared, 0) == shared
    # requested by pair 0, and not among the pages (refused or broken): pair 1 skips it
    assert search.pick_for(1, shared, 0) == []


def test_a_pair_with_support_picks_nothing_more() -> None:
    search = _Search({0: _cands("a", 2, fetched=True)})
    search.found[0] = [object()]  # type: ignore[list-item]
    assert search.pick(0) == {}


# -------------------------------------------------------------------- _failed_status


def _check(status: CitationStatus) -> ClaimCheck:
    return ClaimCheck(claim_index=0, url="https://a.example/", status=status, reason=status.value)


def _report(*, supported: bool | None) -> ClaimReport:
    return ClaimReport(index=0, text="A claim.", supported=supported)


def _url_report(status: CitationStatus) -> CitationReport:
    return CitationReport(
        url="https://a.example/",
        normalized_url="https://a.example/",
        status=status,
        reason="not among the run's search results",
    )


def test_a_passing_check_fails_only_when_its_url_was_not_retrieved() -> None:
    policy = Policy()
    ok = _check(CitationStatus.OK)
    assert _failed_status(_report(supported=True), ok, None, policy) is None
    passing = _url_report(CitationStatus.OK)
    assert _failed_status(_report(supported=True), ok, passing, policy) is None
    missing = _url_report(CitationStatus.NOT_RETRIEVED)
    assert _failed_status(_report(supported=True), ok, missing, policy) == (
        CitationStatus.NOT_RETRIEVED,
        "not among the run's search results",
    )


def test_not_entailed_fails_only_an_unsupported_claim_under_fail_unsupported() -> None:
    check = _check(CitationStatus.NOT_ENTAILED)
    strict = Policy(entailment={"fail_unsupported": True})
    lenient = Policy(entailment={"fail_unsupported": False})
    assert _failed_status(_report(supported=True), check, None, strict) is None
    assert _failed_status(_report(supported=False), check, None, lenient) is None
    assert _failed_status(_report(supported=False), check, None, strict) == (
        CitationStatus.NOT_ENTAILED,
        "not_entailed",
    )


def test_any_other_failing_check_keeps_its_own_status_and_reason() -> None:
    check = _check(CitationStatus.NOT_FOUND)
    assert _failed_status(_report(supported=True), check, None, Policy()) == (
        CitationStatus.NOT_FOUND,
        "not_found",
    )


# -------------------------------------------------------------------- the reference list


def _to(url: str) -> _Fate:
    return _Fate("to", url, url, "")


def test_an_entry_goes_to_the_page_most_of_its_markers_go_to() -> None:
    fates = [_to("https://b.example/"), _to("https://c.example/"), _to("https://c.example/")]
    target = _entry_target("1", fates, {})
    assert target is not None and target.url == "https://c.example/"


def test_an_entry_whose_markers_all_go_is_removed() -> None:
    assert _entry_target("1", [_Fate("remove"), _Fate("remove")], {}) is None


def test_an_entry_is_removed_when_a_staying_entry_of_its_style_lists_the_page() -> None:
    fates = [_to("https://b.example/")]
    assert _entry_target("1", fates, {"2": "https://b.example/"}) is None
    # a named reference is another style: the numbered entry is re-pointed instead
    target = _entry_target("1", fates, {"lib": "https://b.example/"})
    assert target is not None and target.url == "https://b.example/"


def test_a_marker_points_at_an_entry_listing_the_page_or_at_a_new_one() -> None:
    plan = _RefPlan(
        refs={"1": "https://a.example/", "2": "https://b.example/"},
        final={"1": "https://a.example/", "2": "https://b.example/"},
        taken={"1", "2"},
    )
    assert plan.label_for("1", _to("https://b.example/")) == "2"
    assert plan.label_for("1", _to("https://c.example/")) == "3"
    assert plan.final["3"] == "https://c.example/"
    assert [(t, n) for t, n, _f in plan.added] == [("1", "3")]
    # the page now listed under 3: a second marker re-uses it, no fourth entry
    assert plan.label_for("2", _to("https://c.example/")) == "3"
    assert len(plan.added) == 1


def test_reference_markers_are_gathered_by_label() -> None:
    answer = parse_answer(
        "Alpha is first [1]. Beta is second [2]. Gamma is third [1].\n\n"
        "[1] https://a.example/\n[2] https://b.example/"
    )
    by_label = _ref_citations(answer)
    assert sorted(by_label) == ["1", "2"]
    assert [c.claim_index for c in by_label["1"]] == [0, 2]


# -------------------------------------------------------------------- _splice


def test_edits_are_made_from_the_end_so_offsets_stay_true() -> None:
    assert _splice("abcdef", [(4, 5, "XY"), (0, 1, ""), (2, 2, "+")]) == "b+cdXYf"


def test_overlapping_edits_make_no_text() -> None:
    assert _splice("abcdef", [(0, 3, "x"), (2, 4, "y")]) is None

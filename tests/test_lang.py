"""Words, sentences and numbers in the scripts and languages reports are written in."""

from __future__ import annotations

import pytest
from linear_time import assert_linear

from citeguard.lang import language_of, segment
from citeguard.numbers import read_numbers
from citeguard.parse import parse_answer
from citeguard.text import entailment_tokens, page_sentence_spans, sentence_spans


def test_chinese_is_segmented_into_words_and_numbers() -> None:
    words = segment("到2022年，预计约为1.7亿人。")
    assert "预计" in words and "2022" in words and "1.7" in words
    assert "，" not in words and "。" not in words
    # the tokens every lexical check reads: Chinese words, not one run of 14 characters
    assert entailment_tokens("中国的人口增长了")[:3] == ["中国", "的", "人口"]


def test_japanese_kana_and_thai_become_bigrams_and_latin_words_stay_whole() -> None:
    assert segment("テキスト") == ["テキ", "キス", "スト"]
    assert segment("für Müller, don’t") == ["für", "Müller", "don’t"]
    assert entailment_tokens("Die Größe für Müller") == ["die", "größe", "für", "müller"]


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Alle Kaffees in unserem Sortiment sind bio-zertifiziert.", "de"),
        ("The release was led by Maria Lopez and shipped in March.", "en"),
        ("到2022年，预计约为1.7亿人。GDP 增长", "zh"),
        ("日本語のテキストです。", "ja"),
        ("한국어 문장입니다", "ko"),
        ("It rose.", "und"),  # too short to tell
    ],
)
def test_the_language_of_a_text(text: str, lang: str) -> None:
    assert language_of(text) == lang


@pytest.mark.parametrize(
    ("text", "value", "unit"),
    [
        ("到2022年，预计约为1.7亿人。", 1.7e8, ""),
        ("国家债务达126万亿元", 1.26e14, "¥"),
        ("共有三千人", 3000.0, ""),
        ("增长了百分之五", 5.0, "%"),
        ("增长了百分之十二点五", 12.5, "%"),
        ("增长５．２％", 5.2, "%"),
        ("两亿三千万", 2.3e8, ""),
        ("一百二十六万亿", 1.26e14, ""),
    ],
)
def test_numbers_against_cjk_characters_are_read_as_values(
    text: str, value: float, unit: str
) -> None:
    found = [q for q in read_numbers(text) if not q.is_year]
    assert len(found) == 1, found
    assert found[0].readings[0].value == pytest.approx(value)
    assert found[0].unit == unit


def test_a_year_against_cjk_characters_is_a_year_and_numeral_words_are_not_numbers() -> None:
    (year, _) = read_numbers("到2022年，预计约为1.7亿人。")
    assert year.is_year and year.readings[0].value == 2022
    assert list(read_numbers("千万不要这样，万一出错")) == []  # "by all means", "in case"


@pytest.mark.parametrize(
    "text",
    [
        "Die Messe findet am 14. September in Berlin statt.",
        "Danach folgt die 5. Stufe des Plans.",
        "Es gibt z. B. das Modell Nr. 3 und u. a. Berlin.",
        "Dr. Weber sprach im 19. Jahrhundert.",
    ],
)
def test_german_ordinals_and_abbreviations_end_no_sentence(text: str) -> None:
    assert sentence_spans(text) == [(0, len(text))]
    assert page_sentence_spans(text) == [(0, len(text))]
    (claim,) = parse_answer(f"{text} [1]\n\n[1] https://example.de/a\n").claims
    assert claim.text.startswith(text[:-1])


def test_a_number_that_ends_an_english_sentence_still_ends_it() -> None:
    text = "It grew by 15. The next year it fell."
    assert len(sentence_spans(text)) == 2
    assert len(parse_answer(f"{text} [1]\n\n[1] https://example.com/a\n").claims) == 2


def test_chinese_sentences_end_at_their_full_stops() -> None:
    text = "到2022年，预计约为1.7亿人。另一句话！第三句？"
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "到2022年，预计约为1.7亿人。",
        "另一句话！",
        "第三句？",
    ]
    assert page_sentence_spans(text) == sentence_spans(text)


@pytest.mark.parametrize("unit", ["到2022年，约为1.7亿人。", "am 14. ", "z. B. ", "テキスト"])
def test_segmenting_and_reading_numbers_are_linear(unit: str) -> None:
    assert_linear(segment, unit, base=2_000)
    assert_linear(lambda t: list(read_numbers(t)), unit, base=2_000)
    assert_linear(sentence_spans, unit, base=2_000)

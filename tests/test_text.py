"""citeguard.text: normalisation, word lists, tokenizers and the three sentence splitters."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from linear_time import assert_linear

from citeguard.text import (
    ANSWER_TERMINATOR_RE,
    ENTAILMENT_STOPWORDS,
    PARAPHRASE_STOPWORDS,
    PASSAGE_TOKEN_RE,
    QUERY_STOPWORDS,
    QUERY_TOKEN_RE,
    bounded_sentence_spans,
    entailment_tokens,
    fold_whitespace,
    has_word,
    is_answer_sentence_end,
    normalise,
    normalise_cased,
    page_sentence_spans,
    sentence_spans,
    strip_diacritics,
    trim_span,
    word_set,
)


def pieces(text: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[a:b] for a, b in spans]


# ---- normalisation ---------------------------------------------------------------------------


def test_normalise_folds_typography_unicode_and_case() -> None:
    text = "Don’t  “Stop”—now… ﬁne\u00adtuned ＡＢ"
    assert normalise(text) == 'don\'t "stop"-now... finetuned ab'
    assert normalise_cased(text) == 'Don\'t "Stop"-now... finetuned AB'


def test_normalise_composes_combining_marks() -> None:
    # "e" + COMBINING ACUTE is one character after NFKC, the same as a precomposed "é"
    assert normalise("Cafe\u0301") == normalise("Café") == "café"


def test_strip_diacritics() -> None:
    assert strip_diacritics("Müller") == "Muller"
    assert strip_diacritics("żaden") == "zaden"
    assert strip_diacritics("plain") == "plain"


def test_whitespace_helpers() -> None:
    assert fold_whitespace(" a\u00a0 b\n\tc\u2003") == "a b c"
    assert fold_whitespace(" \n ") == ""
    assert trim_span("  ab c \n", 0, 8) == (2, 6)
    assert trim_span("   ", 0, 3)[0] == trim_span("   ", 0, 3)[1]
    assert word_set(" a b\n a ") == frozenset({"a", "b"})
    assert has_word("— 3 —") and has_word("é") and not has_word("— … —")


# ---- word lists and tokens -------------------------------------------------------------------


def test_stopword_lists_serve_different_checks() -> None:
    # hedges carry no evidence for entailment but are not query filler
    assert "however" in ENTAILMENT_STOPWORDS and "however" not in QUERY_STOPWORDS
    # request words and search operators are query filler only
    assert {"tell", "site", "or"} <= QUERY_STOPWORDS and "tell" not in ENTAILMENT_STOPWORDS
    # page paraphrase search knows other languages' function words
    assert {"und", "dans", "nie"} <= PARAPHRASE_STOPWORDS
    assert "und" not in ENTAILMENT_STOPWORDS
    # the query list is lower-cased: "OR" as written in the source list becomes "or"
    assert "OR" not in QUERY_STOPWORDS
    # content words are in none of them
    for words in (ENTAILMENT_STOPWORDS, PARAPHRASE_STOPWORDS, QUERY_STOPWORDS):
        assert "emissions" not in words


def test_entailment_tokens_keep_negation_of_contractions() -> None:
    assert entailment_tokens("Don’t stop; it isn't Bob's") == [
        "do",
        "nt",
        "stop",
        "it",
        "is",
        "nt",
        "bob",
    ]


def _entailment_tokens_one_by_one(text: str) -> list[str]:
    # the definition: each word token (letters and digits of any script, an apostrophe and
    # letters after it) lowered on its own, contractions split
    out: list[str] = []
    for m in re.finditer(r"[^\W_]+(?:['’][^\W\d_]+)?", text):
        word = m.group(0).lower().replace("’", "'")
        if word.endswith("n't"):
            out.extend((word[:-3], "nt"))
        elif "'" in word:
            out.append(word.split("'", 1)[0])
        else:
            out.append(word)
    return out


@given(st.text(alphabet=st.sampled_from(list("aZk09 '’-.\nİKßΣ\u212a\u0130x")), max_size=60))
@settings(max_examples=400, deadline=None)
def test_entailment_tokens_equal_lowering_each_word(text: str) -> None:
    # lowering the whole text first would differ: "İ" and the Kelvin sign lower to ASCII
    assert entailment_tokens(text) == _entailment_tokens_one_by_one(text)


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("reductions", "reduct"),  # "s", then the 6-character prefix
        ("nationalization", "nation"),  # "ization" -> "ize"
        ("relational", "relate"),  # "ational" -> "ate"
        ("studies", "study"),
        ("applied", "apply"),
        ("effectiveness", "effect"),
        ("ements", "ement"),  # too short for "ements" or "ments": only "s" leaves 3 letters
        ("mess", "mess"),  # four letters: as is
        ("2024", "2024"),
        ("x" * 400, "xxxxxx"),
    ],
)
def test_stem_follows_the_suffix_table(word: str, expected: str) -> None:
    from citeguard.checks._consistency import stem

    assert stem(word) == expected
    assert stem(word) == expected  # the second call is served by the memo


def test_passage_and_query_tokenizers() -> None:
    assert PASSAGE_TOKEN_RE.findall("rose 4.2 percent, 1,000 people on 48/22 isn't") == [
        "rose",
        "4.2",
        "percent",
        "1,000",
        "people",
        "on",
        "48/22",
        "isn't",
    ]
    assert QUERY_TOKEN_RE.findall("C++ vs C# at AT&T v2.1 e-bike.") == [
        "C++",
        "vs",
        "C#",
        "at",
        "AT&T",
        "v2.1",
        "e-bike",
    ]


# ---- sentences -------------------------------------------------------------------------------


def test_evidence_sentences_need_a_capital_after_the_stop() -> None:
    text = "It rose 3.5 km. Then e.g. the end came. Next line\n  new line "
    assert pieces(text, sentence_spans(text)) == [
        "It rose 3.5 km.",
        "Then e.g. the end came.",
        "Next line",
        "new line",
    ]
    assert sentence_spans(" \n ") == []


def test_page_sentences_split_after_any_stop() -> None:
    text = "it rose. then fell! ok… next\n\nlast"
    assert pieces(text, page_sentence_spans(text)) == [
        "it rose.",
        "then fell!",
        "ok…",
        "next",
        "last",
    ]


def test_page_sentences_are_bounded_and_cover_the_text() -> None:
    text = " ".join(f"word{i}" for i in range(2000))  # ~17 kB, no punctuation
    spans = page_sentence_spans(text, 600)
    assert len(spans) > 20
    assert all(0 < b - a <= 600 for a, b in spans)
    assert "".join(pieces(text, spans)).replace(" ", "") == text.replace(" ", "")
    # a cut falls on a space where there is one: no word is split
    assert all(text[b : b + 1] in ("", " ") for _, b in spans)


def test_bounded_sentences_cut_long_ones_only() -> None:
    long = "Alpha " + "beta " * 60 + "end."
    text = f"Short one. {long} Tail."
    spans = bounded_sentence_spans(text, 80)
    got = pieces(text, spans)
    assert got[0] == "Short one." and got[-1] == "Tail."
    assert all(len(p) <= 80 for p in got)
    assert all(not p[0].isspace() and not p[-1].isspace() for p in got)
    assert " ".join(got[1:-1]).split() == long.split()


@pytest.mark.parametrize(
    ("text", "ends"),
    [
        ("Prices rose. Jobs grew.", True),
        ("Ask Dr. Smith now.", False),
        ("Made by J. Smith today.", False),
        ("In the U.S. Army today.", False),
        ("Use e.g. the first.", False),
        ("It rose 3%.[1] Then it fell.", True),
    ],
)
def test_answer_sentence_end(text: str, ends: bool) -> None:
    m = ANSWER_TERMINATOR_RE.search(text)
    assert m is not None
    glued = {text.index("[")} if "[" in text else set()
    assert is_answer_sentence_end(text, m.start(), m.end(), len(text), glued) is ends


def test_answer_marker_glued_to_stop_needs_to_be_a_citation() -> None:
    text = "It rose 3%.[x] Then it fell."
    m = ANSWER_TERMINATOR_RE.search(text)
    assert m is not None
    assert not is_answer_sentence_end(text, m.start(), m.end(), len(text))


def test_answer_terminator_takes_a_run_of_stops_whole() -> None:
    text = "Really?! Yes... “Sure.” Done"
    assert [m.group() for m in ANSWER_TERMINATOR_RE.finditer(text)] == ["?!", "...", ".”"]
    assert ANSWER_TERMINATOR_RE.search("a" + "." * 50 + "b") is None


# ---- linear time on hostile input ------------------------------------------------------------


def _terminators(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in ANSWER_TERMINATOR_RE.finditer(text)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("fn", "unit"),
    [
        (normalise, "a\u0301  “x”— ﬁ\u00ad"),
        (sentence_spans, ". ((((((((("),
        (sentence_spans, '."""""""" '),
        (page_sentence_spans, "x" * 50 + " "),
        (lambda t: page_sentence_spans(t), "." * 40 + '"' * 40),
        (lambda t: bounded_sentence_spans(t, 200), "abcdefghij"),
        (entailment_tokens, "don't'x "),
        (PASSAGE_TOKEN_RE.findall, "1.1.1.1,1/"),
        (QUERY_TOKEN_RE.findall, "a" + "-" * 30),
        (_terminators, "a" + "." * 99),
        (_terminators, "." * 50 + "”" * 50),
    ],
    ids=lambda v: repr(v)[:20] if isinstance(v, str) else getattr(v, "__name__", "fn"),
)
def test_linear_on_hostile_input(fn: Callable[[str], object], unit: str) -> None:
    # 10k, 100k and 1M characters: CPU time ~100x over the range when linear, ~10,000x when
    # quadratic (linear_time.assert_linear allows 1,000x)
    assert_linear(fn, unit)

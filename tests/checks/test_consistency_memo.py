"""The consistency facts of a text are read once: the local entailer reads each evidence sentence
several times a pair (windows, their facts, the ranked units, the scorer's own read), and every
claim part reads the same evidence again."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

import citeguard.checks._consistency as consistency
from citeguard.checks._consistency import check_consistency, content_words, numbers

_fresh = itertools.count()


def _counting_tokens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Patch the tokenizer the consistency module reads with one that logs each text."""
    seen: list[str] = []
    real: Callable[[str], list[str]] = consistency.tokens

    def counting(text: str) -> list[str]:
        seen.append(text)
        return real(text)

    monkeypatch.setattr(consistency, "tokens", counting)
    return seen


def test_a_sentence_read_again_is_not_tokenised_again(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _counting_tokens(monkeypatch)
    sentence = f"The terminal handled {next(_fresh)} million containers in 2023."
    first = content_words(sentence)
    once = len(seen)
    assert once >= 1
    assert content_words(sentence) == first
    assert len(seen) == once


def test_a_pair_read_again_costs_no_tokenisation(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _counting_tokens(monkeypatch)
    k = next(_fresh)
    claim = f"Port {k} opened in 2019 and handled 2.1 million containers."
    evidence = f"Port {k} opened in 2019. Last year it handled 2.1 million containers."
    first = check_consistency(claim, evidence)
    once = len(seen)
    again = check_consistency(claim, evidence)
    assert again == first
    assert len(seen) == once


def test_a_memoised_read_is_a_fresh_list_each_time() -> None:
    sentence = f"Inflation was {next(_fresh)}% in 1990, about forty percent."
    words = content_words(sentence)
    words.append("poison")
    assert "poison" not in content_words(sentence)
    found = numbers(sentence)
    found.clear()
    assert numbers(sentence)


def test_a_long_text_is_read_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only short texts (sentences, windows) are kept: a page-long text is never held."""
    seen = _counting_tokens(monkeypatch)
    page = " ".join(f"Sentence {i} of a long page {next(_fresh)}." for i in range(400))
    assert len(page) > consistency._MEMO_CHARS
    content_words(page)
    once = len(seen)
    content_words(page)
    assert len(seen) == 2 * once

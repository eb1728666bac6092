"""A page's lexicon, built once and read by every claim judged on the whole page.

The support scorer reads a claim against its evidence: the units (sentences, lines) richest in
the claim's words, the claim words found anywhere in the evidence, the numbers, names and
negation of the best-aligned stretch. On a whole page (5-200 kB) doing that from the raw text
costs ~200 ms a claim (every unit tokenised and stemmed, every number read, per claim). A
:class:`PageLexicon` does the page's half once: its units, each unit's content words, the page's
word and word-pair sets, and a posting list from word to units. Per claim, only the units
holding its words are ranked, and the consistency facts are read on :meth:`reduced` — the units
that can matter to it (those sharing most words with it, and every one holding one of its
numbers or names), a few kilobytes whatever the page's size.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from citeguard.checks._consistency import content_words, sentence_spans

__all__ = ["LEXICON_MIN_CHARS", "UNIT_CHARS", "PageLexicon", "units"]

#: Evidence this long is a whole page, not a passage: it is read through a shared lexicon and
#: its P(supported) with the whole-page bands.
LEXICON_MIN_CHARS = 8_000
# Longest evidence unit embedded, in characters: a longer sentence is cut at whitespace.
UNIT_CHARS = 300
#: Units of a page the lexicon reads (a 200 kB page has ~2,000): past them the page is cut.
MAX_UNITS = 20_000
#: Units in a claim's :meth:`PageLexicon.reduced` evidence: the best by shared words, then the
#: ones holding its numbers and names, up to the cap.
_REDUCED_BEST = 24
_REDUCED_MAX = 64
_DIGITS = re.compile(r"\d")


def units(evidence: str) -> list[str]:
    """Evidence sentences (and lines), each at most :data:`UNIT_CHARS` characters."""
    out: list[str] = []
    for start, end in sentence_spans(evidence):
        while end - start > UNIT_CHARS:
            cut = evidence.rfind(" ", start + 1, start + UNIT_CHARS)
            if cut <= start:
                cut = start + UNIT_CHARS
            out.append(evidence[start:cut])
            start = cut
            while start < end and evidence[start].isspace():
                start += 1
        if end > start:
            out.append(evidence[start:end])
    return out


def bigrams(words: Sequence[str]) -> set[tuple[str, str]]:
    return set(itertools.pairwise(words))


@dataclass(frozen=True, slots=True, eq=False)
class PageLexicon:
    """One evidence text's units and words (see the module docstring)."""

    units: tuple[str, ...]
    unit_words: tuple[tuple[str, ...], ...]
    words: frozenset[str]
    postings: dict[str, tuple[int, ...]]

    @classmethod
    def build(cls, evidence: str) -> PageLexicon:
        all_units = units(evidence)[:MAX_UNITS]
        unit_words = tuple(tuple(content_words(u)) for u in all_units)
        postings: dict[str, list[int]] = {}
        for i, uw in enumerate(unit_words):
            for w in set(uw):
                postings.setdefault(w, []).append(i)
        return cls(
            units=tuple(all_units),
            unit_words=unit_words,
            words=frozenset(postings),
            postings={w: tuple(ids) for w, ids in postings.items()},
        )

    def shared_bigrams(self, claim_bigrams: set[tuple[str, str]]) -> set[tuple[str, str]]:
        """The word pairs of ``claim_bigrams`` that stand, adjacent, in some unit (read in the
        units holding both words only)."""
        found: set[tuple[str, str]] = set()
        for a, b in claim_bigrams:
            first, second = self.postings.get(a), self.postings.get(b)
            if not first or not second:
                continue
            both = set(first).intersection(second) if len(first) > 1 else first
            if any((a, b) in bigrams(self.unit_words[i]) for i in both):
                found.add((a, b))
        return found

    def candidates(self, words: Iterable[str]) -> list[int]:
        """The units holding any of ``words``, in page order."""
        hits: set[int] = set()
        for w in set(words):
            hits.update(self.postings.get(w, ()))
        return sorted(hits)

    def ranked(self, words: set[str], claim_bigrams: set[tuple[str, str]]) -> list[int]:
        """The units holding any of ``words``, most shared words first (word pairs break ties,
        then page order); unit 0 alone when none does."""
        hits = self.candidates(words)
        if not hits:
            return [0] if self.units else []

        def key(i: int) -> tuple[float, int]:
            uw = self.unit_words[i]
            return (-(len(words.intersection(uw)) + 0.5 * len(claim_bigrams & bigrams(uw))), i)

        return sorted(hits, key=key)

    def reduced(self, claim: str, claim_words: Sequence[str]) -> str:
        """The units that can matter to ``claim``, in page order, one a line: the
        :data:`_REDUCED_BEST` sharing most of its words, then those holding one of its numbers
        or names (at most :data:`_REDUCED_MAX` in all)."""
        words = set(claim_words)
        best = self.ranked(words, bigrams(claim_words))[:_REDUCED_BEST]
        chosen = dict.fromkeys(best)
        # numbers and capitalised words of the claim: a unit holding one may settle it
        keys = {w for w in words if _DIGITS.search(w)}
        keys.update(w for w in content_words(" ".join(re.findall(r"\b[A-Z]\w+", claim))))
        for i in self.candidates(keys):
            if len(chosen) >= _REDUCED_MAX:
                break
            chosen.setdefault(i, None)
        return "\n".join(self.units[i] for i in sorted(chosen))

"""A claim's evidence, found on the whole page: the sentences that can matter to it, wherever
they stand.

A long page (a paper, a report, a news story of 5-200 kB) states what a claim rests on in
several places: the figure in a table, the year in a heading, the name two paragraphs later.
One window around the best passage match misses most of it, and handing the model the whole
page costs a pass over every sentence per claim. This module reads the page's sentence index
(:mod:`citeguard.checks.passage`: sentences, their stemmed content terms and a posting list,
built once per page — in the extraction process for pages up to 50 kB — and shared by every
claim citing it) and picks, per claim: the sentences sharing the most IDF-weighted claim terms,
then the first sentence holding each claim term the chosen ones still lack, then every sentence
holding one of the claim's numbers — in page order, after the page's metadata
(:func:`~citeguard.checks.page_meta.page_head`). Bounded by the index's own candidate caps and
:data:`MAX_SENTENCES`; pure Python, no model.

A claim judged on a passage (a window around its quote or its closest sentences) gets, after
the window, what the page states of the claim's numbers the window lacks
(:func:`with_stated_numbers`): a paper's year in its reference entry, the page's own date. The
rule that a number the evidence never states is missing reads the evidence, and a number the
page states about the claim's subject is not missing.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence

from citeguard.checks._consistency import NumberMention, content_words, numbers, stated_in
from citeguard.checks.passage import (
    PreparedText,
    _content_terms,
    _paraphrase_candidates,
)

__all__ = ["MAX_SENTENCES", "claim_evidence", "with_stated_numbers"]

#: Sentences of the page in one claim's evidence, at most (those sharing most of its words
#: first; then the ones holding a word or number it still lacks).
MAX_SENTENCES = 64
_BEST = 24
#: Characters of one evidence sentence kept (a table row or a run-on line is cut).
MAX_SENTENCE_CHARS = 600


def claim_evidence(claim: str, page: PreparedText, head: str = "") -> str:
    """The sentences of ``page`` that can matter to ``claim``, one a line in page order, after
    ``head`` (the page's metadata). ``head`` alone when none shares a content term."""
    terms = list(dict.fromkeys(_content_terms(claim)))
    if not terms or not page.text.strip():
        return head
    index = page.sentences()
    n = len(index.spans)
    df = index.df
    weights = {t: math.log(1.0 + (n + 1) / (df.get(t, 0) + 0.5)) for t in terms}
    claim_set = frozenset(terms)
    held: dict[int, frozenset[str]] = {}
    for i in _paraphrase_candidates(index, terms, weights):
        got = claim_set.intersection(index.terms[i])
        if got:
            held[i] = got
    if not held:
        return head
    chosen = set(heapq.nlargest(_BEST, held, key=lambda i: (sum(weights[t] for t in held[i]), -i)))
    covered: set[str] = set().union(*(held[i] for i in chosen))
    numbers = {t for t in terms if t[:1].isdigit()}
    for i in sorted(held):  # page order: the first sentence holding what is still missing
        if len(chosen) >= MAX_SENTENCES:
            break
        if i in chosen:
            continue
        if held[i] - covered or held[i] & numbers:
            chosen.add(i)
            covered |= held[i]
    text = page.text
    lines = [
        text[s : min(e, s + MAX_SENTENCE_CHARS)]
        for s, e in (index.spans[i] for i in sorted(chosen))
    ]
    return "\n".join([head, *lines] if head else lines)


#: Lines a passage's evidence gains for the claim's numbers it lacks, at most; the numbers of a
#: claim looked for, and the places on the page each is looked at, at most.
MAX_STATED = 4
_MAX_NUMBERS = 8
_MAX_PLACES = 32
#: Evidence this long is the page itself (no passage was placed): nothing is added to it.
_MAX_WINDOW_EVIDENCE = 16_000


def with_stated_numbers(claim: str, evidence: str, page: PreparedText, head: str = "") -> str:
    """``evidence`` (a passage of ``page``) and, after it, where the page states a number of
    ``claim`` the passage does not: ``head`` (the page's metadata: its date) when it states
    one, and for each other the first sentence stating it that is about the claim's subject (it,
    or a sentence beside it, shares a word with the claim), with that neighbour when that is
    what names the subject."""
    if len(evidence) > _MAX_WINDOW_EVIDENCE:
        return evidence
    lacking = [
        n
        for n in numbers(claim)[:_MAX_NUMBERS]
        if not n.text.isalpha() and not stated_in(n, evidence)
    ]
    if not lacking:
        return evidence
    added: list[str] = []
    if head and any(stated_in(n, head) for n in lacking):
        added.append(head)
        lacking = [n for n in lacking if not stated_in(n, head)]
    words = {w for w in content_words(claim) if not any(ch.isdigit() for ch in w)}
    text = page.text
    spans = page.sentences().spans if lacking and words else []
    starts = [s for s, _ in spans]
    for n in lacking:
        if len(added) >= MAX_STATED:
            break
        line = _stating(n, text, spans, starts, words)
        if line and line not in added:
            added.append(line)
    return "\n".join([evidence, *added]) if added else evidence


def _stating(
    n: NumberMention,
    text: str,
    spans: Sequence[tuple[int, int]],
    starts: list[int],
    words: set[str],
) -> str:
    """The first sentence of ``text`` stating the number ``n`` about the claim (``words``: its
    content words): it, or it with the sentence before or after it when only that one shares a
    word (a reference entry cut at its year: "Monroe, B." "(2008)." "Fightin' Words."); "" if
    none."""
    at, places = 0, 0
    while places < _MAX_PLACES:
        at = text.find(n.text, at)
        k = bisect.bisect_right(starts, at) - 1 if at >= 0 else -1
        if k < 0 or spans[k][1] <= at:
            return ""  # not found, or not inside an indexed sentence
        places += 1
        sentence = _sentence(text, spans[k])
        if stated_in(n, sentence):
            if words & set(content_words(sentence)):
                return sentence
            for m in (k - 1, k + 1):
                if 0 <= m < len(spans):
                    beside = _sentence(text, spans[m])
                    if words & set(content_words(beside)):
                        return f"{beside} {sentence}" if m < k else f"{sentence} {beside}"
        at = spans[k][1]
    return ""


def _sentence(text: str, span: tuple[int, int]) -> str:
    s, e = span
    return text[s : min(e, s + MAX_SENTENCE_CHARS)].strip()

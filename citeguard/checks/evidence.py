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
"""

from __future__ import annotations

import heapq
import math

from citeguard.checks.passage import (
    PreparedText,
    _content_terms,
    _paraphrase_candidates,
)

__all__ = ["MAX_SENTENCES", "claim_evidence"]

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

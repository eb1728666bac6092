"""Quoted passages in the text and how they bind to a claim's citations."""

from __future__ import annotations

import bisect
import re

from citeguard.parse.base import _Hit, _in_spans, _PendingCitation
from citeguard.text import finditer_lines, fold_whitespace, has_word

# Quotes. Each body excludes its own opening character, so unclosed quotes cost a bounded scan.
_QUOTE_PATTERNS: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"\"([^\"\n]+)\""), 1),
    (re.compile(r"“([^“”\n]+)”"), 1),
    (re.compile(r"„([^„“”\n]+)[“”]"), 1),
    (re.compile(r"«([^«»\n]+)»"), 1),
    (re.compile(r"「([^「」\n]+)」"), 1),
    (re.compile(r"『([^『』\n]+)』"), 1),
    # ’ followed by a letter is an apostrophe inside the quote, not its end.
    (re.compile(r"(?<!\w)‘((?:[^‘’\n]|’(?=\w)){1,2000})’(?!\w)"), 3),
)


def _inside_quotes(hits: list[_Hit], quotes: list[tuple[int, int, str]]) -> set[int]:
    """``id`` of each hit that starts inside a quoted span (``quotes`` are disjoint, in order).

    A quote made of nothing but the URL (``"https://…"``) is no quote (its text is masked), so
    that URL stays a citation."""
    if not hits or not quotes:
        return set()
    starts = [q[0] for q in quotes]
    spans = [(q[0], q[1]) for q in quotes]
    return {id(h) for h in hits if _in_spans(h.start, starts, spans)}


def _find_quotes(masked: str) -> list[tuple[int, int, str]]:
    """(start, end, quote text) of the outermost quoted spans, in order."""
    found: list[tuple[int, int, str]] = []
    for pattern, min_words in _QUOTE_PATTERNS:
        for m in finditer_lines(pattern, masked):  # no quote pattern spans a newline
            if m.start() > 0 and masked[m.start() - 1] == "=":
                continue  # an attribute value (div[role="dialog"]), not a quotation
            body = fold_whitespace(m.group(1))
            if not has_word(body) or len(body.split()) < min_words:
                continue
            found.append((m.start(), m.end(), body))
    found.sort(key=lambda q: (q[0], -q[1]))
    outer: list[tuple[int, int, str]] = []
    reach = -1
    for q in found:
        if q[0] < reach:
            continue  # nested in (or overlapping) the previous kept quote
        outer.append(q)
        reach = q[1]
    return outer


def _bind_quotes(quotes: list[tuple[int, int, str]], cits: list[_PendingCitation]) -> None:
    """Equal counts pair in order; otherwise the nearest preceding quote, else the first."""
    if not quotes or not cits:
        return
    if len(quotes) == len(cits):
        for q, c in zip(quotes, cits, strict=True):
            c.quote = q[2]
        return
    # quotes are in order and do not overlap, so their ends ascend: bisect, not a scan per
    # citation (10 000 quotes and citations in one claim would be 10^8 comparisons)
    ends = [q[1] for q in quotes]
    ordered = ends == sorted(ends)
    for c in cits:
        if ordered:
            k = bisect.bisect_right(ends, c.start)
            c.quote = quotes[k - 1][2] if k else quotes[0][2]
        else:
            before = [q for q in quotes if q[1] <= c.start]
            c.quote = before[-1][2] if before else quotes[0][2]

"""Markdown and HTML structure of the answer text: ``<br>`` and ``&nbsp;`` read as line
breaks and spaces (offsets kept), the non-blank lines, inline code spans and fenced code."""

from __future__ import annotations

import re

from citeguard.parse.base import _LOOKBACK, _in_spans, _Layout, _Line

_BREAK = re.compile(
    r"</?br\b[^<>\n]{0,20}>|&(?:nbsp|#160|#[xX][aA]0);|[\u2028\u2029]", re.IGNORECASE
)

_TABLE_ROW = re.compile(r"[ \t]*+\|")


def _html_breaks(text: str) -> str:
    """``<br>`` / ``<br/>`` (and the line separator U+2028) as a line break, as chat UIs join a
    sources list, and ``&nbsp;`` as spaces: each becomes spaces (ending in a newline for a
    break), so every offset into ``text`` stays valid. A break right before a real line break
    becomes spaces only (no blank line appears). Left as they are: a tag inside inline code, and
    one inside a table cell (a row's line that has not reached its closing ``|``); a tag right
    after a row's closing ``|`` ends the row, as when a whole answer, table and all, was joined
    with ``<br>``."""
    matches = list(_BREAK.finditer(text))
    if not matches:
        return text
    code = _inline_code(text)
    code_starts = [s for s, _ in code]
    pieces: list[str] = []
    pos = 0
    scanned = 0  # newlines are searched for once each: linear however many tags a line has
    line = 0  # where the current line starts (a real newline or a break made here)
    row = bool(_TABLE_ROW.match(text))
    for m in matches:
        s, e = m.span()
        nl = text.rfind("\n", scanned, s)
        scanned = e
        if nl >= 0 and nl + 1 > line:
            line = nl + 1
            row = bool(_TABLE_ROW.match(text, line))
        if _in_spans(s, code_starts, code):
            continue
        pieces.append(text[pos:s])
        pos = e
        if text[s] == "&":
            pieces.append(" " * (e - s))
            continue
        if row and not _row_closed(text, line, s):
            pieces.append(text[s:e])  # a line break inside a table cell
            continue
        line_break = e < len(text) and text[e] not in "\r\n"
        pieces.append(" " * (e - s - 1) + "\n" if line_break else " " * (e - s))
        line = e
        row = bool(_TABLE_ROW.match(text, e))
    pieces.append(text[pos:])
    return "".join(pieces)


def _row_closed(text: str, line: int, pos: int) -> bool:
    """Whether the table row that starts at ``line`` has reached its closing ``|`` right before
    ``pos`` (spaces aside; a bounded look back)."""
    p = pos
    while p > line and pos - p < _LOOKBACK and text[p - 1] in " \t":
        p -= 1
    return p > line and text[p - 1] == "|"


_BACKTICKS = re.compile(r"`+|\n")


def _inline_code(text: str) -> list[tuple[int, int]]:
    """Inline code spans, as CommonMark reads them: a run of backticks opens a span that the
    next run of the same length on the same line closes (```` ``a`b`` ````); a run with no
    such partner is literal. Linear: each run's partner is found in one right-to-left pass."""
    runs: list[tuple[int, int]] = []  # (start, length); a newline is (start, 0)
    for m in _BACKTICKS.finditer(text):
        runs.append((m.start(), 0 if m.group() == "\n" else m.end() - m.start()))
    if not runs:
        return []
    partner = [-1] * len(runs)
    after: dict[int, int] = {}  # run length -> index of the next run of that length
    for k in range(len(runs) - 1, -1, -1):
        length = runs[k][1]
        if length == 0:
            after.clear()  # a span never crosses a line
            continue
        partner[k] = after.get(length, -1)
        after[length] = k
    spans: list[tuple[int, int]] = []
    k = 0
    while k < len(runs):
        j = partner[k]
        if j < 0:
            k += 1
            continue
        spans.append((runs[k][0], runs[j][0] + runs[j][1]))
        k = j + 1
    return spans


# a fence may be indented (a code block inside a list item)
_FENCE = re.compile(r"[ \t]*+(`{3,}|~{3,})")

_NONEMPTY_LINE = re.compile(r"[^\n]+")


def _split_lines(text: str) -> list[_Line]:
    out: list[_Line] = []
    prev_end = -1
    for m in _NONEMPTY_LINE.finditer(text):
        body = m.group()
        if body.isspace():
            continue
        if body.endswith("\r"):
            body = body[:-1]
        start = m.start()
        gap = prev_end >= 0 and text.count("\n", prev_end + 1, start) > 0
        out.append(_Line(start, start + len(body), body, gap))
        prev_end = m.end()
    return out


def _code_spans(text: str, lines: list[_Line], layout: _Layout) -> list[tuple[int, int]]:
    spans = [(lines[i].start, lines[i].end) for i in sorted(layout.code_lines)]
    spans.extend(_inline_code(text))
    spans.sort()
    merged: list[tuple[int, int]] = []  # _in_spans needs disjoint spans (`x` inside a fence)
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged

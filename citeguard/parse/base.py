"""The parser's records and the helpers every sub-stage shares: reference definitions, hits,
lines, the layout, pending citations; reference keys and marker numbers; masking and span
look-ups."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from citeguard.models import CitationKind, CitationOrigin, Finding
from citeguard.providers.base import ProviderCitation
from citeguard.text import fold_whitespace

MAX_MARKER_RANGE = 50
"""The longest ``[a-b]`` range expanded into one citation per number."""

_AXIS = "validity"

_LOOKBACK = 40  # how far the data heuristics look back; a bound that keeps the scan linear

_NUM_ITEM = r"\d{1,3}(?:[ \t]*[-–—][ \t]*\d{1,3})?"

_NUM_MARKER_TEXT = re.compile(
    r"[ \t]*" + _NUM_ITEM + r"(?:[ \t]*[,;][ \t]*" + _NUM_ITEM + r")*[ \t]*"
)

_NUM_PART = re.compile(r"(\d{1,3})(?:[ \t]*[-–—][ \t]*(\d{1,3}))?")

_QUICK_NUM_MARKER = re.compile(
    r"\[[ \t]*(" + _NUM_ITEM + r"(?:[ \t]*[,;][ \t]*" + _NUM_ITEM + r")*)[ \t]*\]"
)


class _TooManyHits(Exception):
    """More citation markers and links than :class:`_HitBudget` allows: the answer is not
    read past them (raised by the finders, caught by the answer limits)."""


@dataclass(slots=True)
class _HitBudget:
    """How many more markers, links and marker findings the finders may record. Each is an
    object that lives until the answer is assembled: a hostile answer of 33,000 ``[1]`` made
    66,000 of them (hits and pending citations), and a full garbage collection walked them all
    while the loop waited. ``None``: no limit (``parse_answer`` without limits)."""

    left: int | None = None

    def take(self) -> None:
        if self.left is not None:
            self.left -= 1
            if self.left < 0:
                raise _TooManyHits


@dataclass(slots=True)
class _RefDef:
    key: str
    url: str | None  # None: the entry names no URL (e.g. "[1] Smith 2020, Nature")
    line: int
    used: bool = False
    # a source passed beside the text (references=, Perplexity's citations): line == -1
    origin: CitationOrigin = "markdown"
    title: str | None = None
    quote: str | None = None
    # the entry's text as written, capped, when it reads as a paper (the scholarly check)
    entry: str | None = None


@dataclass(slots=True)
class _Hit:
    """One marker or link found in the text, before reference resolution."""

    start: int
    end: int
    kind: CitationKind
    url: str | None = None  # links, anchors and bare URLs carry their URL directly
    keys: tuple[str, ...] = ()  # reference-based kinds carry the keys they cite
    label: str | None = None
    explicit_ref: bool = False  # [t][id] / [t][]: an undefined id is a finding, not prose
    note: dict[str, Any] | None = None  # a Finding's fields: what was assumed to read it
    provider: ProviderCitation | None = None  # the provider annotation over this link
    origin: CitationOrigin = "markdown"


@dataclass(slots=True)
class _Line:
    """A non-blank line. Blank lines are not stored (a 1 MB run of newlines costs nothing)."""

    start: int
    end: int  # exclusive, without the newline (and without a trailing "\r")
    text: str
    gap_before: bool  # one or more blank lines separate it from the previous stored line


@dataclass(slots=True)
class _Layout:
    """Which lines are reference definitions, source lines, code; the reference table."""

    budget: _HitBudget = field(default_factory=_HitBudget)  # each definition takes one
    defs: dict[str, _RefDef] = field(default_factory=dict)
    def_lines: set[int] = field(default_factory=set)
    source_lines: set[int] = field(default_factory=set)  # not claims; their links still count
    code_lines: set[int] = field(default_factory=set)
    findings: list[Finding] = field(default_factory=list)


@dataclass(slots=True)
class _PendingCitation:
    url: str
    kind: CitationKind
    marker: str
    label: str | None
    start: int
    end: int
    claim_index: int | None
    quote: str | None = None
    origin: CitationOrigin = "markdown"
    title: str | None = None
    confidence: float | None = None
    redirect: bool = False  # a provider redirect, resolved by the Guard
    checkable: bool = True  # False: a document citation with no URL (``url`` names it)
    own: bool = False  # the quote is the provider's, not one found in the claim
    reference: str | None = None  # the reference-list entry it resolved to, as written

    def from_provider(
        self, cit: ProviderCitation | None, origin: CitationOrigin
    ) -> _PendingCitation:
        """This citation with what a provider's citation object adds to it."""
        self.origin = origin
        if cit is not None:
            self.title = cit.title
            self.confidence = cit.confidence
            self.redirect = cit.redirect
            if cit.quote:
                self.quote, self.own = cit.quote, True
        return self

    def from_reference(self, ref: _RefDef) -> _PendingCitation:
        """This citation with the origin, title and quote of the reference it resolved to."""
        self.origin, self.title = ref.origin, ref.title
        self.reference = ref.entry
        if ref.quote:
            self.quote, self.own = ref.quote, True
        return self


def _normalize_key(raw: str) -> str:
    key = fold_whitespace(raw).casefold()
    return str(int(key)) if key.isdigit() else key


def _expand_numbers(body: str) -> tuple[list[str], bool]:
    """``"1, 3-5"`` → (["1", "3", "4", "5"], ok). ok is False for reversed or over-long ranges."""
    out: list[str] = []
    ok = True
    for m in _NUM_PART.finditer(body):
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo or hi - lo + 1 > MAX_MARKER_RANGE:
            ok = False
            continue
        out.extend(str(k) for k in range(lo, hi + 1))
    return out, ok


def _mask(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """Blank out ``spans`` (newlines kept) so later passes skip them while offsets stay valid."""
    ordered = sorted(s for s in spans if s[1] > s[0])
    if not ordered:
        return text
    pieces: list[str] = []
    pos = 0
    for start, end in ordered:
        start = max(start, pos)
        if end <= start:
            continue
        pieces.append(text[pos:start])
        segment = text[start:end]
        pieces.append(" " * len(segment) if "\n" not in segment else re.sub(r"[^\n]", " ", segment))
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)


def _in_spans(pos: int, starts: list[int], spans: list[tuple[int, int]]) -> bool:
    i = bisect.bisect_right(starts, pos) - 1
    return i >= 0 and spans[i][0] <= pos < spans[i][1]


def _span_end(pos: int, starts: list[int], spans: list[tuple[int, int]]) -> int:
    """End of the span holding ``pos`` (call only after :func:`_in_spans` said yes)."""
    return spans[bisect.bisect_right(starts, pos) - 1][1]

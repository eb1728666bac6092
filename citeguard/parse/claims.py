"""Claims: the body's paragraphs, list items, headings and table rows split into
sentences; markers after a sentence's end and lead-in sentences given to their claim."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from citeguard.parse.base import _Hit, _in_spans, _Layout, _Line, _span_end
from citeguard.text import (
    ANSWER_TERMINATOR_RE,
    has_word,
    is_answer_sentence_end,
    trim_span,
    word_set,
)

# Block structure for claim splitting.
_BLOCK_PREFIX = re.compile(
    r"(?P<lead>[ \t]*(?:>[ \t]?)*[ \t]*)"
    r"(?:(?P<list>(?:[-*+•]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?)|(?P<heading>#{1,6}[ \t]+))?"
)

# Possessive runs: "[ \t]*\|?[ \t]*" would try every split of a 100 kB run of spaces.
_HRULE = re.compile(r"[ \t]*+(?:(?:-[ \t]*+){3,}+|(?:\*[ \t]*+){3,}+|(?:_[ \t]*+){3,}+)")

_TABLE_SEP = re.compile(
    r"[ \t]*+(?:\|[ \t]*+)?:?-{2,}+:?[ \t]*+(?:\|[ \t]*+:?-{2,}+:?[ \t]*+)*+(?:\|[ \t]*+)?"
)

_ABSORBABLE: frozenset[str] = frozenset({"numbered", "footnote", "reference_link", "annotation"})


@dataclass(slots=True)
class _Unit:
    start: int
    end: int
    heading: bool = False


def _units(text: str, lines: list[_Line], layout: _Layout) -> list[_Unit]:
    """Paragraphs, list items, headings and table rows of the body (reference lists excluded)."""
    units: list[_Unit] = []
    current: _Unit | None = None
    excluded = layout.def_lines | layout.source_lines | layout.code_lines
    for i, line in enumerate(lines):
        s = line.text
        if line.gap_before:
            current = None
        if i in excluded or _HRULE.fullmatch(s) or _TABLE_SEP.fullmatch(s):
            current = None
            continue
        m = _BLOCK_PREFIX.match(s)
        assert m is not None  # every group is optional
        content = line.start + m.end()
        if content >= line.end:
            current = None
            continue
        starts_block = bool(m.group("list") or m.group("heading")) or s.lstrip().startswith("|")
        if m.group("heading"):
            units.append(_Unit(content, line.end, heading=True))
            current = None
        elif starts_block or current is None:
            current = _Unit(content, line.end)
            units.append(current)
            if s.lstrip().startswith("|"):
                current = None  # each table row stands alone
        else:
            current.end = line.end
    return units


def _parenthesised_citations(text: str, q: int, limit: int, hit_end: dict[int, int]) -> int | None:
    """End of ``(cite, cite)`` at ``q`` when the parentheses hold only citations, else None."""
    p = q + 1
    found = False
    while p < limit:
        if text[p] == ")":
            return p + 1 if found else None
        if text[p].isspace() or text[p] in ",;":
            p += 1
        elif p in hit_end:
            p = hit_end[p]
            found = True
        else:
            return None
    return None


# A sentence that only points at its citations: a source label ("Source:", "Via", "Data from")
# or a pointer ("See also", "For more information, see", "Read more"), followed by filler words.
_LEAD_IN = re.compile(
    r"[\s(*_>\"“‘'•\-–—]*(?:(?P<label>sources?|citations?|references?|refs?|via|credits?|quellen?"
    r"|(?:data|adapted|retrieved|taken|cited)[ \t]+from|data[ \t]+sources?)"
    r"|for[ \t]+(?:more|further|additional|full|complete|details|reference)"
    r"|more[ \t]+(?:info|information|details|here|at|on)|further[ \t]+reading"
    r"|(?:also[ \t]+)?(?:see|read|visit|check|consult|explore|learn|find|refer|browse|watch|go)"
    r"|you[ \t]+can[ \t]+(?:see|read|find|visit|check|learn))\b",
    re.IGNORECASE,
)

_LEAD_IN_WORD = re.compile(r"[^\W_]+")

# A bare "See [t](url) and [u](url)." stays a claim; a pointer says it points somewhere further.
_LEAD_IN_POINTER = word_set("more also further additional details detail information info")

_LEAD_IN_FILLER = word_set(
    "see also more out to at on in for of by via from with and or the a an here there this these"
    " that those it them our their its official full complete original primary latest relevant"
    " related further additional following below above page pages site sites website websites"
    " web link links article articles report reports docs doc documentation document documents"
    " guide guides source sources reference references resource resources post posts blog paper"
    " papers study studies entry entries wiki overview faq section sections tutorial tutorials"
    " api manual notes release announcement statement news coverage summary video videos thread"
    " listed cited information info details detail reading context data background discussion"
    " explanation can you please click find learn read visit check consult refer explore go"
    " browse watch"
)


def _is_lead_in(rest: str) -> bool:
    """Whether a sentence (its citations removed: ``rest``) only leads in to its citations.

    It starts with a lead-in phrase and every later word is filler ("the official website",
    "for details"); after a source label (``Source: Reuters``) up to four capitalised names may
    stand too. A word that says something ("rates rose", "2023") makes it a claim.
    """
    m = _LEAD_IN.match(rest)
    if m is None:
        return False
    label = m.group("label") is not None
    names = 0
    pointer = label
    for word in _LEAD_IN_WORD.findall(rest, m.end()):
        folded = word.casefold()
        if folded in _LEAD_IN_FILLER:
            pointer = pointer or folded in _LEAD_IN_POINTER
            continue
        if not label or not (word[0].isupper() and word.isalpha()):
            return False
        names += 1
    return names <= 4 and (
        pointer or bool(_LEAD_IN_POINTER.intersection(m.group().casefold().split()))
    )


def _split_claims(
    text: str,
    lines: list[_Line],
    layout: _Layout,
    hits: list[_Hit],
    quotes: list[tuple[int, int, str]],
) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
    """Claim spans, and spans holding only markers with the claim their citations go to."""
    hit_spans = [(h.start, h.end) for h in hits]
    hit_starts = [h.start for h in hits]
    quote_spans = [(q[0], q[1]) for q in quotes]
    quote_starts = [q[0] for q in quotes]
    absorb_end = {h.start: h.end for h in hits if h.kind in _ABSORBABLE}
    absorbable = set(absorb_end)
    any_end = {h.start: h.end for h in hits}

    claims: list[tuple[int, int]] = []
    orphans: list[tuple[int, int, int]] = []

    def emit(s: int, e: int, unit: _Unit) -> None:
        s, e = trim_span(text, s, e)
        if s >= e:
            return
        i = bisect.bisect_left(hit_starts, s)
        pieces: list[str] = []
        pos = s
        has_hit = False
        while i < len(hits) and hits[i].start < e:
            pieces.append(text[pos : hits[i].start])
            pos = max(pos, hits[i].end)
            has_hit = True
            i += 1
        pieces.append(text[pos:e])
        rest = "".join(pieces)
        if unit.heading and not has_hit:
            return
        # "Source: [1]", "For more information, see [the docs](url).": a lead-in is no claim;
        # its citations go to the previous claim, like a marker standing on its own.
        if has_word(rest) and not (has_hit and _is_lead_in(rest)):
            claims.append((s, e))
        elif has_hit and claims:
            orphans.append((s, e, len(claims) - 1))

    for unit in _units(text, lines, layout):
        if unit.heading:
            emit(unit.start, unit.end, unit)
            continue
        sent_start = unit.start
        for m in ANSWER_TERMINATOR_RE.finditer(text, unit.start, unit.end):
            t_start, t_end = m.span()
            if t_end <= sent_start:
                continue
            if _in_spans(t_start, hit_starts, hit_spans):
                continue  # a "." inside a URL or link text ends nothing
            if _in_spans(t_start, quote_starts, quote_spans) and t_end < _span_end(
                t_start, quote_starts, quote_spans
            ):
                continue  # "Rates rose. Jobs grew." quoted is one claim's quote, not two claims
            if not is_answer_sentence_end(text, t_start, t_end, unit.end, absorbable):
                continue
            end = t_end
            # "… rose 3%. [2]" and "…3%.[1][2]": markers after the full stop belong to it.
            while True:
                q = end
                while q < unit.end and (text[q].isspace() or text[q] in ",;"):
                    q += 1
                nxt = absorb_end.get(q)
                if nxt is None and q < unit.end and text[q] == "(":
                    nxt = _parenthesised_citations(text, q, unit.end, any_end)
                if nxt is None:
                    break
                end = nxt
            emit(sent_start, end, unit)
            sent_start = end
        emit(sent_start, unit.end, unit)
    return claims, orphans

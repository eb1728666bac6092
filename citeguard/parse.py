"""Answer text → :class:`~citeguard.models.Answer`: claims bound to the citations that back them.

:func:`parse_answer` understands the citation styles search agents actually emit:

==================  ============================================================================
kind                what it recognises
==================  ============================================================================
``inline_link``     ``[text](url)``, ``[text](url "title")``, ``[text](<url>)``; one level of
                    balanced parentheses inside the URL (Wikipedia's ``Foo_(bar)``)
``reference_link``  ``[text][id]``, ``[text][]`` and the shortcut ``[id]`` with an
                    ``[id]: url`` definition (ids are case-insensitive, as in CommonMark)
``numbered``        ``[1]``, ``[1][3]``, ``[1, 2]``, ``[1-3]``, ``[1–3]`` bound to a reference
                    list: ``[1] url``, ``[1]: url``, ``1. Title — url``, ``1. Title - url``,
                    ``[1] Title (url)``, ``[1] [Title](url)``, under a ``Sources:`` /
                    ``References:`` heading or as the answer's trailing block
``footnote``        ``[^1]`` with ``[^1]: text url``
``bare_url``        ``https://…``, ``http://…``, ``ftp://…``, ``file://…``, ``www.…`` (made
                    ``https://``) and ``<https://…>`` autolinks
``html_anchor``     ``<a href="…">…</a>``
``structured``      a list of ``{"claim": str, "url": str | [str], "quote"?: str}`` mappings
==================  ============================================================================

Parsing never raises on bad input: an unresolved marker, an unused reference, a malformed URL or a
blocked scheme becomes a :class:`~citeguard.models.Finding`. A citation whose URL is malformed or
blocked is still listed (``normalized_url=None``) so the gate can report it.

Every pattern is linear: each candidate's scan stops at the next occurrence of its own opening
character or at a newline, so pathological inputs (``"[" * 100_000``, runs of ``((((``) cost no more
than ordinary text.

Decisions worth knowing
-----------------------
* Offsets: ``text[c.start:c.end] == c.marker`` for every text citation, and
  ``text[cl.start:cl.end] == cl.text`` for every claim; claim text is already stripped of
  surrounding whitespace (inner line breaks of a soft-wrapped sentence are kept). A marker such
  as ``[1, 2]`` yields one citation per number, all with the marker's offsets.
* ``Citation.label`` is the key into ``Answer.references`` for reference-based kinds (``"1"``,
  ``"foo"`` lower-cased, ``"^1"`` for footnotes) and the link text for links and anchors.
* ``Citation.url`` is the URL as written, except that a bare ``www.`` link gets ``https://``.
* Claims are sentences inside paragraphs and list items (a list item is always a hard boundary).
  A marker right after the sentence's final punctuation (``"… rose 3%. [2]"``, ``"…3%.[2]"``,
  ``"… rose 3%. (https://…)"``) belongs to that sentence. A span holding only markers (e.g.
  ``[1]`` on its own line) gives its citations to the previous claim. Headings become claims
  only when they carry a citation. A full stop inside a quoted span ends no claim.
* The reference list (definitions, a ``Sources:`` block, a trailing numbered list of URLs that body
  markers point at) is never split into claims. Unnumbered links inside a ``Sources:`` block are
  still citations (the gate checks them) but belong to no claim (``claim_index=None``). A
  numbered reference no marker cites is *not* a citation: it is an ``unused_reference`` warning
  that carries the URL (and ``Answer.references`` lists it).
* ``[t][id]`` with an undefined id is an ``unresolved_marker`` when the id looks like one (no
  spaces, at most 40 characters); ``[sic][emphasis added]`` stays prose. An undefined shortcut
  ``[word]`` is prose. ``[2](p.5)`` is marker ``[2]`` plus a parenthetical, not a link.
* Structured input: ``quote`` wins; otherwise the first quoted span in the claim text is used.
* Quotes: "…", “…”, «…», „…“/„…”, 「…」, 『…』 of any length; single curly ‘…’ only with at least
  three words (otherwise it is far more likely an apostrophe pair); straight single quotes are
  ignored. A quote nested inside another is dropped in favour of the outer one. When a claim has
  as many quotes as citations they are paired in order; otherwise each citation gets the nearest
  quote that ends before it, or the claim's first quote when none does.
* Markers, footnotes and shortcut references inside code spans / fenced blocks are ignored
  (``a[1]`` in code is not a citation); links and bare URLs there still count.
* ``[0]`` and ranges longer than :data:`MAX_MARKER_RANGE` are not treated as citations of every
  number in them (``[0, 1]`` is an interval; ``[1-900]`` becomes a ``malformed_marker`` finding).
* Images ``![alt](url)`` and fragment-only links ``[t](#x)`` are not citations.
* Bare URLs stop before trailing ``.,;:!?'``, unbalanced ``)``/``]``, closing quotes and markdown
  emphasis (``*``, ``~``; ``_`` only when the URL was opened by ``_``). A bare URL that is glued to
  CJK text on its left ends at the first CJK character; one that stands apart keeps CJK path
  characters (an IRI such as ``https://zh.wikipedia.org/wiki/北京``).
* Duplicate reference ids: the first definition wins (CommonMark); the duplicate is a
  ``duplicate_reference`` finding, a warning when both name the same URL, an error otherwise.
"""

from __future__ import annotations

import bisect
import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from citeguard.models import (
    Answer,
    Citation,
    CitationKind,
    CitationStatus,
    Claim,
    Finding,
    Severity,
)
from citeguard.text import (
    ANSWER_TERMINATOR_RE,
    fold_whitespace,
    has_word,
    is_answer_sentence_end,
    trim_span,
)
from citeguard.web.urls import DEFAULT_ALLOWED_SCHEMES, UrlProblem, normalize_url

__all__ = ["MAX_MARKER_RANGE", "parse_answer"]

MAX_MARKER_RANGE = 50
"""The longest ``[a-b]`` range expanded into one citation per number."""

_AXIS = "validity"

# --------------------------------------------------------------------------------------------
# Patterns. Every repetition is over a class that excludes the construct's own delimiters, so a
# failed attempt at one position scans at most up to the next delimiter: linear overall.
# --------------------------------------------------------------------------------------------

_LINK_TEXT = r"(?:[^\[\]\n]|\[[^\[\]\n]*\])*"
_LINK_DEST = (
    r"[ \t]*(?:<(?P<adest>[^<>\n]*)>|(?P<dest>(?:[^\s()]|\([^\s()]*\))*))"
    r"(?:[ \t]+(?P<title>\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*"
)
# One pattern for every bracket construct; the Python loop decides what a match is.
_BRACKET = re.compile(
    r"(?<!\\)(?P<bang>!)?\[(?P<text>" + _LINK_TEXT + r")\]"
    r"(?:\((?P<inl>" + _LINK_DEST + r")\)|\[(?P<ref>[^\[\]\n]{0,200})\])?"
)
_INLINE_LINK = re.compile(
    r"(?<!!)\[(?P<text>" + _LINK_TEXT + r")\]\((?P<inl>" + _LINK_DEST + r")\)"
)
_NUM_ITEM = r"\d{1,3}(?:[ \t]*[-–—][ \t]*\d{1,3})?"
_NUM_MARKER_TEXT = re.compile(
    r"[ \t]*" + _NUM_ITEM + r"(?:[ \t]*[,;][ \t]*" + _NUM_ITEM + r")*[ \t]*"
)
_NUM_PART = re.compile(r"(\d{1,3})(?:[ \t]*[-–—][ \t]*(\d{1,3}))?")
_QUICK_NUM_MARKER = re.compile(
    r"\[[ \t]*(" + _NUM_ITEM + r"(?:[ \t]*[,;][ \t]*" + _NUM_ITEM + r")*)[ \t]*\]"
)
_DOTTED_HOST = re.compile(r"[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}")
_FOOTNOTE_TEXT = re.compile(r"\^[^\s\[\]^]{1,100}")

# Bare URLs: ASCII word characters may not precede (so ``xhttps://`` and ``e-www.`` do not count),
# but CJK may ("详见https://…"). Quotes, brackets, whitespace and CJK punctuation end a URL.
_URL_CHARS = r"[^\s<>\"`{}|\\^\[\]“”‘’«»‹›„\u3000-\u303f\uff00-\uffef]"
_BARE = re.compile(
    r"(?<![A-Za-z0-9@.\-+])(?:(?:https?|ftp|file)://|www\.)" + _URL_CHARS + r"+",
    re.IGNORECASE,
)
_OTHER_SCHEME = re.compile(
    r"(?<![A-Za-z0-9+.\-])(?:javascript|vbscript|data|file|ftp|mailto|about|blob|tel|sms|ws|wss"
    r"|gopher|chrome|view-source|[a-z][a-z0-9+.\-]{1,30}(?=:\/\/)):" + _URL_CHARS + r"+",
    re.IGNORECASE,
)
_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\u3040-\u30ff]")
_TRAILING_PUNCT = frozenset(".,;:!?'")

_ANCHOR_OPEN = re.compile(r"<a\s[^<>]*>", re.IGNORECASE)
_ANCHOR_CLOSE = re.compile(r"</a\s*>", re.IGNORECASE)
_HREF = re.compile(r"\bhref\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'>]+))", re.IGNORECASE)
_TAG = re.compile(r"<[^<>]*>")

_NONEMPTY_LINE = re.compile(r"[^\n]+")
_INLINE_CODE = re.compile(r"(?<!`)`[^`\n]+`(?!`)")
_FENCE = re.compile(r"[ \t]{0,3}(`{3,}|~{3,})")

# Reference list lines.
_FOOTNOTE_DEF = re.compile(r"[ \t]{0,3}\[\^([^\]\s]{1,100})\]:[ \t]*(.*)")
_LINK_DEF = re.compile(r"[ \t]{0,3}\[([^\[\]\n^][^\[\]\n]{0,199})\]:[ \t]*(.*)")
_BRACKET_NUM_ENTRY = re.compile(r"[ \t]*(?:[-*+•][ \t]+)?\[(\d{1,3})\][.:)]?[ \t]+(.*)")
_LIST_NUM_ENTRY = re.compile(r"[ \t]*(\d{1,3})[.)][ \t]+(.*)")
_SOURCES_WORDS = (
    r"(?:sources?(?:[ \t]+(?:cited|used))?|references?|citations?|bibliography|works[ \t]+cited"
    r"|links|further[ \t]+reading|reference[ \t]+list|quellen"
    r"|参考文献|参考资料|参考|来源|出典|出处)"
)
_SOURCES_HEADING = re.compile(
    r"[ \t]{0,3}(?:#{1,6}[ \t]*)?(?:[*_]{1,3})?[ \t]*"
    + _SOURCES_WORDS
    + r"[ \t]*(?:[*_]{1,3})?[ \t]*[:：]?[ \t]*(?:[*_]{1,3})?[ \t]*",
    re.IGNORECASE,
)
_SOURCES_INLINE = re.compile(
    r"[ \t]{0,3}(?:[*_]{1,3})?" + _SOURCES_WORDS + r"(?:[*_]{1,3})?[ \t]*[:：]", re.IGNORECASE
)
_ENTRY_START = re.compile(r"[ \t]*(?:[-*+•][ \t]+|\d{1,3}[.)][ \t]+|\[)")

# Block structure for claim splitting.
_BLOCK_PREFIX = re.compile(
    r"(?P<lead>[ \t]*(?:>[ \t]?)*[ \t]*)"
    r"(?:(?P<list>(?:[-*+•]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?)|(?P<heading>#{1,6}[ \t]+))?"
)
_HRULE = re.compile(r"[ \t]*(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})")
_TABLE_SEP = re.compile(r"[ \t]*\|?[ \t]*:?-{2,}:?[ \t]*(?:\|[ \t]*:?-{2,}:?[ \t]*)*\|?[ \t]*")

# Sentence ends (terminators, abbreviations, initials) are citeguard.text.is_answer_sentence_end.

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

_ABSORBABLE: frozenset[str] = frozenset({"numbered", "footnote", "reference_link"})


# --------------------------------------------------------------------------------------------
# Internal records
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _RefDef:
    key: str
    url: str | None  # None: the entry names no URL (e.g. "[1] Smith 2020, Nature")
    line: int
    used: bool = False


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

    defs: dict[str, _RefDef] = field(default_factory=dict)
    def_lines: set[int] = field(default_factory=set)
    source_lines: set[int] = field(default_factory=set)  # not claims; their links still count
    code_lines: set[int] = field(default_factory=set)
    findings: list[Finding] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------------


def parse_answer(
    text: str | Sequence[Mapping[str, Any]],
    *,
    allowed_schemes: frozenset[str] = DEFAULT_ALLOWED_SCHEMES,
) -> Answer:
    """Parse an answer into claims and citations, with character offsets into the answer text.

    ``text`` is either the answer as markdown/plain text/HTML fragments, or structured input: a
    sequence of ``{"claim": str, "url": str | list[str], "quote": str | None}`` mappings (one
    claim per item; citations then have ``start == end == -1`` and ``Answer.text`` is the claims
    joined by newlines). ``allowed_schemes`` is the URL scheme allow-list (``Policy.fetch``'s).

    Never raises on bad input: problems are :class:`~citeguard.models.Finding` values with codes
    ``unresolved_marker``, ``unused_reference`` (warning), ``malformed_url``, ``blocked_scheme``,
    ``reference_without_url``, ``duplicate_reference``, ``malformed_marker``,
    ``structured_invalid_item``, ``structured_missing_field`` and ``invalid_input``.
    """
    if isinstance(text, str):
        return _parse_text(text, allowed_schemes)
    if isinstance(text, Sequence) and not isinstance(text, bytes | bytearray):
        return _parse_structured(text, allowed_schemes)
    return Answer(
        text="",
        findings=[
            Finding(
                code="invalid_input",
                message=(
                    "answer must be text or a list of {claim, url, quote} items, "
                    f"not {type(text).__name__}"
                ),
                axis=_AXIS,
            )
        ],
    )


# --------------------------------------------------------------------------------------------
# Text input
# --------------------------------------------------------------------------------------------


def _parse_text(text: str, allowed_schemes: frozenset[str]) -> Answer:
    lines = _split_lines(text)
    layout = _scan_layout(text, lines)

    def_spans = [(lines[i].start, lines[i].end) for i in sorted(layout.def_lines)]
    code_spans = _code_spans(text, lines, layout)
    masked = _mask(text, def_spans)

    hits: list[_Hit] = []
    link_spans: list[tuple[int, int]] = []
    findings = layout.findings

    anchor_hits = _find_anchors(masked)
    hits.extend(anchor_hits)
    masked = _mask(masked, [(h.start, h.end) for h in anchor_hits])

    bracket_hits, skipped = _find_brackets(text, masked, code_spans, layout.defs, findings)
    hits.extend(bracket_hits)
    link_spans.extend((h.start, h.end) for h in bracket_hits if h.url is not None)
    link_spans.extend(skipped)  # images and fragment links: no bare URLs inside them either
    masked = _mask(masked, link_spans)

    hits.extend(_find_bare(masked))
    hits.sort(key=lambda h: h.start)

    quote_mask = _mask(masked, [(h.start, h.end) for h in hits] + code_spans)
    quotes = _find_quotes(quote_mask)
    claims_spans, orphan_spans = _split_claims(text, lines, layout, hits, quotes)

    return _assemble(
        text=text,
        hits=hits,
        claim_spans=claims_spans,
        orphan_spans=orphan_spans,
        quotes=quotes,
        layout=layout,
        allowed_schemes=allowed_schemes,
    )


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


# ---- reference lists ------------------------------------------------------------------------


def _normalize_key(raw: str) -> str:
    key = fold_whitespace(raw).casefold()
    return str(int(key)) if key.isdigit() else key


def _trim_url(url: str, *, opened_by_underscore: bool = False) -> str:
    """Drop trailing prose punctuation, unbalanced closers and emphasis from a bare URL."""
    opens = url.count("(")
    closes = url.count(")")
    sq_opens = url.count("[")
    sq_closes = url.count("]")
    end = len(url)
    while end > 0:
        ch = url[end - 1]
        if ch in _TRAILING_PUNCT or ch in "*~" or (ch == "_" and opened_by_underscore):
            end -= 1
        elif ch == ")" and closes > opens:
            closes -= 1
            end -= 1
        elif ch == "]" and sq_closes > sq_opens:
            sq_closes -= 1
            end -= 1
        else:
            break
    return url[:end]


def _extract_url(rest: str) -> tuple[str, int] | None:
    """The first URL named in a reference entry's text, and where it starts."""
    best: tuple[str, int] | None = None
    link = _INLINE_LINK.search(rest)
    if link is not None:
        dest = _dest_of(link)
        if dest:
            best = (dest, link.start())
    bare = _BARE.search(rest)
    if bare is not None and (best is None or bare.start() < best[1]):
        url = _trim_url(bare.group(), opened_by_underscore=rest[: bare.start()].endswith("_"))
        if url.lower().startswith("www."):
            url = "https://" + url
        best = (url, bare.start())
    other = _OTHER_SCHEME.search(rest)
    if other is not None and (best is None or other.start() < best[1]):
        best = (_trim_url(other.group()), other.start())
    return best


def _dest_of(m: re.Match[str]) -> str | None:
    adest = m.group("adest")
    dest = adest if adest is not None else m.group("dest")
    if dest is None:
        return None
    return html.unescape(dest.strip())


def _is_urlish(dest: str | None) -> bool:
    """Could ``dest`` be meant as a URL (scheme, path, ``www.`` or a dotted host name)?"""
    if not dest:
        return False
    return _looks_like_destination(dest) or bool(_DOTTED_HOST.fullmatch(dest))


def _looks_like_destination(token: str) -> bool:
    return (
        "/" in token
        or bool(re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", token))
        or token.lower().startswith("www.")
    )


def _scan_layout(text: str, lines: list[_Line]) -> _Layout:
    """Find code fences, reference definitions and ``Sources:`` blocks, line by line."""
    layout = _Layout()
    n = len(lines)

    # Fenced code: only a fence that is closed makes a code block (an LLM's stray ``` must not
    # swallow the rest of the answer).
    i = 0
    while i < n:
        m = _FENCE.match(lines[i].text)
        if m is not None:
            fence = m.group(1)
            j = i + 1
            while j < n and not lines[j].text.lstrip().startswith(fence):
                j += 1
            if j < n:
                layout.code_lines.update(range(i, j + 1))
                i = j + 1
                continue
        i += 1

    in_section = False
    i = 0
    while i < n:
        line = lines[i]
        s = line.text
        if i in layout.code_lines:
            in_section = False
            i += 1
            continue
        if len(s) <= 80 and _SOURCES_HEADING.fullmatch(s):
            in_section = True
            layout.source_lines.add(i)
            i += 1
            continue
        consumed = _try_definition(lines, i, layout, in_section=in_section)
        if consumed:
            i += consumed
            continue
        if in_section:
            if _ENTRY_START.match(s) or _extract_url(s) is not None:
                layout.source_lines.add(i)
                i += 1
                continue
            in_section = False
        inline = _SOURCES_INLINE.match(s)
        if inline is not None and _extract_url(s[inline.end() :]) is not None:
            layout.source_lines.add(i)  # "Sources: https://a.org, https://b.org"
        i += 1

    _claim_trailing_numbered_block(text, lines, layout)
    return layout


def _try_definition(lines: list[_Line], i: int, layout: _Layout, *, in_section: bool) -> int:
    """Record line ``i`` as a reference definition if it is one; return how many lines it used."""
    s = lines[i].text
    stripped = s.lstrip()
    if not stripped or not (stripped[0] == "[" or stripped[0].isdigit() or stripped[0] in "-*+•"):
        return 0

    key: str | None = None
    url: str | None = None
    from_next = False  # the URL sits on an indented continuation line
    m = _FOOTNOTE_DEF.fullmatch(s)
    if m is not None:
        key = "^" + _normalize_key(m.group(1))
        found = _extract_url(m.group(2))
        url = found[0] if found else None
    else:
        m = _LINK_DEF.fullmatch(s)
        if m is not None:
            rest = m.group(2).strip()
            found = _extract_url(rest)
            if found is not None:
                key, url = _normalize_key(m.group(1)), found[0]
            elif rest.startswith("<") and ">" in rest:
                key, url = _normalize_key(m.group(1)), rest[1 : rest.index(">")]
            elif rest and _looks_like_destination(rest.split()[0]):
                key, url = _normalize_key(m.group(1)), rest.split()[0]
            elif m.group(1).strip().isdigit() and (in_section or not rest):
                key = _normalize_key(m.group(1))
        else:
            m = _BRACKET_NUM_ENTRY.fullmatch(s)
            if m is None and in_section:
                m = _LIST_NUM_ENTRY.fullmatch(s)
            if m is not None:
                found = _extract_url(m.group(2))
                if found is not None:
                    key, url = _normalize_key(m.group(1)), found[0]
                elif in_section:
                    key = _normalize_key(m.group(1))
    if key is None:
        return 0
    if url is None:
        url = _continuation_url(lines, i)
        from_next = url is not None
    _add_definition(layout, key, url, i, lines)
    used = 2 if from_next else 1
    layout.def_lines.update(range(i, i + used))
    return used


def _continuation_url(lines: list[_Line], i: int) -> str | None:
    """An indented next line that carries the entry's URL ("1. Long title\\n   https://…")."""
    if i + 1 >= len(lines):
        return None
    nxt = lines[i + 1].text
    if lines[i + 1].gap_before or not nxt[:1].isspace() or _ENTRY_START.match(nxt.strip() + " "):
        return None
    found = _extract_url(nxt)
    return found[0] if found else None


def _add_definition(layout: _Layout, key: str, url: str | None, i: int, lines: list[_Line]) -> None:
    existing = layout.defs.get(key)
    if existing is None:
        layout.defs[key] = _RefDef(key=key, url=url, line=i)
        return
    same = existing.url == url
    layout.findings.append(
        Finding(
            code="duplicate_reference",
            message=(
                f"reference [{key}] is defined twice"
                + (" with the same URL" if same else f" ({existing.url!r} and {url!r})")
                + "; the first definition is used"
            ),
            severity=Severity.WARNING if same else Severity.ERROR,
            axis=_AXIS,
            url=url,
            details={"label": key, "first_url": existing.url, "offset": lines[i].start},
        )
    )


def _claim_trailing_numbered_block(text: str, lines: list[_Line], layout: _Layout) -> None:
    """``1. Title — url`` lines at the very end are a reference list when body markers cite them.

    Without a ``Sources:`` heading a numbered list of links is ambiguous (it may be the answer's
    own list of claims), so it counts as references only when it is the answer's trailing block
    and at least one ``[n]`` marker elsewhere names one of its numbers.
    """
    candidates: list[tuple[int, str, str]] = []
    i = len(lines) - 1
    while i >= 0:
        line = lines[i]
        if i in layout.code_lines:
            break
        if i in layout.def_lines:
            i -= 1
            continue
        m = _LIST_NUM_ENTRY.fullmatch(line.text)
        if m is None or i in layout.source_lines:
            break
        found = _extract_url(m.group(2))
        if found is None:
            break
        candidates.append((i, _normalize_key(m.group(1)), found[0]))
        i -= 1
    if not candidates:
        return
    block_start = lines[candidates[-1][0]].start
    cited: set[str] = set()
    for m in _QUICK_NUM_MARKER.finditer(text, 0, block_start):
        cited.update(_expand_numbers(m.group(1))[0])
    if not cited.intersection(key for _, key, _ in candidates):
        return
    for idx, key, url in reversed(candidates):
        _add_definition(layout, key, url, idx, lines)
        layout.def_lines.add(idx)


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


def _code_spans(text: str, lines: list[_Line], layout: _Layout) -> list[tuple[int, int]]:
    spans = [(lines[i].start, lines[i].end) for i in sorted(layout.code_lines)]
    spans.extend(m.span() for m in _INLINE_CODE.finditer(text))
    spans.sort()
    merged: list[tuple[int, int]] = []  # _in_spans needs disjoint spans (`x` inside a fence)
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


# ---- markers and links ----------------------------------------------------------------------


def _find_anchors(masked: str) -> list[_Hit]:
    hits: list[_Hit] = []
    opens = list(_ANCHOR_OPEN.finditer(masked))
    if not opens:
        return hits
    closes = [m for m in _ANCHOR_CLOSE.finditer(masked)]
    close_starts = [m.start() for m in closes]
    for k, m in enumerate(opens):
        href = _HREF.search(m.group())
        if href is None:
            continue  # <a name="…"> is not a link
        raw = next(g for g in href.groups() if g is not None)
        url = html.unescape(raw).strip()
        if not url or url.startswith("#"):
            continue
        next_open = opens[k + 1].start() if k + 1 < len(opens) else len(masked)
        j = bisect.bisect_left(close_starts, m.end())
        end = m.end()
        label: str | None = None
        if j < len(closes) and closes[j].start() < next_open:
            inner = masked[m.end() : closes[j].start()]
            label = fold_whitespace(html.unescape(_TAG.sub("", inner))) or None
            end = closes[j].end()
        hits.append(_Hit(m.start(), end, "html_anchor", url=url, label=label))
    return hits


def _find_brackets(
    text: str,
    masked: str,
    code_spans: list[tuple[int, int]],
    defs: Mapping[str, _RefDef],
    findings: list[Finding],
) -> tuple[list[_Hit], list[tuple[int, int]]]:
    """Inline links, reference links, numbered markers and footnotes, left to right."""
    hits: list[_Hit] = []
    skipped: list[tuple[int, int]] = []
    code_starts = [s for s, _ in code_spans]
    pos = 0
    n = len(masked)
    while pos < n:
        m = _BRACKET.search(masked, pos)
        if m is None:
            break
        start = m.start("text") - 1  # the "[" (an image's "!" is not part of a marker)
        label_text = m.group("text")
        text_end = m.end("text") + 1
        inline = m.group("inl") is not None
        if inline and _NUM_MARKER_TEXT.fullmatch(label_text) and not _is_urlish(_dest_of(m)):
            inline = False  # "[2](p.5)": a numbered marker and a parenthetical, not a link
        if inline:
            dest = _dest_of(m)
            if m.group("bang") or not dest or dest.startswith("#"):
                skipped.append((m.start(), m.end()))  # image or in-page link: not a citation
            else:
                label = fold_whitespace(label_text) or None
                hits.append(_Hit(start, m.end(), "inline_link", url=dest, label=label))
            pos = m.end()
            continue
        in_code = _in_spans(start, code_starts, code_spans)
        stripped = label_text.strip()
        if not in_code and _FOOTNOTE_TEXT.fullmatch(stripped):
            key = "^" + _normalize_key(stripped[1:])
            hits.append(_Hit(start, text_end, "footnote", keys=(key,), label=key))
            pos = text_end
            continue
        if not in_code and _NUM_MARKER_TEXT.fullmatch(label_text):
            numbers, ok = _expand_numbers(label_text)
            if "0" in numbers:
                pos = text_end  # "[0, 1]" is an interval, not a citation of [0] and [1]
                continue
            if not ok:
                findings.append(
                    Finding(
                        code="malformed_marker",
                        message=(
                            f"citation marker {text[start:text_end]!r} has a reversed range or one "
                            f"longer than {MAX_MARKER_RANGE}; its out-of-range part is ignored"
                        ),
                        axis=_AXIS,
                        details={"marker": text[start:text_end], "start": start},
                    )
                )
            if numbers:
                hits.append(_Hit(start, text_end, "numbered", keys=tuple(numbers)))
            pos = text_end  # a following "[3]" of "[1][3]" is matched on its own
            continue
        ref = m.group("ref")
        if ref is not None and not in_code:
            key = _normalize_key(ref if ref.strip() else label_text)
            # An undefined id is a broken citation when it looks like an id ("[t][nyt]"); with
            # spaces it is more likely bracketed prose ("[sic][emphasis added]").
            if key and (key in defs or (len(key) <= 40 and " " not in key)):
                hits.append(
                    _Hit(
                        start,
                        m.end(),
                        "reference_link",
                        keys=(key,),
                        label=key,
                        explicit_ref=True,
                    )
                )
                pos = m.end()
                continue
        if not in_code and stripped and _normalize_key(stripped) in defs:
            key = _normalize_key(stripped)
            hits.append(_Hit(start, text_end, "reference_link", keys=(key,), label=key))
            pos = text_end
            continue
        # Plain bracketed prose: look inside it for markers ("[see [1]]").
        pos = start + 1
    return hits, skipped


def _find_bare(masked: str) -> list[_Hit]:
    hits: list[_Hit] = []
    for m in _BARE.finditer(masked):
        start = m.start()
        raw = m.group()
        before = masked[start - 1] if start > 0 else ""
        if before and _CJK.match(before):
            cut = _CJK.search(raw)
            if cut is not None:
                raw = raw[: cut.start()]
        raw = _trim_url(raw, opened_by_underscore=before == "_")
        if len(raw) <= (4 if raw.lower().startswith("www.") else raw.find("//") + 2):
            continue  # "https://" or "www." alone names nothing
        url = "https://" + raw if raw.lower().startswith("www.") else raw
        hits.append(_Hit(start, start + len(raw), "bare_url", url=url))
    return hits


# ---- claims ---------------------------------------------------------------------------------


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
        has_words = has_word("".join(pieces))
        if unit.heading and not has_hit:
            return
        if has_words:
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


# ---- quotes ---------------------------------------------------------------------------------


def _find_quotes(masked: str) -> list[tuple[int, int, str]]:
    """(start, end, quote text) of the outermost quoted spans, in order."""
    found: list[tuple[int, int, str]] = []
    for pattern, min_words in _QUOTE_PATTERNS:
        for m in pattern.finditer(masked):
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


# ---- assembly -------------------------------------------------------------------------------


def _citations(
    pending: list[_PendingCitation], allowed_schemes: frozenset[str], findings: list[Finding]
) -> list[Citation]:
    """The final citations, each URL normalised (problems go to ``findings``)."""
    normalize = _Normalizer(allowed_schemes, findings)
    return [
        Citation(
            index=k,
            url=p.url,
            normalized_url=normalize(p.url, p.claim_index),
            kind=p.kind,
            marker=p.marker,
            label=p.label,
            start=p.start,
            end=p.end,
            claim_index=p.claim_index,
            quote=p.quote,
        )
        for k, p in enumerate(pending)
    ]


class _Normalizer:
    """normalize_url once per distinct URL; problems become findings once per URL."""

    def __init__(self, allowed_schemes: frozenset[str], findings: list[Finding]) -> None:
        self._allowed = allowed_schemes
        self._findings = findings
        self._seen: dict[str, str | None] = {}

    def __call__(self, url: str, claim_index: int | None) -> str | None:
        if url in self._seen:
            return self._seen[url]
        try:
            result: str | None = normalize_url(url, allowed_schemes=self._allowed)
        except UrlProblem as exc:
            result = None
            blocked = exc.status is CitationStatus.BLOCKED_SCHEME
            self._findings.append(
                Finding(
                    code="blocked_scheme" if blocked else "malformed_url",
                    message=f"cited URL {url!r}: {exc.reason}",
                    axis=_AXIS,
                    url=url,
                    claim_index=claim_index,
                    details={"status": exc.status.value},
                )
            )
        except ValueError as exc:  # defensive: urls.py should raise UrlProblem only
            result = None
            self._findings.append(
                Finding(
                    code="malformed_url",
                    message=f"cited URL {url!r} cannot be parsed: {exc}",
                    axis=_AXIS,
                    url=url,
                    claim_index=claim_index,
                    details={"status": CitationStatus.MALFORMED_URL.value},
                )
            )
        self._seen[url] = result
        return result


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


def _assemble(
    *,
    text: str,
    hits: list[_Hit],
    claim_spans: list[tuple[int, int]],
    orphan_spans: list[tuple[int, int, int]],
    quotes: list[tuple[int, int, str]],
    layout: _Layout,
    allowed_schemes: frozenset[str],
) -> Answer:
    findings = layout.findings
    claim_starts = [s for s, _ in claim_spans]
    orphan_starts = [s for s, _, _ in orphan_spans]

    def claim_of(pos: int) -> int | None:
        i = bisect.bisect_right(claim_starts, pos) - 1
        if i >= 0 and pos < claim_spans[i][1]:
            return i
        j = bisect.bisect_right(orphan_starts, pos) - 1
        if j >= 0 and pos < orphan_spans[j][1]:
            return orphan_spans[j][2]
        return None

    pending: list[_PendingCitation] = []
    for hit in hits:
        marker = text[hit.start : hit.end]
        claim_index = claim_of(hit.start)
        if hit.url is not None:
            pending.append(
                _PendingCitation(
                    hit.url, hit.kind, marker, hit.label, hit.start, hit.end, claim_index
                )
            )
            continue
        for key in hit.keys:
            ref = layout.defs.get(key)
            if ref is None:
                findings.append(
                    Finding(
                        code="unresolved_marker",
                        message=(
                            f"citation marker {marker!r} cites [{key}], "
                            "but the answer defines no such reference"
                        ),
                        axis=_AXIS,
                        claim_index=claim_index,
                        details={"marker": marker, "label": key, "start": hit.start},
                    )
                )
                continue
            ref.used = True
            if ref.url is None:
                findings.append(
                    Finding(
                        code="reference_without_url",
                        message=(
                            f"citation marker {marker!r} cites reference [{key}], which names no "
                            "URL, so it cannot be checked"
                        ),
                        axis=_AXIS,
                        claim_index=claim_index,
                        details={"marker": marker, "label": key, "start": hit.start},
                    )
                )
                continue
            pending.append(
                _PendingCitation(ref.url, hit.kind, marker, key, hit.start, hit.end, claim_index)
            )

    for ref in layout.defs.values():
        if not ref.used:
            findings.append(
                Finding(
                    code="unused_reference",
                    message=f"reference [{ref.key}] is listed but never cited in the answer",
                    severity=Severity.WARNING,
                    axis=_AXIS,
                    url=ref.url,
                    details={"label": ref.key},
                )
            )

    # Quotes per claim, then bind them to that claim's citations.
    # Sparse maps: most claims of a long answer have neither quotes nor citations.
    claim_quotes: dict[int, list[tuple[int, int, str]]] = {}
    for q in quotes:
        ci = claim_of(q[0])
        if ci is not None and claim_spans[ci][0] <= q[0] < claim_spans[ci][1]:
            claim_quotes.setdefault(ci, []).append(q)
    claim_cits: dict[int, list[int]] = {}
    for k, p in enumerate(pending):
        if p.claim_index is not None:
            claim_cits.setdefault(p.claim_index, []).append(k)
    for ci, cits in claim_cits.items():
        _bind_quotes(claim_quotes.get(ci, []), [pending[k] for k in cits])

    citations = _citations(pending, allowed_schemes, findings)
    claims = [
        Claim(
            index=ci,
            text=text[s:e],
            start=s,
            end=e,
            citation_indices=claim_cits.get(ci, []),
            quotes=[q[2] for q in claim_quotes.get(ci, ())],
        )
        for ci, (s, e) in enumerate(claim_spans)
    ]
    references = {key: ref.url for key, ref in layout.defs.items() if ref.url is not None}
    return Answer(
        text=text,
        claims=claims,
        citations=citations,
        references=references,
        findings=findings,
    )


def _bind_quotes(quotes: list[tuple[int, int, str]], cits: list[_PendingCitation]) -> None:
    """Equal counts pair in order; otherwise the nearest preceding quote, else the first."""
    if not quotes or not cits:
        return
    if len(quotes) == len(cits):
        for q, c in zip(quotes, cits, strict=True):
            c.quote = q[2]
        return
    for c in cits:
        before = [q for q in quotes if q[1] <= c.start]
        c.quote = before[-1][2] if before else quotes[0][2]


# --------------------------------------------------------------------------------------------
# Structured input
# --------------------------------------------------------------------------------------------


def _parse_structured(items: Sequence[Any], allowed_schemes: frozenset[str]) -> Answer:
    findings: list[Finding] = []
    texts: list[str] = []
    claims: list[Claim] = []
    pending: list[_PendingCitation] = []
    offset = 0

    def missing(item: int, name: str, why: str, claim_index: int | None) -> None:
        findings.append(
            Finding(
                code="structured_missing_field",
                message=f"structured item {item}: {why}",
                axis=_AXIS,
                claim_index=claim_index,
                details={"item": item, "field": name},
            )
        )

    for n, item in enumerate(items):
        if not isinstance(item, Mapping):
            findings.append(
                Finding(
                    code="structured_invalid_item",
                    message=(
                        f"structured item {n} must be a mapping with 'claim' and 'url', "
                        f"not {type(item).__name__}"
                    ),
                    axis=_AXIS,
                    details={"item": n},
                )
            )
            continue
        raw_claim = item.get("claim")
        claim_text = raw_claim.strip() if isinstance(raw_claim, str) else ""
        claim_index = len(claims) if claim_text else None
        if claim_index is None:
            missing(n, "claim", "has no 'claim' text", None)

        raw_urls = item.get("url")
        urls: list[str] = []
        if isinstance(raw_urls, str):
            urls = [raw_urls.strip()] if raw_urls.strip() else []
        elif isinstance(raw_urls, Sequence) and not isinstance(raw_urls, bytes | bytearray):
            urls = [u.strip() for u in raw_urls if isinstance(u, str) and u.strip()]
        if not urls:
            missing(n, "url", "has no 'url' (a non-empty string or list of strings)", claim_index)

        raw_quote = item.get("quote")
        quote = raw_quote.strip() if isinstance(raw_quote, str) and raw_quote.strip() else None
        if raw_quote is not None and not isinstance(raw_quote, str):
            why = f"'quote' must be a string, not {type(raw_quote).__name__}"
            missing(n, "quote", why, claim_index)

        if claim_index is not None:
            detected = [q[2] for q in _find_quotes(claim_text)]
            quotes = [quote] if quote is not None else detected
            quote = quote if quote is not None else (detected[0] if detected else None)
            if texts:
                offset += 1  # the joining newline
            start = offset
            offset += len(claim_text)
            texts.append(claim_text)
            first = len(pending)
            claims.append(
                Claim(
                    index=claim_index,
                    text=claim_text,
                    start=start,
                    end=offset,
                    citation_indices=list(range(first, first + len(urls))),
                    quotes=quotes,
                )
            )
        for url in urls:
            pending.append(
                _PendingCitation(url, "structured", url, None, -1, -1, claim_index, quote)
            )

    citations = _citations(pending, allowed_schemes, findings)
    return Answer(text="\n".join(texts), claims=claims, citations=citations, findings=findings)

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
``annotation``      a provider's citation object (:mod:`citeguard.providers`): an OpenAI
                    ``url_citation`` whose range is no link of the text (``start``/``end``: that
                    range), or the text an Anthropic or Gemini citation supports (a zero-width
                    marker at the end of that text in each claim it covers)
``external``        a source passed with ``references=`` beside a text that cites none of them
==================  ============================================================================

Provider responses (OpenAI Responses and Chat Completions, Anthropic Messages, Gemini,
Perplexity; the SDK object, its dict or its JSON text) are read by
:func:`citeguard.providers.read_provider` and parsed here as their text plus their citation
objects: an OpenAI annotation over a markdown link of the text is that link's citation (one
source, not two); Perplexity's ``[n]`` markers cite its ``citations``. ``Citation.origin`` says
where each citation came from. A provider's URL is matched without its tracking parameters
(``utm_source=openai``: :func:`citeguard.providers.strip_tracking`) in ``normalized_url``.

Parsing never raises on bad input: an unresolved marker, an unused reference, a malformed URL or a
blocked scheme becomes a :class:`~citeguard.models.Finding`. A citation whose URL is malformed or
blocked is still listed (``normalized_url=None``) so the gate can report it.

Every pattern is linear: each candidate's scan stops at the next occurrence of its own opening
character or at a newline, so pathological inputs (``"[" * 100_000``, runs of ``((((``) cost no more
than ordinary text. The heuristics that tell data from markers look at most :data:`_LOOKBACK`
characters (and four glued bracket groups) around a bracket.

Decisions worth knowing
-----------------------
* Offsets: ``text[c.start:c.end] == c.marker`` for every text citation, and
  ``text[cl.start:cl.end] == cl.text`` for every claim; claim text is already stripped of
  surrounding whitespace (inner line breaks of a soft-wrapped sentence are kept). A marker such
  as ``[1, 2]`` yields one citation per number, all with the marker's offsets.
* ``Citation.label`` is the key into ``Answer.references`` for reference-based kinds (``"1"``,
  ``"foo"`` lower-cased, ``"^1"`` for footnotes) and the link text for links and anchors.
* ``Citation.url`` is the URL as written, except that a bare ``www.`` link gets ``https://`` and
  CommonMark backslash escapes are undone, in link destinations and bare URLs alike
  (``[Mercury](https://en.wikipedia.org/wiki/Mercury_\\(planet\\))`` cites ``…/Mercury_(planet)``,
  not ``…/Mercury_%5C(planet%5C)``); destinations also have their HTML entities decoded.
* ``<br>`` / ``<br/>`` / ``<br />`` (and U+2028) is a line break (chat UIs join a ``Sources:``
  list with it), so ``Sources:<br>[1] url<br>[2] url`` is a reference list; not inside a table
  cell (a row's line before its closing ``|``: a tag right after that ``|`` ends the row, as
  when a whole answer, table and all, was joined with ``<br>``) or inline code. ``&nbsp;`` is a
  space. ``Sources: [1] url`` (heading and first entry on one line) starts the list too. Inside
  a ``Sources:`` block an entry's URL may stand alone on the line under its title (``[1]
  Title<br>https://…``).
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
* Numbers in brackets that are data are no markers (code whose fences were lost, formulas):
  indexing ``x[1]``, ``my_list[2]``, ``df.iloc[1]``, ``a[0][1]``, ``m[i][j]`` (but ``grew[2]``,
  ``U.S.[1]``, ``COVID-19[1]`` stay markers); call arguments and nested lists ``np.array([1, 2])``,
  ``[[1, 2], [3, 4]]``; values ``x = [1, 2]``, ``"k": [1]``, ``[3, 1].sort()``; bracketed ions
  ``[EMIM][TfO]``; CSS attribute selectors ``[role="dialog"][open]``, ``[data-a][data-b]`` (a
  bracket with an attribute value, or an ``aria-``/``data-`` name). Silently: no citation, no
  finding. A bracket of several numbers not all of
  which are listed references is data too, with an info ``bracket_data_assumed`` finding, when
  its numbers are not ascending (``[3, 1, 2]``), it follows a word that introduces values (``the
  list [1, 2, 3]``, ``returns [1, 4, 9]``) or, none of them listed, prose goes on right after it
  (``Studies [1, 2] show``); otherwise it stays a marker and the missing numbers are
  ``unresolved_marker`` findings (a lost reference list is worth an error).
* Markers glued to a word (``markets13.`` for ``[1][3]``, ``growth2.`` for ``[2]``, as when a chat
  UI's superscripts are copied): read only when the answer has a numbered reference list and no
  bracketed numbered marker, the digits end a clause or line, every number they stand for is
  listed, and the word is neither an acronym nor a name that takes a number (``COVID19``,
  ``H2O``, ``mp3``, ``Python3``, ``2024`` never are). The whole number wins when it is listed
  (``12`` = ``[12]``), else one marker per digit. Each reading is a ``glued_marker_assumed``
  warning; the citation's marker is the digits. Such markers also make a trailing numbered list
  of URLs a reference list.
* A lead-in sentence is no claim: a source label (``Source: [1]``, ``Via [Reuters](url)``, ``Data
  from …``, optionally with source names) or a pointer (``For more information, see [the
  docs](url).``, ``See also: …``, ``Read more at …``) followed by nothing but filler words. Its
  citations go to the previous claim, like a marker on its own line (the claim it follows is the
  one a reader takes it to back), or to no claim when none precedes. A bare ``See [t](url) and
  [u](url).`` stays a claim, and a ``Sources:`` line that itself lists URLs stays the answer's
  reference list (``claim_index=None``).
* A bare URL inside a quoted passage (``“… as described at https://x.example/y …”``) is part of the
  quote (its text stays in ``Claim.quotes``), not a citation; a quote that is nothing but the
  URL (``"https://…"``) is no quote, so that URL is cited. A bare URL or quote right after ``=``
  is an attribute's value (``a[href="https://…"]``, ``div[role="dialog"]``): neither counts.
* Structured input: ``quote`` wins; otherwise the first quoted span in the claim text is used.
* Quotes: "…", “…”, «…», „…“/„…”, 「…」, 『…』 of any length; single curly ‘…’ only with at least
  three words (otherwise it is far more likely an apostrophe pair); straight single quotes are
  ignored. A quote nested inside another is dropped in favour of the outer one. When a claim has
  as many quotes as citations they are paired in order; otherwise each citation gets the nearest
  quote that ends before it, or the claim's first quote when none does.
* Markers, footnotes and shortcut references inside code spans / fenced blocks are ignored
  (``a[1]`` in code is not a citation); links and bare URLs there still count. A code span is
  a backtick run closed by the next run of the same length (````` ``a`b`` `````); a fence may
  be indented (a code block inside a list item).
* ``[0]`` and ranges longer than :data:`MAX_MARKER_RANGE` are not treated as citations of every
  number in them (``[0, 1]`` is an interval; ``[1-900]`` becomes a ``malformed_marker`` finding).
* Images ``![alt](url)`` and fragment-only links ``[t](#x)`` are not citations.
* Bare URLs (in prose and in reference lists) end as GitHub's autolinks do: trailing
  ``?!.,:*_~`` (and ``;`` and ``'``) are prose, so is a trailing entity such as ``&amp;``, a
  ``)`` or ``]`` is kept only while brackets balance (``…/Foo_(bar)``), a ``'`` only when it
  closes a pair of single quotes in the URL (``…/The_'Quoted'``), and quote marks end a URL.
  Inside ``<…>`` nothing is trimmed. A bare URL that is glued to CJK text on its left ends at the
  first CJK character; one that stands apart keeps CJK path characters (an IRI such as
  ``https://zh.wikipedia.org/wiki/北京``).
* Duplicate reference ids: the first definition wins (CommonMark); the duplicate is a
  ``duplicate_reference`` finding, a warning when both name the same URL, an error otherwise.
"""

from __future__ import annotations

import bisect
import html
import itertools
import re
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from citeguard.models import (
    Answer,
    Citation,
    CitationKind,
    CitationOrigin,
    CitationStatus,
    Claim,
    Finding,
    Severity,
)
from citeguard.providers.base import (
    ProviderAnswer,
    ProviderCitation,
    read_references,
    strip_tracking,
)
from citeguard.providers.dispatch import read_provider
from citeguard.text import (
    ANSWER_TERMINATOR_RE,
    finditer_lines,
    fold_whitespace,
    has_word,
    is_answer_sentence_end,
    trim_span,
    word_set,
)
from citeguard.web.urls import DEFAULT_ALLOWED_SCHEMES, UrlProblem, normalize_url

if TYPE_CHECKING:
    from citeguard.policy import Policy

__all__ = ["MAX_MARKER_RANGE", "AnswerLimits", "parse_answer"]

MAX_MARKER_RANGE = 50
"""The longest ``[a-b]`` range expanded into one citation per number."""

_AXIS = "validity"

# --------------------------------------------------------------------------------------------
# Patterns. Every repetition is over a class that excludes the construct's own delimiters, so a
# failed attempt at one position scans at most up to the next delimiter: linear overall.
# --------------------------------------------------------------------------------------------

_LINK_TEXT = r"(?:[^\[\]\n]|\[[^\[\]\n]*\])*"
_LINK_DEST = (
    # "\(" / "\)" are CommonMark escapes: one unit, so they never open or close a group.
    r"[ \t]*(?:<(?P<adest>[^<>\n]*)>|(?P<dest>(?:[^\s()\\]|\\\S|\((?:[^\s()\\]|\\\S)*\))*))"
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
# A markdown backslash escape ("Mercury_\(planet\)", "a\_b") continues a bare URL; it is
# unescaped in Citation.url (the marker keeps the text as written).
_MD_ESCAPE = r"\\[!-/:-@\[-`{-~]"
_MD_ESCAPE_SPLIT = re.compile(r"\\([!-/:-@\[-`{-~])")
_BARE = re.compile(
    r"(?<![A-Za-z0-9@.\-+])(?:(?:https?|ftp|file)://|www\.)(?:"
    + _URL_CHARS
    + "|"
    + _MD_ESCAPE
    + r")+",
    re.IGNORECASE,
)
_OTHER_SCHEME = re.compile(
    r"(?<![A-Za-z0-9+.\-])(?:javascript|vbscript|data|file|ftp|mailto|about|blob|tel|sms|ws|wss"
    r"|gopher|chrome|view-source|[a-z][a-z0-9+.\-]{1,30}(?=:\/\/)):" + _URL_CHARS + r"+",
    re.IGNORECASE,
)
_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\u3040-\u30ff]")
# GitHub's autolink rule (``?!.,:*_~`` never end a URL) plus ``;`` and the quote ``'``; a
# trailing backslash is what is left of an escape whose character was trimmed.
_TRAILING_PUNCT = frozenset(".,;:!?'*_~\\")

_ANCHOR_OPEN = re.compile(r"<a\s[^<>]*>", re.IGNORECASE)
_ANCHOR_CLOSE = re.compile(r"</a\s*>", re.IGNORECASE)
_HREF = re.compile(r"\bhref\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'>]+))", re.IGNORECASE)
_TAG = re.compile(r"<[^<>]*>")

_NONEMPTY_LINE = re.compile(r"[^\n]+")
_BACKTICKS = re.compile(r"`+|\n")
# a fence may be indented (a code block inside a list item)
_FENCE = re.compile(r"[ \t]*+(`{3,}|~{3,})")

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
# Possessive runs: "[ \t]*\|?[ \t]*" would try every split of a 100 kB run of spaces.
_HRULE = re.compile(r"[ \t]*+(?:(?:-[ \t]*+){3,}+|(?:\*[ \t]*+){3,}+|(?:_[ \t]*+){3,}+)")
_TABLE_SEP = re.compile(
    r"[ \t]*+(?:\|[ \t]*+)?:?-{2,}+:?[ \t]*+(?:\|[ \t]*+:?-{2,}+:?[ \t]*+)*+(?:\|[ \t]*+)?"
)

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

_ABSORBABLE: frozenset[str] = frozenset({"numbered", "footnote", "reference_link", "annotation"})
# origins whose URLs carry tracking parameters the provider added (matched without them)
_PROVIDER_ORIGINS: frozenset[str] = frozenset({"openai", "anthropic", "gemini", "perplexity"})


# --------------------------------------------------------------------------------------------
# Internal records
# --------------------------------------------------------------------------------------------


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

    defs: dict[str, _RefDef] = field(default_factory=dict)
    def_lines: set[int] = field(default_factory=set)
    source_lines: set[int] = field(default_factory=set)  # not claims; their links still count
    code_lines: set[int] = field(default_factory=set)
    findings: list[Finding] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------------


def parse_answer(
    text: str | Sequence[Mapping[str, Any]] | ProviderAnswer | object,
    *,
    allowed_schemes: frozenset[str] = DEFAULT_ALLOWED_SCHEMES,
    references: Sequence[Any] | Mapping[Any, Any] | None = None,
    documents: Mapping[int | str, str] | None = None,
    limits: AnswerLimits | None = None,
) -> Answer:
    """Parse an answer into claims and citations, with character offsets into the answer text.

    ``text`` is either the answer as markdown/plain text/HTML fragments, or structured input: a
    sequence of ``{"claim": str, "url": str | list[str], "quote": str | None}`` mappings (one
    claim per item; citations then have ``start == end == -1`` and ``Answer.text`` is the claims
    joined by newlines), or a provider response (an OpenAI, Anthropic, Gemini or Perplexity SDK
    object, its dict or its JSON text, or a :class:`~citeguard.providers.ProviderAnswer`): its
    text parsed with its citation objects bound to the claims they back, and the searches it
    reports in ``Answer.searches``. ``allowed_schemes`` is the URL scheme allow-list
    (``Policy.fetch``'s).

    ``references``: sources that arrive beside a text (a list: ``[1]`` cites the first; a
    mapping: ``[t][key]`` / ``[key]`` cite by key; each a URL or a mapping/object with ``url``
    and ``title``). A text that cites none of them with a marker lists them all as ``external``
    citations of no claim. ``documents``: ``{document_index or title: url}`` for an Anthropic
    response's document citations, which carry no URL (without it they are ``not_checkable``).

    Never raises on bad input: problems are :class:`~citeguard.models.Finding` values with codes
    ``unresolved_marker``, ``unused_reference`` (warning), ``malformed_url``, ``blocked_scheme``,
    ``reference_without_url``, ``duplicate_reference``, ``malformed_marker``,
    ``structured_invalid_item``, ``structured_missing_field``, ``not_checkable`` and
    ``invalid_input``; what a heuristic assumed is ``glued_marker_assumed`` (warning) or
    ``bracket_data_assumed`` (info).
    """
    if limits is not None:
        return limits.parse(
            text, allowed_schemes=allowed_schemes, references=references, documents=documents
        )
    provider = read_provider(text, documents=documents)
    if provider is not None:
        return _parse_provider(provider, allowed_schemes, references)
    if isinstance(text, str):
        return _parse_text(text, allowed_schemes, _Source.of(None, references))
    if isinstance(text, Sequence) and not isinstance(text, bytes | bytearray):
        return _parse_structured(text, allowed_schemes)
    return Answer(
        text="",
        findings=[
            Finding(
                code="invalid_input",
                message=(
                    "answer must be text, a list of {claim, url, quote} items or a provider "
                    "response (or its item, choice, message or content part), "
                    f"not {type(text).__name__}"
                ),
                axis=_AXIS,
            )
        ],
    )


@dataclass(frozen=True, slots=True)
class AnswerLimits:
    """How much of one answer is checked (``Policy.max_answer_chars``, ``max_claims``,
    ``max_citations``). Time, memory and the garbage collector's pauses all grow with the
    claims an answer holds, so a hostile answer is cut, not worked through: a text over
    ``max_chars`` is not parsed, and past ``max_claims`` claims or ``max_citations`` citations
    only the first ones are kept. Either way an ``answer_too_large`` error finding fails the
    validity axis: an answer that was not checked whole never passes."""

    max_chars: int
    max_claims: int
    max_citations: int

    @classmethod
    def of(cls, policy: Policy) -> AnswerLimits:
        return cls(policy.max_answer_chars, policy.max_claims, policy.max_citations)

    def parse(
        self,
        answer: object,
        *,
        allowed_schemes: frozenset[str],
        references: Sequence[Any] | Mapping[Any, Any] | None,
        documents: Mapping[int | str, str] | None,
    ) -> Answer:
        if isinstance(answer, str) and len(answer) > self.max_chars:
            return Answer(
                text="",
                findings=[
                    self._finding(
                        f"the answer has {len(answer):,} characters; the policy checks at most "
                        f"{self.max_chars:,} (Policy.max_answer_chars)",
                        chars=len(answer),
                    )
                ],
            )
        items = None
        if isinstance(answer, Sequence) and not isinstance(answer, str | bytes | bytearray):
            items = len(answer)
            if items > self.max_claims and read_provider(answer) is None:
                answer = answer[: self.max_claims]  # one claim per item: the rest is not read
        parsed = parse_answer(
            answer, allowed_schemes=allowed_schemes, references=references, documents=documents
        )
        return self._cut(parsed, items)

    def _cut(self, parsed: Answer, items: int | None) -> Answer:
        claims, citations = len(parsed.claims), len(parsed.citations)
        over = (items or 0) > self.max_claims
        if not over and claims <= self.max_claims and citations <= self.max_citations:
            return parsed
        keep, cited = 0, 0  # the longest run of leading claims within both caps
        for claim in parsed.claims[: self.max_claims]:
            last = max(claim.citation_indices, default=-1) + 1
            if max(cited, last) > self.max_citations:
                break
            cited, keep = max(cited, last), keep + 1
        cited = cited if keep < claims else min(citations, self.max_citations)
        what = (
            f"{items:,} structured items"
            if over and items is not None
            else f"{claims:,} claims and {citations:,} citations"
        )
        finding = self._finding(
            f"the answer has {what}; the policy checks at most {self.max_claims:,} claims and "
            f"{self.max_citations:,} citations (Policy.max_claims, max_citations): only the "
            f"first {keep:,} claims were checked",
            claims=claims if items is None else items,
            citations=citations,
            checked_claims=keep,
        )
        return parsed.model_copy(
            update={
                "claims": parsed.claims[:keep],
                "citations": parsed.citations[:cited],
                "findings": [*parsed.findings, finding],
            }
        )

    @staticmethod
    def _finding(message: str, **details: int) -> Finding:
        return Finding(code="answer_too_large", message=message, axis=_AXIS, details=details)


# --------------------------------------------------------------------------------------------
# Text input
# --------------------------------------------------------------------------------------------


def _parse_text(
    text: str, allowed_schemes: frozenset[str], source: _Source | None = None
) -> Answer:
    # ``work`` is ``text`` with its <br> line breaks made newlines (same length, same offsets):
    # layout, markers and claims are read from ``work``; markers and claims are cut from ``text``.
    work = _html_breaks(text)
    lines = _split_lines(work)
    layout = _scan_layout(work, lines)
    if source is not None:
        source.add_definitions(layout)

    def_spans = [(lines[i].start, lines[i].end) for i in sorted(layout.def_lines)]
    code_spans = _code_spans(work, lines, layout)
    masked = _mask(work, def_spans)

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

    bare_hits = _find_bare(masked)
    hits.extend(bare_hits)
    if not any(h.kind == "numbered" for h in bracket_hits):
        glued_mask = _mask(masked, [(h.start, h.end) for h in bare_hits])
        hits.extend(_find_glued(glued_mask, code_spans, layout.defs))
    hits.sort(key=lambda h: h.start)
    if source is not None:
        hits = source.mark(hits)

    quotes = _find_quotes(_mask(masked, [(h.start, h.end) for h in hits] + code_spans))
    # (a provider's annotation over such a URL still makes it a citation)
    quoted = _inside_quotes(
        [h for h in hits if h.kind == "bare_url" and h.provider is None], quotes
    )
    if quoted:  # a URL inside a quoted passage is part of the quote, not a citation of its own
        hits = [h for h in hits if id(h) not in quoted]
        quotes = _find_quotes(_mask(masked, [(h.start, h.end) for h in hits] + code_spans))
    claims_spans, orphan_spans = _split_claims(work, lines, layout, hits, quotes)

    return _assemble(
        text=text,
        hits=hits,
        claim_spans=claims_spans,
        orphan_spans=orphan_spans,
        quotes=quotes,
        layout=layout,
        allowed_schemes=allowed_schemes,
        source=source,
    )


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


def _trim_url(url: str) -> str:
    """Drop trailing prose punctuation, unbalanced closers and emphasis from a bare URL.

    As GitHub's autolinks: ``?!.,:*_~`` (and here ``;`` and ``'``) at the end are prose, a ``)``
    is kept only while parentheses balance, and a trailing entity (``&amp;``) is dropped whole.
    """
    opens = url.count("(")
    closes = url.count(")")
    quotes = url.count("'")
    sq_opens = url.count("[")
    sq_closes = url.count("]")
    end = len(url)
    while end > 0:
        ch = url[end - 1]
        if ch == ";":
            amp = url.rfind("&", max(0, end - 34), end - 1)
            end = amp if amp >= 0 and url[amp + 1 : end - 1].isalnum() else end - 1
        elif ch == "'" and quotes % 2 == 0:
            break  # it closes a pair of single quotes in the path (".../The_'Quoted'")
        elif ch in _TRAILING_PUNCT:
            quotes -= ch == "'"
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
        url = bare.group()
        if not _angle_autolink(rest, bare.start(), bare.end()):
            url = _trim_url(url)
        url = _unescape(url, entities=False)
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
    return _unescape(dest.strip())


def _unescape(url: str, *, entities: bool = True) -> str:
    """Undo CommonMark backslash escapes (``Mercury_\\(planet\\)`` → ``Mercury_(planet)``) and,
    in link destinations, HTML entities; an escaped ``\\&`` stays a literal ``&``."""
    if "\\" not in url:
        return html.unescape(url) if entities else url
    parts = _MD_ESCAPE_SPLIT.split(url)  # odd indexes: the escaped characters
    if not entities:
        return "".join(parts)
    return "".join(p if k % 2 else html.unescape(p) for k, p in enumerate(parts))


def _angle_autolink(text: str, start: int, end: int) -> bool:
    """``<https://…>``: the brackets delimit the URL, so nothing in it is trimmed as prose."""
    return start > 0 and text[start - 1] == "<" and text.startswith(">", end)


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
        if inline is not None:
            # "Sources: [1] https://a.org" (the list's first entry shares the heading's line,
            # as when <br> separated them): a definition, and the section goes on.
            entry = _BRACKET_NUM_ENTRY.fullmatch(s, inline.end()) or _LIST_NUM_ENTRY.fullmatch(
                s, inline.end()
            )
            found = _extract_url(entry.group(2)) if entry is not None else None
            if entry is not None and found is not None:
                _add_definition(layout, _normalize_key(entry.group(1)), found[0], i, lines)
                layout.def_lines.add(i)
                in_section = True
            elif _extract_url(s[inline.end() :]) is not None:
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
        url = _continuation_url(lines, i, in_section=in_section)
        from_next = url is not None
    _add_definition(layout, key, url, i, lines)
    used = 2 if from_next else 1
    layout.def_lines.update(range(i, i + used))
    return used


def _continuation_url(lines: list[_Line], i: int, *, in_section: bool) -> str | None:
    """The next line that carries the entry's URL: indented ("1. Long title\\n   https://…"),
    or, inside a ``Sources:`` block, a line that is nothing but the URL ("[1] Title<br>https://…",
    as chat UIs lay out a source)."""
    if i + 1 >= len(lines):
        return None
    nxt = lines[i + 1].text
    if lines[i + 1].gap_before or _ENTRY_START.match(nxt.strip() + " "):
        return None
    found = _extract_url(nxt)
    if found is None:
        return None
    if nxt[:1].isspace():
        return found[0]
    alone = in_section and found[1] == 0 and not any(ch.isspace() for ch in nxt.strip())
    return found[0] if alone else None


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
    if not cited:  # no bracketed marker: markers glued to words ("markets13.") may cite it
        keys = {key for _, key, _ in candidates}
        for m in _GLUED.finditer(text, 0, block_start):
            cited.update(key for _, key in _glued_reading(m.group(1), m.group(2), keys))
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
    spans.extend(_inline_code(text))
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
    data_ends: set[int] = set()  # where a bracket read as data ends ("[[1, 2], [3, 4]]")
    indexed: set[str] = set()  # words seen indexed ("arr" of "arr[0]")
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
            zero = "0" in numbers
            if _bracket_is_code(masked, start, text_end, data_ends, indexed, zero=zero):
                data_ends.add(text_end)  # "[0, 1]" is an interval; "x[1]", "f([1, 2])" code
                pos = text_end
                continue
            why = _data_list_reason(masked, start, text_end, label_text, numbers, defs)
            if why is not None:
                marker = text[start:text_end]
                findings.append(
                    Finding(
                        code="bracket_data_assumed",
                        message=(
                            f"{marker!r} was read as data (a list or range of values), not as "
                            f"citation markers: {why}"
                        ),
                        severity=Severity.INFO,
                        axis=_AXIS,
                        details={"marker": marker, "start": start},
                    )
                )
                data_ends.add(text_end)
                pos = text_end
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
        if _is_selector(label_text):
            pos = text_end  # "[role=\"dialog\"][1]": a CSS selector, then whatever follows
            continue
        ref = m.group("ref")
        if ref is not None and not in_code:
            key = _normalize_key(ref if ref.strip() else label_text)
            # An undefined id is a broken citation when it looks like an id ("[t][nyt]"); with
            # spaces it is more likely bracketed prose ("[sic][emphasis added]").
            # "m[i][j]" (indexing) and "[EMIM][TfO]" (a formula) are neither.
            if key and (
                key in defs
                or (
                    len(key) <= 40
                    and " " not in key
                    and not _ref_pair_is_data(masked, start, label_text, ref)
                )
            ):
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


# ---- numbers in brackets that are data --------------------------------------------------------

# A bracket after one of these words holds values ("the list [1, 2, 3]", "returns [1, 4, 9]").
_VALUE_WORDS = word_set(
    "list lists array arrays vector vectors tuple tuples set sets sequence sequences matrix"
    " input inputs output outputs value values element elements interval range ranges"
    " coordinates shape return returns returned yield yields gives equals becomes contains"
    " prints outputs is are was were"
)
_TLDS = word_set("com org net edu gov io co uk de fr info ai eu int us ca au jp cn in")
# "[EMIM][TfO]", "[BMIM][PF6]": bracketed ions, each a capitalised token without spaces.
_FORMULA_TOKEN = re.compile(r"[A-Z][A-Za-z0-9+\-()]{0,15}")
# A CSS attribute selector's bracket: "[role=\"dialog\"]", "[href^='http' i]", "[data-open]".
_ATTRIBUTE = re.compile(
    r"[ \t]*+(?P<name>[A-Za-z_][\w:.-]{0,60}+)[ \t]*+"
    r"(?P<value>[~|^$*]?=[ \t]*+(?:\"[^\"\n]*+\"|'[^'\n]*+'|[^\s\]\"']++)(?:[ \t]++[iIsS])?+)?+"
    r"[ \t]*+"
)
_LOOKBACK = 40  # how far the data heuristics look back; a bound that keeps the scan linear
_SPACE = re.compile(r"\s")
_CODE_OPERATOR = re.compile(r"[ \t]{0,3}(?:[=!<>+\-*/%]=|=|\+[ \t])")  # "arr[1] = 5", "a[1] + b"


def _glued_base(text: str, pos: int) -> tuple[str, bool]:
    """The identifier a bracket at ``pos`` is glued to, walking back over glued bracket groups
    (``x`` for the ``[1]`` of ``x[0][1]``), and whether one of those groups is no citation
    marker (``[0]``, ``[i]``). ``""`` when the bracket is not glued to a word."""
    lo = max(0, pos - _LOOKBACK)
    p = pos
    odd_group = False
    groups = 0
    while p > lo and text[p - 1] == "]":
        q = text.rfind("[", lo, p - 1)
        groups += 1
        if q < 0 or groups > 4 or _SPACE.search(text, q, p) is not None:
            return "", False  # ("[a][b][c][d][e]…": no index goes that deep)
        inner = text[q + 1 : p - 1]
        if not (
            inner.startswith("^")
            or (
                _NUM_MARKER_TEXT.fullmatch(inner)
                and ("0" not in inner or "0" not in _expand_numbers(inner)[0])
            )
        ):
            odd_group = True
        p = q
    s = p
    while s > lo and text[s - 1].isascii() and (text[s - 1].isalnum() or text[s - 1] in "_."):
        s -= 1
    return text[s:p], odd_group


def _is_code_base(base: str) -> bool:
    """``x``, ``my_list``, ``df.iloc``: an identifier being indexed, not a word a marker follows
    (``grew[2]``, ``U.S.[1]``, ``reuters.com[1]`` stay markers)."""
    if not base or base.endswith("."):
        return False
    if len(base) == 1:
        return base.islower()
    if "_" in base.strip("._"):
        return True  # "my_list"; "_word_" is emphasis
    parts = base.split(".")
    return (
        len(parts) >= 2
        and all(part.isidentifier() for part in parts)
        and parts[0][0].islower()
        and parts[-1].lower() not in _TLDS
    )


def _bracket_is_code(
    text: str, start: int, end: int, data_ends: set[int], indexed: set[str], *, zero: bool
) -> bool:
    """Whether the numbers in ``text[start:end]`` are code: ``x[1]``, ``arr[0][2]``, ``arr[1] = 5``,
    ``np.array([1, 2, 3])``, ``[[1, 2], [3, 4]]``, ``x = [1, 2]``, ``{"k": [1]}``, ``[1, 2].sort()``
    (code whose fences were lost; markers inside real code spans are skipped earlier). ``zero``:
    the bracket holds a 0 (never a marker). ``indexed`` collects the words seen indexed
    (``arr[0]``), so that a later ``arr[1]`` is code as well."""
    base, odd_group = _glued_base(text, start)
    if base and (
        zero
        or odd_group
        or base in indexed
        or _is_code_base(base)
        or _CODE_OPERATOR.match(text, end) is not None
    ):
        indexed.add(base)
        return True
    if zero:
        return True
    before = text[start - 1] if start else ""
    if before == "[" or (
        before == "(" and start > 1 and (text[start - 2].isalnum() or text[start - 2] in "_.]")
    ):
        return True  # nested list, call argument
    p = start
    while p > 0 and start - p < _LOOKBACK and text[p - 1] in " \t":
        p -= 1
    prev = text[p - 1] if p else ""
    if prev == "=" or (prev == ":" and p > 1 and text[p - 2] in "\"'"):
        return True  # assignment, JSON value
    if prev == "," and (p - 1) in data_ends:
        return True  # the next element of a list of lists
    after = text[end : end + 2]
    return len(after) == 2 and after[0] == "." and (after[1] == "_" or after[1].islower())


def _data_list_reason(
    text: str, start: int, end: int, body: str, numbers: list[str], defs: Mapping[str, _RefDef]
) -> str | None:
    """Why a bracket of several numbers, not all of them listed references, reads as data.

    ``None`` (it stays a marker; missing numbers are ``unresolved_marker`` findings) unless its
    numbers are not ascending, it follows a word that introduces values ("the list", "returns",
    "is"), or, when none of its numbers is a listed reference, prose goes on right after it
    ("Studies [1, 2] show", where a marker would rather end a clause).
    """
    resolved = sum(k in defs for k in numbers)
    if len(numbers) < 2 or resolved == len(numbers):
        return None
    firsts = [int(m.group(1)) for m in _NUM_PART.finditer(body)]
    if any(b <= a for a, b in itertools.pairwise(firsts)):
        return "its numbers are not in ascending order"
    p = start
    while p > 0 and start - p < _LOOKBACK and text[p - 1] in " \t:":
        p -= 1
    w = p
    while w > 0 and p - w < 20 and text[w - 1].isalpha():
        w -= 1
    word = text[w:p].casefold()
    if word in _VALUE_WORDS:
        return f"it follows {text[w:p]!r}"
    q = end
    while q < len(text) and q - end < _LOOKBACK and text[q] in " \t":
        q += 1
    nxt = text[q] if q < len(text) else "\n"
    if not resolved and nxt.isalnum():
        return "the sentence goes on right after it, where a citation marker ends a clause"
    return None


def _ref_pair_is_data(text: str, start: int, label_text: str, ref: str) -> bool:
    """``m[i][j]`` indexes, ``[EMIM][TfO]`` is a formula and ``[role="dialog"][open]`` a CSS
    selector: not a ``[text][id]`` reference."""
    base, _ = _glued_base(text, start)
    if _is_code_base(base):
        return True
    if _is_selector(label_text, ref):
        return True
    a, b = label_text.strip(), (ref.strip() or label_text.strip())
    if not (_FORMULA_TOKEN.fullmatch(a) and _FORMULA_TOKEN.fullmatch(b)):
        return False
    return any(
        sum(ch.isupper() for ch in t) >= 2 or any(ch.isdigit() for ch in t) or t[-1] in "+-"
        for t in (a, b)
    )


def _is_selector(*brackets: str) -> bool:
    """Whether glued brackets read as CSS attribute selectors: each an attribute name with an
    optional value, and one of them with a value (``[role="dialog"]``) or an ``aria-`` /
    ``data-`` name, which no reference id looks like."""
    found = [_ATTRIBUTE.fullmatch(b) for b in brackets if b.strip()]
    if not found or not all(found):
        return False
    return any(
        m is not None
        and (m.group("value") is not None or m.group("name").startswith(("aria-", "data-")))
        for m in found
    )


# ---- markers glued to the word before them ----------------------------------------------------

# "markets13." / "growth2": a chat UI's superscript markers lost their brackets when copied. A
# word of three or more letters, then one to three digits, then the end of a clause or line.
_GLUED = re.compile(
    r"(?<![\w/.=?&#%@+\-])([^\W\d_]{3,})(\d{1,3})"
    r"(?=[;:!?)\]*]|[.,](?!\d)|[ \t]*(?:\r?\n|$))"
)
# Words that take a number as part of a name ("Covid19", "Python3", "Windows11", "base64").
_GLUED_DENY = word_set(
    "covid sars python windows iphone ipad galaxy pixel xbox playstation web llama gemini claude"
    " mistral qwen gpt ubuntu android macos office excel version gen level phase type class grade"
    " stage tier series model mark chapter section page room route zone sector block part step"
    " round season episode base utf sha ipv log top win html css http ddr usb wifi pcie area"
    " figure fig table item note appendix exhibit question problem exercise lesson unit"
)


def _glued_reading(word: str, digits: str, numbers: Container[str]) -> list[tuple[int, str]]:
    """The markers ``digits`` glued to ``word`` stand for, as (offset in digits, key); ``[]``
    when the reading is implausible: the word is an acronym or a name that takes a number
    (``COVID19``, ``mp3``, ``Python3``) or some number is not in the reference list. The whole
    number is preferred ("12" is [12] when the list has a 12), else one marker per digit."""
    if not word[1:].islower() or word.casefold() in _GLUED_DENY:
        return []
    if digits[0] != "0" and str(int(digits)) in numbers:
        return [(0, str(int(digits)))]
    if (
        len(digits) > 1
        and "0" not in digits
        and len(set(digits)) == len(digits)
        and all(d in numbers for d in digits)
    ):
        return list(enumerate(digits))
    return []


def _find_glued(
    masked: str, code_spans: list[tuple[int, int]], defs: Mapping[str, _RefDef]
) -> list[_Hit]:
    """Glued markers (``markets13`` = [1][3]); called only when the answer has a numbered
    reference list and no bracketed numbered marker. Each carries a ``glued_marker_assumed``
    note saying what was read."""
    numbers = {k for k in defs if k.isdigit()}
    if not numbers:
        return []
    code_starts = [s for s, _ in code_spans]
    hits: list[_Hit] = []
    for m in _GLUED.finditer(masked):
        word, digits = m.group(1), m.group(2)
        reading = _glued_reading(word, digits, numbers)
        start = m.start(2)
        if not reading or _in_spans(start, code_starts, code_spans):
            continue
        labels = "".join(f"[{key}]" for _, key in reading)
        note: dict[str, Any] = {
            "code": "glued_marker_assumed",
            "message": (
                f"{m.group()!r} was read as {word!r} followed by the citation marker(s) {labels}: "
                "the answer has a numbered reference list but no bracketed markers, as when a "
                "chat UI's superscripts are copied as plain digits"
            ),
            "severity": Severity.WARNING,
            "axis": _AXIS,
            "details": {"marker": digits, "word": word, "labels": [k for _, k in reading]},
        }
        for k, (offset, key) in enumerate(reading):
            s = start + offset
            e = start + len(digits) if len(reading) == 1 else s + 1
            hits.append(
                _Hit(s, e, "numbered", keys=(key,), label=key, note=note if k == 0 else None)
            )
    return hits


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
        if not _angle_autolink(masked, start, start + len(raw)):
            raw = _trim_url(raw)
        if len(raw) <= (4 if raw.lower().startswith("www.") else raw.find("//") + 2):
            continue  # "https://" or "www." alone names nothing
        if before == "=" or (before in "\"'" and start > 1 and masked[start - 2] == "="):
            continue  # an attribute or setting's value (a[href="https://…"], src=…), not a cite
        url = _unescape(raw, entities=False)
        url = "https://" + url if url.lower().startswith("www.") else url
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


# ---- quotes ---------------------------------------------------------------------------------


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
            normalized_url=(
                normalize(p.url, p.claim_index, strip=p.origin in _PROVIDER_ORIGINS)
                if p.checkable
                else None
            ),
            kind=p.kind,
            marker=p.marker,
            label=p.label,
            start=p.start,
            end=p.end,
            claim_index=p.claim_index,
            quote=p.quote,
            origin=p.origin,
            title=p.title,
            confidence=p.confidence,
            provider_redirect=p.redirect,
        )
        for k, p in enumerate(pending)
    ]


class _Normalizer:
    """normalize_url once per distinct URL; problems become findings once per URL."""

    def __init__(self, allowed_schemes: frozenset[str], findings: list[Finding]) -> None:
        self._allowed = allowed_schemes
        self._findings = findings
        self._seen: dict[tuple[str, bool], str | None] = {}

    def __call__(self, url: str, claim_index: int | None, *, strip: bool = False) -> str | None:
        """``strip``: match the URL without its tracking parameters (a provider's URL)."""
        if (url, strip) in self._seen:
            return self._seen[url, strip]
        try:
            target = strip_tracking(url) if strip else url
            result: str | None = normalize_url(target, allowed_schemes=self._allowed)
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
        self._seen[url, strip] = result
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
    origin: CitationOrigin = "markdown"
    title: str | None = None
    confidence: float | None = None
    redirect: bool = False  # a provider redirect, resolved by the Guard
    checkable: bool = True  # False: a document citation with no URL (``url`` names it)
    own: bool = False  # the quote is the provider's, not one found in the claim

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
        if ref.quote:
            self.quote, self.own = ref.quote, True
        return self


def _assemble(
    *,
    text: str,
    hits: list[_Hit],
    claim_spans: list[tuple[int, int]],
    orphan_spans: list[tuple[int, int, int]],
    quotes: list[tuple[int, int, str]],
    layout: _Layout,
    allowed_schemes: frozenset[str],
    source: _Source | None = None,
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
        if hit.note is not None:
            findings.append(Finding(**hit.note, claim_index=claim_index))
        if hit.url is not None:
            pending.append(
                _PendingCitation(
                    hit.url, hit.kind, marker, hit.label, hit.start, hit.end, claim_index
                ).from_provider(hit.provider, hit.origin)
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
                _PendingCitation(
                    ref.url, hit.kind, marker, key, hit.start, hit.end, claim_index
                ).from_reference(ref)
            )

    if source is not None:
        pending = source.assemble(pending, layout, claim_spans, claim_of, text)

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
        # a quote the provider gave (Anthropic's cited_text) is the one to verify
        _bind_quotes(claim_quotes.get(ci, []), [pending[k] for k in cits if not pending[k].own])

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
                _PendingCitation(
                    url, "structured", url, None, -1, -1, claim_index, quote, origin="structured"
                )
            )

    citations = _citations(pending, allowed_schemes, findings)
    return Answer(text="\n".join(texts), claims=claims, citations=citations, findings=findings)


# --------------------------------------------------------------------------------------------
# Provider answers and references passed beside the text
# --------------------------------------------------------------------------------------------


def _parse_provider(
    answer: ProviderAnswer,
    allowed_schemes: frozenset[str],
    references: Sequence[Any] | Mapping[Any, Any] | None,
) -> Answer:
    """A provider response: its text parsed with its citation objects, its searches kept."""
    parsed = _parse_text(answer.text, allowed_schemes, _Source.of(answer, references))
    # a chat message read alone lacks its completion's sources, unless they were passed
    notes = [f for f in answer.findings if references is None or f.code != "sources_not_in_part"]
    return parsed.model_copy(
        update={
            "findings": [*parsed.findings, *notes],
            "searches": list(answer.searches),
        }
    )


def _same_url(a: str, b: str) -> bool:
    """The same page, tracking parameters aside."""
    try:
        return normalize_url(strip_tracking(a)) == normalize_url(strip_tracking(b))
    except ValueError:
        return a.strip() == b.strip()


@dataclass(slots=True)
class _Source:
    """What arrives beside the text: a provider's citation objects and numbered references
    (Perplexity's ``citations``), or the caller's ``references=``."""

    origin: CitationOrigin
    markers: list[ProviderCitation]  # ranges that are markers (OpenAI url_citation)
    spans: list[ProviderCitation]  # ranges of supported text (Anthropic, Gemini), or none
    refs: list[tuple[str, ProviderCitation | None]]
    ref_origin: CitationOrigin
    # markers over a link of the text that names another URL: (citation, where that link is)
    late: list[tuple[ProviderCitation, int]] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        answer: ProviderAnswer | None,
        references: Sequence[Any] | Mapping[Any, Any] | None,
    ) -> _Source | None:
        refs = read_references(references)
        if answer is None:
            return cls("references", [], [], refs, "references") if refs else None
        markers: list[ProviderCitation] = []
        spans: list[ProviderCitation] = []
        for c in answer.citations:
            (markers if c.marks == "marker" and 0 <= c.start < c.end else spans).append(c)
        ref_origin: CitationOrigin = "references"
        if answer.references:
            # the provider's numbered sources first; passed ones fill other keys
            numbered = [(str(n), r) for n, r in enumerate(answer.references, start=1)]
            taken = {k for k, _ in numbered}
            refs = numbered + [(k, r) for k, r in refs if k not in taken]
            ref_origin = answer.origin
        return cls(answer.origin, markers, spans, refs, ref_origin)

    def add_definitions(self, layout: _Layout) -> None:
        """The passed references as definitions the text's markers resolve to (the text's own
        definition of a key wins)."""
        for raw_key, ref in self.refs:
            key = _normalize_key(raw_key)
            url = ref.url if ref is not None else None
            existing = layout.defs.get(key)
            if existing is not None:
                if existing.url != url:
                    layout.findings.append(
                        Finding(
                            code="duplicate_reference",
                            message=(
                                f"reference [{key}] is defined in the answer ({existing.url!r}) "
                                f"and passed beside it ({url!r}); the answer's is used"
                            ),
                            severity=Severity.WARNING,
                            axis=_AXIS,
                            url=url,
                            details={"label": key, "first_url": existing.url},
                        )
                    )
                continue
            layout.defs[key] = _RefDef(
                key=key,
                url=url,
                line=-1,
                origin=self.ref_origin,
                title=ref.title if ref is not None else None,
                quote=ref.quote if ref is not None else None,
            )

    def mark(self, hits: list[_Hit]) -> list[_Hit]:
        """The provider's marker ranges onto the text's hits: a range over a link to the same
        page annotates that link (one citation); a range over no hit is a marker of its own."""
        if not self.markers:
            return hits
        added: list[_Hit] = []
        for cit in self.markers:
            over = [h for h in (*hits, *added) if h.start < cit.end and cit.start < h.end]
            same = next(
                (
                    h
                    for h in over
                    if h.url is not None
                    and h.provider is None
                    and cit.url is not None
                    and _same_url(h.url, cit.url)
                ),
                None,
            )
            if same is not None:
                same.provider, same.origin = cit, self.origin
            elif over:
                self.late.append((cit, min(h.start for h in over)))
            elif cit.url is not None:
                added.append(
                    _Hit(
                        cit.start,
                        cit.end,
                        "annotation",
                        url=cit.url,
                        label=cit.title,
                        provider=cit,
                        origin=self.origin,
                    )
                )
        return sorted([*hits, *added], key=lambda h: h.start) if added else hits

    def assemble(
        self,
        pending: list[_PendingCitation],
        layout: _Layout,
        claim_spans: list[tuple[int, int]],
        claim_of: Callable[[int], int | None],
        text: str,
    ) -> list[_PendingCitation]:
        """The text's citations with the provider's span citations, the markers that overlap
        another link, and references no marker cites, in text order."""
        out = list(pending)
        for cit, pos in self.late:
            if cit.url is None:
                continue
            marker = text[cit.start : cit.end]
            out.append(
                _PendingCitation(
                    cit.url, "annotation", marker, cit.title, cit.start, cit.end, claim_of(pos)
                ).from_provider(cit, self.origin)
            )
        starts = [s for s, _ in claim_spans]
        for cit in self.spans:
            out.extend(self._spanned(cit, claim_spans, starts, layout.findings))
        passed = [d for d in layout.defs.values() if d.line == -1]
        if passed and not any(d.used for d in passed):
            # sources beside a text with no marker: cited by the answer as a whole
            for d in passed:
                d.used = True
                if d.url is None:
                    layout.findings.append(
                        Finding(
                            code="reference_without_url",
                            message=f"reference [{d.key}] passed beside the answer names no URL",
                            axis=_AXIS,
                            details={"label": d.key},
                        )
                    )
                    continue
                out.append(
                    _PendingCitation(d.url, "external", "", d.key, -1, -1, None).from_reference(d)
                )
        out.sort(key=lambda p: (p.start < 0, p.start))
        return out

    def _spanned(
        self,
        cit: ProviderCitation,
        claim_spans: list[tuple[int, int]],
        starts: list[int],
        findings: list[Finding],
    ) -> list[_PendingCitation]:
        """A citation of a span of text: one zero-width marker at the span's end in each claim
        the span covers (the claim before it when it covers none)."""
        claims: list[int] = []
        if 0 <= cit.start <= cit.end:
            i = max(0, bisect.bisect_right(starts, cit.start) - 1)
            if i < len(claim_spans) and claim_spans[i][1] <= cit.start:
                i += 1
            while i < len(claim_spans) and claim_spans[i][0] < max(cit.end, cit.start + 1):
                claims.append(i)
                i += 1
            if not claims and starts:
                j = bisect.bisect_right(starts, cit.start) - 1
                claims = [j] if j >= 0 else []
        places: list[tuple[int | None, int]] = [
            (ci, min(max(cit.end, claim_spans[ci][0]), claim_spans[ci][1])) for ci in claims
        ]
        places = places or [(None, -1)]
        out: list[_PendingCitation] = []
        for ci, pos in places:
            if cit.url is None:
                url = f"document:{cit.document or '?'}"
                findings.append(
                    Finding(
                        code="not_checkable",
                        message=f"the {self.origin} citation {cit.unchecked or 'names no URL'}",
                        severity=Severity.WARNING,
                        axis=_AXIS,
                        url=url,
                        claim_index=ci,
                        details={"document": cit.document, "origin": self.origin},
                    )
                )
            else:
                url = cit.url
            p = _PendingCitation(url, "annotation", "", cit.title, pos, pos, ci)
            p.from_provider(cit, self.origin)
            p.checkable = cit.url is not None
            out.append(p)
        return out

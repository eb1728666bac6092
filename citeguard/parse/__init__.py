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

The package, one module per sub-stage (in the order :func:`parse_answer` runs them):

================  ==========================================================================
``answer``        the entry point and :class:`AnswerLimits`; text, structured items and
                  provider responses each to their parser
``markdown``      ``<br>`` / ``&nbsp;`` as line breaks and spaces, lines, inline and fenced code
``references``    reference definitions, ``Sources:`` blocks, a trailing numbered list
``links``         link destinations, bare URLs and where they end, HTML anchors
``markers``       bracket constructs, numbers in brackets that are data, glued markers
``quotes``        quoted passages and how they bind to citations
``claims``        sentences of the body, markers and lead-ins given to their claim
``sources``       what arrives beside the text (provider citation objects, ``references=``)
``assemble``      markers resolved, URLs normalised, findings: the :class:`Answer`
``structured``    ``{claim, url, quote}`` items
``base``          the records and helpers the sub-stages share
================  ==========================================================================

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

from citeguard.parse.answer import AnswerLimits, parse_answer
from citeguard.parse.base import MAX_MARKER_RANGE

__all__ = ["MAX_MARKER_RANGE", "AnswerLimits", "parse_answer"]

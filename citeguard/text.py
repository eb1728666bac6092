"""One room for the text utilities that parsing and the checks share.

* **normalisation**: :func:`normalise` folds case, Unicode (NFKC), curly quotes, dashes, ellipses,
  soft hyphens, zero-width characters, ligatures and whitespace; :func:`special_pattern`,
  :func:`special_replacement` and :func:`fold` are its pieces, for callers that keep an offset map
  (:class:`~citeguard.checks.passage.PreparedText`); :func:`fold_whitespace` collapses runs of
  whitespace; :func:`strip_diacritics` drops combining marks;
* **stopwords**: one list per use, because what carries no meaning differs by task (see
  :data:`ENTAILMENT_STOPWORDS`, :data:`PARAPHRASE_STOPWORDS`, :data:`QUERY_STOPWORDS`);
* **tokens**: :func:`entailment_tokens`, :data:`PASSAGE_TOKEN_RE`, :data:`QUERY_TOKEN_RE`;
* **sentences**: :func:`sentence_spans` (claims and evidence), :func:`bounded_sentence_spans`
  (the same with long sentences cut), :func:`page_sentence_spans` (page text for paraphrase
  search) and :func:`is_answer_sentence_end` (an agent's answer, split into claims by
  :mod:`citeguard.parse`);
* **scans**: :func:`finditer_windowed` and :func:`finditer_lines` run a pattern over a long text
  as a series of bounded searches, so no single C call holds the interpreter lock for the
  whole text (a 1 MB answer: one ``finditer`` step took 80 ms in a thread, and the event loop
  waited for it).

Everything here is pure and linear in its input: every repetition is over a class that cannot
overlap what follows it, or is anchored so that a failed attempt is not retried from every
position of the same run.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Container, Iterator

from citeguard.lang import NO_SPACE_SCRIPTS, has_no_space_script, segment

__all__ = [
    "ALIGN_TOKEN_RE",
    "ANSWER_TERMINATOR_RE",
    "ENTAILMENT_STOPWORDS",
    "PARAPHRASE_STOPWORDS",
    "PASSAGE_TOKEN_RE",
    "QUERY_STOPWORDS",
    "QUERY_TOKEN_RE",
    "bounded_sentence_spans",
    "entailment_tokens",
    "finditer_lines",
    "finditer_windowed",
    "fold",
    "fold_chars",
    "fold_whitespace",
    "has_word",
    "is_answer_sentence_end",
    "normalise",
    "normalise_cased",
    "not_a_stop",
    "page_sentence_spans",
    "sentence_spans",
    "special_pattern",
    "special_replacement",
    "strip_diacritics",
    "title_parts",
    "trim_span",
    "word_set",
]

# --------------------------------------------------------------------------------------------
# Scans in bounded steps
# --------------------------------------------------------------------------------------------

# characters one search step covers at most (~0.3-3 ms of regex work, whatever the pattern)
SCAN_WINDOW = 1 << 15


def finditer_windowed(
    pattern: re.Pattern[str], text: str, *, overlap: int, window: int = SCAN_WINDOW
) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)`` as searches over at most ``window + overlap`` characters
    each: the same matches whenever no match is longer than ``overlap`` characters (a longer
    one may be cut or missed, so use this where a missed match only makes a check stricter).

    ``pattern`` must not match the empty string. Lookbehinds and ``\\b`` still see the text
    before each step (``pos`` is not slicing); a lookahead sees the real text, because a step
    reaches ``overlap`` characters past any match it returns."""
    n = len(text)
    if n <= window + overlap:
        yield from pattern.finditer(text)
        return
    pos = 0
    while pos < n:
        limit = min(n, pos + window)
        m = pattern.search(text, pos, min(n, limit + overlap))
        if m is None or (m.start() >= limit and limit < n):
            pos = limit  # no match starts in this step (one starting later is found again)
            continue
        yield m
        pos = max(m.end(), m.start() + 1)


def finditer_lines(
    pattern: re.Pattern[str], text: str, *, window: int = SCAN_WINDOW
) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)`` for a pattern that never matches across a newline and has no
    end anchor (``$``, ``\\Z``), as searches over runs of whole lines of about ``window``
    characters: exactly the same matches, because a step ends just before a newline, and a
    lookahead there that wants a word or any character but a newline fails (or, negated,
    holds) as it would on the newline itself. One line longer than ``window`` is one step."""
    n = len(text)
    pos = 0
    while pos < n:
        cut = n if n - pos <= window else text.find("\n", pos + window)
        if cut < 0:
            cut = n
        yield from pattern.finditer(text, pos, cut)
        pos = cut


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------

_WORD_CHAR_RE = re.compile(r"\w")


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` as a set: how word lists are written here."""
    return frozenset(text.split())


def fold_whitespace(text: str) -> str:
    """Runs of whitespace (any Unicode space, newlines included) → one space; ends trimmed."""
    return " ".join(text.split())


def has_word(text: str) -> bool:
    """Whether ``text`` holds at least one word character (a letter, digit or underscore)."""
    return _WORD_CHAR_RE.search(text) is not None


def trim_span(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` of ``text`` without its leading and trailing whitespace (may be empty)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


# --------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------
# One character → one character, applied after lower(): typographic variants fold to ASCII.
_FOLD_MAP: dict[str, str] = {
    **dict.fromkeys("‘’‚‛′‵`´ʼʻ", "'"),
    **dict.fromkeys("“”„‟″‶«»〝〞＂", '"'),
    **dict.fromkeys("‐‑‒–—―−⁃﹘﹣－", "-"),
    **dict.fromkeys(
        "\t\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000", " "
    ),
    **dict.fromkeys("\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a", " "),
}
# str.translate looks up every character in a dict (slow on long pages); a regex over the few
# characters that need folding skips the rest in C
_FOLD_RE = re.compile("[" + re.escape("".join(_FOLD_MAP)) + "]")
# Characters removed outright: soft hyphen, zero-width space/joiners, word joiner, BOM.
_DELETE = "\u00ad\u200b\u200c\u200d\u2060\ufeff"
_COMBINING = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
# Everything whose replacement has a different length. Single spaces are deliberately not in
# it (they map 1:1), so a normal page produces few segments. U+0130 lower()s to two chars.
_SPECIAL_BASE = rf"\s{{2,}}|[{_DELETE}]+|…|\u0130"
# Base letter + combining marks compose under NFKC. This alternative is tried at every letter,
# so it is only added for texts that contain combining marks at all.
_SPECIAL_COMBINING = rf"|[^\W\d_][{_COMBINING}]+|[{_COMBINING}]+"
_SPECIAL_RE = re.compile(_SPECIAL_BASE)
_COMBINING_RE = re.compile(f"[{_COMBINING}]")
_NON_ASCII_RE = re.compile(r"[^\x00-\x7f]")


def special_replacement(chunk: str) -> str:
    first = chunk[0]
    if first.isspace():
        return " "
    if first in _DELETE:
        return ""
    if chunk == "…":
        return "..."
    if chunk == "\u0130":
        return "i"
    if unicodedata.category(first).startswith("M"):
        return ""  # stray combining marks with no base letter
    return unicodedata.normalize("NFKC", chunk)


def has_combining_marks(text: str) -> bool:
    """Whether ``text`` holds a combining mark (its normalisation then depends on context)."""
    return _COMBINING_RE.search(text) is not None


def special_pattern(text: str) -> re.Pattern[str]:
    """The length-changing pattern for ``text``: the base set plus what this text needs."""
    if text.isascii() or unicodedata.is_normalized("NFKC", text):
        return _SPECIAL_RE
    pattern = _SPECIAL_BASE
    if has_combining_marks(text):
        pattern += _SPECIAL_COMBINING
    unstable = {
        ch
        for ch in set(_NON_ASCII_RE.findall(text))
        if unicodedata.normalize("NFKC", ch) != ch and not unicodedata.combining(ch)
    }
    if unstable:
        pattern += "|[" + "".join(re.escape(ch) for ch in sorted(unstable)) + "]"
    # re.compile keeps its own cache of recent patterns, so repeated pages reuse the compile
    return re.compile(pattern) if pattern != _SPECIAL_BASE else _SPECIAL_RE


def fold_chars(text: str) -> str:
    if "\n" in text:
        text = text.replace("\n", " ")
    if _FOLD_RE.search(text) is not None:
        text = _FOLD_RE.sub(lambda m: _FOLD_MAP[m.group()], text)
    return text


def fold(text: str) -> str:
    """lower() + the 1:1 typographic table; never changes the length."""
    return fold_chars(text.lower())


def normalise(text: str) -> str:
    """The folded form used for matching (no offset map): for quotes and tests."""
    pattern = special_pattern(text)
    return fold(pattern.sub(lambda m: special_replacement(m.group()), text))


def normalise_cased(text: str) -> str:
    """Like :func:`normalise` but keeping case (to tell names from common words)."""
    pattern = special_pattern(text)
    return fold_chars(pattern.sub(lambda m: special_replacement(m.group()), text))


def strip_diacritics(token: str) -> str:
    """A token without diacritics: "müller" → "muller" (NFKD, combining marks dropped)."""
    if token.isascii():
        return token
    decomposed = unicodedata.normalize("NFKD", token)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


# --------------------------------------------------------------------------------------------
# Stopwords
# --------------------------------------------------------------------------------------------
# Three lists on purpose; merging them would change what each check sees:
# * ENTAILMENT_STOPWORDS is English only and also drops hedges and connectives ("however",
#   "according", "typically", "including") that a paraphrasing claim adds or drops freely, so
#   they must not count against its coverage of the evidence;
# * PARAPHRASE_STOPWORDS covers German, French, Spanish, Portuguese and Polish function words
#   too, because find_paraphrase runs on pages in those languages;
# * QUERY_STOPWORDS also drops request words ("tell", "find", "show", "please") and search
#   operators ("site", "OR"), which say how to search, not what to search for.

# Function words carry no evidence of support: a claim and an unrelated page share "the" and "of".
ENTAILMENT_STOPWORDS: frozenset[str] = word_set(
    """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up upon very was we were what when where which while who whom whose
    why will with would you your yours yourself yourselves may might must shall one ones
    however therefore thus hence although though whereas via per etc according
    well like including include includes many much often usually generally typically can also
    """
)
# Words dropped before a claim's content terms are matched against page sentences.
PARAPHRASE_STOPWORDS: frozenset[str] = word_set(
    """
    a an the and or but if of at by for with about against between into through during
    before after above below to from up down in out on off over under again further then
    once here there when where why how all any both each few more most other some such only
    own same so than too very can will just should now is are was were be been being have
    has had having do does did it its this that these those i me my we our you your he him
    his she her they them their what which who whom as also would could may might must shall
    der die das den dem des ein eine einer eines einem einen und oder aber wenn als auch auf
    aus bei mit nach von vor zu zum zur im in an am um für über unter ist sind war waren
    wird werden wurde wurden hat haben hatte sein es er sie wir ihr ich du man sich dass daß
    wie was noch nur so schon sehr bis durch gegen ohne seit dieser diese dieses diesem
    diesen le la les un une des du de et ou mais si à au aux en dans par pour sur avec sans
    ce cet cette ces est sont était être avoir a ont il elle ils elles nous vous on qui que
    quoi dont où plus el la los las un una unos unas y o pero si en por para con sin sobre
    es son era fue ser estar ha han que quien donde como más lo al del se su sus o os as um
    uma e mas em no na nos nas por para com sem sobre é são foi ser do da dos das i w z na
    do nie się to jest że od za po jak o dla ale czy być są był była
    """
)
# Words of a prompt or query that are neither constraints nor entities (lower-cased).
QUERY_STOPWORDS: frozenset[str] = frozenset(
    w.lower()
    for w in word_set(
        """
    a an the and or but if of in on at to for from by with about as into onto over under than
    then that this these those there here is are was were be been being am do does did doing
    have has had having can could should would will shall may might must i me my mine we us our
    you your yours he him his she her it its they them their what which who whom whose when
    where why how whether any some all each every both either neither such so too very just
    also only not no nor own same other more most much many few less least lot lots please
    tell give show find search looking look need want wanted know let help get got make need
    like one ones thing things something anything way ways kind kinds sort type types e g ie
    eg etc vs versus via per within without excluding except between among across up down out
    off again further once OR AND NOT site intitle inurl filetype
    """
    )
)

# --------------------------------------------------------------------------------------------
# Tokens
# --------------------------------------------------------------------------------------------

_ENTAILMENT_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")
#: Passage matching: numbers keep their separators ("4.2", "48/22", "1,000") so a changed digit
#: shows as one token; words keep inner apostrophes. Run on normalised text.
PASSAGE_TOKEN_RE = re.compile(r"\d+(?:[.,/:]\d+)*|\w+(?:'\w+)*")
_NS = NO_SPACE_SCRIPTS
#: Alignment of near-identical texts: :data:`PASSAGE_TOKEN_RE`, with every character of a script
#: written without spaces a token of its own ("约为1.7亿人" → 约 为 1.7 亿 人).
ALIGN_TOKEN_RE = re.compile(
    rf"\d+(?:[.,/:]\d+)*|[{_NS}]|(?:(?![{_NS}])\w)+(?:'(?:(?![{_NS}])\w)+)*"
)
#: Query analysis: cased, and keeps the joiners of product and version names ("C++", "C#",
#: "AT&T", "v2.1", "e-bike").
QUERY_TOKEN_RE = re.compile(r"[A-Za-z0-9][\w'’&+#.-]*[\w+#]|[A-Za-z0-9]")


# words in any script: letters and digits (no underscore), an apostrophe and letters after
_UNICODE_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W\d_]+)?")


def entailment_tokens(text: str) -> list[str]:
    """Lowercased word tokens; ``don't`` becomes ``do`` + ``nt`` so negation survives. Words
    of any script: accented letters stay in their word ("für", "Müller"), and a run of a script
    written without spaces is segmented into words (:func:`citeguard.lang.segment`)."""
    if not text.isascii():
        return _unicode_tokens(text)
    words = _ENTAILMENT_WORD_RE.findall(text)
    # the tokens are ASCII letters and digits, with at most an apostrophe: lowering them joined
    # is lowering each (the text around them, which may not be, is never lowered)
    joined = " ".join(words).lower()
    if "'" not in joined and "’" not in joined:
        return joined.split()
    return _without_contractions(joined.replace("’", "'").split())


def _without_contractions(words: list[str]) -> list[str]:
    """Lowered words with ``n't`` split off as ``nt`` and other clitics (``'s``) dropped."""
    out: list[str] = []
    for word in words:
        if word.endswith("n't"):
            out.extend((word[:-3], "nt"))
        elif "'" in word:
            out.append(word.split("'", 1)[0])
        else:
            out.append(word)
    return out


def _unicode_tokens(text: str) -> list[str]:
    words = _UNICODE_WORD_RE.findall(text)
    if not has_no_space_script(text):
        # as the ASCII path: lowering the words joined is lowering each (no word holds a
        # space, and a word's last letter is word-final either way)
        joined = " ".join(words).lower()
        if "'" not in joined and "’" not in joined:
            return joined.split()
        return _without_contractions(joined.replace("’", "'").split())
    out: list[str] = []
    for word in words:
        if has_no_space_script(word):
            out.extend(w.lower() for w in segment(word) if not w.isspace())
        else:
            out.extend(_without_contractions([word.lower().replace("’", "'")]))
    return out


# --------------------------------------------------------------------------------------------
# Sentences
# --------------------------------------------------------------------------------------------
# Three splitters, because the texts differ:
# * sentence_spans (claims and evidence windows) ends a sentence only before a capital or a
#   digit, so "e.g. the" and "3.5 km" stay whole in the short, clean texts it sees;
# * page_sentence_spans (whole pages, for paraphrase search) ends one after any . ! ? … and
#   bounds every span, since pages are long, often unpunctuated, and lower-case after a stop;
# * is_answer_sentence_end (an agent's answer) knows abbreviations and initials, and lets a
#   citation marker glued to the full stop ("3%.[1]") belong to the sentence before it.

_SENTENCE_END_RE = re.compile(
    r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[]*[A-Z0-9])|\n\s*|(?<=[。！？])[」』”’）)]*\s*"
)

# Full stops that end no sentence: after an ordinal ("am 14. September", "die 5. Stufe", "im
# 19. Jahrhundert", "14. September") and after an abbreviation ("z. B.", "u. a.", "Nr. 3",
# "Dr. Weber"), in the languages reports are written in.
_MONTHS = word_set(
    """
    januar jänner februar märz april mai juni juli august september oktober november dezember
    january february march may june july october december janvier février mars avril juin
    juillet août septembre octobre novembre décembre enero febrero marzo abril mayo junio julio
    agosto septiembre setiembre octubre noviembre diciembre jan feb mär mar apr jun jul aug sep
    sept okt oct nov dez dec
    """
)
# words before a German (or Scandinavian, Polish...) ordinal: "am 14.", "zum 3.", "die 5."
_ORDINAL_LEADS = word_set(
    """
    am im zum zur vom beim ab bis seit vor nach der die das den dem des ein eine einem einer
    jeder jede jedes jeden jedem zu von für fur um
    """
)
_STOP_ABBREVIATIONS = word_set(
    """
    mr mrs ms dr prof sr jr st mt ft vs v no nos nr fig figs eq eqs approx ca cf al gen gov sen
    rep inc ltd corp co bros dept univ est vol ed eds pp p op cit ibid jan feb mar apr jun jul
    aug sep sept oct nov dec z b u a d h bzw usw vgl ggf evtl bspw inkl zzgl sog str jh jhd
    hr fr abs art s ff mio mrd tsd etc e g i
    """
)
_WORD_AFTER_RE = re.compile(r"[\s\"'“‘(\[]{0,8}([^\W\d_]{1,20})")
_LEADING_PUNCT = "(\"'“‘[*_"
# a space or a bracket among the seven characters before a stop: the word there is short
_SHORT_TOKEN_BEFORE_RE = re.compile(r"[\s(\[\"'“‘]|^")


def not_a_stop(text: str, stop: int) -> bool:
    """Whether the full stop just before ``stop`` (the run of spaces after it starts there)
    ends no sentence: it closes an ordinal ("am 14. September", "5. Stufe") or an
    abbreviation ("z. B.", "u. a.", "Nr.", "Dr."). Reads at most 40 characters either side."""
    dot = stop - 1
    while dot >= 0 and text[dot] in "\"'”’)]":
        dot -= 1
    if dot < 0 or text[dot] != ".":
        return False
    if not _SHORT_TOKEN_BEFORE_RE.search(text, max(0, dot - 7), dot):
        return False  # the word before the stop is longer than any ordinal or abbreviation
    words = text[max(0, dot - 40) : dot].rsplit(None, 2)
    if not words:
        return False
    last = words[-1].lstrip(_LEADING_PUNCT)
    if last.isdigit() and len(last) <= 3:  # an ordinal: the word before it, or a month after
        lead = words[-2].lstrip(_LEADING_PUNCT).lower() if len(words) > 1 else ""
        after = _WORD_AFTER_RE.match(text, stop, stop + 40)
        return lead in _ORDINAL_LEADS or (after is not None and after.group(1).lower() in _MONTHS)
    return last.isalpha() and last.lower() in _STOP_ABBREVIATIONS


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences (and lines) of ``text``, whitespace trimmed, in order."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _SENTENCE_END_RE.finditer(text):
        if m.group()[:1] not in "\n" and not_a_stop(text, m.start()):
            continue
        _append_trimmed(text, start, m.start(), spans)
        start = m.end()
    _append_trimmed(text, start, len(text), spans)
    return spans


def _append_trimmed(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    start, end = trim_span(text, start, end)
    if end > start:
        out.append((start, end))


def bounded_sentence_spans(text: str, max_chars: int) -> list[tuple[int, int]]:
    """:func:`sentence_spans`, with any sentence longer than ``max_chars`` cut at whitespace.

    A piece after a cut starts at its first non-space character.
    """
    out: list[tuple[int, int]] = []
    for start, end in sentence_spans(text):
        while end - start > max_chars:
            cut = text.rfind(" ", start + 1, start + max_chars)
            if cut <= start:
                cut = start + max_chars
            out.append((start, cut))
            start = cut
            while start < end and text[start].isspace():
                start += 1
        if end > start:
            out.append((start, end))
    return out


_PAGE_SENTENCE_END_RE = re.compile(r"(?<=[.!?…])[\"'”’»)\]]*\s+|\n+|(?<=[。！？])[」』”’）)]*\s*")
_MAX_PAGE_SENTENCE_CHARS = 600


def page_sentence_spans(
    text: str, max_chars: int = _MAX_PAGE_SENTENCE_CHARS
) -> list[tuple[int, int]]:
    """Sentence spans of a page: split after . ! ? … (and closing quotes) and at line breaks.

    A page without punctuation (or one 5 MB line) still yields bounded spans: a sentence longer
    than ``max_chars`` is cut at its last space before the limit (or hard at the limit), and the
    next piece starts after that one space.
    """
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in _PAGE_SENTENCE_END_RE.finditer(text):
        if text[m.start() - 1 : m.start()] == "." and not_a_stop(text, m.start()):
            continue
        _add_page_span(spans, text, pos, m.start(), max_chars)
        pos = m.end()
    _add_page_span(spans, text, pos, len(text), max_chars)
    return spans


def _add_page_span(spans: list[tuple[int, int]], text: str, s: int, e: int, max_chars: int) -> None:
    s, e = trim_span(text, s, e)
    while e - s > max_chars:
        cut = text.rfind(" ", s, s + max_chars)
        if cut <= s:
            cut = s + max_chars
        spans.append((s, cut))
        s = cut + 1 if text[cut : cut + 1] == " " else cut
    if e > s:
        spans.append((s, e))


# A sentence ends at . ! ? (optionally closed by quotes/brackets) before whitespace, a marker or the
# end; CJK full stops need no whitespace. A run of stops is matched whole, from its first stop
# and without backtracking, so "a....(100 kB)...b" costs one pass, not one pass per dot.
ANSWER_TERMINATOR_RE = re.compile(
    r"(?<![.!?])[.!?]++[\"'”’»)\]]*+(?=[\s\[]|$)|[。！？]+[」』”’）)]*"
)
# Words whose full stop does not end a sentence ("Dr. Smith", "Fig. 3", "Apple Inc. CEO").
_ABBREVIATIONS = word_set(
    "mr mrs ms dr prof sr jr st mt ft vs v no nos fig figs eq eqs approx ca cf al gen gov sen rep"
    " inc ltd corp co bros dept univ est vol ed eds pp p op cit ibid"
    " jan feb mar apr jun jul aug sep sept oct nov dec"
)
_INITIALISM_RE = re.compile(r"(?:[A-Za-z]{1,2}\.)+[A-Za-z]{1,2}")


def is_answer_sentence_end(
    text: str, t_start: int, t_end: int, limit: int, glued: Container[int] = ()
) -> bool:
    """Whether the terminator ``text[t_start:t_end]`` (an :data:`ANSWER_TERMINATOR_RE` match) ends
    a sentence of an answer whose block ends at ``limit``.

    Not when a lower-case word follows ("e.g. the", "approx. five"), nor after an abbreviation,
    an initialism ("U.S.") or an initial ("J. Smith"). ``glued`` holds the offsets where a
    citation marker starts that may follow the stop without a space ("3%.[1]").
    """
    nxt = t_end
    while nxt < limit and text[nxt].isspace():
        nxt += 1
    if nxt >= limit:
        return True
    if text[t_end] == "[" and t_end not in glued:
        return False  # "e.g.[x]" or similar: only a citation marker may follow unspaced
    ch = text[nxt]
    if ch.islower():
        return False  # "e.g. the", "approx. five", "… and so on"
    if text[t_start] == "." and text[t_start:t_end].count(".") == 1:
        words = text[max(0, t_start - 40) : t_start].rsplit(None, 1)
        if not words:
            return True
        token = words[-1].lstrip("(\"'“‘[*_")
        if token.lower() in _ABBREVIATIONS or _INITIALISM_RE.fullmatch(token):
            return False
        if len(token) == 1 and token.isupper():
            return False  # an initial: "J. Smith"
        if not_a_stop(text, t_end):
            return False  # "am 14. September", "die 5. Stufe", "Nr. 3"
    return True


# what separates a page title's parts: "Page not found | Example News", "404 - Not Found",
# "404: This page could not be found"
_TITLE_PARTS_RE = re.compile(r"\s+[|\-–—:·•»/]+\s+|\s*[|·•»]\s*|:\s+")


def title_parts(title: str) -> list[str]:
    """The parts of a page title between its separators (the site name is usually one), each
    stripped, empty ones left out."""
    return [p.strip() for p in _TITLE_PARTS_RE.split(title) if p.strip()]

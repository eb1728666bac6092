"""A verified quote is evidence: what is left of a quoting claim to judge.

When a claim quotes its page and the quote was found there (exactly, or after normalisation),
the quoted words are supported by construction. What remains to judge is the claim *outside*
the quote:

* attribution frames ("according to the source", "the article states that", "Reuters reports:",
  "as example.com notes", the link text of an inline link) carry no content: nothing is left,
  and the claim is supported;
* content added around a quote ("…, which proves that rates will fall") is what an entailer
  must judge against the evidence window: :func:`residual_claim` returns it.

A quote can still mislead: a fragment that drops a negation or a qualifier standing right
before it on the page ("the drug is *not* effective" quoted as "effective") keeps a finding of
its own (:func:`dropped_qualifier`).

Everything here is linear in the claim's length and looks at a bounded slice of the page.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from citeguard.checks._consistency import STOPWORDS
from citeguard.numbers import NUMBER_TOKEN

# a number with its separators is one word ("12.6", "6,100"): read in pieces, the residual
# claim's "12.6 s" would reach the entailer as "12 6 s"
_WORD_RE = re.compile(NUMBER_TOKEN + r"|[^\W_]+(?:['’][^\W_]+)*")
_QUOTE_CHARS = "\"'“”„‟«»‹›‘’「」『』"

# Words that attribute a statement to its source and add nothing to what it says.
_FRAME_WORDS: frozenset[str] = frozenset(
    """
    according accordance per cited cites citing quoted quotes quote quoting
    state states stated stating say says said saying note notes noted noting notice
    report reports reported reporting write writes wrote written writing explain explains
    explained explaining mention mentions mentioned mentioning add adds added adding
    describe describes described describing confirm confirms confirmed confirming
    argue argues argued arguing claim claims claimed claiming show shows showed shown
    put puts observe observes observed point points pointed out read reads reading
    announce announces announced announcing declare declares declared tell tells told
    indicate indicates indicated suggest suggests suggested put it words phrase phrased
    remark remarks remarked assert asserts asserted warn warns warned summarise summarises
    summarised summarize summarizes summarized puts highlight highlights highlighted
    emphasise emphasises emphasised emphasize emphasizes emphasized conclude concludes
    concluded find finds found
    source sources article articles page pages report reports study studies paper papers
    post posts blog author authors website site web webpage documentation docs doc piece
    story statement statements release press announcement entry text passage document
    publication journal outlet news newspaper magazine editorial analysis guide manual
    wiki wikipedia encyclopedia reference references official officials spokesperson
    researchers research team company agency organisation organization government
    ministry department office writer writers reporter reporters editors editor
    here there following quote unquote verbatim literally directly exactly number
    also further furthermore moreover additionally notably specifically explicitly
    clearly simply plainly just as com org net gov edu io co uk www http https
    """.split()  # noqa: SIM905
)

# Words before a quote on the page that reverse or hedge what the quoted words say.
_QUALIFIERS: frozenset[str] = frozenset(
    """
    not no never neither nor none nobody nothing cannot can't won't isn't aren't wasn't
    weren't doesn't don't didn't hasn't haven't hadn't shouldn't wouldn't couldn't
    hardly rarely seldom barely scarcely allegedly reportedly supposedly falsely
    wrongly mistakenly untrue myth false unproven unlikely without
    nicht kein keine keinen keinem keiner keines nie niemals kaum
    pas jamais ne guère nunca jamás tampoco nessuno niet geen nooit
    """.split()  # noqa: SIM905
)
# "whether or not", "not only", "no doubt": a negation word that negates nothing
_NOT_NEGATING_BEFORE = frozenset({"whether", "or", "if"})
_NOT_NEGATING_AFTER = frozenset({"only", "just", "merely", "doubt", "longer", "less", "more"})
_SENTENCE_END_RE = re.compile(r"[.!?;:\n]")

_MAX_CLAIM_CHARS = 4_000
_LOOKBACK_CHARS = 60


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(text[:_MAX_CLAIM_CHARS].casefold())


def _fold(text: str) -> str:
    return " ".join(_words(text))


class Residual(NamedTuple):
    """What a quoting claim adds outside its quote: its words in order, and the content ones."""

    text: str
    content: tuple[str, ...]


def residual_claim(
    claim_text: str, quote: str, *, source_words: Iterable[str] = ()
) -> Residual | None:
    """The content a quoting claim adds outside its quote, or ``None`` when it adds none.

    ``source_words`` name the source (its domain labels, its title, the link text): like the
    attribution verbs, they carry nothing to entail. The quote must stand in the claim (the
    parser took it from there); when it does not (structured input with a separate quote), the
    whole claim is returned for judging.
    """
    folded_claim, folded_quote = _fold(claim_text), _fold(quote)
    if not folded_quote:
        return Residual(claim_text, tuple(_words(claim_text)))
    at = folded_claim.find(folded_quote)
    if at < 0:
        return Residual(claim_text, tuple(_words(claim_text)))
    before = _without_speaker(_without_source_numbers(folded_claim[:at].split()))
    rest = before + _without_source_numbers(folded_claim[at + len(folded_quote) :].split())
    ignore = _FRAME_WORDS | STOPWORDS | {w for s in source_words for w in _words(s)}
    content = tuple(w for w in rest if w not in ignore and not (len(w) == 1 and w.isalpha()))
    if not content:
        return None
    # keep the claim's own words around the quote, in order, for the entailer to read
    return Residual(" ".join(w for w in rest if w not in _FRAME_WORDS or w in content), content)


# "source 3 says", "reference no. 2 notes": a number that names the source, not a fact
_SOURCE_NAMING = frozenset({"source", "sources", "number", "no", "reference", "ref", "citation"})


def _without_source_numbers(words: list[str]) -> list[str]:
    return [
        w
        for i, w in enumerate(words)
        if not (w.isdigit() and len(w) <= 3 and i > 0 and words[i - 1] in _SOURCE_NAMING)
    ]


# verbs that hand the quote to whoever is named just before them ("The project says",
# "Maintainer Priya Raman said the team"): that speaker is attribution, not a claim
_SPEAKING: frozenset[str] = frozenset(
    """
    say says said state states stated report reports reported write writes wrote note notes
    noted explain explains explained add adds added tell tells told announce announces
    announced confirm confirms confirmed
    """.split()  # noqa: SIM905
)
_MAX_SPEAKER_WORDS = 6


def _without_speaker(words: list[str]) -> list[str]:
    """The words before a quote without the speaker of the attribution verb closing them."""
    tail = words[-3:]
    verb = next((i for i in range(len(tail) - 1, -1, -1) if tail[i] in _SPEAKING), None)
    if verb is None:
        return words
    cut = len(words) - len(tail) + verb
    start = max(0, cut - _MAX_SPEAKER_WORDS)
    numbers = [w for w in words[start:cut] if any(ch.isdigit() for ch in w)]  # facts, kept
    return words[:start] + numbers + words[cut:]


def words_in(window: str, words: Iterable[str], *, sentence: str | None = None) -> bool:
    """Whether every one of ``words`` stands in ``window`` (case-folded, whole words) and
    ``sentence`` (the quote's own sentence; default the window) negates or hedges nothing the
    words do not."""
    wanted = set(words)
    if not wanted <= set(_words(window)):
        return False
    around = set(_words(window if sentence is None else sentence))
    return not ((around & _QUALIFIERS) - wanted)


def sentence_around(text: str, start: int, end: int, *, cap: int = 400) -> str:
    """The sentence(s) of ``text`` holding ``[start, end)``, reading at most ``cap`` characters
    either side."""
    lo, hi = max(0, start - cap), min(len(text), end + cap)
    before = list(_SENTENCE_END_RE.finditer(text, lo, start))
    after = _SENTENCE_END_RE.search(text, end, hi)
    return text[before[-1].end() if before else lo : after.end() if after else hi]


def dropped_qualifier(page_text: str, start: int) -> str | None:
    """A negation or hedge that stands on the page right before a quote starting at ``start``
    (within its sentence, in the two words before it, or the two before a closing "that"), or
    ``None``. Only a bounded slice before the quote is read."""
    if start <= 0:
        return None
    before = page_text[max(0, start - _LOOKBACK_CHARS) : start].replace("’", "'")
    ends = list(_SENTENCE_END_RE.finditer(before))
    if ends:
        before = before[ends[-1].end() :]
    words = _words(before)
    if words and words[-1] == "that":
        words = words[:-1]
    for i in range(len(words) - 1, max(-1, len(words) - 3), -1):
        w = words[i]
        if w not in _QUALIFIERS:
            continue
        prev = words[i - 1] if i > 0 else ""
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if prev in _NOT_NEGATING_BEFORE or nxt in _NOT_NEGATING_AFTER:
            continue
        return w
    return None


def strip_quote_marks(text: str) -> str:
    """``text`` without the quotation marks around it."""
    return text.strip().strip(_QUOTE_CHARS).strip()


__all__ = [
    "Residual",
    "dropped_qualifier",
    "residual_claim",
    "sentence_around",
    "strip_quote_marks",
    "words_in",
]

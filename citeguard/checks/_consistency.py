"""Deterministic consistency checks between a claim and the evidence it cites.

These are the cheap, explainable half of :class:`~citeguard.checks.entail.LocalEntailer`: they
find what an embedding similarity cannot see — a number that changed, a year that moved, a name
the evidence never mentions, a ``not`` that appeared — and how much of the claim's wording the
evidence covers at all. Everything here is pure, regex-based and sub-millisecond for sentences, so
it is safe to call from the executor thread that also runs the embedding model.

Nothing here decides a label; :func:`check_consistency` returns a :class:`Consistency` with the
facts and the entailer weighs them.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

# The word list, tokenizer and sentence splitter live in citeguard.text; they are re-exported
# here under their old names for the entailment and support checks.
from citeguard.numbers import Reading, backs, read_numbers
from citeguard.text import ENTAILMENT_STOPWORDS as STOPWORDS
from citeguard.text import entailment_tokens as tokens
from citeguard.text import fold_whitespace, sentence_spans

__all__ = [
    "STOPWORDS",
    "Consistency",
    "NumberMention",
    "check_consistency",
    "clean_claim",
    "content_words",
    "coverage",
    "entities",
    "negation_count",
    "numbers",
    "sentence_spans",
    "stem",
    "tokens",
]

# Cues that flip a statement. "no" and "not" dominate; contractions are split by the tokenizer
# into "n't", which we also catch as the bare "nt" that the word regex leaves.
NEGATIONS: frozenset[str] = frozenset(
    {
        "not",
        "no",
        "never",
        "none",
        "nobody",
        "nothing",
        "neither",
        "nor",
        "without",
        "cannot",
        "nt",
        "unable",
        "lack",
        "lacks",
        "lacking",
    }
)

_CITATION_MARKER = re.compile(r"\[\d+(?:[,\s–-]+\d+)*\]")
_MARKDOWN = re.compile(r"\*\*|__|</?s>|`")

_NUMBER_WORDS: dict[str, float] = {
    "zero": 0,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
    "dozen": 12,
}
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)
# Capitalised words and acronyms: "Pope", "EU", "COVID-19", "iPhone".
_ENTITY = re.compile(
    r"\b(?:[A-Z][a-zA-Z]*[A-Z0-9][\w-]*|[A-Z][a-z]+(?:[-'][A-Za-z]+)*|i[A-Z]\w+)\b"
)


def clean_claim(text: str) -> str:
    """Strip citation markers (``[3]``, ``[2][5]``), markdown emphasis and tokenizer artefacts."""
    text = _CITATION_MARKER.sub("", text)
    text = _MARKDOWN.sub("", text)
    # Removing markers leaves ", as stated in." remnants and doubled spaces before punctuation.
    text = re.sub(r"(?<!\s)\s+([.,;:!?])", r"\1", text)  # linear: each run is tried once
    return fold_whitespace(text)


def stem(word: str) -> str:
    """A light suffix stripper: enough to match "reduces"/"reduced"/"reduction" prefixes."""
    if len(word) <= 4 or word.isdigit():
        return word
    return _stem_long(word)


# A pure function of one token, called for every word of every evidence window a claim is
# scored against (~170k times for 32 pairs): the table is read once per distinct word. Bounded,
# so a page of made-up words cannot grow it.
@functools.lru_cache(maxsize=1 << 16)
def _stem_long(word: str) -> str:
    for suffix, repl in (
        ("ational", "ate"),
        ("ization", "ize"),
        ("ations", "ate"),
        ("ation", "ate"),
        ("iveness", "ive"),
        ("fulness", "ful"),
        ("ousness", "ous"),
        ("ements", ""),
        ("ement", ""),
        ("ments", ""),
        ("ment", ""),
        ("ities", ""),
        ("ity", ""),
        ("ies", "y"),
        ("ied", "y"),
        ("ing", ""),
        ("edly", ""),
        ("ed", ""),
        ("ly", ""),
        ("es", ""),
        ("s", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + repl
            break
    # Prefix match makes "reduc" meet "reduce" and "reduction".
    return word[:6]


def content_words(text: str) -> list[str]:
    """Stemmed tokens that are not stop words and not negation cues, in order."""
    if len(text) <= _MEMO_CHARS:
        return list(_content_words_memo(text))
    return _content_words(text)


#: Texts up to this many characters (a sentence, a claim, an evidence window) have their
#: content words and numbers read once, and a (claim, window) pair its consistency facts: the
#: local entailer reads each evidence sentence ~4 times a pair (its windows, their consistency
#: facts, the units it ranks, the scorer's own consistency read of the same evidence) and each
#: claim part reads the same evidence again. Pure functions of their text, so a memo changes no
#: result; bounded by entries and by this length (a longer text is read afresh).
_MEMO_CHARS = 1_500
_MEMO_ENTRIES = 1 << 13


def _content_words(text: str) -> list[str]:
    return [
        stem(t)
        for t in tokens(text)
        if t not in STOPWORDS and t not in NEGATIONS and (len(t) > 1 or t.isdigit())
    ]


@functools.lru_cache(maxsize=_MEMO_ENTRIES)
def _content_words_memo(text: str) -> tuple[str, ...]:
    return tuple(_content_words(text))


def coverage(claim: str, evidence: str) -> float:
    """Share of the claim's distinct content words (stemmed) that occur in the evidence."""
    words = set(content_words(claim))
    if not words:
        return 0.0
    return len(words & set(content_words(evidence))) / len(words)


def negation_count(text: str) -> int:
    """Number of negation cues in ``text``."""
    return sum(1 for t in tokens(text) if t in NEGATIONS)


# "not only X but Y" and "not just" assert X; they are not negations.
_NOT_NEGATING = frozenset({"only", "just", "merely", "simply"})


def _scoped_negations(text: str, shared: set[str]) -> int:
    """Negation cues whose next few content words include one of ``shared`` (stemmed)."""
    governed = _negated_by_cue(text)
    return sum(1 for scope in governed if any(w in shared for w in scope))


def _negated_by_cue(text: str) -> list[list[str]]:
    """Each negation cue's scope: the first three content stems after it."""
    toks = tokens(text)
    out: list[list[str]] = []
    for i, tok in enumerate(toks):
        if tok not in NEGATIONS:
            continue
        following = toks[i + 1 : i + 6]
        if following and following[0] in _NOT_NEGATING:
            continue
        out.append([stem(t) for t in following if t not in STOPWORDS and t not in NEGATIONS][:3])
    return out


def _negated(text: str) -> set[str]:
    """The stems a negation of ``text`` governs: the first three content words after each cue
    ("does not include native vector indexes" → include, native, vector)."""
    return {w for scope in _negated_by_cue(text) for w in scope}


@dataclass(frozen=True, slots=True)
class NumberMention:
    """A number as written, its value, its unit and whether it looks like a year.

    ``value`` and ``decimals`` are the first of ``readings``: a form two locales read apart
    ("1,234": 1234 or 1.234) carries both (:mod:`citeguard.numbers`)."""

    text: str
    value: float
    decimals: int
    scale: float  # 1, 1e3, 1e6 ...: the scale word folded into value
    unit: str  # "%", a currency sign, or "" — scale words are folded into value
    noun: str  # the content word right after the number ("people", "year"), for same-quantity tests
    is_year: bool
    readings: tuple[Reading, ...] = ()
    start: int = -1  # where ``text`` stands in the text it was read from
    end: int = -1


def numbers(text: str) -> list[NumberMention]:
    """Numbers in ``text``, each read whole in its locale's form ("12.6", "6,100", "1.234,5",
    "1 234"), with percentages, currencies and scale words folded in, then spelled-out ones."""
    if len(text) <= _MEMO_CHARS:
        return list(_numbers_memo(text))
    return _numbers(text)


@functools.lru_cache(maxsize=_MEMO_ENTRIES)
def _numbers_memo(text: str) -> tuple[NumberMention, ...]:
    return tuple(_numbers(text))


def _numbers(text: str) -> list[NumberMention]:
    out: list[NumberMention] = []
    for q in read_numbers(text):
        first = q.readings[0]
        out.append(
            NumberMention(
                text=q.text,
                value=first.value,
                decimals=first.decimals,
                scale=q.scale,
                unit=q.unit,
                noun=_next_content_word(text, q.end),
                is_year=q.is_year,
                readings=q.readings,
                start=q.start,
                end=q.end,
            )
        )
    for m in _NUMBER_WORD.finditer(text):
        value = _NUMBER_WORDS[m.group(1).lower()]
        out.append(
            NumberMention(
                text=m.group(0),
                value=value,
                decimals=0,
                scale=1.0,
                unit="",
                noun=_next_content_word(text, m.end()),
                is_year=False,
                readings=(Reading(value, 0),),
                start=m.start(),
                end=m.end(),
            )
        )
    return out


def _next_content_word(text: str, pos: int) -> str:
    """The stemmed word right after a number ("300 people" → "people"), or "" if a function word."""
    following = tokens(text[pos : pos + 30])
    if not following or following[0] in STOPWORDS or following[0].isdigit():
        return ""
    return stem(following[0])


def _same_number(claim: NumberMention, ev: NumberMention) -> bool:
    """Whether ``ev`` backs ``claim`` under some plausible reading of each, allowing for
    rounding at the claim's precision ("2.4 trillion" is backed by "2.43 trillion")."""
    return backs(_readings(claim), _readings(ev), scale=claim.scale)


def stated_in(n: NumberMention, text: str) -> bool:
    """Whether ``text`` states the number ``n`` under some plausible reading of each."""
    return any(_same_number(n, e) for e in numbers(text))


def _readings(n: NumberMention) -> tuple[Reading, ...]:
    return n.readings or (Reading(n.value, n.decimals),)


def entities(text: str) -> list[str]:
    """Capitalised names and acronyms that are not merely sentence-initial or function words."""
    found: dict[str, None] = {}
    for start, end in sentence_spans(text):
        sentence = text[start:end]
        for m in _ENTITY.finditer(sentence):
            word = m.group(0)
            lower = word.lower()
            if lower in STOPWORDS or lower in NEGATIONS or lower in _NUMBER_WORDS:
                continue
            # A sentence's first word is capitalised by grammar, not because it is a name —
            # unless it is an acronym or mixed case ("EU", "iPhone").
            initial = sentence[: m.start()].strip(" \"'“‘([*-•") == ""
            mixed_case = word.isupper() or any(c.isupper() for c in word[1:])
            # ... but "Marie Curie discovered" starts with a name: the next word is capitalised too.
            starts_name = bool(re.match(r"\s+[A-Z][a-z]", sentence[m.end() :]))
            if initial and not (mixed_case or starts_name):
                continue
            found.setdefault(word, None)
    return list(found)


@dataclass(frozen=True, slots=True)
class Consistency:
    """What the deterministic checks found for one (claim, evidence) pair."""

    coverage: float  # share of claim content words in the evidence
    sentence_coverage: float  # the same, against the single best-aligned evidence sentence pair
    aligned: str  # the evidence text (one or two sentences) that covers the claim best
    missing_numbers: tuple[str, ...] = ()
    # claim numbers the evidence states only in sentences about something else ("15%" against
    # "Paragraph 15 lists ..."): not missing (the support model's feature), not shown stated
    elsewhere_numbers: tuple[str, ...] = ()
    conflicting_numbers: tuple[tuple[str, str], ...] = ()  # (claim number, evidence number)
    # the evidence sentence each conflicting evidence number stands in (parallel to the above)
    conflict_sentences: tuple[str, ...] = ()
    missing_entities: tuple[str, ...] = ()
    n_entities: int = 0
    n_numbers: int = 0
    negation_flip: bool = False
    # a word negated on one side only, though both sides may have a negation (see
    # check_consistency): keeps a claim from passing, never rejects it; not a model feature
    negation_scope: bool = False

    @property
    def is_contradiction(self) -> bool:
        """Clear evidence against the claim: a changed quantity. A flipped negation is not: on
        the development pages it was right in 5 of 12 cases (the "not" of another clause), so it
        makes a claim uncertain, never rejected (``LocalEntailer._decide``)."""
        return bool(self.conflicting_numbers)

    def describe(self) -> str:
        """A short human-readable account of the problems found ("" when none)."""
        parts: list[str] = []
        if self.conflicting_numbers:
            sentences = self.conflict_sentences or ("",) * len(self.conflicting_numbers)
            parts.append(
                "number differs: "
                + ", ".join(
                    f"claim {c!r} vs evidence {e!r}" + (f" in {_quoted(s)}" if s else "")
                    for (c, e), s in zip(self.conflicting_numbers, sentences, strict=True)
                )
            )
        if self.negation_scope:
            parts.append("negation differs between claim and evidence")
        if self.missing_numbers:
            parts.append("numbers not in evidence: " + ", ".join(self.missing_numbers))
        if self.elsewhere_numbers:
            parts.append(
                "numbers only where the page is about something else: "
                + ", ".join(self.elsewhere_numbers)
            )
        if self.missing_entities:
            parts.append("names not in evidence: " + ", ".join(self.missing_entities))
        return "; ".join(parts)


_QUOTED_CHARS = 200


def _quoted(sentence: str) -> str:
    """``sentence`` in quotation marks, shortened to ``_QUOTED_CHARS``."""
    text = fold_whitespace(sentence)
    if len(text) > _QUOTED_CHARS:
        text = text[: _QUOTED_CHARS - 1].rstrip() + "…"
    return f"“{text}”"


# A number that is one end of a range ("6-7 million", "between 200,000 and 300,000", "from
# 2008 to 2010") or a bound ("more than 100", "up to 40 mg") does not state one value: another
# value beside it is no evidence of a change.
_RANGE_BEFORE = re.compile(r"(?:\b(?:between|from)\s+|\d\s*(?:-|–|—|to|and)\s*)$", re.IGNORECASE)
_RANGE_AFTER = re.compile(r"^\s*(?:-|–|—|to\b|and\b)\s*[\d$€£¥]", re.IGNORECASE)
_BOUND_BEFORE = re.compile(
    r"(?:\b(?:(?:more|less|fewer|greater|higher|lower|other)\s+than|over|under|above|below|"
    r"up\s+to|at\s+(?:least|most)|exceeding|beyond|within|maximum(?:\s+of)?|minimum(?:\s+of)?)"
    r"|[<>≤≥])\s*[$€£¥]?\s*$",
    re.IGNORECASE,
)
# The share of a claim's words the aligned sentence must hold for its number to be about the
# same thing. 0.5 (was 0.6): on the development rows of the four long-page sets
# (benchmarks/hard_rejects.py) it adds 15 rejections, all right, and rejects no supported claim
# more; 0.4 would add 4 more, one of them a supported claim.
_SAME_THING = 0.5
# A claim of more numbers than this is a table, not a statement: its first ones are read.
_MAX_CLAIM_NUMBERS = 64
# A clause of the claim: what one number in it is about ("the Silver button is awarded at
# 100,000", "the Gold button at 1 million").
_CLAUSE_BREAK = re.compile(r"[;:]|,(?!\d)|\b(?:while|whereas|but|and)\b", re.IGNORECASE)


def _loose(text: str, n: NumberMention) -> bool:
    """Whether the number at ``n`` in ``text`` is one end of a range or a bound."""
    before = text[max(0, n.start - 24) : n.start]
    after = text[n.end : n.end + 8]
    return bool(
        _RANGE_BEFORE.search(before) or _RANGE_AFTER.match(after) or _BOUND_BEFORE.search(before)
    )


def _clause(text: str, n: NumberMention, breaks: Sequence[tuple[int, int]]) -> str:
    """The clause of ``text`` the number at ``n`` stands in (``breaks``: the spans of
    :data:`_CLAUSE_BREAK` in ``text``, in order)."""
    # the nearest breaks on either side; one that overlaps the number (": " in "10:30") is
    # passed over, which only widens the clause (more names to find: fewer conflicts)
    k = bisect.bisect_left(breaks, (n.start, n.start))
    start = breaks[k - 1][1] if k > 0 and breaks[k - 1][1] <= n.start else 0
    while k < len(breaks) and breaks[k][0] < n.end:
        k += 1
    end = breaks[k][0] if k < len(breaks) else len(text)
    return text[start:end]


def _stands_in(name: str, lower: str, stems: set[str]) -> bool:
    """Whether ``name`` stands in a text (``lower``: the text lower-cased, ``stems``: its
    words' stems): as written, or word by stem."""
    return name.lower() in lower or all(stem(t) in stems for t in tokens(name))


def _names_in(names: Sequence[str], sentence: str) -> bool:
    """Whether every name of ``names`` stands in ``sentence``."""
    if not names:
        return True
    lower = sentence.lower()
    stems = {stem(t) for t in tokens(sentence)}
    return all(_stands_in(name, lower, stems) for name in names)


def _conflict(
    claim: str,
    n: NumberMention,
    aligned: Sequence[tuple[NumberMention, str]],
    breaks: Sequence[tuple[int, int]],
) -> tuple[NumberMention, str] | None:
    """The aligned evidence number (and its sentence) that states another value of the
    quantity the claim's number ``n`` is, if any: a number of the same kind (a year, the same
    unit, the same noun) that states one value (no range end, no bound) in a sentence that
    names what the claim's clause names ("the Silver button at 100,000" is not changed by "the
    Gold button at 1 million"); never when ``n`` is itself a range end or bound, or an aligned
    number of that kind states it less precisely ("78.1" for "78.15")."""
    if _loose(claim, n):
        return None
    same_kind = [
        (e, sent)
        for e, sent in aligned
        if (n.is_year and e.is_year)
        or (n.unit and n.unit == e.unit)
        or (n.noun and n.noun == e.noun and not n.is_year and not e.is_year)
    ]
    if not same_kind or any(backs(_readings(e), _readings(n), scale=e.scale) for e, _ in same_kind):
        return None
    names = entities(_clause(claim, n, breaks))
    return next(((e, s) for e, s in same_kind if not _loose(s, e) and _names_in(names, s)), None)


# A sentence that goes on about the one before ("It grew 15%."): its subject is a pronoun.
_CONTINUES = re.compile(
    r"^\W*(?:it|its|this|that|these|those|they|their|he|his|she|her|which)\b", re.IGNORECASE
)


def _related_numbers(
    claim_words: set[str], sents: Sequence[str], sent_words: Sequence[set[str]]
) -> list[NumberMention]:
    """The evidence numbers that can state a claim's value: a year anywhere (the page's date
    line, a heading), any other number only in a sentence about something the claim is about:
    one that shares a word with the claim (numbers aside), or goes on about such a sentence
    ("It grew 15%."). "Paragraph 15 lists ..." does not state the claim's "15%"."""
    terms = {w for w in claim_words if not any(ch.isdigit() for ch in w)}
    out: list[NumberMention] = []
    about = False
    for sent, words in zip(sents, sent_words, strict=True):
        about = not terms or bool(terms & words) or (about and bool(_CONTINUES.match(sent)))
        out.extend(e for e in numbers(sent) if about or e.is_year)
    return out


def check_consistency(claim: str, evidence: str) -> Consistency:
    """Compare ``claim`` with ``evidence``: coverage, numbers, years, names and negation."""
    if len(claim) <= _MEMO_CHARS and len(evidence) <= _MEMO_CHARS:
        return _consistency_memo(claim, evidence)
    return _check_consistency(claim, evidence)


@functools.lru_cache(maxsize=_MEMO_ENTRIES // 4)
def _consistency_memo(claim: str, evidence: str) -> Consistency:
    return _check_consistency(claim, evidence)


def _check_consistency(claim: str, evidence: str) -> Consistency:
    claim = clean_claim(claim)
    claim_words = set(content_words(claim))
    ev_words = set(content_words(evidence))
    cov = len(claim_words & ev_words) / len(claim_words) if claim_words else 0.0

    # The aligned text: the evidence sentence (or pair of neighbours) covering most claim words.
    sents = [evidence[s:e] for s, e in sentence_spans(evidence)]
    sent_words = [set(content_words(s)) for s in sents]
    best_cov, aligned_sents = 0.0, []
    if claim_words:
        for i, words in enumerate(sent_words):
            for j in (i, i + 1):
                if j >= len(sents):
                    break
                joined = words | sent_words[j] if j != i else words
                c = len(claim_words & joined) / len(claim_words)
                # Prefer the single sentence when the pair adds nothing.
                if c > best_cov + 1e-9:
                    best_cov = c
                    aligned_sents = sents[i : j + 1]
    aligned = " ".join(aligned_sents)

    ev_numbers = numbers(evidence)
    # each aligned number with the sentence it stands in, which a conflict quotes
    aligned_numbers = [(e, sent) for sent in aligned_sents for e in numbers(sent)]
    missing: list[str] = []
    conflicts: list[tuple[str, str]] = []
    conflict_sentences: list[str] = []
    claim_numbers = numbers(claim)
    related: list[NumberMention] | None = None
    elsewhere: list[str] = []
    breaks = [m.span() for m in _CLAUSE_BREAK.finditer(claim)] if claim_numbers else []
    for n in claim_numbers[:_MAX_CLAIM_NUMBERS]:
        stated = any(_same_number(n, e) for e in ev_numbers)
        if stated:
            related = (
                _related_numbers(claim_words, sents, sent_words) if related is None else related
            )
            if any(_same_number(n, e) for e in related):
                continue
            # stated only where the page is about something else: not missing (what the
            # support model was fitted on), but not shown stated either, and no bar to a
            # conflict with the aligned sentence
            if not n.text.isalpha():
                elsewhere.append(n.text)
        elif not n.text.isalpha():
            # Spelled-out small numbers ("two reasons") are too often loose paraphrase for
            # their absence to mean anything; a different count of the same thing still
            # conflicts.
            missing.append(n.text)
        # Same quantity, different number: the aligned sentence talks about the same thing
        # (most claim words present) and has a number of the same kind with another value.
        found = _conflict(claim, n, aligned_numbers, breaks) if best_cov >= _SAME_THING else None
        if found is not None:
            conflicts.append((n.text, found[0].text))
            conflict_sentences.append(found[1])

    ev_lower = evidence.lower()
    ev_stems = {stem(t) for t in tokens(evidence)}
    claim_entities = entities(claim)
    missing_entities = [ent for ent in claim_entities if not _stands_in(ent, ev_lower, ev_stems)]

    # Negation is judged against the single sentence that covers the claim best (a neighbour's
    # "not" is about something else), and only where the negated words are shared: "will not
    # benefit" against "could benefit" flips; "no definitive answer" beside the claim does not.
    negation_flip = negation_scope = False
    if claim_words and sent_words:
        k = max(range(len(sents)), key=lambda i: len(claim_words & sent_words[i]))
        if len(claim_words & sent_words[k]) / len(claim_words) >= 0.7:
            sentence = sents[k]
            claim_negated = _scoped_negations(claim, sent_words[k]) > 0
            sentence_negated = _scoped_negations(sentence, claim_words) > 0
            negation_flip = (claim_negated and negation_count(sentence) == 0) or (
                sentence_negated and negation_count(claim) == 0
            )
            # a word one side negates that the other side states without a negation, though
            # both have a "not" somewhere: "adds native vector indexes, so search no longer
            # needs an extension" against "does not include native vector indexes; search
            # still needs the extension" (not a feature of the support model, which was fitted
            # on negation_flip alone: it only keeps a claim from passing)
            in_claim, in_sentence = _negated(claim), _negated(sentence)
            negation_scope = bool(
                ((in_claim & sent_words[k]) - in_sentence)
                or ((in_sentence & claim_words) - in_claim)
            )

    return Consistency(
        coverage=cov,
        sentence_coverage=best_cov,
        aligned=aligned,
        missing_numbers=tuple(missing),
        elsewhere_numbers=tuple(elsewhere),
        conflicting_numbers=tuple(conflicts),
        conflict_sentences=tuple(conflict_sentences),
        missing_entities=tuple(missing_entities),
        n_entities=len(claim_entities),
        n_numbers=len(claim_numbers),
        negation_flip=negation_flip,
        negation_scope=negation_scope or negation_flip,
    )

"""A reference entry as written, read into what it claims about the paper: its words (tokens
with their case kept, for names and initials), the years it names, whether it says preprint or
"et al.", a BibTeX-like entry's fields, and a title to look the paper up by.

No style is parsed by a grammar: APA, IEEE, ACM, Chicago, Vancouver, Nature and BibTeX-like
entries all put the authors before the title and the venue and year after it, so once the paper's
title is placed in the entry (:mod:`~citeguard.checks.scholarly.compare`) the words before it are
the authors and the words after it the venue. Everything here is linear in the entry (capped at
:data:`MAX_ENTRY_CHARS`)."""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass, field

from citeguard.parse.scholarly import BIBTEX_START as _BIBTEX
from citeguard.parse.scholarly import IDENTIFIER_OR_URL as _IDENTIFIER
from citeguard.parse.scholarly import YEAR as _YEAR
from citeguard.parse.scholarly import looks_scholarly

__all__ = ["Entry", "Tok", "clean", "folded", "looks_scholarly", "read_entry", "tokens"]

from citeguard.parse.scholarly import MAX_ENTRY_CHARS

MAX_TOKENS = 400

# LaTeX that titles and names carry: accents (\"{o}, {\'e}, \c{c}), commands around an argument
# (\emph{X}, \textit{X}), escaped characters (\&, \%), math shifts and braces
_LATEX_ACCENT = re.compile(r"\\[`'^\"~=.uvHtcdbkr]\s?\{?([A-Za-z])\}?")
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]{1,30}\s?")
_LATEX_ESCAPE = re.compile(r"\\([&%$#_{}])")
# a word, or a subtitle separator (a colon, or a dash between spaces)
_TOKEN = re.compile(r"[^\W_]+|:|(?<=\s)[\u2013\u2014-](?=\s)")
_HYPHENATED = re.compile(r"(?<=[^\W\d_])[-\u2010\u2011](?=[^\W\d_])")
_PREPRINT = re.compile(
    r"\b(?:arxiv|preprint|corr|biorxiv|medrxiv|ssrn|chemrxiv|psyarxiv|research\s?square)\b",
    re.IGNORECASE,
)
_ET_AL = re.compile(r"\bet\.?\s?al\b|\band\s+others\b|\.\.\.|…", re.IGNORECASE)
_BIBTEX_FIELD = re.compile(
    r"\b([A-Za-z]{2,20})\s?=\s?(?:\{((?:[^{}]|\{[^{}]{0,300}\}){0,600})\}|\"([^\"]{0,600})\"|(\d{4}))"
)
# an entry's parts: sentences (not after an initial) and the year in brackets
_PARTS = re.compile(r"(?<![\s.][A-Z])\.\s|\(\d{4}[a-z]?\)")
# a part that lists names: "Smith, J.", "J. Smith", "Smith J,", "et al.", "&"
_NAMES = re.compile(
    r"[A-Z][\w'\-]+,\s?[A-Z]\.|\b[A-Z]\.\s?[A-Z][\w'\-]+|\b[A-Z][\w'\-]+\s[A-Z]{1,3}\b,|\bet\.?\s?al\b|\s&\s"
)
_QUOTED = re.compile(r"[\"“”«]([^\"“”«»]{8,400})[\"“”»]")


def clean(text: str) -> str:
    """``text`` without HTML entities, LaTeX markup and diacritics (case kept): what is
    compared."""
    if "&" in text:
        text = html.unescape(text)  # "Don&apos;t", "Q&amp;A" as metadata and agents write them
    if "\\" in text:
        text = _LATEX_ESCAPE.sub(r"\1", text)
        text = _LATEX_ACCENT.sub(r"\1", text)
        text = _LATEX_COMMAND.sub("", text)
    text = text.replace("{", "").replace("}", "").replace("$", "")
    text = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in text if not unicodedata.combining(ch))


@dataclass(frozen=True, slots=True)
class Tok:
    """One word of an entry (or ``:``, a subtitle break): ``low`` folded, ``text`` as written."""

    low: str
    text: str


def tokens(text: str, *, limit: int = MAX_TOKENS) -> list[Tok]:
    """The words of ``text`` (cleaned), in order; a dash between spaces is a ``:``, a hyphen
    inside a word joins it ("pre-training" and "pretraining" are one word), ``&`` is "and"."""
    out: list[Tok] = []
    text = _HYPHENATED.sub("", clean(text)).replace("&", " and ")
    for m in _TOKEN.finditer(text):
        word = m.group()
        if word in "\u2013\u2014-":
            word = ":"
        out.append(Tok(word.casefold(), word))
        if len(out) >= limit:
            break
    return out


def folded(text: str) -> str:
    """``text`` as compared: words folded, joined by single spaces (``:`` kept)."""
    return " ".join(t.low for t in tokens(text))


@dataclass(slots=True)
class Entry:
    """What a reference entry says. ``words``: its tokens without identifiers and URLs;
    ``fields``: a BibTeX-like entry's fields (folded names → values)."""

    text: str
    words: list[Tok]
    years: list[int]
    preprint: bool
    et_al: bool
    fields: dict[str, str] = field(default_factory=dict)
    quoted: str | None = None

    @property
    def is_bibtex(self) -> bool:
        return bool(self.fields)

    def query(self) -> str:
        """What to ask a bibliographic search for: a BibTeX entry's title, authors and year;
        else the entry's text without identifiers (Crossref's ``query.bibliographic`` takes a
        whole reference)."""
        if self.fields:
            parts = [self.fields.get(k, "") for k in ("title", "author", "year")]
            return clean(" ".join(p for p in parts if p))[:400]
        # the words as written (a hyphenated word kept whole for the service's own tokenizer)
        return " ".join(clean(_strip_ids(self.text)).split())[:400]

    def title_guess(self) -> str | None:
        """The entry's title as best it can be told without the paper: a BibTeX title, a quoted
        title, else the first part that is not a list of names (for messages)."""
        if self.fields.get("title"):
            return clean(self.fields["title"]).strip()
        if self.quoted:
            return self.quoted.strip(" ,.")
        text = _strip_ids(self.text)
        parts = [p.strip(" ,;") for p in _PARTS.split(text)]
        for part in parts:
            if len(part.split()) >= 3 and _NAMES.search(part) is None:
                return part[:300]
        return None


def _strip_ids(text: str) -> str:
    return _IDENTIFIER.sub(" ", text)


def read_entry(text: str) -> Entry:
    """Read one reference entry (capped at :data:`MAX_ENTRY_CHARS`)."""
    text = text[:MAX_ENTRY_CHARS]
    fields: dict[str, str] = {}
    if _BIBTEX.match(text):
        for m in _BIBTEX_FIELD.finditer(text):
            value = m.group(2) if m.group(2) is not None else (m.group(3) or m.group(4) or "")
            fields.setdefault(m.group(1).casefold(), value.strip())
    plain = _strip_ids(text)
    if fields:
        body = " ".join(fields.get(k, "") for k in ("author", "title", "booktitle", "journal"))
        years = [int(y) for y in _YEAR.findall(fields.get("year", ""))]
        preprint = bool(
            _PREPRINT.search(
                " ".join(fields.get(k, "") for k in ("journal", "booktitle", "note", "eprint"))
            )
            or fields.get("archiveprefix", "").casefold() == "arxiv"
        )
        et_al = bool(_ET_AL.search(fields.get("author", "")))
        words = tokens(body)
    else:
        years = [int(y) for y in _YEAR.findall(plain)]
        preprint = bool(_PREPRINT.search(plain))  # not a DOI's "10.48550/arXiv.…"
        et_al = bool(_ET_AL.search(plain))
        words = tokens(plain)
    quoted = _QUOTED.search(plain)
    return Entry(
        text=text,
        words=words,
        years=years,
        preprint=preprint,
        et_al=et_al,
        fields=fields,
        quoted=quoted.group(1) if quoted is not None else None,
    )

"""Scholarly identifiers as citations of their resolver URL: a DOI (``doi:10.1038/…``, a bare
``10.NNNN/…`` in a reference entry) is a citation of ``https://doi.org/10.…`` and an arXiv id
(``arXiv:2401.01234``) one of ``https://arxiv.org/abs/2401.01234``, checked like any other URL.

Only the patterns and the mapping live here (no imports from the other sub-stages):
``links`` finds the identifiers in the text and trims them as it trims URLs."""

from __future__ import annotations

import re
from urllib.parse import quote

DOI_RESOLVER = "https://doi.org/"
ARXIV_RESOLVER = "https://arxiv.org/abs/"

# A DOI's suffix runs to whitespace, a quote or bracket, CJK text or CJK punctuation; trailing
# prose punctuation is trimmed afterwards, as for a bare URL.
_DOI_BODY = (
    r"10\.\d{4,9}/[^\s<>\"`{}|\\^\[\]“”‘’«»\u2e80-\u9fff\u3000-\u303f\uff00-\uffef\uac00-\ud7af]+"
)

# "doi:10.1038/x", "DOI: 10.1038/x", "doi：10.1038/x" (no ASCII word character right before, so
# "https://x.org/doi:10…" and "mydoi:" are not one; CJK may precede: "见doi:10…")
_DOI_PREFIXED = re.compile(
    r"(?<![A-Za-z0-9.\-/_])doi[ \t]?[:：][ \t]?(?P<id>" + _DOI_BODY + ")", re.IGNORECASE
)

# a bare DOI, read only inside a reference entry ("[3] Smith J. Nature 2020. 10.1038/x")
_DOI_BARE = re.compile(r"(?<![A-Za-z0-9.\-/_])(?P<id>" + _DOI_BODY + ")")

# "arXiv:2401.01234", "arXiv:2401.01234v2", "arXiv:hep-th/9901001" (the new and the old scheme)
_ARXIV = re.compile(
    r"(?<![A-Za-z0-9.\-/_])arxiv[ \t]?[:：][ \t]?(?P<id>(?:\d{4}\.\d{4,5}|[a-z][a-z\-]{1,20}"
    r"(?:\.[A-Z]{2})?/\d{7})(?:v\d{1,3})?)(?![\d/])",
    re.IGNORECASE,
)

# what a DOI keeps as it is in the resolver URL's path; the rest is percent-encoded ("#", "?",
# spaces and non-ASCII text, which a browser would encode too)
_DOI_SAFE = "/:;()._-~!$&'*+,=@%"


def doi_url(doi: str) -> str:
    """The resolver URL of a DOI (``10.1038/nature12345`` → ``https://doi.org/10.1038/…``)."""
    return DOI_RESOLVER + quote(doi, safe=_DOI_SAFE)


def arxiv_url(arxiv_id: str) -> str:
    """The abstract page of an arXiv id (``2401.01234`` → ``https://arxiv.org/abs/2401.01234``)."""
    return ARXIV_RESOLVER + arxiv_id


def scholarly_url(dest: str) -> str | None:
    """The resolver URL when the whole of ``dest`` (a link destination, a cited URL) is a
    ``doi:`` or ``arXiv:`` identifier, else ``None``."""
    if len(dest) > 400 or dest[:1] not in ("d", "D", "a", "A"):
        return None
    m = first_identifier(dest, bare_doi=False, full=True)
    return resolver_of(m, m.group("id")) if m is not None else None


def first_identifier(text: str, *, bare_doi: bool, full: bool = False) -> re.Match[str] | None:
    """The first identifier in ``text`` (its group ``id`` is the DOI or arXiv id as written,
    untrimmed). ``bare_doi``: a ``10.NNNN/…`` without a ``doi:`` prefix counts (in a reference
    entry). ``full``: the identifier must be the whole text."""
    best: re.Match[str] | None = None
    for pattern in (_DOI_PREFIXED, _DOI_BARE, _ARXIV) if bare_doi else IN_TEXT:
        m = pattern.fullmatch(text) if full else pattern.search(text)
        if m is not None and (best is None or m.start() < best.start()):
            best = m
    return best


IN_TEXT = (_DOI_PREFIXED, _ARXIV)
"""The identifiers read in running text: with their ``doi:`` / ``arXiv:`` prefix only."""


def resolver_of(m: re.Match[str], ident: str) -> str:
    """The resolver URL of an identifier matched here, whose id is ``ident`` (``m``'s group
    ``id``, trimmed of prose punctuation by the caller)."""
    return arxiv_url(ident) if m.re is _ARXIV else doi_url(ident)


REFERENCE_SCHEME = "reference:"
"""The URL of a citation of a reference entry that names no link (``reference:3``): the
scholarly check looks the paper up by the entry's title."""

MAX_ENTRY_CHARS = 1_500
"""A reference entry's text kept for the scholarly check, at most."""

# the DOI and arXiv ids and URLs of a reference entry: not its words (the scholarly check)
IDENTIFIER_OR_URL = re.compile(
    r"https?://\S{1,500}|\b(?:doi|DOI)\s?[:：]?\s?10\.\d{4,9}/\S{1,300}|\b10\.\d{4,9}/\S{1,300}"
    r"|\barxiv\s?[:：]\s?(?:\d{4}\.\d{4,5}|[a-z][a-z\-]{1,20}(?:\.[A-Z]{2})?/\d{7})(?:v\d{1,3})?",
    re.IGNORECASE,
)
YEAR = re.compile(r"(?<![\d.])(1[89]\d\d|20\d\d)[a-z]?(?![\d.]\d)")
BIBTEX_START = re.compile(r"\s*@\s?([A-Za-z]{2,20})\s?\{")

_AUTHORISH = re.compile(
    r"\b[A-Z][\w'\-]{1,40},\s?(?:[A-Z]\.|[A-Z][a-z]{1,30})"  # "Smith, J." / "Smith, John"
    r"|\b[A-Z]\.\s?(?:[A-Z]\.\s?)?[A-Z][\w'\-]{1,40}"  # "J. Smith"
    r"|\b[A-Z][\w'\-]{1,40}\s[A-Z]{1,4}[,.]"  # "Smith J," (Vancouver)
    r"|[\"“][^\"“”]{10,300}[,.]?[\"”]"  # a quoted title (IEEE, Chicago)
    r"|\bet\.?\s?al\b"
    # "… Ada Lovelace. 1843. Title." (ACM, Chicago author-date): the year a sentence of its own
    r"|[.,]\s\(?(?:1[89]|20)\d\d[a-z]?\)?\.\s"
)


def looks_scholarly(text: str) -> bool:
    """Whether an entry with no URL reads as a scholarly reference (authors, a year, a title):
    the entries the lookup is for. A news source named by its title, or a bare number, is not."""
    text = text[:MAX_ENTRY_CHARS]
    if BIBTEX_START.match(text):
        return "title" in text.casefold()
    plain = IDENTIFIER_OR_URL.sub(" ", text)
    if YEAR.search(plain) is None or len(plain.split()) < 6:
        return False
    return _AUTHORISH.search(plain) is not None

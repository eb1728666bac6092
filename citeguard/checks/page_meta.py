"""The page's metadata as evidence, and a claim's citation artefacts left out of what is judged.

A research report writes "(Port Authority, 2025)", "Smith et al. (2024)" or "according to
Reuters" beside a fact: the year is the cited page's date, the name its author or site. Neither is
a fact the page's text must repeat, and a page never states its own date in its body as often as
in its metadata. So the whole-page evidence a claim is judged on opens with the page's title, site
and publication date (:func:`page_head`), and the claim is judged without its author–year
citations and bracket markers (:func:`without_citation_artefacts`). Every pattern is linear.
"""

from __future__ import annotations

import re

from citeguard.models import Page
from citeguard.web.urls import host_of

__all__ = ["page_head", "quotes_page_title", "without_citation_artefacts"]

_NAME = r"[A-Z][\w'’.&-]*(?:\s+(?:[A-Z][\w'’.&-]*|of|and|for|the|de|van|von|&))*"
_YEAR = r"(?:19|20)\d\d[a-z]?"
# "(Port Authority, 2025)", "(Smith et al., 2024; Lee 2023)", "(OECD 2021, p. 4)"
_PAREN_CITATION = re.compile(
    rf"\s*\((?:{_NAME}(?:\s+et\s+al\.?)?,?\s+{_YEAR}(?:,\s*pp?\.\s*\d+(?:[-–]\d+)?)?(?:;\s*)?)+\)"
)
# "Smith et al. (2024)" -> "Smith et al.", "Smith (2024)" -> "Smith"
_NARRATIVE_YEAR = re.compile(rf"(?<=[\w.])\s+\({_YEAR}\)")
# "[3]", "[2, 5]", "[^4]", "【1】", "［1］"
_BRACKET_MARKER = re.compile(r"\s*(?:\[\^?\d+(?:\s*[,–-]\s*\d+)*\]|【\d+】|［\d+］)")
# "According to Reuters, ..." at the start of a sentence
_NON_WORD = re.compile(r"[\W_]+")
#: Words a quoted title needs (a shorter quote is a phrase, not a title).
_TITLE_MIN_WORDS = 3
_ACCORDING = re.compile(rf"^(?:according\s+to|as\s+reported\s+by|per)\s+{_NAME}\s*,\s*", re.I)


def without_citation_artefacts(claim: str) -> str:
    """``claim`` without author–year citations, bracket markers and a leading "according to
    X," (the cited page's date and name, not facts its text must repeat)."""
    text = _PAREN_CITATION.sub("", claim)
    text = _NARRATIVE_YEAR.sub("", text)
    text = _BRACKET_MARKER.sub("", text)
    text = _ACCORDING.sub("", text.lstrip())
    text = " ".join(text.split())
    if not text:
        return claim
    return text[:1].upper() + text[1:] if text[:1] != claim.lstrip()[:1] else text


def page_head(page: Page) -> str:
    """The page's metadata as evidence: its title, site and publication date, one a line."""
    head: list[str] = []
    if page.title:
        head.append(" ".join(page.title.split()) + ".")
    host = host_of(page.url)
    if host:
        head.append(f"Site: {host.removeprefix('www.')}.")
    when = page.published or page.modified
    if when is not None:
        head.append(f"Published {when.day} {when:%B %Y} ({when:%Y-%m-%d}).")
    return "\n".join(head)


def _words(text: str) -> str:
    return " ".join(_NON_WORD.sub(" ", text.casefold()).split())


def quotes_page_title(quote: str, page: Page) -> bool:
    """Whether ``quote`` is the page's title (the whole title, or its part before a site
    suffix such as " - Reuters" or " | OECD"): a claim naming the page it cites by its title
    quotes its metadata, not its text."""
    if not page.title or len(quote) > 2 * len(page.title) + 20:
        return False
    q = _words(quote)
    if len(q.split()) < _TITLE_MIN_WORDS:
        return False
    title = _words(page.title)
    if q == title:
        return True
    # "Annual report 2025 - Port Authority": the quote is the title before its suffix
    for sep in (" - ", " – ", " — ", " | ", ": "):
        head = page.title.split(sep, 1)[0]
        if head != page.title and _words(head) == q:
            return True
    return False

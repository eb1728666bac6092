"""Where on the page a date element sits (article, byline, list, navigation), and the date a
reader sees in its text."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from citeguard.dates import (
    DATE_PATTERN,
    MAX_DATE_CHARS,
    date_from_match,
    make_date,
    parse_date,
)

# Where on the page a date element (<time>, itemprop, hAtom, microdata <meta>) sits decides
# whether it dates the page. Ancestors are read up to <body>.

#: Elements whose dates belong to something else: navigation, asides, footers, menus (not
#: <form>: ASP.NET pages wrap the whole page in one; comment forms are caught by their class).
_DATE_ELSEWHERE_TAGS = frozenset({"aside", "nav", "footer", "menu", "dialog", "select"})
#: Class/id substrings of blocks about other pages or other people's posts (related posts,
#: teasers, comments, carousels): a date inside one is theirs, wherever the block sits.
_DATE_LIST_HINTS = (
    "related",
    "teaser",
    "recommend",
    "popular",
    "more-",
    "morestories",
    "readmore",
    "comment",
    "similar",
    "trending",
    "most-read",
    "mostread",
    "outbrain",
    "taboola",
    "carousel",
    "slider",
    "weitere",
)
#: Class/id substrings of site chrome; only checked below the article element (or when there is
#: none), since layout wrappers ("has-sidebar") often hold the article itself.
_DATE_CHROME_HINTS = (
    "sidebar",
    "widget",
    "footer",
    "navbar",
    "navigation",
    "menu",
    "breadcrumb",
    "newsletter",
    "promo",
    "topbar",
    "masthead",
    "site-header",
    "ticker",
)
#: Class/id substrings of a byline or an article header, where the page prints its own date.
_DATE_BYLINE_HINTS = (
    "byline",
    "dateline",
    "meta",
    "date",
    "time",
    "publish",
    "posted",
    "author",
    "info",
    "head",
    "timestamp",
    "credit",
)
_DATE_ARTICLE_ITEMTYPES = ("article", "blogposting", "report", "posting")
#: At most this many ``<time>`` elements per page are placed, out of at most so many date
#: elements collected (bounded time on comment threads and tickers).
_MAX_DATE_ELEMENTS = 40
_MAX_DATE_NODES = 400
_MAX_DATE_DEPTH = 40
_VISIBLE_DATE_RE = re.compile(DATE_PATTERN, re.IGNORECASE)

#: Places of an on-page date element, best first (see :func:`_date_place`).
_PLACE_PUBDATE, _PLACE_ARTICLE_BYLINE, _PLACE_ARTICLE, _PLACE_BYLINE, _PLACE_PAGE = range(5)


#: Class tokens that describe a page's state or taxonomy, not a block ("tag-related",
#: "has-comments", "category-kommentar") and words of layout wrappers, which hold the article
#: itself ("layoutTwoColumnsRightSidebar", "content-with-sidebar").
_HINT_SKIP_PREFIXES = ("tag-", "category-", "cat-", "has-", "no-", "with-", "is-")
_LAYOUT_WORDS = ("layout", "column", "container", "wrap", "page", "main", "grid")


def _any_of(words: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(w) for w in words))


_DATE_LIST_RE = _any_of(_DATE_LIST_HINTS)
_DATE_CHROME_RE = _any_of(_DATE_CHROME_HINTS)
_DATE_BYLINE_RE = _any_of(_DATE_BYLINE_HINTS)
_LAYOUT_RE = _any_of(_LAYOUT_WORDS)


def _hinted(cls: str, hints: re.Pattern[str], *, layout_cancels: bool) -> bool:
    """Whether a class/id token (lower-cased, space-separated) names one of ``hints``."""
    if hints.search(cls) is None:
        return False
    for token in cls.split():
        if token.startswith(_HINT_SKIP_PREFIXES):
            continue
        if layout_cancels and _LAYOUT_RE.search(token):
            continue
        if hints.search(token):
            return True
    return False


def _date_place(node: Any, *, chrome: bool = True) -> int | None:
    """Where a date element sits, or None when it dates something else than the page.

    None: inside ``<nav>``, ``<menu>`` or ``<dialog>``; inside an ``<aside>`` unless it is the
    article's own byline box; in a ``<footer>`` that is not the article's own; inside a block
    whose class/id names related posts, teasers, comments or carousels; inside an ``<article>``
    nested in another or in a footer/aside (a related-post card, a comment); below site chrome
    (sidebar, widget, breadcrumb…) outside the article (``chrome=False`` skips this last test,
    for explicit ``itemprop="datePublished"`` markup). Otherwise, best first:
    :data:`_PLACE_ARTICLE_BYLINE` in the article (``<article>`` or a microdata Article) below
    its header or a byline-like block (class/id with byline, meta, date, info, head…),
    :data:`_PLACE_ARTICLE` elsewhere in the article, :data:`_PLACE_BYLINE` in a byline-like
    block on a page without an article element, :data:`_PLACE_PAGE` anywhere else.
    (:data:`_PLACE_PUBDATE`, for ``<time pubdate>``, is the caller's.)
    """
    byline = in_article = in_footer = in_aside = False
    current = node
    for _ in range(_MAX_DATE_DEPTH):
        if current is None:
            break
        tag = current.tag
        if tag in ("body", "html", "head"):
            break
        if tag in _DATE_ELSEWHERE_TAGS:
            if in_article:
                return None  # an article card inside a footer, an aside, a nav
            if tag == "footer":
                in_footer = True  # fine as the article's own footer (checked below)
            elif tag == "aside":
                in_aside = True  # fine only as the article's byline box (checked below)
            else:
                return None
        try:
            attrs = current.attributes
        except Exception:  # lexbor can refuse odd attribute bytes; read as no attributes
            attrs = {}
        cls = f"{attrs.get('class') or ''} {attrs.get('id') or ''}".lower() if attrs else " "
        itemtype = attrs.get("itemtype") if attrs and tag != "article" else None
        if tag == "article" or (
            itemtype and any(t in itemtype.lower() for t in _DATE_ARTICLE_ITEMTYPES)
        ):
            if in_article:
                return None  # an article inside the article: a related card, a comment
            in_article = True
        elif cls != " ":
            if _hinted(cls, _DATE_LIST_RE, layout_cancels=False):
                return None
            if not in_article:
                if chrome and _hinted(cls, _DATE_CHROME_RE, layout_cancels=True):
                    if "footer" not in cls:
                        return None
                    in_footer = True
                byline = byline or _DATE_BYLINE_RE.search(cls) is not None
        if tag == "header" and not in_article:
            byline = True
        current = current.parent
    if in_aside and not (in_article and byline):
        return None  # a side box: related links, a fact box, the site's sidebar
    if in_article:
        return _PLACE_ARTICLE_BYLINE if byline else _PLACE_ARTICLE
    if in_footer:
        return None  # the site's footer
    return _PLACE_BYLINE if byline else _PLACE_PAGE


def _visible_date(text: str | None) -> datetime | None:
    """A day printed on the page ("29.04.2020, 12:01 Uhr", "March 3, 2011", "2011-03-03")."""
    if not text:
        return None
    text = " ".join(text[:MAX_DATE_CHARS].split())
    dt = parse_date(text)
    if dt is not None:
        return dt
    m = _VISIBLE_DATE_RE.search(text)
    while m is not None:
        if m.group("dmy") or m.group("mdy"):
            return date_from_match(m)[0]
        m = _VISIBLE_DATE_RE.search(text, m.end())
    for m in _DAY_MONTH_YEAR_RE.finditer(text):
        month = _month_number(m.group("m"))
        if month is not None:
            return make_date(int(m.group("y")), month, int(m.group("d")))
    return None


# "29 juin 2019", "25. November 2021", "3 de marzo de 2020", "1er août 2020"
_DAY_MONTH_YEAR_RE = re.compile(
    r"(?<!\d)(?P<d>[0-3]?\d)(?:\.|er|º|°)?\s+(?:de\s+)?(?P<m>[^\W\d_]{3,10})\.?,?\s+"
    r"(?:de\s+)?(?P<y>(?:19|20)\d\d)(?!\d)"
)
#: Month names by their first three letters (English, German, French, Spanish, Italian,
#: Portuguese, Dutch); "jui" is settled by the fourth letter (juin, juillet).
_MONTH_PREFIXES = {
    **dict.fromkeys(("jan", "jän", "gen", "ene"), 1),
    **dict.fromkeys(("feb", "fév", "fev"), 2),
    **dict.fromkeys(("mar", "mär", "mrz", "maa"), 3),
    **dict.fromkeys(("apr", "avr", "abr"), 4),
    **dict.fromkeys(("may", "mai", "mei", "mag"), 5),
    **dict.fromkeys(("jun", "giu"), 6),
    **dict.fromkeys(("jul", "lug"), 7),
    **dict.fromkeys(("aug", "aoû", "aou", "ago"), 8),
    **dict.fromkeys(("sep", "set"), 9),
    **dict.fromkeys(("oct", "okt", "ott", "out"), 10),
    **dict.fromkeys(("nov",), 11),
    **dict.fromkeys(("dec", "dez", "déc", "dic"), 12),
}


def _month_number(word: str) -> int | None:
    word = word.lower()
    if word.startswith("jui"):
        return 6 if word.startswith("juin") else 7 if word.startswith("juil") else None
    return _MONTH_PREFIXES.get(word[:3])

"""Body → :class:`~citeguard.models.Page`: visible text, main text, title, canonical URL, dates.

The hot path is one lexbor parse (selectolax) per HTML page: the head is read for metadata, then
scripts, styles and hidden elements are dropped and block elements are separated by newlines, so
words from neighbouring blocks never glue together. Dates come from structured metadata first
(JSON-LD, Open Graph / article meta, itemprop, ``<time>``, common meta names, the URL path); only
when none of it yields a plausible publication date does the slower htmldate fallback run, on an
lxml tree we build for it (never on a raw string, which htmldate would treat as a URL to download).

Extraction never raises on bad input: undecodable bytes are replaced, broken PDFs become
``kind="unsupported"``, and an empty body becomes ``kind="empty"``.
"""

from __future__ import annotations

import codecs
import io
import json
import logging
import re
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple
from urllib.parse import unquote, urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser

from citeguard.dates import (
    DATE_PATTERN,
    MAX_DATE_CHARS,
    date_from_match,
    make_date,
    parse_date,
    parse_pdf_date,
)
from citeguard.models import Page, PageKind
from citeguard.policy import FetchPolicy

__all__ = [
    "EXTRACTION_VERSION",
    "dehyphenate",
    "extract_page",
    "extraction_version",
    "fallback_published",
    "parse_date",
]

#: Bumped whenever extraction output can change for the same input; part of snapshot keys.
extraction_version = "page-2"  # page-2: main-entity JSON-LD, placed <time> dates
EXTRACTION_VERSION = extraction_version

_LOG = logging.getLogger(__name__)

#: Publication dates before this are implausible for a web page.
_MIN_DATE = datetime(1995, 1, 1, tzinfo=UTC)
#: Slack for pages stamped in a timezone ahead of ``now``.
_FUTURE_SLACK = timedelta(days=1)
#: htmldate's pattern search is slow on huge pages; beyond this many characters we skip it.
_HTMLDATE_MAX_CHARS = 1_500_000
#: Charset detection on huge bodies is slow and gains nothing over a sample.
_DETECT_SAMPLE_BYTES = 256 * 1024
#: What one body may cost to extract (HTML size, depth, nodes, attributes; JSON-LD; PDF pages,
#: characters, page weight, seconds) when the caller passes no ``limits``: FetchPolicy's.
_DEFAULT_LIMITS = FetchPolicy()

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "application/html"})
_TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/x-markdown", "text/csv"})
_GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream", "unknown"})

# --------------------------------------------------------------------------------------------
# Charset
# --------------------------------------------------------------------------------------------

# WHATWG maps these labels to supersets; decoding with the superset matches what browsers show.
_CHARSET_ALIASES = {
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "l1": "cp1252",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
    "windows-1252": "cp1252",
    "shift_jis": "cp932",
    "shift-jis": "cp932",
    "sjis": "cp932",
    "x-sjis": "cp932",
    "ms_kanji": "cp932",
    "windows-31j": "cp932",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "euc-kr": "cp949",
    "ks_c_5601-1987": "cp949",
    "tis-620": "cp874",
    "iso-8859-9": "cp1254",
    "iso-8859-11": "cp874",
    # a <meta> can never truthfully declare UTF-16 (it would not be ASCII-readable)
    "utf-16": "utf-8",
    "utf-16le": "utf-8",
    "utf-16be": "utf-8",
}
_TEXT_CODEC_BLOCKLIST = frozenset({"base64", "hex", "rot13", "zlib", "bz2", "quopri", "uu"})
_META_CHARSET_RE = re.compile(
    rb"<meta[^>]{0,512}?charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]{1,40})", re.I
)
_CT_CHARSET_RE = re.compile(r"charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]{1,40})", re.I)


def _codec_for(label: str | None) -> str | None:
    """A Python codec name for a charset label, or None when the label is unknown or unsafe."""
    if not label:
        return None
    name = label.strip().strip("\"'").lower()
    name = _CHARSET_ALIASES.get(name, name)
    try:
        info = codecs.lookup(name)
    except LookupError:
        return None
    if info.name in _TEXT_CODEC_BLOCKLIST or info.name.endswith("_codec"):
        return None
    return info.name


def _is_utf8_with_non_ascii(body: bytes) -> bool:
    if body.isascii():
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _decode(body: bytes, header_charset: str | None, *, sniff_meta: bool) -> tuple[str, str]:
    """Decode ``body``: BOM, then the header charset, then ``<meta>``, then detection.

    A legacy single-byte declaration is overridden when the bytes are valid UTF-8 containing
    non-ASCII: that combination is a page re-saved as UTF-8 with a stale declaration, and
    following the declaration would only produce mojibake.
    """
    for bom, codec in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if body.startswith(bom):
            return body[len(bom) :].decode(codec, errors="replace"), codec
    declared = _codec_for(header_charset)
    if declared is None and sniff_meta:
        m = _META_CHARSET_RE.search(body[:4096])
        if m:
            declared = _codec_for(m.group(1).decode("ascii", "replace"))
    if declared is not None:
        if declared != "utf-8" and _is_utf8_with_non_ascii(body):
            return body.decode("utf-8"), "utf-8"
        return body.decode(declared, errors="replace"), declared
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    codec = _detect_charset(body)
    return body.decode(codec, errors="replace"), codec


def _detect_charset(body: bytes) -> str:
    """charset_normalizer's pick; among equally good candidates, windows-1252 wins.

    Short Western European texts decode equally well as cp1250, cp1252 or cp1257; browsers fall
    back to windows-1252 for undeclared legacy pages, so a tie is settled the same way.
    """
    from charset_normalizer import from_bytes

    try:
        matches = list(from_bytes(body[:_DETECT_SAMPLE_BYTES]))
    except Exception:  # detection is best effort; a failure must not fail extraction
        _LOG.debug("charset detection failed", exc_info=True)
        matches = []
    if matches:
        best = matches[0]
        tied = [
            m
            for m in matches
            if abs(m.chaos - best.chaos) < 1e-9 and abs(m.coherence - best.coherence) < 1e-9
        ]
        if any("cp1252" in m.could_be_from_charset for m in tied):
            return "cp1252"
        codec = _codec_for(best.encoding)
        if codec is not None:
            return codec
    return "cp1252"


# --------------------------------------------------------------------------------------------
# Dates
# --------------------------------------------------------------------------------------------
# Date strings are read by citeguard.dates (parse_date, parse_pdf_date); what is here decides
# which of a page's dates to believe.

_URL_DATE_RES = (
    re.compile(r"/((?:19|20)\d\d)/([01]?\d)/([0-3]?\d)(?:/|$|[-_])"),
    re.compile(r"[/_-]((?:19|20)\d\d)-([01]\d)-([0-3]\d)(?:/|$|[-_.])"),
    re.compile(r"/((?:19|20)\d\d)([01]\d)([0-3]\d)(?:/|$)"),
)


def _plausible(dt: datetime | None, now: datetime) -> datetime | None:
    if dt is None:
        return None
    if dt < _MIN_DATE or dt > now + _FUTURE_SLACK:
        return None
    return dt


def _url_date(url: str) -> datetime | None:
    try:
        path = unquote(urlsplit(url).path)
    except ValueError:
        return None
    for rx in _URL_DATE_RES:
        m = rx.search(path)
        if m:
            return make_date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    return None


# Meta names (lower-cased ``name``/``property``/``itemprop``) in order of trust. Generic names
# ("date", "dc.date") are often a render or crawl date, so they rank below on-page markup.
_META_PUBLISHED = (
    "article:published_time",
    "og:article:published_time",
    "article:published",
    "og:published_time",
    "datepublished",
    "parsely-pub-date",
    "sailthru.date",
    "dc.date.issued",
    "dcterms.issued",
    "citation_publication_date",
    "citation_date",
    "pubdate",
    "publishdate",
    "publish-date",
    "publish_date",
    "published-date",
    "published_date",
    "publication_date",
    "originalpublicationdate",
    "article.published",
    "article_date_original",
    "cxenseparse:recs:publishtime",
    "bt:pubdate",
)
_META_PUBLISHED_WEAK = (
    "date",
    "dc.date",
    "dcterms.date",
    "dc.date.created",
    "dcterms.created",
    "datecreated",
)
_META_MODIFIED = (
    "article:modified_time",
    "og:article:modified_time",
    "article:modified",
    "og:updated_time",
    "datemodified",
    "dcterms.modified",
    "dc.date.modified",
    "last-modified",
    "lastmod",
    "article.updated",
    "parsely-updated",
)

_ARTICLE_TYPES = frozenset(
    {
        "article",
        "newsarticle",
        "blogposting",
        "reportagenewsarticle",
        "analysisnewsarticle",
        "opinionnewsarticle",
        "backgroundnewsarticle",
        "reviewnewsarticle",
        "scholarlyarticle",
        "techarticle",
        "report",
        "liveblogposting",
        "socialmediaposting",
        "posting",
        "review",
        "medicalwebpage",
        "pressrelease",
        "qapage",
        "question",
        "recipe",
        "howto",
        "dataset",
        "discussionforumposting",
        "satiricalarticle",
        "advertisercontentarticle",
        "askpublicnewsarticle",
        "claimreview",
    }
)
_PAGE_TYPES = frozenset({"webpage", "itempage", "aboutpage", "collectionpage", "profilepage"})
#: Entities that are never the page's subject: their dates (and those of everything nested in
#: them) are about the site, a person, a list of other pages or a navigation aid.
_NON_ENTITY_TYPES = frozenset(
    {
        "website",
        "breadcrumblist",
        "itemlist",
        "listitem",
        "sitenavigationelement",
        "wpheader",
        "wpfooter",
        "wpsidebar",
        "person",
        "organization",
        "newsmediaorganization",
        "corporation",
        "searchaction",
        "readaction",
    }
)
#: Properties whose values are other works than the page's own (related items, the periodical
#: it is part of, its parts, comments, reviews, citations) or the people and organisations
#: behind it; a date anywhere below them does not date the page.
_RELATED_KEYS = (
    "itemListElement",
    "relatedLink",
    "significantLink",
    "isPartOf",
    "hasPart",
    "liveBlogUpdate",
    "citation",
    "comment",
    "review",
    "author",
    "creator",
    "publisher",
    "contributor",
    "editor",
    "sourceOrganization",
    "mentions",
    "about",
    "isBasedOn",
    "workExample",
    "exampleOfWork",
    "subjectOf",
    "sharedContent",
    "itemReviewed",
    "potentialAction",
    "breadcrumb",
)
_RELATED_KEY_SET = frozenset(_RELATED_KEYS)
_JSONLD_DATE_RE = re.compile(
    r'"(datePublished|dateModified|dateCreated|uploadDate)"\s*:\s*"([^"]{6,40})"'
)


def _short_type(value: str) -> str:
    return value.rstrip("/").rsplit("/", 1)[-1].rsplit("#", 1)[-1]


def _types_of(obj: Mapping[str, Any]) -> list[str]:
    raw = obj.get("@type")
    if isinstance(raw, str):
        return [_short_type(raw)]
    if isinstance(raw, list):
        return [_short_type(t) for t in raw if isinstance(t, str)]
    return []


def _walk_jsonld(node: Any, depth: int = 0) -> Iterator[Mapping[str, Any]]:
    if depth > 6:
        return
    if isinstance(node, list):
        for item in node[:200]:
            yield from _walk_jsonld(item, depth + 1)
    elif isinstance(node, dict):
        yield node
        for key, value in node.items():
            if key in ("@graph", "mainEntity", "mainEntityOfPage", "itemListElement") or (
                isinstance(value, (dict, list)) and key not in ("@context",)
            ):
                yield from _walk_jsonld(value, depth + 1)


def _ld_urls(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """What a JSON-LD node says it is: its ``url``, ``@id`` and ``mainEntityOfPage``, as given."""
    out: list[str] = []
    for key in ("url", "@id", "mainEntityOfPage"):
        value = obj.get(key)
        if isinstance(value, list):
            value = value[0] if value else None
        if isinstance(value, dict):
            value = value.get("@id") or value.get("url")
        if isinstance(value, str):
            value = value.strip()
            # blank-node ids ("_:b0") and bare names say nothing about the page
            if value.startswith(("http://", "https://", "//", "/", "#")):
                out.append(value[:2000])
    return tuple(out)


def _url_key(url: str) -> str | None:
    """A loose key for "the same page": host less ``www.``, path less trailing slash, query."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").removeprefix("www.")
    except ValueError:
        return None
    if not host:
        return None
    key = host + parts.path.rstrip("/")
    return f"{key}?{parts.query}" if parts.query else key


class _LdDate:
    """One JSON-LD date and what its node is: kind 0 article, 1 web page, 2 read by pattern from
    broken JSON, 3 any other entity; ``weak`` for dateCreated/uploadDate."""

    __slots__ = ("kind", "order", "raw", "urls", "weak")

    def __init__(self, kind: int, weak: bool, order: int, raw: str, urls: tuple[str, ...]) -> None:
        self.kind, self.weak, self.order, self.raw, self.urls = kind, weak, order, raw, urls


class _JsonLd:
    """What the page's JSON-LD blocks say: @type values, and dates ranked by their entity.

    The page's **main entity** dates it, above every meta tag. Main-entity candidates, best
    first (then ``datePublished`` before ``dateCreated``/``uploadDate`` on the same node, then
    document order):

    ==  ============================================================================
    1   an article node (Article, NewsArticle, BlogPosting, Report, …) naming the page
    2   an article node naming no URL
    3   a web page node (WebPage, ItemPage, …) naming the page
    4   a web page node naming no URL
    5   a date read by pattern from a block that is not valid JSON
    6   an article node naming another page
    7   a web page node naming another page
    ==  ============================================================================

    A node *names the page* when its ``url``, ``@id`` or ``mainEntityOfPage`` is the page's URL,
    canonical link or ``og:url`` (host without ``www.``, path without trailing slash). Nodes of
    WebSite, BreadcrumbList, ItemList, Person, Organization…, and every node below a property
    holding other works or people (``itemListElement``, ``relatedLink``, ``isPartOf``,
    ``hasPart``, ``author``, ``publisher``, ``comment``, ``review``, …) never date the page.
    Dates of any other entity (an embedded video's ``uploadDate``, an event) are the second
    tier, trusted only after every meta tag and on-page date came up empty.
    """

    __slots__ = ("budget", "modified", "published", "types")

    def __init__(self, max_chars: int = _DEFAULT_LIMITS.max_jsonld_chars) -> None:
        self.types: list[str] = []
        self.published: list[_LdDate] = []
        self.modified: list[_LdDate] = []
        self.budget = max_chars  # characters of JSON-LD this page may still have parsed

    def add_script(self, raw: str) -> None:
        raw = raw.strip()
        if not raw or len(raw) > self.budget:
            return  # a block past the page's budget is ignored, not the page
        self.budget -= len(raw)
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            # broken JSON (trailing commas, HTML entities, comments) is common, and so is JSON
            # nested too deep to parse: fall back to a plain pattern so a date in it still
            # counts, below well-formed article entities
            for key, value in _JSONLD_DATE_RE.findall(raw):
                self._add_date(key, value, 2, ())
            return
        # a node below a related-work property, or inside a list, person or site node, is
        # about something else; the walk is pre-order, so ancestors are seen first
        not_ours: set[int] = set()
        for obj in _walk_jsonld(data):
            types = _types_of(obj)
            lowered = {t.lower() for t in types}
            for t in types:
                if t not in self.types:
                    self.types.append(t)
            if id(obj) in not_ours:
                continue
            if lowered & _NON_ENTITY_TYPES:
                not_ours.update(id(n) for n in _walk_jsonld(obj))
                continue
            for key, value in obj.items():
                if key in _RELATED_KEY_SET and isinstance(value, (dict, list)):
                    not_ours.update(id(n) for n in _walk_jsonld(value))
            if lowered & _ARTICLE_TYPES:
                kind = 0
            elif lowered & _PAGE_TYPES:
                kind = 1
            else:
                kind = 3
            urls: tuple[str, ...] | None = None
            for key in ("datePublished", "dateCreated", "uploadDate", "dateModified"):
                value = obj.get(key)
                if isinstance(value, str):
                    urls = _ld_urls(obj) if urls is None else urls
                    self._add_date(key, value, kind, urls)

    def _add_date(self, key: str, value: str, kind: int, urls: tuple[str, ...]) -> None:
        order = len(self.published) + len(self.modified)
        if key == "dateModified":
            self.modified.append(_LdDate(kind, False, order, value, urls))
        else:
            # dateCreated/uploadDate are weaker than datePublished on the same entity
            self.published.append(_LdDate(kind, key != "datePublished", order, value, urls))

    def best(
        self, which: str, now: datetime, tier: int, page_urls: tuple[str, ...] = ()
    ) -> datetime | None:
        """The most trusted plausible date of ``which`` kind among entities of ``tier``.

        ``page_urls``: the page's URL first, then its canonical link and ``og:url``.
        """
        entries = [
            e
            for e in (self.published if which == "published" else self.modified)
            if (e.kind == 3) == (tier == 1)
        ]
        if not entries:
            return None
        keys = {_url_key(u) for u in page_urls} - {None}

        def names(entry: _LdDate) -> int:
            """0: the node names the page, 1: no URL, 2: another page."""
            if not entry.urls:
                return 1
            base = page_urls[0] if page_urls else ""
            for u in entry.urls:
                try:
                    joined = urljoin(base, u)
                except ValueError:
                    continue
                if _url_key(joined) in keys:
                    return 0
            return 2

        def rank(entry: _LdDate) -> tuple[int, bool, int]:
            named = names(entry)
            if entry.kind == 2:
                place = 4
            elif entry.kind == 3:
                place = named
            else:  # article 0, 1, 5; web page 2, 3, 6
                place = (0, 1, 5)[named] if entry.kind == 0 else (2, 3, 6)[named]
            return place, entry.weak, entry.order

        for entry in sorted(entries, key=rank):
            dt = _plausible(parse_date(entry.raw), now)
            if dt is not None:
                return dt
        return None


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


# --------------------------------------------------------------------------------------------
# Bounded HTML
# --------------------------------------------------------------------------------------------
# lexbor's tree builder is worse than linear in the depth of its stack of open elements and in
# the attributes of one element (100k nested <div>s take a minute, one element with 100k
# attributes longer), and it re-opens unclosed formatting elements in every new block (a 160 kB
# page can become 5 million nodes). So before parsing, one linear pass reads the tokens as the
# HTML tokenizer does (quoted attribute values, comments, raw text and script escapes, foreign
# content, CDATA) and models the stack of open elements with the tree builder's rules for
# closing: scopes, special elements, implied ends, foreign content, integration points. Where
# the model cannot tell what the tree builder does, it keeps elements open: the real stack is
# never deeper than the model's, bar the three levels a table adds (table sections, rows and
# cells are not modelled), the formatting elements a block re-opens and what the model's own
# safety nets allow (a close pops at most _MAX_POPS elements; after _MAX_UNSURE closes it
# could not be sure of, the document is cut).
#
# Only when a bound is passed is the document rewritten: start tags nested past the depth
# bound, and formatting start tags past a small bound, are dropped with their end tags (their
# text stays, in the deepest element kept); attributes past the attribute bound are dropped; the
# document is cut at its size bound and before its token past the node bound. A page within the
# bounds is parsed exactly as it came.

_ATTR = (
    r"[^\t\n\f\r />][^\t\n\f\r />=]*+"
    r"(?:[\t\n\f\r ]*+=[\t\n\f\r ]*+(?:\"[^\"]*+\"|'[^']*+'|(?![\"'])[^\t\n\f\r >]*+))?+"
)
#: A start or end tag (1: "/", 2: name, 3: attributes), "<!--" (4), a letter that starts a tag
#: with no end (5), or a bogus comment, doctype or processing instruction.
_TOKEN_RE = re.compile(
    r"<(?:(/?)([A-Za-z][^\t\n\f\r />]*+)((?:[\t\n\f\r /]++|" + _ATTR + r")*+)>"
    r"|(!--)|([A-Za-z])|[!?/])"
)
_ATTR_RE = re.compile(_ATTR)
_ATTR_PARTS_RE = re.compile(
    r"([^\t\n\f\r />][^\t\n\f\r />=]*)(?:[\t\n\f\r ]*=[\t\n\f\r ]*(.*))?", re.S
)
_COMMENT_RE = re.compile(r"<!--(?:-?>|.*?--!?>)", re.S)
_SCRIPT_STATE_RE = re.compile(r"<!--|-->|<(/?)script[\t\n\f\r />]", re.I)


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Not modelled as open: void elements, the document's roots, and the parts of a table, which
#: the tree builder nests only inside a table (three levels per table: section, row, cell).
_UNMODELLED = _names(
    "area base basefont bgsound br col embed frame hr image img input keygen link meta param"
    " source track wbr html head body tr td th thead tbody tfoot caption colgroup"
)
#: Start tags that close an open <p> first (in button scope; <table> only in no-quirks mode,
#: which the model cannot know, so it keeps the <p>).
_CLOSES_P = _names(
    "address article aside blockquote center details dialog dir div dl fieldset figcaption"
    " figure footer header hgroup main menu nav ol p search section summary ul h* pre listing"
    " form li dd dt plaintext xmp hr"
)
_FORMATTING = _names("a b big code em font i nobr s small strike strong tt u")
#: Formatting elements left open past this many are dropped: the tree builder re-opens each in
#: every later block, so they multiply the tree (it keeps at most 3 identical ones).
_MAX_OPEN_FORMATTING = 8
#: A close that would pop more elements than this is not believed (the model keeps them), and
#: after this many closes the model could not be sure of, the rest of the document is cut.
_MAX_POPS = 8
_MAX_UNSURE = 128
#: End tags closing up to a boundary of the default scope; li adds ol and ul, table has its own
#: (table, template); every other end tag stops at a special element.
_SCOPED_END = _names(
    "address article aside blockquote button center details dialog dir div dl fieldset"
    " figcaption figure footer header hgroup listing main menu nav ol pre search section summary"
    " ul h* applet marquee object dd dt"
)
_SCOPE = _names("applet caption html table td th marquee object template")
_SVG_SCOPE = _names("^foreignobject ^desc ^title")
_MATH_SCOPE = _names("^mi ^mo ^mn ^ms ^mtext ^annotation-xml")
_FOREIGN_SCOPE = _SVG_SCOPE | _MATH_SCOPE
_SPECIAL = _SCOPE | _names(
    "address area article aside base basefont bgsound blockquote body br button center col"
    " colgroup dd details dir div dl dt embed fieldset figcaption figure footer form frame"
    " frameset h* head header hgroup hr iframe img input keygen li link listing main menu meta"
    " nav noembed noframes noscript ol p param plaintext pre script search section select"
    " source style summary tbody textarea tfoot thead title tr track ul wbr xmp"
)
#: Special elements that stop a new <li>, <dd> or <dt> from closing an open one.
_ITEM_BARRIERS = (_SPECIAL - _names("address div p")) | _FOREIGN_SCOPE
#: Elements whose content the tokenizer reads as text up to their end tag (lexbor parses
#: without scripting, so <noscript> holds markup).
_RAW_TEXT = _names("script style textarea title xmp iframe noembed noframes")
_RAW_END_RES: dict[str, re.Pattern[str]] = {
    name: re.compile(rf"</{name}[\t\n\f\r />]", re.I) for name in _RAW_TEXT
}
#: Foreign elements whose content is HTML again: SVG's, and MathML's (annotation-xml only with
#: an HTML encoding).
_SVG_INTEGRATION = _names("foreignobject desc title")
_MATH_INTEGRATION = _names("mi mo mn ms mtext")
#: HTML start tags that end foreign content (font only with color, face or size).
_BREAKOUT = _names(
    "b big blockquote body br center code dd div dl dt em embed h1 h2 h3 h4 h5 h6 head hr i img"
    " li listing menu meta nobr ol p pre ruby s small span strong strike sub sup table tt u ul var"
)
_HEADINGS = _names("h1 h2 h3 h4 h5 h6")
# the mark lists an open element belongs to (indexes into the model's marks)
_SCOPE_M, _LIST_M, _TABLE_M, _SPECIAL_M, _ITEM_M, _HTML_M, _BUTTON_M, _FMT_M = range(8)
# kinds of open element: HTML, SVG, an SVG element holding HTML, MathML, a MathML one holding it
_HTML, _SVG, _SVG_HTML, _MATH, _MATH_HTML = range(5)


def _attr_values(attrs: str) -> Iterator[tuple[str, str]]:
    """(lower-cased name, value) of each attribute, as the tokenizer reads them."""
    for a in _ATTR_RE.finditer(attrs):
        parts = _ATTR_PARTS_RE.fullmatch(a.group())
        if parts is None:  # pragma: no cover - _ATTR_RE matches only what this reads
            continue
        value = (parts.group(2) or "").strip()
        if value[:1] in ("'", '"'):
            value = value[1:-1]
        yield parts.group(1).lower(), value


def _foreign_kind(name: str, attrs: str, math: bool) -> int:
    """The kind of a new foreign element: SVG or MathML, holding HTML or not."""
    if not math:
        return _SVG_HTML if name in _SVG_INTEGRATION else _SVG
    if name in _MATH_INTEGRATION:
        return _MATH_HTML
    if name == "annotation-xml" and "encoding" in attrs.lower():
        for key, value in _attr_values(attrs):
            if key == "encoding" and value.lower() in ("text/html", "application/xhtml+xml"):
                return _MATH_HTML
    return _MATH


def _self_closing(attrs: str) -> bool:
    """Whether a tag's attributes end in the self-closing flag (a "/" not inside a value)."""
    if not attrs.endswith("/"):
        return False
    final = None
    for final in _ATTR_RE.finditer(attrs):  # noqa: B007 - the last attribute is wanted
        pass
    return final is None or final.end() < len(attrs) or "=" not in final.group()


def _script_end(html: str, pos: int) -> int:
    """Where the script data starting at ``pos`` ends (its ``</script``), or -1: the tokenizer's
    escaped and double-escaped states, in which ``</script>`` may not end it."""
    state = 0  # 0 data, 1 escaped ("<!--" seen), 2 double escaped ("<script" inside it)
    while True:
        m = _SCRIPT_STATE_RE.search(html, pos)
        if m is None:
            return -1
        token = m.group()
        pos = m.end()
        if token == "<!--":
            if state == 0:
                state = 1
                if html.startswith(">", pos) or html.startswith("->", pos):
                    state = 0  # "<!-->" and "<!--->" close at once
        elif token == "-->":
            state = 0
        elif m.group(1):  # </script
            if state == 2:
                state = 1
            else:
                return m.start()
        elif state == 1:  # <script inside an escaped part
            state = 2


_UNMODELLED_F, _RAW_F, _FORMATTING_F, _SCOPED_END_F, _BREAKOUT_F = (1 << i for i in range(5))


def _name_info(name: str) -> tuple[str, int]:
    """(the name the model keys an HTML element by, its _*_F flags)."""
    key = "h*" if name in _HEADINGS else name
    flags = 0
    for names, flag in (
        (_UNMODELLED, _UNMODELLED_F),
        (_RAW_TEXT, _RAW_F),
        (_FORMATTING, _FORMATTING_F),
        (_SCOPED_END, _SCOPED_END_F),
        (_BREAKOUT, _BREAKOUT_F),
    ):
        if key in names or name in names:
            flags |= flag
    return key, flags


def _marks_of(key: str, kind: int) -> tuple[int, ...]:
    """The mark lists an element opened with ``key`` and ``kind`` joins."""
    if kind:  # foreign ("^name"): the scope boundaries of its namespace
        scoped = _SVG_SCOPE if kind in (_SVG, _SVG_HTML) else _MATH_SCOPE
        return (_SCOPE_M, _SPECIAL_M, _ITEM_M) if key in scoped else ()
    out = [_HTML_M]
    if key == "button":
        out.append(_BUTTON_M)
    if key in _FORMATTING:
        out.append(_FMT_M)
    if key in _SCOPE:
        out.append(_SCOPE_M)
    if key in ("ol", "ul"):
        out.append(_LIST_M)
    if key in ("table", "template"):
        out.append(_TABLE_M)
    if key in _SPECIAL:
        out.append(_SPECIAL_M)
    if key in _ITEM_BARRIERS:
        out.append(_ITEM_M)
    return tuple(out)


# lexbor's cost grows with the square of the nesting depth and of one element's attribute
# count (measured: 4,000 nested <div> 10 ms, 4,000 attributes on one tag 18 ms; 20,000: 0.6 s
# and 1 s). A document that provably stays small on every axis is parsed as it is, skipping
# :func:`_bound_html` (a linear pass, ~1.5 ms per page in Python): at most _PARSE_AS_IS_TAGS
# "<" (so no deeper than that), no element with max_html_attributes attributes or more (an
# attribute needs no "=": one tag of 50,000 bare names took 19 s), little text per level of
# depth (the main-text pass reads an element's text once per nested candidate), few formatting
# tags per tag (each can be re-opened in every later block) and few repeated <html>/<body>
# tags (each merges its attributes into the first). Checked at C speed; 70% of the shared real
# pages pass.
_PARSE_AS_IS_TAGS = 4_000
_PARSE_AS_IS_TEXT_WORK = 1_000_000_000  # "<" x characters
_PARSE_AS_IS_REOPEN_WORK = 500_000  # formatting start tags x "<"
_PARSE_AS_IS_ROOTS = 64
# Formatting start tags (group 1) and <html>/<body> start tags (group 1 empty), in one pass.
# ASCII case only, as the tokenizer lowercases names (re.I alone would also let "<ſ" match
# "s"); the lookahead on the first letter skips most "<" at once: 2.6x faster on real pages
_COUNTED_START_RE = re.compile(
    r"<(?=[bcefhinstu])(?:(b|big|code|em|font|i|nobr|s|small|strike|strong|tt|u)|html|body)"
    r"[\t\n\f\r />]",
    re.I | re.A,
)


def _many_attributes_re(count: int) -> re.Pattern[str]:
    """A tag with at least ``count`` attributes, read as the tokenizer reads them (re caches
    the compiled pattern)."""
    return re.compile(r"<[A-Za-z][^\t\n\f\r />]*+(?:[\t\n\f\r /]*+" + _ATTR + f"){{{count}}}")


def _small_enough(html: str, policy: FetchPolicy) -> bool:
    """Whether ``html`` is too small for any bound to matter (counted at C speed)."""
    tags = html.count("<")
    if (
        len(html) > policy.max_html_chars
        or tags > min(_PARSE_AS_IS_TAGS, policy.max_html_nodes, 16 * policy.max_html_depth)
        or tags * len(html) > _PARSE_AS_IS_TEXT_WORK
    ):
        return False
    counted = _COUNTED_START_RE.findall(html)
    roots = counted.count("")
    if (len(counted) - roots) * tags > _PARSE_AS_IS_REOPEN_WORK or roots > _PARSE_AS_IS_ROOTS:
        return False
    return _many_attributes_re(policy.max_html_attributes).search(html) is None


def _bound_html(html: str, policy: FetchPolicy) -> tuple[str, bool]:
    """``html`` within ``policy``'s size, depth, node and attribute bounds; True when changed."""
    cut = len(html) > policy.max_html_chars
    if cut:
        html = html[: policy.max_html_chars]
    max_depth, max_attrs, max_tokens = (
        policy.max_html_depth,
        policy.max_html_attributes,
        policy.max_html_nodes,
    )
    attrs_check = 2 * max_attrs  # only longer attributes can hold more than max_attrs
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement), in document order
    infos: dict[str, tuple[str, int, str, tuple[int, ...]]] = {}  # key, flags, lower, marks
    foreign_marks: dict[tuple[str, int], tuple[int, ...]] = {}
    # the model: open elements (key, kind: 0 HTML, 1 foreign, 2 foreign holding HTML; foreign
    # keys are "^" + name), where each key sits, the marks (see _marks_of), and fences: parts the
    # tokenizer may read as text, inside which nothing closes what was open before them
    keys: list[str] = []
    kinds: list[int] = []
    joined: list[tuple[int, ...]] = []
    positions: dict[str, list[int]] = {}
    marks: tuple[list[int], ...] = ([], [], [], [], [], [], [], [])
    fences: list[tuple[int, int]] = []  # (lowest index a close may pop, where the part ends)
    dropped: dict[str, int] = {}  # start tags dropped past a bound, by key
    formatting: dict[str, int] = {}  # formatting start tags not yet closed by an end tag
    open_formatting = 0
    roots: set[str] = set()  # <html>/<body> seen: a repeat only merges its attributes
    merged = 0  # attributes that repeated <html>/<body> tags merged
    unsure = 0  # closes the model could not be sure of
    tokens = 0
    end = len(html)
    pos = 0

    # where the next end of a raw text part ("</title", "]]>", "<!--") is, remembered: asked
    # again from a later position, a search only reads past what an earlier one read
    nexts: dict[str, tuple[int, int]] = {}  # what -> (searched from, found at or -1)

    def next_of(what: str, start: int) -> int:
        known = nexts.get(what)
        if known is not None and known[0] <= start and (known[1] < 0 or known[1] >= start):
            return known[1]
        if what in _RAW_END_RES:
            r = _RAW_END_RES[what].search(html, start)
            found = r.start() if r is not None else -1
        else:
            found = html.find(what, start)
        nexts[what] = (start, found)
        return found

    def floor() -> int:
        # closes never pop below the floor, so each fence's floor is at least the one before:
        # the last fence still open holds the highest
        while fences and fences[-1][1] <= pos:
            fences.pop()
        return fences[-1][0] if fences else 0

    def fenced() -> bool:
        """Whether ``pos`` lies in a part the tokenizer may read as text."""
        floor()
        return bool(fences)

    def resume() -> int:
        """Where to read on when the markup seems to end at ``pos`` (an unterminated comment or
        tag): inside a part that may be text, at that part's end, which is where the tokenizer
        goes on if it read the part as text; elsewhere nowhere (-1): the document ends here."""
        return min((e for _, e in fences if e > pos), default=-1) if fenced() else -1

    def last(m: int) -> int:
        lst = marks[m]
        return lst[-1] if lst else -1

    def push(key: str, kind: int, into: tuple[int, ...]) -> None:
        i = len(keys)
        keys.append(key)
        kinds.append(kind)
        where = positions.get(key)
        if where is None:
            positions[key] = [i]
        else:
            where.append(i)
        joined.append(into)
        for m in into:
            marks[m].append(i)

    def pop_to(i: int) -> bool:
        """Close the element at ``i`` and everything above it, if the model may: never below a
        fence, never more than _MAX_POPS at once (not believed: counted as unsure)."""
        nonlocal unsure
        if (fences and i < floor()) or len(keys) - i > _MAX_POPS:
            unsure += 1
            return False
        if i == len(keys) - 1:  # the usual case: the current element closes
            positions[keys.pop()].pop()
            kinds.pop()
            for m in joined.pop():
                marks[m].pop()
            return True
        while len(keys) > i:
            positions[keys.pop()].pop()
            kinds.pop()
            for m in joined.pop():
                marks[m].pop()
        return True

    def close(key: str, scope: int) -> bool:
        """Close the HTML element ``key`` if it is open and no boundary of ``scope`` (a mark
        list, or -1 for none) stands above it."""
        nonlocal unsure
        where = positions.get(key)
        if not where:
            return False
        i = where[-1]
        if kinds[i]:
            return False  # the newest element of that name is foreign: not an HTML one
        floor_at = max(last(scope), last(_LIST_M) if key == "li" else -1) if scope >= 0 else -1
        if i < floor_at:
            unsure += 1  # the tree builder ignores it, unless the boundary is stale
            return False
        return pop_to(i)

    search = _TOKEN_RE.search
    while True:
        if unsure > _MAX_UNSURE:
            end, cut = pos, True  # the model has lost track: no deeper tree past here
            break
        m = search(html, pos)
        if m is None:
            break
        at = m.start()
        tokens += 1
        if tokens > max_tokens:
            end, cut = at, True
            break
        slash, raw_name, attrs, comment, unclosed = m.groups()
        if raw_name is None:
            c = _COMMENT_RE.match(html, at) if comment else None  # "<!--"
            close_at = -1 if comment or unclosed else html.find(">", at)
            if c is None and close_at < 0:
                # an unterminated comment, tag or doctype: the rest is inside it
                pos = resume()
                if pos < 0:
                    break
                continue
            if c is not None:
                pos = c.end()
                continue
            pos = close_at + 1  # a bogus comment, a doctype, a processing instruction
            if html.startswith("<![CDATA[", at):
                # text up to "]]>" in foreign content, a bogus comment up to ">" elsewhere: read
                # what follows the ">" as markup that closes nothing open before it
                cdata_end = next_of("]]>", at)
                fences.append((len(keys), cdata_end if cdata_end >= 0 else end))
            continue
        pos = m.end()
        info = infos.get(raw_name)
        if info is None:
            lower = raw_name.lower()
            key, flags = _name_info(lower)
            info = infos[raw_name] = (key, flags, lower, _marks_of(key, 0))
        key, flags, lower, html_marks = info
        # formatting elements the tree builder may re-open at any point (left open, not on the
        # stack): the current node may be one of them, so nothing is closed for being current
        reopens = open_formatting > len(marks[_FMT_M])
        if slash:  # an end tag
            if dropped and dropped.get(key):
                dropped[key] -= 1
                edits.append((at, pos, ""))
                continue
            if kinds and kinds[-1] and not reopens:
                # foreign content: the newest foreign element of that name closes when no HTML
                # element stands above it; otherwise the HTML rules apply
                where = positions.get("^" + lower)
                if where and where[-1] > last(_HTML_M):
                    if pop_to(where[-1]) and dropped:
                        dropped.clear()
                    continue
                if lower in ("p", "br"):  # they end foreign content first
                    lowest = floor() if fences else 0
                    while len(keys) > lowest and kinds[-1] in (_SVG, _MATH):
                        if not pop_to(len(keys) - 1):
                            break
            if flags & _FORMATTING_F and formatting.get(key):
                formatting[key] -= 1
                open_formatting -= 1
            if key in ("form", "frameset"):
                # </form> removes only the form, </frameset> pops only the current node: the
                # model closes them only when they are the current node
                current = bool(keys) and keys[-1] == key and kinds[-1] == 0
                closed = current and pop_to(len(keys) - 1)
            elif key == "select":
                # select scope: only option and optgroup elements may stand above it
                at_select = positions["select"][-1] if positions.get("select") else -1
                closed = at_select >= 0 and all(k == "optgroup" for k in keys[at_select + 1 :])
                closed = closed and pop_to(at_select)
            elif key == "template":
                closed = close("template", -1)
            elif key == "table":
                closed = close("table", _TABLE_M)
            elif key == "li":
                closed = close("li", _SCOPE_M)
            elif key == "p":
                closed = close("p", _BUTTON_M)
            elif flags & _SCOPED_END_F:
                closed = close(key, _SCOPE_M)
            else:
                closed = close(key, _SPECIAL_M)
            if closed and dropped:
                dropped.clear()  # every element dropped was inside the one just closed
            continue
        if len(attrs) > attrs_check:
            for found, a in enumerate(_ATTR_RE.finditer(attrs)):
                if found >= max_attrs:
                    attrs = attrs[: a.start()]  # what the tree builder will read
                    edits.append((at, pos, f"<{raw_name}{attrs}>"))
                    break
        # foreign content: the current node is SVG or MathML, not an integration point (there
        # HTML rules apply; MathML's text ones keep mglyph and malignmark foreign)
        top = kinds[-1] if kinds else _HTML
        foreign = top in (_SVG, _MATH)
        if top == _MATH_HTML and lower in ("mglyph", "malignmark"):
            foreign = True
        if top == _MATH and lower == "svg" and keys[-1] == "^annotation-xml":
            foreign = False  # <svg> in annotation-xml starts SVG, by the HTML rules
        breakout = foreign and bool(
            flags & _BREAKOUT_F
            or (
                key == "font"
                and any(k in ("color", "face", "size") for k, _ in _attr_values(attrs))
            )
        )
        in_html = not foreign or breakout
        # certain: the tree builder reads this as HTML in body, outside any part that may be
        # text (only then is a raw text element surely read as text, plaintext surely final)
        certain = (
            in_html
            and not positions.get("select")
            and not positions.get("frameset")
            and not (fences and fenced())
        )
        leaf = bool(flags & _UNMODELLED_F) if in_html else _self_closing(attrs)
        if certain and (flags & _RAW_F or key == "plaintext"):
            leaf = True
        if in_html and key in ("svg", "math") and _self_closing(attrs):
            leaf = True  # "<svg/>" closes at once
        if not leaf:
            # dropped whole, before any of its effects: what follows must be read as the tree
            # builder will read the document without it
            drop = len(keys) >= max_depth
            if not drop and flags & _FORMATTING_F and in_html:
                drop = open_formatting >= _MAX_OPEN_FORMATTING
            if drop:
                dropped[key] = dropped.get(key, 0) + 1
                if edits and edits[-1][0] == at:
                    edits.pop()  # the attribute edit of a tag now dropped whole
                edits.append((at, pos, ""))
                continue
        if breakout:  # foreign elements close up to an HTML element or an integration point
            lowest = floor() if fences else 0
            while len(keys) > lowest and kinds[-1] in (_SVG, _MATH):
                if not pop_to(len(keys) - 1):
                    break
            if kinds and kinds[-1] in (_SVG, _MATH):
                unsure += 1  # a fence kept foreign content open that the tree builder left
        if flags & _RAW_F and in_html:
            if certain:
                raw_end = _script_end(html, pos) if key == "script" else next_of(key, pos)
                if raw_end < 0:
                    break  # text to the end of the document
                pos = raw_end
                continue
            # the tree builder may or may not have the tokenizer read it as text: read it as
            # markup, but let nothing inside close what was open before it (a script's escapes
            # can carry it past its first end tag: then to the end of the document)
            raw_end = next_of(key, pos)
            if raw_end < 0 or (key == "script" and 0 <= next_of("<!--", pos) < raw_end):
                raw_end = end
            fences.append((len(keys), raw_end))
        if in_html:  # an HTML element, whatever foreign content a fence kept open
            if key in ("html", "body"):
                # a repeated <html>/<body> adds its attributes to the first one (checking each
                # against every attribute already there): bounded like one element's
                if key in roots and attrs.strip():
                    merged += sum(1 for _ in _ATTR_RE.finditer(attrs))
                    if merged > max_attrs:
                        if edits and edits[-1][0] == at:
                            edits.pop()
                        edits.append((at, pos, f"<{raw_name}>"))
                roots.add(key)
            if key == "plaintext" and certain:
                break  # text to the end of the document
            if leaf:
                continue
            if key in ("li", "dd", "dt"):
                # a new item closes the open one of its kind, unless a special element other
                # than address, div or p stands between
                same = ("li",) if key == "li" else ("dd", "dt")
                target = max((positions[k][-1] for k in same if positions.get(k)), default=-1)
                if target >= 0 and target >= last(_ITEM_M):
                    pop_to(target)
            if key in _CLOSES_P and positions.get("p"):
                # an open <p> in button scope closes first
                at_p = positions["p"][-1]
                if at_p > max(last(_SCOPE_M), last(_BUTTON_M)):
                    pop_to(at_p)
            current_key = ""
            if keys and kinds[-1] == _HTML and not reopens:
                current_key = keys[-1]
            if key == "h*" and current_key == "h*":
                pop_to(len(keys) - 1)  # a heading closes a heading that is the current node
            elif key in ("option", "optgroup") and current_key == "option":
                pop_to(len(keys) - 1)  # so does an option an option
            if key in ("svg", "math"):
                kind = _SVG if key == "svg" else _MATH
                push("^" + key, kind, ())  # foreign content begins
                continue
            if flags & _FORMATTING_F:
                formatting[key] = formatting.get(key, 0) + 1
                open_formatting += 1
            push(key, 0, html_marks)
        elif not leaf:
            kind = _foreign_kind(lower, attrs, top in (_MATH, _MATH_HTML))
            into = foreign_marks.get((lower, kind))
            if into is None:
                into = foreign_marks[(lower, kind)] = _marks_of("^" + lower, kind)
            push("^" + lower, kind, into)
    if not edits and not cut:
        return html, False
    pieces: list[str] = []
    last_end = 0
    for start, stop, replacement in edits:
        if start >= end:
            break
        pieces.append(html[last_end:start])
        pieces.append(replacement)
        last_end = stop
    pieces.append(html[last_end:end])
    return "".join(pieces), True


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------

_DROP_TAGS = [
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "math",
    "iframe",
    "object",
    "embed",
    "canvas",
    "head",
]
_HIDDEN_SELECTOR = (
    '[hidden], [aria-hidden="true" i], [style*="display:none" i], [style*="display: none" i]'
)
# Elements laid out as blocks: picked by tag name in Python from one walk of the tree, which
# is 2.5x faster than lexbor matching a 44-name selector list against every element.
_BLOCK_TAGS = frozenset(
    (
        "address",
        "article",
        "aside",
        "blockquote",
        "br",
        "caption",
        "dd",
        "details",
        "dialog",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "td",
        "th",
        "tr",
        "ul",
        "option",
        "legend",
        "button",
        "select",
        "textarea",
        "center",
    )
)
_BOILERPLATE_TAGS = "nav, footer, aside, form, menu, dialog, button, select"
# Class/id hints of boilerplate, matched in C by lexbor: substrings that rarely occur inside a
# content class name, and whole tokens for short ones ("ad" would match "header" as a substring).
_BOILERPLATE_SUBSTRINGS = (
    "comment",
    "kommentar",
    "related",
    "share",
    "sharing",
    "social",
    "newsletter",
    "subscribe",
    "sidebar",
    "breadcrumb",
    "teaser",
    "promo",
    "advert",
    "werbung",
    "cookie",
    "consent",
    "banner",
    "widget",
    "recommend",
    "popular",
    "footer",
    "navbar",
    "navigation",
    "menu",
    "tagcloud",
    "author-bio",
    "authorbio",
    "pagination",
    "pager",
    "modal",
    "popup",
    "overlay",
    "outbrain",
    "taboola",
    "signup",
    "paywall",
    "byline",
    "newsticker",
    "skiplink",
    "skip-link",
    "more-stories",
    "read-more",
)
_BOILERPLATE_TOKENS = (
    "nav",
    "ad",
    "ads",
    "anzeige",
    "tags",
    "print",
    "rss",
    "meta",
    "share",
    "social",
)
_BOILERPLATE_SELECTOR = ", ".join(
    [f'[class*="{x}" i], [id*="{x}" i]' for x in _BOILERPLATE_SUBSTRINGS]
    + [f'[class~="{x}" i], [id="{x}" i]' for x in _BOILERPLATE_TOKENS]
)
_MAIN_CANDIDATES = ('[itemprop="articleBody"]', "article", "main", '[role="main"]')
_INVISIBLE_RE = re.compile("[\u00ad\u200b\u200c\u200d\u2060\ufeff]")
_INVISIBLE_CHARS = ("\u00ad", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff")
#: Marks block boundaries in the DOM before text is read; not whitespace to ``str.split``.
_BLOCK_MARK = "\x01"


def _clean_text(raw: str) -> str:
    """Render text as a browser would lay it out, roughly.

    Any run of source whitespace (newlines included) is one space; a block boundary
    (``_BLOCK_MARK``) is one newline. Soft hyphens and zero-width characters are dropped.
    """
    if any(ch in raw for ch in _INVISIBLE_CHARS):
        raw = _INVISIBLE_RE.sub("", raw)
    # str.split() with no argument splits on every Unicode space (nbsp, thin space…) in C;
    # plain str methods beat a regex here by an order of magnitude on large pages
    flat = " ".join(raw.split())
    if _BLOCK_MARK not in flat:
        return flat
    # the only whitespace left is single spaces, so strip() drops the space on each side of a
    # mark; runs of marks leave empty pieces, which go
    return "\n".join(filter(None, map(str.strip, flat.split(_BLOCK_MARK))))


def _attr(node: Any, name: str) -> str | None:
    try:
        value = node.attributes.get(name)
    except Exception:  # lexbor can refuse odd attribute bytes; treat as absent
        return None
    return value if isinstance(value, str) else None


_HEAD_SELECTOR = ", ".join(
    (
        "html",
        "title",
        'link[rel~="canonical" i][href]',
        "meta[content]",
        'script[type="application/ld+json" i]',
        '[itemprop="datePublished" i]:not(meta)',
        '[itemprop="dateModified" i]:not(meta)',
        "time",
        ".published[title]",
        ".published[datetime]",
        ".dt-published[datetime]",
    )
)


def _absolute(base: str, href: Any) -> str | None:
    if not isinstance(href, str) or not href.strip():
        return None
    try:
        resolved = urljoin(base, href.strip())
    except ValueError:
        return None
    return resolved if resolved.startswith(("http://", "https://")) else None


class _Head:
    """Metadata read from the parsed document before its invisible parts are removed."""

    def __init__(self, tree: Any, url: str, jsonld: _JsonLd | None = None) -> None:
        self.title: str | None = None
        self.canonical: str | None = None
        self.language: str | None = None
        self.meta: dict[str, str] = {}
        self.jsonld = jsonld if jsonld is not None else _JsonLd()
        self.itemprop_published: str | None = None
        self.itemprop_modified: str | None = None
        # <time> elements that may date the page: (place, order, datetime attribute, text)
        self.times: list[tuple[int, int, str | None, str]] = []
        self.linked_urls: list[str] = []
        self.hatom_published: str | None = None
        # on-page date elements (itemprop, <time>, hAtom), placed by on_page() on demand
        self._dated: list[Any] = []
        self._placed = False
        self._read(tree, url)

    def _add_meta(self, attrs: Mapping[str, Any]) -> None:
        key = attrs.get("property") or attrs.get("name") or attrs.get("itemprop")
        key = key or attrs.get("http-equiv")
        content = attrs.get("content")
        if isinstance(key, str) and isinstance(content, str) and key and content:
            self.meta.setdefault(key.strip().lower(), content.strip())

    def _read(self, tree: Any, url: str) -> None:
        # one pass over the document for all head and microdata hints (each css() call walks
        # the whole tree); dispatch on what matched
        for node in tree.css(_HEAD_SELECTOR):
            tag = node.tag
            try:
                attrs = node.attributes
            except Exception:  # lexbor can refuse odd attribute bytes; skip that element
                continue
            if tag == "meta":
                prop = attrs.get("itemprop")
                if (
                    isinstance(prop, str)
                    and prop.lower() in ("datepublished", "datemodified", "datecreated")
                    and prop.lower() not in self.meta
                    and _date_place(node, chrome=False) is None
                ):
                    continue  # microdata of a related post or a comment, not of the page
                self._add_meta(attrs)
            elif tag == "script":
                self.jsonld.add_script(node.text())
            elif tag == "title":
                if self.title is None:
                    self.title = _clean_text(node.text()) or None
            elif tag == "html":
                self.language = _language(attrs.get("lang") or attrs.get("xml:lang"))
            elif tag == "link":
                if self.canonical is None:
                    self.canonical = _absolute(url, attrs.get("href"))
            elif len(self._dated) < _MAX_DATE_NODES:
                self._dated.append(node)
        og_url = self.meta.get("og:url")
        self.linked_urls = [u for u in (self.canonical, og_url) if u]
        if self.title is None:
            self.title = self.meta.get("og:title") or None
        if self.language is None:
            lang = self.meta.get("content-language") or self.meta.get("og:locale")
            self.language = _language(lang)

    def on_page(self) -> _Head:
        """Place the on-page date elements (itemprop, ``<time>``, hAtom) once; returns self.

        Only those that date the page itself count (:func:`_date_place`: not in a related post,
        a comment, an aside or the site's chrome). Placing walks each element's ancestors, so it
        waits until JSON-LD and meta tags came up empty; it must run before the tree is pruned.
        """
        if self._placed:
            return self
        self._placed = True
        itemprops: dict[str, str] = {}
        times_placed = 0
        for node in self._dated:
            tag = node.tag
            try:
                attrs = node.attributes
            except Exception:  # lexbor can refuse odd attribute bytes; skip that element
                continue
            prop = (attrs.get("itemprop") or "").lower()
            wanted_prop = prop in ("datepublished", "datemodified") and prop not in itemprops
            is_time = tag == "time" and times_placed < _MAX_DATE_ELEMENTS
            classes = (attrs.get("class") or "").split()
            is_hatom = self.hatom_published is None and (
                "published" in classes or "dt-published" in classes
            )
            if not (wanted_prop or is_time or is_hatom):
                continue
            times_placed += is_time
            # explicit microdata is trusted unless it sits in another item's block
            place = _date_place(node, chrome=not wanted_prop)
            if place is None:
                continue
            if wanted_prop:
                raw = attrs.get("datetime") or attrs.get("content") or node.text()
                if isinstance(raw, str):
                    itemprops[prop] = raw
            if is_time:
                stamp = attrs.get("datetime")
                self.times.append(
                    (
                        _PLACE_PUBDATE if "pubdate" in attrs else place,
                        len(self.times),
                        stamp if isinstance(stamp, str) else None,
                        node.text()[:MAX_DATE_CHARS],
                    )
                )
            if is_hatom:
                if "published" in classes:
                    self.hatom_published = attrs.get("datetime") or attrs.get("title")
                else:
                    self.hatom_published = attrs.get("datetime")
        self.itemprop_published = itemprops.get("datepublished")
        self.itemprop_modified = itemprops.get("datemodified")
        self._dated = []
        return self

    def forget_nodes(self) -> None:
        """Drop the element references: once the tree is pruned they must not be placed."""
        self._dated = []
        self._placed = True


def _language(raw: str | None) -> str | None:
    if not raw:
        return None
    first = raw.split(",")[0].strip().replace("_", "-")
    primary = first.split("-")[0].lower()
    if 2 <= len(primary) <= 3 and primary.isalpha():
        return primary
    return None


def _structured_dates(
    head: _Head, url: str, now: datetime
) -> tuple[datetime | None, str | None, datetime | None]:
    """(published, its source, modified) from the page's own markup; no htmldate.

    Publication date precedence, most trusted first (``date_source`` names the rule):

    ==  ======================  ===========================================================
    1   ``json-ld``             the JSON-LD main entity's ``datePublished`` (see
                                :class:`_JsonLd`: an Article-typed node naming the page
                                beats a WebPage; lists, breadcrumbs, sites, people and
                                related items never count)
    2   ``meta:<name>``         specific meta tags: ``article:published_time``,
                                ``og:published_time``, ``datePublished``,
                                ``parsely-pub-date``, ``DC.date.issued``, …
    3   ``itemprop:…``          on-page ``itemprop="datePublished"`` outside related blocks
    4   ``time``                ``<time pubdate>``, then a ``<time>`` in the article's
                                header/byline, then any ``<time>`` in the article — never
                                one in a related-posts block, comment, nested ``<article>``,
                                ``<aside>``, ``<nav>`` or ``<footer>`` (:func:`_date_place`)
    5   ``time:byline``         a ``<time>`` in a byline-like block on a page without an
                                ``<article>``
    6   ``meta:<generic>``      generic meta names (``date``, ``DC.date``, ``dcterms.created``)
    7   ``json-ld:other``       other JSON-LD entities (an embedded video's ``uploadDate``)
    8   ``hatom:published``     hAtom/microformats ``.published`` / ``.dt-published``
    9   ``url``                 a day in the URL path; then in the canonical / og:url
    10  ``time:page``           any other ``<time>`` outside related/aside/nav/footer blocks
    11  ``htmldate``            only when all of the above are empty (in the caller)
    ==  ======================  ===========================================================

    A ``<time>`` is read from its ``datetime`` attribute, else from its text. When the chosen
    date and the URL's day are one day apart, the URL's day wins (``+url``). Rules 3–10 read
    live elements: call this before the tree is pruned.
    """
    meta = head.meta
    page_urls = (url, *head.linked_urls)
    candidates: list[tuple[str, Any]] = [
        ("json-ld", lambda: head.jsonld.best("published", now, tier=0, page_urls=page_urls)),
        *((f"meta:{key}", (lambda k=key: parse_date(meta.get(k)))) for key in _META_PUBLISHED),
        ("itemprop:datePublished", lambda: parse_date(head.on_page().itemprop_published)),
        ("time", lambda: _time_date(head.on_page().times, now, _PLACE_PUBDATE, _PLACE_ARTICLE)),
        (
            "time:byline",
            lambda: _time_date(head.on_page().times, now, _PLACE_BYLINE, _PLACE_BYLINE),
        ),
        *((f"meta:{key}", (lambda k=key: parse_date(meta.get(k)))) for key in _META_PUBLISHED_WEAK),
        (
            "json-ld:other",
            lambda: head.jsonld.best("published", now, tier=1, page_urls=page_urls),
        ),
        ("hatom:published", lambda: parse_date(head.on_page().hatom_published)),
        ("url", lambda: _url_date(url)),
        *(("url:canonical", (lambda u=u: _url_date(u))) for u in head.linked_urls),
        ("time:page", lambda: _time_date(head.on_page().times, now, _PLACE_PAGE, _PLACE_PAGE)),
    ]
    published: datetime | None = None
    source: str | None = None
    for name, get in candidates:
        dt = _plausible(get(), now)
        if dt is not None:
            published, source = dt, name
            break
    if published is not None and source != "url":
        # the URL path carries the publisher's own calendar day; metadata stamped in UTC near
        # midnight can fall on the neighbouring day, so let the URL settle the day
        in_url = _url_date(url)
        if in_url is not None and abs((published.date() - in_url.date()).days) == 1:
            published = in_url
            source = f"{source}+url"
    modified = head.jsonld.best("modified", now, tier=0, page_urls=page_urls)
    if modified is None:
        for key in _META_MODIFIED:
            modified = _plausible(parse_date(meta.get(key)), now)
            if modified is not None:
                break
    if modified is None:
        modified = _plausible(parse_date(head.on_page().itemprop_modified), now)
    if modified is None:
        modified = head.jsonld.best("modified", now, tier=1, page_urls=page_urls)
    head.forget_nodes()
    return published, source, modified


def _time_date(
    times: list[tuple[int, int, str | None, str]], now: datetime, first: int, last: int
) -> datetime | None:
    """The best-placed plausible ``<time>`` date with a place in ``first..last``.

    The ``datetime`` attribute is read, else the text; when both name a day and the days
    differ, the text wins: it is the day the reader sees (an attribute stamped in UTC, or
    with the last edit, drifts from it).
    """
    for place, _, stamp, text in sorted(times, key=lambda t: (t[0], t[1])):
        if first <= place <= last:
            machine = _plausible(parse_date(stamp), now)
            shown = _plausible(_visible_date(text), now)
            if machine is not None and shown is not None and shown.date() != machine.date():
                return shown
            if machine is not None or shown is not None:
                return machine or shown
    return None


def _htmldate_published(html: str, url: str, now: datetime) -> datetime | None:
    """htmldate's guess at the original publication date, or None.

    We build the lxml tree ourselves: handed a string that looks like a URL, htmldate would
    download it, and extraction must never touch the network. ``max_date`` is not passed on:
    given one, htmldate clamps an out-of-range date to it (inventing "today"), so plausibility
    is checked here instead.
    """
    if len(html) > _HTMLDATE_MAX_CHARS:
        return None
    try:
        import htmldate
        from htmldate.utils import HTML_PARSER, repair_faulty_html
        from lxml.html import HtmlElement, fromstring  # type: ignore[import-untyped]

        try:
            tree = fromstring(repair_faulty_html(html, html[:50].lower()), parser=HTML_PARSER)
        except ValueError:  # a str with an XML encoding declaration: lxml wants bytes
            tree = fromstring(html.encode("utf-8"), parser=HTML_PARSER)
        if not isinstance(tree, HtmlElement) or len(tree) < 1:
            return None
        found = htmldate.find_date(
            tree,
            url=url,
            original_date=True,
            extensive_search=True,
            outputformat="%Y-%m-%d",
        )
    except Exception:  # htmldate/lxml failures mean "no date", never a failed extraction
        _LOG.debug("htmldate failed on %s", url, exc_info=True)
        return None
    return _plausible(parse_date(found), now) if isinstance(found, str) else None


def _main_node(tree: Any) -> Any:
    """The element holding the article body: markup hints first, else the densest paragraphs."""
    for selector in _MAIN_CANDIDATES:
        best: Any = None
        best_len = 0
        for node in tree.css(selector):
            length = len(node.text(separator=" ").strip())
            if length > best_len:
                best, best_len = node, length
        if best is not None and best_len >= 200:
            return best
    # readability-style scoring: every paragraph credits its parent fully, its grandparent half
    scores: dict[int, float] = {}
    nodes: dict[int, Any] = {}
    for p in tree.css("p, pre, blockquote"):
        length = len(p.text(separator=" ").strip())
        if length < 25:
            continue
        parent = p.parent
        if parent is None:
            continue
        scores[parent.mem_id] = scores.get(parent.mem_id, 0.0) + length
        nodes[parent.mem_id] = parent
        grand = parent.parent
        if grand is not None:
            scores[grand.mem_id] = scores.get(grand.mem_id, 0.0) + length / 2
            nodes[grand.mem_id] = grand
    if not scores:
        return None
    return nodes[max(scores, key=scores.__getitem__)]


def _main_text(tree: Any) -> str | None:
    """The article body's text, or None when the page has no body text at all."""
    node = _main_node(tree)
    if node is None:
        node = tree.body
        if node is None:
            return None
    total = len(node.text(separator=""))
    for bad in node.css(_BOILERPLATE_TAGS):
        bad.decompose()
    for bad in node.css("header"):
        # a site header is boilerplate; an article's own header carries its headline and dek
        if not bad.css_matches("article header"):
            bad.decompose()
    for bad in node.css(_BOILERPLATE_SELECTOR):
        if bad.tag in ("html", "body", "main", "article"):
            continue
        # layout wrappers are often named after their sidebar ("has-sidebar", "share-zone"):
        # an element holding much of the candidate's text is content, whatever its name
        if len(bad.text(separator="")) * 5 >= total * 2:
            continue
        bad.decompose()
    text = _clean_text(node.text(separator=""))
    return text or None


def _lexbor_bytes(raw_bytes: bytes | None, charset: str | None) -> bytes | None:
    """The body itself when lexbor can parse it as it is (UTF-8 without a BOM), else None
    (the decoded str is parsed)."""
    if raw_bytes is not None and charset == "utf-8" and not raw_bytes.startswith(codecs.BOM_UTF8):
        return raw_bytes
    return None


class _ParsedHtml(NamedTuple):
    """An HTML page after :func:`_parse_html`: the text that was parsed (bounded when it had
    to be), its lexbor tree and what its head and JSON-LD say."""

    html: str
    tree: Any
    head: _Head
    bounded: bool


def _parse_html(html: str, url: str, utf8_body: bytes | None, limits: FetchPolicy) -> _ParsedHtml:
    """The first stage of an HTML page: bounded when it must be, parsed once, its head read."""
    if _small_enough(html, limits):
        bounded = False  # the parser's worst case on this little markup is a few ms
    else:
        html, bounded = _bound_html(html, limits)
    if bounded:
        utf8_body = None  # the bounded text is what gets parsed, not the body
    # lexbor reads UTF-8 bytes natively; handing it the body saves re-encoding the str
    tree = LexborHTMLParser(utf8_body if utf8_body is not None else html)
    return _ParsedHtml(html, tree, _Head(tree, url, _JsonLd(limits.max_jsonld_chars)), bounded)


def _html_dates(
    parsed: _ParsedHtml,
    url: str,
    now: datetime,
    headers: Mapping[str, str],
    date_fallback: bool,
) -> tuple[datetime | None, str | None, datetime | None]:
    """The dates stage, run on the whole tree before any text is read: (published, its
    source, modified) by :func:`_structured_dates`' precedence, then htmldate (when
    ``date_fallback``), then the ``Last-Modified`` header for ``modified``."""
    published, source, modified = _structured_dates(parsed.head, url, now)
    if published is None and date_fallback and not parsed.bounded:
        # htmldate walks every element in Python: not on a page that had to be bounded
        published = _htmldate_published(parsed.html, url, now)
        if published is not None:
            source = "htmldate"
    if modified is None:
        modified = _plausible(parse_date(headers.get("last-modified")), now)
    return published, source, modified


def _extract_html(
    html: str,
    url: str,
    now: datetime,
    charset: str | None,
    headers: Mapping[str, str],
    utf8_body: bytes | None = None,
    date_fallback: bool = True,
    limits: FetchPolicy | None = None,
) -> Page:
    parsed = _parse_html(html, url, utf8_body, limits or _DEFAULT_LIMITS)
    tree, head = parsed.tree, parsed.head
    # dates first: on-page date elements are placed (on demand) while the tree is whole
    published, source, modified = _html_dates(parsed, url, now, headers, date_fallback)
    tree.strip_tags(_DROP_TAGS, recursive=True)
    for node in tree.css(_HIDDEN_SELECTOR):
        if node.tag not in ("html", "body"):
            node.decompose()
    # a newline on both sides of every block element, so "<p>a</p><p>b</p>" reads "a\nb"
    if tree.root is not None:
        for node in [n for n in tree.root.traverse() if n.tag in _BLOCK_TAGS]:
            node.insert_before(_BLOCK_MARK)
            node.insert_after(_BLOCK_MARK)
    root = tree.body if tree.body is not None else tree.root
    text = _clean_text(root.text(separator="")) if root is not None else ""
    main_text = _main_text(tree) if text else None
    language = head.language or _language(headers.get("content-language"))
    return Page(
        url=url,
        kind="html",
        text=text,
        main_text=main_text,
        title=head.title,
        canonical_url=head.canonical,
        language=language,
        published=published,
        modified=modified,
        date_source=source,
        types=head.jsonld.types,
        charset=charset,
    )


# --------------------------------------------------------------------------------------------
# PDF and plain text
# --------------------------------------------------------------------------------------------

# "infor-\nmation": a hyphen ending a line, after a letter, before a lower-case letter
_HYPHEN_BREAK_RE = re.compile(
    r"(?<=[^\W\d_])[-\u00ad\u2010][ \t]*\r?\n\s*(?=[^\W\d_])(?=[^A-ZÀ-ÖØ-Þ])"
)
# "COVID-\n19", "Anglo-\nSaxon": the hyphen belongs to the word; only the line break goes
_HYPHEN_KEEP_RE = re.compile(r"(?<=\w)([-\u2010])[ \t]*\r?\n\s*(?=\w)")


def dehyphenate(text: str) -> str:
    """Undo line-break hyphenation: ``"infor-\\nmation"`` → ``"information"``.

    A hyphen at a line end is dropped when a lower-case letter follows; before a digit or a
    capital ("COVID-\\n19", "Anglo-\\nSaxon") it is a real hyphen, so only the line break goes.
    """
    text = _HYPHEN_BREAK_RE.sub("", text)
    return _HYPHEN_KEEP_RE.sub(r"\1", text)


class _PdfBudget(Exception):
    """Raised from inside pypdf's text walk once the document's time is spent."""


#: Form XObjects and fonts weighed per page, at most (a page may name thousands).
_MAX_PDF_RESOURCES = 256


def _pdf_weight(page: Any, limit: int, deadline: float) -> int:
    """Decoded bytes of what extracting ``page``'s text parses: its content streams, the form
    XObjects it may draw and the character maps of their fonts (counting stops past ``limit``)."""
    from pypdf.generic import StreamObject

    contents = page.get_contents()
    total = len(contents.get_data()) if contents is not None else 0
    seen: set[int] = set()
    todo = [page.get("/Resources")]
    while todo and total <= limit and len(seen) < _MAX_PDF_RESOURCES:
        if time.monotonic() > deadline:
            raise _PdfBudget
        resources = todo.pop()
        resources = resources.get_object() if resources is not None else None
        if not isinstance(resources, dict):
            continue
        for group in ("/XObject", "/Font"):
            entries = resources.get(group)
            entries = entries.get_object() if entries is not None else None
            if not isinstance(entries, dict):
                continue
            for ref in list(entries.values())[:_MAX_PDF_RESOURCES]:
                obj = ref.get_object() if ref is not None else None
                if obj is None or id(obj) in seen:
                    continue
                seen.add(id(obj))
                if group == "/Font" and isinstance(obj, dict):
                    cmap = obj.get("/ToUnicode")
                    cmap = cmap.get_object() if cmap is not None else None
                    if isinstance(cmap, StreamObject):
                        total += len(cmap.get_data())
                elif isinstance(obj, StreamObject) and obj.get("/Subtype") == "/Form":
                    total += len(obj.get_data())
                    todo.append(obj.get("/Resources"))
    return total


def _pdf_texts(reader: Any, limits: FetchPolicy) -> list[str]:
    """The text of each page, within ``limits``: at most ``max_pdf_pages`` pages and
    ``max_pdf_chars`` characters in ``max_pdf_seconds``; a page heavier than
    ``max_pdf_page_bytes`` is skipped. Pages that share their content and resources (one stream
    drawn on hundreds of pages) are read once."""
    deadline = time.monotonic() + limits.max_pdf_seconds

    def on_time(*_: Any) -> None:  # pypdf calls it before every operator, in forms too
        if time.monotonic() > deadline:
            raise _PdfBudget

    parts: list[str] = []
    room = limits.max_pdf_chars
    known: dict[tuple[Any, Any], str] = {}
    try:
        for i, pdf_page in enumerate(reader.pages):
            if i >= limits.max_pdf_pages or room <= 0 or time.monotonic() > deadline:
                break
            contents, resources = pdf_page.raw_get("/Contents"), pdf_page.raw_get("/Resources")
            key = (_pdf_ref(contents), _pdf_ref(resources))
            text = known.get(key)
            if text is None:
                if _pdf_weight(pdf_page, limits.max_pdf_page_bytes, deadline) > (
                    limits.max_pdf_page_bytes
                ):
                    text = ""  # too heavy to read in bounded time: skipped
                else:
                    text = pdf_page.extract_text(visitor_operand_before=on_time) or ""
                known[key] = text
            parts.append(text[:room])
            room -= len(parts[-1]) + 1  # and the line break between pages
    except _PdfBudget:
        pass  # out of time: the pages read so far are the page's text
    return parts


def _pdf_ref(value: Any) -> Any:
    """A hashable identity for a page's /Contents or /Resources entry."""
    from pypdf.generic import IndirectObject

    if isinstance(value, IndirectObject):
        return (value.idnum, value.generation)
    if isinstance(value, list):
        return tuple(_pdf_ref(v) for v in value)
    return id(value)


def _extract_pdf(
    body: bytes,
    url: str,
    now: datetime,
    headers: Mapping[str, str],
    limits: FetchPolicy = _DEFAULT_LIMITS,
) -> Page:
    try:
        from pypdf import PdfReader

        reader = PdfReader(io.BytesIO(body), strict=False)
        if reader.is_encrypted:
            reader.decrypt("")
        parts = _pdf_texts(reader, limits)
        info = reader.metadata
    except Exception:  # encrypted, truncated or malformed: we cannot read it, so say so
        _LOG.debug("pdf text extraction failed for %s", url, exc_info=True)
        return Page(url=url, kind="unsupported")
    # pages are blocks; within a page a line break is only layout
    text = _clean_text(_BLOCK_MARK.join(dehyphenate(part) for part in parts))
    title = None
    published = modified = None
    if info is not None:
        title_raw = info.get("/Title")
        title = _clean_text(str(title_raw)) or None if title_raw else None
        published = _plausible(parse_pdf_date(info.get("/CreationDate")), now)
        modified = _plausible(parse_pdf_date(info.get("/ModDate")), now)
    if modified is None:
        modified = _plausible(parse_date(headers.get("last-modified")), now)
    return Page(
        url=url,
        kind="pdf",
        text=text,
        main_text=text or None,
        title=title,
        published=published,
        modified=modified,
        date_source="pdf:CreationDate" if published is not None else None,
    )


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def _mime(content_type: str | None) -> str:
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


_HTML_SNIFF_RE = re.compile(
    rb"^\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body|meta|title|div|p\b|script|!--)",
    re.I | re.S,
)


def _sniff(body: bytes) -> PageKind:
    head = body[:1024].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"%PDF-"):
        return "pdf"
    if _HTML_SNIFF_RE.match(head):
        return "html"
    if b"\x00" in body[:1024]:
        return "unsupported"
    return "text"


def extract_page(
    body: bytes | str,
    *,
    url: str,
    content_type: str | None = None,
    headers: Mapping[str, str] | None = None,
    now: datetime | None = None,
    date_fallback: bool = True,
    limits: FetchPolicy | None = None,
) -> Page:
    """Turn a response body into a :class:`Page`.

    ``content_type`` (else the ``Content-Type`` header) picks the parser: HTML, PDF (pypdf, with
    line-break hyphenation undone) or plain text; any other type gives ``kind="unsupported"`` and
    an empty body ``kind="empty"``. A missing or generic type is sniffed from the bytes. ``now``
    bounds plausible dates (default: the current UTC time). With ``date_fallback=False`` a page
    without date metadata is not handed to htmldate (a few ms per such page): use it when
    nothing downstream needs that page's publication date.

    Work is bounded by ``limits`` (default: ``FetchPolicy()``'s extraction bounds), whatever the
    body holds: HTML past its size, depth, node or attribute bounds is cut or has the excess
    tags dropped before it is parsed (a truncated page, still read); a JSON-LD block past the
    page's budget or nested too deep is ignored; a PDF is read for at most ``max_pdf_pages``
    pages, ``max_pdf_chars`` characters and ``max_pdf_seconds``, skipping pages heavier than
    ``max_pdf_page_bytes``.
    """
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    ctype = content_type if content_type is not None else lowered.get("content-type")
    mime = _mime(ctype)
    if isinstance(body, str):
        raw_bytes: bytes | None = None
        is_empty = not body.strip()
    else:
        raw_bytes = body
        is_empty = not body.strip()
    if is_empty:
        return Page(url=url, kind="empty")

    if raw_bytes is not None and raw_bytes[:1024].lstrip().startswith(b"%PDF-"):
        kind: PageKind = "pdf"  # servers label PDFs as text/html or octet-stream often enough
    elif mime in _HTML_TYPES:
        kind = "html"
    elif mime == "application/pdf" or mime == "application/x-pdf":
        kind = "pdf"
    elif mime in _TEXT_TYPES:
        kind = "text"
    elif mime in _GENERIC_TYPES:
        kind = _sniff(
            raw_bytes if raw_bytes is not None else str(body)[:1024].encode("utf-8", "replace")
        )
    else:
        return Page(url=url, kind="unsupported")

    if kind == "pdf":
        if raw_bytes is None:
            return Page(url=url, kind="unsupported")  # a PDF that was decoded to str is mangled
        return _extract_pdf(raw_bytes, url, now, lowered, limits or _DEFAULT_LIMITS)
    if kind == "unsupported":
        return Page(url=url, kind="unsupported")

    header_charset = None
    if ctype:
        m = _CT_CHARSET_RE.search(ctype)
        header_charset = m.group(1) if m else None
    if raw_bytes is None:
        text, charset = str(body), None
    else:
        text, charset = _decode(raw_bytes, header_charset, sniff_meta=kind == "html")
    if kind == "text":
        plain = text.replace("\r\n", "\n").replace("\r", "\n")
        modified = _plausible(parse_date(lowered.get("last-modified")), now)
        return Page(
            url=url,
            kind="text",
            text=plain,
            main_text=plain,
            language=_language(lowered.get("content-language")),
            modified=modified,
            charset=charset,
        )
    utf8_body = _lexbor_bytes(raw_bytes, charset)
    return _extract_html(text, url, now, charset, lowered, utf8_body, date_fallback, limits)


def fallback_published(
    body: bytes | str,
    *,
    url: str,
    content_type: str | None = None,
    headers: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> datetime | None:
    """The htmldate fallback on its own, for pages extracted with ``date_fallback=False``.

    Lets a caller keep extraction on the fast path and pay for htmldate (a few ms per page)
    only when a page's publication date is actually needed, e.g. by the freshness check.
    Returns None for non-HTML bodies and when htmldate finds nothing plausible.
    """
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    ctype = content_type if content_type is not None else lowered.get("content-type")
    if _mime(ctype) not in _HTML_TYPES | _GENERIC_TYPES:
        return None
    if isinstance(body, str):
        html = body
    else:
        m = _CT_CHARSET_RE.search(ctype or "")
        html, _ = _decode(body, m.group(1) if m else None, sniff_meta=True)
    if not html.strip():
        return None
    return _htmldate_published(html, url, now)

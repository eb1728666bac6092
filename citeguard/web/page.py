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
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser

from citeguard.dates import make_date, parse_date, parse_pdf_date
from citeguard.models import Page, PageKind

__all__ = [
    "EXTRACTION_VERSION",
    "dehyphenate",
    "extract_page",
    "extraction_version",
    "fallback_published",
    "parse_date",
]

#: Bumped whenever extraction output can change for the same input; part of snapshot keys.
extraction_version = "page-1"
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
#: PDFs longer than this many pages are cut (bounded time on huge documents).
_PDF_MAX_PAGES = 300

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
    }
)
_PAGE_TYPES = frozenset({"webpage", "itempage", "aboutpage", "collectionpage", "profilepage"})
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


class _JsonLd:
    """What the page's JSON-LD blocks say: @type values, and dates ranked by their entity.

    The article (or web page) entity is trusted above meta tags; dates of other entities (an
    embedded video's ``uploadDate``, an event) only count after every meta tag came up empty.
    """

    __slots__ = ("modified", "published", "types")

    def __init__(self) -> None:
        self.types: list[str] = []
        # (tier, rank, order, raw): tier 0 = article/page entity, 1 = any other entity
        self.published: list[tuple[int, int, int, str]] = []
        self.modified: list[tuple[int, int, int, str]] = []

    def add_script(self, raw: str) -> None:
        raw = raw.strip()
        if not raw:
            return
        try:
            data = json.loads(raw)
        except ValueError:
            # broken JSON (trailing commas, HTML entities, comments) is common: fall back to a
            # plain pattern so a date in it still counts, below well-formed article entities
            for key, value in _JSONLD_DATE_RE.findall(raw):
                self._add_date(key, value, tier=0, rank=2)
            return
        for obj in _walk_jsonld(data):
            types = _types_of(obj)
            lowered = {t.lower() for t in types}
            for t in types:
                if t not in self.types:
                    self.types.append(t)
            if lowered & _ARTICLE_TYPES:
                tier, rank = 0, 0
            elif lowered & _PAGE_TYPES:
                tier, rank = 0, 1
            else:
                tier, rank = 1, 0
            for key in ("datePublished", "dateCreated", "uploadDate", "dateModified"):
                value = obj.get(key)
                if isinstance(value, str):
                    self._add_date(key, value, tier, rank)

    def _add_date(self, key: str, value: str, tier: int, rank: int) -> None:
        order = len(self.published) + len(self.modified)
        if key == "dateModified":
            self.modified.append((tier, rank, order, value))
        else:
            # dateCreated/uploadDate are weaker than datePublished on the same entity
            self.published.append((tier, rank * 2 + (key != "datePublished"), order, value))

    def best(self, which: str, now: datetime, tier: int) -> datetime | None:
        """The most trusted plausible date of ``which`` kind among entities of ``tier``."""
        entries = sorted(self.published if which == "published" else self.modified)
        for entry_tier, _, _, raw in entries:
            if entry_tier != tier:
                continue
            dt = _plausible(parse_date(raw), now)
            if dt is not None:
                return dt
        return None


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
_BLOCK_SELECTOR = ",".join(
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
    flat = flat.replace(" " + _BLOCK_MARK, _BLOCK_MARK).replace(_BLOCK_MARK + " ", _BLOCK_MARK)
    return "\n".join(filter(None, flat.split(_BLOCK_MARK)))


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
        "time[datetime]",
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

    def __init__(self, tree: Any, url: str) -> None:
        self.title: str | None = None
        self.canonical: str | None = None
        self.language: str | None = None
        self.meta: dict[str, str] = {}
        self.jsonld = _JsonLd()
        self.itemprop_published: str | None = None
        self.itemprop_modified: str | None = None
        self.time_published: str | None = None
        self.linked_urls: list[str] = []
        self.hatom_published: str | None = None
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
        itemprops: dict[str, str] = {}
        for node in tree.css(_HEAD_SELECTOR):
            tag = node.tag
            try:
                attrs = node.attributes
            except Exception:  # lexbor can refuse odd attribute bytes; skip that element
                continue
            if tag == "meta":
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
            else:
                prop = (attrs.get("itemprop") or "").lower()
                if prop in ("datepublished", "datemodified"):
                    raw = attrs.get("datetime") or attrs.get("content") or node.text()
                    if isinstance(raw, str):
                        itemprops.setdefault(prop, raw)
                if (
                    tag == "time"
                    and self.time_published is None
                    and ("pubdate" in attrs or node.css_matches("article time"))
                ):
                    self.time_published = attrs.get("datetime")
                cls = attrs.get("class") or ""
                if self.hatom_published is None and ("published" in cls.split()):
                    self.hatom_published = attrs.get("datetime") or attrs.get("title")
                elif self.hatom_published is None and "dt-published" in cls.split():
                    self.hatom_published = attrs.get("datetime")
        self.itemprop_published = itemprops.get("datepublished")
        self.itemprop_modified = itemprops.get("datemodified")
        og_url = self.meta.get("og:url")
        self.linked_urls = [u for u in (self.canonical, og_url) if u]
        if self.title is None:
            self.title = self.meta.get("og:title") or None
        if self.language is None:
            lang = self.meta.get("content-language") or self.meta.get("og:locale")
            self.language = _language(lang)


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
    """(published, its source, modified) from metadata only.

    Precedence, most trusted first: JSON-LD article/page entity; specific meta tags
    (``article:published_time``, ``parsely-pub-date``, ``DC.date.issued``…); on-page itemprop
    ``datePublished``; ``<time pubdate>`` or a ``<time>`` in the article; generic meta names
    (``date``, ``DC.date``); JSON-LD of other entities; a date in the URL path.
    """
    meta = head.meta
    candidates: list[tuple[str, Any]] = [
        ("json-ld", lambda: head.jsonld.best("published", now, tier=0)),
        *((f"meta:{key}", (lambda k=key: parse_date(meta.get(k)))) for key in _META_PUBLISHED),
        ("itemprop:datePublished", lambda: parse_date(head.itemprop_published)),
        ("time", lambda: parse_date(head.time_published)),
        *((f"meta:{key}", (lambda k=key: parse_date(meta.get(k)))) for key in _META_PUBLISHED_WEAK),
        ("json-ld:other", lambda: head.jsonld.best("published", now, tier=1)),
        ("hatom:published", lambda: parse_date(head.hatom_published)),
        ("url", lambda: _url_date(url)),
        *(("url:canonical", (lambda u=u: _url_date(u))) for u in head.linked_urls),
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
    modified = head.jsonld.best("modified", now, tier=0)
    if modified is None:
        for key in _META_MODIFIED:
            modified = _plausible(parse_date(meta.get(key)), now)
            if modified is not None:
                break
    if modified is None:
        modified = _plausible(parse_date(head.itemprop_modified), now)
    if modified is None:
        modified = head.jsonld.best("modified", now, tier=1)
    return published, source, modified


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


def _extract_html(
    html: str,
    url: str,
    now: datetime,
    charset: str | None,
    headers: Mapping[str, str],
    utf8_body: bytes | None = None,
    date_fallback: bool = True,
) -> Page:
    # lexbor reads UTF-8 bytes natively; handing it the body saves re-encoding the str
    tree = LexborHTMLParser(utf8_body if utf8_body is not None else html)
    head = _Head(tree, url)
    tree.strip_tags(_DROP_TAGS, recursive=True)
    for node in tree.css(_HIDDEN_SELECTOR):
        if node.tag not in ("html", "body"):
            node.decompose()
    # a newline on both sides of every block element, so "<p>a</p><p>b</p>" reads "a\nb"
    for node in tree.css(_BLOCK_SELECTOR):
        node.insert_before(_BLOCK_MARK)
        node.insert_after(_BLOCK_MARK)
    root = tree.body if tree.body is not None else tree.root
    text = _clean_text(root.text(separator="")) if root is not None else ""
    main_text = _main_text(tree) if text else None

    published, source, modified = _structured_dates(head, url, now)
    if published is None:
        published = _htmldate_published(html, url, now) if date_fallback else None
        if published is not None:
            source = "htmldate"
    if modified is None:
        modified = _plausible(parse_date(headers.get("last-modified")), now)
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


def _extract_pdf(body: bytes, url: str, now: datetime, headers: Mapping[str, str]) -> Page:
    try:
        from pypdf import PdfReader

        reader = PdfReader(io.BytesIO(body), strict=False)
        if reader.is_encrypted:
            reader.decrypt("")
        parts = []
        for i, pdf_page in enumerate(reader.pages):
            if i >= _PDF_MAX_PAGES:
                break
            parts.append(pdf_page.extract_text() or "")
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
) -> Page:
    """Turn a response body into a :class:`Page`.

    ``content_type`` (else the ``Content-Type`` header) picks the parser: HTML, PDF (pypdf, with
    line-break hyphenation undone) or plain text; any other type gives ``kind="unsupported"`` and
    an empty body ``kind="empty"``. A missing or generic type is sniffed from the bytes. ``now``
    bounds plausible dates (default: the current UTC time). With ``date_fallback=False`` a page
    without date metadata is not handed to htmldate (a few ms per such page): use it when
    nothing downstream needs that page's publication date.
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
        return _extract_pdf(raw_bytes, url, now, lowered)
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
    utf8_body = None
    if raw_bytes is not None and charset == "utf-8" and not raw_bytes.startswith(codecs.BOM_UTF8):
        utf8_body = raw_bytes
    return _extract_html(text, url, now, charset, lowered, utf8_body, date_fallback)


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

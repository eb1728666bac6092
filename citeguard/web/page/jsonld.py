"""JSON-LD: the page's ``@type`` values and its dates, ranked by the entity they belong to
(bounded in size and depth)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urljoin, urlsplit

from citeguard.dates import (
    parse_date,
)
from citeguard.web.page.base import _DEFAULT_LIMITS, _plausible

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

"""The dates stage: which of a page's dates to believe (an explicit precedence), the htmldate
fallback, ``Last-Modified``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit

from citeguard.dates import (
    find_european_age,
    make_date,
    parse_date,
    parse_relative_date,
)
from citeguard.web.page.base import _HTMLDATE_MAX_CHARS, _LOG, _plausible
from citeguard.web.page.date_places import (
    _PLACE_ARTICLE,
    _PLACE_BYLINE,
    _PLACE_PAGE,
    _PLACE_PUBDATE,
    _visible_date,
)
from citeguard.web.page.head import _Head, _ParsedHtml

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
    11  ``htmldate``            when all of the above are empty, or over a weak 6 or 7 it
                                disagrees with (in the caller: ``_WEAK_SOURCES``)
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
            # an age ("vor 3 Tagen", "il y a 2 jours", "3 days ago"): the page was rendered
            # when it was fetched, ``now``; htmldate reads none of these
            age = _plausible(_age_of(text, now), now)
            if age is not None:
                return age
    return None


def _age_of(text: str | None, now: datetime) -> datetime | None:
    if not text:
        return None
    return parse_relative_date(text, now=now) or find_european_age(text, now=now)


#: A page whose only date string no dateparser locale reads. htmldate hands such a string to
#: dateparser, which then loads and compiles every locale it has: 1.3-2.5 s of one core, once
#: per process, paid by the first real page that holds one unless :func:`warm_up` paid it.
_WARM_PAGE = (
    "<html><head><title>warm</title></head><body><div>"
    "<p>Stand: 12. Brumaire 2019, 14 Uhr</p></div></body></html>"
)


def warm_up() -> None:
    """Load what htmldate's date search loads on first use (dateparser's locales, its
    month names), so that no page pays for it: an extraction child runs this before it says
    it is ready."""
    _htmldate_published(_WARM_PAGE, "http://warm.invalid/", datetime(2020, 1, 1, tzinfo=UTC))


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
    if date_fallback and not parsed.bounded and (published is None or _weak(source)):
        # htmldate walks every element in Python: not on a page that had to be bounded, and
        # only where the page's own markup gave no date or a weak one
        found = _htmldate_published(parsed.html, url, now)
        if found is not None and (published is None or _overrules(found, published, url, parsed)):
            source = "htmldate" if published is None else f"htmldate (over {source})"
            published = found
    if modified is None:
        modified = _plausible(parse_date(headers.get("last-modified")), now)
    return published, source, modified


#: date sources that only say a page was dated somewhere (generic meta names, often a render
#: or crawl date; an embedded entity's date): htmldate's reading of the whole page wins over
#: them when the two disagree. Placed on-page dates (microformats, ``<time>``) are not weak:
#: the precedence already skips the widgets and footers htmldate reads. A day in the URL is
#: not weak either: it is the publisher's own, and where htmldate disagrees with it, it has
#: usually read an update date instead
_WEAK_SOURCES = frozenset((*(f"meta:{key}" for key in _META_PUBLISHED_WEAK), "json-ld:other"))


def _weak(source: str | None) -> bool:
    return source is not None and source.removesuffix("+url") in _WEAK_SOURCES


def _overrules(found: datetime, published: datetime, url: str, parsed: _ParsedHtml) -> bool:
    """htmldate's day replaces a weak source's when it differs, unless it is only a day in
    the page's URL or canonical URL: the precedence already ranked those below the weak source."""
    if found.date() == published.date():
        return False
    in_urls = (_url_date(u) for u in (url, *parsed.head.linked_urls))
    return all(d is None or d.date() != found.date() for d in in_urls)

"""The parse stage: an HTML page bounded when it must be, parsed once (lexbor), its head read
(title, canonical URL, language, meta names, JSON-LD)."""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import urljoin

from selectolax.lexbor import LexborHTMLParser

from citeguard.dates import (
    MAX_DATE_CHARS,
)
from citeguard.policy import FetchPolicy
from citeguard.web.page.bounded import _bound_html, _small_enough
from citeguard.web.page.date_places import (
    _MAX_DATE_ELEMENTS,
    _MAX_DATE_NODES,
    _PLACE_PUBDATE,
    _date_place,
)
from citeguard.web.page.jsonld import _JsonLd
from citeguard.web.page.text import _clean_text


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

"""Where a paper's metadata comes from, each read into a :class:`~.work.Work`: a landing page's
scholarly tags (Highwire ``citation_*``, Dublin Core, JSON-LD ``ScholarlyArticle``; an arXiv
abstract page carries ``citation_*`` and ``citation_arxiv_id``), a Crossref REST answer (one work
or a search's items) and an arXiv API answer (Atom). Every reader is bounded: a capped prefix of
the body, capped lists, and JSON-LD or JSON only up to a size."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any

from selectolax.lexbor import LexborHTMLParser as HTMLParser

from citeguard.checks.scholarly.work import Person, Work, dated
from citeguard.web.urls import host_of

MAX_HEAD_BYTES = 512 * 1024
MAX_JSON_BYTES = 4 * 1024 * 1024
MAX_JSONLD_CHARS = 64 * 1024
MAX_AUTHORS = 500
MAX_ITEMS = 20
_YEAR = re.compile(r"(1[89]\d\d|20\d\d)")
_TAG = re.compile(r"<[^<>]{0,300}>")
_HEAD_END = re.compile(rb"</head\s*>", re.IGNORECASE)
_VENUE_TAGS = (
    "citation_journal_title",
    "citation_conference_title",
    "citation_inbook_title",
    "citation_book_title",
    "prism.publicationname",
    "dc.source",
    "dc.relation.ispartof",
)
_DATE_TAGS = (
    "citation_publication_date",
    "citation_date",
    "citation_cover_date",
    "citation_online_date",
    "citation_year",
    "dc.date",
    "dc.date.issued",
    "dcterms.issued",
    "prism.publicationdate",
)
_SCHOLARLY_TYPES = frozenset({"ScholarlyArticle", "MedicalScholarlyArticle", "Thesis", "Report"})


def _year(text: str | None) -> int | None:
    m = _YEAR.search(text or "")
    return int(m.group(1)) if m is not None else None


def _meta(tree: HTMLParser) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for node in tree.css("meta")[:2000]:
        attrs = node.attributes
        name = (attrs.get("name") or attrs.get("property") or "").strip().casefold()
        content = attrs.get("content")
        if not name or content is None:
            continue
        if name.startswith(("citation_", "dc.", "dcterms.", "prism.")):
            name = name.replace("dcterms.", "dc.")
            values = out.setdefault(name, [])
            if len(values) < MAX_AUTHORS:
                values.append(content.strip()[:1000])
    return out


def page_work(body: bytes, url: str) -> Work | None:
    """The scholarly metadata of a landing page (an HTML body), or None where it has none."""
    head = body[:MAX_HEAD_BYTES]
    end = _HEAD_END.search(head)
    if end is not None:
        head = head[: end.end()]
    tree = HTMLParser(head.decode("utf-8", errors="replace"))
    meta = _meta(tree)
    first = {k: v[0] for k, v in meta.items() if v}
    host = host_of(url) or url
    arxiv_id = first.get("citation_arxiv_id")
    venue = next((first[k] for k in _VENUE_TAGS if first.get(k)), None)
    preprint = arxiv_id is not None and venue is None
    if host.endswith("arxiv.org") and venue is None:
        preprint = True
    if first.get("citation_title"):
        authors = tuple(Person.of(a) for a in meta.get("citation_author", []) if a)
        return Work(
            title=first["citation_title"],
            authors=authors,
            year=next((y for k in _DATE_TAGS if (y := _year(first.get(k))) is not None), None),
            venue=venue,
            doi=first.get("citation_doi"),
            arxiv_id=arxiv_id,
            preprint=preprint,
            source=f"the citation_* tags of {host}",
        )
    if first.get("dc.title"):
        return Work(
            title=first["dc.title"],
            authors=tuple(Person.of(a) for a in meta.get("dc.creator", []) if a),
            year=next((y for k in _DATE_TAGS if (y := _year(first.get(k))) is not None), None),
            venue=venue,
            doi=_dc_doi(meta.get("dc.identifier", [])),
            preprint=preprint,
            source=f"the Dublin Core tags of {host}",
        )
    for obj in _jsonld(tree):
        return _jsonld_work(obj, host)
    return None


def _dc_doi(values: list[str]) -> str | None:
    for v in values:
        m = re.search(r"10\.\d{4,9}/\S+", v)
        if m is not None:
            return m.group()
    return None


def _jsonld(tree: HTMLParser) -> Iterator[dict[str, Any]]:
    for node in tree.css('script[type="application/ld+json"]')[:20]:
        text = node.text(deep=True)
        if len(text) > MAX_JSONLD_CHARS:
            continue
        try:
            data = json.loads(text)
        except ValueError:
            continue
        stack = [data]
        seen = 0
        while stack and seen < 200:
            item = stack.pop()
            seen += 1
            if isinstance(item, list):
                stack.extend(item[:50])
            elif isinstance(item, dict):
                kinds = item.get("@type")
                kinds = kinds if isinstance(kinds, list) else [kinds]
                if _SCHOLARLY_TYPES.intersection(k for k in kinds if isinstance(k, str)):
                    yield item
                graph = item.get("@graph")
                if isinstance(graph, list):
                    stack.extend(graph[:50])


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value:
        return _text(value[0])
    if isinstance(value, dict):
        return _text(value.get("name"))
    return None


def _jsonld_work(obj: dict[str, Any], host: str) -> Work | None:
    title = _text(obj.get("headline")) or _text(obj.get("name"))
    if not title:
        return None
    raw = obj.get("author")
    people = raw if isinstance(raw, list) else [raw] if raw is not None else []
    authors = []
    for p in people[:MAX_AUTHORS]:
        if isinstance(p, dict) and (p.get("familyName") or p.get("givenName")):
            authors.append(Person(str(p.get("givenName") or ""), str(p.get("familyName") or "")))
        elif (name := _text(p)) is not None:
            authors.append(Person.of(name))
    part = obj.get("isPartOf")
    return Work(
        title=title,
        authors=tuple(authors),
        year=_year(_text(obj.get("datePublished"))),
        venue=_text(part) if part is not None else None,
        doi=_dc_doi([str(obj.get("identifier") or ""), str(obj.get("sameAs") or "")]),
        source=f"the JSON-LD ScholarlyArticle of {host}",
    )


# ---- Crossref REST API -----------------------------------------------------------------------


def crossref_works(body: bytes) -> list[Work] | None:
    """The works of a Crossref answer: ``/works/{doi}`` (one) or ``/works?query…`` (its items);
    None when the body is not a Crossref answer."""
    if len(body) > MAX_JSON_BYTES:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("message"), dict):
        return None
    message = data["message"]
    items = message.get("items")
    raw = items[:MAX_ITEMS] if isinstance(items, list) else [message]
    return [w for item in raw if isinstance(item, dict) and (w := _crossref_work(item))]


def _crossref_work(item: dict[str, Any]) -> Work | None:
    title = _text(item.get("title"))
    if not title:
        return None
    title = html.unescape(_TAG.sub("", title))  # Crossref titles may carry <i>, <sub>, MathML
    subtitle = _text(item.get("subtitle"))
    if subtitle and ":" not in title:
        title = f"{title}: {subtitle}"
    authors = []
    raw = item.get("author")
    for a in raw[:MAX_AUTHORS] if isinstance(raw, list) else []:
        if isinstance(a, dict):
            if a.get("family") or a.get("given"):
                authors.append(Person(str(a.get("given") or ""), str(a.get("family") or "")))
            elif isinstance(a.get("name"), str):
                authors.append(Person.of(a["name"]))
    year = None
    published = None
    for key in ("issued", "published-print", "published-online", "published", "created"):
        parts = item.get(key, {}).get("date-parts") if isinstance(item.get(key), dict) else None
        if isinstance(parts, list) and parts and isinstance(parts[0], list) and parts[0]:
            ymd = [p if isinstance(p, int) else None for p in parts[0][:3]]
            if ymd[0] is not None:
                year = ymd[0]
                published = dated(*ymd)
                break
    kind = str(item.get("type") or "")
    doi = item.get("DOI") if isinstance(item.get("DOI"), str) else None
    venue = _text(item.get("container-title")) or _text(item.get("short-container-title"))
    preprint = kind == "posted-content" or str(item.get("subtype") or "") == "preprint"
    return Work(
        title=title,
        authors=tuple(authors),
        year=year,
        venue=venue,
        doi=doi,
        preprint=preprint,
        source=f"Crossref ({doi})" if doi else "Crossref",
        published=published,
    )


# ---- arXiv API (Atom) --------------------------------------------------------------------------

MAX_ATOM_ENTRY_CHARS = 200_000


def _elements(text: str, name: str, limit: int) -> Iterator[str]:
    """The contents of ``<name …>…</name>`` elements of ``text``, in order (str.find: linear)."""
    opening, closing = f"<{name}", f"</{name}>"
    i = 0
    found = 0
    while found < limit:
        i = text.find(opening, i)
        if i < 0:
            return
        gt = text.find(">", i, i + 500)
        if gt < 0 or text[i + len(opening) : i + len(opening) + 1] not in " \t\r\n>/":
            i += len(opening)
            continue
        j = text.find(closing, gt)
        if j < 0:
            return
        yield text[gt + 1 : j]
        found += 1
        i = j + len(closing)


def _field(name: str, text: str) -> str | None:
    for inner in _elements(text, name, 1):
        return html.unescape(" ".join(inner[:5000].split()))
    return None


def arxiv_works(body: bytes) -> list[Work]:
    """The entries of an arXiv API answer (Atom); an error entry (no title) is none."""
    text = body[:MAX_JSON_BYTES].decode("utf-8", errors="replace")
    out: list[Work] = []
    for entry in _elements(text, "entry", MAX_ITEMS):
        entry = entry[:MAX_ATOM_ENTRY_CHARS]
        title = _field("title", entry)
        ident = _field("id", entry) or ""
        if not title or "/abs/" not in ident:
            continue
        arxiv_id = ident.rsplit("/abs/", 1)[1]
        names = [
            html.unescape(" ".join(n[:500].split())) for n in _elements(entry, "name", MAX_AUTHORS)
        ]
        journal = _field("arxiv:journal_ref", entry)
        first = _field("published", entry) or ""
        date = re.match(r"(\d{4})-(\d{2})-(\d{2})", first)
        out.append(
            Work(
                title=title,
                authors=tuple(Person.of(n) for n in names if n),
                year=_year(_field("published", entry)),
                venue=journal or "arXiv",
                doi=_field("arxiv:doi", entry),
                arxiv_id=arxiv_id,
                preprint=journal is None,
                source=f"the arXiv API (arXiv:{arxiv_id})",
                published=dated(*(int(g) for g in date.groups())) if date else None,
            )
        )
    return out

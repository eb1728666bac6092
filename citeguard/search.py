"""Read the result shapes of the common search APIs into :class:`SearchResult` rows.

Accepted shapes (the agent gets back exactly what its tool returned; this only reads it):
a list of dicts or objects; ``{"results": [...]}`` (Tavily, Exa, SearXNG); ``{"organic": [...]}``
(Serper) and ``{"organic_results": [...]}`` (SerpAPI); ``{"web": {"results": [...]}}`` (Brave);
``{"items": [...]}`` (Google Custom Search); ``{"webPages": {"value": [...]}}`` (Bing);
LangChain ``Document`` objects (``metadata["source"]``); a JSON string of any of these.

Each row is classified once here, with the same source table the diversity axis uses
(:func:`~citeguard.checks.sources.classify_source`), so what a search returned can be read
as primary or secondary without classifying again downstream (the trace reads these fields).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from citeguard.checks.sources import SourceKind, classify_source
from citeguard.dates import parse_date, parse_human_date, parse_iso
from citeguard.models import SearchResult

_URL_KEYS = ("url", "link", "href", "source", "uri")
_TITLE_KEYS = ("title", "name")
_SNIPPET_KEYS = ("snippet", "content", "description", "body", "text", "summary", "page_content")
_DATE_KEYS = (
    "published",
    "published_date",
    "publishedDate",
    "date",
    "page_age",
    "age",
    "datePublished",
    "dateLastCrawled",
)
_LIST_PATHS: tuple[tuple[str, ...], ...] = (
    ("results",),
    ("organic",),
    ("organic_results",),
    ("web", "results"),
    ("webPages", "value"),
    ("items",),
    ("data",),
    ("news", "results"),
)


def normalize_search_results(raw: Any) -> list[SearchResult]:
    """Best-effort rows from whatever a search tool returned; never raises."""
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except (ValueError, TypeError):
            return []
    items = _items(raw)
    out: list[SearchResult] = []
    for rank, item in enumerate(items, start=1):
        fields = _fields(item)
        url = _first_str(fields, _URL_KEYS)
        if not url:
            continue
        title = _first_str(fields, _TITLE_KEYS)
        kind = _source_kind(url, title)
        out.append(
            SearchResult(
                url=url,
                title=title,
                snippet=_first_str(fields, _SNIPPET_KEYS),
                published=_parse_date(_first(fields, _DATE_KEYS)),
                rank=rank,
                primary=kind.primary if kind is not None else None,
                source_kind=kind.category if kind is not None else None,
            )
        )
    return out


def _source_kind(url: str, title: str | None) -> SourceKind | None:
    """The source table's kind of a result (None when the URL cannot be classified)."""
    try:
        return classify_source(url, title=title)
    except Exception:  # a row the table cannot read is kept, unclassified: this never raises
        return None


def _items(raw: Any) -> list[Any]:
    if isinstance(raw, list | tuple):
        return list(raw)
    if isinstance(raw, Mapping):
        for path in _LIST_PATHS:
            node: Any = raw
            for key in path:
                node = node.get(key) if isinstance(node, Mapping) else None
            if isinstance(node, list):
                return node
    return []


def _fields(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping):
        fields = dict(item)
    else:
        fields = {
            k: getattr(item, k)
            for k in (*_URL_KEYS, *_TITLE_KEYS, *_SNIPPET_KEYS, *_DATE_KEYS)
            if hasattr(item, k)
        }
        meta = getattr(item, "metadata", None)
        if isinstance(meta, Mapping):
            fields = {**meta, **fields}
    meta = fields.get("metadata")
    if isinstance(meta, Mapping):
        fields = {**meta, **fields}
    return fields


def _first(fields: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        v = fields.get(k)
        if v not in (None, ""):
            return v
    return None


def _first_str(fields: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    v = _first(fields, keys)
    return v if isinstance(v, str) else None


def _parse_date(value: Any) -> datetime | None:
    """A result's date: a datetime, ISO 8601, another machine-written date or a day in words."""
    if isinstance(value, datetime):
        return parse_date(value)
    if not isinstance(value, str):
        return None
    return parse_iso(value) or parse_date(value) or parse_human_date(value)

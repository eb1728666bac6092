"""Read the result shapes of the common search APIs into :class:`SearchResult` rows.

Accepted shapes (the agent gets back exactly what its tool returned; this only reads it):
a list of dicts or objects; ``{"results": [...]}`` (Tavily, Exa, SearXNG); ``{"organic": [...]}``
(Serper) and ``{"organic_results": [...]}`` (SerpAPI); ``{"web": {"results": [...]}}`` (Brave);
``{"items": [...]}`` (Google Custom Search); ``{"webPages": {"value": [...]}}`` (Bing);
LangChain ``Document`` objects (``metadata["source"]``); a JSON string of any of these.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

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
        out.append(
            SearchResult(
                url=url,
                title=_first_str(fields, _TITLE_KEYS),
                snippet=_first_str(fields, _SNIPPET_KEYS),
                published=_parse_date(_first(fields, _DATE_KEYS)),
                rank=rank,
            )
        )
    return out


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
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value.strip():
        return None
    s = value.strip().replace("Z", "+00:00")
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        for fmt in ("%Y-%m-%d", "%d %b %Y", "%b %d, %Y", "%B %d, %Y", "%a, %d %b %Y %H:%M:%S %z"):
            try:
                dt = datetime.strptime(value.strip(), fmt)
                break
            except ValueError:
                continue
        else:
            return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)

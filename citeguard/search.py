"""Read the result shapes of the common search APIs into :class:`SearchResult` rows.

Accepted shapes (the agent gets back exactly what its tool returned; this only reads it):
a list of dicts or objects; ``{"results": [...]}`` (Tavily, Exa, SearXNG); ``{"organic": [...]}``
(Serper) and ``{"organic_results": [...]}`` (SerpAPI); ``{"web": {"results": [...]}}`` (Brave);
``{"items": [...]}`` (Google Custom Search); ``{"webPages": {"value": [...]}}`` (Bing);
``{"search_results": [...]}`` (a Perplexity chat completion); Anthropic ``web_search_tool_result``
content blocks (alone, in a list of blocks, or in a whole ``Message``); LangChain ``Document``
objects (``metadata["source"]``); a JSON string of any of these. SDK response objects are read
like their dict form (``model_dump()``, ``to_dict()`` or dataclass fields, duck-typed: no SDK
is imported), so the Exa SDK's ``SearchResponse`` gives its ``.results`` rows.

Dates: ISO 8601, RFC 1123 (Tavily's news ``published_date``), other machine-written dates and
days in words, ages ("3 days ago", "1 week ago") against the caller's ``now``, and Google Custom
Search ``pagemap.metatags`` (``article:published_time`` and kin). Bing's ``dateLastCrawled`` is
when Bing crawled the page, not when it was published: it is not read as a date.

Each row is classified once here, with the same source table the diversity axis uses
(:func:`~citeguard.checks.sources.classify_source`), so what a search returned can be read
as primary or secondary without classifying again downstream (the trace reads these fields).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from citeguard.checks.sources import SourceKind, classify_source
from citeguard.dates import parse_date, parse_human_date, parse_iso, parse_relative_date
from citeguard.models import SearchRecord, SearchResult

__all__ = [
    "as_search_record",
    "as_search_records",
    "json_safe",
    "normalize_search_results",
    "plain",
    "query_of",
]

_URL_KEYS = ("url", "link", "href", "source", "uri")
_TITLE_KEYS = ("title", "name")
_SNIPPET_KEYS = ("snippet", "content", "description", "body", "text", "summary", "page_content")
_DATE_KEYS = (
    "published",
    "published_date",
    "publishedDate",
    "date",
    "published_at",
    "publishedAt",
    "page_age",
    "age",
    "datePublished",
)
# Google Custom Search ``pagemap.metatags`` keys naming when a page was published (lower case)
_METATAG_DATE_KEYS = (
    "article:published_time",
    "og:article:published_time",
    "og:published_time",
    "published_time",
    "datepublished",
    "article.published",
    "citation_publication_date",
    "citation_date",
    "dc.date.issued",
    "dcterms.issued",
    "dc.date",
    "dcterms.date",
    "dcterms.created",
    "pubdate",
    "publishdate",
    "publish-date",
    "parsely-pub-date",
    "sailthru.date",
    "date",
)
_PAGEMAP_ITEM_KINDS = ("newsarticle", "article", "blogposting", "report", "webpage")
_LIST_PATHS: tuple[tuple[str, ...], ...] = (
    ("results",),
    ("organic",),
    ("organic_results",),
    ("web", "results"),
    ("webPages", "value"),
    ("items",),
    ("data",),
    ("news", "results"),
    ("search_results",),
    ("value",),
)
_RESULT_BLOCK = "web_search_tool_result"


def normalize_search_results(raw: Any, *, now: datetime | None = None) -> list[SearchResult]:
    """Best-effort rows from whatever a search tool returned; never raises.

    ``now`` is the clock ages are read against ("3 days ago"); without it they give no date.
    """
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except (ValueError, TypeError):
            return []
    try:
        items = _items(raw)
    except Exception:  # an object whose dump raises: no rows rather than an exception
        return []
    out: list[SearchResult] = []
    for rank, item in enumerate(items, start=1):
        try:
            fields = _fields(item)
        except Exception:
            continue
        url = _first_str(fields, _URL_KEYS)
        if not url:
            continue
        title = _first_str(fields, _TITLE_KEYS)
        kind = _source_kind(url, title)
        published = _parse_date(_first(fields, _DATE_KEYS), now) or _pagemap_date(fields, now)
        out.append(
            SearchResult(
                url=url,
                title=title,
                snippet=_first_str(fields, _SNIPPET_KEYS) or _highlights(fields),
                published=published,
                rank=rank,
                primary=kind.primary if kind is not None else None,
                source_kind=kind.category if kind is not None else None,
            )
        )
    return out


def plain(value: Any) -> Any:
    """An SDK object's plain form, one level deep: ``model_dump()`` (pydantic: OpenAI,
    Anthropic, Google GenAI, Perplexity), ``to_dict()``, or a dataclass's fields (Exa); plain
    values, mappings and sequences as they are. Duck-typed: no SDK is imported."""
    if value is None or isinstance(
        value, str | bytes | int | float | bool | Mapping | list | tuple
    ):
        return value
    for name in ("model_dump", "to_dict"):
        dump = getattr(value, name, None)
        if callable(dump):
            try:
                return dump()
            except Exception:
                continue
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return value


def json_safe(value: Any) -> Any:
    """``value`` as JSON data (SDK objects through :func:`plain`; anything else as text)."""

    def default(obj: Any) -> Any:
        got = plain(obj)
        return str(obj) if got is obj else got

    try:
        return json.loads(json.dumps(value, default=default))
    except (TypeError, ValueError):
        return repr(value)


def query_of(raw: Any) -> str | None:
    """The literal query a search response echoes, when it does: Tavily ``query``, Brave
    ``query.original``, Serper ``searchParameters.q``, SerpAPI ``search_parameters.q``, Google
    Custom Search ``queries.request[0].searchTerms``, Bing ``queryContext.originalQuery``."""
    data = plain(raw)
    if not isinstance(data, Mapping):
        return None
    candidates: list[Any] = [data.get("query")]
    q = plain(data.get("query"))
    if isinstance(q, Mapping):
        candidates.append(q.get("original"))
    for key in ("searchParameters", "search_parameters"):
        params = plain(data.get(key))
        if isinstance(params, Mapping):
            candidates.append(params.get("q"))
    queries = plain(data.get("queries"))
    if isinstance(queries, Mapping):
        request = plain(queries.get("request"))
        if isinstance(request, list) and request and isinstance(plain(request[0]), Mapping):
            candidates.append(plain(request[0]).get("searchTerms"))
    context = plain(data.get("queryContext"))
    if isinstance(context, Mapping):
        candidates.append(context.get("originalQuery"))
    return next((c for c in candidates if isinstance(c, str) and c.strip()), None)


def as_search_record(
    item: Any, *, provider: str = "default", now: datetime | None = None
) -> SearchRecord:
    """One search as a :class:`SearchRecord`: a record as it is; a ``(query, results)`` pair;
    or a search response in any shape :func:`normalize_search_results` reads, its query taken
    from the response (:func:`query_of`) or left empty (a search whose query is unknown)."""
    if isinstance(item, SearchRecord):
        return item
    query: str | None = None
    raw = item
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        query, raw = item
    return SearchRecord(
        query=query if query is not None else (query_of(raw) or ""),
        provider=provider,
        results=normalize_search_results(raw, now=now),
        raw=json_safe(raw),
    )


def as_search_records(
    searches: Any, *, provider: str = "default", now: datetime | None = None
) -> list[SearchRecord]:
    """The searches a caller hands over (``Guard.check(searches=...)``, ``citeguard check
    --searches``), as records. Accepted: a list of searches, each read by
    :func:`as_search_record` (records, ``(query, response)`` pairs, provider responses,
    ``{"query": ..., "results": [...]}`` dicts); one search on its own (a provider response
    dict or SDK object such as a Tavily, Exa, Brave or SerpAPI response, a pair, a record); a
    list of result rows (one search whose query is unknown); a JSON array or object of any of
    these, as text. Any other string is a literal query with no results. Items that hold
    neither a query nor a result (an Anthropic text block beside the search blocks) are left
    out: they are not searches. Never raises."""
    if searches is None:
        return []
    if isinstance(searches, str | bytes):
        text = searches.decode("utf-8", "replace") if isinstance(searches, bytes) else searches
        if text.lstrip()[:1] in ("[", "{"):
            try:
                return as_search_records(json.loads(text), provider=provider, now=now)
            except (ValueError, RecursionError):
                pass
        return [SearchRecord(query=text.strip(), provider=provider)] if text.strip() else []
    if _is_one_search(searches):
        given = [searches]
    else:
        items = list(plain(searches))
        given = [items] if items and all(_is_result_row(i) for i in items) else items
    out: list[SearchRecord] = []
    for item in given:
        if isinstance(item, str | bytes):  # a query, or a search as JSON text
            out += as_search_records(item, provider=provider, now=now)
            continue
        record = as_search_record(item, provider=provider, now=now)
        # a record the caller built is kept as it is; anything else only when it holds a search
        if isinstance(item, SearchRecord) or record.query.strip() or record.results:
            out.append(record)
    return out


def _is_one_search(value: Any) -> bool:
    """One search, not a list of them: a record, a ``(query, response)`` pair, a response
    mapping, or an object that is no list (an SDK response)."""
    if isinstance(value, SearchRecord | Mapping):
        return True
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return True
    return not isinstance(plain(value), list | tuple)


def _is_result_row(item: Any) -> bool:
    """A search result row (a URL with its title and snippet), not a whole search."""
    if isinstance(item, SearchRecord | str | bytes | tuple):
        return False
    return (
        bool(normalize_search_results([item]))
        and not normalize_search_results(item)
        and query_of(item) is None
    )


def _source_kind(url: str, title: str | None) -> SourceKind | None:
    """The source table's kind of a result (None when the URL cannot be classified)."""
    try:
        return classify_source(url, title=title)
    except Exception:  # a row the table cannot read is kept, unclassified: this never raises
        return None


def _type_of(item: Any) -> Any:
    return item.get("type") if isinstance(item, Mapping) else getattr(item, "type", None)


def _block_rows(block: Any) -> list[Any]:
    """The result rows of one Anthropic ``web_search_tool_result`` block (none for an error)."""
    data = plain(block)
    content = plain(data.get("content")) if isinstance(data, Mapping) else None
    return list(content) if isinstance(content, list | tuple) else []


def _flatten(items: Sequence[Any]) -> list[Any]:
    """A list of Anthropic content blocks gives the rows of its search-result blocks."""
    if not any(_type_of(i) == _RESULT_BLOCK for i in items):
        return list(items)
    return [row for i in items if _type_of(i) == _RESULT_BLOCK for row in _block_rows(i)]


def _items(raw: Any) -> list[Any]:
    raw = plain(raw)
    if isinstance(raw, list | tuple):
        return _flatten(raw)
    if isinstance(raw, Mapping):
        if raw.get("type") == _RESULT_BLOCK:
            return _block_rows(raw)
        content = plain(raw.get("content"))
        if raw.get("type") == "message" and isinstance(content, list | tuple):
            return [r for i in content if _type_of(i) == _RESULT_BLOCK for r in _block_rows(i)]
        for path in _LIST_PATHS:
            node: Any = raw
            for key in path:
                node = plain(node)
                node = node.get(key) if isinstance(node, Mapping) else None
            node = plain(node)
            if isinstance(node, list | tuple):
                return list(node)
    return []


def _fields(item: Any) -> dict[str, Any]:
    item = plain(item)
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


def _highlights(fields: Mapping[str, Any]) -> str | None:
    """Exa's ``highlights`` (passages of the page) as a snippet."""
    got = fields.get("highlights")
    if isinstance(got, list | tuple):
        parts = [h for h in got if isinstance(h, str) and h.strip()]
        return " … ".join(parts) or None
    return None


def _pagemap_date(fields: Mapping[str, Any], now: datetime | None) -> datetime | None:
    """A Google Custom Search row's publication date from its ``pagemap``: the page's meta
    tags (``article:published_time``, ``dc.date``, ...) first, then schema.org items."""
    pagemap = plain(fields.get("pagemap"))
    if not isinstance(pagemap, Mapping):
        return None
    for tags in plain(pagemap.get("metatags")) or ():
        tags = plain(tags)
        if not isinstance(tags, Mapping):
            continue
        lowered = {str(k).lower(): v for k, v in tags.items()}
        for key in _METATAG_DATE_KEYS:
            got = _parse_date(lowered.get(key), now)
            if got is not None:
                return got
    for kind in _PAGEMAP_ITEM_KINDS:
        for obj in plain(pagemap.get(kind)) or ():
            obj = plain(obj)
            if isinstance(obj, Mapping):
                lowered = {str(k).lower(): v for k, v in obj.items()}
                got = _parse_date(lowered.get("datepublished"), now)
                if got is not None:
                    return got
    return None


def _parse_date(value: Any, now: datetime | None = None) -> datetime | None:
    """A result's date: a datetime, ISO 8601, another machine-written date, a day in words, or
    an age against ``now``."""
    if isinstance(value, datetime):
        return parse_date(value)
    if not isinstance(value, str):
        return None
    return (
        parse_iso(value)
        or parse_date(value)
        or parse_human_date(value)
        or parse_relative_date(value, now=now)
    )

"""OpenAI: the Responses API and Chat Completions with web search.

* Responses: ``output`` items of type ``message`` hold ``output_text`` parts whose
  ``annotations`` of type ``url_citation`` carry ``start_index``/``end_index`` (the marker's
  characters in that part's text, end exclusive), ``url`` and ``title``. The answer text is the
  parts joined as the SDK's ``Response.output_text`` joins them. ``web_search_call`` items whose
  ``action`` is a search give the run's searches (``query``/``queries``, and ``sources`` when the
  request included ``web_search_call.action.sources``).
* Chat Completions: ``choices[0].message.content`` with ``annotations[].url_citation``.

The indices mark the marker (typically `` ([example.com](https://…?utm_source=openai))`` after
the sentence), so each citation backs the sentence that marker closes. The ``utm_source=openai``
the provider appends is stripped for matching (:func:`~citeguard.providers.base.strip_tracking`,
applied by the parser), so it neither splits one page into two sources nor misses the search
result that returned the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from citeguard.models import SearchRecord
from citeguard.providers.base import ProviderAnswer, ProviderCitation, pick
from citeguard.search import json_safe, normalize_search_results

__all__ = ["is_chat_completion", "is_response", "read_chat_completion", "read_response"]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _url_citation(ann: Any, base: int, length: int) -> ProviderCitation | None:
    """One ``url_citation`` (its fields inline, or under ``url_citation`` as Chat Completions
    nests them), offsets moved by ``base`` and clamped to the part's ``length``."""
    if pick(ann, "type") != "url_citation":
        return None
    inner = pick(ann, "url_citation")
    data = inner if isinstance(inner, Mapping) else ann
    url = pick(data, "url")
    if not isinstance(url, str) or not url.strip():
        return None
    start, end = _int(pick(data, "start_index")), _int(pick(data, "end_index"))
    title = pick(data, "title")
    if start is None or end is None or not 0 <= start <= end:
        start = end = -1
    else:
        start, end = base + min(start, length), base + min(end, length)
    return ProviderCitation(
        url=url.strip(),
        start=start,
        end=end,
        marks="marker",
        title=title if isinstance(title, str) and title.strip() else None,
    )


def is_response(data: Any) -> bool:
    """A Responses API response (``object: "response"`` or an ``output`` list of items)."""
    if not isinstance(data, Mapping):
        return False
    output = data.get("output")
    if not isinstance(output, list):
        return False
    return data.get("object") == "response" or any(
        pick(i, "type") in ("message", "web_search_call") for i in output
    )


def is_chat_completion(data: Any) -> bool:
    """A Chat Completions response (``choices[].message``)."""
    if not isinstance(data, Mapping):
        return False
    choices = data.get("choices")
    return isinstance(choices, list) and bool(choices) and pick(choices[0], "message") is not None


def _search_records(item: Any) -> list[SearchRecord]:
    action = pick(item, "action")
    if not isinstance(action, Mapping) or pick(action, "type") not in (None, "search"):
        return []
    queries = [q for q in (pick(action, "queries") or []) if isinstance(q, str) and q.strip()]
    query = pick(action, "query")
    if isinstance(query, str) and query.strip() and query not in queries:
        queries.insert(0, query)
    sources = pick(action, "sources") or []
    results = normalize_search_results(sources)
    raw = json_safe(sources)
    # the sources are the call's, not one query's: they go with its first query
    return [
        SearchRecord(
            query=q,
            provider="openai",
            results=results if i == 0 else [],
            raw=raw if i == 0 else None,
        )
        for i, q in enumerate(queries or [""])
    ]


def read_response(data: Mapping[str, Any]) -> ProviderAnswer:
    """A Responses API response (plain data) as a :class:`ProviderAnswer`."""
    text = ""
    citations: list[ProviderCitation] = []
    searches: list[SearchRecord] = []
    for item in pick(data, "output") or []:
        kind = pick(item, "type")
        if kind == "web_search_call":
            searches.extend(_search_records(item))
            continue
        if kind != "message":
            continue
        for part in pick(item, "content") or []:
            if pick(part, "type") != "output_text":
                continue
            body = pick(part, "text")
            if not isinstance(body, str):
                continue
            base = len(text)
            text += body
            for ann in pick(part, "annotations") or []:
                cit = _url_citation(ann, base, len(body))
                if cit is not None:
                    citations.append(cit)
    usage = pick(data, "usage")
    return ProviderAnswer(
        origin="openai",
        text=text,
        citations=tuple(citations),
        searches=tuple(searches),
        input_tokens=_int(pick(usage, "input_tokens")),
        output_tokens=_int(pick(usage, "output_tokens")),
    )


def message_text(message: Any) -> str:
    """A chat message's ``content``: a string, or its text parts joined."""
    content = pick(message, "content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            t
            for t in (pick(p, "text") if not isinstance(p, str) else p for p in content)
            if isinstance(t, str)
        )
    return ""


def read_chat_completion(data: Mapping[str, Any]) -> ProviderAnswer:
    """A Chat Completions response (plain data) as a :class:`ProviderAnswer`."""
    message = pick((pick(data, "choices") or [{}])[0], "message")
    text = message_text(message)
    citations = [
        c
        for c in (_url_citation(ann, 0, len(text)) for ann in (pick(message, "annotations") or []))
        if c is not None
    ]
    usage = pick(data, "usage")
    return ProviderAnswer(
        origin="openai",
        text=text,
        citations=tuple(citations),
        input_tokens=_int(pick(usage, "prompt_tokens")),
        output_tokens=_int(pick(usage, "completion_tokens")),
    )

"""Perplexity chat completions (Sonar): ``[n]`` markers in the content, sources beside it.

``choices[0].message.content`` cites with ``[1]``, ``[2]``, ... markers; ``[n]`` is the n-th
entry of the top-level ``citations`` (URL strings) or, where a response has no ``citations``,
of ``search_results`` (``title``, ``url``, ``date``, ``last_updated``, ``snippet``). The
``search_results`` are also the run's search (its rows and their dates; the query is the one the
reasoning steps name, when they do). A reasoning model's leading ``<think>…</think>`` block is
not part of the answer. ``usage.cost.total_cost`` is the call's cost.

The Agent API (``client.responses.create``) answers in the Responses shape: ``message`` output
items hold the text (read as OpenAI's are, ``url_citation`` annotations included), and each
``search_results`` output item lists results whose ``id`` is the number an ``[n]`` marker cites;
its ``queries`` are the run's searches.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from citeguard.models import SearchRecord
from citeguard.providers.base import ProviderAnswer, ProviderCitation, pick
from citeguard.providers.openai import message_text, read_response
from citeguard.search import json_safe, normalize_search_results

__all__ = [
    "is_agent_response",
    "is_chat_completion",
    "read_agent_response",
    "read_chat_completion",
]

# the highest result id read as a reference number (a bound on what a response can make us list)
_MAX_RESULT_ID = 1000

_THINK_RE = re.compile(r"\A\s*<think>.*?</think>\s*", re.DOTALL)


def is_chat_completion(data: Any) -> bool:
    """A Perplexity chat completion: ``choices`` plus ``citations`` or ``search_results``."""
    if not isinstance(data, Mapping) or not isinstance(data.get("choices"), list):
        return False
    return isinstance(data.get("citations"), list) or isinstance(data.get("search_results"), list)


def _queries(message: Any) -> list[str]:
    out: list[str] = []
    for step in pick(message, "reasoning_steps") or []:
        for q in pick(pick(step, "web_search"), "search_keywords") or []:
            if isinstance(q, str) and q.strip() and q not in out:
                out.append(q)
    return out


def _searches(queries: list[str], results: list[Any]) -> list[SearchRecord]:
    """One record per query; the results go with the first (the response does not say which
    query found which result)."""
    rows = normalize_search_results(results)
    return [
        SearchRecord(
            query=q,
            provider="perplexity",
            results=rows if i == 0 else [],
            raw=json_safe(results) if i == 0 else None,
        )
        for i, q in enumerate(queries or [""])
    ]


def read_chat_completion(data: Mapping[str, Any]) -> ProviderAnswer:
    """A Perplexity chat completion (plain data) as a :class:`ProviderAnswer`."""
    message = pick((pick(data, "choices") or [{}])[0], "message")
    text = _THINK_RE.sub("", message_text(message), count=1)
    results = [r for r in (pick(data, "search_results") or []) if isinstance(r, Mapping)]
    titles = {r.get("url"): r.get("title") for r in results}
    urls = [u for u in (pick(data, "citations") or []) if isinstance(u, str)]
    if not urls:
        urls = [r["url"] for r in results if isinstance(r.get("url"), str)]
    references = tuple(
        ProviderCitation(
            url=u.strip(),
            title=titles.get(u) if isinstance(titles.get(u), str) else None,
        )
        for u in urls
    )
    searches = _searches(_queries(message), results) if results else []
    usage = pick(data, "usage")
    cost = pick(pick(usage, "cost"), "total_cost")
    prompt, completion = pick(usage, "prompt_tokens"), pick(usage, "completion_tokens")
    return ProviderAnswer(
        origin="perplexity",
        text=text,
        references=references,
        searches=tuple(searches),
        cost=float(cost) if isinstance(cost, int | float) else None,
        input_tokens=prompt if isinstance(prompt, int) else None,
        output_tokens=completion if isinstance(completion, int) else None,
    )


def is_agent_response(data: Any) -> bool:
    """An Agent API response: the Responses shape with ``search_results`` output items."""
    if not isinstance(data, Mapping):
        return False
    output = data.get("output")
    return isinstance(output, list) and any(pick(i, "type") == "search_results" for i in output)


def read_agent_response(data: Mapping[str, Any]) -> ProviderAnswer:
    """An Agent API response (plain data) as a :class:`ProviderAnswer`: the text and its
    annotations as OpenAI's Responses are read, ``[n]`` numbered by the results' ``id``."""
    base = read_response(data)
    by_id: dict[int, ProviderCitation] = {}
    searches: list[SearchRecord] = []
    for item in pick(data, "output") or []:
        if pick(item, "type") != "search_results":
            continue
        results = [r for r in (pick(item, "results") or []) if isinstance(r, Mapping)]
        for r in results:
            rid, url, title = r.get("id"), r.get("url"), r.get("title")
            if isinstance(rid, int) and 0 < rid <= _MAX_RESULT_ID and isinstance(url, str):
                by_id.setdefault(
                    rid,
                    ProviderCitation(
                        url=url.strip(), title=title if isinstance(title, str) else None
                    ),
                )
        queries = [q for q in (pick(item, "queries") or []) if isinstance(q, str)]
        searches.extend(_searches(queries, results))
    references = tuple(
        by_id.get(n, ProviderCitation(url=None)) for n in range(1, max(by_id, default=0) + 1)
    )
    return dataclasses.replace(
        base,
        origin="perplexity",
        references=references,
        searches=(*base.searches, *searches),
    )

"""Perplexity chat completions (Sonar): ``[n]`` markers in the content, sources beside it.

``choices[0].message.content`` cites with ``[1]``, ``[2]``, ... markers; ``[n]`` is the n-th
entry of the top-level ``citations`` (URL strings) or, where a response has no ``citations``,
of ``search_results`` (``title``, ``url``, ``date``, ``last_updated``, ``snippet``). The
``search_results`` are also the run's search (its rows and their dates; the query is the one the
reasoning steps name, when they do). A reasoning model's leading ``<think>…</think>`` block is
not part of the answer. ``usage.cost.total_cost`` is the call's cost.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from citeguard.models import SearchRecord
from citeguard.providers.base import ProviderAnswer, ProviderCitation, pick
from citeguard.providers.openai import message_text
from citeguard.search import json_safe, normalize_search_results

__all__ = ["is_chat_completion", "read_chat_completion"]

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
    searches: list[SearchRecord] = []
    if results:
        rows = normalize_search_results(results)
        queries = _queries(message) or [""]
        searches = [
            SearchRecord(
                query=q,
                provider="perplexity",
                results=rows if i == 0 else [],
                raw=json_safe(results) if i == 0 else None,
            )
            for i, q in enumerate(queries)
        ]
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

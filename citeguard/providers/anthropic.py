"""Anthropic Messages: text blocks with ``citations``.

The answer text is the ``text`` blocks joined as they come (Claude splits a sentence into blocks
where its citations start and end); text on either side of a tool call or its result is two
paragraphs. Each citation of a block backs the text of that block:

* ``web_search_result_location``: ``url``, ``title`` and ``cited_text``, the passage Claude
  took from the page, which is verified on it. Claude cuts long passages and marks the cut with
  a trailing "..."; that ellipsis is dropped and the part before it verified as it stands
  (it is a truncation, not an elision).
* ``char_location``, ``page_location``, ``content_block_location`` (a document of the request,
  by ``document_index`` and ``document_title``) and ``search_result_location`` (a
  ``search_result`` block, by its ``source`` and ``title``) carry no URL. The caller's
  ``documents`` map (``{document_index or title or source: url}``) names one; without it the
  citation is reported as not checkable (a finding, and the ``not_checkable`` status). A
  ``search_result_location`` whose ``source`` is an http(s) URL is checked at that URL.

``server_tool_use`` blocks of ``web_search`` and the ``web_search_tool_result`` blocks that
answer them are the run's searches (query and rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from citeguard.models import SearchRecord
from citeguard.providers.base import ProviderAnswer, ProviderCitation, pick, untruncate
from citeguard.search import json_safe, normalize_search_results, plain

__all__ = ["DOCUMENT_KINDS", "is_content_blocks", "is_message", "read_message"]

#: Citation types that point into a document of the request rather than at a URL.
DOCUMENT_KINDS: frozenset[str] = frozenset(
    {"char_location", "page_location", "content_block_location", "search_result_location"}
)
Documents = Mapping[int | str, str]


def is_content_blocks(data: Any) -> bool:
    """A list of content blocks (``message.content``): typed blocks, one of them text."""
    if not isinstance(data, Sequence) or isinstance(data, str | bytes) or not data:
        return False
    items = [plain(b) for b in data]
    typed = all(
        isinstance(b, Mapping) and isinstance(b.get("type"), str) and "claim" not in b
        for b in items
    )
    return typed and any(pick(b, "type") == "text" for b in items)


def is_message(data: Any) -> bool:
    """A Messages API response (``type: "message"`` or an assistant with a block list)."""
    if not isinstance(data, Mapping):
        return False
    content = data.get("content")
    if not isinstance(content, list):
        return False
    return (data.get("type") == "message" or data.get("role") == "assistant") and (
        not content or is_content_blocks(content)
    )


def _is_url(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower().startswith(("http://", "https://"))


def _document_url(cit: Any, documents: Documents | None) -> tuple[str | None, str]:
    """The URL the caller's ``documents`` map names for a document citation, and the
    document's name for messages."""
    index = pick(cit, "document_index")
    if index is None:
        index = pick(cit, "search_result_index")
    title = pick(cit, "document_title") or pick(cit, "title")
    source = pick(cit, "source")
    file_id = pick(cit, "file_id")
    keys: list[int | str] = []
    if isinstance(index, int) and pick(cit, "type") != "search_result_location":
        keys += [index, str(index)]
    keys += [k for k in (title, source, file_id) if isinstance(k, str) and k]
    name = (
        f"{title!r}"
        if isinstance(title, str) and title
        else f"{source!r}"
        if isinstance(source, str) and source
        else f"#{index}"
    )
    for key in keys:
        url = (documents or {}).get(key)
        if isinstance(url, str) and url.strip():
            return url.strip(), name
    return None, name


def _citation(cit: Any, start: int, end: int, documents: Documents | None) -> ProviderCitation:
    kind = pick(cit, "type")
    quote = untruncate(pick(cit, "cited_text"))
    title = pick(cit, "title") or pick(cit, "document_title")
    title = title if isinstance(title, str) and title.strip() else None
    url = pick(cit, "url")
    if kind == "search_result_location" and _is_url(pick(cit, "source")) and not url:
        url = pick(cit, "source")
    if isinstance(url, str) and url.strip():
        return ProviderCitation(url=url.strip(), start=start, end=end, title=title, quote=quote)
    mapped, name = _document_url(cit, documents)
    if mapped is not None:
        return ProviderCitation(url=mapped, start=start, end=end, title=title, quote=quote)
    what = "search result" if kind == "search_result_location" else "document"
    return ProviderCitation(
        url=None,
        start=start,
        end=end,
        title=title,
        quote=quote,
        document=name,
        unchecked=(
            f"cites {what} {name} ({kind}), which names no URL; pass documents={{...: url}} "
            "to check it"
        ),
    )


def _searches(blocks: Sequence[Any]) -> list[SearchRecord]:
    queries: dict[str, str] = {}
    for b in blocks:
        if pick(b, "type") == "server_tool_use" and pick(b, "name") == "web_search":
            q = pick(pick(b, "input"), "query")
            if isinstance(q, str) and isinstance(pick(b, "id"), str):
                queries[pick(b, "id")] = q
    out: list[SearchRecord] = []
    for b in blocks:
        if pick(b, "type") != "web_search_tool_result":
            continue
        tool_id = pick(b, "tool_use_id")
        out.append(
            SearchRecord(
                query=queries.get(tool_id, "") if isinstance(tool_id, str) else "",
                provider="anthropic",
                results=normalize_search_results(b),
                raw=json_safe(b),
            )
        )
    return out


def read_message(data: Any, *, documents: Documents | None = None) -> ProviderAnswer:
    """A Messages response, or its ``content`` block list (plain data), as a
    :class:`ProviderAnswer`."""
    blocks = data if isinstance(data, list) else (pick(data, "content") or [])
    blocks = [plain(b) for b in blocks]
    text = ""
    citations: list[ProviderCitation] = []
    apart = False  # a tool call or its result stands between this text and the last
    for block in blocks:
        if pick(block, "type") != "text":
            apart = apart or bool(text)
            continue
        body = pick(block, "text")
        if not isinstance(body, str):
            continue
        if apart and text and not text.endswith("\n\n"):
            text = text.rstrip(" \t") + "\n\n"  # text around a tool call: paragraphs apart
        apart = False
        start = len(text)
        text += body
        for cit in pick(block, "citations") or []:
            citations.append(_citation(cit, start, len(text), documents))
    usage = pick(data, "usage") if isinstance(data, Mapping) else None
    in_tokens, out_tokens = pick(usage, "input_tokens"), pick(usage, "output_tokens")
    return ProviderAnswer(
        origin="anthropic",
        text=text,
        citations=tuple(citations),
        searches=tuple(_searches(blocks)),
        input_tokens=in_tokens if isinstance(in_tokens, int) else None,
        output_tokens=out_tokens if isinstance(out_tokens, int) else None,
    )

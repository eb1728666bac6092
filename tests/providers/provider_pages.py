"""Pages, a Guard builder and response builders shared by the provider tests.

The pages are served by the ``farm`` (tests/conftest.py): a real aiohttp server on 127.0.0.1
answering many host names. The responses follow the providers' documented and recorded shapes
(OpenAI's web search guide, Anthropic's web search tool docs, Gemini's grounding docs,
Perplexity's chat completions), with the farm's URLs in them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from conftest import Farm

from citeguard import FetchPolicy, Guard, Policy
from citeguard.web.fetch import StaticResolver

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
QUESTION = "Who wrote the novel Middlemarch?"

ELIOT = """<html><head><title>Middlemarch</title></head><body><article>
<p>Middlemarch is a novel by the English author George Eliot, first published in eight
installments in 1871 and 1872.</p>
<p>The novel is set in the fictitious Midlands town of Middlemarch during 1829 to 1832.</p>
</article></body></html>"""

LIBRARY = """<html><head><title>George Eliot</title></head><body><main>
<p>George Eliot was the pen name of Mary Ann Evans, who wrote Middlemarch.</p>
<p>Evans was born in 1819 in Warwickshire, England.</p>
</main></body></html>"""

# the host Gemini's grounding redirects come from, served by the farm in these tests
VERTEX = "vertexaisearch.cloud.google.com"


def policy(**kw: Any) -> Policy:
    fetch = FetchPolicy(
        allow_private_addresses=True, url_timeout=3.0, answer_deadline=5.0, retries=0
    )
    return Policy(fetch=fetch, **kw)


def guard(farm: Farm, **kw: Any) -> Guard:
    """A Guard on the farm: its hosts, plus the Gemini redirect host, resolve to 127.0.0.1."""
    resolver = StaticResolver({VERTEX: "127.0.0.1"}, farm.resolver)
    return Guard(
        kw.pop("policy", None) or policy(),
        resolver=resolver,
        entailer=kw.pop("entailer", None),
        now=lambda: NOW,
        **kw,
    )


def site(farm: Farm) -> dict[str, str]:
    return {
        "book": farm.add("books.example.com", "/middlemarch", body=ELIOT),
        "library": farm.add("library.example.org", "/eliot", body=LIBRARY),
        "dead": farm.add("gone.example.net", "/middlemarch", status=404, body="nope"),
    }


# ---- OpenAI --------------------------------------------------------------------------------


def openai_marker(url: str, title: str) -> str:
    """The marker OpenAI's web search writes after a sentence."""
    host = url.split("//", 1)[1].split(":", 1)[0].split("/", 1)[0]
    return f" ([{host}]({url}?utm_source=openai))"


def openai_text(pieces: list[tuple[str, str | None, str]]) -> tuple[str, list[dict[str, Any]]]:
    """Text of ``(sentence, url or None, title)`` pieces with OpenAI markers, and the
    ``url_citation`` annotations over those markers."""
    text = ""
    annotations: list[dict[str, Any]] = []
    for sentence, url, title in pieces:
        text += ("\n\n" if text else "") + sentence
        if url is not None:
            marker = openai_marker(url, title)
            start = len(text) + 1  # the space before "(" is not part of the marker
            text += marker
            annotations.append(
                {
                    "type": "url_citation",
                    "start_index": start,
                    "end_index": len(text),
                    "url": f"{url}?utm_source=openai",
                    "title": title,
                }
            )
    return text, annotations


def openai_response(
    text: str, annotations: list[dict[str, Any]], *, query: str, sources: list[str]
) -> dict[str, Any]:
    """A Responses API response with a web search call and one message (the recorded shape)."""
    return {
        "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
        "object": "response",
        "created_at": 1741476542,
        "status": "completed",
        "model": "gpt-4.1-2025-04-14",
        "output": [
            {
                "type": "web_search_call",
                "id": "ws_67c9fa0502748190b7dd390736892e100be649c1a5ff9609",
                "status": "completed",
                "action": {
                    "type": "search",
                    "query": query,
                    "sources": [{"type": "url", "url": u} for u in sources],
                },
            },
            {
                "type": "message",
                "id": "msg_67c9fa077e288190af08fdffda2e34f20be649c1a5ff9609",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": annotations}],
            },
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [{"type": "web_search"}],
        "usage": {
            "input_tokens": 328,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": 356,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 684,
        },
    }


def chat_completion(text: str, annotations: list[dict[str, Any]]) -> dict[str, Any]:
    """A Chat Completions response of a search model (``message.annotations``)."""
    return {
        "id": "chatcmpl-BIn4aCuxfWpB7TCsDRc0tvSexDcUi",
        "object": "chat.completion",
        "created": 1743767052,
        "model": "gpt-4o-search-preview-2025-03-11",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": text,
                    "annotations": [
                        {
                            "type": "url_citation",
                            "url_citation": {k: v for k, v in a.items() if k != "type"},
                        }
                        for a in annotations
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 250, "total_tokens": 259},
    }


# ---- Anthropic -----------------------------------------------------------------------------


def anthropic_message(urls: dict[str, str], *, extra: list[dict[str, Any]] | None = None) -> dict:
    """A Messages response with web search (the shape of Anthropic's web search docs)."""
    book, library = urls["book"], urls["library"]
    return {
        "id": "msg_a930390d3a",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-1-20250805",
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "content": [
            {"type": "text", "text": "I'll search for who wrote Middlemarch."},
            {
                "type": "server_tool_use",
                "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
                "name": "web_search",
                "input": {"query": "Middlemarch novel author"},
            },
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
                "content": [
                    {
                        "type": "web_search_result",
                        "url": book,
                        "title": "Middlemarch",
                        "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1k",
                        "page_age": "April 30, 2025",
                    },
                    {
                        "type": "web_search_result",
                        "url": library,
                        "title": "George Eliot",
                        "encrypted_content": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm",
                        "page_age": "3 days ago",
                    },
                ],
            },
            {"type": "text", "text": "Based on the search results, "},
            {
                "type": "text",
                "text": "Middlemarch is a novel by George Eliot",
                "citations": [
                    {
                        "type": "web_search_result_location",
                        "url": book,
                        "title": "Middlemarch",
                        "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm..",
                        # truncated by the API: the part before "..." is on the page
                        "cited_text": "Middlemarch is a novel by the English author George "
                        "Eliot, first published in eight...",
                    }
                ],
            },
            {"type": "text", "text": ". "},
            {
                "type": "text",
                "text": "George Eliot was the pen name of Mary Ann Evans",
                "citations": [
                    {
                        "type": "web_search_result_location",
                        "url": library,
                        "title": "George Eliot",
                        "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNn..",
                        "cited_text": "George Eliot was the pen name of Mary Ann Evans, who "
                        "wrote Middlemarch.",
                    }
                ],
            },
            {"type": "text", "text": "."},
            *(extra or []),
        ],
        "usage": {
            "input_tokens": 6039,
            "output_tokens": 931,
            "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0},
        },
    }


def document_blocks() -> list[dict[str, Any]]:
    """Text that cites a document of the request (``char_location``: no URL)."""
    return [
        {"type": "text", "text": " "},
        {
            "type": "text",
            "text": "Evans was born in 1819 in Warwickshire",
            "citations": [
                {
                    "type": "char_location",
                    "cited_text": "Evans was born in 1819 in Warwickshire, England.",
                    "document_index": 0,
                    "document_title": "Eliot biography",
                    "start_char_index": 0,
                    "end_char_index": 47,
                }
            ],
        },
        {"type": "text", "text": "."},
    ]


# ---- Gemini --------------------------------------------------------------------------------


def gemini_response(
    text: str,
    supports: list[tuple[str, list[int], list[float]]],
    chunks: list[tuple[str, str]],
    *,
    queries: list[str],
    with_text: bool = True,
    shift: int = 0,
) -> dict[str, Any]:
    """A ``generateContent`` REST response (camelCase) grounded with Google Search. Each support
    is (segment text, chunk indices, confidences); its offsets are UTF-8 byte offsets, moved by
    ``shift`` bytes (wrong offsets, as a check that the segment's text wins)."""
    raw = text.encode("utf-8")
    grounding_supports = []
    for segment, indices, scores in supports:
        start = raw.index(segment.encode("utf-8"))
        seg: dict[str, Any] = {
            "startIndex": start + shift,
            "endIndex": start + len(segment.encode("utf-8")) + shift,
        }
        if with_text:
            seg["text"] = segment
        grounding_supports.append(
            {"segment": seg, "groundingChunkIndices": indices, "confidenceScores": scores}
        )
    return {
        "candidates": [
            {
                "content": {"parts": [{"text": text}], "role": "model"},
                "finishReason": "STOP",
                "groundingMetadata": {
                    "webSearchQueries": queries,
                    "searchEntryPoint": {"renderedContent": "<style>.container{}</style>"},
                    "groundingChunks": [{"web": {"uri": u, "title": t}} for u, t in chunks],
                    "groundingSupports": grounding_supports,
                },
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 12,
            "candidatesTokenCount": 64,
            "totalTokenCount": 76,
        },
        "modelVersion": "gemini-2.5-flash",
    }


def redirect(farm: Farm, name: str, target: str, *, status: int = 302) -> str:
    """A Gemini grounding redirect on the farm's stand-in for vertexaisearch."""
    return farm.add(
        VERTEX,
        f"/grounding-api-redirect/{name}",
        status=status,
        headers={"Location": target},
        body="",
    )


# ---- Perplexity ----------------------------------------------------------------------------


def perplexity_completion(text: str, urls: list[str], *, dates: list[str]) -> dict[str, Any]:
    """A Sonar chat completion: ``[n]`` markers, ``citations`` and ``search_results``."""
    return {
        "id": "3c90c3cc-0d44-4b50-8888-8dd25736052a",
        "model": "sonar-pro",
        "created": 1724369245,
        "object": "chat.completion",
        "citations": urls,
        "search_results": [
            {
                "title": f"Result {n}",
                "url": u,
                "date": d,
                "last_updated": "2026-11-30",
                "snippet": "Middlemarch is a novel by George Eliot.",
                "source": "web",
            }
            for n, (u, d) in enumerate(zip(urls, dates, strict=True), start=1)
        ],
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": text},
                "delta": {"role": "assistant", "content": ""},
            }
        ],
        "usage": {
            "prompt_tokens": 14,
            "completion_tokens": 70,
            "total_tokens": 84,
            "search_context_size": "low",
            "cost": {
                "input_tokens_cost": 0.00004,
                "output_tokens_cost": 0.00105,
                "request_cost": 0.006,
                "total_cost": 0.00709,
            },
        },
    }

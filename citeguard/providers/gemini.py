"""Google Gemini (``google-genai`` ``GenerateContentResponse``, or its REST JSON) with Google
Search grounding.

The answer is the first candidate's text parts joined (thought parts left out). Its
``grounding_metadata`` holds ``grounding_chunks`` (``web.uri``, ``web.title``) and
``grounding_supports``: a ``segment`` of the text (``part_index``, ``start_index`` and
``end_index`` **in UTF-8 bytes** of that part, and the segment's ``text``), the
``grounding_chunk_indices`` that back it and their ``confidence_scores``. Byte offsets are turned
into character offsets (and checked against the segment's text, which wins when they disagree).

Chunk URIs are usually ``https://vertexaisearch.cloud.google.com/grounding-api-redirect/...``
links, not the page: such a citation is marked ``provider_redirect`` and the Guard resolves it
(one request that reads ``Location`` without following it, under the guard's fetch policy and
resolver: :mod:`citeguard.providers.resolve`), then checks the target, whose domain is the one
that counts for diversity. ``web_search_queries`` are the run's searches; the chunks are their
rows (on the first query: the response does not say which query found which chunk).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from citeguard.models import SearchRecord
from citeguard.providers.base import ProviderAnswer, ProviderCitation, pick
from citeguard.search import json_safe, normalize_search_results

__all__ = ["REDIRECT_HOSTS", "is_generate_content_response", "is_redirect", "read_response"]

#: Hosts whose ``/grounding-api-redirect/`` links stand for the page a chunk came from.
REDIRECT_HOSTS: frozenset[str] = frozenset({"vertexaisearch.cloud.google.com"})


def is_redirect(url: str) -> bool:
    """Whether ``url`` is a Gemini grounding redirect (resolved before it is checked)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return False
    host = (parts.hostname or "").lower()
    return host in REDIRECT_HOSTS and parts.path.startswith("/grounding-api-redirect/")


def is_generate_content_response(data: Any) -> bool:
    """A ``generateContent`` response: a ``candidates`` list of candidates with content."""
    if not isinstance(data, Mapping):
        return False
    candidates = data.get("candidates")
    return (
        isinstance(candidates, list)
        and bool(candidates)
        and isinstance(
            pick(candidates[0], "content") or pick(candidates[0], "grounding_metadata"), Mapping
        )
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _chunk(chunk: Any) -> tuple[str | None, str | None]:
    """A grounding chunk's URI and title (web results, retrieved contexts, maps places)."""
    for kind in ("web", "retrieved_context", "maps"):
        source = pick(chunk, kind)
        if isinstance(source, Mapping):
            uri, title = pick(source, "uri"), pick(source, "title")
            return (
                uri.strip() if isinstance(uri, str) and uri.strip() else None,
                title if isinstance(title, str) and title.strip() else None,
            )
    return None, None


class _Parts:
    """The candidate's text parts and where each starts in the joined text."""

    def __init__(self, parts: list[Any]) -> None:
        self.texts: list[str | None] = []
        self.bases: list[int] = []
        pos = 0
        for part in parts:
            body = pick(part, "text")
            usable = isinstance(body, str) and not pick(part, "thought")
            self.texts.append(body if usable else None)
            self.bases.append(pos)
            if usable:
                pos += len(body)
        self.text = "".join(t for t in self.texts if t)

    def span(self, segment: Any) -> tuple[int, int] | None:
        """A segment's character offsets in the joined text (None when it names no text)."""
        index = _int(pick(segment, "part_index")) or 0
        seg_text = pick(segment, "text")
        found: tuple[int, int] | None = None
        if 0 <= index < len(self.texts) and self.texts[index] is not None:
            body = self.texts[index] or ""
            raw = body.encode("utf-8")
            start_b = _int(pick(segment, "start_index")) or 0
            end_b = _int(pick(segment, "end_index"))
            end_b = len(raw) if end_b is None else end_b
            if 0 <= start_b <= end_b <= len(raw):
                cs = len(raw[:start_b].decode("utf-8", "ignore"))
                ce = len(raw[:end_b].decode("utf-8", "ignore"))
                found = (self.bases[index] + cs, self.bases[index] + ce)
        if isinstance(seg_text, str) and seg_text.strip():
            if found is not None and self.text[found[0] : found[1]].strip() == seg_text.strip():
                return found
            # the offsets disagree with the segment's own text: find the text, nearest first
            near = found[0] if found is not None else 0
            hits: list[int] = []
            at = self.text.find(seg_text)
            while at >= 0 and len(hits) < 64:
                hits.append(at)
                at = self.text.find(seg_text, at + 1)
            if hits:
                best = min(hits, key=lambda h: abs(h - near))
                return best, best + len(seg_text)
        return found


def read_response(data: Mapping[str, Any]) -> ProviderAnswer:
    """A ``generateContent`` response (plain data) as a :class:`ProviderAnswer`."""
    candidate = (pick(data, "candidates") or [{}])[0]
    parts = _Parts(list(pick(pick(candidate, "content"), "parts") or []))
    meta = pick(candidate, "grounding_metadata")
    chunks = [_chunk(c) for c in (pick(meta, "grounding_chunks") or [])]
    citations: list[ProviderCitation] = []
    for support in pick(meta, "grounding_supports") or []:
        span = parts.span(pick(support, "segment"))
        if span is None:
            continue
        scores = pick(support, "confidence_scores") or []
        for k, ci in enumerate(pick(support, "grounding_chunk_indices") or []):
            if not isinstance(ci, int) or not 0 <= ci < len(chunks):
                continue
            uri, title = chunks[ci]
            score = scores[k] if k < len(scores) and isinstance(scores[k], int | float) else None
            if uri is None:
                citations.append(
                    ProviderCitation(
                        url=None,
                        start=span[0],
                        end=span[1],
                        title=title,
                        confidence=score,
                        document=title or f"#{ci}",
                        unchecked=f"cites grounding chunk {ci}, which names no URI",
                    )
                )
                continue
            citations.append(
                ProviderCitation(
                    url=uri,
                    start=span[0],
                    end=span[1],
                    title=title,
                    confidence=float(score) if score is not None else None,
                    redirect=is_redirect(uri),
                )
            )
    rows = [{"url": u, "title": t} for u, t in chunks if u is not None]
    queries = [q for q in (pick(meta, "web_search_queries") or []) if isinstance(q, str)]
    searches = [
        SearchRecord(
            query=q,
            provider="gemini",
            results=normalize_search_results(rows) if i == 0 else [],
            raw=json_safe(rows) if i == 0 else None,
        )
        for i, q in enumerate(queries)
    ]
    usage = pick(data, "usage_metadata")
    return ProviderAnswer(
        origin="gemini",
        text=parts.text,
        citations=tuple(citations),
        searches=tuple(searches),
        input_tokens=_int(pick(usage, "prompt_token_count")),
        output_tokens=_int(pick(usage, "candidates_token_count")),
    )

"""LlamaIndex integration: guard a query engine's cited answer.

Install with ``pip install 'citeguard-agent[llamaindex]'``; importing this module without
``llama-index-core`` raises :class:`~citeguard.errors.MissingExtraError` with that hint.

:func:`guard_query_engine` returns a :class:`GuardedQueryEngine` whose ``aquery(question)`` runs
:meth:`Guard.run` around the engine and returns a :class:`~citeguard.GuardResult`.

How an attempt's answer is made
    The response text is what the guard checks. When it carries ``[n]`` markers but no reference
    list (as ``CitationQueryEngine`` answers do), the list is written from the response's
    ``source_nodes``: marker ``[n]`` is ``source_nodes[n - 1]``, and its URL is the node's
    metadata ``url``, ``source`` or ``link`` (the first present).

How a regeneration avoids the rejected URLs
    Through a node postprocessor, :class:`ExcludeUrlsPostprocessor`, that drops every node whose
    URL the guard excluded, so the synthesizer never sees those sources again:

    * given a query engine that retrieves and synthesizes in two steps (``RetrieverQueryEngine``,
      what ``index.as_query_engine()`` builds, and ``CitationQueryEngine``), each attempt calls
      ``aretrieve`` (``retrieve`` in a worker thread when there is no async one), filters the
      nodes, then ``asynthesize`` on what is left. The engine itself is not modified, so
      concurrent queries do not interfere.
    * given a factory ``(node_postprocessors) -> query engine`` instead, e.g.
      ``lambda pp: index.as_query_engine(node_postprocessors=pp)``, each attempt builds an engine
      with the postprocessor and calls its ``aquery``. Use this for engines that only answer
      whole queries (custom, router or sub-question engines).

The guard's feedback text is not passed on: a query engine has no slot for it, and dropping the
rejected sources is what changes the next answer. Searches are not recorded either (retrieval
uses the user's question verbatim, so the query axis has nothing to judge).

Only citeguard's public API is used here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from citeguard import Guard, GuardResult, MissingExtraError, parse_answer
from citeguard.errors import UsageError

try:
    from llama_index.core.base.base_query_engine import BaseQueryEngine
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import NodeWithScore, QueryBundle
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise MissingExtraError("llama-index-core", "llamaindex") from exc

__all__ = [
    "URL_METADATA_KEYS",
    "EngineFactory",
    "ExcludeUrlsPostprocessor",
    "GuardedQueryEngine",
    "guard_query_engine",
    "node_url",
    "render_response",
]

#: Node metadata keys read, in order, for a node's URL.
URL_METADATA_KEYS: tuple[str, ...] = ("url", "source", "link")

EngineFactory = Callable[[list[BaseNodePostprocessor]], BaseQueryEngine]
"""Builds a query engine that applies the given node postprocessors."""


def node_url(node: NodeWithScore) -> str | None:
    """The URL a node came from: its metadata ``url``, ``source`` or ``link``, else ``None``."""
    meta = node.node.metadata
    for key in URL_METADATA_KEYS:
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


# Without the extra installed (as in the test install), mypy sees the base class as Any.
class ExcludeUrlsPostprocessor(BaseNodePostprocessor):  # type: ignore[misc, unused-ignore]
    """Drops nodes whose URL (see :func:`node_url`) is in ``exclude_urls``.

    URLs are compared as written and in citeguard's normalised form, so ``HTTP://Host:80/a#x``
    matches ``http://host/a``. Nodes without a URL are kept.
    """

    exclude_urls: frozenset[str] = frozenset()

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this component under."""
        return "CiteguardExcludeUrlsPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not self.exclude_urls:
            return nodes
        excluded = _with_normalised(self.exclude_urls)
        return [n for n in nodes if not _with_normalised(_maybe(node_url(n))) & excluded]


class GuardedQueryEngine:
    """A query engine (or engine factory) behind the guard; see the module docstring."""

    def __init__(self, engine: BaseQueryEngine | EngineFactory, guard: Guard) -> None:
        if isinstance(engine, BaseQueryEngine):
            cls = type(engine)
            if cls.asynthesize is BaseQueryEngine.asynthesize or (
                cls.retrieve is BaseQueryEngine.retrieve and not hasattr(engine, "aretrieve")
            ):
                raise UsageError(
                    f"{cls.__name__} does not retrieve and synthesize separately, so citeguard "
                    "cannot drop rejected sources between attempts; pass a factory instead, "
                    "e.g. guard_query_engine(lambda pp: index.as_query_engine("
                    "node_postprocessors=pp), guard)"
                )
        elif not callable(engine):
            raise UsageError(
                "guard_query_engine needs a LlamaIndex query engine or a factory "
                f"(node_postprocessors) -> query engine, not {type(engine).__name__}"
            )
        self.engine = engine
        self.guard = guard

    async def aquery(self, question: str) -> GuardResult:
        """Answer ``question`` under the guard: regenerate without rejected sources."""
        return await self.guard.run(self._answer, question)

    async def _answer(self, question: str, *, exclude_urls: frozenset[str]) -> str:
        postprocessor = ExcludeUrlsPostprocessor(exclude_urls=frozenset(exclude_urls))
        engine = self.engine
        if isinstance(engine, BaseQueryEngine):
            bundle = QueryBundle(question)
            aretrieve = getattr(engine, "aretrieve", None)
            if aretrieve is not None:
                nodes: list[NodeWithScore] = await aretrieve(bundle)
            else:
                nodes = await asyncio.to_thread(engine.retrieve, bundle)
            kept = postprocessor.postprocess_nodes(nodes, query_bundle=bundle)
            response = await engine.asynthesize(bundle, kept)
        else:
            response = await engine([postprocessor]).aquery(question)
        return render_response(response)


def guard_query_engine(engine: BaseQueryEngine | EngineFactory, guard: Guard) -> GuardedQueryEngine:
    """Put ``engine`` (or an engine factory) behind ``guard``.

    ``await guard_query_engine(index.as_query_engine(), guard).aquery(question)`` returns a
    :class:`~citeguard.GuardResult`. Raises ``TypeError`` at once for an engine that cannot take
    a node filter between retrieval and synthesis (pass a factory for those).
    """
    return GuardedQueryEngine(engine, guard)


def render_response(response: Any) -> str:
    """A response's text, with a numbered reference list built from its ``source_nodes`` when the
    text has ``[n]`` markers but defines no references. Only cited numbers are listed."""
    raw = getattr(response, "response", None)
    text = raw if isinstance(raw, str) else ("" if raw is None else str(response))
    parsed = parse_answer(text)
    if parsed.references:
        return text
    cited = sorted(
        {
            int(label)
            for f in parsed.findings
            if f.code == "unresolved_marker"
            and isinstance(label := f.details.get("label"), str)
            and label.isdigit()
        }
    )
    sources: Sequence[NodeWithScore] = getattr(response, "source_nodes", None) or ()
    lines = []
    for n in cited:
        if 1 <= n <= len(sources) and (url := node_url(sources[n - 1])) is not None:
            lines.append(f"[{n}] {url}")
    if not lines:
        return text
    return text.rstrip() + "\n\n" + "\n".join(lines) + "\n"


def _maybe(url: str | None) -> Iterable[str]:
    return () if url is None else (url,)


def _with_normalised(urls: Iterable[str]) -> set[str]:
    """Each URL as written and, when it parses, in citeguard's normalised form."""
    out: set[str] = set()
    for url in urls:
        out.add(url)
        for c in parse_answer(url).citations:
            if c.normalized_url is not None:
                out.add(c.normalized_url)
    return out

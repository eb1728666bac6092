"""The LlamaIndex handlers with real LlamaIndex objects against the farm.

Real parts: a ``VectorStoreIndex`` (in memory, ``MockEmbedding``) and its real retriever, the
real ``CitationQueryEngine``, the instrumentation dispatcher and the legacy ``CallbackManager``;
the LLM is a ``CustomLLM`` that cites its first source (``test_integrations.ScriptedLLM``). Every
cited page is fetched from the aiohttp farm on 127.0.0.1. Runs when the optional
``llama-index-core`` is installed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Farm
from test_integrations import ELIOT, HAVE_LLAMA_INDEX, QUESTION, SENTENCE, _cite, _guard, _site

from citeguard import CitationRejected, CitationStatus, Guard, Policy
from citeguard.integrations.runs import RunVerdict
from citeguard.verdict import without_timings

pytestmark = pytest.mark.skipif(
    not HAVE_LLAMA_INDEX, reason="the optional llamaindex extra is not installed"
)

if HAVE_LLAMA_INDEX:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.query_engine import CitationQueryEngine
    from llama_index.core.retrievers import VectorIndexRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from test_integrations import ScriptedLLM

    from citeguard.integrations.llamaindex_handler import (
        RUN_ID_KEY,
        VERDICT_KEY,
        CiteguardCallbackHandler,
        CiteguardInstrumentation,
    )

    class WaitingRetriever(VectorIndexRetriever):  # type: ignore[misc, unused-ignore]
        """The index's own retriever, holding its results until every run has retrieved."""

        def __init__(self, barrier: asyncio.Barrier, **kw: Any) -> None:
            super().__init__(**kw)
            self._barrier = barrier

        async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            await self._barrier.wait()
            got: list[NodeWithScore] = await super()._aretrieve(query_bundle)
            return got


def _index(*urls: str, **kw: Any) -> Any:
    nodes = [TextNode(text=SENTENCE, metadata={"url": u}) for u in urls]
    return VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8), **kw)


def _engine(index: Any, **kw: Any) -> Any:
    retriever = index.as_retriever(similarity_top_k=1)
    return CitationQueryEngine(retriever=retriever, llm=ScriptedLLM(), **kw)


@pytest.fixture
def attached() -> Iterator[list[CiteguardInstrumentation]]:
    """Handlers attached to LlamaIndex's root dispatcher in a test, detached after it."""
    handlers: list[CiteguardInstrumentation] = []
    yield handlers
    for h in handlers:
        h.detach()


def _attach(
    attached: list[CiteguardInstrumentation], guard: Guard, **kw: Any
) -> CiteguardInstrumentation:
    handler = CiteguardInstrumentation(guard, **kw).attach()
    attached.append(handler)
    return handler


async def _same_as_check(guard: Guard, got: RunVerdict) -> None:
    """The handler's verdict is Guard.check's on the same answer and searches."""
    direct = await guard.check(got.answer, question=got.question, searches=got.searches)
    assert without_timings(got.verdict) == without_timings(direct)


# ---------------------------------------------------------------------- instrumentation


async def test_query_engine_is_checked_with_its_retrieval(
    farm: Farm, attached: list[CiteguardInstrumentation]
) -> None:
    urls = _site(farm)
    seen: list[RunVerdict] = []
    async with _guard(farm) as guard:
        handler = _attach(attached, guard, on_verdict=seen.append)
        response = await _engine(_index(urls["good"])).aquery(QUESTION)
        got = await handler.averdict(response)
        await _same_as_check(guard, got)
    assert response.response == SENTENCE[:-1] + " [1]."  # the engine's answer, untouched
    assert response.metadata[RUN_ID_KEY] == got.run_id
    assert response.metadata[VERDICT_KEY] == got and seen == [got]
    assert handler.verdicts[got.run_id] == got
    # the retrieval was recorded: the literal query and the retrieved node's URL
    [search] = got.searches
    assert (search.query, search.provider) == (QUESTION, "VectorIndexRetriever")
    assert [(r.url, r.snippet) for r in search.results] == [(urls["good"], SENTENCE)]
    # the answer's [1] marker was bound to the source node's URL
    assert got.question == QUESTION and got.answer == _cite(urls["good"])
    assert got.passed and got.verdict.citations[0].status is CitationStatus.OK
    assert handler.runs_in_flight == 0  # nothing is followed once the query ended


async def test_raise_mode_raises_from_averdict_and_report_mode_returns(
    farm: Farm, attached: list[CiteguardInstrumentation]
) -> None:
    urls = _site(farm)
    engine = _engine(_index(urls["dead"]))
    async with _guard(farm) as guard:
        raising = _attach(attached, guard, mode="raise")
        response = await engine.aquery(QUESTION)
        with pytest.raises(CitationRejected) as caught:
            await raising.averdict(response)
        with pytest.raises(CitationRejected):  # the kept verdict raises again
            await raising.averdict(response.metadata[RUN_ID_KEY])
        raising.detach()
        reporting = _attach(attached, guard)
        again = await reporting.averdict(await engine.aquery(QUESTION))
    result = caught.value.result
    assert not result.passed and result.verdict.offending_urls == {urls["dead"]}
    assert result.verdict.citations[0].status is CitationStatus.NOT_FOUND
    assert urls["dead"] in str(caught.value)
    assert not again.passed and again.verdict.offending_urls == {urls["dead"]}
    with pytest.raises(ValueError, match="no query with run id"):
        await reporting.averdict("not-a-run")


async def test_concurrent_queries_never_mix_their_retrievals(
    farm: Farm, attached: list[CiteguardInstrumentation]
) -> None:
    n = 4
    pages = [farm.add("gone.example.net", "/middlemarch", status=404, body="nope")]
    pages += [farm.add(f"run{i}.example.com", "/middlemarch", body=ELIOT) for i in range(1, n)]
    barrier = asyncio.Barrier(n)  # every query has started retrieving before any goes on
    engines = [
        CitationQueryEngine(
            retriever=WaitingRetriever(barrier, index=_index(p), similarity_top_k=1),
            llm=ScriptedLLM(),
        )
        for p in pages
    ]
    questions = [f"Who wrote Middlemarch? (reader {i})" for i in range(n)]
    async with _guard(farm) as guard:
        handler = _attach(attached, guard)
        responses = await asyncio.gather(
            *(e.aquery(q) for e, q in zip(engines, questions, strict=True))
        )
        got = [await handler.averdict(r) for r in responses]
        for v in got:
            await _same_as_check(guard, v)
    for v, q, page in zip(got, questions, pages, strict=True):
        assert v.question == q and v.answer == _cite(page)
        assert [(s.query, [r.url for r in s.results]) for s in v.searches] == [(q, [page])]
    assert [v.passed for v in got] == [False, True, True, True]
    assert len({v.run_id for v in got}) == n and handler.runs_in_flight == 0


async def test_sync_query_without_a_loop_is_checked_by_verdict(
    farm: Farm, attached: list[CiteguardInstrumentation]
) -> None:
    urls = _site(farm)
    guard = _guard(farm)
    handler = _attach(attached, guard)
    engine = _engine(_index(urls["good"]))

    def sync_code() -> RunVerdict:  # a worker thread has no running loop
        response = engine.query(QUESTION)
        assert VERDICT_KEY not in response.metadata  # nothing ran yet: no loop to run on
        return handler.verdict(response)

    got = await asyncio.to_thread(sync_code)
    assert got.passed and [s.query for s in got.searches] == [QUESTION]
    with pytest.raises(RuntimeError, match="averdict"):
        handler.verdict(got.run_id)  # inside this running loop it cannot block
    await guard.aclose()


async def test_a_failed_query_is_forgotten(
    farm: Farm, attached: list[CiteguardInstrumentation]
) -> None:
    class Broken(VectorIndexRetriever):  # type: ignore[misc, unused-ignore]
        async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            raise RuntimeError("the index is down")

    urls = _site(farm)
    engine = CitationQueryEngine(
        retriever=Broken(index=_index(urls["good"]), similarity_top_k=1), llm=ScriptedLLM()
    )
    async with _guard(farm) as guard:
        handler = _attach(attached, guard)
        with pytest.raises(RuntimeError, match="the index is down"):
            await engine.aquery(QUESTION)
    assert handler.runs_in_flight == 0 and not handler.verdicts


# ---------------------------------------------------------------------- legacy callback manager


async def test_legacy_callback_handler_checks_each_query_trace(farm: Farm) -> None:
    urls = _site(farm)
    good = farm.add("other.example.org", "/middlemarch", body=ELIOT)
    async with _guard(farm) as guard:
        handler = CiteguardCallbackHandler(guard, mode="raise")
        manager = CallbackManager([handler])  # the engines' and their retrievers' manager
        one, two, bad = (
            _engine(_index(url, callback_manager=manager), callback_manager=manager)
            for url in (urls["good"], good, urls["dead"])
        )
        responses = await asyncio.gather(
            one.aquery(QUESTION), two.aquery("Who wrote Middlemarch?"), bad.aquery(QUESTION)
        )
        first, second = [await handler.averdict(r) for r in responses[:2]]
        with pytest.raises(CitationRejected) as caught:
            await handler.averdict(responses[2])
        for v in (first, second):
            await _same_as_check(guard, v)
    assert (first.question, first.answer) == (QUESTION, _cite(urls["good"]))
    assert [(s.query, [r.url for r in s.results]) for s in first.searches] == [
        (QUESTION, [urls["good"]])
    ]
    assert [(s.query, [r.url for r in s.results]) for s in second.searches] == [
        ("Who wrote Middlemarch?", [good])
    ]
    assert first.passed and second.passed
    assert caught.value.result.verdict.offending_urls == {urls["dead"]}
    assert handler.runs_in_flight == 0


def test_bad_arguments_are_refused() -> None:
    guard = Guard(Policy(), entailer=None)
    with pytest.raises(ValueError, match="mode"):
        CiteguardInstrumentation(guard, mode="strip")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keep"):
        CiteguardCallbackHandler(guard, keep=0)

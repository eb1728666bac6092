"""The LlamaIndex handlers with real LlamaIndex objects against the farm.

Real parts: a ``VectorStoreIndex`` (in memory, ``MockEmbedding``) and its real retriever, the
real ``CitationQueryEngine`` and ``RetrieverQueryEngine`` (streaming ones too, through LlamaIndex's
own streaming response synthesizer), the instrumentation dispatcher and the legacy
``CallbackManager``; the LLM is a ``CustomLLM`` that cites its first source
(``test_integrations.ScriptedLLM``, and ``StreamingLLM``, which streams the same answer word by
word) or LlamaIndex's ``MockLLM``, which echoes its prompt. Every cited page is fetched from the
aiohttp farm on 127.0.0.1. Runs when the optional ``llama-index-core`` is installed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from conftest import Farm
from test_integrations import ELIOT, HAVE_LLAMA_INDEX, QUESTION, SENTENCE, _cite, _guard, _site

from citeguard import CitationRejected, CitationStatus, Guard, Policy, UsageError
from citeguard.integrations.runs import RunVerdict
from citeguard.verdict import without_timings

pytestmark = pytest.mark.skipif(
    not HAVE_LLAMA_INDEX, reason="the optional llamaindex extra is not installed"
)

if HAVE_LLAMA_INDEX:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import CompletionResponse, MockLLM
    from llama_index.core.llms.callbacks import llm_completion_callback
    from llama_index.core.query_engine import CitationQueryEngine
    from llama_index.core.query_engine.citation_query_engine import (
        CITATION_QA_TEMPLATE,
        CITATION_REFINE_TEMPLATE,
    )
    from llama_index.core.response_synthesizers import get_response_synthesizer
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

    class StreamingLLM(ScriptedLLM):
        """ScriptedLLM's answer, streamed a word at a time (so a stream can be part consumed)."""

        @llm_completion_callback()  # type: ignore[misc, untyped-decorator, unused-ignore]
        def stream_complete(self, prompt: str, formatted: bool = False, **kw: Any) -> Any:
            words = self.complete(prompt, formatted=formatted).text.split(" ")

            def gen() -> Iterator[CompletionResponse]:
                text = ""
                for i, word in enumerate(words):
                    delta = word if i == 0 else " " + word
                    text += delta
                    yield CompletionResponse(text=text, delta=delta)

            return gen()


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


# ---------------------------------------------------------------------- streaming responses

STREAMED = SENTENCE[:-1] + " [1]."  # what a streaming CitationQueryEngine streams


def _streaming_engine(index: Any, retriever: Any = None, **kw: Any) -> Any:
    """The real CitationQueryEngine over LlamaIndex's own streaming response synthesizer."""
    llm = StreamingLLM()
    synthesizer = get_response_synthesizer(
        llm=llm,
        text_qa_template=CITATION_QA_TEMPLATE,
        refine_template=CITATION_REFINE_TEMPLATE,
        streaming=True,
        **kw,
    )
    return CitationQueryEngine(
        retriever=retriever or index.as_retriever(similarity_top_k=1),
        llm=llm,
        response_synthesizer=synthesizer,
        **kw,
    )


async def _consume(response: Any) -> str:
    """Read a stream to its end the way LlamaIndex's docs do: iterating ``response_gen``."""
    if isinstance(response, AsyncStreamingResponse):
        return "".join([t async for t in response.response_gen])
    assert isinstance(response, StreamingResponse)
    return "".join(response.response_gen)


async def _async_response_gen(r: Any) -> str:
    return "".join([t async for t in r.async_response_gen()])


async def _async_get_response(r: Any) -> str:
    text: str = (await r.get_response()).response
    return text


async def _async_print_response_stream(r: Any) -> str:
    await r.print_response_stream()
    text: str = r.response_txt
    return text


# each way LlamaIndex offers to read a stream: (query it asynchronously?, read it to its end)
_WAYS: dict[str, tuple[bool, Callable[[Any], Any]]] = {
    "sync-response_gen": (False, lambda r: "".join(r.response_gen)),
    "sync-get_response": (False, lambda r: r.get_response().response),
    "sync-print_response_stream": (False, lambda r: (r.print_response_stream(), r.response_txt)[1]),
    "sync-str": (False, str),
    "async-response_gen": (True, _consume),
    "async-async_response_gen": (True, _async_response_gen),
    "async-get_response": (True, _async_get_response),
    "async-print_response_stream": (True, _async_print_response_stream),
}


@pytest.mark.parametrize("way", list(_WAYS))
async def test_a_streamed_query_is_checked_once_its_stream_was_read(
    farm: Farm, attached: list[CiteguardInstrumentation], way: str
) -> None:
    is_async, read = _WAYS[way]
    urls = _site(farm)
    seen: list[RunVerdict] = []
    engine = _streaming_engine(_index(urls["good"]))
    async with _guard(farm) as guard:
        handler = _attach(attached, guard, on_verdict=seen.append)
        response = await engine.aquery(QUESTION) if is_async else engine.query(QUESTION)
        assert isinstance(response, AsyncStreamingResponse if is_async else StreamingResponse)
        assert VERDICT_KEY not in response.metadata and handler.runs_in_flight == 0
        text = read(response)
        text = await text if asyncio.iscoroutine(text) else text
        got = await handler.averdict(response)
        await _same_as_check(guard, got)
    assert text == STREAMED  # the reader got the stream as the engine streamed it
    assert got.question == QUESTION and got.answer == _cite(urls["good"])
    assert [(s.query, s.provider, [r.url for r in s.results]) for s in got.searches] == [
        (QUESTION, "VectorIndexRetriever", [urls["good"]])
    ]
    assert got.passed and got.verdict.citations[0].status is CitationStatus.OK
    assert response.metadata[RUN_ID_KEY] == got.run_id and response.metadata[VERDICT_KEY] == got
    assert seen == [got] and handler.runs_in_flight == 0


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_streaming_retriever_query_engine_with_mock_llm(
    farm: Farm, attached: list[CiteguardInstrumentation], is_async: bool
) -> None:
    urls = _site(farm)
    # index.as_query_engine: a RetrieverQueryEngine; MockLLM streams its prompt back, which
    # holds the retrieved node's URL (its metadata) and text, but no [n] marker
    engine = _index(urls["good"]).as_query_engine(streaming=True, llm=MockLLM(), similarity_top_k=1)
    async with _guard(farm) as guard:
        handler = _attach(attached, guard)
        response = await engine.aquery(QUESTION) if is_async else engine.query(QUESTION)
        text = await _consume(response)
        got = await handler.averdict(response)
        await _same_as_check(guard, got)
    assert got.answer == text and urls["good"] in text and SENTENCE in text
    assert [(s.query, [r.url for r in s.results]) for s in got.searches] == [
        (QUESTION, [urls["good"]])
    ]
    assert [c.url for c in got.verdict.citations] == [urls["good"]]


async def test_sync_code_reads_a_stream_then_gets_its_verdict(
    farm: Farm, attached: list[CiteguardInstrumentation]
) -> None:
    urls = _site(farm)
    guard = _guard(farm)
    handler = _attach(attached, guard)
    engine = _streaming_engine(_index(urls["dead"]))

    def sync_code() -> tuple[str, RunVerdict]:  # a worker thread has no running loop
        response = engine.query(QUESTION)
        with pytest.raises(UsageError, match="consumed to its end"):
            handler.verdict(response)
        text = "".join(response.response_gen)
        return text, handler.verdict(response)

    text, got = await asyncio.to_thread(sync_code)
    assert text == STREAMED
    assert got.answer == _cite(urls["dead"]) and not got.passed
    assert got.verdict.offending_urls == {urls["dead"]}
    assert [s.query for s in got.searches] == [QUESTION]
    await _same_as_check(guard, got)
    await guard.aclose()


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_averdict_refuses_an_unread_stream_and_keeps_nothing(
    farm: Farm, attached: list[CiteguardInstrumentation], is_async: bool
) -> None:
    urls = _site(farm)
    seen: list[RunVerdict] = []
    engine = _streaming_engine(_index(urls["good"]))
    async with _guard(farm) as guard:
        handler = _attach(attached, guard, on_verdict=seen.append)
        response = await engine.aquery(QUESTION) if is_async else engine.query(QUESTION)
        for _ in range(2):  # refused each time, not once and then cached
            with pytest.raises(UsageError, match="consumed to its end") as caught:
                await handler.averdict(response)
        assert "averdict" in str(caught.value) and "response_gen" in str(caught.value)
        # nothing was checked, delivered or kept as a verdict
        assert seen == [] and not handler.verdicts and handler.runs_in_flight == 0
        assert VERDICT_KEY not in response.metadata
        assert await _consume(response) == STREAMED  # the stream itself is untouched
        got = await handler.averdict(response)
        await _same_as_check(guard, got)
    assert got.answer == _cite(urls["good"]) and got.passed
    assert seen == [got] and dict(handler.verdicts) == {got.run_id: got}
    assert response.metadata[VERDICT_KEY] == got


async def test_a_partly_read_stream_is_refused_then_checked_whole(
    farm: Farm, attached: list[CiteguardInstrumentation]
) -> None:
    # LlamaIndex's async_response_gen() keeps a partial response_txt while it runs; a check
    # then must not judge (and keep a verdict on) the half answer
    urls = _site(farm)
    engine = _streaming_engine(_index(urls["good"]))
    async with _guard(farm) as guard:
        handler = _attach(attached, guard)
        sync, aresp = engine.query(QUESTION), await engine.aquery(QUESTION)
        tokens = aresp.async_response_gen()
        first = await anext(tokens)
        assert first == "Middlemarch" and aresp.response_txt == first  # partial text, set
        for_sync = iter(sync.response_gen)
        assert next(for_sync) == first
        for response in (sync, aresp):
            with pytest.raises(UsageError, match="consumed to its end"):
                await handler.averdict(response)
        assert first + "".join([t async for t in tokens]) == STREAMED
        assert first + "".join(for_sync) == STREAMED
        got = [await handler.averdict(r) for r in (sync, aresp)]
        for v in got:
            await _same_as_check(guard, v)
    assert [v.answer for v in got] == [_cite(urls["good"])] * 2
    assert all(v.passed for v in got) and got[0].run_id != got[1].run_id


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_raise_mode_raises_for_a_failing_stream_once_read(
    farm: Farm, attached: list[CiteguardInstrumentation], is_async: bool
) -> None:
    urls = _site(farm)
    engine = _streaming_engine(_index(urls["dead"]))
    async with _guard(farm) as guard:
        handler = _attach(attached, guard, mode="raise")
        response = await engine.aquery(QUESTION) if is_async else engine.query(QUESTION)
        with pytest.raises(UsageError):  # unread: refused, not judged
            await handler.averdict(response)
        assert await _consume(response) == STREAMED
        with pytest.raises(CitationRejected) as caught:
            await handler.averdict(response)
        with pytest.raises(CitationRejected):  # the kept verdict raises again
            await handler.averdict(response.metadata[RUN_ID_KEY])
    result = caught.value.result
    assert result.answer == _cite(urls["dead"]) and not result.passed
    assert result.verdict.offending_urls == {urls["dead"]}
    assert result.verdict.citations[0].status is CitationStatus.NOT_FOUND
    assert urls["dead"] in str(caught.value)
    kept = response.metadata[VERDICT_KEY]  # the RunVerdict behind the raised GuardResult
    assert not kept.passed and kept.verdict == result.verdict and kept.answer == result.answer


async def test_concurrent_streamed_queries_never_mix_their_retrievals(
    farm: Farm, attached: list[CiteguardInstrumentation]
) -> None:
    n = 3
    pages = [farm.add("gone.example.net", "/middlemarch", status=404, body="nope")]
    pages += [farm.add(f"run{i}.example.com", "/middlemarch", body=ELIOT) for i in range(1, n)]
    barrier = asyncio.Barrier(n)  # every query has started retrieving before any goes on
    engines = [
        _streaming_engine(None, WaitingRetriever(barrier, index=_index(p), similarity_top_k=1))
        for p in pages
    ]
    questions = [f"Who wrote Middlemarch? (reader {i})" for i in range(n)]
    async with _guard(farm) as guard:
        handler = _attach(attached, guard)
        responses = await asyncio.gather(
            *(e.aquery(q) for e, q in zip(engines, questions, strict=True))
        )
        # the streams are read interleaved, a token from each in turn, last query first
        streams: list[AsyncIterator[str]] = [r.async_response_gen() for r in responses[::-1]]
        texts = [""] * n
        while streams:
            for i, stream in enumerate(list(streams)):
                try:
                    texts[i] += await anext(stream)
                except StopAsyncIteration:
                    streams.remove(stream)
        got = await asyncio.gather(*(handler.averdict(r) for r in responses))
        for v in got:
            await _same_as_check(guard, v)
    assert texts == [STREAMED] * n
    for v, q, page in zip(got, questions, pages, strict=True):
        assert v.question == q and v.answer == _cite(page)
        assert [(s.query, [r.url for r in s.results]) for s in v.searches] == [(q, [page])]
    assert [v.passed for v in got] == [False, True, True]
    assert len({v.run_id for v in got}) == n and handler.runs_in_flight == 0


async def test_legacy_callback_handler_checks_a_streamed_query(farm: Farm) -> None:
    urls = _site(farm)
    async with _guard(farm) as guard:
        handler = CiteguardCallbackHandler(guard)
        manager = CallbackManager([handler])
        index = _index(urls["good"], callback_manager=manager)
        engine = _streaming_engine(index, callback_manager=manager)
        response = await engine.aquery(QUESTION)
        with pytest.raises(UsageError):
            await handler.averdict(response)
        assert await _consume(response) == STREAMED
        got = await handler.averdict(response)
        await _same_as_check(guard, got)
    assert (got.question, got.answer) == (QUESTION, _cite(urls["good"])) and got.passed
    assert [(s.query, [r.url for r in s.results]) for s in got.searches] == [
        (QUESTION, [urls["good"]])
    ]
    assert handler.runs_in_flight == 0

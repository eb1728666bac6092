"""The LangChain callback handler with real LangChain objects against the farm.

Real parts: LangChain's own fake chat models (``FakeMessagesListChatModel``,
``GenericFakeChatModel``, ``ParrotFakeChatModel``), a real retriever over an in-memory vector
store (``InMemoryVectorStore`` with ``DeterministicFakeEmbedding``), real ``@tool`` tools and
LCEL chains; every cited page is fetched from the aiohttp farm on 127.0.0.1. Nothing is wrapped:
the handler is attached through ``config={"callbacks": [handler]}`` and nothing else changes.
"""

from __future__ import annotations

import asyncio
import uuid
from operator import itemgetter
from typing import Any

import pytest
from conftest import Farm
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import (
    FakeMessagesListChatModel,
    GenericFakeChatModel,
    ParrotFakeChatModel,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.tools import tool
from langchain_core.vectorstores import InMemoryVectorStore
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_integrations import (
    ELIOT,
    NOW,
    QUESTION,
    SENTENCE,
    _cite,
    _guard,
    _import_without,
    _site,
)

from citeguard import CitationRejected, CitationStatus, FetchPolicy, Guard, Policy
from citeguard.integrations.langchain_callback import CiteguardCallbackHandler
from citeguard.integrations.runs import RunVerdict
from citeguard.verdict import without_timings


def _config(handler: CiteguardCallbackHandler, run_id: uuid.UUID) -> RunnableConfig:
    return {"callbacks": [handler], "run_id": run_id}


def _store(*docs: tuple[str, str]) -> InMemoryVectorStore:
    """An in-memory vector store of (text, source URL) documents. The fake embedding is a
    hash of the text, so a query equal to a document's text retrieves that document first."""
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents([Document(page_content=t, metadata={"source": u}) for t, u in docs])
    return store


def _cite_first(docs: list[Document]) -> str:
    return _cite(docs[0].metadata["source"])


def _rag_chain(store: InMemoryVectorStore, answer: Runnable[Any, Any]) -> Runnable[Any, str]:
    """retriever | prompt | chat model | parser: the model reads the answer off its prompt."""
    retriever = store.as_retriever(search_kwargs={"k": 1})
    prompt = ChatPromptTemplate.from_messages([("human", "{context}")])
    return (
        {"context": itemgetter("question") | retriever | answer, "question": itemgetter("question")}
        | prompt
        | ParrotFakeChatModel()
        | StrOutputParser()
    )


async def _same_as_check(guard: Guard, got: RunVerdict) -> None:
    """The handler's verdict is Guard.check's on the same answer and searches."""
    direct = await guard.check(got.answer, question=got.question, searches=got.searches)
    assert without_timings(got.verdict) == without_timings(direct)


# ---------------------------------------------------------------------- a chain with a retriever


async def test_chain_with_a_retriever_is_checked_with_its_retrieval(farm: Farm) -> None:
    urls = _site(farm)
    store = _store((QUESTION, urls["good"]), ("Dickens wrote Bleak House.", urls["dead"]))
    chain = _rag_chain(store, RunnableLambda(_cite_first))
    seen: list[RunVerdict] = []
    async with _guard(farm) as guard:
        handler = CiteguardCallbackHandler(guard, on_verdict=seen.append)
        run_id = uuid.uuid4()
        answer = await chain.ainvoke({"question": QUESTION}, config=_config(handler, run_id))
        got = handler.verdict(run_id)
        assert got is not None
        await _same_as_check(guard, got)
    assert answer == _cite(urls["good"])  # the chain's own output, untouched
    assert seen == [got] and handler.verdicts[str(run_id)] == got
    assert (got.run_id, got.question, got.answer) == (str(run_id), QUESTION, answer)
    # the retrieval was recorded without wrapping anything: literal query, retrieved document
    [search] = got.searches
    assert search.query == QUESTION and search.provider == "VectorStoreRetriever"
    assert [r.url for r in search.results] == [urls["good"]]
    assert got.passed and got.verdict.citations[0].status is CitationStatus.OK
    assert [q["query"] for q in got.verdict.axes["query"].details["queries"]] == [QUESTION]
    assert handler.runs_in_flight == 0  # per-run state is gone once the root ended


# ---------------------------------------------------------------------- an agent with tools


async def test_agent_tool_calls_are_recorded_without_wrapping_the_tool(farm: Farm) -> None:
    urls = _site(farm)
    asked: list[str] = []

    @tool
    async def web_search(query: str) -> list[dict[str, str]]:
        """Search the web for pages about the query."""
        asked.append(query)
        return [{"url": urls["good"], "title": "Middlemarch", "content": "a novel"}]

    @tool
    def word_count(text: str) -> int:
        """Count the words of a text."""
        return len(text.split())

    tools = {t.name: t for t in (web_search, word_count)}
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(
                content="",
                tool_calls=[
                    {"name": "web_search", "args": {"query": "Middlemarch author"}, "id": "c1"},
                    {"name": "word_count", "args": {"text": "George Eliot"}, "id": "c2"},
                ],
            ),
            AIMessage(content=_cite(urls["good"])),
        ]
    )

    async def agent(inputs: dict[str, Any]) -> BaseMessage:
        messages: list[BaseMessage] = [HumanMessage(inputs["question"])]
        reply = await model.ainvoke(messages)
        messages.append(reply)
        assert isinstance(reply, AIMessage)
        for call in reply.tool_calls:
            messages.append(await tools[call["name"]].ainvoke(call))
        return await model.ainvoke(messages)

    question = "Who wrote Middlemarch, the novel first published in 1871?"
    async with _guard(farm) as guard:
        handler = CiteguardCallbackHandler(guard)
        run_id = uuid.uuid4()
        out = await RunnableLambda(agent).ainvoke(
            {"question": question}, config=_config(handler, run_id)
        )
        got = handler.verdict(run_id)
        assert got is not None
        await _same_as_check(guard, got)
    assert isinstance(out, AIMessage) and out.content == _cite(urls["good"])
    assert asked == ["Middlemarch author"]
    # the search tool's call is a search; the word counter returned no URL and is not one
    assert [(s.query, s.provider) for s in got.searches] == [("Middlemarch author", "web_search")]
    assert [r.url for r in got.searches[0].results] == [urls["good"]]
    assert got.question == question and got.answer == _cite(urls["good"])
    query = got.verdict.axes["query"]
    # the recorded literal query is what was judged: it dropped the question's year
    assert query.evaluated and not query.passed
    assert any("'Middlemarch author'" in f.message for f in query.findings)
    assert "not_retrieved" not in {f.code for f in got.verdict.axes["validity"].findings}


async def test_named_search_tools_are_the_only_searches(farm: Farm) -> None:
    urls = _site(farm)

    @tool
    def lookup(query: str) -> str:
        """Look a topic up."""
        return "nothing found"

    @tool
    def links(query: str) -> list[dict[str, str]]:
        """Related links."""
        return [{"url": urls["dead"], "title": "Bleak House"}]

    async def agent(inputs: dict[str, Any]) -> str:
        await lookup.ainvoke({"query": "Middlemarch"})
        await links.ainvoke({"query": "Middlemarch links"})
        return _cite(urls["good"])

    async with _guard(farm) as guard:
        handler = CiteguardCallbackHandler(guard, search_tools={"lookup"})
        run_id = uuid.uuid4()
        await RunnableLambda(agent).ainvoke(QUESTION, config=_config(handler, run_id))
    got = handler.verdict(run_id)
    assert got is not None and got.question == QUESTION
    # a named search tool is recorded even with no results; an unnamed one is not, even with
    [search] = got.searches
    assert (search.query, search.provider, search.results) == ("Middlemarch", "lookup", [])


# ---------------------------------------------------------------------- raise mode


async def test_raise_mode_reaches_the_caller_and_report_mode_does_not_raise(farm: Farm) -> None:
    urls = _site(farm)
    store = _store((QUESTION, urls["dead"]))
    chain = _rag_chain(store, RunnableLambda(_cite_first))
    hooked: list[RunVerdict] = []

    async def hook(v: RunVerdict) -> None:  # an async hook, awaited before the raise
        hooked.append(v)

    async with _guard(farm) as guard:
        raising = CiteguardCallbackHandler(guard, mode="raise", on_verdict=hook)
        assert raising.raise_error  # what makes LangChain let the exception through
        run_id = uuid.uuid4()
        with pytest.raises(CitationRejected) as caught:
            await chain.ainvoke({"question": QUESTION}, config=_config(raising, run_id))
        reporting = CiteguardCallbackHandler(guard)
        other = uuid.uuid4()
        answer = await chain.ainvoke({"question": QUESTION}, config=_config(reporting, other))
    result = caught.value.result
    assert not result.passed and result.outcome == "failed" and len(result.attempts) == 1
    assert result.verdict.offending_urls == {urls["dead"]}
    assert result.verdict.citations[0].status is CitationStatus.NOT_FOUND
    assert urls["dead"] in str(caught.value) and "404" in str(caught.value)
    assert result.attempts[0].searches[0].query == QUESTION
    assert [v.run_id for v in hooked] == [str(run_id)]
    assert raising.verdict(run_id) == hooked[0] and raising.runs_in_flight == 0
    # report mode: the chain's answer comes back, the verdict says it failed
    assert answer == _cite(urls["dead"])
    reported = reporting.verdict(other)
    assert reported is not None and not reported.passed
    assert reported.verdict.offending_urls == {urls["dead"]}


def _not_an_answer(question: str) -> int:
    return 42


async def test_an_output_with_no_answer_is_a_clear_error_in_raise_mode(farm: Farm) -> None:
    async with _guard(farm) as guard:
        handler = CiteguardCallbackHandler(guard, mode="raise")
        with pytest.raises(TypeError, match="cannot read an answer"):
            await RunnableLambda(_not_an_answer).ainvoke(QUESTION, config={"callbacks": [handler]})
    assert handler.runs_in_flight == 0 and not handler.verdicts


async def test_a_failed_run_is_forgotten_unchecked(farm: Farm) -> None:
    urls = _site(farm)
    store = _store((QUESTION, urls["good"]))

    def boom(docs: list[Document]) -> str:
        raise RuntimeError("the model is down")

    chain = _rag_chain(store, RunnableLambda(boom))
    async with _guard(farm) as guard:
        handler = CiteguardCallbackHandler(guard, mode="raise")
        with pytest.raises(RuntimeError, match="the model is down"):
            await chain.ainvoke({"question": QUESTION}, config={"callbacks": [handler]})
    assert handler.runs_in_flight == 0 and not handler.verdicts
    assert farm.count("books.example.com") == 0  # nothing was checked


# ---------------------------------------------------------------------- concurrency


async def test_concurrent_runs_never_mix_their_searches(farm: Farm) -> None:
    n = 4
    pages = [farm.add(f"run{i}.example.com", "/middlemarch", body=ELIOT) for i in range(1, n)]
    pages.insert(0, farm.add("gone.example.net", "/middlemarch", status=404, body="nope"))
    questions = [f"Who wrote Middlemarch? (reader {i})" for i in range(n)]
    store = _store(*zip(questions, pages, strict=True))
    # every run has retrieved before any goes on: their recordings are all open at once
    barrier = asyncio.Barrier(n)

    async def cite_after_all_retrieved(docs: list[Document]) -> str:
        await barrier.wait()
        return _cite_first(docs)

    chain = _rag_chain(store, RunnableLambda(cite_after_all_retrieved))
    async with _guard(farm) as guard:
        handler = CiteguardCallbackHandler(guard)
        ids = [uuid.uuid4() for _ in range(n)]
        answers = await asyncio.gather(
            *(
                chain.ainvoke({"question": q}, config=_config(handler, i))
                for q, i in zip(questions, ids, strict=True)
            )
        )
        got = [handler.verdict(i) for i in ids]
        for v in got:
            assert v is not None
            await _same_as_check(guard, v)
    assert answers == [_cite(p) for p in pages]
    for v, q, page in zip(got, questions, pages, strict=True):
        assert v is not None
        assert v.question == q
        assert [(s.query, [r.url for r in s.results]) for s in v.searches] == [(q, [page])]
    # only the run that cited the dead page failed
    assert [v.passed for v in got if v is not None] == [False, True, True, True]
    assert handler.runs_in_flight == 0


# ---------------------------------------------------------------------- streaming


async def test_streamed_chat_model_is_checked_when_the_stream_ends(farm: Farm) -> None:
    urls = _site(farm)
    async with _guard(farm) as guard:
        handler = CiteguardCallbackHandler(guard, mode="raise")
        model = GenericFakeChatModel(messages=iter([_cite(urls["good"]), _cite(urls["dead"])]))
        ok_id, bad_id = uuid.uuid4(), uuid.uuid4()
        chunks = [c.content async for c in model.astream(QUESTION, config=_config(handler, ok_id))]
        got = handler.verdict(ok_id)
        assert got is not None
        await _same_as_check(guard, got)
        # a failing streamed answer: every chunk arrives, then the rejection ends the stream
        bad: list[Any] = []
        with pytest.raises(CitationRejected):
            async for c in model.astream(QUESTION, config=_config(handler, bad_id)):
                bad.append(c.content)
    assert len(chunks) > 3 and "".join(map(str, chunks)) == _cite(urls["good"])
    assert got.answer == _cite(urls["good"]) and got.question == QUESTION and got.passed
    assert got.searches == []  # a bare model call searched nothing
    assert "".join(map(str, bad)) == _cite(urls["dead"])
    failed = handler.verdict(bad_id)
    assert failed is not None and failed.verdict.offending_urls == {urls["dead"]}


async def test_streamed_chain_reads_its_question_at_the_end(farm: Farm) -> None:
    urls = _site(farm)
    store = _store((QUESTION, urls["good"]))
    chain = _rag_chain(store, RunnableLambda(_cite_first))
    async with _guard(farm) as guard:
        handler = CiteguardCallbackHandler(guard)
        run_id = uuid.uuid4()
        parts = [p async for p in chain.astream({"question": QUESTION}, _config(handler, run_id))]
    got = handler.verdict(run_id)
    assert "".join(parts) == _cite(urls["good"])
    assert got is not None and got.passed
    assert got.question == QUESTION and got.answer == "".join(parts)
    assert [s.query for s in got.searches] == [QUESTION]


# ---------------------------------------------------------------------- the sync API


async def test_sync_invoke_is_reported(farm: Farm) -> None:
    urls = _site(farm)
    store = _store((QUESTION, urls["dead"]))
    chain = _rag_chain(store, RunnableLambda(_cite_first))
    guard = _guard(farm)
    handler = CiteguardCallbackHandler(guard, mode="raise")
    run_id = uuid.uuid4()
    # a worker thread has no running loop; this loop serves the farm meanwhile. LangChain runs
    # an async handler's events on throwaway loops there and logs what they raise: reported only
    answer = await asyncio.to_thread(chain.invoke, {"question": QUESTION}, _config(handler, run_id))
    assert answer == _cite(urls["dead"])
    got = handler.verdict(run_id)
    assert got is not None and not got.passed
    assert [s.query for s in got.searches] == [QUESTION]
    async with guard:  # the guard still works on this loop afterwards
        again = await guard.check(got.answer, question=QUESTION, searches=got.searches)
    assert without_timings(again) == without_timings(got.verdict)


# ---------------------------------------------------------------------- spans and arguments


async def test_the_verdict_is_emitted_as_spans(farm: Farm) -> None:
    urls = _site(farm)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    fetch = FetchPolicy(allow_private_addresses=True, url_timeout=3.0, retries=0)
    guard = Guard(
        Policy(fetch=fetch),
        resolver=farm.resolver,
        entailer=None,
        now=lambda: NOW,
        tracer_provider=provider,
    )
    store = _store((QUESTION, urls["good"]))
    async with guard:
        handler = CiteguardCallbackHandler(guard)
        run_id = uuid.uuid4()
        await _rag_chain(store, RunnableLambda(_cite_first)).ainvoke(
            {"question": QUESTION}, config=_config(handler, run_id)
        )
    spans = exporter.get_finished_spans()
    [outer] = [s for s in spans if s.name == "citeguard.callback"]
    [check] = [s for s in spans if s.name == "citeguard.check"]
    attrs = dict(outer.attributes or {})
    assert attrs["citeguard.run_id"] == str(run_id)
    assert attrs["citeguard.framework"] == "langchain"
    assert list(attrs["citeguard.queries"]) == [QUESTION]  # type: ignore[arg-type]
    assert attrs["citeguard.passed"] is True
    assert check.parent is not None and check.parent.span_id == outer.context.span_id
    provider.shutdown()


def test_bad_arguments_are_refused() -> None:
    guard = Guard(Policy(), entailer=None)
    with pytest.raises(ValueError, match="mode"):
        CiteguardCallbackHandler(guard, mode="strip")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keep"):
        CiteguardCallbackHandler(guard, keep=0)
    with pytest.raises(ValueError, match="Guard"):
        CiteguardCallbackHandler(object())  # type: ignore[arg-type]


async def test_only_the_most_recent_verdicts_are_kept(farm: Farm) -> None:
    urls = _site(farm)
    model = GenericFakeChatModel(messages=iter([_cite(urls["good"])] * 3))
    async with _guard(farm) as guard:
        handler = CiteguardCallbackHandler(guard, keep=2)
        ids = [uuid.uuid4() for _ in range(3)]
        for i in ids:
            await model.ainvoke(SENTENCE, config=_config(handler, i))
    assert list(handler.verdicts) == [str(i) for i in ids[1:]]
    assert handler.verdict(ids[0]) is None


@pytest.mark.parametrize(
    ("blocked", "module", "extra"),
    [
        ("langchain_core", "citeguard.integrations.langchain_callback", "langchain"),
        ("llama_index", "citeguard.integrations.llamaindex_handler", "llamaindex"),
    ],
)
def test_missing_framework_names_the_extra(blocked: str, module: str, extra: str) -> None:
    done = _import_without(blocked, module)
    assert done.returncode == 0, done.stderr
    name, _package, got_extra, _message = done.stdout.strip().split("|")
    assert (name, got_extra) == ("MissingExtraError", extra)

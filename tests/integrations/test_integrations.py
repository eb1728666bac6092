"""The LangChain and LlamaIndex integrations, with real framework objects against the farm.

Only the LLM is scripted (deterministic chains and a scripted LlamaIndex LLM): every citation is
fetched from the real aiohttp farm on 127.0.0.1. The LlamaIndex tests run when the optional
``llama-index-core`` is installed; the missing-extra tests run either way.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import Farm
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool, Tool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from citeguard import (
    CitationStatus,
    FetchPolicy,
    Guard,
    GuardResult,
    MissingExtraError,
    Policy,
    Synthesis,
)
from citeguard.integrations.langchain import GuardedTool, guard_runnable, guard_tool, to_synthesis

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
QUESTION = "Who wrote the novel Middlemarch?"
SENTENCE = "Middlemarch is a novel by the English author George Eliot."

ELIOT = """<html><head><title>Middlemarch</title></head><body><article>
<p>Middlemarch is a novel by the English author George Eliot, first published in eight
installments in 1871 and 1872.</p>
<p>The novel is set in the fictitious Midlands town of Middlemarch during 1829 to 1832.</p>
</article></body></html>"""


def _guard(farm: Farm, **policy: Any) -> Guard:
    fetch = FetchPolicy(
        allow_private_addresses=True, url_timeout=3.0, answer_deadline=5.0, retries=0
    )
    return Guard(
        Policy(fetch=fetch, **policy), resolver=farm.resolver, entailer=None, now=lambda: NOW
    )


def _site(farm: Farm) -> dict[str, str]:
    return {
        "good": farm.add("books.example.com", "/middlemarch", body=ELIOT),
        "dead": farm.add("gone.example.net", "/middlemarch", status=404, body="nope"),
    }


def _cite(url: str) -> str:
    return f"{SENTENCE[:-1]} [1].\n\n[1] {url}\n"


class ScriptedChain:
    """A deterministic stand-in for prompt | llm: cites the dead page until told to avoid it."""

    def __init__(self, urls: dict[str, str], *, as_message: bool = False) -> None:
        self.urls = urls
        self.as_message = as_message
        self.inputs: list[dict[str, Any]] = []

    async def __call__(self, inputs: dict[str, Any]) -> str | AIMessage:
        self.inputs.append(inputs)
        url = (
            self.urls["good"] if self.urls["dead"] in inputs["exclude_urls"] else self.urls["dead"]
        )
        if self.as_message:
            usage = {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}
            return AIMessage(content=_cite(url), usage_metadata=usage)
        return _cite(url)


# ---------------------------------------------------------------------- guard_runnable


async def test_guarded_chain_regenerates_after_a_404(farm: Farm) -> None:
    urls = _site(farm)
    chain = ScriptedChain(urls)
    async with _guard(farm) as guard:
        guarded = guard_runnable(RunnableLambda(chain), guard)
        result = await guarded.ainvoke({"question": QUESTION, "style": "brief"})
    assert isinstance(result, GuardResult)
    assert result.passed and result.outcome == "passed"
    assert len(result.attempts) == 2
    first = result.attempts[0].verdict.citations[0]
    assert first.status is CitationStatus.NOT_FOUND and first.http_status == 404
    assert result.verdict.citations[0].status is CitationStatus.OK
    assert urls["good"] in result.answer
    # attempt 1: the input as given, nothing excluded, no feedback
    one, two = chain.inputs
    assert one == {"question": QUESTION, "style": "brief", "exclude_urls": [], "feedback": None}
    # attempt 2: the offender excluded (a sorted list) and the guard's message as plain text
    assert two["question"] == QUESTION and two["style"] == "brief"
    assert two["exclude_urls"] == [urls["dead"]]
    assert isinstance(two["feedback"], str)
    assert "404" in two["feedback"] and urls["dead"] in two["feedback"]


async def test_output_answer_returns_the_string_and_reads_an_ai_message(farm: Farm) -> None:
    urls = _site(farm)
    async with _guard(farm) as guard:
        chain = ScriptedChain(urls, as_message=True)
        guarded = guard_runnable(RunnableLambda(chain), guard, output="answer")
        answer = await guarded.ainvoke(QUESTION)  # a bare string input is the question
    assert isinstance(answer, str)
    assert answer == _cite(urls["good"])
    assert chain.inputs[0]["question"] == QUESTION and len(chain.inputs) == 2


async def test_question_key_and_seeded_exclusions(farm: Farm) -> None:
    urls = _site(farm)
    async with _guard(farm) as guard:
        chain = ScriptedChain(urls)

        async def renamed(inputs: dict[str, Any]) -> str | AIMessage:
            assert inputs["q"] == QUESTION
            return await chain({**inputs, "question": inputs["q"]})

        guarded = guard_runnable(RunnableLambda(renamed), guard, question_key="q")
        result = await guarded.ainvoke({"q": QUESTION, "exclude_urls": [urls["dead"]]})
    assert isinstance(result, GuardResult)
    # the dead page was excluded from the start: one attempt, never fetched
    assert result.passed and len(result.attempts) == 1
    assert farm.count("gone.example.net") == 0
    with pytest.raises(ValueError, match="'q'"):
        await guarded.ainvoke({"question": QUESTION})


def test_chain_outputs_read_as_answers() -> None:
    blocks: list[str | dict[str, Any]] = [
        {"type": "text", "text": "By Eliot "},
        {"type": "image_url", "image_url": {"url": "https://example.com/eliot.png"}},
        {"type": "text", "text": "[1]."},
    ]
    usage = {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}
    assert to_synthesis(AIMessage(content=blocks, usage_metadata=usage)) == Synthesis(
        text="By Eliot [1].", input_tokens=120, output_tokens=30
    )
    assert to_synthesis(AIMessage(content="plain")) == "plain"
    assert to_synthesis({"answer": "mapped", "context": []}) == "mapped"
    same = Synthesis(text="t", cost=0.5)
    assert to_synthesis(same) is same


async def test_bad_chain_output_is_a_clear_error(farm: Farm) -> None:
    async with _guard(farm) as guard:
        guarded = guard_runnable(RunnableLambda(lambda _: 42), guard)
        with pytest.raises(TypeError, match="must return a str, an AIMessage"):
            await guarded.ainvoke(QUESTION)


async def test_sync_invoke_and_batch_from_a_thread_without_a_loop(farm: Farm) -> None:
    urls = _site(farm)
    guard = _guard(farm)
    chain = ScriptedChain(urls)
    guarded = guard_runnable(RunnableLambda(chain), guard)
    # a worker thread has no running loop: invoke runs its own, while this loop serves the farm
    first = await asyncio.to_thread(guarded.invoke, QUESTION)
    again = await asyncio.to_thread(guarded.invoke, {"question": QUESTION})  # a fresh loop
    both = await asyncio.to_thread(guarded.batch, [QUESTION, QUESTION])
    for r in (first, again, *both):
        assert isinstance(r, GuardResult)
        assert r.passed and len(r.attempts) == 2
    assert len(chain.inputs) == 8


async def test_sync_invoke_inside_a_running_loop_points_to_ainvoke(farm: Farm) -> None:
    guarded = guard_runnable(RunnableLambda(lambda _: "x"), _guard(farm))
    with pytest.raises(RuntimeError, match="ainvoke"):
        guarded.invoke(QUESTION)
    with pytest.raises(RuntimeError, match="abatch"):
        guarded.batch([QUESTION])


# ---------------------------------------------------------------------- guard_tool


def _search_tool(urls: dict[str, str], calls: list[str]) -> BaseTool:
    @tool
    async def web_search(query: str) -> list[dict[str, str]]:
        """Search the web for pages about the query."""
        calls.append(query)
        return [{"url": urls["good"], "title": "Middlemarch", "content": "a novel"}]

    return web_search


async def test_wrapped_tool_records_queries_and_returns_what_the_tool_returned(
    farm: Farm,
) -> None:
    urls = _site(farm)
    calls: list[str] = []
    original = _search_tool(urls, calls)
    seen: list[Any] = []
    async with _guard(farm) as guard:
        search = guard_tool(original, guard)
        assert isinstance(search, GuardedTool)
        assert (search.name, search.description) == (original.name, original.description)
        # the model sees the same tool
        assert convert_to_openai_tool(search) == convert_to_openai_tool(original)

        async def agent(inputs: dict[str, Any]) -> str:
            hits = await search.ainvoke({"query": "Middlemarch novel author"})
            seen.append(hits)
            return _cite(hits[0]["url"])

        result = await guard_runnable(RunnableLambda(agent), guard).ainvoke(QUESTION)
    assert seen == [[{"url": urls["good"], "title": "Middlemarch", "content": "a novel"}]]
    assert calls == ["Middlemarch novel author"]
    assert isinstance(result, GuardResult) and result.passed
    query = result.verdict.axes["query"]
    assert query.evaluated
    assert [q["query"] for q in query.details["queries"]] == ["Middlemarch novel author"]
    # the recorded results make the cited page "retrieved": no not_retrieved finding
    assert "not_retrieved" not in {f.code for f in result.verdict.axes["validity"].findings}


async def test_wrapped_tool_feeds_the_query_axis_a_dropped_constraint(farm: Farm) -> None:
    urls = _site(farm)
    async with _guard(farm) as guard:
        search = guard_tool(_search_tool(urls, []), guard)

        async def agent(inputs: dict[str, Any]) -> str:
            hits = await search.ainvoke({"query": "Middlemarch author"})
            return _cite(hits[0]["url"])

        question = "Who wrote Middlemarch, the novel first published in 1871?"
        result = await guard_runnable(RunnableLambda(agent), guard).ainvoke(question)
    assert isinstance(result, GuardResult)
    query = result.verdict.axes["query"]
    assert query.evaluated and not query.passed
    # the recorded literal query is what was judged: a bare topic lost the question's terms
    assert any("'Middlemarch author'" in f.message for f in query.findings)


async def test_wrapped_tool_as_a_tool_call_sync_and_with_an_artifact(farm: Farm) -> None:
    urls = _site(farm)
    hits = [{"url": urls["good"], "title": "Middlemarch", "content": "a novel"}]

    @tool
    def sync_search(query: str) -> list[dict[str, str]]:
        """Search the web (blocking client)."""
        return hits

    @tool(response_format="content_and_artifact")
    def raw_search(query: str) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Search the web and keep the raw API response."""
        return hits, {"raw": True, "took_ms": 12}

    call = {
        "name": "sync_search",
        "args": {"query": "Middlemarch"},
        "id": "c1",
        "type": "tool_call",
    }
    async with _guard(farm) as guard:
        wrapped_sync = guard_tool(sync_search, guard)
        wrapped_raw = guard_tool(raw_search, guard)
        as_call = await wrapped_sync.ainvoke(call)
        expected = await sync_search.ainvoke(call)
        assert isinstance(as_call, ToolMessage) and isinstance(expected, ToolMessage)
        assert (as_call.content, as_call.tool_call_id, as_call.name) == (
            expected.content,
            expected.tool_call_id,
            expected.name,
        )
        raw_call = {**call, "name": "raw_search"}
        msg = await wrapped_raw.ainvoke(raw_call)
        assert isinstance(msg, ToolMessage)
        assert msg.artifact == {"raw": True, "took_ms": 12}

        def agent(inputs: dict[str, Any]) -> str:  # a sync chain step: runs in a worker thread
            got = wrapped_sync.invoke("Middlemarch author")  # a plain-string tool input
            assert got == hits
            return _cite(got[0]["url"])

        result = await guard_runnable(RunnableLambda(agent), guard).ainvoke(QUESTION)
    assert isinstance(result, GuardResult) and result.passed
    queries = result.verdict.axes["query"].details["queries"]
    assert [q["query"] for q in queries] == ["Middlemarch author"]


async def test_legacy_single_string_tool_stays_a_single_string_tool(farm: Farm) -> None:
    urls = _site(farm)
    asked: list[str] = []

    def lookup(text: str) -> str:
        asked.append(text)
        return json.dumps([{"url": urls["good"], "title": "Middlemarch"}])  # a JSON string

    legacy = Tool(name="lookup", func=lookup, description="Look a topic up on the web.")
    async with _guard(farm) as guard:
        wrapped = guard_tool(legacy, guard)
        assert isinstance(wrapped, Tool)
        assert convert_to_openai_tool(wrapped) == convert_to_openai_tool(legacy)

        async def agent(inputs: dict[str, Any]) -> str:
            got = await wrapped.ainvoke("Middlemarch author")
            assert got == lookup("x")  # the very string the tool returned
            return _cite(urls["good"])

        result = await guard_runnable(RunnableLambda(agent), guard).ainvoke(QUESTION)
    assert asked[0] == "Middlemarch author"
    assert isinstance(result, GuardResult) and result.passed
    queries = result.verdict.axes["query"].details["queries"]
    assert [q["query"] for q in queries] == ["Middlemarch author"]
    assert "not_retrieved" not in {f.code for f in result.verdict.axes["validity"].findings}


# ---------------------------------------------------------------------- missing extras


def _import_without(blocked: str, module: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules[{blocked!r}] = None  # the framework is "not installed"
        from citeguard import MissingExtraError
        try:
            import {module}
        except MissingExtraError as e:
            assert isinstance(e, ImportError)
            print(type(e).__name__, e.package, e.extra, str(e), sep="|")
        """
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],  # the checkout, whatever pytest's cwd
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("blocked", "module", "package", "extra"),
    [
        ("langchain_core", "citeguard.integrations.langchain", "langchain-core", "langchain"),
        ("llama_index", "citeguard.integrations.llamaindex", "llama-index-core", "llamaindex"),
    ],
)
def test_missing_framework_names_the_extra(
    blocked: str, module: str, package: str, extra: str
) -> None:
    done = _import_without(blocked, module)
    assert done.returncode == 0, done.stderr
    name, got_package, got_extra, message = done.stdout.strip().split("|")
    assert (name, got_package, got_extra) == ("MissingExtraError", package, extra)
    assert f"pip install 'citeguard-agent[{extra}]'" in message
    assert issubclass(MissingExtraError, ImportError)


# ---------------------------------------------------------------------- LlamaIndex

try:
    import llama_index.core  # noqa: F401

    HAVE_LLAMA_INDEX = True
except ImportError:
    HAVE_LLAMA_INDEX = False

needs_llama_index = pytest.mark.skipif(
    not HAVE_LLAMA_INDEX, reason="the optional llamaindex extra is not installed"
)

if HAVE_LLAMA_INDEX:
    from llama_index.core.base.response.schema import Response
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
    from llama_index.core.llms.callbacks import llm_completion_callback
    from llama_index.core.query_engine import CitationQueryEngine, CustomQueryEngine
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from citeguard.integrations.llamaindex import (
        ExcludeUrlsPostprocessor,
        guard_query_engine,
        node_url,
        render_response,
    )

    class ScriptedLLM(CustomLLM):  # type: ignore[misc, unused-ignore]
        """Answers from the first source in the prompt and cites it as [n], as an LLM would."""

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="scripted")

        @llm_completion_callback()  # type: ignore[misc, untyped-decorator, unused-ignore]
        def complete(self, prompt: str, formatted: bool = False, **kw: Any) -> CompletionResponse:
            # CitationQueryEngine's prompt shows an example first; the real sources follow it
            ours = prompt.rsplit("Now it's your turn", 1)[-1]
            found = re.search(r"Source (\d+):\n(.+)", ours)
            if found is None:
                return CompletionResponse(text="None of the sources are helpful.")
            return CompletionResponse(text=f"{found.group(2).strip()[:-1]} [{found.group(1)}].")

        @llm_completion_callback()  # type: ignore[misc, untyped-decorator, unused-ignore]
        def stream_complete(self, prompt: str, formatted: bool = False, **kw: Any) -> Any:
            raise NotImplementedError

    class FixedRetriever(BaseRetriever):  # type: ignore[misc, unused-ignore]
        """Returns the same nodes for every query (no embeddings needed)."""

        def __init__(self, nodes: list[NodeWithScore]) -> None:
            self.nodes = nodes
            self.calls = 0
            super().__init__()

        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            self.calls += 1
            return list(self.nodes)

    class WholeQueryOnly(CustomQueryEngine):  # type: ignore[misc, unused-ignore]
        """An engine that only answers whole queries."""

        def custom_query(self, query_str: str) -> str:
            return "x"

    def _node(text: str, **meta: str) -> NodeWithScore:
        return NodeWithScore(node=TextNode(text=text, metadata=meta), score=1.0)

    def _nodes(urls: dict[str, str]) -> list[NodeWithScore]:
        return [_node(SENTENCE, url=urls["dead"]), _node(SENTENCE, source=urls["good"])]


@needs_llama_index
async def test_query_engine_drops_the_rejected_source_and_passes(farm: Farm) -> None:
    urls = _site(farm)
    retriever = FixedRetriever(_nodes(urls))
    engine = CitationQueryEngine(retriever=retriever, llm=ScriptedLLM())
    async with _guard(farm) as guard:
        result = await guard_query_engine(engine, guard).aquery(QUESTION)
    assert isinstance(result, GuardResult)
    assert result.passed and len(result.attempts) == 2
    one, two = result.attempts
    # the [1] marker was bound to source_nodes[0]'s metadata URL in a rendered reference list
    assert one.answer.endswith(f"[1] {urls['dead']}\n")
    assert one.verdict.citations[0].status is CitationStatus.NOT_FOUND
    assert two.excluded_urls == {urls["dead"]}
    assert two.answer == _cite(urls["good"])
    assert result.verdict.citations[0].status is CitationStatus.OK
    assert retriever.calls == 2  # retrieved afresh each attempt; the filter ran in between


@needs_llama_index
async def test_query_engine_factory_gets_the_exclusion_postprocessor(farm: Farm) -> None:
    urls = _site(farm)
    retriever = FixedRetriever(_nodes(urls))
    built: list[list[Any]] = []

    def factory(postprocessors: list[Any]) -> CitationQueryEngine:
        built.append(postprocessors)
        return CitationQueryEngine(
            retriever=retriever, llm=ScriptedLLM(), node_postprocessors=postprocessors
        )

    async with _guard(farm) as guard:
        result = await guard_query_engine(factory, guard).aquery(QUESTION)
    assert result.passed and len(result.attempts) == 2
    assert [type(p) for ps in built for p in ps] == [ExcludeUrlsPostprocessor] * 2
    assert built[0][0].exclude_urls == frozenset()
    assert built[1][0].exclude_urls == {urls["dead"]}


@needs_llama_index
def test_exclusion_matches_normalised_urls_and_keeps_url_less_nodes() -> None:
    nodes = [
        _node("a", url="HTTP://Docs.Example.com:80/a#intro"),
        _node("b", link="http://docs.example.com/b"),
        _node("c"),
    ]
    drop = ExcludeUrlsPostprocessor(exclude_urls=frozenset({"http://docs.example.com/a"}))
    assert [n.node.get_content() for n in drop.postprocess_nodes(nodes)] == ["b", "c"]
    assert [node_url(n) for n in nodes] == [
        "HTTP://Docs.Example.com:80/a#intro",
        "http://docs.example.com/b",
        None,
    ]


@needs_llama_index
def test_render_response_lists_only_cited_sources_and_leaves_lists_alone() -> None:
    sources = [
        _node("a", url="https://a.example.com/1"),
        _node("b", url="https://b.example.com/2"),
        _node("c"),
    ]
    cited = Response("A is true [2]. C too [3].", source_nodes=sources)
    # [3]'s node has no URL: it stays unresolved, and the guard reports that marker
    assert render_response(cited) == "A is true [2]. C too [3].\n\n[2] https://b.example.com/2\n"
    own_list = Response("A [1].\n\n[1] https://x.example.com/\n", source_nodes=sources)
    assert render_response(own_list) == own_list.response
    plain = Response("No markers here.", source_nodes=sources)
    assert render_response(plain) == "No markers here."
    assert render_response(Response(None)) == ""


@needs_llama_index
def test_engine_that_cannot_filter_between_steps_is_refused() -> None:
    guard = Guard(Policy(), entailer=None)
    with pytest.raises(TypeError, match="pass a factory"):
        guard_query_engine(WholeQueryOnly(), guard)
    with pytest.raises(TypeError, match="query engine or a factory"):
        guard_query_engine(42, guard)  # type: ignore[arg-type, unused-ignore]

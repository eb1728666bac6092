"""Tracing: the span tree, kinds, attributes and parent links, with the real OpenTelemetry SDK.

Every test gets its own ``TracerProvider`` with an ``InMemorySpanExporter`` behind a
``SimpleSpanProcessor`` and hands it to ``Tracing`` / ``Guard`` by injection: nothing here sets
the global provider (library code never does either, which one test checks in a subprocess).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from citeguard import trace as cg_trace
from citeguard.models import (
    AxisResult,
    CitationReport,
    CitationStatus,
    EntailmentScore,
    Finding,
    PassageMatch,
    SearchRecord,
    SearchResult,
    Verdict,
)
from citeguard.trace import Tracing, failed_stage

REPO = Path(__file__).resolve().parents[1]
NOW = datetime(2025, 6, 1, tzinfo=UTC)


# ---------------------------------------------------------------------- fixtures and helpers


class Spans:
    """The finished spans of one provider, with tree helpers."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"expected one {name!r}, got {[s.name for s in self.all]}"
        return found[0]

    def parent_of(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        by_id = {s.context.span_id: s for s in self.all}
        return by_id.get(span.parent.span_id)

    def children(self, span: ReadableSpan, name: str | None = None) -> list[ReadableSpan]:
        sid = span.context.span_id
        return [
            s
            for s in self.all
            if s.parent is not None and s.parent.span_id == sid and (name is None or s.name == name)
        ]

    def root_of(self, span: ReadableSpan) -> ReadableSpan:
        while (p := self.parent_of(span)) is not None:
            span = p
        return span


@pytest.fixture
def spans() -> Iterator[Spans]:
    s = Spans()
    yield s
    s.provider.shutdown()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _axis(
    name: str, passed: bool, score: float | None, *findings: Finding, **kw: Any
) -> AxisResult:
    return AxisResult(name=name, passed=passed, score=score, findings=list(findings), **kw)


def _verdict(*, judge: bool = False) -> Verdict:
    bad = "http://news.example.com/gone"
    good = "http://docs.example.net/page"
    ent = EntailmentScore(
        label="supported", score=0.91, backend="judge:gpt-test" if judge else "local", reason="ok"
    )
    citations = [
        CitationReport(
            url=bad,
            normalized_url=bad,
            status=CitationStatus.NOT_FOUND,
            reason="HTTP 404 Not Found",
            http_status=404,
            elapsed_ms=12.0,
        ),
        CitationReport(
            url=good,
            normalized_url=good,
            final_url=good,
            status=CitationStatus.OK,
            reason="ok",
            http_status=200,
            title="Docs",
            passage=PassageMatch(found=True, score=100.0, how="exact", matched_text="the fact"),
            entailment=ent,
            elapsed_ms=8.0,
        ),
    ]
    return Verdict(
        passed=False,
        axes={
            "validity": _axis(
                "validity",
                False,
                0.5,
                Finding(code="not_found", message=f"{bad}: HTTP 404 Not Found", url=bad),
                offending_urls=[bad],
            ),
            "diversity": _axis("diversity", True, 1.0),
            "freshness": _axis("freshness", True, None, evaluated=False),
            "query": _axis("query", False, 2.0, gating=False),
        },
        citations=citations,
        offending_urls=frozenset({bad}),
    )


# ---------------------------------------------------------------------- the attribute names


def test_attribute_names_match_openinference_constants() -> None:
    from openinference.semconv.trace import (
        DocumentAttributes,
        EvaluationAttributes,
        OpenInferenceAnnotatorKindValues,
        OpenInferenceSpanKindValues,
        SpanAttributes,
    )

    assert cg_trace.SPAN_KIND == SpanAttributes.OPENINFERENCE_SPAN_KIND
    assert cg_trace.INPUT_VALUE == SpanAttributes.INPUT_VALUE
    assert cg_trace.INPUT_MIME_TYPE == SpanAttributes.INPUT_MIME_TYPE
    assert cg_trace.OUTPUT_VALUE == SpanAttributes.OUTPUT_VALUE
    assert cg_trace.OUTPUT_MIME_TYPE == SpanAttributes.OUTPUT_MIME_TYPE
    assert cg_trace.LLM_TOKEN_COUNT_PROMPT == SpanAttributes.LLM_TOKEN_COUNT_PROMPT
    assert cg_trace.LLM_TOKEN_COUNT_COMPLETION == SpanAttributes.LLM_TOKEN_COUNT_COMPLETION
    assert cg_trace.LLM_TOKEN_COUNT_TOTAL == SpanAttributes.LLM_TOKEN_COUNT_TOTAL
    assert cg_trace.LLM_COST_TOTAL == SpanAttributes.LLM_COST_TOTAL
    assert cg_trace.TOOL_NAME == SpanAttributes.TOOL_NAME
    assert cg_trace.RETRIEVAL_DOCUMENTS == SpanAttributes.RETRIEVAL_DOCUMENTS
    assert cg_trace.DOCUMENT_ID == DocumentAttributes.DOCUMENT_ID
    assert cg_trace.DOCUMENT_CONTENT == DocumentAttributes.DOCUMENT_CONTENT
    assert cg_trace.DOCUMENT_SCORE == DocumentAttributes.DOCUMENT_SCORE
    assert cg_trace.DOCUMENT_METADATA == DocumentAttributes.DOCUMENT_METADATA
    assert cg_trace.EVALUATIONS == SpanAttributes.EVALUATIONS
    assert cg_trace.EVALUATION_NAME == EvaluationAttributes.EVALUATION_NAME
    assert cg_trace.EVALUATION_SCORE == EvaluationAttributes.EVALUATION_SCORE
    assert cg_trace.EVALUATION_LABEL == EvaluationAttributes.EVALUATION_LABEL
    assert cg_trace.EVALUATION_EXPLANATION == EvaluationAttributes.EVALUATION_EXPLANATION
    assert cg_trace.EVALUATION_ANNOTATOR_KIND == EvaluationAttributes.EVALUATION_ANNOTATOR_KIND
    assert cg_trace.EVALUATION_METADATA == EvaluationAttributes.EVALUATION_METADATA
    kinds = {k.value for k in OpenInferenceSpanKindValues}
    assert {"GUARDRAIL", "RETRIEVER", "TOOL", "LLM", "EVALUATOR", "CHAIN"} <= kinds
    assert {"CODE", "LLM"} <= {k.value for k in OpenInferenceAnnotatorKindValues}


# ---------------------------------------------------------------------- span()


def test_span_kind_input_attributes_and_nesting(spans: Spans) -> None:
    tracing = Tracing(spans.provider)
    assert tracing.enabled
    with tracing.span("outer", kind="GUARDRAIL", input="q?", attributes={"x.n": 3}) as outer:
        assert outer is not None and outer.is_recording()
        with tracing.span("inner", kind="TOOL"):
            pass
    o, i = spans.one("outer"), spans.one("inner")
    assert attrs(o)["openinference.span.kind"] == "GUARDRAIL"
    assert attrs(o)["input.value"] == "q?"
    assert attrs(o)["x.n"] == 3
    assert attrs(i)["openinference.span.kind"] == "TOOL"
    assert spans.parent_of(i) is o
    assert o.parent is None


def test_span_records_exception_and_lets_it_propagate(spans: Spans) -> None:
    tracing = Tracing(spans.provider)
    with pytest.raises(KeyError), tracing.span("boom", kind="CHAIN"):
        raise KeyError("missing")
    s = spans.one("boom")
    assert s.status.status_code is StatusCode.ERROR
    assert "KeyError" in (s.status.description or "")
    assert [e.name for e in s.events] == ["exception"]


async def test_cancelled_block_marks_span_and_still_cancels(spans: Spans) -> None:
    tracing = Tracing(spans.provider)

    async def work() -> None:
        with tracing.span("slow", kind="CHAIN"):
            await asyncio.Event().wait()

    task = asyncio.create_task(work())
    await asyncio.sleep(0)  # let it enter the span
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    s = spans.one("slow")
    assert s.status.status_code is StatusCode.ERROR
    assert s.status.description == "cancelled"


def test_bad_attribute_values_are_dropped_not_raised(spans: Spans) -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no")

    tracing = Tracing(spans.provider)
    with tracing.span(
        "odd",
        kind="CHAIN",
        attributes={
            "bad.obj": Unprintable(),
            "bad.nan": float("nan"),
            "none": None,
            "ok.mixed": [1, "two"],
            "ok.map": {"k": 1},
            "ok.when": NOW,
            "ok.status": CitationStatus.GONE,
            "ok.ints": (1, 2),
        },
    ):
        pass
    a = attrs(spans.one("odd"))
    assert "bad.obj" not in a and "bad.nan" not in a and "none" not in a
    assert a["ok.mixed"] == ("1", "two")
    assert json.loads(a["ok.map"]) == {"k": 1}
    assert a["ok.when"] == NOW.isoformat()
    assert a["ok.status"] == "gone"
    assert a["ok.ints"] == (1, 2)


def test_broken_provider_turns_tracing_off() -> None:
    class Broken:
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("provider exploded")

    tracing = Tracing(Broken())
    assert not tracing.enabled
    with tracing.span("x", kind="CHAIN") as sp:
        assert sp is None
    tracing.record_verdict(sp, _verdict())
    tracing.citation_spans(_verdict().citations)
    with tracing.retriever_span("q") as rs:
        with rs.tool():
            pass
        rs.record(SearchRecord(query="q", results=[SearchResult(url="http://a.example.com/")]))


def test_tracer_that_fails_to_start_a_span_still_runs_the_block() -> None:
    class BadTracer:
        def start_span(self, *a: Any, **k: Any) -> Any:
            raise RuntimeError("cannot start")

    class Provider:
        def get_tracer(self, *a: Any, **k: Any) -> Any:
            return BadTracer()

    tracing = Tracing(Provider())
    ran = []
    with tracing.span("x", kind="CHAIN") as sp:
        ran.append(sp)
    tracing.citation_spans(_verdict().citations)  # swallowed per citation
    with tracing.retriever_span("q") as rs, rs.tool():
        ran.append("tool")
    assert ran == [None, "tool"]


def test_no_provider_uses_the_global_noop_and_never_sets_one(spans: Spans) -> None:
    from opentelemetry import trace

    before = trace.get_tracer_provider()
    tracing = Tracing()  # the global provider: a no-op unless the application set one
    with tracing.span("x", kind="GUARDRAIL", input="q") as sp:
        tracing.record_verdict(sp, _verdict())
        tracing.citation_spans(_verdict().citations)
    assert trace.get_tracer_provider() is before
    assert spans.all == []  # nothing leaked into a provider that was not injected


# ---------------------------------------------------------------------- verdicts


def test_record_verdict_sets_evaluations_and_axis_spans(spans: Spans) -> None:
    tracing = Tracing(spans.provider)
    with tracing.span("citeguard.check", kind="GUARDRAIL") as sp:
        tracing.record_verdict(sp, _verdict())
    check = spans.one("citeguard.check")
    a = attrs(check)
    assert a["citeguard.passed"] is False
    assert a["citeguard.failed_axes"] == ("validity",)
    assert a["citeguard.warning_axes"] == ("query",)
    assert a["citeguard.offending_urls"] == ("http://news.example.com/gone",)
    assert a["citeguard.citations.failed"] == 1
    assert a["output.value"] == "failed: validity"
    # four axes in the canonical order, as OpenInference evaluations
    names = [a[f"evaluations.{i}.evaluation.name"] for i in range(4)]
    assert names == ["validity", "diversity", "freshness", "query"]
    assert a["evaluations.0.evaluation.score"] == 0.5
    assert a["evaluations.0.evaluation.label"] == "fail"
    assert "HTTP 404" in a["evaluations.0.evaluation.explanation"]
    assert a["evaluations.0.evaluation.annotator_kind"] == "CODE"
    assert a["evaluations.1.evaluation.label"] == "pass"
    assert a["evaluations.2.evaluation.label"] == "skipped"
    assert "evaluations.2.evaluation.score" not in a  # not evaluated: no score
    assert a["evaluations.3.evaluation.label"] == "warn"  # failed, but not gating
    # one EVALUATOR child per axis
    axes = spans.children(check)
    assert sorted(s.name for s in axes) == [
        "citeguard.axis.diversity",
        "citeguard.axis.freshness",
        "citeguard.axis.query",
        "citeguard.axis.validity",
    ]
    validity = spans.one("citeguard.axis.validity")
    va = attrs(validity)
    assert va["openinference.span.kind"] == "EVALUATOR"
    assert va["citeguard.passed"] is False
    assert va["citeguard.offending_urls"] == ("http://news.example.com/gone",)
    assert va["citeguard.findings"] == (
        "not_found: http://news.example.com/gone: HTTP 404 Not Found",
    )
    assert va["evaluations.0.evaluation.name"] == "validity"


def test_judge_backend_marks_validity_as_llm_annotated(spans: Spans) -> None:
    tracing = Tracing(spans.provider)
    with tracing.span("citeguard.check", kind="GUARDRAIL") as sp:
        tracing.record_verdict(sp, _verdict(judge=True), axis_spans=False)
    a = attrs(spans.one("citeguard.check"))
    assert a["evaluations.0.evaluation.annotator_kind"] == "LLM"
    assert a["evaluations.1.evaluation.annotator_kind"] == "CODE"
    assert spans.named("citeguard.axis.validity") == []


def test_record_llm_token_counts_and_cost(spans: Spans) -> None:
    from citeguard.trace import SearchTrace  # noqa: F401  (public handle type)

    class Synth:  # the shape of citeguard.guard.Synthesis
        text = "The answer [1]."
        cost = 0.002
        input_tokens = 120
        output_tokens = 30

    tracing = Tracing(spans.provider)
    with tracing.span("citeguard.synthesize", kind="LLM", input="q") as sp:
        tracing.record_llm(sp, Synth())  # type: ignore[arg-type]
    a = attrs(spans.one("citeguard.synthesize"))
    assert a["openinference.span.kind"] == "LLM"
    assert a["output.value"] == "The answer [1]."
    assert (a["llm.token_count.prompt"], a["llm.token_count.completion"]) == (120, 30)
    assert a["llm.token_count.total"] == 150
    assert a["llm.cost.total"] == 0.002

    Synth.input_tokens = None  # type: ignore[assignment]
    Synth.output_tokens = None  # type: ignore[assignment]
    with tracing.span("no-counts", kind="LLM") as sp:
        tracing.record_llm(sp, Synth())  # type: ignore[arg-type]
    b = attrs(spans.one("no-counts"))
    assert not any(k.startswith("llm.token_count") for k in b)


# ---------------------------------------------------------------------- searches


def test_retriever_span_with_tool_child_and_documents(spans: Spans) -> None:
    tracing = Tracing(spans.provider, now=lambda: NOW)
    record = SearchRecord(
        query="eu ai act fines 2025",
        provider="tavily",
        results=[
            SearchResult(
                url="https://eur-lex.europa.eu/eli/reg/2024/1689/oj",
                title="Regulation (EU) 2024/1689",
                snippet="fines of up to 35 million",
                published=NOW - timedelta(days=10),
                rank=1,
                primary=True,
            ),
            SearchResult(
                url="https://blog.example.io/ai-act", title="A blog", rank=2, primary=False
            ),
        ],
        elapsed_ms=42.0,
    )
    with tracing.retriever_span("eu ai act fines 2025", provider="tavily") as rs:
        with rs.tool():
            pass
        rs.record(record)
    retr = spans.one("citeguard.search")
    tool = spans.one("citeguard.search.call")
    assert spans.parent_of(tool) is retr
    a = attrs(retr)
    assert a["openinference.span.kind"] == "RETRIEVER"
    assert a["input.value"] == "eu ai act fines 2025"
    assert a["citeguard.search.result_count"] == 2
    assert a["citeguard.search.from_snapshot"] is False
    assert (
        a["retrieval.documents.0.document.id"] == "https://eur-lex.europa.eu/eli/reg/2024/1689/oj"
    )
    assert a["retrieval.documents.0.document.content"] == "fines of up to 35 million"
    assert a["retrieval.documents.0.document.score"] == 1.0
    assert a["retrieval.documents.1.document.score"] == 0.5
    assert a["retrieval.documents.1.document.content"] == "A blog"
    meta0 = json.loads(a["retrieval.documents.0.document.metadata"])
    meta1 = json.loads(a["retrieval.documents.1.document.metadata"])
    assert meta0["url"] == "https://eur-lex.europa.eu/eli/reg/2024/1689/oj"
    assert meta0["recency_days"] == 10.0
    assert meta0["published"].startswith("2025-05-22")
    assert meta0["authority"] == "primary"
    assert meta1["authority"] == "secondary"
    assert meta1["recency_days"] is None
    t = attrs(tool)
    assert t["openinference.span.kind"] == "TOOL"
    assert t["tool.name"] == "tavily"
    assert t["input.value"] == "eu ai act fines 2025"


def test_retriever_span_carries_the_run_questions_freshness_regime(spans: Spans) -> None:
    from citeguard.checks.freshness import classify_freshness

    question = "What is the bitcoin price today?"
    expected = classify_freshness(question).regime
    tracing = Tracing(spans.provider)
    run = tracing.span(
        "citeguard.run",
        kind="GUARDRAIL",
        input=question,
        question=question,
        regime=str(getattr(expected, "value", expected)),
    )
    with run, tracing.retriever_span("bitcoin price") as rs:
        rs.record(SearchRecord(query="bitcoin price"))
    with tracing.retriever_span("outside any run") as rs:
        rs.record(SearchRecord(query="outside any run"))
    inside, outside = spans.named("citeguard.search")
    assert attrs(inside)["citeguard.freshness.regime"] == str(getattr(expected, "value", expected))
    assert attrs(inside)["citeguard.question"] == question
    assert "citeguard.freshness.regime" not in attrs(outside)
    # a snapshot replay never enters tool(): the span says so
    assert attrs(inside)["citeguard.search.from_snapshot"] is True


def test_failing_search_call_marks_tool_and_retriever(spans: Spans) -> None:
    tracing = Tracing(spans.provider)
    with pytest.raises(ConnectionError), tracing.retriever_span("q") as rs, rs.tool():
        raise ConnectionError("search API down")
    assert spans.one("citeguard.search.call").status.status_code is StatusCode.ERROR
    assert spans.one("citeguard.search").status.status_code is StatusCode.ERROR


# ---------------------------------------------------------------------- citations


def test_failed_stage_mapping() -> None:
    assert failed_stage(CitationStatus.OK) is None
    assert failed_stage(CitationStatus.NOT_FOUND) == "fetch"
    assert failed_stage(CitationStatus.TIMEOUT) == "fetch"
    assert failed_stage(CitationStatus.BLOCKED_ADDRESS) == "fetch"
    assert failed_stage(CitationStatus.UNSUPPORTED_TYPE) == "extract"
    assert failed_stage(CitationStatus.PASSAGE_ALTERED) == "passage"
    assert failed_stage(CitationStatus.NOT_ENTAILED) == "entailment"
    assert failed_stage(CitationStatus.EXCLUDED_BY_POLICY) == "policy"
    assert failed_stage(CitationStatus.MALFORMED_URL) == "parse"


def test_citation_spans_per_stage_with_status_and_reason(spans: Spans) -> None:
    tracing = Tracing(spans.provider)
    extra = [
        CitationReport(
            url="http://a.example.com/x",
            normalized_url="http://a.example.com/x",
            status=CitationStatus.NOT_ENTAILED,
            reason="the passage does not support the claim",
            http_status=200,
            passage=PassageMatch(found=True, score=97.0, how="fuzzy"),
            entailment=EntailmentScore(label="not_supported", score=0.1, backend="local"),
            elapsed_ms=5.0,
        ),
        CitationReport(
            url="http://b.example.com/old",
            normalized_url="http://b.example.com/old",
            status=CitationStatus.EXCLUDED_BY_POLICY,
            reason="excluded after an earlier attempt",
        ),
    ]
    with tracing.span("citeguard.check", kind="GUARDRAIL"):
        with tracing.span("citeguard.fetch", kind="TOOL") as fetch_span:
            pass
        tracing.citation_spans([*_verdict().citations, *extra], fetch_span=fetch_span)
    check = spans.one("citeguard.check")
    fetch_phase = spans.one("citeguard.fetch")
    cits = {attrs(s)["citeguard.url"]: s for s in spans.named("citeguard.citation")}
    assert len(cits) == 4
    assert all(spans.parent_of(s) is check for s in cits.values())

    gone = cits["http://news.example.com/gone"]
    g = attrs(gone)
    assert g["openinference.span.kind"] == "EVALUATOR"
    assert g["citeguard.status"] == "not_found"
    assert g["citeguard.reason"] == "HTTP 404 Not Found"
    assert g["citeguard.failed_stage"] == "fetch"
    assert g["citeguard.http_status"] == 404
    assert g["evaluations.0.evaluation.label"] == "not_found"
    assert gone.status.status_code is StatusCode.ERROR
    assert [s.name for s in spans.children(gone)] == ["citeguard.citation.fetch"]
    gf = spans.children(gone)[0]
    assert gf.status.status_code is StatusCode.ERROR
    assert attrs(gf)["citeguard.http_status"] == 404
    assert attrs(gf)["openinference.span.kind"] == "TOOL"
    # the fetch stage is placed at the fetch phase's start and lasts the measured time
    assert gf.start_time == fetch_phase.start_time
    assert gf.end_time is not None and gf.start_time is not None
    assert gf.end_time - gf.start_time <= 12_000_000

    ok = cits["http://docs.example.net/page"]
    assert ok.status.status_code is StatusCode.UNSET
    stages = sorted(s.name for s in spans.children(ok))
    assert stages == [
        "citeguard.citation.entailment",
        "citeguard.citation.extract",
        "citeguard.citation.fetch",
        "citeguard.citation.passage",
    ]
    assert all(s.status.status_code is StatusCode.UNSET for s in spans.children(ok))
    (passage,) = spans.children(ok, "citeguard.citation.passage")
    assert attrs(passage)["citeguard.passage.how"] == "exact"
    assert attrs(passage)["evaluations.0.evaluation.score"] == 1.0

    unsup = cits["http://a.example.com/x"]
    (ent,) = spans.children(unsup, "citeguard.citation.entailment")
    assert ent.status.status_code is StatusCode.ERROR
    assert attrs(ent)["citeguard.entailment.label"] == "not_supported"
    (fetch,) = spans.children(unsup, "citeguard.citation.fetch")
    assert fetch.status.status_code is StatusCode.UNSET  # the fetch itself was fine
    assert attrs(fetch)["citeguard.status"] == "ok"

    excluded = cits["http://b.example.com/old"]
    assert spans.children(excluded) == []  # never fetched
    assert attrs(excluded)["citeguard.failed_stage"] == "policy"


# ---------------------------------------------------------------------- concurrency


async def test_concurrent_runs_make_separate_trees(spans: Spans) -> None:
    tracing = Tracing(spans.provider)

    async def run(name: str) -> None:
        with tracing.span(f"run-{name}", kind="GUARDRAIL", question=name):
            await asyncio.sleep(0)
            with tracing.retriever_span(f"query-{name}") as rs:
                await asyncio.sleep(0)
                with rs.tool():
                    await asyncio.sleep(0)
                rs.record(SearchRecord(query=f"query-{name}"))
            with tracing.span(f"check-{name}", kind="GUARDRAIL") as sp:
                await asyncio.sleep(0)
                tracing.citation_spans(_verdict().citations)
                tracing.record_verdict(sp, _verdict())

    await asyncio.gather(run("a"), run("b"))
    roots = [s for s in spans.all if s.parent is None]
    assert sorted(s.name for s in roots) == ["run-a", "run-b"]
    assert roots[0].context.trace_id != roots[1].context.trace_id
    for s in spans.all:
        root = spans.root_of(s)
        tag = root.name.removeprefix("run-")
        assert s.context.trace_id == root.context.trace_id
        if s.name.startswith(("check-", "run-")):
            assert s.name.endswith(tag)
        if s.name == "citeguard.search":
            assert attrs(s)["input.value"] == f"query-{tag}"
            assert attrs(s)["citeguard.question"] == tag
    assert len(spans.named("citeguard.citation")) == 4
    assert len(spans.named("citeguard.axis.validity")) == 2


# ---------------------------------------------------------------------- without OpenTelemetry

_BLOCKER = """
import importlib.abc, sys

class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("opentelemetry", "openinference"):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None

sys.meta_path.insert(0, _Block())
"""


def _run_python(code: str, *, block_otel: bool) -> subprocess.CompletedProcess[str]:
    prelude = _BLOCKER if block_otel else ""
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


_UNIT_SCRIPT = """
import asyncio
from citeguard.models import SearchRecord, SearchResult, CitationReport, CitationStatus
from citeguard.trace import Tracing

try:
    import opentelemetry  # noqa: F401
    have = True
except ImportError:
    have = False
print("otel importable:", have)

tracing = Tracing()
print("enabled:", tracing.enabled)
cit = CitationReport(url="http://a/x", normalized_url="http://a/x",
                     status=CitationStatus.NOT_FOUND, reason="404")

async def main():
    with tracing.span("citeguard.run", kind="GUARDRAIL", input="q", question="q") as sp:
        assert (sp is None) == (not have)
        with tracing.retriever_span("query", provider="p") as rs:
            with rs.tool():
                await asyncio.sleep(0)
            rs.record(SearchRecord(query="query", results=[SearchResult(url="http://a/x")]))
        tracing.citation_spans([cit], fetch_span=sp)
    try:
        with tracing.span("err", kind="CHAIN"):
            raise ValueError("still raised")
    except ValueError:
        pass
    else:
        raise SystemExit("exception swallowed")

asyncio.run(main())
if have:
    from opentelemetry import trace
    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider", "provider set!"
print("OK")
"""


@pytest.mark.parametrize("block", [True, False], ids=["otel-missing", "otel-present"])
def test_tracing_is_a_noop_without_opentelemetry(block: bool) -> None:
    proc = _run_python(_UNIT_SCRIPT, block_otel=block)
    assert proc.returncode == 0, proc.stderr
    assert f"otel importable: {not block}" in proc.stdout
    assert f"enabled: {not block}" in proc.stdout
    assert proc.stdout.strip().endswith("OK")


# ---------------------------------------------------------------------- end to end, with a Guard

_QUESTION = "How much faster is the Helix 5.0 query planner?"
_SENTENCE = (
    "Helix 5.0 ships a rewritten query planner that runs analytical queries up to 40 percent faster"
)
_PAGE = f"""<html><head><title>Helix 5.0 released</title>
<meta property="article:published_time" content="2025-05-20T10:00:00Z"></head>
<body><article><p>{_SENTENCE}.</p></article></body></html>"""


def _guard(farm: Any, provider: Any) -> Any:
    from citeguard.guard import Guard
    from citeguard.policy import Policy

    return Guard(
        # these trees follow a regenerated run: repair (which would re-cite the searched page
        # without a second call) is off; tests/test_repair.py covers its span
        Policy.for_tests().replace(repair="off"),
        resolver=farm.resolver,
        entailer=None,
        tracer_provider=provider,
        now=lambda: NOW,
    )


def _agent(guard: Any, good: str, bad: str, query: str) -> Any:
    async def search(query: str) -> dict[str, Any]:
        return {
            "results": [
                {"url": bad, "title": "Helix notes"},
                {"url": good, "title": "Helix 5.0 released", "published_date": "2025-05-20"},
            ]
        }

    wrapped = guard.wrap_search(search, provider="testsearch")

    async def answer(
        question: str, *, exclude_urls: frozenset[str] = frozenset(), feedback: Any = None
    ) -> str:
        await wrapped(query)
        url = good if exclude_urls else bad  # cites the dead page until told not to
        return f"{_SENTENCE} [1].\n\n[1] {url}\n"

    return guard.wrap(answer)


async def test_guarded_run_with_two_attempts_is_debuggable_from_spans(
    spans: Spans, farm: Any
) -> None:
    good = farm.add("news.example.com", "/helix-5", body=_PAGE)
    bad = farm.url("a.example.com", "/status/404")
    async with _guard(farm, spans.provider) as guard:
        result = await _agent(guard, good, bad, "helix 5.0 query planner speed")(_QUESTION)
    assert result.passed and len(result.attempts) == 2  # the scenario itself

    run = spans.one("citeguard.run")
    _the_run_span_says_what_happened(spans, run, result)
    checks = _each_attempt_says_what_was_asked(spans, run, result, good=good, bad=bad)
    _the_first_check_says_which_url_failed_and_why(spans, checks[0], bad)
    _the_second_check_shows_every_stage_of_the_good_page(spans, checks[1], good)


def _the_run_span_says_what_happened(spans: Spans, run: Any, result: Any) -> None:
    assert run.parent is None
    assert {s.context.trace_id for s in spans.all} == {run.context.trace_id}
    r = attrs(run)
    assert r["openinference.span.kind"] == "GUARDRAIL"
    assert r["input.value"] == _QUESTION
    assert r["output.value"] == result.answer
    assert r["citeguard.passed"] is True
    assert r["citeguard.outcome"] == "passed"
    assert r["citeguard.attempts"] == 2
    assert r["evaluations.0.evaluation.name"] == "validity"
    assert r["evaluations.0.evaluation.label"] == "pass"
    assert spans.children(run, "citeguard.axis.validity") == []  # per-attempt, not repeated


def _each_attempt_says_what_was_asked(
    spans: Spans, run: Any, result: Any, *, good: str, bad: str
) -> list[Any]:
    """The synthesis spans (which URL each attempt was told to avoid, the feedback, the query
    sent); returns the attempts' check spans in order."""
    synths = sorted(spans.children(run, "citeguard.synthesize"), key=lambda s: s.start_time or 0)
    checks = sorted(spans.children(run, "citeguard.check"), key=lambda s: s.start_time or 0)
    assert [attrs(s)["citeguard.attempt"] for s in synths] == [1, 2]
    assert len(checks) == 2
    # which URL the second attempt was told to avoid, and the feedback it got
    assert attrs(synths[0])["citeguard.excluded_urls"] == ()
    assert attrs(synths[1])["citeguard.excluded_urls"] == (bad,)
    assert bad in attrs(synths[1])["citeguard.feedback"]
    assert "citeguard.feedback" not in attrs(synths[0])
    assert attrs(synths[1])["output.value"] == result.answer
    assert attrs(synths[1])["openinference.span.kind"] == "LLM"

    # which query was sent: a RETRIEVER span under each synthesis, the wire call beneath it
    for synth in synths:
        (search,) = spans.children(synth, "citeguard.search")
        a = attrs(search)
        assert a["openinference.span.kind"] == "RETRIEVER"
        assert a["input.value"] == "helix 5.0 query planner speed"
        assert a["citeguard.question"] == _QUESTION
        assert a["citeguard.freshness.regime"] in {"real_time", "fast", "slow", "insensitive"}
        assert a["retrieval.documents.0.document.id"] == bad
        assert a["retrieval.documents.1.document.id"] == good
        meta = json.loads(a["retrieval.documents.1.document.metadata"])
        assert meta["recency_days"] == pytest.approx(12.0)
        assert meta["authority"] in {"primary", "secondary"}
        (call,) = spans.children(search, "citeguard.search.call")
        assert attrs(call)["openinference.span.kind"] == "TOOL"
        assert attrs(call)["tool.name"] == "testsearch"
    return checks


def _the_first_check_says_which_url_failed_and_why(spans: Spans, first: Any, bad: str) -> None:
    # attempt 1: which URL failed, why, and which axis dropped
    f = attrs(first)
    assert f["citeguard.passed"] is False
    assert f["citeguard.failed_axes"] == ("validity",)
    assert f["citeguard.offending_urls"] == (bad,)
    (cit,) = spans.children(first, "citeguard.citation")
    c = attrs(cit)
    assert c["citeguard.url"] == bad
    assert c["citeguard.status"] == "not_found"
    assert c["citeguard.http_status"] == 404
    assert "404" in c["citeguard.reason"]
    assert c["citeguard.failed_stage"] == "fetch"
    assert cit.status.status_code is StatusCode.ERROR
    (fetch,) = spans.children(cit, "citeguard.citation.fetch")
    assert fetch.status.status_code is StatusCode.ERROR
    assert attrs(fetch)["citeguard.http_status"] == 404
    (validity,) = spans.children(first, "citeguard.axis.validity")
    v = attrs(validity)
    assert v["citeguard.passed"] is False
    assert v["evaluations.0.evaluation.label"] == "fail"
    assert v["evaluations.0.evaluation.annotator_kind"] == "CODE"
    assert bad in v["evaluations.0.evaluation.explanation"]
    assert len(spans.children(first, "citeguard.fetch")) == 1


def _the_second_check_shows_every_stage_of_the_good_page(
    spans: Spans, second: Any, good: str
) -> None:
    # attempt 2 passes: the good page went through fetch, extract and passage
    assert attrs(second)["citeguard.passed"] is True
    (cit2,) = spans.children(second, "citeguard.citation")
    assert attrs(cit2)["citeguard.url"] == good
    assert attrs(cit2)["citeguard.status"] == "ok"
    assert sorted(s.name for s in spans.children(cit2)) == [
        "citeguard.citation.entailment",
        "citeguard.citation.extract",
        "citeguard.citation.fetch",
        "citeguard.citation.passage",
    ]
    # the claim copies the page word for word: settled without a model, and the span says so
    (ent,) = spans.children(cit2, "citeguard.citation.entailment")
    assert attrs(ent)["citeguard.entailment.backend"] == "verbatim"
    assert attrs(spans.children(cit2, "citeguard.citation.extract")[0])["citeguard.title"] == (
        "Helix 5.0 released"
    )
    labels = {
        s.name.removeprefix("citeguard.axis."): attrs(s)["evaluations.0.evaluation.label"]
        for s in spans.children(second)
        if s.name.startswith("citeguard.axis.")
    }
    assert set(labels) == {"validity", "diversity", "freshness", "query"}
    assert labels["validity"] == "pass"


async def test_concurrent_guarded_runs_have_separate_trees(spans: Spans, farm: Any) -> None:
    good = farm.add("news.example.com", "/helix-5", body=_PAGE)
    bad = farm.url("a.example.com", "/status/404")
    async with _guard(farm, spans.provider) as guard:
        results = await asyncio.gather(
            _agent(guard, good, bad, "query for run A")(_QUESTION + " (A)"),
            _agent(guard, good, bad, "query for run B")(_QUESTION + " (B)"),
        )
    assert all(r.passed for r in results)
    runs = spans.named("citeguard.run")
    assert len(runs) == 2
    assert len({s.context.trace_id for s in runs}) == 2
    for run in runs:
        tag = attrs(run)["input.value"][-2]  # "A" or "B"
        tree = [s for s in spans.all if s.context.trace_id == run.context.trace_id]
        searches = [s for s in tree if s.name == "citeguard.search"]
        assert len(searches) == 2
        assert {attrs(s)["input.value"] for s in searches} == {f"query for run {tag}"}
        assert all(attrs(s)["citeguard.question"] == attrs(run)["input.value"] for s in searches)
        assert len([s for s in tree if s.name == "citeguard.check"]) == 2
        assert all(spans.root_of(s) is run for s in tree)
    assert len(spans.all) == 2 * len(
        [s for s in spans.all if s.context.trace_id == runs[0].context.trace_id]
    )


_GUARD_SCRIPT = """
import asyncio, socket
from aiohttp import web
from citeguard.guard import Guard
from citeguard.policy import Policy

PAGE = b"<html><body><p>The sky over Paris was blue on Monday.</p></body></html>"

async def main():
    async def page(request):
        return web.Response(body=PAGE, content_type="text/html")
    app = web.Application()
    app.router.add_get("/page", page)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        async with Guard(Policy.for_tests(), entailer=None) as guard:
            async def search(query):
                return [{"url": base + "/page", "title": "Paris"}]
            wrapped = guard.wrap_search(search)
            async def answer(question, *, exclude_urls=frozenset()):
                await wrapped("paris sky monday")
                url = base + "/page" if exclude_urls else base + "/missing"
                return f"The sky over Paris was blue on Monday [1].\\n\\n[1] {url}\\n"
            result = await guard.wrap(answer)("What colour was the sky over Paris on Monday?")
            print("attempts:", len(result.attempts))
            print("first:", result.attempts[0].verdict.citations[0].status.value)
            print("passed:", result.passed)
    finally:
        await runner.cleanup()

asyncio.run(main())
"""


@pytest.mark.parametrize("block", [True, False], ids=["otel-missing", "otel-present"])
def test_guarded_run_without_opentelemetry(block: bool) -> None:
    proc = _run_python(_GUARD_SCRIPT, block_otel=block)
    assert proc.returncode == 0, proc.stderr
    assert "attempts: 2" in proc.stdout
    assert "first: not_found" in proc.stdout
    assert "passed: True" in proc.stdout

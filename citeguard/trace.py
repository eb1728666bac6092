"""Tracing: OpenTelemetry spans named with OpenInference conventions.

A bad answer must be debuggable without reading logs. One guarded run becomes one span tree::

    citeguard.run                GUARDRAIL  question in, final answer out, the four axis scores
    ├── citeguard.synthesize     LLM        attempt number, excluded URLs, feedback, token counts
    │   └── citeguard.search     RETRIEVER  the literal query; one document per search result
    │       └── citeguard.search.call  TOOL the wire call to the search API (its own latency)
    ├── citeguard.check          GUARDRAIL  the verdict on that attempt
    │   ├── citeguard.fetch      TOOL       all cited URLs, concurrently
    │   ├── citeguard.extract    TOOL       body → page text, off the event loop
    │   ├── citeguard.citation   EVALUATOR  one per cited URL: status and reason
    │   │   ├── citeguard.citation.fetch       TOOL       HTTP status, redirects, final URL
    │   │   ├── citeguard.citation.extract     CHAIN      title and dates
    │   │   ├── citeguard.citation.passage     EVALUATOR  quote / paraphrase found?
    │   │   └── citeguard.citation.entailment  EVALUATOR  does the passage back the claim?
    │   ├── citeguard.judge      LLM        one per LLM-judge request: model, tokens, cost
    │   └── citeguard.axis.<name> EVALUATOR one per axis: pass/fail, score, findings
    └── ... the next attempt

Only the OpenTelemetry *API* is used. Spans go to the ``tracer_provider`` given to
:class:`Tracing` (and so to ``Guard(tracer_provider=...)``), otherwise to the global provider,
which is a no-op until the application configures one. Library code never calls
``trace.set_tracer_provider``. The OpenTelemetry packages are the optional ``otel`` extra: without
them every method here is a cheap no-op.

Tracing never fails a check: every attribute is set under ``try``, a value OpenTelemetry cannot
carry is converted or dropped, and exceptions raised inside a span are recorded on it and then
propagate unchanged.

Attribute names are OpenInference's (``openinference-semantic-conventions``); they are written
out as strings here so the semantic-conventions package is not needed at run time, and a test
pins them to the package's constants. citeguard's own attributes are prefixed ``citeguard.``.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from enum import Enum
from types import TracebackType
from typing import Any, Literal, NamedTuple

try:
    from opentelemetry import context as _otel_context
    from opentelemetry import trace as _otel_trace
    from opentelemetry.trace import SpanKind as _SpanKind
    from opentelemetry.trace import Status as _Status
    from opentelemetry.trace import StatusCode as _StatusCode
except ImportError:  # the `otel` extra is not installed: every method below is a no-op
    _OTEL = False
else:
    _OTEL = True

from citeguard.models import (
    AXES,
    AxisResult,
    CitationReport,
    CitationStage,
    CitationStatus,
    GuardResult,
    SearchRecord,
    SearchResult,
    Synthesis,
    Verdict,
)

SpanKindName = Literal["GUARDRAIL", "RETRIEVER", "TOOL", "LLM", "EVALUATOR", "CHAIN"]

# ---- OpenInference attribute names (pinned to openinference.semconv.trace by tests/test_trace.py)
SPAN_KIND = "openinference.span.kind"
INPUT_VALUE = "input.value"
INPUT_MIME_TYPE = "input.mime_type"
OUTPUT_VALUE = "output.value"
OUTPUT_MIME_TYPE = "output.mime_type"
LLM_TOKEN_COUNT_PROMPT = "llm.token_count.prompt"
LLM_TOKEN_COUNT_COMPLETION = "llm.token_count.completion"
LLM_TOKEN_COUNT_TOTAL = "llm.token_count.total"
LLM_COST_TOTAL = "llm.cost.total"
TOOL_NAME = "tool.name"
RETRIEVAL_DOCUMENTS = "retrieval.documents"
DOCUMENT_ID = "document.id"
DOCUMENT_CONTENT = "document.content"
DOCUMENT_SCORE = "document.score"
DOCUMENT_METADATA = "document.metadata"
EVALUATIONS = "evaluations"
EVALUATION_NAME = "evaluation.name"
EVALUATION_SCORE = "evaluation.score"
EVALUATION_LABEL = "evaluation.label"
EVALUATION_EXPLANATION = "evaluation.explanation"
EVALUATION_ANNOTATOR_KIND = "evaluation.annotator_kind"
EVALUATION_METADATA = "evaluation.metadata"
MIME_JSON = "application/json"
MIME_TEXT = "text/plain"

_SCOPE = "citeguard"
_MAX_TEXT = 16_000  # longer strings are cut: an answer or a page passage, not a whole page
_MAX_EXPLANATION = 2_000


class _Run(NamedTuple):
    """The guarded run in progress, as its caller described it: its question and, when known,
    the question's freshness regime."""

    question: str | None
    regime: str | None


# The guarded run in progress, so a search the agent makes while answering it can carry the
# run's question and regime. A ContextVar: concurrent runs each see their own.
_RUN: ContextVar[_Run | None] = ContextVar("citeguard_trace_run", default=None)


def failed_stage(status: CitationStatus) -> CitationStage | None:
    """The pipeline stage at which a citation with this status failed (None when it passed):
    :attr:`CitationStatus.stage`."""
    return status.stage


class Tracing:
    """Emit citeguard's spans through the OpenTelemetry API.

    ``tracer_provider``: an OpenTelemetry ``TracerProvider``; ``None`` uses the global one (a
    no-op unless the application set one). ``now``: the clock used for source recency in search
    spans. The tracer only observes: source kinds, regimes and statuses are read from what the
    stages produced (:class:`CitationReport`, :class:`Verdict`, :class:`SearchResult`, the
    caller's arguments), never worked out again here. Holds no per-run state, so one instance
    serves concurrent runs: parent links follow the OpenTelemetry context, which every asyncio
    task carries on its own.
    """

    def __init__(
        self, tracer_provider: Any = None, *, now: Callable[[], datetime] | None = None
    ) -> None:
        self._now = now or _utcnow
        self._tracer: Any = None
        if not _OTEL:
            return
        try:
            if tracer_provider is not None:
                self._tracer = tracer_provider.get_tracer(_SCOPE, _version())
            else:
                self._tracer = _otel_trace.get_tracer(_SCOPE, _version())
        except Exception:  # a broken provider must not break the guard
            self._tracer = None

    @property
    def enabled(self) -> bool:
        """True when OpenTelemetry is importable and a tracer was obtained (spans may still be
        no-ops when no provider is configured)."""
        return self._tracer is not None

    # ------------------------------------------------------------------ generic spans

    def span(
        self,
        name: str,
        *,
        kind: SpanKindName,
        input: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        question: str | None = None,
        regime: str | None = None,
    ) -> AbstractContextManager[Any]:
        """A span around a block, made current for the block; yields the span (``None`` when
        tracing is off). An exception leaving the block is recorded and sets ERROR status.

        ``question``: the user question of a guarded run, and ``regime`` its freshness regime
        when the caller knows it already; searches made inside the block record both.
        """
        if self._tracer is None:
            return nullcontext(None)
        run = _Run(question, regime) if question is not None or regime is not None else None
        return _SpanScope(self._tracer, name, kind, input=input, attributes=attributes, run=run)

    # ------------------------------------------------------------------ verdicts

    def record_verdict(
        self,
        span: Any,
        verdict: Verdict,
        *,
        output: str | None = None,
        axis_spans: bool = True,
    ) -> None:
        """Attach a verdict to a GUARDRAIL span: pass/fail, the failing axes, the offending URLs
        and the four axes as OpenInference evaluations. ``axis_spans`` also emits one EVALUATOR
        child span per axis, so the tree shows which axis dropped and why."""
        if not _is_recording(span):
            return
        try:
            _set_all(span, _verdict_attributes(verdict, output))
            if axis_spans:
                parent = _otel_trace.set_span_in_context(span)
                for axis in _ordered_axes(verdict):
                    self._axis_span(parent, axis, verdict)
        except Exception:  # tracing never fails a check
            return

    def record_result(self, span: Any, result: GuardResult) -> None:
        """Attach a guarded run's outcome to its root span: the final verdict (without repeating
        the per-axis spans each check already has), the outcome, and the number of attempts."""
        if not _is_recording(span):
            return
        self.record_verdict(span, result.verdict, output=result.answer, axis_spans=False)
        _set_all(
            span,
            {
                "citeguard.outcome": result.outcome,
                "citeguard.attempts": len(result.attempts),
                "citeguard.message": result.message,
                "citeguard.excluded_urls": sorted(
                    {u for a in result.attempts for u in a.excluded_urls}
                ),
            },
        )

    def _axis_span(self, parent: Any, axis: AxisResult, verdict: Verdict) -> None:
        attrs: dict[str, Any] = {
            SPAN_KIND: "EVALUATOR",
            "citeguard.axis": axis.name,
            "citeguard.passed": axis.passed,
            "citeguard.gating": axis.gating,
            "citeguard.evaluated": axis.evaluated,
            "citeguard.score": axis.score,
            "citeguard.findings": [f"{f.code}: {f.message}" for f in axis.findings],
            "citeguard.offending_urls": list(axis.offending_urls),
            "citeguard.details": _json(axis.details) if axis.details else None,
            OUTPUT_VALUE: f"{_axis_label(axis)}: {_axis_explanation(axis)}".rstrip(": "),
        }
        attrs.update(_evaluation(0, _axis_eval(axis, verdict)))
        sp = self._tracer.start_span(f"citeguard.axis.{axis.name}", context=parent)
        try:
            _set_all(sp, attrs)
        finally:
            sp.end()

    # ------------------------------------------------------------------ synthesis

    def record_llm(self, span: Any, synthesis: Synthesis) -> None:
        """Attach what an answer function returned to its LLM span: the text, and the token
        counts and cost when the caller reported them."""
        if not _is_recording(span):
            return
        prompt, completion = synthesis.input_tokens, synthesis.output_tokens
        total = (prompt or 0) + (completion or 0) if (prompt, completion) != (None, None) else None
        _set_all(
            span,
            {
                OUTPUT_VALUE: _text(synthesis.text),
                OUTPUT_MIME_TYPE: MIME_TEXT,
                LLM_TOKEN_COUNT_PROMPT: prompt,
                LLM_TOKEN_COUNT_COMPLETION: completion,
                LLM_TOKEN_COUNT_TOTAL: total,
                # Synthesis.cost is in the caller's unit; OpenInference reads llm.cost.* as USD
                LLM_COST_TOTAL: synthesis.cost,
                "citeguard.cost": synthesis.cost,
            },
        )

    # ------------------------------------------------------------------ searches

    @contextmanager
    def retriever_span(
        self, query: str, *, provider: str | None = None, regime: str | None = None
    ) -> Iterator[SearchTrace]:
        """A RETRIEVER span around one search call. Use the yielded handle's ``tool()`` around
        the wire call (a TOOL child, so its latency lands on its own node) and ``record()`` with
        the :class:`SearchRecord` once the results are in.

        ``regime``: the freshness regime of the question being answered, as the caller knows
        it; ``None`` takes the enclosing run's (see :meth:`span`), if it gave one.
        """
        provider = provider or "search"
        if self._tracer is None:
            yield SearchTrace(None, None, query, provider)
            return
        with self.span(
            "citeguard.search",
            kind="RETRIEVER",
            input=query,
            attributes={"citeguard.search.provider": provider},
        ) as sp:
            handle = SearchTrace(self, sp, query, provider)
            handle._set_run(_RUN.get(), regime)
            yield handle

    # ------------------------------------------------------------------ citations

    def citation_spans(
        self, citations: Sequence[CitationReport], *, fetch_span: Any = None
    ) -> None:
        """One EVALUATOR span per cited URL, under the current span (the check), with a child
        per stage it went through: fetch, extract, passage, entailment.

        The stages ran earlier, concurrently and batched, so these spans are written after the
        fact with explicit times: the fetch stage starts when ``fetch_span`` (the fetch phase)
        started and lasts the URL's measured ``elapsed_ms``; stages citeguard does not time per
        URL (extract, passage, entailment) are instants at the time of recording.
        """
        if self._tracer is None or not citations:
            return
        try:
            parent_ctx = _otel_context.get_current()
            now = time.time_ns()
            anchor = _start_ns(fetch_span) or _start_ns(_otel_trace.get_current_span()) or now
            anchor = min(anchor, now)
        except Exception:
            return
        for c in citations:
            try:
                self._citation_span(parent_ctx, c, anchor, now)
            except Exception:  # one unrecordable citation must not hide the others
                continue

    def _citation_span(self, parent_ctx: Any, c: CitationReport, anchor: int, now: int) -> None:
        stage = c.status.stage
        sp = self._tracer.start_span("citeguard.citation", context=parent_ctx, start_time=anchor)
        try:
            if not sp.is_recording():
                return
            llm_judged = _is_llm_backend(c.entailment.backend if c.entailment else None)
            attrs: dict[str, Any] = {
                SPAN_KIND: "EVALUATOR",
                INPUT_VALUE: c.url,
                OUTPUT_VALUE: f"{c.status.value}: {c.reason}",
                "citeguard.url": c.url,
                "citeguard.normalized_url": c.normalized_url,
                "citeguard.final_url": c.final_url,
                "citeguard.domain": c.domain,
                "citeguard.status": c.status.value,
                "citeguard.outcome": c.outcome.value,
                "citeguard.reason": c.reason,
                "citeguard.failed_stage": stage,
                # "uncertain": passed with a claim's support unsettled (a warning finding)
                "citeguard.support": c.support,
                "citeguard.http_status": c.http_status,
                "citeguard.redirects": list(c.redirects),
                "citeguard.claim_indices": list(c.claim_indices),
                "citeguard.primary": c.primary,
                "citeguard.source_kind": c.source_kind,
                "citeguard.title": c.title,
                "citeguard.published": c.published,
                "citeguard.modified": c.modified,
                "citeguard.text_fragment_url": c.text_fragment_url,
                "citeguard.elapsed_ms": c.elapsed_ms,
                # "url": the URL itself failed; "pair": a claim citing it did (FailureKind)
                "citeguard.failure": c.failure,
                # not fetched again: its status is its failure in an earlier attempt
                "citeguard.excluded": c.excluded,
            }
            attrs.update(
                _evaluation(
                    0,
                    {
                        EVALUATION_NAME: "citation",
                        EVALUATION_SCORE: 1.0 if c.status.is_ok() else 0.0,
                        EVALUATION_LABEL: c.status.value,
                        EVALUATION_EXPLANATION: c.reason,
                        EVALUATION_ANNOTATOR_KIND: "LLM" if llm_judged else "CODE",
                    },
                )
            )
            _set_all(sp, attrs)
            ctx = _otel_trace.set_span_in_context(sp, parent_ctx)
            # a URL that failed to parse, or that this attempt excluded, was not fetched
            excluded = c.excluded or c.status is CitationStatus.EXCLUDED_BY_POLICY
            if stage != "parse" and not excluded:
                fetch_end = min(anchor + int(max(c.elapsed_ms, 0.0) * 1e6), now)
                self._fetch_stage(ctx, c, stage == "fetch", anchor, fetch_end)
            page_seen = any(
                v is not None for v in (c.title, c.published, c.modified, c.passage, c.entailment)
            )
            if stage == "extract" or page_seen:
                self._stage(
                    ctx,
                    "extract",
                    "CHAIN",
                    now,
                    failed=stage == "extract",
                    c=c,
                    attrs={
                        "citeguard.title": c.title,
                        "citeguard.published": c.published,
                        "citeguard.modified": c.modified,
                    },
                )
            if c.passage is not None:
                p = c.passage
                label = "altered" if p.altered else (p.how if p.found else "missing")
                self._stage(
                    ctx,
                    "passage",
                    "EVALUATOR",
                    now,
                    failed=stage == "passage",
                    c=c,
                    attrs={
                        OUTPUT_VALUE: _text(p.matched_text) if p.matched_text else p.reason,
                        "citeguard.passage.found": p.found,
                        "citeguard.passage.score": p.score,
                        "citeguard.passage.how": p.how,
                        "citeguard.passage.altered": p.altered,
                        "citeguard.passage.differing_tokens": list(p.differing_tokens),
                        "citeguard.passage.in_main_text": p.in_main_text,
                        "citeguard.passage.reason": p.reason,
                        **_evaluation(
                            0,
                            {
                                EVALUATION_NAME: "passage",
                                EVALUATION_SCORE: p.score / 100.0,
                                EVALUATION_LABEL: label,
                                EVALUATION_EXPLANATION: p.reason,
                                EVALUATION_ANNOTATOR_KIND: "CODE",
                            },
                        ),
                    },
                )
            if c.entailment is not None:
                e = c.entailment
                self._stage(
                    ctx,
                    "entailment",
                    "EVALUATOR",
                    now,
                    failed=stage == "entailment",
                    c=c,
                    attrs={
                        OUTPUT_VALUE: e.label,
                        "citeguard.entailment.label": e.label,
                        "citeguard.entailment.score": e.score,
                        "citeguard.entailment.backend": e.backend,
                        "citeguard.entailment.probabilities": _json(e.probabilities)
                        if e.probabilities
                        else None,
                        "citeguard.entailment.evidence": _text(e.evidence) if e.evidence else None,
                        "citeguard.entailment.reason": e.reason,
                        **_evaluation(
                            0,
                            {
                                EVALUATION_NAME: "entailment",
                                EVALUATION_SCORE: e.score,
                                EVALUATION_LABEL: e.label,
                                EVALUATION_EXPLANATION: e.reason,
                                EVALUATION_ANNOTATOR_KIND: "LLM" if llm_judged else "CODE",
                            },
                        ),
                    },
                )
            if not c.status.is_ok():
                _error(sp, f"{c.status.value}: {c.reason}")
        finally:
            sp.end(end_time=now)

    def _fetch_stage(self, ctx: Any, c: CitationReport, failed: bool, start: int, end: int) -> None:
        sp = self._tracer.start_span(
            "citeguard.citation.fetch", context=ctx, kind=_SpanKind.CLIENT, start_time=start
        )
        try:
            if failed:
                status, reason = c.status.value, c.reason
            else:
                status = "ok"
                reason = f"resolved (HTTP {c.http_status})" if c.http_status else "resolved"
            _set_all(
                sp,
                {
                    SPAN_KIND: "TOOL",
                    TOOL_NAME: "http",
                    INPUT_VALUE: c.url,
                    OUTPUT_VALUE: f"{status}: {reason}",
                    "citeguard.url": c.url,
                    "citeguard.final_url": c.final_url,
                    "citeguard.http_status": c.http_status,
                    "citeguard.redirects": list(c.redirects),
                    "citeguard.status": status,
                    "citeguard.reason": reason,
                    "citeguard.elapsed_ms": c.elapsed_ms,
                },
            )
            if failed:
                _error(sp, f"{status}: {reason}")
        finally:
            sp.end(end_time=end)

    def _stage(
        self,
        ctx: Any,
        stage: str,
        kind: SpanKindName,
        at: int,
        *,
        failed: bool,
        c: CitationReport,
        attrs: Mapping[str, Any],
    ) -> None:
        sp = self._tracer.start_span(f"citeguard.citation.{stage}", context=ctx, start_time=at)
        try:
            base: dict[str, Any] = {SPAN_KIND: kind, INPUT_VALUE: c.url, "citeguard.url": c.url}
            if failed:
                base["citeguard.status"] = c.status.value
                base["citeguard.reason"] = c.reason
            _set_all(sp, {**base, **attrs})
            if failed:
                _error(sp, f"{c.status.value}: {c.reason}")
        finally:
            sp.end(end_time=at)


class SearchTrace:
    """Handle on one search call's RETRIEVER span (inert when tracing is off)."""

    def __init__(self, tracing: Tracing | None, span: Any, query: str, provider: str) -> None:
        self._tracing = tracing
        self._span = span
        self._query = query
        self._provider = provider
        self._called = False

    @property
    def span(self) -> Any:
        """The RETRIEVER span (``None`` when tracing is off)."""
        return self._span

    def tool(self) -> AbstractContextManager[Any]:
        """A TOOL span, child of the RETRIEVER span, around the wire call to the search API."""
        self._called = True
        tracing = self._tracing
        if tracing is None or tracing._tracer is None:
            return nullcontext(None)
        return _SpanScope(
            tracing._tracer,
            "citeguard.search.call",
            "TOOL",
            input=self._query,
            attributes={TOOL_NAME: self._provider},
            parent=self._span,
            otel_kind="CLIENT",
        )

    def record(self, record: SearchRecord) -> None:
        """Attach the results: one OpenInference retrieval document per search result, with its
        URL, snippet, reciprocal-rank score, recency, and authority (primary / secondary) as
        the search normalisation classified it."""
        if self._tracing is None or not _is_recording(self._span):
            return
        attrs: dict[str, Any] = {
            OUTPUT_VALUE: f"{len(record.results)} result(s)",
            "citeguard.search.provider": record.provider,
            "citeguard.search.result_count": len(record.results),
            "citeguard.search.elapsed_ms": record.elapsed_ms,
            # no wire call under this span: the results came from a snapshot
            "citeguard.search.from_snapshot": not self._called,
        }
        now = self._tracing._now()
        for i, r in enumerate(record.results):
            try:
                prefix = f"{RETRIEVAL_DOCUMENTS}.{i}."
                attrs[prefix + DOCUMENT_ID] = r.url
                attrs[prefix + DOCUMENT_CONTENT] = _text(r.snippet or r.title or "")
                if r.rank > 0:
                    # search APIs rarely return a score; the reciprocal rank keeps the order
                    attrs[prefix + DOCUMENT_SCORE] = 1.0 / r.rank
                attrs[prefix + DOCUMENT_METADATA] = _json(_document_metadata(r, now))
            except Exception:
                continue
        _set_all(self._span, attrs)

    def _set_run(self, run: _Run | None, regime: str | None) -> None:
        if not _is_recording(self._span):
            return
        question = run.question if run is not None else None
        if regime is None and run is not None:
            regime = run.regime
        _set_all(
            self._span,
            {"citeguard.question": question or None, "citeguard.freshness.regime": regime},
        )


# ---------------------------------------------------------------------- span scope


class _SpanScope(AbstractContextManager[Any]):
    """Start a span, make it current for the block, end it on exit. Never raises its own errors:
    if the tracer fails, the block runs with ``None`` and nothing is traced."""

    def __init__(
        self,
        tracer: Any,
        name: str,
        kind: SpanKindName,
        *,
        input: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        run: _Run | None = None,
        parent: Any = None,
        otel_kind: Literal["INTERNAL", "CLIENT"] = "INTERNAL",
    ) -> None:
        self._tracer = tracer
        self._name = name
        self._kind = kind
        self._input = input
        self._attributes = attributes
        self._run = run
        self._parent = parent
        self._otel_kind = otel_kind
        self._span: Any = None
        self._token: Any = None
        self._run_token: Token[_Run | None] | None = None

    def __enter__(self) -> Any:
        try:
            ctx = (
                _otel_trace.set_span_in_context(self._parent) if self._parent is not None else None
            )
            span = self._tracer.start_span(
                self._name,
                context=ctx,
                kind=_SpanKind.CLIENT if self._otel_kind == "CLIENT" else _SpanKind.INTERNAL,
            )
            self._token = _otel_context.attach(_otel_trace.set_span_in_context(span))
            self._span = span
        except Exception:
            self._span = None
            return None
        if self._run is not None:
            self._run_token = _RUN.set(self._run)
        if span.is_recording():
            attrs: dict[str, Any] = {SPAN_KIND: self._kind}
            if self._input is not None:
                attrs[INPUT_VALUE] = _text(self._input)
                attrs[INPUT_MIME_TYPE] = MIME_TEXT
            if self._attributes:
                attrs.update(self._attributes)
            _set_all(span, attrs)
        return span

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        span = self._span
        if span is None:
            return
        if self._run_token is not None:
            with suppress(Exception):
                _RUN.reset(self._run_token)
        try:
            if isinstance(exc, Exception):
                span.record_exception(exc)
                _error(span, f"{type(exc).__name__}: {exc}")
            elif isinstance(exc, asyncio.CancelledError):
                _error(span, "cancelled")
        except Exception:
            pass
        with suppress(Exception):
            _otel_context.detach(self._token)
        with suppress(Exception):
            span.end()


# ---------------------------------------------------------------------- helpers


def _utcnow() -> datetime:
    return datetime.now(UTC)


@functools.cache
def _version() -> str:
    try:
        from importlib.metadata import version

        return version("citeguard-agent")
    except Exception:
        return "0"


def _is_recording(span: Any) -> bool:
    if span is None:
        return False
    try:
        return bool(span.is_recording())
    except Exception:
        return False


def _start_ns(span: Any) -> int | None:
    """A span's start time, when the SDK exposes it (the API's Span does not)."""
    value = getattr(span, "start_time", None)
    return value if isinstance(value, int) and value > 0 else None


def _error(span: Any, description: str) -> None:
    with suppress(Exception):
        span.set_status(_Status(_StatusCode.ERROR, description[:_MAX_EXPLANATION]))


def _set_all(span: Any, attrs: Mapping[str, Any]) -> None:
    """Set each attribute on its own, so one bad value is dropped and the rest still land."""
    for key, value in attrs.items():
        try:
            clean = _attr(value)
            if clean is not None:
                span.set_attribute(key, clean)
        except Exception:
            continue


def _attr(value: Any) -> Any:
    """Convert a value to what an OpenTelemetry attribute can carry; ``None`` drops it."""
    if value is None:
        return None
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return _json(value)
    if isinstance(value, Sequence | set | frozenset):
        items = [v.value if isinstance(v, Enum) else v for v in value if v is not None]
        if all(isinstance(v, str) for v in items):
            return [_text(v) for v in items]
        if all(isinstance(v, bool) for v in items) or all(
            isinstance(v, int) and not isinstance(v, bool) for v in items
        ):
            return items
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in items):
            return [float(v) for v in items]
        return [_text(str(v)) for v in items]
    return _text(str(value))


def _text(value: str, limit: int = _MAX_TEXT) -> str:
    return value if len(value) <= limit else value[:limit] + "…[truncated]"


def _json(value: Any) -> str:
    return _text(json.dumps(value, default=str, ensure_ascii=False, sort_keys=True))


def _evaluation(index: int, fields: Mapping[str, Any]) -> dict[str, Any]:
    prefix = f"{EVALUATIONS}.{index}."
    return {prefix + k: v for k, v in fields.items() if v is not None}


def _is_llm_backend(backend: str | None) -> bool:
    """Was the judgement made by an LLM (a judge backend) rather than code or a local model?"""
    if not backend:
        return False
    b = backend.lower()
    return "judge" in b or "llm" in b


def _ordered_axes(verdict: Verdict) -> list[AxisResult]:
    known = [verdict.axes[n] for n in AXES if n in verdict.axes]
    extra = [a for n, a in verdict.axes.items() if n not in AXES]
    return known + extra


def _axis_label(axis: AxisResult) -> str:
    if not axis.evaluated:
        return "skipped"
    if axis.passed:
        return "pass"
    return "fail" if axis.gating else "warn"


def _axis_explanation(axis: AxisResult) -> str:
    msgs = [f.message for f in axis.findings if f.severity == "error"] or [
        f.message for f in axis.findings
    ]
    return _text("; ".join(msgs), _MAX_EXPLANATION)


def _axis_eval(axis: AxisResult, verdict: Verdict) -> dict[str, Any]:
    llm = _is_llm_backend(str(axis.details.get("backend") or ""))
    if axis.name == "validity":
        backends = [c.entailment.backend for c in verdict.citations if c.entailment] + [
            ch.entailment.backend for cl in verdict.claims for ch in cl.checks if ch.entailment
        ]
        llm = llm or any(_is_llm_backend(b) for b in backends)
    return {
        EVALUATION_NAME: axis.name,
        EVALUATION_SCORE: axis.score,
        EVALUATION_LABEL: _axis_label(axis),
        EVALUATION_EXPLANATION: _axis_explanation(axis) or None,
        EVALUATION_ANNOTATOR_KIND: "LLM" if llm else "CODE",
        EVALUATION_METADATA: _json(
            {
                "gating": axis.gating,
                "evaluated": axis.evaluated,
                "offending_urls": list(axis.offending_urls),
            }
        ),
    }


def _verdict_attributes(verdict: Verdict, output: str | None) -> dict[str, Any]:
    axes = _ordered_axes(verdict)
    failed = [a.name for a in axes if a.gating and not a.passed]
    warned = [a.name for a in axes if not a.gating and not a.passed]
    bad = [c for c in verdict.citations if not c.status.is_ok()]
    if output is None:
        output = "passed" if verdict.passed else "failed: " + ", ".join(failed or ["(none)"])
    attrs: dict[str, Any] = {
        OUTPUT_VALUE: _text(output),
        OUTPUT_MIME_TYPE: MIME_TEXT,
        "citeguard.passed": verdict.passed,
        "citeguard.failed_axes": failed,
        "citeguard.warning_axes": warned,
        "citeguard.offending_urls": sorted(verdict.offending_urls),
        "citeguard.citations.total": len(verdict.citations),
        "citeguard.citations.failed": len(bad),
        "citeguard.failed_citations": [f"{c.url} [{c.status.value}] {c.reason}" for c in bad],
        # each failing (claim, URL) pair, and whether the URL or the pair failed
        "citeguard.failed_pairs": [
            f"claim {cl.index + 1}: {ch.url} [{ch.failure}: {ch.status.value}]"
            for cl in verdict.claims
            for ch in cl.checks
            if ch.failure is not None
        ],
        "citeguard.freshness.regime": verdict.regime,
        "citeguard.elapsed_ms": verdict.elapsed_ms,
    }
    for i, axis in enumerate(axes):
        attrs.update(_evaluation(i, _axis_eval(axis, verdict)))
    return attrs


def _document_metadata(r: SearchResult, now: datetime) -> dict[str, Any]:
    meta: dict[str, Any] = {"url": r.url, "title": r.title, "rank": r.rank}
    if r.published is not None:
        published = r.published if r.published.tzinfo else r.published.replace(tzinfo=UTC)
        meta["published"] = published.isoformat()
        meta["recency_days"] = round((now - published).total_seconds() / 86400.0, 2)
    else:
        meta["published"] = None
        meta["recency_days"] = None
    # the source kind as the search normalisation recorded it (None: not classified)
    meta["authority"] = None if r.primary is None else "primary" if r.primary else "secondary"
    meta["source_category"] = r.source_kind
    return meta


def answer_shown(answer: object) -> str:
    """What the trace shows of an answer: never an exception (a repr nested too deep to print)
    and never a copy of a huge body; parse_answer reports a bad answer as a finding."""
    if isinstance(answer, str):
        return answer
    if isinstance(answer, bytes | bytearray | memoryview):
        return f"<{type(answer).__name__} of {len(answer)} bytes>"
    text = getattr(answer, "text", None)  # a ProviderAnswer
    if isinstance(text, str):
        return text[:4000]
    try:
        # the first items only: the repr of 100,000 items held the event loop for 15 ms
        shown = list(itertools.islice(answer, 50)) if isinstance(answer, Sequence) else answer
        return repr(shown)[:4000]
    except Exception:
        return f"<{type(answer).__name__}>"


__all__ = ["SearchTrace", "SpanKindName", "Tracing", "answer_shown", "failed_stage"]

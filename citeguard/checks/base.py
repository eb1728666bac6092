"""The one contract every axis implements.

A check receives one :class:`CheckContext` (everything the pipeline knows about one answer once
its citations are verified) and returns its :class:`~citeguard.models.AxisResult`; the URLs
the answer function must stop citing are the result's ``offending_urls``. The Guard runs the
registered checks in order (:mod:`citeguard.checks.registry`); the verdict room
(:mod:`citeguard.verdict`) rolls their results up. A check owns what it needs across requests
(an LLM judge client, say) and releases it in :meth:`Check.aclose`.

A new axis is one module with one ``Check`` class plus one line in the registry; its feedback
hint (:attr:`Check.hint`) and its span attributes (:meth:`Check.annotator`) come from the same
object, so nothing else in the package names it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from citeguard.models import (
    Answer,
    AxisResult,
    CitationReport,
    ClaimReport,
    FetchResult,
    FreshnessClass,
    Page,
    SearchRecord,
    Verdict,
)
from citeguard.policy import Policy

AnnotatorKind = Literal["LLM", "CODE"]


@dataclass(frozen=True)
class CheckContext:
    """What every check may read about one answer. Nothing in it is mutated by a check."""

    question: str
    answer: Answer
    policy: Policy
    now: datetime
    regime: FreshnessClass
    citations: Sequence[CitationReport] = ()
    claims: Sequence[ClaimReport] = ()
    pages: Mapping[str, Page] = field(default_factory=dict)
    fetched: Mapping[str, FetchResult] = field(default_factory=dict)
    searches: Sequence[SearchRecord] = ()
    # the validity axis is computed by the citation stage, which also yields ``citations``
    validity: AxisResult | None = None

    @property
    def queries(self) -> list[str]:
        """The agent's literal search strings, in the order it made them."""
        # a search whose query is unknown (a provider that reports only its results) has none
        return [s.query for s in self.searches if s.query.strip()]

    @property
    def search_dates(self) -> dict[str, datetime]:
        """Published dates that search results gave their URLs."""
        return {
            r.url: r.published for s in self.searches for r in s.results if r.published is not None
        }


@runtime_checkable
class Check(Protocol):
    """One axis of the verdict vector."""

    #: the axis name, the key in ``Verdict.axes``
    name: str
    #: the sentence the feedback gives the answer function when this axis fails
    hint: str
    #: error findings are fed back even when the axis is advisory (not gating)
    feeds_back_when_advisory: bool

    def __init__(self, policy: Policy) -> None: ...

    async def run(self, ctx: CheckContext) -> AxisResult:
        """Judge one answer on this axis."""
        ...

    def annotator(self, axis: AxisResult, verdict: Verdict) -> AnnotatorKind:
        """Who judged: ``LLM`` when a model decided this axis, else ``CODE`` (for spans)."""
        ...

    async def aclose(self) -> None:
        """Release what the check holds across requests."""
        ...


def skipped(name: str) -> AxisResult:
    """The result of an axis its policy switched off."""
    return AxisResult(name=name, passed=True, evaluated=False, gating=False)


def is_llm_backend(backend: str | None) -> bool:
    """Whether a backend name names an LLM judge."""
    b = (backend or "").lower()
    return "judge" in b or "llm" in b


__all__ = ["AnnotatorKind", "Check", "CheckContext", "is_llm_backend", "skipped"]

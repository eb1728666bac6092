"""The optional LLM judge: the same rubric asked of a chat-completions model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from citeguard.checks.judge import ChatJudge, JudgeError
from citeguard.checks.query.axis import _axis, _not_evaluated
from citeguard.checks.query.lexicon import _MAX_PROMPT_CHARS, _MAX_QUERY_CHARS
from citeguard.checks.query.score import QueryScore, score_query
from citeguard.models import AxisResult, Finding, Severity
from citeguard.policy import QueryPolicy

# --------------------------------------------------------------------------------------------
# Optional judge backend
# --------------------------------------------------------------------------------------------

_QUERY_SYSTEM = """You grade a search query an agent wrote for a user's prompt.
Score three parts from 1 (bad) to 5 (faithful):
"constraints": the query keeps the prompt's years, versions, numbers with units and comparators
("over 10 hours"), regions and countries, quoted phrases and exclusions ("without X");
"entities": it keeps the organisations, products, laws, people and acronyms;
"breadth": it adds no generic words (best, top, overview, guide, review, list, tips), no year
or names the prompt did not ask for, and does not turn a narrow question into a broad topic.
Needless expansion costs as much as a drop. One dropped constraint scores 2 at most.
Reply with a JSON object: {"constraints": n, "entities": n, "breadth": n,
"dropped": ["what the query lost"], "added": ["what it added"],
"findings": [{"part": "constraints|entities|breadth", "message": "dropped the year 2026"}]}"""


class _JudgeFinding(BaseModel):
    part: str = "breadth"
    message: str


class _JudgeReply(BaseModel):
    constraints: int = Field(ge=1, le=5)
    entities: int = Field(ge=1, le=5)
    breadth: int = Field(ge=1, le=5)
    dropped: list[str] = Field(default_factory=list)
    added: list[str] = Field(default_factory=list)
    findings: list[_JudgeFinding] = Field(default_factory=list)


class JudgeQueryScorer(ChatJudge):
    """:func:`score_query` by an LLM judge with the same rubric (OpenAI-compatible endpoint).

    ``base_url`` is the API root (``.../v1``). Failed calls and replies outside the rubric are
    retried as :class:`~citeguard.checks.judge.ChatJudge` says; when the judge still gives no
    usable answer the deterministic scorer is used, with a ``query.judge_failed`` info finding
    saying why. Pass ``session`` to share an aiohttp session (it is then not closed by
    :meth:`aclose`).
    """

    async def score(self, prompt: str, query: str) -> QueryScore:
        """The judge's rubric scores for one (prompt, query) pair."""
        user = json.dumps(
            {"prompt": prompt[:_MAX_PROMPT_CHARS], "query": query[:_MAX_QUERY_CHARS]},
            ensure_ascii=False,
        )
        try:
            reply = await self.ask(_QUERY_SYSTEM, user, _rubric_reply)
        except JudgeError as exc:
            fallback = score_query(prompt, query)
            note = Finding(
                code="query.judge_failed",
                message=f"{exc}; deterministic scorer used",
                severity=Severity.INFO,
                axis="query",
            )
            return fallback.model_copy(update={"findings": [note, *fallback.findings]})
        parts = {"constraints": reply.constraints, "entities": reply.entities}
        parts["breadth"] = reply.breadth
        findings = [
            Finding(
                code=f"query.judge_{f.part if f.part in parts else 'breadth'}",
                message=f.message[:300],
                severity=(
                    Severity.ERROR if parts.get(f.part, reply.breadth) < 3 else Severity.WARNING
                ),
                axis="query",
                details={"part": f.part, "judge": True},
            )
            for f in reply.findings
        ]
        return QueryScore(
            constraints=reply.constraints,
            entities=reply.entities,
            breadth=reply.breadth,
            overall=min(parts.values()),
            findings=findings,
            dropped=[d[:200] for d in reply.dropped],
            added=[a[:200] for a in reply.added],
        )

    async def check_queries(
        self, prompt: str, queries: Sequence[str], policy: QueryPolicy
    ) -> AxisResult:
        """The query axis with judge scores (queries scored concurrently)."""
        if not policy.enabled or not queries:
            return _not_evaluated(policy)
        scores = await asyncio.gather(*(self.score(prompt, q) for q in queries))
        return _axis(queries, scores, policy)


def _rubric_reply(data: dict[str, Any]) -> _JudgeReply:
    """A judge's reply validated against the rubric (outside it is a malformed reply)."""
    try:
        return _JudgeReply.model_validate(data)
    except ValidationError as exc:
        raise JudgeError(
            "judge reply is outside the 1-5 rubric",
            detail="invalid response (outside the 1-5 rubric)",
            retryable=True,
        ) from exc

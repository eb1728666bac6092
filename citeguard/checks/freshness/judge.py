"""The optional LLM judge of the regime, and :class:`RegimeClassifier`: the judge, the learned
model or the rules, and the cascade that asks the judge only about an uncertain regime."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, Literal

from citeguard.checks.freshness.model import LearnedRegimeClassifier
from citeguard.checks.freshness.rules import _MAX_QUESTION_CHARS, classify_freshness
from citeguard.checks.judge import ChatJudge, JudgeError
from citeguard.models import (
    FreshnessClass,
    Regime,
)
from citeguard.policy import FreshnessPolicy

# --------------------------------------------------------------------------------------------
# Optional judge backend
# --------------------------------------------------------------------------------------------


_FRESHNESS_SYSTEM = """You classify how fast the correct answer to a question changes.
Reply with a JSON object {"regime": R, "reason": "<one short sentence>"} where R is one of:
"insensitive" - the answer never or almost never changes (history, definitions, past events);
"slow" - it changes over several years (office holders, records, laws in force, versions);
"fast" - it changes within a year or less (latest releases, recent winners, upcoming events);
"real_time" - it changes within days or hours (prices, exchange rates, weather, live scores,
service status, today's date). Today is {today}."""


class JudgeFreshnessClassifier(ChatJudge):
    """:func:`classify_freshness` by an LLM judge behind an OpenAI-compatible endpoint.

    ``base_url`` is the API root (``.../v1``); requests go to ``/chat/completions``. Failed
    calls are retried as :class:`~citeguard.checks.judge.ChatJudge` says; a judge that still
    gives no answer — HTTP error, timeout, a reply that is not one of the four regimes — falls
    back to the deterministic rules, with the reason in ``cues``, so a classification always
    comes back. Pass ``session`` to share an aiohttp session (it is then not closed by
    :meth:`aclose`).
    """

    async def classify(self, question: str, *, now: datetime | None = None) -> FreshnessClass:
        """The judge's regime for ``question``, or the deterministic one if the judge fails."""
        today = now or datetime.now(UTC)
        try:
            regime, reason = await self.ask(
                _FRESHNESS_SYSTEM.replace("{today}", today.date().isoformat()),
                question[:_MAX_QUESTION_CHARS],
                _regime_reply,
            )
        except JudgeError as exc:
            fallback = classify_freshness(question, now=today)
            return FreshnessClass(
                regime=fallback.regime,
                cues=[f"{exc}; deterministic rules used", *fallback.cues],
            )
        return FreshnessClass(regime=regime, cues=[f"judge: {reason or regime.value}"])


def _regime_reply(data: dict[str, Any]) -> tuple[Regime, str]:
    """The regime and reason in a judge's reply (an unknown regime is a malformed reply)."""
    raw = str(data.get("regime", "")).strip().lower().replace("-", "_").replace(" ", "_")
    try:
        regime = Regime(raw)
    except ValueError as exc:
        raise JudgeError(
            f"judge answered an unknown regime {raw!r}",
            detail=f"invalid response (unknown regime {raw!r})",
            retryable=True,
        ) from exc
    return regime, str(data.get("reason", "")).strip()[:200]


_REGIME_CACHE_SIZE = 512


class RegimeClassifier:
    """The question's freshness regime: by the judge the policy names, else by the learned
    model (:class:`LearnedRegimeClassifier`, the default), else by the rules.

    ``model="default"`` builds a :class:`LearnedRegimeClassifier` when there is no judge;
    ``model=None`` keeps the deterministic rules alone. The model runs in its own worker
    thread and remembers its answers; when the model cannot run it falls back to the rules,
    saying so in the result. A judge is asked once per question (its answers are remembered, up
    to 512 questions, for every attempt of the loop); a fallback because the judge was down is
    not remembered, so the next check asks again.
    """

    def __init__(
        self,
        judge: JudgeFreshnessClassifier | None,
        *,
        model: LearnedRegimeClassifier | Literal["default"] | None = "default",
        only_uncertain: bool = False,
    ) -> None:
        self._judge = judge
        # the cascade: the judge is asked only where the rules' (or model's) regime is uncertain
        self._only_uncertain = only_uncertain
        if isinstance(model, str):
            model = LearnedRegimeClassifier() if judge is None else None
        self._model = model
        self._seen: dict[str, FreshnessClass] = {}

    async def _local(self, question: str, now: datetime) -> FreshnessClass:
        if self._model is not None:
            return await self._model.classify(question, now=now)
        return classify_freshness(question, now=now)

    async def classify(self, question: str, *, now: datetime) -> FreshnessClass:
        if self._judge is None:
            return await self._local(question, now)
        if self._only_uncertain:
            local = await self._local(question, now)
            if not local.plausible:
                return local  # confident (or insensitive): the judge is not asked
        hit = self._seen.get(question)
        if hit is not None:
            return hit
        fclass = await self._judge.classify(question, now=now)
        if fclass.cues[:1] and fclass.cues[0].startswith("judge:"):
            self._seen[question] = fclass
            if len(self._seen) > _REGIME_CACHE_SIZE:
                del self._seen[next(iter(self._seen))]
        return fclass

    async def warm_up(self) -> None:
        """Load the regime model now (off the event loop) rather than in the first request."""
        if self._judge is None and self._model is not None:
            await self._model.warm_up()

    async def aclose(self) -> None:
        if self._judge is not None:
            await self._judge.aclose()
        if self._model is not None:
            await self._model.aclose()


async def dates_wanted(regime: asyncio.Future[FreshnessClass], policy: FreshnessPolicy) -> bool:
    """Whether a check's pages need the htmldate fallback: only when freshness matters to the
    question (its regime, classified while the first pages are fetched)."""
    return policy.enabled and (await regime).regime is not Regime.INSENSITIVE

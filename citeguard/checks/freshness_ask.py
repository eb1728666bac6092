"""Ask, don't block: one attempt asking for fresher sources when the regime is a guess (issue 45).

The freshness axis hard-rejects only on a regime the development data vouches for
(:class:`~citeguard.checks.freshness.RegimeConfidence`); an uncertain faster guess is gated on
its most lenient plausible floor and reported as ``freshness.regime_uncertain``. In a guarded run
the guard can do better than warn: when a passing answer cites sources that are stale under the
guessed regime, :func:`fresher_ask` says so, and the loop (:mod:`citeguard.loop`) asks the agent
once for fresher sources, with :meth:`FresherAsk.feedback` naming the stale sources, their dates
and the regime the question may be. The stale URLs are not excluded: they may be the best there
is. :meth:`FresherAsk.newer` decides whether the fresher attempt's answer wins (it passes and the
median age of its dated sources is lower); otherwise the first passing answer stands, with its
warning.

A confident regime is not asked about (its gate rejects a stale source, as before), nor is a
source whose date was guessed from the page's text (it cannot alone make a source stale), nor an
undated one (there is no date to name).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from citeguard.checks.freshness import _days
from citeguard.models import Finding, Severity, Verdict
from citeguard.policy import FreshnessPolicy

__all__ = ["FresherAsk", "StaleSource", "fresher_ask", "median_age", "plausible_enough"]


@dataclass(frozen=True, slots=True)
class StaleSource:
    """A cited source past the guessed regime's floor."""

    url: str
    date: str  # ISO 8601, as the axis dated it
    age_days: float


@dataclass(frozen=True, slots=True)
class FresherAsk:
    """What one freshness-only attempt asks for: the guessed regime, its floor, the stale
    sources (oldest first) and the first answer's median source age."""

    regime: str
    plausible: tuple[str, ...]
    confidence: float | None
    floor_days: float
    stale: tuple[StaleSource, ...]
    median_days: float | None
    cue: str | None = None  # what in the question made the regime ("latest: 'most recent'")

    def fresh_since(self) -> str | None:
        """The first day a source counts as fresh for this question (ISO 8601): the check's
        "today" (a stale source's date plus its age) less the regime's floor."""
        for s in self.stale:
            try:
                dated = datetime.fromisoformat(s.date)
            except ValueError:
                continue
            today = dated + timedelta(days=s.age_days)
            return (today - timedelta(days=self.floor_days)).date().isoformat()
        return None

    def message(self, attempt: int) -> str:
        """The feedback text for the fresher attempt: the question's regime and why, what
        "fresh" means for it (a day), and the stale sources with their dates."""
        regime = self.regime.replace("_", "-")
        named = "; ".join(
            f"{s.url} (dated {s.date[:10]}, {_days(s.age_days)} old)" for s in self.stale[:8]
        )
        more = f"; and {len(self.stale) - 8} more" if len(self.stale) > 8 else ""
        slower = [r.replace("_", "-") for r in self.plausible if r != self.regime]
        maybe = f" (it may also be {' or '.join(slower)})" if slower else ""
        why = f" (by the cue {self.cue})" if self.cue else ""
        since = self.fresh_since()
        fresh = (
            f"For this question a fresh source is one dated on or after {since} (within "
            f"{_days(self.floor_days)})"
            if since
            else f"For this question a fresh source is one updated within the last "
            f"{_days(self.floor_days)}"
        )
        return (
            f"Your answer (attempt {attempt}) passed the citation guard, but the question reads "
            f"as {regime}-changing{why}{maybe}: its answer can change within "
            f"{_days(self.floor_days)}. {fresh}. These cited sources are older than that: "
            f"{named}{more}. Search for a newer source (a news item, the official page, a "
            "dated update) and cite it if it confirms or updates the answer; if nothing newer "
            "exists, you may keep these sources. State the date the information is current as "
            "of."
        )

    def finding(self) -> Finding:
        """The stale sources as a warning (what the first answer is returned with when no
        fresher answer won)."""
        return Finding(
            code="freshness.fresher_asked",
            message=(
                "asked once for fresher sources; no newer passing answer came back, so the "
                "answer stands with its stale sources: "
                + "; ".join(f"{s.url} ({s.date[:10]})" for s in self.stale)
            ),
            severity=Severity.WARNING,
            axis="freshness",
            details={
                "if_regime": self.regime,
                "floor_days": self.floor_days,
                "stale": [
                    {"url": s.url, "date": s.date, "age_days": round(s.age_days, 2)}
                    for s in self.stale
                ],
            },
        )

    def warned(self, verdict: Verdict) -> Verdict:
        """``verdict`` (the first answer's) with :meth:`finding` added to its freshness axis:
        what it is returned with when no fresher answer won."""
        axis = verdict.axes["freshness"]
        findings = [*axis.findings, self.finding()]
        fresh = axis.model_copy(update={"findings": findings})
        return verdict.model_copy(update={"axes": {**verdict.axes, "freshness": fresh}})

    def newer(self, verdict: Verdict) -> bool:
        """Whether ``verdict``'s answer passes and its dated sources are newer (a lower median
        age) than the first answer's."""
        if not verdict.passed:
            return False
        axis = verdict.axes.get("freshness")
        if axis is None:
            return False
        now = median_age(axis.details.get("sources"))
        if now is None:
            return False
        return self.median_days is None or now < self.median_days


def fresher_ask(verdict: Verdict, policy: FreshnessPolicy) -> FresherAsk | None:
    """The ask for a verdict whose freshness axis was gated on an uncertain regime and whose
    dated sources are past the guessed regime's floor; ``None`` when there is nothing to ask
    (a confident regime, no floor, no stale source, the axis off or not evaluated)."""
    axis = verdict.axes.get("freshness")
    if axis is None or not axis.evaluated or not policy.enabled:
        return None
    details = axis.details
    regime = details.get("regime")
    gate = details.get("gate_regime")
    if not isinstance(regime, str) or not isinstance(gate, str) or gate == regime:
        return None  # confident (or strict): the gate itself decided
    floor = policy.floor_days.get(regime)
    confidence = details.get("regime_confidence")
    if floor is None or not _plausible(confidence, policy):
        return None
    sources = details.get("sources")
    stale = sorted(
        (StaleSource(url, date, age) for url, date, age in _dated(sources) if age > floor),
        key=lambda s: -s.age_days,
    )
    if not stale:
        return None
    plausible = details.get("plausible_regimes")
    cues = details.get("cues")
    cue = cues[0] if isinstance(cues, list) and cues and isinstance(cues[0], str) else None
    return FresherAsk(
        regime=regime,
        plausible=tuple(str(r) for r in plausible) if isinstance(plausible, list) else (),
        confidence=float(confidence) if isinstance(confidence, int | float) else None,
        floor_days=float(floor),
        stale=tuple(stale),
        median_days=median_age(sources),
        cue=cue[:_MAX_CUE_CHARS] if cue else None,
    )


_MAX_CUE_CHARS = 160  # a cue quotes the question; a hostile question is long


def plausible_enough(confidence: float | None, policy: FreshnessPolicy) -> bool:
    """Whether a guessed regime with this confidence is worth one attempt
    (``FreshnessPolicy.ask_min_confidence``; unknown: yes)."""
    return confidence is None or confidence > policy.ask_min_confidence


def _plausible(confidence: object, policy: FreshnessPolicy) -> bool:
    if confidence is None:
        return True
    return isinstance(confidence, int | float) and plausible_enough(float(confidence), policy)


def median_age(sources: object) -> float | None:
    """The median age in days of the dated sources in a freshness axis's ``sources`` detail
    (text-guessed dates left out); ``None`` when none is dated."""
    ages = [age for _, _, age in _dated(sources)]
    return statistics.median(ages) if ages else None


def _dated(sources: object) -> list[tuple[str, str, float]]:
    """(url, date, age in days) for each source with a date the axis counts (not
    text-guessed)."""
    if not isinstance(sources, Mapping):
        return []
    out: list[tuple[str, str, float]] = []
    for url, info in sources.items():
        if not isinstance(info, Mapping) or info.get("source") == "published_weak":
            continue
        age, date = info.get("recency_days"), info.get("date")
        if isinstance(age, int | float) and isinstance(date, str):
            out.append((str(url), date, float(age)))
    return out

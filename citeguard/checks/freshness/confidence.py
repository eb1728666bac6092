"""How far the development data vouches for a regime guess: the plausible regimes and the
confidence each classification carries (``regime_confidence.json``)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from citeguard.checks.freshness.artifact import RegimeModelError, _json_artifact
from citeguard.models import (
    FreshnessClass,
    Regime,
)

# --------------------------------------------------------------------------------------------
# Regime confidence
# --------------------------------------------------------------------------------------------

#: the shipped confidence table, written by training/regime_confidence.py
REGIME_CONFIDENCE_PATH = Path(__file__).parent.with_name("regime_confidence.json")  # in checks/
_CONFIDENCE_FORMAT = "citeguard-regime-confidence/1"
_REGIME_ORDER = (Regime.INSENSITIVE, Regime.SLOW, Regime.FAST, Regime.REAL_TIME)
#: the label :class:`RegimeConfidence` files the learned model's "insensitive → slow" under
MODEL_RAISE_LABEL = "model raise"


_FC = TypeVar("_FC", bound=FreshnessClass)


def merged_regime(regime: Regime) -> str:
    """The regime as the labelled data tells them apart: real-time and fast are one."""
    return "fast" if regime is Regime.REAL_TIME else regime.value


class RegimeConfidence:
    """How far the development data trusts each rule's regime: per deciding rule, the regime to
    gate on (the fastest one whose held-out "true regime is slower" rate is within the table's
    ``alpha``) and the rate at the rule's own regime. Written by
    training/regime_confidence.py; plain JSON."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        if data.get("format") != _CONFIDENCE_FORMAT:
            raise RegimeModelError(f"not a regime confidence table: {data.get('format')!r}")
        try:
            self.alpha = float(data["alpha"])
            self._entries: dict[str, tuple[Regime, dict[str, float]]] = {
                key: (Regime(v["gate"]), {k: float(e) for k, e in v["error"].items()})
                for key, v in dict(data["decisions"]).items()
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise RegimeModelError(f"malformed regime confidence table: {exc}") from exc

    @staticmethod
    @functools.cache
    def load(path: Path = REGIME_CONFIDENCE_PATH) -> RegimeConfidence:
        """The table in ``path`` (the shipped one by default), read once per process."""
        return RegimeConfidence(_json_artifact(path, "regime confidence table"))

    def assess(self, regime: Regime, label: str) -> tuple[list[Regime], float | None]:
        """(plausible regimes, fastest first; the confidence in ``regime``) for a decision by
        the rule ``label``. A rule the table has no row for falls back to its regime's row
        (``"<regime>|*"``); a regime the table has no row for at all is not vouched for (every
        slower regime plausible, confidence unknown: gated leniently and asked about, never a
        hard reject); an insensitive regime has no floor, so nothing to doubt."""
        if regime is Regime.INSENSITIVE:
            return [], None
        key = merged_regime(regime)
        entry = self._entries.get(f"{key}|{label}") or self._entries.get(f"{key}|*")
        if entry is None:
            return _unvouched(regime), None
        gate, error = entry
        low, high = _REGIME_ORDER.index(gate), _REGIME_ORDER.index(regime)
        plausible = [r for r in reversed(_REGIME_ORDER[low : high + 1])]
        rate = error.get(key)
        return (plausible if len(plausible) > 1 else []), (
            None if rate is None else round(1.0 - rate, 4)
        )


def _unvouched(regime: Regime) -> list[Regime]:
    """Every regime from ``regime`` down to insensitive, fastest first (nothing vouches for a
    floor: an uncertain regime leans toward asking for a fresher source, not a hard reject)."""
    high = _REGIME_ORDER.index(regime)
    return [] if high == 0 else list(reversed(_REGIME_ORDER[: high + 1]))


def _with_confidence(fc: _FC, label: str) -> _FC:
    """``fc`` with the plausible regimes and confidence of a decision by the rule ``label``.
    When the shipped table cannot be read, nothing vouches for a floor: a regime with one is
    uncertain down to insensitive (gated leniently and asked about, never a hard reject)."""
    try:
        table = RegimeConfidence.load()
    except RegimeModelError as exc:
        plausible: list[Regime] = _unvouched(fc.regime)
        if not plausible:
            return fc
        cue = f"uncertain: the regime confidence table is unavailable ({exc})"
        return fc.model_copy(update={"plausible": plausible, "cues": [*fc.cues, cue]})
    plausible, confidence = table.assess(fc.regime, label)
    cues = list(fc.cues)
    if plausible:
        slower = ", ".join(r.value for r in plausible[1:])
        cues.append(
            f"uncertain: the development data cannot vouch for {label!r} questions' floor "
            f"(too few, or too often slower: {slower} plausible; {confidence:.0%} at least "
            f"{fc.regime.value})"
            if confidence is not None
            else f"uncertain: {slower} plausible"
        )
    return fc.model_copy(update={"plausible": plausible, "confidence": confidence, "cues": cues})

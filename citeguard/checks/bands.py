"""Claim-support bands: where a backend's P(supported) becomes supported, uncertain or not.

Every entailment backend reads its probability with two thresholds: ``not_supported`` below
``reject_below``, ``supported`` from ``accept_from``, ``uncertain`` between. The thresholds of
the trained backends were chosen out of fold on development data (group-aware folds;
``python -m training support-bands``): ``reject_below`` is the highest cut whose
rejections were at least 90% right on rows the model had not seen, ``accept_from`` the lowest
whose acceptances were at least 85% right. They ship with the backend's artefact
(``support_model*.json`` for the local model, ``word_overlap_bands.json`` for word overlap);
``EntailmentPolicy.reject_below`` / ``accept_from`` override them. The NLI backend's are
uncalibrated defaults (:data:`NLI_BANDS`). docs/claim-support.md gives the measured figures.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from citeguard.errors import EntailerError
from citeguard.policy import EntailmentPolicy

__all__ = [
    "NLI_BANDS",
    "WHOLE_PAGE_BANDS_PATH",
    "WORD_OVERLAP_BANDS_PATH",
    "SupportBands",
    "WordOverlapCalibration",
    "whole_page_bands",
]

BandLabel = Literal["supported", "uncertain", "not_supported"]

WORD_OVERLAP_BANDS_PATH = Path(__file__).with_name("word_overlap_bands.json")
#: The local model's bands for whole-page evidence, per encoder
#: (``python -m training whole-page-bands`` writes it).
WHOLE_PAGE_BANDS_PATH = Path(__file__).with_name("support_bands_whole_page.json")


@functools.lru_cache(maxsize=8)
def whole_page_bands(encoder: str, path: Path | None = None) -> SupportBands | None:
    """The local model's bands for evidence that is a whole page, for ``encoder``; None when
    the artefact has none for it."""
    where = path or WHOLE_PAGE_BANDS_PATH
    try:
        data = json.loads(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise EntailerError(f"cannot read whole-page bands {where}: {exc}") from exc
    entry = data.get(encoder) if isinstance(data, dict) else None
    if not isinstance(entry, dict):
        return None
    return SupportBands.from_json(entry, source=f"{where.name} ({encoder})")


@dataclass(frozen=True, slots=True)
class SupportBands:
    """Two thresholds on P(supported): ``not_supported`` below ``reject_below``, ``supported``
    from ``accept_from``, ``uncertain`` between (empty when the two are equal: a two-way cut).
    ``source`` says where they came from, for reasons and reports."""

    reject_below: float
    accept_from: float
    source: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for v in (self.reject_below, self.accept_from):
            if not (0.0 <= v <= 1.0) or math.isnan(v):
                raise EntailerError(f"support band threshold {v!r} is not in 0..1")
        if self.reject_below > self.accept_from:
            raise EntailerError(
                f"support bands: reject_below {self.reject_below} exceeds "
                f"accept_from {self.accept_from}"
            )

    def label(self, p: float) -> BandLabel:
        """The band ``p`` falls in."""
        if p >= self.accept_from:
            return "supported"
        if p < self.reject_below:
            return "not_supported"
        return "uncertain"

    @property
    def pair(self) -> tuple[float, float]:
        """``(reject_below, accept_from)``, as :attr:`EntailmentScore.thresholds` carries it."""
        return (self.reject_below, self.accept_from)

    def overridden(self, policy: EntailmentPolicy | None) -> SupportBands:
        """These bands with ``policy.reject_below`` / ``accept_from`` in place of their own
        where set (a single override that would cross the other threshold moves it along)."""
        if policy is None or (policy.reject_below is None and policy.accept_from is None):
            return self
        lo = self.reject_below if policy.reject_below is None else policy.reject_below
        hi = self.accept_from if policy.accept_from is None else policy.accept_from
        if policy.accept_from is None:
            hi = max(hi, lo)
        if policy.reject_below is None:
            lo = min(lo, hi)
        return replace(self, reject_below=lo, accept_from=hi, source="policy")

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, source: str) -> SupportBands:
        """Read ``{"reject_below": x, "accept_from": y, ...}`` (other keys kept as ``meta``)."""
        try:
            lo, hi = float(data["reject_below"]), float(data["accept_from"])
        except (KeyError, TypeError, ValueError) as exc:
            raise EntailerError(
                f"{source}: support bands need reject_below and accept_from"
            ) from exc
        meta = {k: v for k, v in data.items() if k not in ("reject_below", "accept_from")}
        return cls(lo, hi, source=source, meta=meta)

    def to_json(self) -> dict[str, Any]:
        """The artefact's object: the two thresholds, then the meta."""
        return {"reject_below": self.reject_below, "accept_from": self.accept_from, **self.meta}


# MNLI cross-encoders' P(entailment), read as is: no NLI model was available to calibrate on, so
# these are round, conservative defaults (an NLI model's "neutral" covers much that a person
# would call supported): reject only below 0.05, accept from 0.80. Override them in Policy.
NLI_BANDS = SupportBands(0.05, 0.80, source="default NLI bands (uncalibrated)")


@dataclass(frozen=True, slots=True)
class WordOverlapCalibration:
    """Word overlap's content-word recall → P(supported) = σ(a · recall + b) (Platt, fitted on
    development data), and its bands. Read from :data:`WORD_OVERLAP_BANDS_PATH`."""

    platt_a: float
    platt_b: float
    bands: SupportBands

    @classmethod
    def load(cls, path: Path | None = None) -> WordOverlapCalibration:
        """Read the shipped artefact (or ``path``)."""
        where = path or WORD_OVERLAP_BANDS_PATH
        try:
            data = json.loads(where.read_text(encoding="utf-8"))
            a, b = float(data["platt_a"]), float(data["platt_b"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise EntailerError(f"cannot read word-overlap calibration {where}: {exc}") from exc
        return cls(a, b, SupportBands.from_json(data["bands"], source=where.name))

    def probability(self, recall: float) -> float:
        """Calibrated P(supported) for a content-word recall."""
        t = self.platt_a * recall + self.platt_b
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, t))))

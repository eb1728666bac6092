"""The freshness axis: is the answer built on sources recent enough for the question?

Freshness is a property of the question. "Capital of France" is *insensitive*; "who is the
current Jeopardy! host" is *slow* (changes over years); "the most recent Emmy winner" is *fast*
(changes within a year); "the current price of X" is *real-time* (changes within days).
:func:`classify_freshness` picks the regime with deterministic cue rules and lists the cues.
The guard's default is :class:`LearnedRegimeClassifier`: a small logistic model
(``regime_model.json``, fitted by training/train_regime.py on four labelled sources) over the
question's MiniLM embedding and the rules' cues, run off the event loop; the rules stay as its
features, as the judge of real-time, and as the fallback when the model cannot run.

:func:`check_freshness` then dates each cited source (:func:`source_date`: the page's modified
date, else published, else the search result's date; HTTP ``Last-Modified`` already lands in
``modified`` during page extraction), takes the **median recency** of the cited sources, and
fails when it exceeds the regime's floor (``FreshnessPolicy.floor_days``). For fast and
real-time questions:

* an undated source counts as stale when ``policy.undated_counts_as_stale`` (the default);
* every stale (or stale-by-default undated) source is an offender for regeneration, whether or
  not the median fails, so a regenerated answer drops it;
* the answer must carry a dated recency caveat ("as of 2 December 2026", "checked Dec 2026");
  without one the axis fails when ``policy.require_caveat`` (the default).

Like the diversity axis, only citations whose status resolves are counted: a broken link is the
validity axis's business and has no date to speak of.

**Only a regime the development data vouches for may hard-reject** (issue 32). Each
classification carries ``plausible`` regimes and a ``confidence`` from
:class:`RegimeConfidence` (``regime_confidence.json``, written by
training/regime_confidence.py). With ``policy.uncertain_regime == "lenient"`` (the default) an
uncertain question is gated on the slowest plausible regime's floor, with a
``freshness.regime_uncertain`` finding, and what the guessed regime would have rejected (a stale
median, a missing caveat) is shown as warnings. A published date guessed from the page's text
(:func:`is_weak_date_source`) cannot alone make a source stale: ``freshness.weak_date``.

The axis is a package, one module per sub-stage: :mod:`.rules` (the regime by cue rules, and
the rules' cues as features), :mod:`.confidence` (how far the data vouches for a regime),
:mod:`.model` (the learned regime model), :mod:`.artifact` (reading their JSON artifacts),
:mod:`.caveat` (the dated recency caveat), :mod:`.dating` (each source's date and age),
:mod:`.gate` (the axis: floors, stale and undated sources, date disagreements, the caveat rule),
:mod:`.judge` (the LLM judge and the :class:`RegimeClassifier` cascade) and :mod:`.check` (the
registered check).
"""

from __future__ import annotations

from citeguard.checks.freshness.artifact import RegimeModelError
from citeguard.checks.freshness.caveat import _CAVEAT_RE as _CAVEAT_RE
from citeguard.checks.freshness.caveat import CaveatMatch, find_caveat
from citeguard.checks.freshness.check import FreshnessCheck as FreshnessCheck
from citeguard.checks.freshness.confidence import (
    MODEL_RAISE_LABEL,
    REGIME_CONFIDENCE_PATH,
    RegimeConfidence,
)
from citeguard.checks.freshness.confidence import merged_regime as merged_regime
from citeguard.checks.freshness.dating import WEAK_DATE_SOURCES as WEAK_DATE_SOURCES
from citeguard.checks.freshness.dating import _days as _days
from citeguard.checks.freshness.dating import is_weak_date_source, source_date
from citeguard.checks.freshness.gate import check_freshness
from citeguard.checks.freshness.judge import (
    JudgeFreshnessClassifier,
    RegimeClassifier,
    dates_wanted,
)
from citeguard.checks.freshness.model import (
    REGIME_CLASSES,
    REGIME_MODEL_PATH,
    LearnedRegimeClassifier,
    ModelFreshnessClass,
    RegimeModel,
    embed_questions,
    regime_embedding_text,
)
from citeguard.checks.freshness.rules import (
    REGIME_FEATURE_NAMES,
    classify_freshness,
    regime_features,
)
from citeguard.checks.freshness.rules import RULE_LABELS as RULE_LABELS
from citeguard.checks.judge import JudgeError
from citeguard.models import FreshnessClass, Regime

__all__ = [
    "MODEL_RAISE_LABEL",
    "REGIME_CLASSES",
    "REGIME_CONFIDENCE_PATH",
    "REGIME_FEATURE_NAMES",
    "REGIME_MODEL_PATH",
    "CaveatMatch",
    "FreshnessClass",
    "JudgeError",
    "JudgeFreshnessClassifier",
    "LearnedRegimeClassifier",
    "ModelFreshnessClass",
    "Regime",
    "RegimeClassifier",
    "RegimeConfidence",
    "RegimeModel",
    "RegimeModelError",
    "check_freshness",
    "classify_freshness",
    "dates_wanted",
    "embed_questions",
    "find_caveat",
    "is_weak_date_source",
    "regime_embedding_text",
    "regime_features",
    "source_date",
]

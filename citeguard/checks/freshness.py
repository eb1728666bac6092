"""The freshness axis: is the answer built on sources recent enough for the question?

Freshness is a property of the question. "Capital of France" is *insensitive*; "who is the
current Jeopardy! host" is *slow* (changes over years); "the most recent Emmy winner" is *fast*
(changes within a year); "the current price of X" is *real-time* (changes within days).
:func:`classify_freshness` picks the regime with deterministic cue rules and lists the cues.
The guard's default is :class:`LearnedRegimeClassifier`: a small logistic model
(``regime_model.json``, fitted by benchmarks/train_regime.py on four labelled sources) over the
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
benchmarks/regime_confidence.py). With ``policy.uncertain_regime == "lenient"`` (the default) an
uncertain question is gated on the slowest plausible regime's floor, with a
``freshness.regime_uncertain`` finding, and what the guessed regime would have rejected (a stale
median, a missing caveat) is shown as warnings. A published date guessed from the page's text
(:func:`is_weak_date_source`) cannot alone make a source stale: ``freshness.weak_date``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import statistics
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from citeguard.checks.base import AnnotatorKind, CheckContext, skipped
from citeguard.checks.judge import ChatJudge, JudgeError
from citeguard.checks.minilm import LOCAL_MODEL_HINT
from citeguard.dates import DATE_PATTERN, as_aware, date_from_match
from citeguard.errors import CiteguardError
from citeguard.models import (
    AxisResult,
    CitationReport,
    Finding,
    FreshnessClass,
    Outcome,
    Regime,
    Severity,
    Verdict,
)
from citeguard.policy import FreshnessPolicy, Policy
from citeguard.text import finditer_windowed, fold_whitespace
from citeguard.web.urls import UrlProblem, normalize_url

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

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
    "embed_questions",
    "find_caveat",
    "is_weak_date_source",
    "regime_embedding_text",
    "regime_features",
    "source_date",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CaveatMatch(_Model):
    """A dated recency caveat found in an answer."""

    text: str
    start: int
    end: int
    date_text: str
    date: datetime | None = None  # parsed when it names a day or a month
    granularity: str  # "day", "month" or "year"


# --------------------------------------------------------------------------------------------
# Question regime
# --------------------------------------------------------------------------------------------

_F = re.IGNORECASE
_MAX_QUESTION_CHARS = 2000
# A bounded gap inside one sentence: "how much is ... worth ... now". Unbounded ``.*`` between
# two alternations is quadratic on long inputs.
_GAP = r"[^?!\n]{0,80}?"

_YEAR_RE = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
# A year that starts an open range ("since 2009", "between 2009 and now") anchors nothing.
_OPEN_RANGE_RE = re.compile(
    r"\b(?:since|from)\s+(?:\w+\s+)?(?:1[5-9]\d\d|20\d\d)\b(?!\s*(?:to|until|-|–)\s*\d)"
    r"|\bbetween\s+(?:1[5-9]\d\d|20\d\d)\s+and\s+(?:now|today|the\s+present)\b",
    _F,
)

# (label, pattern) tables; the first match of a table gives its cue.
_REAL_TIME: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("price", re.compile(r"\b(?:stock|share|spot|gas|fuel|petrol|ticket)\s+prices?\b", _F)),
    (
        "price",
        re.compile(
            r"\b(?:current|today'?s?|live|latest)\s+(?:\w+\s+){0,2}(?:price|prices|rate|quote)\b"
            r"|\bprices?\s+(?:of\s+\S+\s+)?(?:now|today|right\s+now|currently)\b"
            rf"|\bhow\s+much\s+(?:is|are|does)\b{_GAP}\b(?:worth|trading|cost)\b{_GAP}\b(?:now|today)\b"
            r"|\btrading\s+at\b|\bmarket\s+cap\w*\b",
            _F,
        ),
    ),
    ("exchange rate", re.compile(r"\bexchange\s+rates?\b|\bconversion\s+rate\b|\bforex\b", _F)),
    (
        "weather",
        re.compile(
            r"\bweather\b|\bforecast\b|\btemperature\b|\bhumidity\b|\bair\s+quality\b"
            r"|\bwater\s+level\b|\brainfall\b|\bsnow\s+(?:depth|report)\b|\bwildfire\s+status\b",
            _F,
        ),
    ),
    (
        "score",
        re.compile(
            rf"\bscores?\s+(?:of|in|for)\b{_GAP}\b(?:game|match|fixture|final)\b|\bwho\s+is\s+winning\b"
            r"|\blive\s+(?:score|results?|updates?|standings)\b|\bcurrent\s+score\b",
            _F,
        ),
    ),
    (
        "status",
        re.compile(
            r"\b(?:is|are)\s+\S+(?:\s+\S+)?\s+(?:down|offline|online|delayed|open|closed)"
            r"(?:\s+(?:right\s+)?now|\s+today)?\s*\??\s*$"
            r"|\b(?:outage|service\s+status|flight\s+status|traffic)\b",
            _F,
        ),
    ),
    (
        "clock",
        re.compile(
            r"\bwhat\s+(?:time|day|date|month|year)\s+is\s+it\b|\btoday'?s\s+date\b"
            r"|\bwhat\s+is\s+today\b|\bhow\s+many\s+days\s+(?:are\s+)?(?:left\s+)?until\b",
            _F,
        ),
    ),
    (
        "now",
        re.compile(
            r"\btoday\b|\bright\s+now\b|\bat\s+the\s+moment\b|\btonight\b|\bthis\s+(?:morning|"
            r"afternoon|evening)\b|\bat\s+this\s+(?:moment|hour)\b",
            _F,
        ),
    ),
)
# Office holders change over years: "the current CEO/host/president" is slow, not fast.
_HOLDER_RE = re.compile(
    r"\b(?:current|currently|now|present|sitting|incumbent|today'?s)\s+(?:\S+\s+){0,3}?"
    r"(?:ceo|cfo|cto|chief\s+executive|president|prime\s+minister|premier|chancellor|host|"
    r"coach|manager|chair(?:man|woman|person)?|leader|head|king|queen|monarch|pope|governor|"
    r"mayor|minister|secretary|director|owner|editor|captain|speaker|senator|ambassador|"
    r"commissioner|spouse|wife|husband|partner)\b",
    _F,
)
# "the latest French player to win ...", "the most recent team to win back-to-back ...":
# a record qualified by a category changes slowly even though it says "latest".
_QUALIFIED_LATEST_RE = re.compile(
    r"\b(?:latest|most\s+recent|last)\s+(?:\w+[\s-]+){1,4}?to\s+(?:win|be|become|have|hold|"
    r"receive|reach|score|do|make|get|take|play|walk|go|climb|visit|land)\b",
    _F,
)
_FIRST_TO_RE = re.compile(
    r"\b(?:first|earliest)\s+(?:ever\s+)?(?:\w+[\s-]+){0,4}?(?:to|ever)\b"
    r"|\bwas\s+the\s+first\b|\bfirst\s+(?:film|book|movie|song|album|person|man|woman)\b",
    _F,
)
# "current" or "now" makes even a "first ... to" question relative to today.
_NOW_WORD_RE = re.compile(r"\b(?:current(?:ly)?|now|today|present)\b", _F)
_FAST: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "latest",
        re.compile(r"\b(?:latest|newest|most\s+recent(?:ly)?|just\s+(?:released|announced))\b", _F),
    ),
    (
        "upcoming",
        re.compile(r"\b(?:upcoming|next|forthcoming|coming\s+soon|scheduled\s+for)\b", _F),
    ),
    (
        "this period",
        re.compile(
            r"\bthis\s+(?:week|month|year|season|quarter|weekend)(?:'s)?\b|\bthis\s+year'?s\b", _F
        ),
    ),
    ("so far", re.compile(r"\bso\s+far\b|\bto\s+date\b|\byet\b|\bstill\b|\bas\s+of\s+now\b", _F)),
    ("recent", re.compile(r"\brecent(?:ly)?\b|\bthese\s+days\b|\bnowadays\b", _F)),
    ("titleholder", re.compile(rf"\b(?:reigning|defending)\b|\bchampions?\b{_GAP}\bnow\b", _F)),
    ("current", re.compile(r"\bcurrent(?:ly)?\b|\bnow\b|\bpresent(?:ly)?\b|\bas\s+of\b", _F)),
    (
        "live count",
        re.compile(
            rf"\bfollowers\b|\bsubscribers\b|\bcurrent\s+age\b|\bhow\s+old\s+is\b{_GAP}\bnow\b"
            r"|\bpeople\s+(?:are\s+there\s+)?in\s+the\s+world\b|\bworld\s+population\b"
            r"|\bstandings\b|\branking\b|\bpolls?\b|\bleaderboard\b|\bbox\s+office\b",
            _F,
        ),
    ),
)
# Things whose state changes over years: rules in force, records, superlatives, rosters.
_SLOW_TOPIC_RE = re.compile(
    r"\b(?:regulat\w*|laws?|legal|legislation|guidance|guidelines?|polic(?:y|ies)|rules?|"
    r"requires?|requirements?|minimum\s+wage|wages?|tax\s+rates?|tax(?:es)?|tariffs?|"
    r"directive|act|compliance|standards?|recommendations?|approved|approval|licen[cs]e)\b",
    _F,
)
_SLOW: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("rules in force", _SLOW_TOPIC_RE),
    ("record", re.compile(r"\brecords?\b|\bof\s+all\s+time\b|\bever\b|\bin\s+history\b", _F)),
    (
        "superlative",
        re.compile(
            r"\b(?:largest|biggest|smallest|tallest|highest|lowest|longest|shortest|oldest|"
            r"youngest|deepest|fastest|richest|hottest|coldest|most\s+\w+|best-selling|"
            r"\w+est-\w+)\b",
            _F,
        ),
    ),
    (
        "roster",
        re.compile(
            r"\bplays?\s+for\b|\bteam\s+does\b|\bclub\s+does\b|\bmarried\s+to\b|\bwho\s+owns\b"
            r"|\bowner\s+of\b|\bheadquarter\w*\b|\bpopulation\s+of\b|\bhow\s+old\s+is\b",
            _F,
        ),
    ),
    ("ongoing state", re.compile(rf"\bhow\s+long\s+(?:has|have)\b{_GAP}\bbeen\b", _F)),
    (
        "cumulative count",
        re.compile(rf"\bhow\s+many\b{_GAP}\b(?:have|has)\b|\bin\s+total\b|\btotal\s+number\b", _F),
    ),
    (
        "version",
        re.compile(
            r"\bversions?\b|\breleases?\b|\bv\d+(?:\.\d+)*\b|\b[a-z][\w+#-]*\s+\d+(?:\.\d+)+\b"
            r"|\bsupported\b|\bdeprecated\b",
            _F,
        ),
    ),
)
_INSENSITIVE: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "historical event",
        re.compile(
            r"\b(?:invented|founded|born|died|painted|directed|wrote|written|composed|"
            r"discovered|created|built|premiered|assassinated|signed|established|launched|"
            r"killed|won\s+(?:the\s+)?\d{4})\b|\bhistor(?:y|ical)\b|\bancient\b|\boriginally\b",
            _F,
        ),
    ),
    (
        "definition",
        re.compile(
            r"\bcapital\s+of\b|\bdefinition\s+of\b|\bmeaning\s+of\b|\bstand\s+for\b"
            r"|\bwhat\s+does\s+\S+\s+mean\b|\bformula\s+for\b|\bhow\s+many\s+\w+\s+(?:in|are\s+in)"
            r"\s+an?\b|\bboiling\s+point\b|\bspeed\s+of\s+light\b|\bname\s+of\s+the\s+main\b",
            _F,
        ),
    ),
    (
        "past tense",
        re.compile(
            rf"^\s*(?:when|where|who|what|which|how|in\s+what\s+\w+)\b{_GAP}\b(?:did|was|were)\b"
            r"|^\s*(?:did|was|were)\b",
            _F,
        ),
    ),
)


def _first(table: Sequence[tuple[str, re.Pattern[str]]], text: str) -> tuple[str, str] | None:
    for label, pattern in table:
        m = pattern.search(text)
        if m:
            return label, m.group(0).strip()
    return None


def classify_freshness(question: str, *, now: datetime | None = None) -> FreshnessClass:
    """Classify how fast the answer to ``question`` changes, with the cues that decided it.

    Rules, in order (the first that fires decides):

    1. a year two or more years before ``now`` anchors the question in the past → insensitive
       ("in 2021 ...", "the 2022 World Cup"), unless it opens a range to the present ("since
       2009", "between 2009 and now");
    2. "the first X to ..." is a record that cannot change → insensitive;
    3. prices, exchange rates, weather, live scores, service status, the clock, "today",
       "right now" → real-time (but "right now" on a rule in force, such as a minimum wage,
       is slow);
    4. "the current CEO / host / president ..." → slow: office holders change over years;
    5. "the latest/most recent <category> to win ..." → slow (a qualified record);
    6. latest, most recent, upcoming, next, this week/month/year, so far, yet, still,
       recent, current, live counts (followers, population, current age) → fast; "current"
       or "now" on a rule in force is slow;
    7. the current year → fast; last year → slow;
    8. rules in force (regulations, guidance, laws, wages, taxes), records, superlatives,
       rosters, cumulative counts, versions and releases → slow;
    9. historical events, definitions, past tense → insensitive;
    10. otherwise insensitive.
    """
    regime, label, cue = _rule_decision(question, now or datetime.now(UTC))
    return _with_confidence(FreshnessClass(regime=regime, cues=[cue]), label)


def _rule_decision(question: str, today: datetime) -> tuple[Regime, str, str]:
    """:func:`classify_freshness`'s rules: the regime, the label of the rule that decided (one
    of :data:`RULE_LABELS`) and the cue it read."""
    # A question is a sentence or two; beyond this it is a document, and the cues are up front.
    q = fold_whitespace(question[:_MAX_QUESTION_CHARS])
    years = [int(y) for y in _YEAR_RE.findall(q)]
    open_range = _OPEN_RANGE_RE.search(q)
    if years and not open_range:
        past = [y for y in years if y <= today.year - 2]
        if past and len(past) == len(years):
            return Regime.INSENSITIVE, "past year", f"past year {past[0]}"
    first_to = _FIRST_TO_RE.search(q)
    if first_to and not _NOW_WORD_RE.search(q):
        return Regime.INSENSITIVE, "fixed record", f"fixed record: {first_to.group(0)!r}"
    slow_topic = _SLOW_TOPIC_RE.search(q)
    real_time = _first(_REAL_TIME, q)
    if real_time is not None:
        label, text = real_time
        if label == "now" and slow_topic:
            cue = f"rule in force asked {text!r}: {slow_topic.group(0)!r}"
            return Regime.SLOW, "rule in force asked now", cue
        return Regime.REAL_TIME, label, f"{label}: {text!r}"
    holder = _HOLDER_RE.search(q)
    if holder:
        return Regime.SLOW, "office holder", f"office holder: {holder.group(0)!r}"
    qualified = _QUALIFIED_LATEST_RE.search(q)
    if qualified:
        return Regime.SLOW, "qualified record", f"qualified record: {qualified.group(0)!r}"
    if open_range:
        return Regime.SLOW, "open range", f"count over an open range: {open_range.group(0)!r}"
    fast = _first(_FAST, q)
    if fast is not None:
        label, text = fast
        if label == "current" and slow_topic:
            cue = f"rule in force asked {text!r}: {slow_topic.group(0)!r}"
            return Regime.SLOW, "rule in force asked current", cue
        return Regime.FAST, label, f"{label}: {text!r}"
    if years and not open_range:
        if today.year in years:
            return Regime.FAST, "current year", f"current year {today.year}"
        if today.year - 1 in years:
            return Regime.SLOW, "last year", f"last year {today.year - 1}"
    slow = _first(_SLOW, q)
    if slow is not None:
        return Regime.SLOW, slow[0], f"{slow[0]}: {slow[1]!r}"
    insensitive = _first(_INSENSITIVE, q)
    if insensitive is not None:
        return Regime.INSENSITIVE, insensitive[0], f"{insensitive[0]}: {insensitive[1]!r}"
    return Regime.INSENSITIVE, "no cue", "no time-sensitive cue"


#: every label :func:`_rule_decision` can decide by, in a fixed order
RULE_LABELS: tuple[str, ...] = (
    "past year",
    "fixed record",
    "rule in force asked now",
    *dict.fromkeys(label for label, _ in _REAL_TIME),
    "office holder",
    "qualified record",
    "open range",
    *(label for label, _ in _FAST),
    "rule in force asked current",
    "current year",
    "last year",
    *(label for label, _ in _SLOW),
    *(label for label, _ in _INSENSITIVE),
    "no cue",
)
# Every cue pattern, whether or not it decided: (name, patterns).
_CUE_TABLES: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...] = (
    *(
        (f"{kind}:{label}", tuple(p for lab, p in table if lab == label))
        for kind, table in (
            ("real_time", _REAL_TIME),
            ("fast", _FAST),
            ("slow", _SLOW),
            ("insensitive", _INSENSITIVE),
        )
        for label in dict.fromkeys(lab for lab, _ in table)
    ),
    ("office holder", (_HOLDER_RE,)),
    ("qualified record", (_QUALIFIED_LATEST_RE,)),
    ("first to", (_FIRST_TO_RE,)),
    ("now word", (_NOW_WORD_RE,)),
    ("open range", (_OPEN_RANGE_RE,)),
)
_YEAR_FEATURES = ("past", "last", "current", "future")
#: the names of :func:`regime_features`, in order: the rules' regime, the rule that decided,
#: every cue that fired, and where the years the question names lie relative to ``now``
REGIME_FEATURE_NAMES: tuple[str, ...] = (
    *(f"rules={r.value}" for r in Regime),
    *(f"decided by={label}" for label in RULE_LABELS),
    *(f"cue={name}" for name, _ in _CUE_TABLES),
    *(f"year={where}" for where in _YEAR_FEATURES),
)


def regime_features(
    question: str, *, now: datetime | None = None
) -> tuple[list[float], tuple[Regime, str, str]]:
    """The cue-rule features of ``question`` (named by :data:`REGIME_FEATURE_NAMES`) and the
    rules' own decision (regime, rule label, cue)."""
    today = now or datetime.now(UTC)
    decision = _rule_decision(question, today)
    q = fold_whitespace(question[:_MAX_QUESTION_CHARS])
    years = {int(y) for y in _YEAR_RE.findall(q)}
    year_hits = (
        any(y <= today.year - 2 for y in years),
        today.year - 1 in years,
        today.year in years,
        any(y > today.year for y in years),
    )
    values = [
        *(float(decision[0] is r) for r in Regime),
        *(float(decision[1] == label) for label in RULE_LABELS),
        *(float(any(p.search(q) for p in patterns)) for _, patterns in _CUE_TABLES),
        *(float(hit) for hit in year_hits),
    ]
    return values, decision


# --------------------------------------------------------------------------------------------
# Regime confidence
# --------------------------------------------------------------------------------------------

#: the shipped confidence table, written by benchmarks/regime_confidence.py
REGIME_CONFIDENCE_PATH = Path(__file__).with_name("regime_confidence.json")
_CONFIDENCE_FORMAT = "citeguard-regime-confidence/1"
_REGIME_ORDER = (Regime.INSENSITIVE, Regime.SLOW, Regime.FAST, Regime.REAL_TIME)
#: the label :class:`RegimeConfidence` files the learned model's "insensitive → slow" under
MODEL_RAISE_LABEL = "model raise"


_FC = TypeVar("_FC", bound=FreshnessClass)


def _json_artifact(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in ``path``, or :class:`RegimeModelError` saying why not."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RegimeModelError(f"cannot read {what} {str(path)!r}: {exc}") from exc
    if not isinstance(data, dict):
        raise RegimeModelError(f"{str(path)!r} is not a {what}")
    return data


def merged_regime(regime: Regime) -> str:
    """The regime as the labelled data tells them apart: real-time and fast are one."""
    return "fast" if regime is Regime.REAL_TIME else regime.value


class RegimeConfidence:
    """How far the development data trusts each rule's regime: per deciding rule, the regime to
    gate on (the fastest one whose held-out "true regime is slower" rate is within the table's
    ``alpha``) and the rate at the rule's own regime. Written by
    benchmarks/regime_confidence.py; plain JSON."""

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
        (``"<regime>|*"``); an insensitive regime has no floor, so nothing to doubt."""
        key = merged_regime(regime)
        entry = self._entries.get(f"{key}|{label}") or self._entries.get(f"{key}|*")
        if entry is None or regime is Regime.INSENSITIVE:
            return [], None
        gate, error = entry
        low, high = _REGIME_ORDER.index(gate), _REGIME_ORDER.index(regime)
        plausible = [r for r in reversed(_REGIME_ORDER[low : high + 1])]
        rate = error.get(key)
        return (plausible if len(plausible) > 1 else []), (
            None if rate is None else round(1.0 - rate, 4)
        )


def _with_confidence(fc: _FC, label: str) -> _FC:
    """``fc`` with the plausible regimes and confidence of a decision by the rule ``label``
    (unchanged when the shipped table cannot be read: the regime stays confident, as before)."""
    try:
        table = RegimeConfidence.load()
    except RegimeModelError:
        return fc
    plausible, confidence = table.assess(fc.regime, label)
    cues = list(fc.cues)
    if plausible:
        slower = ", ".join(r.value for r in plausible[1:])
        cues.append(
            f"uncertain: {label!r} questions are often slower on held-out data ({slower} "
            f"plausible; {confidence:.0%} at least {fc.regime.value})"
            if confidence is not None
            else f"uncertain: {slower} plausible"
        )
    return fc.model_copy(update={"plausible": plausible, "confidence": confidence, "cues": cues})


# --------------------------------------------------------------------------------------------
# Learned regime model
# --------------------------------------------------------------------------------------------

#: the classes the learned model tells apart: does the answer change over time at all? How fast
#: it changes stays the rules' call (see :meth:`RegimeModel.decide`): no training source labels
#: slow against fast without a style confound (templated Wikidata questions are all slow, weekly
#: news quizzes all fast)
REGIME_CLASSES: tuple[str, ...] = ("insensitive", "changing")
#: the shipped weights, written by benchmarks/train_regime.py
REGIME_MODEL_PATH = Path(__file__).with_name("regime_model.json")
_REGIME_MODEL_FORMAT = "citeguard-regime-model/2"
_EMBEDDING_DIM = 384
_TOP_FEATURES = 3
_TRAILING_PUNCTUATION_RE = re.compile(r"[\s?.!]+$")


def regime_embedding_text(question: str) -> str:
    """The text the regime model embeds: whitespace folded, lower case, no closing "?", "." or
    "!". SituatedQA, the only source that labels never-changing questions, writes them as
    lower-case search queries without a question mark, so a model fitted on raw text learns
    "ends with ?" as "changing" (the other sources all end with one)."""
    text = fold_whitespace(question[:_MAX_QUESTION_CHARS])
    return _TRAILING_PUNCTUATION_RE.sub("", text).lower()


class RegimeModelError(CiteguardError):
    """The regime model's artifact or embedding model could not be loaded."""


class RegimeModel:
    """Binary logistic regression, P(the answer changes over time), over a question's
    all-MiniLM-L6-v2 embedding and its cue-rule features (:func:`regime_features`), fitted by
    benchmarks/train_regime.py. It can only add caution to the rules: see :meth:`decide`.

    The artifact is plain JSON (standardisation, weights, intercept, threshold); the math is
    numpy.
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        import numpy as np

        if data.get("format") != _REGIME_MODEL_FORMAT:
            raise RegimeModelError(f"not a regime model: format {data.get('format')!r}")
        if tuple(data.get("classes", ())) != REGIME_CLASSES:
            raise RegimeModelError(f"regime model classes {data.get('classes')!r} are unknown")
        if tuple(data.get("features", ())) != REGIME_FEATURE_NAMES:
            raise RegimeModelError("regime model features differ from regime_features()")
        dim = _EMBEDDING_DIM + len(REGIME_FEATURE_NAMES)
        try:
            self._coef = np.asarray(data["coef"], dtype=np.float64)
            self._intercept = float(data["intercept"])
            self._mean = np.asarray(data["mean"], dtype=np.float64)
            self._scale = np.asarray(data["scale"], dtype=np.float64)
            self.threshold = float(data["threshold"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RegimeModelError(f"malformed regime model: {exc}") from exc
        shapes = (self._coef.shape, self._mean.shape, self._scale.shape)
        if shapes != ((dim,), (dim,), (dim,)) or not (self._scale > 0).all():
            raise RegimeModelError(f"malformed regime model: shapes {shapes}")
        if not 0.0 < self.threshold < 1.0:
            raise RegimeModelError(f"regime model threshold {self.threshold} is not in (0, 1)")
        self.names: tuple[str, ...] = (
            *(f"embedding[{i}]" for i in range(_EMBEDDING_DIM)),
            *REGIME_FEATURE_NAMES,
        )
        self.meta: dict[str, Any] = dict(data.get("trained") or {})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RegimeModel:
        return cls(data)

    @staticmethod
    @functools.cache
    def load(path: Path = REGIME_MODEL_PATH) -> RegimeModel:
        """The model in ``path`` (the shipped one by default), read once per process."""
        return RegimeModel(_json_artifact(path, "regime model"))

    def features(
        self, embedding: Sequence[float] | npt.NDArray[np.float64], values: Sequence[float]
    ) -> npt.NDArray[np.float64]:
        import numpy as np

        vector = np.asarray(embedding, dtype=np.float64).reshape(-1)
        if vector.shape != (_EMBEDDING_DIM,):
            raise RegimeModelError(f"embedding of shape {vector.shape}, not ({_EMBEDDING_DIM},)")
        return np.concatenate([vector, np.asarray(values, dtype=np.float64)])

    def probabilities(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """P(class) for :data:`REGIME_CLASSES`, from the full feature vector ``x``."""
        import numpy as np

        z = (np.asarray(x, dtype=np.float64) - self._mean) / self._scale
        logit = float(self._coef @ z) + self._intercept
        changing = 0.5 * (1.0 + np.tanh(0.5 * logit))  # the logistic, without overflow
        return np.array([1.0 - changing, changing])

    def top_features(self, x: npt.NDArray[np.float64], k: int) -> list[tuple[str, float]]:
        """The present features that pushed most towards class ``k`` of
        :data:`REGIME_CLASSES`, with the embedding's dimensions summed into one entry."""
        import numpy as np

        z = (np.asarray(x, dtype=np.float64) - self._mean) / self._scale
        push = (1.0 if k == 1 else -1.0) * self._coef * z
        out = [("embedding", float(push[:_EMBEDDING_DIM].sum()))]
        out += [
            (self.names[j], float(push[j]))
            for j in range(_EMBEDDING_DIM, len(self.names))
            if x[j] != 0.0
        ]
        out.sort(key=lambda item: -item[1])
        return [(name, round(v, 3)) for name, v in out[:_TOP_FEATURES] if v > 0]

    def decide(
        self, probabilities: npt.NDArray[np.float64], rules: tuple[Regime, str, str]
    ) -> Regime:
        """The regime: the rules', except that a question the rules call insensitive is slow
        when the model says its answer changes (P(changing) above the artifact's threshold).
        The model never lowers the rules' regime: held out, lowering turned 9 to 29% of the
        weekly news questions (RealTimeQA) insensitive and fixed nothing on FreshQA."""
        if rules[0] is Regime.INSENSITIVE and float(probabilities[1]) > self.threshold:
            return Regime.SLOW
        return rules[0]


# One embedding model per process, loaded on first use by whichever thread needs it.
_ENCODER_LOCK = threading.Lock()
_ENCODER: Any = None


def _sentence_encoder() -> Any:
    global _ENCODER
    with _ENCODER_LOCK:
        if _ENCODER is None:
            from citeguard.checks.onnx_minilm import OnnxMiniLMEncoder

            encoder = OnnxMiniLMEncoder(threads=1)
            try:
                encoder.load()
            except CiteguardError as exc:
                raise RegimeModelError(f"cannot load the embedding model: {exc}") from exc
            _ENCODER = encoder
        return _ENCODER


def embed_questions(questions: Sequence[str]) -> list[npt.NDArray[np.float64]]:
    """Unit-length all-MiniLM-L6-v2 sentence embeddings of ``questions`` (the shipped int8
    encoder, :class:`~citeguard.checks.onnx_minilm.OnnxMiniLMEncoder`: mean-pooled, one
    question a pass), each read as :func:`regime_embedding_text`.

    Blocks: loading the model the first time takes most of a second, so call it off the event
    loop.
    """
    import numpy as np

    if not questions:
        return []
    encoded = _sentence_encoder().encode([regime_embedding_text(q) for q in questions])
    return [np.asarray(e.vector, dtype=np.float64) for e in encoded]


class ModelFreshnessClass(FreshnessClass):
    """A :class:`FreshnessClass` from :class:`LearnedRegimeClassifier`, with what decided it.

    ``backend`` is ``"model"``, or ``"rules"`` when the model could not run (``fallback`` says
    why). ``probabilities`` are the model's, by class (insensitive, changing: how fast an answer
    changes is the rules' call); ``top_features`` the present features that pushed most towards
    the model's class; ``rules_regime`` the deterministic rules' own answer.
    """

    backend: Literal["model", "rules"]
    probabilities: dict[str, float] = Field(default_factory=dict)
    top_features: list[str] = Field(default_factory=list)
    rules_regime: Regime
    fallback: str | None = None


#: the errors that make the learned classifier fall back to the rules
_MODEL_UNAVAILABLE = (ImportError, OSError, CiteguardError)


class LearnedRegimeClassifier:
    """The question's regime by :class:`RegimeModel`, the rules as features and as fallback.

    The embedding model (all-MiniLM-L6-v2, int8 on ONNX Runtime, shipped in the package) loads
    once per process, on first use, in this classifier's own worker thread; :meth:`classify`
    runs inference there too, so the event loop never blocks on it. Results are remembered per
    question and year (the features depend on ``now`` only through its year), up to
    ``cache_size`` questions. Without its runtime, or with an unreadable artifact or model
    file, every question gets the rules' regime with the reason in ``fallback`` (and a
    ``freshness.regime_fallback`` finding on the axis).

    ``model`` and ``embed`` replace the shipped artifact and the MiniLM encoder (tests).
    """

    def __init__(
        self,
        model: RegimeModel | None = None,
        *,
        embed: Callable[[Sequence[str]], Sequence[Sequence[float]]] | None = None,
        cache_size: int = 512,
    ) -> None:
        self._model = model
        self._embed = embed or embed_questions
        self._cache_size = cache_size
        self._seen: dict[tuple[str, int], ModelFreshnessClass] = {}
        self._unavailable: str | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    @property
    def unavailable(self) -> str | None:
        """Why the model cannot run, once a classification found out; else ``None``."""
        return self._unavailable

    def classify_sync(self, question: str, *, now: datetime | None = None) -> ModelFreshnessClass:
        """:meth:`classify` in the calling thread (blocks: the first call loads the model)."""
        today = now or datetime.now(UTC)
        key = (question, today.year)
        hit = self._seen.get(key)
        if hit is not None:
            return hit
        fclass = self._classify(question, today)
        self._seen[key] = fclass
        while len(self._seen) > self._cache_size:
            self._seen.pop(next(iter(self._seen)), None)
        return fclass

    async def classify(self, question: str, *, now: datetime | None = None) -> FreshnessClass:
        """The model's regime for ``question``, computed in the classifier's worker thread."""
        today = now or datetime.now(UTC)
        hit = self._seen.get((question, today.year))
        if hit is not None:
            return hit
        loop = asyncio.get_running_loop()
        call = functools.partial(self.classify_sync, question, now=today)
        return await loop.run_in_executor(self._worker(), call)

    async def warm_up(self) -> None:
        """Load the artifact and the embedding model now, off the event loop."""
        await self.classify("What is the capital of France?", now=datetime.now(UTC))

    async def aclose(self) -> None:
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)

    def _worker(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="citeguard-regime")
            return self._executor

    def _classify(self, question: str, today: datetime) -> ModelFreshnessClass:
        values, rules = regime_features(question, now=today)
        rules_regime, rules_label, rules_cue = rules
        if self._unavailable is None:
            try:
                model = self._model if self._model is not None else RegimeModel.load()
                x = model.features(self._embed([question])[0], values)
            except _MODEL_UNAVAILABLE as exc:
                self._unavailable = f"{type(exc).__name__}: {exc}"
            else:
                probs = model.probabilities(x)
                regime = model.decide(probs, rules)
                k = int(probs.argmax())
                top = [f"{name} ({v:+.2f})" for name, v in model.top_features(x, k)]
                by_class = {
                    c: round(float(p), 4) for c, p in zip(REGIME_CLASSES, probs, strict=True)
                }
                shown = ", ".join(f"{c} {p:.2f}" for c, p in by_class.items())
                cues = [f"model: {REGIME_CLASSES[k]} ({shown})"]
                if regime is not rules_regime:
                    cues.append(
                        f"the model overrules the rules' {rules_regime.value}: the answer changes "
                        f"(P {by_class['changing']:.2f} > {model.threshold:g}), so {regime.value}"
                    )
                cues.append(f"rules: {rules_regime.value} ({rules_cue})")
                if top:
                    cues.append("top features: " + ", ".join(top))
                fc = ModelFreshnessClass(
                    regime=regime,
                    cues=cues,
                    backend="model",
                    probabilities=by_class,
                    top_features=top,
                    rules_regime=rules_regime,
                )
                label = MODEL_RAISE_LABEL if regime is not rules_regime else rules_label
                return _with_confidence(fc, label)
        reason = self._unavailable
        fc = ModelFreshnessClass(
            regime=rules_regime,
            cues=[f"regime model unavailable ({reason}); deterministic rules used", rules_cue],
            backend="rules",
            rules_regime=rules_regime,
            fallback=reason,
        )
        return _with_confidence(fc, rules_label)


# --------------------------------------------------------------------------------------------
# Recency caveat
# --------------------------------------------------------------------------------------------

# The date after the cue is citeguard.dates.DATE_PATTERN, read by date_from_match.
_CAVEAT_CUE = (
    r"\b(?:as\s+(?:of|at|on)|(?:current|accurate|correct|valid|true)\s+as\s+(?:of|at)|"
    r"(?:last\s+)?(?:checked|retrieved|accessed|verified|updated|reviewed)(?:\s+on)?|"
    r"at\s+(?:the\s+)?time\s+of\s+(?:writing|checking|publication)|data\s+(?:from|through)|"
    r"prices?\s+(?:as\s+of|on)|figures\s+(?:as\s+of|from)|snapshot\s+(?:of|from))"
)
# The date may follow the cue after a few words ("as of today (2 December 2026)").
_CAVEAT_RE = re.compile(rf"{_CAVEAT_CUE}[^.\n;]{{0,30}}?(?:{DATE_PATTERN})", _F)


def find_caveat(answer_text: str) -> CaveatMatch | None:
    """The first dated recency caveat in ``answer_text`` ("as of 2 December 2026", ...).

    A caveat is a cue (as of, checked, retrieved, last updated, at the time of writing, ...)
    followed within a few words by a date: a day ("2 Dec 2026", "December 2, 2026",
    "2026-12-02"), a month ("Dec 2026", "2026-12") or a bare year. A caveat dated to a year
    only is returned (granularity "year") but does not satisfy the check.
    """
    best: CaveatMatch | None = None
    # a caveat over 512 characters (a run of spaces in it) is not seen: the check only gets stricter
    for m in finditer_windowed(_CAVEAT_RE, answer_text, overlap=512):
        date, granularity = date_from_match(m)
        date_start = next(
            (m.start(k) for k in ("dmy", "mdy", "my", "iso", "num", "year") if m.group(k)),
            m.start(),
        )
        match = CaveatMatch(
            text=m.group(0),
            start=m.start(),
            end=m.end(),
            date_text=answer_text[date_start : m.end()],
            date=date,
            granularity=granularity,
        )
        if granularity != "year":
            return match
        best = best or match
    return best


# --------------------------------------------------------------------------------------------
# Source dates and the axis
# --------------------------------------------------------------------------------------------


def source_date(
    report: CitationReport, search_published: datetime | None
) -> tuple[datetime | None, str]:
    """The date a cited source speaks for and where it came from.

    The page's modified date, else its published date, else the search result's published
    date, else ``(None, "none")``. HTTP ``Last-Modified`` reaches ``modified`` during page
    extraction, so it ranks with the page's own modified date. A published date guessed from the
    page's text (:func:`is_weak_date_source`) ranks below the search result's date, as
    ``"published_weak"``.
    """
    if report.modified is not None:
        return as_aware(report.modified), "modified"
    weak = is_weak_date_source(report.date_source)
    if report.published is not None and not weak:
        return as_aware(report.published), "published"
    if search_published is not None:
        return as_aware(search_published), "search"
    if report.published is not None:
        return as_aware(report.published), "published_weak"
    return None, "none"


#: ``Page.date_source`` values read from the page's text rather than its markup or URL
WEAK_DATE_SOURCES = frozenset({"htmldate"})


def is_weak_date_source(date_source: str | None) -> bool:
    """Whether a page's publication date came from a text heuristic (htmldate's guess), not
    from structured metadata (JSON-LD, meta tags, ``<time>``, ``itemprop``), the URL or a PDF's
    own metadata. Such a date cannot alone make a source stale."""
    return date_source is not None and date_source.split("+", 1)[0] in WEAK_DATE_SOURCES


def _date_gap(report: CitationReport, search_published: datetime | None) -> float | None:
    """Days between the search result's date and the nearest of the page's own dates.

    The provider's date (``published_date``, ``page_age``) may be the page's publication or its
    last update, so the nearer of the two counts. None when either side has no date.
    """
    if search_published is None:
        return None
    searched = as_aware(search_published)
    gaps = [
        abs((searched - as_aware(d)).total_seconds()) / 86400.0
        for d in (report.published, report.modified)
        if d is not None
    ]
    return min(gaps) if gaps else None


def _get_normalized(dates: Mapping[str, datetime], url: str | None) -> datetime | None:
    if not url:
        return None
    try:
        return dates.get(normalize_url(url))
    except UrlProblem:
        return None


def _day(dt: datetime) -> str:
    return f"{dt.day} {dt:%B %Y}"


def _iso(dt: datetime | None) -> str | None:
    return None if dt is None else dt.isoformat()


_FAST_REGIMES = frozenset({Regime.FAST, Regime.REAL_TIME})


def _regime_model_details(
    fc: FreshnessClass, details: dict[str, object], findings: list[Finding]
) -> None:
    """The learned regime model's probabilities and top features, or why it fell back."""
    if not isinstance(fc, ModelFreshnessClass):
        return
    details["regime_backend"] = fc.backend
    details["rules_regime"] = fc.rules_regime.value
    if fc.backend == "model":
        details["regime_probabilities"] = dict(fc.probabilities)
        details["regime_top_features"] = list(fc.top_features)
    if fc.fallback is not None:
        findings.append(
            Finding(
                code="freshness.regime_fallback",
                message=(
                    f"the regime model is unavailable ({fc.fallback}); the question's regime "
                    f"({fc.regime.value.replace('_', '-')}) comes from the deterministic rules"
                ),
                severity=Severity.INFO,
                axis="freshness",
                details={"reason": fc.fallback, "hint": LOCAL_MODEL_HINT},
            )
        )


def _normalized_keys(dates: Mapping[str, datetime]) -> dict[str, datetime]:
    out: dict[str, datetime] = {}
    for url, date in dates.items():
        try:
            out.setdefault(normalize_url(url), date)
        except UrlProblem:
            continue
    return out


def _days(days: float) -> str:
    if days >= 730:
        return f"{days / 365.25:.1f} years"
    if days >= 10:
        return f"{days:.0f} days"
    if days >= 2:
        # One decimal, so "2.5 days old" is not read as within a "2 days" floor.
        return f"{days:.1f}".removesuffix(".0") + " days"
    return f"{days * 24:.0f} hours"


def check_freshness(
    question: str,
    answer_text: str,
    citations: Sequence[CitationReport],
    policy: FreshnessPolicy,
    *,
    now: datetime,
    search_dates: Mapping[str, datetime] | None = None,
    fclass: FreshnessClass | None = None,
) -> AxisResult:
    """Judge the recency of one answer's sources against the question's regime.

    ``search_dates`` maps a cited URL (as cited, normalised or final) to the published date a
    recorded search result gave it. ``score`` is the share of counted sources within the floor
    (1.0 when the regime has no floor). ``details`` carries the regime, cues, median recency,
    floor and each URL's date and its source (and, for a dated page, the search result's date
    and the gap to it). The median takes the page's own date first (:func:`source_date`); when
    a search result dated the page more than ``policy.date_disagreement_days`` from both its
    published and modified dates, that is a ``freshness.date_disagreement`` warning: the user
    saw one date in the results and the page says another.
    """
    if not policy.enabled:
        return AxisResult(
            name="freshness", passed=True, evaluated=False, details={"reason": "disabled"}
        )
    now = as_aware(now)
    fc = fclass if fclass is not None else classify_freshness(question, now=now)
    gate = fc.gate_regime if policy.uncertain_regime == "lenient" else fc.regime
    result = _gate(answer_text, citations, policy, now, search_dates or {}, fc, gate)
    if gate is fc.regime:
        return result
    guess = _gate(answer_text, citations, policy, now, search_dates or {}, fc, fc.regime)
    return _uncertain(result, guess, fc, gate)


def _uncertain(
    result: AxisResult, guess: AxisResult, fc: FreshnessClass, gate: Regime
) -> AxisResult:
    """The lenient result, with a ``freshness.regime_uncertain`` finding and what the best
    guess's floor would have rejected, as warnings (no hard reject on a regime that may be
    wrong: a missing caveat and a source past the guess's floor are shown, not gated)."""
    seen = {(f.code, f.url) for f in result.findings}
    would = [f for f in guess.findings if f.severity is Severity.ERROR]
    findings = [
        Finding(
            code="freshness.regime_uncertain",
            message=(
                f"the question looks {fc.regime.value.replace('_', '-')}, but held-out questions "
                f"like it are often slower ({', '.join(r.value for r in fc.plausible)} "
                f"plausible); gated on the most lenient floor, {gate.value.replace('_', '-')}"
                + (
                    f"; under the {fc.regime.value.replace('_', '-')} floor it would fail: "
                    + "; ".join(f.message for f in would)
                    if would
                    else ""
                )
            ),
            severity=Severity.WARNING if would else Severity.INFO,
            axis="freshness",
            details={
                "regime": fc.regime.value,
                "gate_regime": gate.value,
                "plausible": [r.value for r in fc.plausible],
                "confidence": fc.confidence,
                "would_fail": [f.code for f in would],
            },
        ),
        *result.findings,
        *(
            f.model_copy(
                update={
                    "severity": Severity.WARNING,
                    "details": {**f.details, "if_regime": fc.regime.value},
                }
            )
            for f in would
            if (f.code, f.url) not in seen
        ),
    ]
    details = {
        **result.details,
        "regime": fc.regime.value,
        "gate_regime": gate.value,
        "plausible_regimes": [r.value for r in fc.plausible],
        "regime_confidence": fc.confidence,
    }
    evaluated = result.evaluated or guess.evaluated
    return result.model_copy(
        update={"findings": findings, "details": details, "evaluated": evaluated}
    )


def _gate(
    answer_text: str,
    citations: Sequence[CitationReport],
    policy: FreshnessPolicy,
    now: datetime,
    dates: Mapping[str, datetime],
    fc: FreshnessClass,
    regime: Regime,
) -> AxisResult:
    """The freshness axis with ``regime``'s floor, caveat rule and undated rule."""
    floor = policy.floor_days.get(regime.value)
    fast = regime in _FAST_REGIMES
    undated_stale = fast and policy.undated_counts_as_stale

    findings: list[Finding] = []
    offending: list[str] = []
    per_url: dict[str, dict[str, object]] = {}
    recencies: list[float] = []
    undated: list[str] = []
    stale: list[tuple[str, float | None]] = []
    weak_stale: list[tuple[str, CitationReport, float]] = []
    counted = 0
    normalized_dates: dict[str, datetime] | None = None
    max_gap = policy.date_disagreement_days
    # (url, report, search date, days between it and the nearest page date)
    disagreements: list[tuple[str, CitationReport, datetime, float]] = []
    for report in citations:
        if report.status.outcome is not Outcome.RESOLVES:
            continue
        counted += 1
        url = report.normalized_url or report.url
        searched = (
            dates.get(report.url)
            or (dates.get(report.normalized_url) if report.normalized_url else None)
            or (dates.get(report.final_url) if report.final_url else None)
        )
        if searched is None and dates and (report.normalized_url or report.final_url):
            if normalized_dates is None:
                # Search APIs and answers may spell one URL differently (case, slashes).
                normalized_dates = _normalized_keys(dates)
            searched = (
                normalized_dates.get(report.normalized_url) if report.normalized_url else None
            ) or _get_normalized(normalized_dates, report.final_url)
        date, source = source_date(report, searched)
        gap = _date_gap(report, searched)
        if gap is not None and max_gap is not None and gap > max_gap and searched is not None:
            disagreements.append((url, report, as_aware(searched), gap))
        if date is None:
            undated.append(url)
            per_url[url] = {"date": None, "source": source, "recency_days": None}
            if undated_stale:
                recencies.append(float("inf"))
                stale.append((url, None))
            continue
        # A date in the future (clock skew, scheduled posts) is as fresh as now, no fresher.
        days = max(0.0, (now - date).total_seconds() / 86400.0)
        per_url[url] = {"date": date.isoformat(), "source": source, "recency_days": round(days, 2)}
        if report.date_source is not None:
            per_url[url]["date_source"] = report.date_source
        if source == "published_weak" and floor is not None and days > floor:
            # a text heuristic's date alone cannot make a source stale: shown, not counted
            weak_stale.append((url, report, days))
            continue
        recencies.append(days)
        if searched is not None and source != "search":
            per_url[url]["search_date"] = as_aware(searched).isoformat()
            per_url[url]["search_gap_days"] = None if gap is None else round(gap, 2)
        if floor is not None and days > floor:
            stale.append((url, days))

    details: dict[str, object] = {
        "regime": regime.value,
        "regime_confidence": fc.confidence,
        "cues": fc.cues,
        "floor_days": floor,
        "sources": per_url,
        "undated": undated,
    }
    _regime_model_details(fc, details, findings)
    if counted == 0:
        details["reason"] = "no cited URL resolved; nothing to date"
    median: float | None = statistics.median(recencies) if recencies else None
    details["median_recency_days"] = (
        None if median is None else ("inf" if median == float("inf") else round(median, 2))
    )

    # Median recency against the floor.
    median_fails = floor is not None and median is not None and median > floor
    if median_fails and median is not None and floor is not None:
        if median == float("inf"):
            what = "the median cited source is undated (undated sources count as stale)"
        else:
            what = f"the median cited source is {_days(median)} old"
        findings.append(
            Finding(
                code="freshness.stale_median",
                message=(
                    f"{what}; a {regime.value.replace('_', '-')} question needs sources at most "
                    f"{_days(floor)} old"
                ),
                axis="freshness",
                details={
                    "median_recency_days": details["median_recency_days"],
                    "floor_days": floor,
                    "feedback": (
                        f"Cite sources updated within the last {_days(floor)}; the answer "
                        "depends on information that changes quickly."
                    ),
                },
            )
        )
    # Each stale source on a fast question is an offender, so regeneration drops it.
    if fast:
        for url, age in stale:
            offending.append(url)
            findings.append(
                Finding(
                    code="freshness.stale_source" if age is not None else "freshness.undated",
                    message=(
                        f"{url} is {_days(age)} old, past the {_days(floor or 0)} floor for a "
                        f"{regime.value.replace('_', '-')} question"
                        if age is not None
                        else f"{url} has no date, so it counts as stale for a "
                        f"{regime.value.replace('_', '-')} question"
                    ),
                    severity=Severity.ERROR if median_fails else Severity.WARNING,
                    axis="freshness",
                    url=url,
                    details={"recency_days": None if age is None else round(age, 2)},
                )
            )
    if undated and not undated_stale and floor is not None:
        findings.append(
            Finding(
                code="freshness.undated",
                message=(
                    f"{len(undated)} cited source(s) have no date and were left out of the "
                    f"median: {', '.join(undated)}"
                ),
                severity=Severity.WARNING,
                axis="freshness",
                details={"urls": undated},
            )
        )
    for url, report, age in weak_stale:
        findings.append(
            Finding(
                code="freshness.weak_date",
                message=(
                    f"{url} looks {_days(age)} old, past the {_days(floor or 0)} floor for a "
                    f"{regime.value.replace('_', '-')} question, but that date was guessed from "
                    f"the page's text ({report.date_source}), not its metadata: not counted as "
                    "stale"
                ),
                severity=Severity.WARNING,
                axis="freshness",
                url=url,
                details={"recency_days": round(age, 2), "date_source": report.date_source},
            )
        )
    # The date the user saw in the search results against the page's own dates.
    for url, report, searched, gap in disagreements:
        page_dates = {
            "published": None if report.published is None else as_aware(report.published),
            "modified": None if report.modified is None else as_aware(report.modified),
        }
        said = " and ".join(f"{kind} {_day(d)}" for kind, d in page_dates.items() if d is not None)
        findings.append(
            Finding(
                code="freshness.date_disagreement",
                message=(
                    f"{url}: the search result dated it {_day(searched)}, but the page says "
                    f"{said}, {_days(gap)} apart; the median recency uses the page's date"
                ),
                severity=Severity.WARNING,
                axis="freshness",
                url=url,
                details={
                    "search_date": searched.isoformat(),
                    "page_published": _iso(page_dates["published"]),
                    "page_modified": _iso(page_dates["modified"]),
                    "gap_days": round(gap, 2),
                    "max_gap_days": max_gap,
                },
            )
        )

    # A dated caveat for fast and real-time questions.
    if fast:
        caveat = find_caveat(answer_text)
        details["caveat"] = None if caveat is None else caveat.model_dump(mode="json")
        if caveat is None or caveat.granularity == "year":
            problem = (
                "the answer has no dated recency caveat"
                if caveat is None
                else f"the recency caveat {caveat.text!r} names only a year"
            )
            findings.append(
                Finding(
                    code="freshness.missing_caveat",
                    message=(
                        f"{problem}; a {regime.value.replace('_', '-')} question needs one such "
                        f"as 'as of {now.day} {now:%B %Y}'"
                    ),
                    severity=Severity.ERROR if policy.require_caveat else Severity.WARNING,
                    axis="freshness",
                    details={
                        "feedback": (
                            "State when the information was checked, with a date: e.g. "
                            f"'as of {now.day} {now:%B %Y}'."
                        )
                    },
                )
            )

    if floor is None or not recencies:
        score = 1.0
    else:
        score = sum(1 for d in recencies if d <= floor) / len(recencies)
    passed = not any(f.severity is Severity.ERROR for f in findings)
    return AxisResult(
        name="freshness",
        passed=passed,
        score=round(score, 4),
        evaluated=counted > 0 or fast,
        findings=findings,
        offending_urls=offending,
        details=details,
    )


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


class FreshnessCheck:
    """The freshness axis as a registered check (see :func:`check_freshness`). The regime comes
    in through the context: the pipeline needs it before fetching (dates cost extra work)."""

    name = "freshness"
    hint = "Use recent sources and say as of when the information holds."
    feeds_back_when_advisory = False

    def __init__(self, policy: Policy) -> None:
        self._policy = policy.freshness

    async def run(self, ctx: CheckContext) -> AxisResult:
        if not self._policy.enabled:
            return skipped(self.name)
        return check_freshness(
            ctx.question,
            ctx.answer.text,
            ctx.citations,
            self._policy,
            now=ctx.now,
            search_dates=ctx.search_dates,
            fclass=ctx.regime,
        )

    def annotator(self, axis: AxisResult, verdict: Verdict) -> AnnotatorKind:
        return "CODE"

    async def aclose(self) -> None:
        return None

"""The freshness axis: is the answer built on sources recent enough for the question?

Freshness is a property of the question. "Capital of France" is *insensitive*; "who is the
current Jeopardy! host" is *slow* (changes over years); "the most recent Emmy winner" is *fast*
(changes within a year); "the current price of X" is *real-time* (changes within days).
:func:`classify_freshness` picks the regime with deterministic cue rules and lists the cues.

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
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from citeguard.checks.base import AnnotatorKind, CheckContext, skipped
from citeguard.checks.judge import ChatJudge, JudgeError
from citeguard.dates import DATE_PATTERN, as_aware, date_from_match
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
from citeguard.text import fold_whitespace
from citeguard.web.urls import UrlProblem, normalize_url

__all__ = [
    "CaveatMatch",
    "FreshnessClass",
    "JudgeError",
    "JudgeFreshnessClassifier",
    "Regime",
    "check_freshness",
    "classify_freshness",
    "find_caveat",
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
    today = now or datetime.now(UTC)
    # A question is a sentence or two; beyond this it is a document, and the cues are up front.
    q = fold_whitespace(question[:_MAX_QUESTION_CHARS])
    cues: list[str] = []

    def decide(regime: Regime, cue: str) -> FreshnessClass:
        cues.append(cue)
        return FreshnessClass(regime=regime, cues=cues)

    years = [int(y) for y in _YEAR_RE.findall(q)]
    open_range = _OPEN_RANGE_RE.search(q)
    if years and not open_range:
        past = [y for y in years if y <= today.year - 2]
        if past and len(past) == len(years):
            return decide(Regime.INSENSITIVE, f"past year {past[0]}")
    first_to = _FIRST_TO_RE.search(q)
    if first_to and not _NOW_WORD_RE.search(q):
        return decide(Regime.INSENSITIVE, f"fixed record: {first_to.group(0)!r}")
    slow_topic = _SLOW_TOPIC_RE.search(q)
    real_time = _first(_REAL_TIME, q)
    if real_time is not None:
        label, text = real_time
        if label == "now" and slow_topic:
            return decide(Regime.SLOW, f"rule in force asked {text!r}: {slow_topic.group(0)!r}")
        return decide(Regime.REAL_TIME, f"{label}: {text!r}")
    holder = _HOLDER_RE.search(q)
    if holder:
        return decide(Regime.SLOW, f"office holder: {holder.group(0)!r}")
    qualified = _QUALIFIED_LATEST_RE.search(q)
    if qualified:
        return decide(Regime.SLOW, f"qualified record: {qualified.group(0)!r}")
    if open_range:
        return decide(Regime.SLOW, f"count over an open range: {open_range.group(0)!r}")
    fast = _first(_FAST, q)
    if fast is not None:
        label, text = fast
        if label == "current" and slow_topic:
            return decide(Regime.SLOW, f"rule in force asked {text!r}: {slow_topic.group(0)!r}")
        return decide(Regime.FAST, f"{label}: {text!r}")
    if years and not open_range:
        if today.year in years:
            return decide(Regime.FAST, f"current year {today.year}")
        if today.year - 1 in years:
            return decide(Regime.SLOW, f"last year {today.year - 1}")
    slow = _first(_SLOW, q)
    if slow is not None:
        return decide(Regime.SLOW, f"{slow[0]}: {slow[1]!r}")
    insensitive = _first(_INSENSITIVE, q)
    if insensitive is not None:
        return decide(Regime.INSENSITIVE, f"{insensitive[0]}: {insensitive[1]!r}")
    return decide(Regime.INSENSITIVE, "no time-sensitive cue")


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
    for m in _CAVEAT_RE.finditer(answer_text):
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
    extraction, so it ranks with the page's own modified date.
    """
    if report.modified is not None:
        return as_aware(report.modified), "modified"
    if report.published is not None:
        return as_aware(report.published), "published"
    if search_published is not None:
        return as_aware(search_published), "search"
    return None, "none"


_FAST_REGIMES = frozenset({Regime.FAST, Regime.REAL_TIME})


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
    floor and each URL's date and its source.
    """
    if not policy.enabled:
        return AxisResult(
            name="freshness", passed=True, evaluated=False, details={"reason": "disabled"}
        )
    now = as_aware(now)
    fc = fclass if fclass is not None else classify_freshness(question, now=now)
    regime = fc.regime
    floor = policy.floor_days.get(regime.value)
    fast = regime in _FAST_REGIMES
    undated_stale = fast and policy.undated_counts_as_stale
    dates = search_dates or {}

    findings: list[Finding] = []
    offending: list[str] = []
    per_url: dict[str, dict[str, object]] = {}
    recencies: list[float] = []
    undated: list[str] = []
    stale: list[tuple[str, float | None]] = []
    counted = 0
    normalized_dates: dict[str, datetime] | None = None
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
        if searched is None and dates and report.normalized_url:
            if normalized_dates is None:
                # Search APIs and answers may spell one URL differently (case, slashes).
                normalized_dates = _normalized_keys(dates)
            searched = normalized_dates.get(report.normalized_url)
        date, source = source_date(report, searched)
        if date is None:
            undated.append(url)
            per_url[url] = {"date": None, "source": source, "recency_days": None}
            if undated_stale:
                recencies.append(float("inf"))
                stale.append((url, None))
            continue
        # A date in the future (clock skew, scheduled posts) is as fresh as now, no fresher.
        days = max(0.0, (now - date).total_seconds() / 86400.0)
        recencies.append(days)
        per_url[url] = {"date": date.isoformat(), "source": source, "recency_days": round(days, 2)}
        if floor is not None and days > floor:
            stale.append((url, days))

    details: dict[str, object] = {
        "regime": regime.value,
        "cues": fc.cues,
        "floor_days": floor,
        "sources": per_url,
        "undated": undated,
    }
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
                        "as 'as of 2 December 2026'"
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
    """The question's freshness regime, by the rules or by the judge the policy names.

    A judge is asked once per question (its answers are remembered, up to 512 questions, for
    every attempt of the loop); a fallback because the judge was down is not remembered, so
    the next check asks again.
    """

    def __init__(self, judge: JudgeFreshnessClassifier | None) -> None:
        self._judge = judge
        self._seen: dict[str, FreshnessClass] = {}

    async def classify(self, question: str, *, now: datetime) -> FreshnessClass:
        if self._judge is None:
            return classify_freshness(question, now=now)
        hit = self._seen.get(question)
        if hit is not None:
            return hit
        fclass = await self._judge.classify(question, now=now)
        if fclass.cues[:1] and fclass.cues[0].startswith("judge:"):
            self._seen[question] = fclass
            if len(self._seen) > _REGIME_CACHE_SIZE:
                del self._seen[next(iter(self._seen))]
        return fclass

    async def aclose(self) -> None:
        if self._judge is not None:
            await self._judge.aclose()


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

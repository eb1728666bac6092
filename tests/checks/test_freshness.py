"""The freshness axis: question regimes, source dates, median recency and the recency caveat."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from citeguard.checks.freshness import (
    FreshnessClass,
    JudgeFreshnessClassifier,
    Regime,
    check_freshness,
    classify_freshness,
    find_caveat,
    source_date,
)
from citeguard.models import CitationReport, CitationStatus, Severity
from citeguard.policy import FreshnessPolicy

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
# The floor, caveat and undated rules on the regime the classifier guessed: most rule regimes
# are uncertain on the development data, and the default ("lenient") gates them on a slower
# floor (tested below, test_uncertain_regime_*), so these tests pin the mechanics with "strict".
POLICY = FreshnessPolicy(uncertain_regime="strict")
DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "freshness" / "freshqa_dev.jsonl"


def report(
    url: str,
    *,
    modified: datetime | None = None,
    published: datetime | None = None,
    status: CitationStatus = CitationStatus.OK,
) -> CitationReport:
    return CitationReport(
        url=url,
        normalized_url=url,
        status=status,
        reason=status.value,
        modified=modified,
        published=published,
    )


def ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


# --------------------------------------------------------------------------------------------
# classify_freshness
# --------------------------------------------------------------------------------------------

REGIME_CASES = [
    # insensitive
    ("What is the capital of France?", Regime.INSENSITIVE),
    ("Who painted The Starry Night?", Regime.INSENSITIVE),
    ("When was the Eiffel Tower built?", Regime.INSENSITIVE),
    ("Who won the 1998 FIFA World Cup?", Regime.INSENSITIVE),
    ("Who was the first woman to win a Nobel Prize?", Regime.INSENSITIVE),
    ("What is the definition of entropy?", Regime.INSENSITIVE),
    ("Who won the Battle of Hastings?", Regime.INSENSITIVE),
    ("Who was the emperor of Rome when Pompeii was destroyed?", Regime.INSENSITIVE),
    ("When does episode 5 of season 2 of Severance come out?", Regime.INSENSITIVE),
    ("Who won season 2 of The Great British Baking Show?", Regime.INSENSITIVE),
    # slow
    ("Who is the current CEO of OpenAI?", Regime.SLOW),
    ("Who is the current Jeopardy! host?", Regime.SLOW),
    ("What is the minimum hourly wage in Tokyo right now?", Regime.SLOW),
    ("FDA guidance on AI as a medical device", Regime.SLOW),
    ("What is the largest passenger airplane?", Regime.SLOW),
    ("Who holds the marathon world record?", Regime.SLOW),
    ("Who is the latest French player to win the Ballon d'Or?", Regime.SLOW),
    ("What changed in Python 3.13?", Regime.SLOW),
    ("Who won the 2025 Nobel Prize in Physics?", Regime.SLOW),
    ("How many WHO emergency declarations have there been between 2009 and now?", Regime.SLOW),
    # slow: a person's role without "current", the holder before the present one, the last
    # occurrence so far, statistics, a record of who has done more
    ("Who is the mayor of Lyon?", Regime.SLOW),
    ("Who heads the European Central Bank?", Regime.SLOW),
    ("Which party holds the majority in the Bundestag?", Regime.SLOW),
    ("Who is the owner of Chelsea FC currently?", Regime.SLOW),
    ("Which club does Kylian Mbappe play for currently?", Regime.SLOW),
    ("Who was the previous chair of the Federal Reserve?", Regime.SLOW),
    ("When was the last time Italy won the Euros?", Regime.SLOW),
    ("When did Brazil last win the World Cup?", Regime.SLOW),
    ("What is the average house price in Ireland?", Regime.SLOW),
    ("Which player has scored the most goals in Champions League history?", Regime.SLOW),
    ("Who won the Stanley Cup?", Regime.SLOW),
    ("Who is the richest person of all time?", Regime.SLOW),
    ("Who is the US men's national team coach?", Regime.SLOW),
    ("When was the Olympics held in the United States last?", Regime.SLOW),
    ("Who has won the men's World Cup?", Regime.SLOW),
    # fast
    ("What is the most recent movie in the Marvel Cinematic Universe?", Regime.FAST),
    ("What is the latest version of Python?", Regime.FAST),
    ("When is the next full moon?", Regime.FAST),
    ("What GDPR fines have been issued so far this year?", Regime.FAST),
    ("Who is the reigning world chess champion?", Regime.FAST),
    ("Who won the 2026 Tour de France?", Regime.FAST),
    ("How many followers does the most-followed Instagram account have?", Regime.FAST),
    # fast: a new season, a release date ahead, a ranking, a price
    ("When does the new season of The Bear start?", Regime.FAST),
    ("When will GTA VI come out?", Regime.FAST),
    ("Who is the world number one in women's tennis?", Regime.FAST),
    ("What is Elon Musk's net worth?", Regime.FAST),
    ("How much does a Tesla Model Y cost?", Regime.FAST),
    ("Who is the richest person in the world?", Regime.FAST),
    ("When is Saturday Night Live coming back?", Regime.FAST),
    ("What is the price of a Big Mac in Japan?", Regime.FAST),
    ("Which club is at the top of the Bundesliga table?", Regime.FAST),
    # real-time
    ("What is the current price of bitcoin?", Regime.REAL_TIME),
    ("What is the EUR to USD exchange rate?", Regime.REAL_TIME),
    ("What's the weather in Paris tomorrow?", Regime.REAL_TIME),
    ("Is GitHub down right now?", Regime.REAL_TIME),
    ("What is the score of the Lakers game?", Regime.REAL_TIME),
    ("What month is it?", Regime.REAL_TIME),
    ("What is Apple's stock price today?", Regime.REAL_TIME),
    # issue 54: entity types, predicates and time anchors the first rules missed
    ("who's the governor of vermont", Regime.SLOW),  # a role, no "current"
    ("name of the mayor of lyon", Regime.SLOW),
    ("chief justice of the ontario court of appeal", Regime.SLOW),
    ("who is the starting quarterback for the denver broncos", Regime.SLOW),
    ("who was the 12th president of peru", Regime.INSENSITIVE),  # a numbered holder
    ("who won season 6 of the great pottery throw down", Regime.INSENSITIVE),
    ("when does episode 40 of the show air", Regime.INSENSITIVE),
    ("how many episodes of season 3 have aired", Regime.SLOW),  # counted so far
    ("what is the longest river in portugal", Regime.INSENSITIVE),  # nature
    ("what is the largest lake in canada by area", Regime.INSENSITIVE),
    ("what is the largest software company in the world", Regime.SLOW),  # a ranking
    ("what is the rank of brazil in coffee exports", Regime.SLOW),
    ("how many public libraries are there in boston", Regime.SLOW),  # a count of now
    ("number of electric buses in oslo", Regime.SLOW),
    ("what cities have hosted the winter olympics", Regime.SLOW),  # a list that grows
    ("who is the only woman to captain the club", Regime.SLOW),
    ("when did portugal win the european championship", Regime.SLOW),  # the latest win
    ("when did portugal first win the european championship", Regime.INSENSITIVE),
    ("who is playing at the halftime show", Regime.FAST),  # a fixture, present progressive
    ("where is the climate summit being held", Regime.FAST),
    ("who won the league title last season", Regime.FAST),  # a relative anchor
    ("the ferry line resumed service on tuesday. which port does it sail from?", Regime.FAST),
    ("the city council is considering a ban on what kind of scooter?", Regime.FAST),
    ("which carmaker has recalled its new hatchback over brake faults?", Regime.FAST),
]


@pytest.mark.parametrize(("question", "regime"), REGIME_CASES)
def test_regime_examples(question: str, regime: Regime) -> None:
    fc = classify_freshness(question, now=NOW)
    assert fc.regime is regime, fc
    assert fc.cues, "the cue that decided it is reported"


def test_years_are_relative_to_now() -> None:
    q = "Who won the 2025 Tour de France?"
    assert classify_freshness(q, now=datetime(2025, 8, 1, tzinfo=UTC)).regime is Regime.FAST
    assert classify_freshness(q, now=datetime(2026, 8, 1, tzinfo=UTC)).regime is Regime.SLOW
    assert classify_freshness(q, now=datetime(2028, 8, 1, tzinfo=UTC)).regime is Regime.INSENSITIVE


def test_freshqa_accuracy_floor() -> None:
    """A regression guard on the labelled FreshQA questions (78/100 when written)."""
    if not DATA.exists():
        pytest.skip(f"{DATA} is absent")
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]
    mapping = {"never-changing": "insensitive", "slow-changing": "slow", "fast-changing": "fast"}
    now = datetime(2026, 4, 21, tzinfo=UTC)  # the release the labels describe
    hits = 0
    for row in rows:
        regime = classify_freshness(row["question"], now=now).regime
        predicted = "fast" if regime in (Regime.FAST, Regime.REAL_TIME) else regime.value
        hits += predicted == mapping[row["fact_type"]]
    assert len(rows) == 100
    assert hits >= 72, f"{hits}/100"


# --------------------------------------------------------------------------------------------
# Caveat
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "granularity"),
    [
        ("Bitcoin trades near $90,000 (as of 2 December 2026).", "day"),
        ("As of Dec 2026, the rate is 1.08.", "month"),
        ("The rate was 1.08 as of 2026-12-02.", "day"),
        ("Prices change; checked 2 Dec 2026.", "day"),
        ("At the time of writing (December 2026), the champion is X.", "month"),
        ("Data retrieved on December 1, 2026 from the exchange.", "day"),
        ("Last updated: 1st December 2026.", "day"),
    ],
)
def test_caveat_present(text: str, granularity: str) -> None:
    caveat = find_caveat(text)
    assert caveat is not None
    assert caveat.granularity == granularity
    assert caveat.date is not None and caveat.date.year == 2026 and caveat.date.month == 12


@pytest.mark.parametrize(
    "text",
    [
        "Bitcoin trades near $90,000.",
        "As of today, bitcoin trades near $90,000.",
        "Prices change often, so check before buying.",
        "The 2 December 2026 launch was delayed.",  # a date, but no caveat
    ],
)
def test_caveat_absent(text: str) -> None:
    assert find_caveat(text) is None


def test_year_only_caveat_is_found_but_too_coarse() -> None:
    caveat = find_caveat("As of 2026 the price is about $90,000.")
    assert caveat is not None and caveat.granularity == "year"


# --------------------------------------------------------------------------------------------
# source_date
# --------------------------------------------------------------------------------------------


def test_source_date_precedence() -> None:
    both = report("https://a.example/", modified=ago(1), published=ago(100))
    assert source_date(both, ago(5)) == (ago(1), "modified")
    published = report("https://a.example/", published=ago(100))
    assert source_date(published, ago(5)) == (ago(100), "published")
    bare = report("https://a.example/")
    assert source_date(bare, ago(5)) == (ago(5), "search")
    assert source_date(bare, None) == (None, "none")
    naive = report("https://a.example/", published=datetime(2026, 1, 1))
    date, _ = source_date(naive, None)
    assert date == datetime(2026, 1, 1, tzinfo=UTC)


# --------------------------------------------------------------------------------------------
# check_freshness
# --------------------------------------------------------------------------------------------

PRICE_Q = "What is the current price of bitcoin?"
CAVEATED = "Bitcoin trades near $90,000 (as of 2 December 2026)."


def test_stale_source_for_real_time_question() -> None:
    cites = [report("https://old.example/btc", published=ago(40))]
    slightly = check_freshness(
        PRICE_Q, CAVEATED, [report("https://a.example/", published=ago(2.5))], POLICY, now=NOW
    )
    assert "the median cited source is 2.5 days old" in slightly.findings[0].message
    result = check_freshness(PRICE_Q, CAVEATED, cites, POLICY, now=NOW)
    assert result.name == "freshness"
    assert not result.passed
    assert result.offending_urls == ["https://old.example/btc"]
    codes = {f.code for f in result.findings}
    assert {"freshness.stale_median", "freshness.stale_source"} <= codes
    median = next(f for f in result.findings if f.code == "freshness.stale_median")
    assert "40 days old" in median.message
    assert "real-time question needs sources at most 2 days old" in median.message
    assert result.details["regime"] == "real_time"
    assert result.details["median_recency_days"] == 40.0
    assert result.details["floor_days"] == 2.0
    assert result.details["sources"]["https://old.example/btc"]["source"] == "published"
    # the offender names its own date and what "fresh" means for this question: a day
    stale = next(f for f in result.findings if f.code == "freshness.stale_source")
    day = ago(40).date().isoformat()
    since = (NOW - timedelta(days=2)).date().isoformat()
    assert f"(dated {day})" in stale.message
    assert f"a fresh source is dated on or after {since}" in stale.message


def test_fresh_sources_with_caveat_pass() -> None:
    cites = [
        report("https://a.example/btc", modified=ago(0.5)),
        report("https://b.example/btc", published=ago(1)),
        report("https://c.example/btc", published=ago(10)),  # stale, but the median is fresh
    ]
    result = check_freshness(PRICE_Q, CAVEATED, cites, POLICY, now=NOW)
    assert result.passed, result.findings
    # The stale one is still an offender so a regeneration drops it; reported as a warning.
    assert result.offending_urls == ["https://c.example/btc"]
    [stale] = [f for f in result.findings if f.code == "freshness.stale_source"]
    assert stale.severity is Severity.WARNING
    assert result.score == pytest.approx(2 / 3, abs=1e-3)


def test_missing_caveat_message_names_the_checks_own_day() -> None:
    later = NOW + timedelta(days=40)
    cites = [report("https://a.example/btc", modified=later - timedelta(hours=12))]
    result = check_freshness(PRICE_Q, "Bitcoin trades near $90,000.", cites, POLICY, now=later)
    [f] = [f for f in result.findings if f.code == "freshness.missing_caveat"]
    example = f"as of {later.day} {later:%B %Y}"
    assert example in f.message and example in f.details["feedback"]


def test_missing_caveat_fails_fast_question() -> None:
    cites = [report("https://a.example/btc", modified=ago(0.5))]
    result = check_freshness(PRICE_Q, "Bitcoin trades near $90,000.", cites, POLICY, now=NOW)
    assert not result.passed
    [f] = result.findings
    assert f.code == "freshness.missing_caveat"
    assert "no dated recency caveat" in f.message
    assert "as of 2 December 2026" in f.details["feedback"]
    lenient = POLICY.model_copy(update={"require_caveat": False})
    relaxed = check_freshness(PRICE_Q, "Bitcoin trades near $90,000.", cites, lenient, now=NOW)
    assert relaxed.passed
    assert relaxed.findings[0].severity is Severity.WARNING


def test_year_only_caveat_fails() -> None:
    cites = [report("https://a.example/btc", modified=ago(0.5))]
    result = check_freshness(PRICE_Q, "As of 2026 it is $90,000.", cites, POLICY, now=NOW)
    assert not result.passed
    assert "names only a year" in result.findings[0].message


def test_undated_sources_count_as_stale_for_fast_questions() -> None:
    question = "What is the most recent movie in the Marvel Cinematic Universe?"
    answer = "As of 2 December 2026, the most recent MCU film is X."
    cites = [
        report("https://a.example/mcu", published=ago(3)),
        report("https://b.example/mcu"),
        report("https://c.example/mcu"),
    ]
    result = check_freshness(question, answer, cites, POLICY, now=NOW)
    assert not result.passed  # two of three undated → the median source is undated
    assert set(result.offending_urls) == {"https://b.example/mcu", "https://c.example/mcu"}
    assert result.details["undated"] == ["https://b.example/mcu", "https://c.example/mcu"]
    assert result.details["median_recency_days"] == "inf"
    assert any("has no date" in f.message for f in result.findings)

    lenient = POLICY.model_copy(update={"undated_counts_as_stale": False})
    relaxed = check_freshness(question, answer, cites, lenient, now=NOW)
    assert relaxed.passed, relaxed.findings
    assert relaxed.offending_urls == []
    [note] = [f for f in relaxed.findings if f.code == "freshness.undated"]
    assert note.severity is Severity.WARNING
    assert relaxed.details["median_recency_days"] == 3.0


def test_search_dates_fill_in_for_undated_pages() -> None:
    question = "What is the most recent movie in the Marvel Cinematic Universe?"
    answer = "As of 2 December 2026, the most recent MCU film is X."
    cites = [report("https://b.example/mcu")]
    result = check_freshness(
        question, answer, cites, POLICY, now=NOW, search_dates={"https://b.example/mcu": ago(4)}
    )
    assert result.passed, result.findings
    assert result.details["sources"]["https://b.example/mcu"]["source"] == "search"


def test_search_dates_match_across_url_spellings() -> None:
    question = "What is the most recent movie in the Marvel Cinematic Universe?"
    answer = "As of 2 December 2026, the most recent MCU film is X."
    cites = [report("https://b.example/mcu")]
    dates = {"HTTPS://B.EXAMPLE/mcu": ago(4)}
    result = check_freshness(question, answer, cites, POLICY, now=NOW, search_dates=dates)
    assert result.passed, result.findings
    bad_key = {"http://[broken": ago(4)}
    assert not check_freshness(
        question, answer, cites, POLICY, now=NOW, search_dates=bad_key
    ).passed


def test_slow_question_uses_year_floor_without_offenders_or_caveat() -> None:
    question = "Who is the current CEO of OpenAI?"
    cites = [report("https://a.example/ceo", published=ago(800))]
    result = check_freshness(question, "Sam Altman.", cites, POLICY, now=NOW)
    assert result.details["regime"] == "slow"
    assert not result.passed
    assert [f.code for f in result.findings] == ["freshness.stale_median"]
    assert result.offending_urls == []  # only fast and real-time questions get offenders
    fresh = [report("https://a.example/ceo", published=ago(100))]
    assert check_freshness(question, "Sam Altman.", fresh, POLICY, now=NOW).passed


def test_insensitive_question_accepts_old_sources() -> None:
    cites = [report("https://a.example/paris", published=ago(5000)), report("https://b.example/")]
    result = check_freshness("What is the capital of France?", "Paris.", cites, POLICY, now=NOW)
    assert result.passed and result.findings == []
    assert result.score == 1.0
    assert result.details["floor_days"] is None


def test_broken_citations_are_not_dated() -> None:
    cites = [
        report("https://a.example/btc", modified=ago(0.5)),
        report("https://dead.example/btc", status=CitationStatus.NOT_FOUND),
    ]
    result = check_freshness(PRICE_Q, CAVEATED, cites, POLICY, now=NOW)
    assert result.passed, result.findings
    assert list(result.details["sources"]) == ["https://a.example/btc"]


def test_future_dates_are_clamped_and_given_class_used() -> None:
    cites = [report("https://a.example/x", published=NOW + timedelta(days=3))]
    fc = FreshnessClass(regime=Regime.FAST, cues=["given"])
    result = check_freshness("anything", CAVEATED, cites, POLICY, now=NOW, fclass=fc)
    assert result.passed, result.findings
    assert result.details["sources"]["https://a.example/x"]["recency_days"] == 0.0
    assert result.details["cues"] == ["given"]


def test_disabled_and_empty() -> None:
    off = POLICY.model_copy(update={"enabled": False})
    assert not check_freshness(PRICE_Q, "", [], off, now=NOW).evaluated
    # A fast question with no resolving citation is still judged on its caveat.
    empty = check_freshness(PRICE_Q, "no caveat", [], POLICY, now=NOW)
    assert empty.evaluated and not empty.passed
    assert not check_freshness("What is the capital of France?", "", [], POLICY, now=NOW).evaluated


# --------------------------------------------------------------------------------------------
# Judge backend against a real OpenAI-compatible server on 127.0.0.1
# --------------------------------------------------------------------------------------------


class JudgeServer:
    """Scripted /v1/chat/completions: each request pops the next reply."""

    def __init__(self) -> None:
        self.replies: list[tuple[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.release = asyncio.Event()
        self.base_url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(
            {"auth": request.headers.get("Authorization"), "json": await request.json()}
        )
        kind, payload = self.replies.pop(0) if self.replies else ("status", 500)
        if kind == "status":
            return web.Response(status=payload, text="error")
        if kind == "content":
            return web.json_response({"choices": [{"message": {"content": payload}}]})
        if kind == "hang":
            await self.release.wait()  # until the test ends; the client times out first
        return web.Response(text=str(payload))


@pytest.fixture
async def judge() -> AsyncIterator[JudgeServer]:
    server = JudgeServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    server.base_url = f"http://{host}:{port}/v1"
    yield server
    server.release.set()
    await runner.cleanup()


async def test_judge_classifies(judge: JudgeServer) -> None:
    judge.replies.append(("content", '{"regime": "real-time", "reason": "prices move daily"}'))
    async with JudgeFreshnessClassifier(judge.base_url, "m", api_key="k") as clf:
        fc = await clf.classify("What does a flight to Oslo cost?", now=NOW)
    assert fc.regime is Regime.REAL_TIME
    assert fc.cues == ["judge: prices move daily"]
    [req] = judge.requests
    assert req["auth"] == "Bearer k"
    assert req["json"]["model"] == "m"
    assert "2026-12-02" in req["json"]["messages"][0]["content"]
    assert req["json"]["messages"][1]["content"] == "What does a flight to Oslo cost?"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (("status", 503), "HTTP 503"),
        (("raw", "not json at all"), "not a JSON object"),
        (("content", '{"regime": "sometimes"}'), "unknown regime"),
        (("content", "[1, 2]"), "not a JSON object"),
        (("hang", None), "timed out"),
    ],
)
async def test_judge_failures_fall_back_to_rules(
    judge: JudgeServer, reply: tuple[str, Any], reason: str
) -> None:
    judge.replies.append(reply)
    async with JudgeFreshnessClassifier(judge.base_url, "m", timeout=0.5, retries=0) as clf:
        fc = await clf.classify("What is the current price of bitcoin?", now=NOW)
    assert fc.regime is Regime.REAL_TIME  # the deterministic answer
    assert reason in fc.cues[0] and "deterministic rules used" in fc.cues[0]


async def test_judge_unreachable_falls_back() -> None:
    # A port nothing listens on: bind one, note it, close it.
    runner = web.AppRunner(web.Application())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    await runner.cleanup()
    async with JudgeFreshnessClassifier(f"http://127.0.0.1:{port}/v1", "m", backoff=0.0) as clf:
        fc = await clf.classify("Who painted The Starry Night?", now=NOW)
    assert fc.regime is Regime.INSENSITIVE
    assert fc.cues[0].startswith("judge unreachable")


# --------------------------------------------------------------------------------------------
# The rules as the learned model's features (tests/checks/test_regime.py has the model)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("question", "regime"), REGIME_CASES)
def test_regime_features_carry_the_same_rule_decision(question: str, regime: Regime) -> None:
    from citeguard.checks.freshness import REGIME_FEATURE_NAMES, RULE_LABELS, regime_features

    values, (decided, label, cue) = regime_features(question, now=NOW)
    fc = classify_freshness(question, now=NOW)
    assert decided is fc.regime is regime and fc.cues[0] == cue
    assert label in RULE_LABELS
    assert len(values) == len(REGIME_FEATURE_NAMES)
    assert values[REGIME_FEATURE_NAMES.index(f"decided by={label}")] == 1.0

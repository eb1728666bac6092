"""The query axis: constraints, entities and breadth of a search query against the prompt."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from citeguard.checks.query import JudgeQueryScorer, check_queries, score_query
from citeguard.models import Severity
from citeguard.policy import QueryPolicy

POLICY = QueryPolicy()


def codes(prompt: str, query: str) -> set[str]:
    return {f.code for f in score_query(prompt, query).findings}


def messages(prompt: str, query: str) -> list[str]:
    return [f.message for f in score_query(prompt, query).findings]


def test_laptop_example_fails_constraint_preservation() -> None:
    score = score_query("laptops with battery over 10 hours", "best laptops 2026 for ML")
    assert score.constraints <= 2
    assert score.overall < POLICY.min_score
    msgs = [f.message for f in score.findings]
    assert "dropped constraint 'over 10 hours'" in msgs
    assert "added generic term 'best'" in msgs
    assert any(m.startswith("added the year 2026") for m in msgs)
    assert "'over 10 hours'" in score.dropped
    assert {"best", "2026", "ML"} <= set(score.added)
    # Needless expansion alone is as bad as the drop.
    assert score.breadth <= 2


def test_faithful_rewrite_scores_five() -> None:
    score = score_query("laptops with battery over 10 hours", "laptop battery life over 10 hours")
    assert (score.constraints, score.entities, score.breadth, score.overall) == (5, 5, 5, 5)
    assert score.findings == []
    assert score.kept == ["over 10 hours"]


# --------------------------------------------------------------------------------------------
# One pair per constraint type: dropped, then kept
# --------------------------------------------------------------------------------------------

CONSTRAINT_CASES = [
    # (prompt, bad query, expected message, good query)
    (
        "GDPR fines issued in 2025 in the EU",
        "GDPR fines EU",
        "dropped the year 2025",
        "GDPR fines 2025 EU",
    ),
    (
        "What changed in Python 3.12 for asyncio?",
        "Python asyncio changes",
        "dropped version 'Python 3.12'",
        "python 3.12 asyncio changes",
    ),
    (
        "iOS 18 battery drain fix",
        "iOS battery drain fix",
        "dropped version 'iOS 18'",
        "iOS 18 battery drain fix",
    ),
    (
        "breaking changes in v2.1 of the client library",
        "client library breaking changes",
        "dropped version 'v2.1'",
        "client library v2.1 breaking changes",
    ),
    (
        "phones under $500 with a headphone jack",
        "phones headphone jack",
        "dropped constraint 'under $500'",
        "phones under 500 dollars headphone jack",
    ),
    (
        "GPUs with >= 16GB VRAM",
        "GPU VRAM",
        "dropped constraint '>= 16GB'",
        "GPU 16GB+ VRAM",
    ),
    (
        "GDPR fines issued in 2025 in the EU",
        "GDPR fines 2025",
        "dropped region EU",
        "GDPR fines 2025 European Union",
    ),
    (
        "Which German banks offer accounts for non-residents?",
        "banks non-resident account",
        "dropped region German",
        "banks in Germany non-resident account",
    ),
    (
        'papers that mention "retrieval augmented generation" in the abstract',
        "RAG papers abstract",
        'dropped quoted phrase "retrieval augmented generation"',
        '"retrieval augmented generation" papers abstract',
    ),
    (
        "vegan recipes without coconut",
        "vegan recipes",
        "dropped exclusion 'without coconut'",
        "vegan recipes -coconut",
    ),
    (
        "python tutorials -video",
        "python tutorials",
        "dropped exclusion '-video'",
        "python tutorials -video",
    ),
]


@pytest.mark.parametrize(("prompt", "bad", "message", "good"), CONSTRAINT_CASES)
def test_constraint_dropped_and_kept(prompt: str, bad: str, message: str, good: str) -> None:
    dropped = score_query(prompt, bad)
    assert message in [f.message for f in dropped.findings], dropped.findings
    assert dropped.constraints <= 2
    assert dropped.overall < POLICY.min_score
    kept = score_query(prompt, good)
    assert kept.constraints >= 4, kept.findings
    assert not any(f.code.startswith("query.dropped") for f in kept.findings), kept.findings


def test_weakened_and_reversed_comparators() -> None:
    weak = score_query("laptops with battery over 10 hours", "laptop battery 10 hours")
    assert weak.constraints == 4 and weak.overall == 4
    assert [f.code for f in weak.findings] == ["query.weakened_constraint"]
    assert weak.findings[0].severity is Severity.WARNING
    plus = score_query("laptops with battery over 10 hours", "laptop battery 10+ hours")
    assert plus.findings == []
    reversed_ = score_query("phones under $500", "phones over $500")
    assert "reversed constraint 'under $500' to 'over $500'" in [
        f.message for f in reversed_.findings
    ]
    assert reversed_.constraints == 2


def test_exclusion_turned_into_inclusion() -> None:
    assert "turned exclusion 'without coconut' into a search for 'coconut'" in messages(
        "vegan recipes without coconut", "coconut vegan recipes"
    )


def test_unquoted_phrase_is_weak() -> None:
    score = score_query('songs with "blue moon" in the title', "blue moon songs title")
    assert "query.unquoted_phrase" in {f.code for f in score.findings}
    assert score.constraints == 4


def test_number_units_must_agree() -> None:
    # 16 GB of VRAM is not 16 hours of anything.
    assert "query.dropped_constraint" in codes("GPUs with >= 16GB VRAM", "GPU VRAM 16 hours")


# --------------------------------------------------------------------------------------------
# Entities
# --------------------------------------------------------------------------------------------


def test_entity_loss() -> None:
    prompt = "What did Satya Nadella say about OpenAI on the earnings call?"
    score = score_query(prompt, "Microsoft earnings call")
    msgs = [f.message for f in score.findings]
    assert "dropped entity 'Satya Nadella'" in msgs
    assert "dropped entity 'OpenAI'" in msgs
    assert score.entities == 1
    assert "added 'Microsoft', which the prompt does not mention" in msgs
    good = score_query(prompt, "Satya Nadella OpenAI earnings call")
    assert good.entities == 5 and good.overall == 5


def test_entity_shortened_and_acronyms() -> None:
    short = score_query("Who is the CEO of Bank of America?", "Bank CEO")
    assert "shortened 'Bank of America' to 'Bank'" in [f.message for f in short.findings]
    assert short.entities == 4
    expanded = score_query(
        "GDPR fines issued in 2025 in the EU",
        "General Data Protection Regulation fines 2025 Europe",
    )
    assert expanded.overall == 5, expanded.findings
    law = score_query("What does the AI Act say about biometric surveillance?", "biometric rules")
    assert "dropped entity 'AI Act'" in [f.message for f in law.findings]


def test_prompt_without_names_or_constraints() -> None:
    score = score_query("how do i make sourdough bread", "sourdough bread recipe")
    assert score.constraints == 5 and score.entities == 5


# --------------------------------------------------------------------------------------------
# Breadth
# --------------------------------------------------------------------------------------------


def test_over_broad_rewrites() -> None:
    overview = score_query(
        "What does the EU AI Act require for general-purpose AI models?", "AI regulation overview"
    )
    msgs = [f.message for f in overview.findings]
    assert "added generic term 'overview'" in msgs
    assert "dropped region EU" in msgs
    assert overview.breadth <= 2

    topic = score_query(
        "When did the Eiffel Tower get painted brown for the first time?", "Eiffel Tower"
    )
    assert "query.topic_rewrite" in {f.code for f in topic.findings}
    assert topic.breadth == 2

    # A generic word the prompt itself used is not an addition.
    assert (
        score_query("best hiking boots for wide feet", "best hiking boots wide feet").overall == 5
    )
    # Words of one class stand in for each other.
    assert "query.added_generic" not in codes(
        "newest Pixel phone camera", "latest Pixel phone camera"
    )


def test_many_added_terms_are_penalised() -> None:
    score = score_query(
        "sourdough starter feeding schedule",
        "sourdough starter feeding schedule flour hydration temperature discard",
    )
    assert "query.added_terms" in {f.code for f in score.findings}
    assert score.breadth < 5
    one = score_query(
        "sourdough starter feeding schedule", "sourdough starter feeding schedule ratio"
    )
    assert one.findings == []  # one refining word is free


def test_operators_are_not_added_terms() -> None:
    score = score_query(
        "What does the EU AI Act say about high-risk systems?",
        "EU AI Act high-risk systems site:eur-lex.europa.eu",
    )
    assert score.overall == 5, score.findings


# --------------------------------------------------------------------------------------------
# check_queries
# --------------------------------------------------------------------------------------------


def test_check_queries_without_queries_is_not_evaluated() -> None:
    result = check_queries("anything", [], POLICY)
    assert result.name == "query"
    assert result.passed and not result.evaluated
    assert result.gating is False


def test_check_queries_fails_on_a_bad_query_and_feeds_back() -> None:
    prompt = "laptops with battery over 10 hours"
    result = check_queries(
        prompt, ["laptop battery over 10 hours", "best laptops 2026 for ML"], POLICY
    )
    assert not result.passed
    assert result.gating is False  # reported and fed back, not gating, by default
    assert result.score == 1.0
    bad = [f for f in result.findings if f.details.get("query_index") == 1]
    assert any("dropped constraint 'over 10 hours'" in f.message for f in bad)
    assert all(f.details["query"] == "best laptops 2026 for ML" for f in bad)
    feedback = next(f for f in result.findings if f.code == "query.feedback")
    assert "1 of 2 search queries" in feedback.message
    assert "feedback" in feedback.details
    gating = check_queries(prompt, ["best laptops"], POLICY.model_copy(update={"gating": True}))
    assert gating.gating is True and not gating.passed


def test_split_comparison_queries_cover_each_other() -> None:
    prompt = "Compare the battery life of the MacBook Air M3 and the Dell XPS 13"
    queries = ["MacBook Air M3 battery life", "Dell XPS 13 battery life"]
    alone = score_query(prompt, queries[0])
    assert alone.overall < POLICY.min_score  # on its own, it drops the Dell
    result = check_queries(prompt, queries, POLICY)
    assert result.passed, [f.message for f in result.findings]
    covered = [f for f in result.findings if f.details.get("covered")]
    assert covered and all(f.severity is Severity.INFO for f in covered)


def test_passing_query_findings_are_warnings() -> None:
    result = check_queries(
        "laptops with battery over 10 hours", ["laptop battery 10 hours"], POLICY
    )
    assert result.passed
    assert all(f.severity is not Severity.ERROR for f in result.findings)
    assert result.details["queries"][0]["overall"] == 4


@pytest.mark.parametrize(
    "query",
    ["", "   ", "!!!", "\x00\x01", "a" * 5000, '"unterminated', "-", "site:", "$$$ 10 10 10"],
)
def test_odd_queries_do_not_crash(query: str) -> None:
    score = score_query('laptops "with" battery over 10 hours without fans in the EU', query)
    assert 1 <= score.overall <= 5


# --------------------------------------------------------------------------------------------
# Judge backend against a real OpenAI-compatible server on 127.0.0.1
# --------------------------------------------------------------------------------------------


class JudgeServer:
    """Scripted /v1/chat/completions: each request pops the next reply."""

    def __init__(self) -> None:
        self.replies: list[tuple[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.base_url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(await request.json())
        kind, payload = self.replies.pop(0) if self.replies else ("status", 500)
        if kind == "status":
            return web.Response(status=payload, text="error")
        return web.json_response({"choices": [{"message": {"content": json.dumps(payload)}}]})


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
    await runner.cleanup()


LAPTOP = ("laptops with battery over 10 hours", "best laptops 2026 for ML")


async def test_judge_scores_with_the_rubric(judge: JudgeServer) -> None:
    judge.replies.append(
        (
            "content",
            {
                "constraints": 2,
                "entities": 5,
                "breadth": 1,
                "dropped": ["over 10 hours"],
                "added": ["best", "2026"],
                "findings": [{"part": "constraints", "message": "dropped 'over 10 hours'"}],
            },
        )
    )
    async with JudgeQueryScorer(judge.base_url, "m") as scorer:
        score = await scorer.score(*LAPTOP)
    assert (score.constraints, score.entities, score.breadth, score.overall) == (2, 5, 1, 1)
    assert score.dropped == ["over 10 hours"]
    [f] = score.findings
    assert f.code == "query.judge_constraints" and f.severity is Severity.ERROR
    sent = json.loads(judge.requests[0]["messages"][1]["content"])
    assert sent == {"prompt": LAPTOP[0], "query": LAPTOP[1]}


@pytest.mark.parametrize(
    "reply",
    [
        ("status", 429),
        ("content", {"constraints": 9, "entities": 5, "breadth": 5}),  # outside the rubric
        ("content", {"constraints": "two"}),
    ],
)
async def test_judge_failures_fall_back(judge: JudgeServer, reply: tuple[str, Any]) -> None:
    judge.replies.append(reply)
    async with JudgeQueryScorer(judge.base_url, "m", retries=0) as scorer:
        score = await scorer.score(*LAPTOP)
    assert score.findings[0].code == "query.judge_failed"
    assert score.findings[0].severity is Severity.INFO
    assert score == score_query(*LAPTOP).model_copy(
        update={"findings": [score.findings[0], *score_query(*LAPTOP).findings]}
    )


async def test_judge_check_queries(judge: JudgeServer) -> None:
    good = {"constraints": 5, "entities": 5, "breadth": 5}
    judge.replies += [("content", good), ("content", good)]
    async with JudgeQueryScorer(judge.base_url, "m") as scorer:
        result = await scorer.check_queries("p", ["q1", "q2"], POLICY)
        empty = await scorer.check_queries("p", [], POLICY)
    assert result.passed and result.score == 5.0
    assert len(judge.requests) == 2
    assert not empty.evaluated

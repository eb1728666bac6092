"""The optional LLM judges of the freshness and query axes, switched on through Policy.

The judge is a local aiohttp server speaking the chat-completions wire format.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest_asyncio
from aiohttp import web
from conftest import Farm

from citeguard import FetchPolicy, FreshnessPolicy, Guard, JudgePolicy, Policy, QueryPolicy

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
PAGE = "<html><body><p>Middlemarch is a novel by George Eliot.</p></body></html>"


class Judge:
    def __init__(self) -> None:
        self.base_url = ""
        self.systems: list[str] = []
        self.up = True

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if not self.up:
            return web.Response(status=503)
        body = await request.json()
        system = body["messages"][0]["content"]
        self.systems.append(system)
        if "how fast the correct answer" in system:
            reply: dict[str, Any] = {"regime": "real_time", "reason": "prices move by the hour"}
        else:
            reply = {
                "constraints": 2,
                "entities": 5,
                "breadth": 4,
                "dropped": ["the year 2026"],
                "added": [],
                "findings": [{"part": "constraints", "message": "dropped the year 2026"}],
            }
        return web.json_response(
            {
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": json.dumps(reply)}}
                ]
            }
        )


@pytest_asyncio.fixture
async def judge() -> AsyncIterator[Judge]:
    j = Judge()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", j.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    j.base_url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    yield j
    await runner.cleanup()


def _policy(judge: Judge) -> Policy:
    return Policy(
        fetch=FetchPolicy(allow_private_addresses=True, retries=0),
        # every question to the judge (this one's rules regime, insensitive, is not uncertain)
        freshness=FreshnessPolicy(use_judge=True, judge_only_uncertain=False),
        query=QueryPolicy(use_judge=True),
        judge=JudgePolicy(base_url=judge.base_url, model="m", backoff=0.0),
    )


async def _run(farm: Farm, judge: Judge) -> Any:
    url = farm.add("books.example.com", "/m", body=PAGE)
    async with Guard(_policy(judge), resolver=farm.resolver, entailer=None, now=lambda: NOW) as g:
        search = g.wrap_search(lambda query: [{"url": url, "title": "Middlemarch"}])

        async def agent(question: str, *, exclude_urls: frozenset[str]) -> str:
            search("Middlemarch author")
            return f"Middlemarch is a novel by George Eliot [1].\n\n[1] {url}\n"

        return await g.run(agent, "Who wrote the novel Middlemarch in 2026?")


async def test_judges_decide_the_regime_and_grade_the_query(farm: Farm, judge: Judge) -> None:
    result = await _run(farm, judge)
    fresh = result.verdict.axes["freshness"]
    # the rules would call this question insensitive; the judge says real-time
    assert fresh.details["regime"] == "real_time"
    assert any("judge" in c for c in fresh.details["cues"])
    query = result.verdict.axes["query"]
    assert query.score == 2
    assert any("dropped the year 2026" in f.message for f in query.findings)
    asked = [s for s in judge.systems if "how fast the correct answer" in s]
    assert len(result.attempts) > 1 and len(asked) == 1  # the regime is judged once per question
    assert len(judge.systems) > len(asked)  # and every attempt's queries were graded


async def test_a_judge_that_is_down_falls_back_to_the_rules(farm: Farm, judge: Judge) -> None:
    judge.up = False
    result = await _run(farm, judge)
    fresh = result.verdict.axes["freshness"]
    assert fresh.details["regime"] != "real_time"
    assert any("judge" in c and "503" in c for c in fresh.details["cues"])
    codes = {f.code for f in result.verdict.axes["query"].findings}
    assert "query.judge_failed" in codes

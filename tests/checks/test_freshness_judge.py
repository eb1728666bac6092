"""The freshness judge as a cascade (issue 45): with ``FreshnessPolicy.use_judge`` the judge is
asked only where the rules' regime is uncertain; its answers are recorded in and replayed from a
snapshot store.

The judge is a real chat-completions server on 127.0.0.1 that reports token usage.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest_asyncio
from aiohttp import web
from conftest import Farm

from citeguard import FetchPolicy, Guard, Policy, Verdict
from citeguard.snapshot import SQLiteSnapshotStore

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
FAST_LOOKING = "What is the latest version of Frobnicator?"  # rules: fast, uncertain
RECORD = "What is the world record for the men's marathon?"  # rules: slow, uncertain
TIMELESS = "Who painted the Mona Lisa?"  # rules: insensitive, no floor to doubt
PAGE = (
    "<html><head><title>Notes</title>"
    "<meta property='article:published_time' content='2026-11-20T08:00:00Z'></head>"
    "<body><article><p>Frobnicator 5.2 is the latest version. The men's marathon world "
    "record is 2:00:35.</p></article></body></html>"
)


class RegimeJudge:
    """Answers every regime question "fast", reporting 180 prompt and 24 completion tokens."""

    def __init__(self) -> None:
        self.base_url = ""
        self.questions: list[str] = []
        self.runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.questions.append(body["messages"][-1]["content"])
        reply = {"regime": "fast", "reason": "new versions ship every few months"}
        return web.json_response(
            {
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": json.dumps(reply)}}
                ],
                "usage": {"prompt_tokens": 180, "completion_tokens": 24, "total_tokens": 204},
            }
        )


@pytest_asyncio.fixture
async def judge() -> AsyncIterator[RegimeJudge]:
    j = RegimeJudge()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", j.handle)
    j.runner = web.AppRunner(app)
    await j.runner.setup()
    site = web.TCPSite(j.runner, "127.0.0.1", 0)
    await site.start()
    j.base_url = f"http://127.0.0.1:{j.runner.addresses[0][1]}/v1"
    yield j
    await j.runner.cleanup()


def _policy(judge: RegimeJudge, **freshness: object) -> Policy:
    return Policy(
        fetch=FetchPolicy(allow_private_addresses=True, retries=0),
        entailment={"check_entailment": False},
        freshness={"use_judge": True, **freshness},
        judge={"base_url": judge.base_url, "model": "m", "backoff": 0.0, "retries": 0},
    )


async def _check(guard: Guard, question: str, url: str) -> Verdict:
    async with guard:
        return await guard.check(
            f"As of 1 December 2026 it is so [1].\n\n[1] {url}\n", question=question
        )


async def test_only_an_uncertain_regime_goes_to_the_judge(
    farm: Farm, judge: RegimeJudge, tmp_path: Path
) -> None:
    url = farm.add("notes.example.com", "/n", body=PAGE)
    policy = _policy(judge)
    confident = await _check(Guard(policy, resolver=farm.resolver, now=lambda: NOW), TIMELESS, url)
    assert judge.questions == []  # the rules were confident: nothing asked
    assert confident.axes["freshness"].details["regime"] == "insensitive"
    assert confident.judge_usage is None or confident.judge_usage.requests == 0

    path = tmp_path / "snap.sqlite"
    store = SQLiteSnapshotStore(path)
    judged = await _check(
        Guard(policy, resolver=farm.resolver, now=lambda: NOW, cache=store, snapshot_mode="record"),
        FAST_LOOKING,
        url,
    )
    await store.close()
    assert judge.questions == [FAST_LOOKING]
    fresh = judged.axes["freshness"]
    assert fresh.details["regime"] == "fast"
    assert any(c.startswith("judge:") for c in fresh.details["cues"])
    assert "gate_regime" not in fresh.details  # the judge's regime is the one gated on
    assert judged.judge_usage is not None
    assert (judged.judge_usage.prompt_tokens, judged.judge_usage.completion_tokens) == (180, 24)

    # replayed from the snapshot: the same regime and usage, the judge not asked again
    assert judge.runner is not None
    await judge.runner.cleanup()
    replay_store = SQLiteSnapshotStore(path)
    replayed = await _check(
        Guard(
            policy,
            resolver=farm.resolver,
            now=lambda: NOW,
            cache=replay_store,
            snapshot_mode="replay",
        ),
        FAST_LOOKING,
        url,
    )
    await replay_store.close()
    assert judge.questions == [FAST_LOOKING]
    assert replayed.axes["freshness"].details["regime"] == "fast"
    assert replayed.judge_usage == judged.judge_usage


async def test_without_the_cascade_every_question_goes_to_the_judge(
    farm: Farm, judge: RegimeJudge
) -> None:
    url = farm.add("notes.example.com", "/n", body=PAGE)
    policy = _policy(judge, judge_only_uncertain=False)
    verdict = await _check(Guard(policy, resolver=farm.resolver, now=lambda: NOW), RECORD, url)
    assert judge.questions == [RECORD]
    assert verdict.axes["freshness"].details["regime"] == "fast"

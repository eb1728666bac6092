"""The LLM-judge entailment backend in production shape: one request per page, retries, usage,
cost budget, LLM spans and snapshots.

The judge is a real aiohttp server on 127.0.0.1 speaking the chat-completions wire format; it
reads the claim ids out of each request and answers from a script, so every test can tell which
claim got which verdict. The Guard tests fetch their pages from the ``farm``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from conftest import Farm
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from citeguard import Guard
from citeguard.checks import judge_usage
from citeguard.checks.entail import (
    JUDGE_PAGE_SYSTEM_PROMPT,
    JUDGE_SYSTEM_PROMPT,
    EntailmentRequest,
    JudgeEntailer,
    score_requests,
)
from citeguard.checks.judge_usage import judge_run
from citeguard.errors import SnapshotMiss
from citeguard.models import EntailmentScore, JudgeUsage, Verdict
from citeguard.policy import EntailmentPolicy, FetchPolicy, FreshnessPolicy, JudgePolicy, Policy
from citeguard.snapshot import SQLiteSnapshotStore
from citeguard.trace import Tracing
from citeguard.verdict import without_timings

Body = dict[str, Any]
Reply = Callable[[Body], Awaitable[web.StreamResponse]]


# --------------------------------------------------------------------------------------------
# The judge server
# --------------------------------------------------------------------------------------------


def chat(content: object, *, prompt_tokens: int = 0, completion_tokens: int = 0) -> web.Response:
    text = content if isinstance(content, str) else json.dumps(content)
    payload: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
    }
    if prompt_tokens or completion_tokens:
        payload["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return web.json_response(payload)


def asked(body: Body) -> tuple[str, Body | str]:
    """The system prompt and the user message (decoded when it is a page request)."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    return system, (json.loads(user) if system == JUDGE_PAGE_SYSTEM_PROMPT else user)


def claims_of(body: Body) -> dict[str, str]:
    """claim id → claim text of a page request."""
    _, user = asked(body)
    assert isinstance(user, dict)
    return {c["id"]: c["claim"] for c in user["claims"]}


def label_for(claim: str) -> str:
    """The scripted judge's opinion: it follows a word in the claim."""
    if "Sun" in claim:
        return "contradicted"
    if "cheese" in claim:
        return "not_supported"
    return "supported"


def verdicts(
    body: Body,
    *,
    order: Callable[[list[str]], list[str]] = lambda ids: ids,
    drop: frozenset[str] = frozenset(),
    twice: frozenset[str] = frozenset(),
    int_ids: bool = False,
) -> list[dict[str, Any]]:
    claims = claims_of(body)
    out: list[dict[str, Any]] = []
    for cid in order(list(claims)):
        if cid in drop:
            continue
        entry = {
            "id": int(cid) if int_ids else cid,
            "label": label_for(claims[cid]),
            "confidence": 0.9,
            "reason": f"about {claims[cid][:24]}",
        }
        out += [entry, entry] if cid in twice else [entry]
    return out


async def answer(body: Body, **kw: Any) -> web.StreamResponse:
    """The well-behaved judge: a verdict for every claim, and a usage block."""
    system, user = asked(body)
    if system == JUDGE_SYSTEM_PROMPT:  # a page with one claim: the per-pair question
        assert isinstance(user, str)
        claim = user.split("\n")[1]
        reply: object = {"label": label_for(claim), "confidence": 0.9, "reason": "single"}
    else:
        reply = {"verdicts": verdicts(body, **kw)}
    return chat(reply, prompt_tokens=1000, completion_tokens=100)


class JudgeServer:
    """Answers request n with ``script[n]`` (the last one repeats; ``answer`` when empty)."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.bodies: list[Body] = []
        self.times: list[float] = []
        self.base_url = ""
        self.release = asyncio.Event()  # ends handlers that wait forever (set at shutdown)
        self._runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(await request.json())
        self.times.append(time.monotonic())
        if not self.script:
            return await answer(self.bodies[-1])
        n = min(len(self.bodies), len(self.script)) - 1
        return await self.script[n](self.bodies[-1])

    async def hang(self, body: Body) -> web.StreamResponse:
        """Never answer in time: wait until the server shuts down."""
        await self.release.wait()
        return web.Response(status=503)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"

    async def stop(self) -> None:
        self.release.set()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    @property
    def systems(self) -> list[str]:
        return [asked(b)[0] for b in self.bodies]


@pytest_asyncio.fixture
async def judge() -> AsyncIterator[JudgeServer]:
    server = JudgeServer()
    await server.start()
    yield server
    await server.stop()


FAST = JudgePolicy(backoff=0.0, retries=2, api_key_env="CITEGUARD_TEST_NO_KEY")

MOON = "Ocean tides on Earth are caused mainly by the gravitational pull of the Moon."
SUN = "The Sun's gravity also contributes to the tides, but less than half as strongly."
SPRING = "Spring tides happen near new moon and full moon, when the Sun and Moon line up."


def entailer(judge: JudgeServer, **policy: Any) -> JudgeEntailer:
    return JudgeEntailer(judge.base_url, "judge-model", api_key="k", judge=FAST.replace(**policy))


def labels(scores: list[EntailmentScore]) -> list[str]:
    return [s.label for s in scores]


# --------------------------------------------------------------------------------------------
# One request per page
# --------------------------------------------------------------------------------------------


async def test_one_request_per_page_for_three_claims_on_two_pages(judge: JudgeServer) -> None:
    # claim 1 cites page A; claim 2 cites A and B; claim 3 cites B (4 pairs, 2 pages)
    reqs = [
        EntailmentRequest("Tides are caused by the Moon.", MOON, page="A", claim_id="1"),
        EntailmentRequest("Tides are caused by the Sun.", MOON, page="A", claim_id="2"),
        EntailmentRequest("Tides are caused by the Sun.", SUN, page="B", claim_id="2"),
        EntailmentRequest("Spring tides come at full moon.", SPRING, page="B", claim_id="3"),
    ]
    async with entailer(judge) as j:
        scores = await score_requests(j, reqs)  # the validity axis's doorway
    assert len(judge.bodies) == 2
    assert judge.systems == [JUDGE_PAGE_SYSTEM_PROMPT] * 2
    by_page = {tuple(sorted(claims_of(b))): asked(b)[1] for b in judge.bodies}
    page_a, page_b = by_page[("1", "2")], by_page[("2", "3")]
    assert isinstance(page_a, dict) and isinstance(page_b, dict)
    assert page_a["passages"] == [MOON]  # both claims' windows are the same text: sent once
    assert sorted(page_b["passages"]) == sorted([SUN, SPRING])  # the union of two windows
    assert labels(scores) == ["supported", "contradicted", "contradicted", "supported"]
    assert [s.evidence for s in scores] == [MOON, MOON, SUN, SPRING]  # each claim's own window
    assert all(s.backend == "judge" and "about" in s.reason for s in scores)


async def test_a_page_cited_by_one_claim_is_asked_the_per_pair_question(
    judge: JudgeServer,
) -> None:
    reqs = [
        EntailmentRequest("Tides are caused by the Moon.", MOON, page="A", claim_id="1"),
        EntailmentRequest("Tides are caused by the Moon.", MOON, page="A", claim_id="1"),
        EntailmentRequest("The Sun makes tides.", SUN, page=None),
        EntailmentRequest("Anything.", "", page="C", claim_id="4"),  # no evidence: not asked
    ]
    async with entailer(judge) as j:
        scores = await j.score_requests(reqs)
    assert judge.systems == [JUDGE_SYSTEM_PROMPT] * 2  # A (one distinct claim) and the page-less
    assert labels(scores) == ["supported", "supported", "contradicted", "not_supported"]
    assert scores[3].reason == "no evidence text"


async def test_evidence_over_the_cap_takes_another_request(judge: JudgeServer) -> None:
    windows = [f"Fact number {i} about the tides of the ocean is here." for i in range(4)]
    reqs = [
        EntailmentRequest(f"Tides fact {i}.", w, page="A", claim_id=str(i))
        for i, w in enumerate(windows)
    ]
    cap = 2 * len(windows[0]) + 1  # two windows fit in one request
    async with entailer(judge, max_evidence_chars=cap) as j:
        scores = await j.score_requests(reqs)
    assert len(judge.bodies) == 2
    for body in judge.bodies:
        user = asked(body)[1]
        assert isinstance(user, dict)
        assert sum(len(p) for p in user["passages"]) <= cap
        assert len(user["claims"]) == 2
    assert labels(scores) == ["supported"] * 4


# --------------------------------------------------------------------------------------------
# Replies that need care
# --------------------------------------------------------------------------------------------

THREE = [
    EntailmentRequest("Tides are caused by the Moon.", MOON, page="A", claim_id="1"),
    EntailmentRequest("Tides are caused by the Sun.", MOON, page="A", claim_id="2"),
    EntailmentRequest("The Moon is made of cheese.", MOON, page="A", claim_id="3"),
]


async def test_reply_ids_shuffled_and_numeric_are_matched_by_id(judge: JudgeServer) -> None:
    async def shuffled(body: Body) -> web.StreamResponse:
        reply = verdicts(body, order=lambda ids: [ids[2], ids[0], ids[1]], int_ids=True)
        return chat({"verdicts": reply})

    judge.script = [shuffled]
    async with entailer(judge) as j:
        scores = await j.score_requests(THREE)
    assert len(judge.bodies) == 1
    assert labels(scores) == ["supported", "contradicted", "not_supported"]


async def test_a_missing_id_is_retried_then_only_that_claim_is_unavailable(
    judge: JudgeServer,
) -> None:
    async def without_2(body: Body) -> web.StreamResponse:
        return chat({"verdicts": verdicts(body, drop=frozenset({"2"}))})

    judge.script = [without_2]
    async with entailer(judge) as j:
        scores = await j.score_requests(THREE)
    assert len(judge.bodies) == 3  # 1 + judge.retries
    # the claim with no verdict is uncertain (never supported), the others are the judge's
    assert labels(scores) == ["supported", "uncertain", "not_supported"]
    assert scores[1].reason == "judge unavailable: no verdict for claim id '2'"
    assert scores[2].reason.startswith("judge:")  # a real verdict, not a fallback


async def test_a_missing_id_answered_on_the_retry_is_used(judge: JudgeServer) -> None:
    async def without_1(body: Body) -> web.StreamResponse:
        return chat({"verdicts": verdicts(body, drop=frozenset({"1"}))})

    judge.script = [without_1, answer]
    async with entailer(judge) as j:
        scores = await j.score_requests(THREE)
    assert len(judge.bodies) == 2
    assert labels(scores) == ["supported", "contradicted", "not_supported"]


async def test_a_duplicated_id_is_unavailable(judge: JudgeServer) -> None:
    async def twice(body: Body) -> web.StreamResponse:
        return chat({"verdicts": verdicts(body, twice=frozenset({"3"}))})

    judge.script = [twice]
    async with entailer(judge, retries=0) as j:
        scores = await j.score_requests(THREE)
    assert len(judge.bodies) == 1
    assert labels(scores)[:2] == ["supported", "contradicted"]
    assert scores[2].reason == "judge unavailable: claim id '3' answered 2 times"


@pytest.mark.parametrize(
    "content",
    ["I think they are all supported!", {"verdicts": "all supported"}, ["supported"]],
    ids=["not-json", "no-list", "not-an-object"],
)
async def test_a_garbage_reply_is_retried_then_every_claim_is_unavailable(
    judge: JudgeServer, content: object
) -> None:
    async def garbage(body: Body) -> web.StreamResponse:
        return chat(content)

    judge.script = [garbage]
    async with entailer(judge) as j:
        scores = await j.score_requests(THREE)
    assert len(judge.bodies) == 3
    assert labels(scores) == ["uncertain"] * 3
    assert all(s.reason.startswith("judge unavailable: invalid response") for s in scores)


async def test_a_timeout_then_success(judge: JudgeServer) -> None:
    judge.script = [judge.hang, answer]
    async with entailer(judge, timeout=0.3) as j:
        scores = await j.score_requests(THREE)
    assert len(judge.bodies) == 2
    assert labels(scores) == ["supported", "contradicted", "not_supported"]


async def test_a_timeout_every_time_is_unavailable(judge: JudgeServer) -> None:
    judge.script = [judge.hang]
    async with entailer(judge, timeout=0.2, retries=1) as j:
        scores = await j.score_requests(THREE)
    assert len(judge.bodies) == 2
    assert {s.reason for s in scores} == {"judge unavailable: timed out after 0.2s"}


async def test_a_429_with_retry_after_then_success(judge: JudgeServer) -> None:
    async def busy(body: Body) -> web.StreamResponse:
        return web.Response(status=429, headers={"Retry-After": "1"})

    judge.script = [busy, answer]
    async with entailer(judge) as j:  # backoff 0: only Retry-After explains a wait
        scores = await j.score_requests(THREE)
    assert len(judge.bodies) == 2
    assert judge.times[1] - judge.times[0] >= 0.9
    assert labels(scores) == ["supported", "contradicted", "not_supported"]


# --------------------------------------------------------------------------------------------
# Usage, cost, budget, spans
# --------------------------------------------------------------------------------------------

TWO_PAGES = [
    EntailmentRequest("Tides are caused by the Moon.", MOON, page="A", claim_id="1"),
    EntailmentRequest("Tides are caused by the Sun.", MOON, page="A", claim_id="2"),
    EntailmentRequest("Tides are caused by the Sun.", SUN, page="B", claim_id="2"),
    EntailmentRequest("Spring tides come at full moon.", SPRING, page="B", claim_id="3"),
]


async def test_usage_is_summed_and_priced(judge: JudgeServer) -> None:
    def priced(tokens: int) -> Reply:
        async def reply(body: Body) -> web.StreamResponse:
            return chat({"verdicts": verdicts(body)}, prompt_tokens=tokens, completion_tokens=50)

        return reply

    async def unavailable(body: Body) -> web.StreamResponse:
        return web.Response(status=503)  # a request without usage still counts as a request

    judge.script = [priced(1200), unavailable, priced(3000)]
    prices = {"input_price_per_million": 2.0, "output_price_per_million": 10.0}
    async with entailer(judge, concurrency=1, **prices) as j:
        with judge_run() as meter:
            await j.score_requests(TWO_PAGES)
        outside = await j.score_requests(TWO_PAGES[:2])  # no run: nothing metered
    assert len(outside) == 2
    assert len(judge.bodies) == 4
    usage = meter.usage()
    assert usage is not None
    assert (usage.requests, usage.prompt_tokens, usage.completion_tokens) == (3, 4200, 100)
    assert usage.cost == pytest.approx((4200 * 2.0 + 100 * 10.0) / 1_000_000)
    assert usage.skipped == 0


async def test_no_judge_request_means_no_usage(judge: JudgeServer) -> None:
    async with entailer(judge) as j:
        with judge_run(budget=1.0) as meter:
            await j.score_requests([EntailmentRequest("A claim.", "", page="A")])
    assert meter.usage() is None and judge.bodies == []


async def test_a_spent_budget_stops_the_requests(judge: JudgeServer) -> None:
    pages = [
        EntailmentRequest(f"Tides fact {i}.", f"Tides fact {i} is on page {p}.", page=p)
        for p in "ABC"
        for i in range(2)
    ]
    # each reply costs 1000 * 1.0 + 100 * 10.0 = 2000 per million = 0.002; the budget is 0.001
    prices = {"input_price_per_million": 1.0, "output_price_per_million": 10.0}
    async with entailer(judge, concurrency=1, **prices) as j:
        with judge_run(budget=0.001) as meter:
            scores = await j.score_requests(pages)
            again = await j.score_requests(pages[:2])
    assert len(judge.bodies) == 1  # the first page spent the budget; nothing was sent after it
    assert labels(scores[:2]) == ["supported", "supported"]
    spent = [s.reason for s in scores[2:] + again]
    assert spent == ["judge unavailable: cost budget spent"] * 6
    assert labels(scores[2:] + again) == ["uncertain"] * 6  # not asked: never supported
    usage = meter.usage()
    assert usage == JudgeUsage(
        requests=1, prompt_tokens=1000, completion_tokens=100, cost=0.002, skipped=3
    )


def test_span_attribute_names_are_openinference() -> None:
    from openinference.semconv.trace import SpanAttributes

    assert judge_usage.LLM_MODEL_NAME == SpanAttributes.LLM_MODEL_NAME
    assert judge_usage.LLM_TOKEN_COUNT_PROMPT == SpanAttributes.LLM_TOKEN_COUNT_PROMPT
    assert judge_usage.LLM_TOKEN_COUNT_COMPLETION == SpanAttributes.LLM_TOKEN_COUNT_COMPLETION
    assert judge_usage.LLM_TOKEN_COUNT_TOTAL == SpanAttributes.LLM_TOKEN_COUNT_TOTAL
    assert judge_usage.LLM_COST_TOTAL == SpanAttributes.LLM_COST_TOTAL


async def test_each_judge_request_is_an_llm_span_with_its_tokens(judge: JudgeServer) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(provider)

    async def unavailable(body: Body) -> web.StreamResponse:
        return web.Response(status=503)

    judge.script = [unavailable, answer]
    try:
        async with entailer(judge, output_price_per_million=10.0) as j:
            with judge_run(span=tracing.span):
                await j.score_requests(THREE)
        spans = [s for s in exporter.get_finished_spans() if s.name == "citeguard.judge"]
    finally:
        provider.shutdown()
    assert len(spans) == 2  # the 503 and the retry
    failed, ok = (dict(s.attributes or {}) for s in spans)
    assert failed["openinference.span.kind"] == "LLM"
    assert failed["llm.model_name"] == ok["llm.model_name"] == "judge-model"
    assert failed["llm.token_count.prompt"] == 0 and not spans[0].status.is_ok
    assert ok["llm.token_count.prompt"] == 1000
    assert ok["llm.token_count.completion"] == 100
    assert ok["llm.token_count.total"] == 1100
    assert ok["llm.cost.total"] == pytest.approx(100 * 10.0 / 1_000_000)


# --------------------------------------------------------------------------------------------
# Through the Guard: usage on the verdict, the run's budget, record then replay
# --------------------------------------------------------------------------------------------

TIDES = (
    "<html><body><article><h1>Tides</h1><p>Ocean tides on Earth are caused mainly by the "
    "gravitational pull of the Moon.</p><p>The Sun's gravity also contributes, but its effect "
    "is less than half as strong.</p></article></body></html>"
)
SPRING_PAGE = (
    "<html><body><article><h1>Spring tides</h1><p>Spring tides happen near new moon and full "
    "moon, when the Sun, the Earth and the Moon line up.</p><p>Neap tides happen at the "
    "quarter moons.</p></article></body></html>"
)


# the third claim paraphrases page B: a claim copied from the page word for word is settled
# without a judge (checks/validity.py, _verbatim_claim)
def answer_text(farm: Farm, third: str = "Spring tides occur at new moon and at full moon") -> str:
    a = farm.add("science.example.org", "/tides", body=TIDES)
    b = farm.add("oceans.example.net", "/spring", body=SPRING_PAGE)
    return (
        "Ocean tides are caused mainly by the gravitational pull of the Moon [1]. "
        "The Sun's gravity also contributes to the tides [1][2]. "
        f"{third} [2].\n\n[1] {a}\n[2] {b}\n"
    )


def guard_policy(judge: JudgeServer, **policy: Any) -> Policy:
    return Policy(
        fetch=FetchPolicy(allow_private_addresses=True, url_timeout=5.0, retries=0),
        entailment=EntailmentPolicy(backend="judge"),
        freshness=FreshnessPolicy(enabled=False),
        judge=FAST.replace(
            base_url=judge.base_url,
            model="judge-model",
            input_price_per_million=3.0,
            output_price_per_million=15.0,
        ),
        **policy,
    )


async def _check(guard: Guard, text: str) -> Verdict:
    async with guard as g:
        return await g.check(text, question="What causes tides?")


async def test_the_verdict_carries_the_runs_judge_usage(judge: JudgeServer, farm: Farm) -> None:
    verdict = await _check(Guard(guard_policy(judge), resolver=farm.resolver), answer_text(farm))
    assert judge.systems == [JUDGE_PAGE_SYSTEM_PROMPT] * 2  # two pages, two requests
    usage = verdict.judge_usage
    assert usage is not None
    assert (usage.requests, usage.prompt_tokens, usage.completion_tokens) == (2, 2000, 200)
    assert usage.cost == pytest.approx((2000 * 3.0 + 200 * 15.0) / 1_000_000)
    assert usage.skipped == 0
    assert all(c.entailment is not None for c in verdict.claims[0].checks)
    assert verdict.claims[0].supported and verdict.claims[2].supported


async def test_the_guards_cost_budget_stops_the_judge(judge: JudgeServer, farm: Farm) -> None:
    policy = guard_policy(judge, cost_budget=0.0001).replace(judge={"concurrency": 1})
    verdict = await _check(Guard(policy, resolver=farm.resolver), answer_text(farm))
    assert len(judge.bodies) == 1  # 0.0045 after the first page: the second is never asked
    usage = verdict.judge_usage
    assert usage is not None and usage.requests == 1 and usage.skipped == 1
    scores = [c.entailment for claim in verdict.claims for c in claim.checks if c.entailment]
    spent = [s for s in scores if "judge unavailable: cost budget spent" in s.reason]
    # the claims the judge was not asked about are uncertain, never supported: they pass
    # flagged (on_uncertain defaults to "warn" behaviour when the backend is the judge itself)
    assert len(spent) == 2 and {s.label for s in spent} == {"uncertain"}
    flagged = [
        f for f in verdict.axes["validity"].findings if f.code == "validity.support_uncertain"
    ]
    assert len(flagged) == 2 and verdict.passed
    # under on_uncertain="fail" (the behaviour before the bands) the same run is rejected
    judge.bodies.clear()
    strict = policy.replace(entailment={"on_uncertain": "fail"})
    verdict = await _check(Guard(strict, resolver=farm.resolver), answer_text(farm))
    assert len(judge.bodies) == 1 and not verdict.passed


async def test_record_then_replay_gives_the_same_verdict_without_the_judge(
    judge: JudgeServer, farm: Farm, tmp_path: Path
) -> None:
    async def mixed(body: Body) -> web.StreamResponse:  # one claim missing on page B: retried
        drop = frozenset({"1"}) if "2" in claims_of(body) and "1" in claims_of(body) else None
        return chat(
            {"verdicts": verdicts(body, drop=drop or frozenset())},
            prompt_tokens=700,
            completion_tokens=70,
        )

    judge.script = [mixed]
    text = answer_text(farm, third="The Sun causes spring tides alone")
    policy = guard_policy(judge)
    path = tmp_path / "snap.sqlite"
    store = SQLiteSnapshotStore(path)
    recorded = await _check(
        Guard(policy, resolver=farm.resolver, cache=store, snapshot_mode="record"), text
    )
    await store.close()
    asked_live = len(judge.bodies)
    assert asked_live >= 2
    assert recorded.judge_usage is not None and recorded.judge_usage.requests == asked_live
    reasons = {c.reason for claim in recorded.claims for c in claim.checks}
    judged = {
        c.entailment.reason for claim in recorded.claims for c in claim.checks if c.entailment
    }
    # the claim left without a verdict passes uncertain (flagged); the contradiction rejects
    assert any("judge unavailable: no verdict for claim id" in r for r in judged)
    assert any("contradicts" in r for r in reasons)

    await judge.stop()  # the judge is gone: a replay must not need it
    fetched = farm.count()
    for _ in range(2):
        replay_store = SQLiteSnapshotStore(path)
        replayed = await _check(
            Guard(policy, resolver=farm.resolver, cache=replay_store, snapshot_mode="replay"), text
        )
        await replay_store.close()
        assert replayed.model_dump_json() == without_timings(recorded).model_dump_json()
    assert replayed.judge_usage == recorded.judge_usage
    assert len(judge.bodies) == asked_live and farm.count() == fetched

    replay_store = SQLiteSnapshotStore(path)
    other = text.replace("Moon [1]", "Moon, always [1]")  # a question never recorded
    with pytest.raises(SnapshotMiss) as info:
        await _check(
            Guard(policy, resolver=farm.resolver, cache=replay_store, snapshot_mode="replay"),
            other,
        )
    await replay_store.close()
    assert info.value.layer == "judge" and "judge-model" in info.value.key

"""What an uncertain claim does, end to end through ``Guard.check`` with real loopback pages.

``EntailmentPolicy.on_uncertain``: "warn" passes the citation with a
``validity.support_uncertain`` warning (shown by the CLI table, the JSON verdict, the HTML
report, the spans and the regenerate feedback); "fail" rejects it ``not_entailed``; "judge" asks
``Policy.judge`` — a real aiohttp server on 127.0.0.1 speaking the chat-completions format —
about the uncertain claims only, one request per page, within the run's budget, recorded in
and replayed from snapshots.

The word-overlap backend with ``reject_below=0.0, accept_from=1.0`` makes every judged claim
uncertain (no probability reaches 1.0 or falls below 0.0), so which claims are uncertain does
not depend on a model; claims whose words stand on the page as written are settled without any
backend (supported by construction) and are never uncertain.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
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
from citeguard.checks.entail import JUDGE_PAGE_SYSTEM_PROMPT, JUDGE_SYSTEM_PROMPT
from citeguard.feedback import render_feedback
from citeguard.models import CitationStatus, Verdict
from citeguard.policy import EntailmentPolicy, FetchPolicy, JudgePolicy, Policy
from citeguard.render import render_verdict
from citeguard.report import build_report
from citeguard.report_html import render_html
from citeguard.snapshot import SQLiteSnapshotStore
from citeguard.verdict import without_timings

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
PAGE_A = (
    "<html><head><title>Tides</title></head><body><article>"
    "<p>Ocean tides on Earth are caused mainly by the gravitational pull of the Moon.</p>"
    "<p>The Sun's gravity also contributes to the tides, but less than half as strongly.</p>"
    "<p>Spring tides happen near new moon and full moon, when the Sun and Moon line up.</p>"
    "</article></body></html>"
)
PAGE_B = (
    "<html><head><title>Harbours</title></head><body><article>"
    "<p>Harbour pilots read tide tables before guiding large ships into port.</p>"
    "<p>The largest tidal range in the world is found in the Bay of Fundy in Canada.</p>"
    "</article></body></html>"
)
# on page A as written: settled without a backend
VERBATIM = "Ocean tides on Earth are caused mainly by the gravitational pull of the Moon"
# paraphrases: judged, and uncertain under the wide band
PARA_A1 = "The Moon's pull on the oceans is the main cause of tides on Earth"
PARA_A2 = "Tides are made weaker by the Sun, which pulls the oceans more weakly than the Moon"
PARA_B = "The Bay of Fundy in Canada has the biggest tidal range on Earth"

WIDE = EntailmentPolicy(backend="word_overlap", reject_below=0.0, accept_from=1.0)


def _policy(on_uncertain: str | None, **kw: Any) -> Policy:
    return Policy(
        fetch=FetchPolicy(allow_private_addresses=True, retries=0),
        entailment=WIDE.replace(on_uncertain=on_uncertain),
        **kw,
    )


def _answer(farm: Farm, *claims: tuple[str, str]) -> str:
    """Claims, each citing page "a" or "b" of the farm."""
    urls = {"a": farm.add("tides.example.com", "/a", body=PAGE_A)}
    urls["b"] = farm.add("harbours.example.org", "/b", body=PAGE_B)
    refs = {"a": 1, "b": 2}
    body = " ".join(f"{text} [{refs[p]}]." for text, p in claims)
    # only the pages cited are listed (a listed page nothing cites is reported on its own)
    used = sorted({p for _, p in claims}, key=refs.__getitem__)
    return body + "\n\n" + "".join(f"[{refs[p]}] {urls[p]}\n" for p in used)


async def _check(policy: Policy, farm: Farm, text: str, **guard: Any) -> Verdict:
    async with Guard(policy, resolver=farm.resolver, now=lambda: NOW, **guard) as g:
        return await g.check(text, question="What causes tides?")


def _uncertain(verdict: Verdict) -> list[Any]:
    return [f for f in verdict.axes["validity"].findings if f.code == "validity.support_uncertain"]


# --------------------------------------------------------------------------------------------
# warn
# --------------------------------------------------------------------------------------------


async def test_warn_passes_the_citation_and_every_view_shows_the_warning(farm: Farm) -> None:
    text = _answer(farm, (VERBATIM, "a"), (PARA_B, "b"))
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    verdict = await _check(_policy(None), farm, text, tracer_provider=provider)

    # the gate: both citations pass; only the paraphrase is unsettled
    assert verdict.axes["validity"].passed and verdict.passed
    by_url = {c.url.rsplit("/", 1)[1]: c for c in verdict.citations}
    assert by_url["a"].status is CitationStatus.OK and by_url["a"].support == "supported"
    assert by_url["b"].status is CitationStatus.OK and by_url["b"].support == "uncertain"
    assert by_url["b"].entailment is not None and by_url["b"].entailment.label == "uncertain"
    assert by_url["b"].entailment.thresholds == (0.0, 1.0)
    (finding,) = _uncertain(verdict)
    assert finding.severity.value == "warning" and finding.url == by_url["b"].url
    assert finding.claim_index == 1 and "Bay of Fundy" in finding.message

    # the JSON verdict
    data = json.loads(verdict.model_dump_json())
    codes = [f["code"] for f in data["axes"]["validity"]["findings"]]
    assert codes.count("validity.support_uncertain") == 1
    assert {c["support"] for c in data["citations"]} == {"supported", "uncertain"}

    # the CLI table: a note under the uncertain citation only
    table = render_verdict(verdict)
    lines = table.splitlines()
    row = next(i for i, line in enumerate(lines) if by_url["b"].url in line)
    notes = lines[row + 1 : row + 4]
    assert any("warning: support uncertain for claim 2" in n for n in notes)
    assert table.count("support uncertain") == 1

    # the spans: the uncertain citation's span says so
    citation_spans = [s for s in spans.get_finished_spans() if s.name == "citeguard.citation"]
    support = {
        s.attributes["citeguard.url"]: s.attributes.get("citeguard.support") for s in citation_spans
    }
    assert support == {by_url["a"].url: "supported", by_url["b"].url: "uncertain"}
    validity_span = next(
        s for s in spans.get_finished_spans() if s.attributes.get("citeguard.axis") == "validity"
    )
    assert any(
        "validity.support_uncertain" in f for f in validity_span.attributes["citeguard.findings"]
    )

    # the regenerate feedback (of a verdict that failed elsewhere): the unsettled claim is named
    fb = render_feedback(verdict, attempt=1, exclude_urls=frozenset())
    assert "Not settled" in fb.message and "Bay of Fundy" in fb.message
    assert [f.code for f in fb.findings] == ["validity.support_uncertain"]

    # the HTML report of a failing case holding this verdict
    failing = data | {"passed": False}
    failing["axes"]["freshness"] = failing["axes"]["freshness"] | {"passed": False}
    html = render_html(build_report([{"prompt": "tides", "answer": text, "verdict": failing}]))
    assert html.count("support uncertain") == 1
    assert "validity.support_uncertain" in html


async def test_fail_rejects_an_uncertain_claim_as_before(farm: Farm) -> None:
    text = _answer(farm, (VERBATIM, "a"), (PARA_B, "b"))
    verdict = await _check(_policy("fail"), farm, text)
    by_url = {c.url.rsplit("/", 1)[1]: c for c in verdict.citations}
    assert by_url["a"].status is CitationStatus.OK
    assert by_url["b"].status is CitationStatus.NOT_ENTAILED
    assert "uncertain" in by_url["b"].reason and by_url["b"].support == "uncertain"
    assert not verdict.passed and not _uncertain(verdict)


async def test_not_supported_is_still_a_hard_reject_under_warn(farm: Farm) -> None:
    """The default bands: a claim the page says nothing about is rejected, warn or not."""
    text = _answer(farm, ("Penguins migrate across Antarctic ice shelves every winter", "b"))
    policy = _policy(None).replace(entailment={"reject_below": None, "accept_from": None})
    verdict = await _check(policy, farm, text)
    (c,) = verdict.citations
    assert c.status in (CitationStatus.NOT_ENTAILED, CitationStatus.PASSAGE_MISSING)
    assert not verdict.passed


async def test_a_paraphrase_the_lexical_check_cannot_place_reaches_the_support_judgement(
    farm: Farm,
) -> None:
    """Item 3: ``passage_missing`` only where nothing relevant is on the page; a loose
    paraphrase goes to the backend with the page's best windows."""
    text = _answer(farm, (PARA_A2, "a"))
    verdict = await _check(_policy(None), farm, text)
    (c,) = verdict.citations
    (check,) = verdict.claims[0].checks
    # the lexical check could not place it
    assert check.passage is not None and not check.passage.found
    assert check.passage.how == "paraphrase"
    assert c.status is CitationStatus.OK and c.support == "uncertain"
    assert c.entailment is not None and "Sun" in c.entailment.evidence
    # a page with nothing about the claim: passage_missing, no backend asked
    other = _answer(farm, ("Penguins migrate across Antarctic ice shelves every winter", "a"))
    verdict = await _check(_policy(None), farm, other)
    (c,) = verdict.citations
    assert c.status is CitationStatus.PASSAGE_MISSING and c.entailment is None


# --------------------------------------------------------------------------------------------
# judge: the cascade
# --------------------------------------------------------------------------------------------


class ChatServer:
    """A chat-completions judge on 127.0.0.1: supported unless the claim says "Sun" (then
    not_supported) or "Fundy" (then it cannot tell); a usage block on every reply."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.base_url = ""
        self.status = 200

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        if self.status != 200:
            return web.Response(status=self.status)
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if system == JUDGE_PAGE_SYSTEM_PROMPT:
            claims = json.loads(user)["claims"]
            reply: object = {
                "verdicts": [self._verdict(c["claim"]) | {"id": c["id"]} for c in claims]
            }
        else:
            assert system == JUDGE_SYSTEM_PROMPT
            reply = self._verdict(user.split("\n")[1])
        payload = {
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": json.dumps(reply)}}
            ],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100},
        }
        return web.json_response(payload)

    @staticmethod
    def _verdict(claim: str) -> dict[str, Any]:
        label = (
            "not_supported" if "Sun" in claim else "uncertain" if "Fundy" in claim else "supported"
        )
        return {"label": label, "confidence": 0.9, "reason": f"judged {claim[:20]}"}

    def claims_asked(self) -> list[list[str]]:
        out = []
        for b in self.bodies:
            system, user = b["messages"][0]["content"], b["messages"][1]["content"]
            if system == JUDGE_PAGE_SYSTEM_PROMPT:
                out.append(sorted(c["claim"] for c in json.loads(user)["claims"]))
            else:
                out.append([user.split("\n")[1]])
        return out


@pytest_asyncio.fixture
async def judge() -> AsyncIterator[ChatServer]:
    server = ChatServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", server.handle)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    server.base_url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    yield server
    await runner.cleanup()


def _judged(judge: ChatServer, on_uncertain: str | None = None, **kw: Any) -> Policy:
    return _policy(
        on_uncertain,
        judge=JudgePolicy(
            base_url=judge.base_url,
            model="judge-model",
            backoff=0.0,
            retries=1,
            api_key_env="CITEGUARD_TEST_NO_KEY",
            input_price_per_million=3.0,
            output_price_per_million=15.0,
            concurrency=1,
        ),
        **kw,
    )


async def test_the_cascade_sends_only_uncertain_claims_one_request_per_page(
    farm: Farm, judge: ChatServer
) -> None:
    text = _answer(farm, (VERBATIM, "a"), (PARA_A1, "a"), (PARA_A2, "a"), (PARA_B, "b"))
    policy = _judged(judge)  # on_uncertain defaults to "judge" with a judge configured
    assert policy.on_uncertain_mode == "judge"
    verdict = await _check(policy, farm, text)

    # page a: one request for its two uncertain claims (not the verbatim one); page b: one
    asked = sorted([c.rstrip(".") for c in claims] for claims in judge.claims_asked())
    assert asked == sorted([sorted([PARA_A1, PARA_A2]), [PARA_B]])
    checks = {ch.claim_index: ch for cl in verdict.claims for ch in cl.checks}
    assert checks[0].entailment is not None and checks[0].entailment.backend == "verbatim"
    assert checks[1].status is CitationStatus.OK and checks[1].entailment.label == "supported"
    assert checks[1].entailment.backend == "judge"
    assert "word_overlap was uncertain" in checks[1].entailment.reason
    # the judge's not_supported is a hard reject
    assert checks[2].status is CitationStatus.NOT_ENTAILED
    assert checks[2].entailment.label == "not_supported"
    # the judge could not tell: the claim passes, flagged
    assert checks[3].status is CitationStatus.OK and checks[3].entailment.label == "uncertain"
    assert [f.claim_index for f in _uncertain(verdict)] == [3]
    assert verdict.judge_usage is not None and verdict.judge_usage.requests == 2


async def test_a_judge_that_is_down_leaves_the_claim_uncertain_never_supported(
    farm: Farm, judge: ChatServer
) -> None:
    judge.status = 503
    text = _answer(farm, (PARA_A1, "a"))
    verdict = await _check(_judged(judge), farm, text)
    (c,) = verdict.citations
    assert c.status is CitationStatus.OK and c.support == "uncertain"
    assert c.entailment is not None and c.entailment.label == "uncertain"
    assert "judge unavailable" in c.entailment.reason
    assert len(_uncertain(verdict)) == 1 and judge.bodies  # it was asked (and retried)
    # under "fail" the same unanswered claim is rejected
    verdict = await _check(_judged(judge, "fail"), farm, text)
    assert verdict.citations[0].status is CitationStatus.NOT_ENTAILED


async def test_a_spent_budget_leaves_the_next_pages_claims_uncertain(
    farm: Farm, judge: ChatServer
) -> None:
    text = _answer(farm, (PARA_A1, "a"), (PARA_B, "b"))
    # the first request costs 0.0045: the second page is never asked
    verdict = await _check(_judged(judge, cost_budget=0.001), farm, text)
    assert len(judge.bodies) == 1
    usage = verdict.judge_usage
    assert usage is not None and (usage.requests, usage.skipped) == (1, 1)
    labels = sorted(
        ch.entailment.label for cl in verdict.claims for ch in cl.checks if ch.entailment
    )
    # page a's claim was judged supported, page b's could not be asked: uncertain, not supported
    assert labels == ["supported", "uncertain"]
    (finding,) = _uncertain(verdict)
    assert "cost budget spent" in finding.message
    assert verdict.passed


async def test_the_cascade_replays_from_snapshots_without_the_judge(
    farm: Farm, judge: ChatServer, tmp_path: Path
) -> None:
    text = _answer(farm, (VERBATIM, "a"), (PARA_A1, "a"), (PARA_A2, "a"), (PARA_B, "b"))
    policy = _judged(judge)
    path = tmp_path / "snap.sqlite"
    store = SQLiteSnapshotStore(path)
    recorded = await _check(policy, farm, text, cache=store, snapshot_mode="record")
    await store.close()
    asked = len(judge.bodies)
    assert asked == 2
    judge.status = 500  # a replay must not reach it
    replay_store = SQLiteSnapshotStore(path)
    replayed = await _check(policy, farm, text, cache=replay_store, snapshot_mode="replay")
    await replay_store.close()
    assert len(judge.bodies) == asked
    assert replayed.model_dump_json() == without_timings(recorded).model_dump_json()


@pytest.mark.parametrize("mode", ["warn", "fail"])
async def test_no_judge_is_asked_unless_the_mode_says_judge(
    farm: Farm, judge: ChatServer, mode: str
) -> None:
    text = _answer(farm, (PARA_A1, "a"))
    verdict = await _check(_judged(judge, mode), farm, text)
    assert judge.bodies == [] and verdict.judge_usage is None


async def test_the_judge_reads_the_evidence_found_on_the_whole_page(
    farm: Farm, judge: ChatServer
) -> None:
    """A long page states the claim's fact at the top and its year 60 paragraphs below: the
    judge is asked with both (the sentences found on the page), not the window of a match, and
    not the whole page."""
    filler = "".join(
        f"<p>Paragraph {i} lists inventory item {i * 7} of the warehouse catalogue.</p>"
        for i in range(100)
    )
    page = (
        "<html><head><title>Harbour news</title></head><body><article>"
        "<p>The harbour authority opened the new container terminal after years of planning.</p>"
        f"{filler[: len(filler) * 6 // 10]}"
        "<p>Construction of the terminal ended in 2019, on schedule and under budget.</p>"
        f"{filler[len(filler) * 6 // 10 :]}</article></body></html>"
    )
    url = farm.add("port.example.com", "/terminal", body=page)
    claim = "The harbour authority opened the new container terminal in 2019"
    verdict = await _check(_judged(judge), farm, f"{claim} [1].\n\n[1] {url}\n")
    assert verdict.citations[0].status is CitationStatus.OK
    (body,) = judge.bodies
    asked = body["messages"][1]["content"]
    assert "opened the new container terminal" in asked and "ended in 2019" in asked
    assert "Paragraph 30 " not in asked

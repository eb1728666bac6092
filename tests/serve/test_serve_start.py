"""``citeguard serve`` as a new user starts it: the README's command forwards the provider's key,
the start log says where the upstream key comes from (never the key), ``--allow-private`` lets
the guard fetch pages on the user's own network, and ``--judge-model`` sends uncertain claims to
the upstream itself, metered and recorded. Real processes, a real OpenAI SDK client, and a real
stand-in upstream on 127.0.0.1 speaking chat completions."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from aiohttp import web

from citeguard.checks.entail import JUDGE_PAGE_SYSTEM_PROMPT, JUDGE_SYSTEM_PROMPT
from citeguard.policy import Policy
from serve.answers import good
from serve.processes import Served, run_bare, start, stop, wait_ready
from serve.servers import FakeUpstream, Loop, Pages, serve_policy, start_runner
from tests.integrations.gateway_servers import judge_reply, recorded_judges

ROOT = Path(__file__).resolve().parents[2]
PROVIDER_KEY = "sk-provider-secret-123"


def _events(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in lines if ln.startswith("{")]


def _upstream_event(served: Served) -> dict[str, Any]:
    (event,) = [e for e in _events(served.started) if e.get("event") == "upstream"]
    return event


def _readme_serve_command() -> tuple[dict[str, str], list[str]]:
    """The README's ``citeguard serve`` line: its variables and its arguments after ``serve``."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (line,) = [
        ln
        for ln in readme.splitlines()
        if re.search(r"\bciteguard serve\b", ln) and not ln.startswith(("`", "#", "[", "-"))
    ]
    words = shlex.split(line)
    env: dict[str, str] = {}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words[:2] == ["citeguard", "serve"], line
    return env, words[2:]


def _policy_file(tmp_path: Path, policy: Policy) -> Path:
    path = tmp_path / "policy.json"
    path.write_text(policy.model_dump_json())
    return path


@pytest.fixture
def no_private_policy(tmp_path: Path) -> Path:
    """serve_policy() with loopback pages refused (the default)."""
    return _policy_file(tmp_path, serve_policy().replace(fetch={"allow_private_addresses": False}))


def test_the_readmes_serve_command_sends_the_provider_key_upstream(
    no_private_policy: Path, upstream: FakeUpstream, pages: Pages
) -> None:
    env, args = _readme_serve_command()
    # as a user runs it: $OPENAI_API_KEY expanded by the shell, the provider's URL ours
    env = {k: v.replace("$OPENAI_API_KEY", PROVIDER_KEY) for k, v in env.items()}
    args = [upstream.url if a == "https://api.openai.com" else a for a in args]
    assert "CITEGUARD_UPSTREAM_API_KEY" in env  # the README names the upstream key
    served = start(
        [*args, "--port", "0"],
        {**env, "CITEGUARD_POLICY": str(no_private_policy), "OPENAI_API_KEY": PROVIDER_KEY},
    )
    try:
        wait_ready(served.url)
        client_key = env["CITEGUARD_API_KEYS"]
        upstream.script("Hello.")
        client = openai.OpenAI(base_url=f"{served.url}/v1", api_key=client_key, max_retries=0)
        # an uncited answer may be refused; what matters here is what went upstream
        with contextlib.suppress(openai.APIStatusError):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "q"}], timeout=60
            )
        assert upstream.headers, "nothing reached the upstream"
        assert {h["Authorization"] for h in upstream.headers} == {f"Bearer {PROVIDER_KEY}"}
        assert _upstream_event(served)["key"] == "from CITEGUARD_UPSTREAM_API_KEY"
        # without --allow-private, a page on 127.0.0.1 is refused even with the policy file
        r = httpx.post(
            f"{served.url}/v1/check",
            json={"answer": good(pages)},
            headers={"authorization": f"Bearer {client_key}"},
            timeout=60,
        )
        assert r.json()["passed"] is False
    finally:
        stop(served)
    served.reader.join(30)
    assert not any(PROVIDER_KEY in ln for ln in served.started + served.log)


def test_without_a_server_key_the_log_says_the_clients_key_goes_upstream(
    no_private_policy: Path, upstream: FakeUpstream
) -> None:
    bare = {k: "" for k in os.environ if k.startswith("CITEGUARD_")}
    served = start(
        ["--port", "0", "--upstream", upstream.url, "--policy", str(no_private_policy)], bare
    )
    try:
        assert "client's own Authorization" in _upstream_event(served)["key"]
        wait_ready(served.url)
        upstream.script("Hello.")
        client = openai.OpenAI(base_url=f"{served.url}/v1", api_key="sk-client-own", max_retries=0)
        with contextlib.suppress(openai.APIStatusError):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "q"}], timeout=60
            )
        assert upstream.headers and upstream.headers[0]["Authorization"] == "Bearer sk-client-own"
    finally:
        stop(served)


# --------------------------------------------------------------------------------------------
# --judge-model: the upstream answers and judges
# --------------------------------------------------------------------------------------------

JUDGE_MODEL = "judge-model-x"
JUDGE_PROMPTS = (JUDGE_PAGE_SYSTEM_PROMPT, JUDGE_SYSTEM_PROMPT)
# a paraphrase of the /good page: uncertain under the wide band, so it goes to the judge
PARAPHRASE = "In Paris, the tower on the Champ de Mars rises to a height of 330 metres"


class AnswerAndJudge:
    """A chat-completions upstream: the judge's questions (``model`` the judge's) answered
    "supported" with a usage block, every other request with an answer citing ``/good``."""

    def __init__(self, loop: Loop, pages: Pages) -> None:
        self.loop = loop
        self.pages = pages
        self.bodies: list[dict[str, Any]] = []
        self.auth: list[str] = []
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        self.runner = web.AppRunner(app)
        self.port = loop.run(start_runner(self.runner))

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        self.auth.append(request.headers.get("Authorization", ""))
        content = judge_reply(body) or f"{PARAPHRASE} ([source]({self.pages.url('/good')}))."
        return web.json_response(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100},
            }
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.loop.run(self.runner.cleanup())


@pytest.fixture
def answer_and_judge(bg_loop: Loop, pages: Pages) -> Iterator[AnswerAndJudge]:
    server = AnswerAndJudge(bg_loop, pages)
    yield server
    server.close()


def test_judge_model_cascades_uncertain_claims_to_the_upstream(
    tmp_path: Path, answer_and_judge: AnswerAndJudge
) -> None:
    # every paraphrase uncertain (word overlap, the widest band); priced; loopback refused by
    # the policy: --allow-private is what lets the guard fetch the page
    policy = serve_policy().replace(
        fetch={"allow_private_addresses": False},
        entailment={"backend": "word_overlap", "reject_below": 0.0, "accept_from": 1.0},
        judge={"input_price_per_million": 3.0, "output_price_per_million": 15.0},
        cost_budget=1.0,
    )
    store = tmp_path / "guard.sqlite"
    served = start(
        [
            "--port", "0",
            "--upstream", answer_and_judge.url,
            "--policy", str(_policy_file(tmp_path, policy)),
            "--judge-model", JUDGE_MODEL,
            "--allow-private",
            "--store", str(store),
        ],
        {"CITEGUARD_UPSTREAM_API_KEY": PROVIDER_KEY},
    )  # fmt: skip
    try:
        assert _upstream_event(served)["judge"].startswith(JUDGE_MODEL)
        wait_ready(served.url)
        client = openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0)
        raw = client.chat.completions.with_raw_response.create(
            model="answer-model", messages=[{"role": "user", "content": "How tall?"}], timeout=60
        )
        completion = raw.parse()
    finally:
        stop(served)
    guard = (completion.model_extra or {})["citeguard"]
    assert PARAPHRASE in (completion.choices[0].message.content or "")
    # the judge's request reached the upstream with the judge's model and the provider key
    judged = [b for b in answer_and_judge.bodies if b["model"] == JUDGE_MODEL]
    assert judged and judged[0]["messages"][0]["content"] in JUDGE_PROMPTS
    assert PARAPHRASE in judged[0]["messages"][1]["content"]
    assert set(answer_and_judge.auth) == {f"Bearer {PROVIDER_KEY}"}
    # the claim's support came from the judge, metered at the policy's prices
    (citation,) = guard["citations"]
    assert citation["status"] == "ok" and citation["entailment"]["backend"] == "judge"
    usage = guard["judge_usage"]
    assert usage["requests"] == len(judged)
    assert usage["prompt_tokens"] == 1000 * len(judged)
    assert usage["cost"] == pytest.approx(len(judged) * (1000 * 3 + 100 * 15) / 1e6)
    # and recorded in the snapshot store's judge layer
    assert recorded_judges(store) >= 1


def test_judge_model_needs_an_upstream() -> None:
    out = run_bare(["--port", "0", "--judge-model", "m"])
    assert out.returncode == 2
    assert "asks the upstream" in out.stderr and "Traceback" not in out.stderr

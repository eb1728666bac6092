"""The judge a gateway already pays for: the gateway settings' ``judge_model`` (with
``judge_base_url`` and ``judge_api_key_env``, or the ``CITEGUARD_JUDGE_*`` variables) sends the
claims the local model is unsure of to that model, metered at the policy's prices, reported in
the gateway's verdict (``judge_usage``) and recorded in the snapshot store.

The judge is the loopback upstream itself (``Servers``: it answers citeguard's judge prompts
"supported", with a ``usage`` block); the gateways are a real LiteLLM proxy process with the
guardrail class, and ``citeguard serve``'s generic guardrail API under uvicorn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from citeguard.checks.entail import JUDGE_PAGE_SYSTEM_PROMPT, JUDGE_SYSTEM_PROMPT
from citeguard.errors import PolicyError
from citeguard.integrations.gateway import GatewaySettings
from citeguard.policy import Policy
from tests.integrations.gateway_servers import (
    QUESTION,
    LiteLLMProxy,
    Servers,
    answers,
    gateway_app,
    policy_json,
    recorded_judges,
    require_litellm,
    write_config,
)

JUDGE_MODEL = "judge-model-x"
JUDGE_KEY = "sk-judge-secret-42"
# every claim uncertain under word overlap's widest band, so each goes to the judge; priced
UNSURE = {"backend": "word_overlap", "reject_below": 0.0, "accept_from": 1.0}
PRICES = {"input_price_per_million": 3.0, "output_price_per_million": 15.0}
# the upstream's usage block on every reply (tests/integrations/gateway_servers.py)
PROMPT_TOKENS, COMPLETION_TOKENS = 12, 40


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with Servers() as s:
        yield s


def _priced_policy(**judge: Any) -> str:
    return policy_json(entailment=UNSURE, judge={**PRICES, **judge}, cost_budget=1.0)


def _assert_metered(usage: dict[str, Any], judged: int) -> None:
    assert usage["requests"] == judged >= 1
    assert usage["prompt_tokens"] == PROMPT_TOKENS * judged
    assert usage["completion_tokens"] == COMPLETION_TOKENS * judged
    assert usage["cost"] == pytest.approx(
        judged * (PROMPT_TOKENS * 3.0 + COMPLETION_TOKENS * 15.0) / 1e6
    )


# --------------------------------------------------------------------------------------------
# The settings
# --------------------------------------------------------------------------------------------


def test_the_judge_comes_from_the_settings_unless_the_policy_has_one(tmp_path: Path) -> None:
    env = {
        "CITEGUARD_JUDGE_MODEL": "gpt-4o-mini",
        "CITEGUARD_JUDGE_BASE_URL": "https://api.openai.com",
        "CITEGUARD_JUDGE_API_KEY_ENV": "PROVIDER_KEY",
    }
    policy = GatewaySettings.load(env=env).load_policy()
    assert (policy.judge.base_url, policy.judge.model, policy.judge.api_key_env) == (
        "https://api.openai.com/v1",
        "gpt-4o-mini",
        "PROVIDER_KEY",
    )
    assert policy.on_uncertain_mode == "judge"
    # the gateway's own configuration wins; the key variable left out is the policy's default
    params = {"judge_model": "m2", "judge_base_url": "http://litellm:4000/v1/"}
    policy = GatewaySettings.load(params, env={"CITEGUARD_JUDGE_MODEL": "m1"}).load_policy()
    assert (policy.judge.base_url, policy.judge.model) == ("http://litellm:4000/v1", "m2")
    assert policy.judge.api_key_env == Policy().judge.api_key_env
    # a policy file that configures a judge of its own keeps it
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"judge": {"base_url": "http://mine/v1", "model": "mine"}}))
    settings = GatewaySettings.load(
        {"policy": str(path), "judge_model": "theirs", "judge_base_url": "http://theirs"}, env={}
    )
    judge = settings.load_policy().judge
    assert (judge.base_url, judge.model) == ("http://mine/v1", "mine")


def test_a_judge_model_needs_a_base_url() -> None:
    with pytest.raises(PolicyError, match="judge_model needs judge_base_url"):
        GatewaySettings.load(env={"CITEGUARD_JUDGE_MODEL": "m"})


# --------------------------------------------------------------------------------------------
# The LiteLLM guardrail class in a real LiteLLM proxy
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(600)
def test_the_litellm_guardrail_asks_the_judge_model(servers: Servers, tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    python = require_litellm()
    policy = tmp_path / "policy.json"
    policy.write_text(_priced_policy())
    store = tmp_path / "guard.sqlite"
    config = write_config(
        tmp_path / "config.yaml",
        upstream=servers.upstream,
        models=["paraphrased"],
        guardrails=[
            {
                "guardrail_name": "citeguard",
                "litellm_params": {
                    "guardrail": "citeguard.integrations.litellm.CiteguardGuardrail",
                    "mode": "post_call",
                    "default_on": True,
                    "policy": str(policy),
                    "store": str(store),
                    # the provider the proxy routes to is the judge
                    "judge_model": JUDGE_MODEL,
                    "judge_base_url": servers.upstream,
                    "judge_api_key_env": "JUDGE_KEY",
                },
            }
        ],
    )
    servers.judged.clear()
    with LiteLLMProxy(python, config, {"JUDGE_KEY": JUDGE_KEY}) as proxy:
        client = openai.OpenAI(
            base_url=f"{proxy.url}/v1", api_key=proxy.key, max_retries=0, timeout=120
        )
        completion = client.chat.completions.create(
            model="paraphrased", messages=[{"role": "user", "content": QUESTION}]
        )
    assert completion.choices[0].message.content == answers(servers.site)["paraphrased"]
    # the judge's questions reached the upstream with the judge's model and key
    assert servers.judged
    for body, auth in servers.judged:
        assert body["model"] == JUDGE_MODEL and auth == f"Bearer {JUDGE_KEY}"
        assert body["messages"][0]["content"] in (JUDGE_PAGE_SYSTEM_PROMPT, JUDGE_SYSTEM_PROMPT)
    # the verdict: support from the judge, its usage metered at the policy's prices
    verdict = (completion.model_extra or {})["citeguard"]
    assert verdict["verdict"] == "passed"
    _assert_metered(verdict["judge_usage"], len(servers.judged))
    # and each judge reply recorded in the snapshot store's judge layer
    assert recorded_judges(store) == len(servers.judged)


# --------------------------------------------------------------------------------------------
# The generic guardrail API (citeguard serve's app)
# --------------------------------------------------------------------------------------------


def test_the_generic_guardrail_api_reports_the_judges_usage(servers: Servers) -> None:
    policy = _priced_policy(base_url=servers.upstream + "/v1", model=JUDGE_MODEL)
    servers.judged.clear()
    with gateway_app(policy) as url:
        r = httpx.post(
            f"{url}/beta/litellm_basic_guardrail_api",
            json={
                "texts": [answers(servers.site)["paraphrased"]],
                "input_type": "response",
                "structured_messages": [{"role": "user", "content": QUESTION}],
            },
            timeout=120,
        )
    assert r.status_code == 200
    (verdict,) = r.json()["citeguard"]
    assert verdict["verdict"] == "passed"
    assert servers.judged and {b["model"] for b, _ in servers.judged} == {JUDGE_MODEL}
    _assert_metered(verdict["judge_usage"], len(servers.judged))

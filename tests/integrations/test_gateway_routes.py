"""citeguard's gateway endpoints over real HTTP (uvicorn on 127.0.0.1, httpx as the client):
LiteLLM's generic guardrail API and Portkey's webhook guardrail, answered for requests in each
gateway's documented shape. The Portkey request is a recorded ``afterRequestHook`` body
(``tests/fixtures/portkey_webhook_after_request.json``) with the cited site's address filled in.
"""

from __future__ import annotations

import copy
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

from citeguard.serve import Settings
from tests.integrations.gateway_servers import (
    GATEWAYS_DOC,
    QUESTION,
    Servers,
    answers,
    completion,
    documented,
    documented_keys,
    gateway_app,
)

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "portkey_webhook_after_request.json"
LITELLM_PATH = "/beta/litellm_basic_guardrail_api"
PORTKEY_PATH = "/v1/portkey/webhook"


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with Servers() as s:
        yield s


@pytest.fixture(scope="module")
def app_url() -> Iterator[str]:
    with gateway_app() as url:
        yield url


@pytest.fixture()
def http(app_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=app_url, timeout=30) as c:
        yield c


def _litellm(texts: list[str], **params: Any) -> dict[str, Any]:
    """A post-call request as LiteLLM's generic_guardrail_api sends it."""
    return {
        "texts": texts,
        "images": None,
        "tools": None,
        "structured_messages": [{"role": "user", "content": QUESTION}],
        "request_data": {"user_api_key_hash": "h", "user_api_key_alias": None},
        "request_headers": {"user-agent": "OpenAI/Python"},
        "litellm_version": "1.108.7",
        "input_type": "response",
        "litellm_call_id": "call-1",
        "litellm_trace_id": "trace-1",
        "additional_provider_specific_params": params,
        "model": "gpt-4o-search-preview",
    }


def _portkey(site: str, model: str = "dead") -> dict[str, Any]:
    body: dict[str, Any] = json.loads(RECORDED.read_text().replace("{{SITE}}", site))
    if model != "dead":
        content = answers(site)[model]
        body["response"]["json"] = completion(model, content, site)
        body["response"]["text"] = content
    return body


# --------------------------------------------------------------------------------------------
# LiteLLM's generic guardrail API
# --------------------------------------------------------------------------------------------


def test_litellm_api_good_text_is_none(http: httpx.Client, servers: Servers) -> None:
    r = http.post(LITELLM_PATH, json=_litellm([answers(servers.site)["good"]]))
    assert r.status_code == 200
    body = r.json()
    assert body["action"] == "NONE" and "texts" not in body
    assert body["citeguard"][0]["passed"] is True


def test_litellm_api_blocks_with_a_reason(http: httpx.Client, servers: Servers) -> None:
    r = http.post(LITELLM_PATH, json=_litellm([answers(servers.site)["misquoted"]]))
    body = r.json()
    assert body["action"] == "BLOCKED"
    assert "passage_altered" in body["blocked_reason"] and "450" in body["blocked_reason"]


def test_litellm_api_repairs_each_text(http: httpx.Client, servers: Servers) -> None:
    good, dead = answers(servers.site)["good"], answers(servers.site)["dead"]
    r = http.post(LITELLM_PATH, json=_litellm([good, dead], on_fail="repair"))
    body = r.json()
    assert body["action"] == "GUARDRAIL_INTERVENED"
    assert body["texts"][0] == good
    assert "/gone" not in body["texts"][1] and body["texts"][1].count("/tower") == 2
    assert [m["action"] for m in body["citeguard"]] == ["pass", "repair"]


def test_litellm_api_annotate_lets_it_through(http: httpx.Client, servers: Servers) -> None:
    r = http.post(LITELLM_PATH, json=_litellm([answers(servers.site)["dead"]], on_fail="report"))
    body = r.json()
    assert body["action"] == "NONE"
    assert body["citeguard"][0]["action"] == "annotate"
    # plain text: the URL as written (a provider response's utm_source is stripped)
    assert body["citeguard"][0]["offending_urls"] == [f"{servers.site}/gone?utm_source=openai"]


def test_litellm_api_leaves_requests_alone(http: httpx.Client, servers: Servers) -> None:
    payload = _litellm([answers(servers.site)["dead"]])
    payload["input_type"] = "request"
    assert http.post(LITELLM_PATH, json=payload).json() == {"action": "NONE"}


def test_litellm_api_bad_requests_get_clear_errors(http: httpx.Client) -> None:
    r = http.post(LITELLM_PATH, json={"texts": ["x"]})  # no input_type
    assert r.status_code == 422 and "input_type" in r.json()["error"]["message"]
    r = http.post(LITELLM_PATH, json=_litellm(["x"], on_fail="explode"))
    assert r.status_code == 422 and "on_fail must be one of" in r.json()["error"]["message"]
    r = http.post(LITELLM_PATH, json=_litellm(["x"] * 65))
    assert r.status_code == 422


# --------------------------------------------------------------------------------------------
# Portkey's webhook guardrail
# --------------------------------------------------------------------------------------------


def test_portkey_good_answer_passes(http: httpx.Client, servers: Servers) -> None:
    body = http.post(PORTKEY_PATH, json=_portkey(servers.site, "good")).json()
    assert body["verdict"] is True and "transformedData" not in body
    assert body["data"]["checked"] is True and body["data"]["passed"] is True


def test_portkey_bad_answer_fails_with_reasons(http: httpx.Client, servers: Servers) -> None:
    body = http.post(PORTKEY_PATH, json=_portkey(servers.site)).json()
    assert body["verdict"] is False
    assert body["data"]["offending_urls"] == [f"{servers.site}/gone?utm_source=openai"]
    assert "not_found" in body["data"]["message"]


def test_portkey_sees_annotations(http: httpx.Client, servers: Servers) -> None:
    # response.json is the whole provider response: an annotation-only citation is checked
    body = http.post(PORTKEY_PATH, json=_portkey(servers.site, "annotated")).json()
    assert body["verdict"] is False
    assert body["data"]["offending_urls"] == [f"{servers.site}/gone"]


def test_portkey_repair_returns_the_whole_transformed_response(
    http: httpx.Client, servers: Servers
) -> None:
    sent = _portkey(servers.site)
    body = http.post(PORTKEY_PATH, params={"on_fail": "repair"}, json=sent).json()
    assert body["verdict"] is True
    repaired = body["transformedData"]["response"]["json"]
    original = sent["response"]["json"]
    # every field kept (Portkey replaces the response with this object), the text mended
    assert {k: v for k, v in repaired.items() if k != "choices"} == {
        k: v for k, v in original.items() if k != "choices"
    }
    message = repaired["choices"][0]["message"]
    assert "/gone" not in message["content"] and message["content"].count("/tower") == 2
    # the dead link now points where the answer's other citation does
    assert [a["url_citation"]["url"] for a in message["annotations"]] == [
        f"{servers.site}/tower?utm_source=openai"
    ] * 2


def test_portkey_before_request_hook_passes_unchecked(http: httpx.Client, servers: Servers) -> None:
    sent = _portkey(servers.site)
    sent["eventType"] = "beforeRequestHook"
    sent["response"] = {"json": {}, "text": "", "statusCode": None}
    assert http.post(PORTKEY_PATH, json=sent).json() == {
        "verdict": True,
        "data": {"checked": False},
    }


def test_portkey_answers_before_its_timeout(http: httpx.Client, servers: Servers) -> None:
    sent = copy.deepcopy(_portkey(servers.site, "good"))
    slow = f"{servers.site}/slow?s=5"
    sent["response"]["json"] = completion("slow", f'It "stands 330 metres tall" ([t]({slow})).', "")
    t0 = time.perf_counter()
    body = http.post(PORTKEY_PATH, params={"timeout_ms": 1000}, json=sent).json()
    elapsed = time.perf_counter() - t0
    assert body["verdict"] is False and body["data"]["checked"] is False
    assert "within 1000 ms" in body["data"]["message"]
    assert elapsed < 5.0  # the slow page takes 5 s; the answer came at the deadline
    passed = http.post(
        PORTKEY_PATH, params={"timeout_ms": 1000, "on_timeout": "pass"}, json=sent
    ).json()
    assert passed["verdict"] is True and passed["data"]["checked"] is False


# --------------------------------------------------------------------------------------------
# The configurations docs/gateways.md gives, against citeguard serve with API keys (issue 53):
# the wire request each implies (where it goes, the key it sends) is answered, not 401
# --------------------------------------------------------------------------------------------


def _keyed_target(url: str, app: str) -> str:
    """``url`` (a documented address of citeguard serve) at the test's ``app`` instead."""
    parts = urlsplit(url)
    assert parts.port == Settings().port  # the documented address is where serve listens
    return app + parts.path + (f"?{parts.query}" if parts.query else "")


def test_the_documented_litellm_generic_config_is_answered_with_its_key(
    servers: Servers,
) -> None:
    section = "LiteLLM: the generic guardrail API"
    params = yaml.safe_load(documented(section, "yaml"))["guardrails"][0]["litellm_params"]
    keys, variable, key = documented_keys(documented(section, "bash"))
    # LiteLLM reads api_key (os.environ/NAME: that variable) and sends it as x-api-key
    assert params["api_key"] == f"os.environ/{variable}"
    sent = _litellm([answers(servers.site)["good"]])
    with gateway_app(api_keys=frozenset(keys)) as app:
        target = _keyed_target(params["api_base"], app) + LITELLM_PATH
        answered = httpx.post(target, json=sent, headers={"x-api-key": key}, timeout=30)
        refused = httpx.post(target, json=sent, timeout=30)
    assert answered.status_code == 200 and answered.json()["action"] == "NONE"
    assert refused.status_code == 401  # what the configuration without its key got


def test_the_documented_portkey_webhook_is_answered_with_its_key(servers: Servers) -> None:
    section = "Portkey: the webhook guardrail"
    check = json.loads(documented(section, "json"))["output_guardrails"][0]["default.webhook"]
    served = re.search(r"CITEGUARD_API_KEYS=(\S+)", GATEWAYS_DOC.read_text().split(section)[1])
    assert served is not None
    keys = served.group(1).split(",")
    headers = check["headers"]  # Portkey sends the check's headers with each request
    sent = _portkey(servers.site, "good")
    with gateway_app(api_keys=frozenset(keys)) as app:
        target = _keyed_target(check["webhookURL"], app)
        answered = httpx.post(target, json=sent, headers=headers, timeout=30)
        refused = httpx.post(target, json=sent, timeout=30)
    assert answered.status_code == 200 and answered.json()["verdict"] is True
    assert refused.status_code == 401

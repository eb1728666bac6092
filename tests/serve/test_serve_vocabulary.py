"""One vocabulary: the same outcome gives the same word (``passed``, ``repaired``,
``rejected``: ``citeguard.models.VerdictWord``) in the header ``x-citeguard-verdict`` and the
body field ``verdict`` of every path: the proxy streamed and not, ``/v1/check``, the gateway
endpoints (LiteLLM's generic guardrail API, Portkey's webhook) and the CLI's JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import openai

from serve.answers import dead, good
from serve.servers import KEY, FakeUpstream, Pages, Service
from serve.streams import MESSAGES, chat_stream

AUTH = {"authorization": f"Bearer {KEY}"}


def _openai(service: Service) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{service.url}/v1", api_key=KEY, max_retries=0, timeout=60)


def _post(service: Service, path: str, body: dict[str, object]) -> httpx.Response:
    r = httpx.post(f"{service.url}{path}", json=body, headers=AUTH, timeout=60)
    assert r.status_code == 200, r.text
    return r


def test_a_rejected_answer_has_one_word_everywhere(
    service: Service, upstream: FakeUpstream, pages: Pages, tmp_path: Path
) -> None:
    answer = dead(pages)
    words: dict[str, object] = {}
    r = _post(service, "/v1/check", {"answer": answer})
    words["check header"], words["check body"] = (
        r.headers["x-citeguard-verdict"],
        r.json()["verdict"],
    )
    upstream.script(answer)
    raw = _openai(service).chat.completions.with_raw_response.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    words["chat header"] = raw.headers["x-citeguard-verdict"]
    words["chat body"] = (raw.parse().model_extra or {})["citeguard"]["verdict"]
    words["chat stream"] = chat_stream(_openai(service))[1]["verdict"]
    generic = {"texts": [answer], "input_type": "response", "structured_messages": MESSAGES}
    words["litellm generic api"] = _post(
        service, "/beta/litellm_basic_guardrail_api", generic
    ).json()["citeguard"][0]["verdict"]
    portkey = {"response": {"text": answer}, "eventType": "afterRequestHook"}
    words["portkey webhook"] = _post(service, "/v1/portkey/webhook", portkey).json()["data"][
        "verdict"
    ]
    path = tmp_path / "answer.md"
    path.write_text(answer)
    cli = subprocess.run(
        [sys.executable, "-m", "citeguard.cli", "check", str(path), "--json", "--allow-private"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 1, cli.stderr
    words["cli json"] = json.loads(cli.stdout)["verdict"]
    assert words == dict.fromkeys(words, "rejected")


def test_an_answer_regenerated_then_passing_is_passed_streamed_or_not(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    upstream.script(dead(pages), good(pages))
    raw = _openai(service).chat.completions.with_raw_response.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    shown = (raw.parse().model_extra or {})["citeguard"]
    assert (raw.headers["x-citeguard-verdict"], shown["verdict"], shown["attempts"]) == (
        "passed",
        "passed",
        2,
    )
    upstream.script(dead(pages), good(pages))
    _, verdict = chat_stream(_openai(service))
    assert (verdict["verdict"], verdict["attempts"]) == ("passed", 2)

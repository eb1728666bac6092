"""POST /v1/check over real HTTP: verdicts on good, dead and misquoted citations; provider
responses as the answer; policy overrides validated and bounded by the server's."""

from __future__ import annotations

import json
import subprocess

import httpx

from serve.answers import dead, good, misquoted
from serve.servers import KEY, FakeUpstream, Pages, Service

AUTH = {"authorization": f"Bearer {KEY}"}


def _check(service: Service, body: dict[str, object]) -> httpx.Response:
    return httpx.post(f"{service.url}/v1/check", json=body, headers=AUTH, timeout=60)


def test_good_citation_passes_with_four_axes(service: Service, pages: Pages) -> None:
    r = _check(service, {"answer": good(pages), "question": "How tall is the Eiffel Tower?"})
    assert r.status_code == 200
    assert r.headers["x-citeguard-verdict"] == "passed"
    v = r.json()
    assert v["passed"] is True
    assert set(v["axes"]) == {"validity", "diversity", "freshness", "query"}
    assert [(c["url"], c["status"]) for c in v["citations"]] == [(pages.url("/good"), "ok")]
    assert v["claims"][0]["checks"][0]["status"] == "ok"


def test_dead_and_misquoted_citations_are_rejected(service: Service, pages: Pages) -> None:
    r = _check(service, {"answer": dead(pages)})
    assert r.headers["x-citeguard-verdict"] == "rejected"
    assert r.json()["citations"][0]["status"] == "not_found"
    assert r.json()["offending_urls"] == [pages.url("/dead")]
    r = _check(service, {"answer": misquoted(pages)})
    assert r.json()["passed"] is False
    assert r.json()["citations"][0]["status"] in ("passage_altered", "passage_missing")


def test_provider_response_as_answer(service: Service, pages: Pages) -> None:
    text = "The Eiffel Tower is 330 metres tall and stands on the Champ de Mars in Paris."
    completion = {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "annotations": [
                        {
                            "type": "url_citation",
                            "url_citation": {
                                "url": pages.url("/dead"),
                                "title": "t",
                                "start_index": 0,
                                "end_index": len(text),
                            },
                        }
                    ],
                },
            }
        ],
    }
    r = _check(service, {"answer": completion})
    assert r.json()["citations"][0]["status"] == "not_found"


def test_curl_client(service: Service, pages: Pages) -> None:
    out = subprocess.run(
        [
            "curl", "-sS", "-X", "POST", f"{service.url}/v1/check",
            "-H", f"Authorization: Bearer {KEY}", "-H", "content-type: application/json",
            "-d", json.dumps({"answer": good(pages)}),
        ],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert json.loads(out.stdout)["passed"] is True


def test_overrides_may_tighten_but_not_widen(service: Service, pages: Pages) -> None:
    # lowering a cap and switching the passage check off is allowed
    r = _check(
        service,
        {
            "answer": misquoted(pages),
            "policy": {"fetch": {"url_timeout": 2}, "passage": {"check_passages": False}},
        },
    )
    assert r.status_code == 200
    assert r.json()["citations"][0]["status"] not in ("passage_altered", "passage_missing")
    refused = [
        {"fetch": {"allow_private_addresses": True}},
        {"fetch": {"allowed_private_hosts": ["intranet"]}},
        {"fetch": {"url_timeout": 9999}},
        {"max_attempts": 50},
        {"judge": {"base_url": "http://evil.example/v1", "model": "x"}},
        {"entailment": {"model_path": "/etc/passwd"}},
        {"fetch": {"allowed_schemes": ["file", "http"]}},
        {"no_such_field": 1},
        {"fetch": {"max_body_bytes": "lots"}},
    ]
    for override in refused:
        r = _check(service, {"answer": good(pages), "policy": override})
        assert r.status_code == 400, override
        err = r.json()["error"]
        assert err["code"] == "invalid_policy" and err["param"] is None
        assert "policy." in err["message"] or "Policy" in err["message"], err


def test_bad_check_requests(service: Service) -> None:
    r = _check(service, {"question": "no answer"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request"
    r = httpx.post(f"{service.url}/v1/check", content=b"{nope", headers=AUTH)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"


def test_openapi_describes_the_check_request(service: Service) -> None:
    spec = httpx.get(f"{service.url}/openapi.json", headers=AUTH).json()
    body = spec["paths"]["/v1/check"]["post"]["requestBody"]["content"]["application/json"]
    assert "answer" in body["schema"]["properties"]


def test_curl_reads_a_guarded_stream(
    service: Service, upstream_server: object, pages: Pages
) -> None:

    assert isinstance(upstream_server, FakeUpstream)
    upstream_server.script(good(pages))
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "q"}]}
    out = subprocess.run(
        [
            "curl", "-sSN", "-X", "POST", f"{service.url}/v1/chat/completions",
            "-H", f"Authorization: Bearer {KEY}", "-H", "content-type: application/json",
            "-d", json.dumps(body),
        ],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    events = [ln[6:] for ln in out.stdout.splitlines() if ln.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["delta"].get("content") or "" for ch in chunks for c in ch["choices"])
    assert text == good(pages)
    assert chunks[-1]["citeguard"]["verdict"] == "passed"

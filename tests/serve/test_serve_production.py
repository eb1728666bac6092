"""Production behaviour: per-key rate and concurrency limits, repair and strip outcomes through
the proxy, per-request options in the body, and the request log line."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator

import httpx
import openai
import pytest

from citeguard.serve.limits import KeyLimits, LimitExceeded
from serve.answers import dead, good
from serve.servers import KEY, FakeUpstream, Pages, Service, make_settings, serve_policy

AUTH = {"authorization": f"Bearer {KEY}"}
MESSAGES = [{"role": "user", "content": "How tall is the Eiffel Tower?"}]


def test_key_limits_rate_and_concurrency() -> None:
    now = [0.0]
    limits = KeyLimits(concurrency=2, rate=1.0, clock=lambda: now[0])
    limits.acquire("a")
    limits.acquire("a")  # the burst: 2
    with pytest.raises(LimitExceeded, match="in flight"):
        limits.acquire("a")
    limits.release("a")
    with pytest.raises(LimitExceeded, match="per second") as e:
        limits.acquire("a")
    assert e.value.retry_after == pytest.approx(1.0)
    now[0] = 1.0
    limits.acquire("a")  # one token back after a second
    limits.acquire("b")  # another key has its own


@pytest.fixture(scope="module")
def strict(upstream_server: FakeUpstream) -> Iterator[Service]:
    """One request in flight per key, one request per 100 s."""
    s = Service(make_settings(upstream_server, per_key_concurrency=1, per_key_rate=0.01))
    yield s
    s.close()


def test_rate_limit_is_a_429_in_the_api_shape(strict: Service, pages: Pages) -> None:
    body = {"answer": good(pages)}
    first = httpx.post(f"{strict.url}/v1/check", json=body, headers=AUTH, timeout=60)
    assert first.status_code == 200
    second = httpx.post(f"{strict.url}/v1/check", json=body, headers=AUTH, timeout=60)
    assert second.status_code == 429
    assert second.json()["error"]["type"] == "rate_limit_error"
    assert int(second.headers["retry-after"]) >= 1
    r = httpx.post(f"{strict.url}/v1/messages", json={}, headers={"x-api-key": KEY}, timeout=60)
    assert r.status_code == 429 and r.json()["error"]["type"] == "rate_limit_error"


def test_concurrency_limit(service: Service, upstream: FakeUpstream, pages: Pages) -> None:
    s = Service(make_settings(upstream, per_key_concurrency=1))
    try:
        upstream.script(good(pages))
        upstream.behaviour = "hang_mid"
        body = {"model": "m", "messages": MESSAGES, "stream": True}
        headers = {**AUTH, "x-citeguard-mode": "annotate"}
        with httpx.stream(
            "POST", f"{s.url}/v1/chat/completions", json=body, headers=headers, timeout=60
        ) as r:
            lines = r.iter_lines()
            assert next(lines).startswith("data: ")  # the first request is in flight
            refused = httpx.post(
                f"{s.url}/v1/check", json={"answer": "x"}, headers=AUTH, timeout=60
            )
            assert refused.status_code == 429
            assert "in flight" in refused.json()["error"]["message"]
            rest = list(lines)  # the stalled upstream ends the stream with an error event
        assert any('"upstream_timeout"' in ln for ln in rest)
        upstream.behaviour = "ok"
        ok = httpx.post(f"{s.url}/v1/check", json={"answer": good(pages)}, headers=AUTH, timeout=60)
        assert ok.status_code == 200  # released when the stream ended
    finally:
        s.close()


def test_repaired_answer(service: Service, upstream: FakeUpstream, pages: Pages) -> None:
    # the second sentence's dead link is re-pointed at the page the run already holds (a repair
    # swaps in only a page that supports the claim: the link's words are the page's too)
    answer = (
        f"{good(pages)} It was completed in 1889 for the World's Fair "
        f"([The Eiffel Tower]({pages.url('/dead')}))."
    )
    upstream.script(answer)
    client = openai.OpenAI(base_url=f"{service.url}/v1", api_key=KEY, max_retries=0, timeout=60)
    raw = client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert raw.headers["x-citeguard-verdict"] == "repaired"
    assert raw.headers["x-citeguard-attempts"] == "1"
    completion = raw.parse()
    content = completion.choices[0].message.content or ""
    assert pages.url("/dead") not in content
    repairs = (completion.model_extra or {})["citeguard"]["repairs"]
    assert repairs and repairs[0]["before"] == pages.url("/dead")


def test_options_in_the_body(service: Service, upstream: FakeUpstream, pages: Pages) -> None:
    upstream.script(dead(pages))
    client = openai.OpenAI(base_url=f"{service.url}/v1", api_key=KEY, max_retries=0, timeout=60)
    raw = client.chat.completions.with_raw_response.create(
        model="m",
        messages=MESSAGES,  # type: ignore[arg-type]
        extra_body={"citeguard": {"policy": {"max_attempts": 1, "repair": "off"}}},
    )
    assert raw.headers["x-citeguard-attempts"] == "1"
    assert "citeguard" not in upstream.requests[0]  # never forwarded
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="m",
            messages=MESSAGES,  # type: ignore[arg-type]
            extra_body={"citeguard": {"policy": {"fetch": {"allow_private_addresses": True}}}},
        )
    assert e.value.response.json()["error"]["code"] == "invalid_policy"


def test_strip_on_fail(upstream: FakeUpstream, pages: Pages) -> None:
    policy = serve_policy().replace(on_fail="strip", repair="off", max_attempts=1)
    s = Service(make_settings(upstream, policy=policy))
    try:
        dead_url = pages.url("/dead")
        other = f"The Great Wall of China is more than 21,000 kilometres long ([w]({dead_url}))."
        upstream.script(f"{good(pages)} {other}")
        r = httpx.post(
            f"{s.url}/v1/chat/completions",
            json={"model": "m", "messages": MESSAGES},
            headers=AUTH,
            timeout=60,
        )
        content = r.json()["choices"][0]["message"]["content"]
        assert good(pages) in content and "Great Wall" not in content
        assert r.json()["citeguard"]["removed_urls"] == [pages.url("/dead")]
        assert r.headers["x-citeguard-verdict"] == "repaired"
    finally:
        s.close()


def test_one_log_line_per_request(service: Service, upstream: FakeUpstream, pages: Pages) -> None:
    lines: list[dict[str, object]] = []
    logged = threading.Event()  # the server writes its line once the response has gone out

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            line = json.loads(record.getMessage())
            lines.append(line)
            if line.get("event") == "request" and line.get("path") == "/v1/chat/completions":
                logged.set()

    logger = logging.getLogger("citeguard.serve")
    handler, level = Collect(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        upstream.script(dead(pages), good(pages))
        httpx.post(
            f"{service.url}/v1/chat/completions",
            json={"model": "m", "messages": MESSAGES},
            headers=AUTH,
            timeout=60,
        )
        assert logged.wait(60), "no request log line within 60 s of the response"
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    # other services of the session log through the same logger: find this request's line
    requests = [ln for ln in lines if ln.get("event") == "request"]
    mine = [
        ln for ln in requests if ln["path"] == "/v1/chat/completions" and ln.get("attempts") == 2
    ]
    assert mine, requests
    line = mine[0]
    assert line["status"] == 200 and line["verdict"] == "passed"
    assert line["citations"] == {"ok": 1} and line["axes"]["validity"] is True
    assert "upstream_ms" in line and isinstance(line["ms"], float)
    for ln in requests:
        assert KEY not in json.dumps(ln) and "Eiffel" not in json.dumps(ln)

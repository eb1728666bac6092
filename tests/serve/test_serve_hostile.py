"""Hostile clients and upstreams: each ends as a clear HTTP error in the API's own shape within
its timeout, and the service keeps serving."""

from __future__ import annotations

import json
import socket

import httpx
import openai
import pytest

from serve.answers import good
from serve.servers import KEY, FakeUpstream, Pages, Service

AUTH = {"authorization": f"Bearer {KEY}"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "How tall?"}]}


def _still_serving(service: Service, pages: Pages) -> None:
    assert httpx.get(f"{service.url}/healthz").json() == {"status": "ok"}
    r = httpx.post(
        f"{service.url}/v1/check", json={"answer": good(pages)}, headers=AUTH, timeout=60
    )
    assert r.json()["passed"] is True


def _openai_error(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body["error"]) == {"type", "code", "message", "param"}
    assert body["error"]["code"] == code
    assert "Traceback" not in r.text


def test_missing_and_wrong_keys(service: Service, pages: Pages) -> None:
    for headers in ({}, {"authorization": "Bearer nope"}, {"authorization": "Basic " + KEY}):
        r = httpx.post(f"{service.url}/v1/chat/completions", json=CHAT, headers=headers)
        _openai_error(r, 401, "invalid_api_key")
    r = httpx.post(f"{service.url}/v1/messages", json=CHAT, headers={"x-api-key": "nope"})
    assert r.status_code == 401 and r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "authentication_error"
    r = httpx.get(f"{service.url}/metrics")
    assert r.status_code == 401
    assert httpx.get(f"{service.url}/readyz").json() == {"status": "ready"}  # open
    _still_serving(service, pages)


def test_unknown_paths_and_methods(service: Service) -> None:
    r = httpx.post(f"{service.url}/v1/embeddings", json={}, headers=AUTH)
    _openai_error(r, 404, "not_found")
    r = httpx.get(f"{service.url}/v1/chat/completions", headers=AUTH)
    _openai_error(r, 405, "method_not_allowed")
    r = httpx.get(f"{service.url}/v1/messages/nope", headers={"x-api-key": KEY})
    assert r.status_code == 404 and r.json()["type"] == "error"


def test_oversized_and_malformed_bodies(service: Service, pages: Pages) -> None:
    big = b'{"answer": "' + b"x" * (200 * 1024) + b'"}'
    r = httpx.post(f"{service.url}/v1/check", content=big, headers=AUTH)
    _openai_error(r, 413, "body_too_large")

    def chunked():  # no content-length: the cap holds while reading
        yield b'{"answer": "'
        for _ in range(100):
            yield b"x" * 4096
        yield b'"}'

    r = httpx.post(f"{service.url}/v1/check", content=chunked(), headers=AUTH)
    _openai_error(r, 413, "body_too_large")
    for bad in (b"{", b"[1,", b"\xff\xfe", b"null", b'"text"', b"[" * 100_000):
        r = httpx.post(f"{service.url}/v1/chat/completions", content=bad, headers=AUTH)
        assert r.status_code in (400, 413), (bad[:10], r.status_code)
        assert r.json()["error"]["code"] in ("invalid_json", "invalid_request", "body_too_large")
    r = httpx.post(f"{service.url}/v1/messages", content=b"{", headers={"x-api-key": KEY})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    _still_serving(service, pages)


def test_slow_client_body_times_out_and_others_are_served(service: Service, pages: Pages) -> None:
    # a slow-loris on the headers holds one socket, nothing else
    loris = socket.create_connection(("127.0.0.1", service.port))
    loris.sendall(b"POST /v1/check HTTP/1.1\r\nHost: x\r\n")
    # a slow body: the headers promise 100 bytes, 10 come, then nothing
    slow = socket.create_connection(("127.0.0.1", service.port))
    slow.sendall(
        b"POST /v1/check HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + KEY.encode()
        + b'\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"answer":'
    )
    _still_serving(service, pages)
    slow.settimeout(30)
    reply = b""
    while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
        part = slow.recv(65536)
        if not part:
            break
        reply += part
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408")
    assert json.loads(body)["error"]["code"] == "body_timeout"
    slow.close()
    loris.close()


def test_upstream_that_hangs_or_fails(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    upstream.behaviour = "hang"
    r = httpx.post(f"{service.url}/v1/chat/completions", json=CHAT, headers=AUTH, timeout=60)
    _openai_error(r, 504, "upstream_timeout")
    upstream.behaviour = "500"
    r = httpx.post(f"{service.url}/v1/chat/completions", json=CHAT, headers=AUTH, timeout=60)
    _openai_error(r, 502, "upstream_status")
    r = httpx.post(
        f"{service.url}/v1/messages",
        json={**CHAT, "max_tokens": 5},
        headers={"x-api-key": KEY},
        timeout=60,
    )
    assert r.status_code == 502 and r.json()["type"] == "error"
    upstream.behaviour = "ok"
    _still_serving(service, pages)


@pytest.mark.parametrize("behaviour", ["broken_sse", "close_mid", "hang_mid"])
def test_broken_upstream_streams_end_with_an_error_event(
    service: Service, upstream: FakeUpstream, pages: Pages, behaviour: str
) -> None:
    upstream.script(good(pages))
    upstream.behaviour = behaviour
    client = openai.OpenAI(base_url=f"{service.url}/v1", api_key=KEY, max_retries=0, timeout=60)
    text = ""
    with pytest.raises(openai.APIError) as e:
        for chunk in client.chat.completions.create(
            model="m", messages=CHAT["messages"], stream=True
        ):  # type: ignore[arg-type]
            text += "".join(c.delta.content or "" for c in chunk.choices)
    assert e.value.body is not None
    assert e.value.body["code"] in ("upstream_bad_stream", "upstream_closed", "upstream_timeout")  # type: ignore[index]
    assert good(pages).startswith(text)
    upstream.behaviour = "ok"
    _still_serving(service, pages)


def test_upstream_stream_refused_is_a_status(service: Service, upstream: FakeUpstream) -> None:
    upstream.behaviour = "500"
    r = httpx.post(
        f"{service.url}/v1/chat/completions",
        json={**CHAT, "stream": True},
        headers=AUTH,
        timeout=60,
    )
    _openai_error(r, 502, "upstream_status")


def test_metrics_count_requests_and_verdicts(service: Service, pages: Pages) -> None:
    httpx.post(f"{service.url}/v1/check", json={"answer": good(pages)}, headers=AUTH, timeout=60)
    text = httpx.get(f"{service.url}/metrics", headers=AUTH).text
    assert 'citeguard_requests_total{route="/v1/check",status="200"}' in text
    assert 'citeguard_verdicts_total{route="/v1/check",verdict="passed"}' in text
    assert 'citeguard_citations_total{status="ok"}' in text
    assert "citeguard_added_latency_seconds_bucket" in text


def test_broken_anthropic_stream_is_an_anthropic_error(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    import anthropic

    upstream.script("The Eiffel Tower is 330 metres tall. It stands in Paris.")
    upstream.behaviour = "close_mid"
    client = anthropic.Anthropic(base_url=service.url, api_key=KEY, max_retries=0, timeout=60)
    with pytest.raises(anthropic.APIStatusError) as e:
        for _ in client.messages.create(
            model="m",
            max_tokens=10,
            messages=CHAT["messages"],
            stream=True,  # type: ignore[arg-type]
        ):
            pass
    assert "upstream" in str(e.value)
    upstream.behaviour = "ok"
    _still_serving(service, pages)

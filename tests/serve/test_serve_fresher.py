"""``citeguard serve``'s non-streamed proxy asks the upstream once for fresher sources (issue 45):
an answer citing a page stale under an uncertain faster regime passes, and the proxy makes one
more upstream call whose feedback names the stale page and its date, the page not excluded.
Driven by the ``openai`` SDK; dated pages served on 127.0.0.1 (dates relative to today)."""

from __future__ import annotations

from typing import Any

import openai

from serve.dated import QUESTION, DatedPages, answer_citing, day
from serve.servers import KEY, FakeUpstream, Service


def _ask(service: Service) -> Any:
    client = openai.OpenAI(base_url=f"{service.url}/v1", api_key=KEY, max_retries=0, timeout=60)
    return client.chat.completions.with_raw_response.create(
        model="m",
        messages=[{"role": "user", "content": QUESTION}],
    )


def test_the_proxy_asks_once_for_fresher_sources(
    fresh_service: Service, upstream_server: FakeUpstream, dated: DatedPages
) -> None:
    old, new = dated.url("/old"), dated.url("/new")
    upstream_server.script(answer_citing(old), answer_citing(new))
    raw = _ask(fresh_service)
    assert raw.headers["x-citeguard-verdict"] == "passed"
    assert raw.headers["x-citeguard-attempts"] == "2"
    assert raw.parse().choices[0].message.content == answer_citing(new)
    retry = upstream_server.requests[1]["messages"][-1]["content"]
    assert old in retry and day(90) in retry
    assert "Do not cite" not in retry  # the stale page is not banned


def test_without_a_fresher_source_the_proxy_returns_the_firstanswer_citing(
    fresh_service: Service, upstream_server: FakeUpstream, dated: DatedPages
) -> None:
    old = dated.url("/old")
    upstream_server.script(answer_citing(old))
    raw = _ask(fresh_service)
    assert raw.headers["x-citeguard-verdict"] == "passed"
    assert raw.headers["x-citeguard-attempts"] == "2"
    assert raw.parse().choices[0].message.content == answer_citing(old)
    assert len(upstream_server.requests) == 2

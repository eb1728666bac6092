"""Exclusions through serve, streamed and not: what /metrics counts for an answer whose dead
citation every attempt repeats is the citation's own failure (``not_found``), never
``excluded_by_policy`` (issue 44: exclusion is context on an attempt, not a citation status); a
streamed attempt regenerated for one claim's failure keeps the page citable (issue 43)."""

from __future__ import annotations

import httpx

from serve.answers import dead, good, misquoted
from serve.servers import KEY, FakeUpstream, Pages, Service, make_settings

AUTH = {"authorization": f"Bearer {KEY}"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "How tall is the Eiffel Tower?"}]}


def _streamed(service: Service) -> str:
    """The raw event stream of a streamed chat completion, whatever its ending."""
    with httpx.stream(
        "POST",
        f"{service.url}/v1/chat/completions",
        json={**CHAT, "stream": True},
        headers=AUTH,
        timeout=60,
    ) as r:
        return r.read().decode()


def test_metrics_count_a_recited_dead_url_as_not_found(
    upstream: FakeUpstream, pages: Pages
) -> None:
    upstream.script(dead(pages))  # every attempt cites the 404 again
    service = Service(make_settings(upstream))  # its own metrics
    try:
        httpx.post(f"{service.url}/v1/chat/completions", json=CHAT, headers=AUTH, timeout=60)
        assert len(upstream.requests) == service.settings.policy.max_attempts > 1
        text = httpx.get(f"{service.url}/metrics", headers=AUTH).text
    finally:
        service.close()
    assert 'citeguard_citations_total{status="not_found"} 1.0' in text
    assert "excluded_by_policy" not in text


def test_metrics_count_a_recited_dead_url_as_not_found_in_a_stream(
    upstream: FakeUpstream, pages: Pages
) -> None:
    upstream.script(dead(pages))  # every attempt cites the 404 again; hold mode regenerates
    service = Service(make_settings(upstream))
    try:
        body = _streamed(service)
        assert len(upstream.requests) == service.settings.policy.max_attempts > 1
        text = httpx.get(f"{service.url}/metrics", headers=AUTH).text
    finally:
        service.close()
    # the last attempt's verdict: the URL it excluded keeps its 404
    assert '"status": "not_found"' in body or '"status":"not_found"' in body
    assert "excluded_by_policy" not in body
    assert 'citeguard_citations_total{status="not_found"} 1.0' in text
    assert "excluded_by_policy" not in text


def test_a_stream_regenerated_for_one_claim_keeps_its_page_citable(
    service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    source = pages.url("/good")
    upstream.script(f"{misquoted(pages)} {good(pages)}", good(pages))
    _streamed(service)
    # the first sentence failed on the page (a pair failure) before anything went out: the
    # retry names that claim and does not ban the page, which backs the other claim
    assert len(upstream.requests) == 2
    retry = str(upstream.requests[1]["messages"][-1]["content"])
    assert "500 metres tall and stands in London" in retry
    assert "Do not cite" not in retry and source not in retry.split("Your answer")[0]

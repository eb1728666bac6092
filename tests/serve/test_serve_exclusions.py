"""What /metrics counts for an answer whose dead citation every attempt repeats: the citation's
own failure (``not_found``), never ``excluded_by_policy`` (issue 44: exclusion is context on an
attempt, not a citation status)."""

from __future__ import annotations

import httpx

from serve.answers import dead
from serve.servers import KEY, FakeUpstream, Pages, Service, make_settings

AUTH = {"authorization": f"Bearer {KEY}"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "How tall is the Eiffel Tower?"}]}


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

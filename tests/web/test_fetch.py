"""The fetcher against real aiohttp servers on 127.0.0.1 (the ``farm`` fixture)."""

from __future__ import annotations

import asyncio
import gzip
import socket
import zlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio
from aiohttp import web

from citeguard.models import CitationStatus, Outcome
from citeguard.policy import FetchPolicy
from citeguard.web.fetch import Fetcher, Resolver, StaticResolver
from citeguard.web.limits import LocalHostLimiter

if TYPE_CHECKING:
    from conftest import Farm, SleepRecorder

S = CitationStatus


@pytest_asyncio.fixture
async def fetcher(
    farm: Farm, fetch_policy: FetchPolicy, sleeps: SleepRecorder
) -> AsyncIterator[Fetcher]:
    async with Fetcher(fetch_policy, resolver=farm.resolver, sleep=sleeps) as f:
        yield f


def _policy(base: FetchPolicy, **changes: object) -> FetchPolicy:
    return base.model_copy(update=changes)


def _sequence(*responses: Callable[[], web.StreamResponse]) -> Callable[..., object]:
    """A handler that answers with each response in turn (the last one repeats)."""
    calls = {"n": 0}

    async def handler(request: web.Request) -> web.StreamResponse:
        i = min(calls["n"], len(responses) - 1)
        calls["n"] += 1
        return responses[i]()

    return handler


# --------------------------------------------------------------------------------------------
# Status mapping
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status", "outcome"),
    [
        (200, S.OK, Outcome.RESOLVES),
        (204, S.OK, Outcome.RESOLVES),
        (404, S.NOT_FOUND, Outcome.BROKEN),
        (410, S.GONE, Outcome.BROKEN),
        (500, S.HTTP_ERROR, Outcome.BROKEN),
        (401, S.HTTP_ERROR, Outcome.BROKEN),
        (403, S.HTTP_ERROR, Outcome.BROKEN),
        (999, S.BOT_WALL, Outcome.UNVERIFIABLE),
    ],
)
async def test_status_codes(
    farm: Farm, fetcher: Fetcher, code: int, status: CitationStatus, outcome: Outcome
) -> None:
    r = await fetcher.fetch(farm.url("a.example.com", f"/status/{code}"))
    assert r.status is status
    assert r.status.outcome is outcome
    assert r.http_status == code
    assert str(code) in r.reason
    assert r.method == "GET"
    # Non-transient statuses are answered by a single request.
    assert farm.count() == 1


async def test_ok_get_keeps_body_and_content_type(farm: Farm, fetcher: Fetcher) -> None:
    r = await fetcher.fetch(farm.url("news.example.com", "/page/article.html"))
    assert r.status is S.OK
    assert r.body is not None and b"Harbour Lighthouse" in r.body
    assert r.content_type is not None and r.content_type.startswith("text/html")
    assert r.final_url == farm.url("news.example.com", "/page/article.html")
    assert r.fetched_at is not None
    assert "body" not in r.model_dump()


async def test_non_html_content_type_is_recorded(farm: Farm, fetcher: Fetcher) -> None:
    farm.add(
        "docs.example.net", "/report.pdf", body=b"%PDF-1.4 fake", content_type="application/pdf"
    )
    r = await fetcher.fetch(farm.url("docs.example.net", "/report.pdf"))
    # The content-type verdict belongs to page extraction; the fetcher records it.
    assert r.status is S.OK
    assert r.content_type == "application/pdf"
    assert r.body == b"%PDF-1.4 fake"


async def test_cf_mitigated_403_is_a_bot_wall(farm: Farm, fetcher: Fetcher) -> None:
    farm.add("a.example.com", "/walled", status=403, headers={"cf-mitigated": "challenge"})
    r = await fetcher.fetch(farm.url("a.example.com", "/walled"))
    assert r.status is S.BOT_WALL
    assert "cf-mitigated" in r.reason
    assert r.status.outcome is Outcome.UNVERIFIABLE


async def test_nxdomain_is_unreachable(farm: Farm, fetcher: Fetcher) -> None:
    r = await fetcher.fetch(farm.url("no-such-host.example.com", "/"))
    assert r.status is S.UNREACHABLE
    assert "DNS" in r.reason
    assert farm.requests == []


async def test_connection_refused_is_unreachable(fetch_policy: FetchPolicy) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    resolver = StaticResolver({"closed.example.com": "127.0.0.1"})
    async with Fetcher(fetch_policy, resolver=resolver) as f:
        r = await f.fetch(f"http://closed.example.com:{port}/")
    assert r.status is S.UNREACHABLE
    assert "connect" in r.reason


async def test_tls_error(farm: Farm, fetcher: Fetcher) -> None:
    # https to a plain-HTTP port: the TLS handshake fails.
    r = await fetcher.fetch(f"https://a.example.com:{farm.port}/status/200")
    assert r.status is S.TLS_ERROR
    assert r.status.outcome is Outcome.UNVERIFIABLE


async def test_malformed_and_blocked_scheme_are_values(fetcher: Fetcher) -> None:
    r1 = await fetcher.fetch("http://exa mple.com/")
    r2 = await fetcher.fetch("javascript:alert(1)")
    r3 = await fetcher.fetch("file:///etc/passwd")
    assert r1.status is S.MALFORMED_URL
    assert r2.status is S.BLOCKED_SCHEME
    assert r3.status is S.BLOCKED_SCHEME
    assert r2.url == "javascript:alert(1)"


# --------------------------------------------------------------------------------------------
# HEAD / GET
# --------------------------------------------------------------------------------------------


async def test_head_ok_needs_one_request(farm: Farm, fetcher: Fetcher) -> None:
    r = await fetcher.fetch(farm.url("a.example.com", "/status/200"), want_body=False)
    assert r.status is S.OK
    assert r.method == "HEAD"
    assert r.body is None
    assert farm.requests == [("HEAD", "a.example.com", "/status/200")]


@pytest.mark.parametrize("head_code", [405, 404, 403, 501])
async def test_head_refused_then_get(farm: Farm, fetcher: Fetcher, head_code: int) -> None:
    peers: list[object] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        if request.method == "HEAD":
            return web.Response(status=head_code, text="refused")  # with a Content-Length
        return web.Response(text="<p>hello</p>", content_type="text/html")

    url = farm.add("a.example.com", "/h", handler)
    r = await fetcher.fetch(url, want_body=False)
    assert r.status is S.OK
    assert r.method == "GET"
    assert farm.requests == [("HEAD", "a.example.com", "/h"), ("GET", "a.example.com", "/h")]
    # The GET goes over the connection the HEAD used.
    assert peers[0] is not None and peers[0] == peers[1]


async def test_head_and_get_both_404(farm: Farm, fetcher: Fetcher) -> None:
    r = await fetcher.fetch(farm.url("a.example.com", "/status/404"), want_body=False)
    assert r.status is S.NOT_FOUND
    assert [m for m, _h, _p in farm.requests] == ["HEAD", "GET"]


async def test_want_body_sends_get_only(farm: Farm, fetcher: Fetcher) -> None:
    await fetcher.fetch(farm.url("a.example.com", "/status/200"), want_body=True)
    assert [m for m, _h, _p in farm.requests] == ["GET"]


# --------------------------------------------------------------------------------------------
# Redirects
# --------------------------------------------------------------------------------------------


async def test_same_site_redirect_chain(farm: Farm, fetcher: Fetcher) -> None:
    r = await fetcher.fetch(farm.url("a.example.com", "/redirect/3"))
    assert r.status is S.OK
    assert r.redirects == [farm.url("a.example.com", f"/redirect/{n}") for n in (2, 1, 0)]
    assert r.final_url == farm.url("a.example.com", "/redirect/0")
    assert farm.count() == 4


async def test_www_and_subdomain_redirects_pass(farm: Farm, fetcher: Fetcher) -> None:
    url = farm.add(
        "example.com", "/x", status=301, headers={"Location": farm.url("www.example.com", "/y")}
    )
    farm.add("www.example.com", "/y", status=302, headers={"Location": "/z"})  # relative
    farm.add("www.example.com", "/z", body="<p>done</p>")
    r = await fetcher.fetch(url, want_body=False)
    assert r.status is S.OK
    assert r.final_url == farm.url("www.example.com", "/z")
    assert len(r.redirects) == 2


async def test_cross_domain_redirect_is_not_followed(farm: Farm, fetcher: Fetcher) -> None:
    target = farm.add("other.example.org", "/landing", body="<p>elsewhere</p>")
    url = farm.add("a.example.com", "/moved", status=301, headers={"Location": target})
    r = await fetcher.fetch(url)
    assert r.status is S.CROSS_DOMAIN_REDIRECT
    assert "example.com" in r.reason and "example.org" in r.reason
    assert r.redirects == [target]
    assert farm.count(host="other.example.org") == 0


async def test_redirect_loop(farm: Farm, fetcher: Fetcher) -> None:
    a = farm.url("a.example.com", "/loop-a")
    b = farm.url("a.example.com", "/loop-b")
    farm.add("a.example.com", "/loop-a", status=302, headers={"Location": b})
    farm.add("a.example.com", "/loop-b", status=302, headers={"Location": a})
    r = await fetcher.fetch(a)
    assert r.status is S.REDIRECT_LOOP
    assert farm.count() == 2


async def test_self_redirect_setting_a_cookie_is_followed_once(
    farm: Farm, fetcher: Fetcher
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.cookies.get("seen") == "1":
            return web.Response(text="<p>welcome back</p>", content_type="text/html")
        resp = web.Response(status=302, headers={"Location": "/cookie"})
        resp.set_cookie("seen", "1")
        return resp

    r = await fetcher.fetch(farm.add("a.example.com", "/cookie", handler))
    assert r.status is S.OK
    assert farm.count() == 2


async def test_too_many_redirects(
    farm: Farm, fetch_policy: FetchPolicy, sleeps: SleepRecorder
) -> None:
    policy = _policy(fetch_policy, max_redirects=2)
    async with Fetcher(policy, resolver=farm.resolver, sleep=sleeps) as f:
        r = await f.fetch(farm.url("a.example.com", "/redirect/5"))
    assert r.status is S.TOO_MANY_REDIRECTS
    assert farm.count() == 3  # /redirect/5, /4, /3: the third hop is never requested


async def test_redirect_to_blocked_scheme(farm: Farm, fetcher: Fetcher) -> None:
    url = farm.add("a.example.com", "/js", status=302, headers={"Location": "javascript:alert(1)"})
    r = await fetcher.fetch(url)
    assert r.status is S.BLOCKED_SCHEME
    assert "redirect" in r.reason


# --------------------------------------------------------------------------------------------
# Retries
# --------------------------------------------------------------------------------------------


async def test_503_then_200(farm: Farm, fetcher: Fetcher, sleeps: SleepRecorder) -> None:
    handler = _sequence(
        lambda: web.Response(status=503), lambda: web.Response(text="ok", content_type="text/html")
    )
    r = await fetcher.fetch(farm.add("a.example.com", "/flaky", handler))  # type: ignore[arg-type]
    assert r.status is S.OK
    assert r.attempts == 2
    assert farm.count() == 2
    assert sleeps.waits == [pytest.approx(0.01)]  # retry_backoff * 2**0


async def test_502_exhausts_retries_with_exponential_backoff(
    farm: Farm, fetcher: Fetcher, sleeps: SleepRecorder
) -> None:
    r = await fetcher.fetch(farm.url("a.example.com", "/status/502"))
    assert r.status is S.HTTP_ERROR
    assert r.attempts == 3
    assert "3 attempts" in r.reason
    assert farm.count() == 3
    assert sleeps.waits == [pytest.approx(0.01), pytest.approx(0.02)]


async def test_500_is_not_retried(farm: Farm, fetcher: Fetcher, sleeps: SleepRecorder) -> None:
    r = await fetcher.fetch(farm.url("a.example.com", "/status/500"))
    assert r.status is S.HTTP_ERROR
    assert farm.count() == 1
    assert sleeps.waits == []


async def test_429_retry_after_then_200(
    farm: Farm, fetcher: Fetcher, sleeps: SleepRecorder
) -> None:
    handler = _sequence(
        lambda: web.Response(status=429, headers={"Retry-After": "2"}),
        lambda: web.Response(text="ok", content_type="text/html"),
    )
    r = await fetcher.fetch(farm.add("a.example.com", "/limited", handler))  # type: ignore[arg-type]
    assert r.status is S.OK
    assert sleeps.waits == [2.0]
    assert farm.count() == 2


async def test_429_retry_after_http_date(
    farm: Farm, fetcher: Fetcher, sleeps: SleepRecorder
) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=3), usegmt=True)
    handler = _sequence(
        lambda: web.Response(status=429, headers={"Retry-After": when}),
        lambda: web.Response(text="ok", content_type="text/html"),
    )
    r = await fetcher.fetch(farm.add("a.example.com", "/date", handler))  # type: ignore[arg-type]
    assert r.status is S.OK
    assert len(sleeps.waits) == 1
    assert 0.5 < sleeps.waits[0] <= 3.0


async def test_429_always_ends_rate_limited(
    farm: Farm, fetcher: Fetcher, sleeps: SleepRecorder
) -> None:
    farm.add("a.example.com", "/busy", status=429, headers={"Retry-After": "1"})
    r = await fetcher.fetch(farm.url("a.example.com", "/busy"))
    assert r.status is S.RATE_LIMITED
    assert r.status.outcome is Outcome.UNVERIFIABLE
    assert sleeps.waits == [1.0, 1.0]
    assert farm.count() == 3


async def test_retry_after_beyond_cap_is_not_waited_for(
    farm: Farm, fetcher: Fetcher, sleeps: SleepRecorder
) -> None:
    farm.add("a.example.com", "/later", status=429, headers={"Retry-After": "3600"})
    r = await fetcher.fetch(farm.url("a.example.com", "/later"))
    assert r.status is S.RATE_LIMITED
    assert "cap" in r.reason
    assert sleeps.waits == []
    assert farm.count() == 1


async def test_retry_never_waits_past_the_deadline(
    farm: Farm, fetch_policy: FetchPolicy, sleeps: SleepRecorder
) -> None:
    policy = _policy(fetch_policy, url_timeout=2.0, retry_after_cap=30.0)
    farm.add("a.example.com", "/later", status=503, headers={"Retry-After": "10"})
    async with Fetcher(policy, resolver=farm.resolver, sleep=sleeps) as f:
        r = await f.fetch(farm.url("a.example.com", "/later"))
    assert r.status is S.HTTP_ERROR
    assert "deadline" in r.reason
    assert sleeps.waits == []


async def test_head_503_waits_then_retries_with_get(
    farm: Farm, fetcher: Fetcher, sleeps: SleepRecorder
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.method == "HEAD":
            return web.Response(status=503, headers={"Retry-After": "1"})
        return web.Response(text="ok", content_type="text/html")

    r = await fetcher.fetch(farm.add("a.example.com", "/h503", handler), want_body=False)
    assert r.status is S.OK
    assert sleeps.waits == [1.0]
    assert [m for m, _h, _p in farm.requests] == ["HEAD", "GET"]


# --------------------------------------------------------------------------------------------
# Time limits
# --------------------------------------------------------------------------------------------


async def test_slow_response_beyond_url_timeout(
    farm: Farm, fetch_policy: FetchPolicy, sleeps: SleepRecorder
) -> None:
    policy = _policy(fetch_policy, url_timeout=0.3)
    async with Fetcher(policy, resolver=farm.resolver, sleep=sleeps) as f:
        r = await f.fetch(farm.url("a.example.com", "/slow/30"))
    assert r.status is S.TIMEOUT
    assert r.status.outcome is Outcome.UNVERIFIABLE


async def test_answer_deadline(farm: Farm, fetcher: Fetcher) -> None:
    slow = farm.url("a.example.com", "/slow/30")
    fast = farm.url("b.example.com", "/status/200")
    results = await fetcher.fetch_all([slow, fast], deadline=0.4)
    assert set(results) == {slow, fast}
    assert results[fast].status is S.OK
    assert results[slow].status is S.TIMEOUT
    assert results[slow].reason


async def test_timeouts_are_not_cached(
    farm: Farm, fetch_policy: FetchPolicy, sleeps: SleepRecorder
) -> None:
    policy = _policy(fetch_policy, url_timeout=0.2)
    async with Fetcher(policy, resolver=farm.resolver, sleep=sleeps) as f:
        url = farm.url("a.example.com", "/slow/30")
        assert (await f.fetch(url)).status is S.TIMEOUT
        assert (await f.fetch(url)).status is S.TIMEOUT
    assert farm.count() == 2


# --------------------------------------------------------------------------------------------
# Bodies
# --------------------------------------------------------------------------------------------


async def test_body_over_cap_with_content_length(farm: Farm, fetcher: Fetcher) -> None:
    url = farm.add("a.example.com", "/big", body=b"x" * (2 * 1024 * 1024))
    r = await fetcher.fetch(url)
    assert r.status is S.TOO_LARGE
    assert r.truncated
    assert r.body is None


async def test_streamed_body_over_cap_stops_reading(farm: Farm, fetcher: Fetcher) -> None:
    sent = {"bytes": 0}

    async def endless(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()  # chunked: no Content-Length to refuse up front
        resp.content_type = "text/html"
        await resp.prepare(request)
        chunk = b"y" * 65536
        for _ in range(1000):  # 64 MB if nobody stops reading
            await resp.write(chunk)
            sent["bytes"] += len(chunk)
        return resp

    r = await fetcher.fetch(farm.add("a.example.com", "/endless", endless))
    assert r.status is S.TOO_LARGE
    assert sent["bytes"] < 64 * 1024 * 1024


async def test_gzip_bomb(farm: Farm, fetcher: Fetcher) -> None:
    bomb = gzip.compress(b"\0" * (20 * 1024 * 1024), 9)  # ~20 kB on the wire, 20 MB inflated
    assert len(bomb) < 1024 * 1024  # under the raw cap: only the decompressed cap can catch it
    url = farm.add(
        "a.example.com",
        "/bomb",
        body=bomb,
        headers={"Content-Encoding": "gzip", "Content-Type": "text/html"},
    )
    r = await fetcher.fetch(url)
    assert r.status is S.TOO_LARGE
    assert "decompressed" in r.reason


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
async def test_compressed_body_is_decoded(farm: Farm, fetcher: Fetcher, encoding: str) -> None:
    text = b"<p>" + b"compressible words " * 500 + b"</p>"
    if encoding == "gzip":
        data = gzip.compress(text)
    elif encoding == "deflate":
        data = zlib.compress(text)
    else:
        c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        data = c.compress(text) + c.flush()
    header = "gzip" if encoding == "gzip" else "deflate"
    url = farm.add(
        "a.example.com",
        "/z",
        body=data,
        headers={"Content-Encoding": header, "Content-Type": "text/html"},
    )
    r = await fetcher.fetch(url)
    assert r.status is S.OK
    assert r.body == text


async def test_connection_reset_mid_body(
    farm: Farm, fetcher: Fetcher, sleeps: SleepRecorder
) -> None:
    async def reset(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Length": "100000"})
        resp.content_type = "text/html"
        await resp.prepare(request)
        await resp.write(b"<p>" + b"a" * 1000)
        assert request.transport is not None
        request.transport.abort()
        return resp

    r = await fetcher.fetch(farm.add("a.example.com", "/reset", reset))
    assert r.status is S.CONNECTION_ERROR
    assert r.status.outcome is Outcome.UNVERIFIABLE
    assert farm.count() == 3  # retried as a transient failure
    assert len(sleeps.waits) == 2


# --------------------------------------------------------------------------------------------
# Address safety
# --------------------------------------------------------------------------------------------

BLOCKED_LITERALS = [
    "127.0.0.1",
    "127.1",
    "2130706433",
    "0177.0.0.1",
    "0x7f.1",
    "0x7f000001",
    "10.0.0.1",
    "192.168.1.10",
    "172.16.0.1",
    "100.64.0.1",
    "169.254.169.254",
    "100.100.100.200",
    "0.0.0.0",
    "224.0.0.1",
    "[::1]",
    "[::]",
    "[::ffff:127.0.0.1]",
    "[::ffff:169.254.169.254]",
    "[::127.0.0.1]",
    "[fe80::1]",
    "[fc00::1]",
    "[fd00:ec2::254]",
    "[ff02::1]",
    "[2002:7f00:1::1]",
    "[64:ff9b::a9fe:a9fe]",
]


@pytest.mark.parametrize("host", BLOCKED_LITERALS)
async def test_blocked_ip_literals(farm: Farm, host: str) -> None:
    async with Fetcher(FetchPolicy(), resolver=farm.resolver) as f:
        r = await f.fetch(f"http://{host}:{farm.port}/status/200")
    assert r.status is S.BLOCKED_ADDRESS, r.reason
    assert r.status.outcome is Outcome.BROKEN
    assert farm.requests == []


async def test_public_name_resolving_to_loopback_is_blocked(farm: Farm) -> None:
    async with Fetcher(FetchPolicy(), resolver=farm.resolver) as f:
        r = await f.fetch(farm.url("news.example.com", "/status/200"))
    assert r.status is S.BLOCKED_ADDRESS
    assert "news.example.com" in r.reason and "127.0.0.1" in r.reason
    assert farm.requests == []


@pytest.mark.parametrize(
    "addresses",
    [["169.254.169.254"], ["93.184.216.34", "10.1.2.3"], ["::ffff:192.168.0.1"]],
)
async def test_any_blocked_resolved_address_blocks(addresses: list[str]) -> None:
    resolver = StaticResolver({"mixed.example.com": addresses})
    async with Fetcher(FetchPolicy(), resolver=resolver) as f:
        r = await f.fetch("http://mixed.example.com/")
    assert r.status is S.BLOCKED_ADDRESS


async def test_redirect_to_a_private_address_is_blocked(
    farm: Farm, fetch_policy: FetchPolicy
) -> None:
    # a.example.com is trusted (say, an intranet wiki); its redirect target is not.
    policy = _policy(
        fetch_policy,
        allow_private_addresses=False,
        allowed_private_hosts=frozenset({"a.example.com"}),
    )
    secret = farm.add("b.example.com", "/secret", body="<p>internal</p>")
    url = farm.add("a.example.com", "/go", status=302, headers={"Location": secret})
    async with Fetcher(policy, resolver=farm.resolver) as f:
        r = await f.fetch(url)
    assert r.status is S.BLOCKED_ADDRESS
    assert r.redirects == [secret]
    assert farm.count(host="a.example.com") == 1
    assert farm.count(host="b.example.com") == 0


async def test_redirect_to_an_ip_literal_is_cross_site_and_not_fetched(
    farm: Farm, fetcher: Fetcher
) -> None:
    url = farm.add(
        "a.example.com",
        "/meta",
        status=302,
        headers={"Location": "http://169.254.169.254/latest/meta-data/"},
    )
    r = await fetcher.fetch(url)
    assert r.status is S.CROSS_DOMAIN_REDIRECT


class _RebindingResolver:
    """Answers a public address once, then loopback: a DNS-rebinding attack."""

    def __init__(self) -> None:
        self.calls = 0

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls += 1
        return ["93.184.216.34"] if self.calls == 1 else ["127.0.0.1"]


async def test_connection_goes_only_to_checked_addresses(farm: Farm) -> None:
    resolver = _RebindingResolver()
    assert isinstance(resolver, Resolver)
    async with Fetcher(FetchPolicy(), resolver=resolver) as f:
        r = await f.fetch(f"http://rebind.example.com:{farm.port}/status/200")
    # Whatever address the connector is given has passed the check: loopback never does.
    assert r.status is S.BLOCKED_ADDRESS
    assert farm.requests == []
    assert resolver.calls == 2


async def test_allow_private_addresses(farm: Farm, fetch_policy: FetchPolicy) -> None:
    async with Fetcher(fetch_policy) as f:  # system resolver; IP literal needs none
        r = await f.fetch(f"http://127.0.0.1:{farm.port}/status/200")
    assert r.status is S.OK


# --------------------------------------------------------------------------------------------
# De-duplication and cache
# --------------------------------------------------------------------------------------------


async def test_inflight_dedup(farm: Farm, fetcher: Fetcher) -> None:
    url = farm.url("a.example.com", "/slow/0.2")
    variant = url.replace("http://a.example.com", "HTTP://A.Example.com") + "#section"
    r1, r2 = await asyncio.gather(fetcher.fetch(url), fetcher.fetch(variant))
    assert r1.status is S.OK and r2.status is S.OK
    assert farm.count() == 1


async def test_fetch_all_dedups_and_keys_by_input(farm: Farm, fetcher: Fetcher) -> None:
    a = farm.url("a.example.com", "/status/200")
    a2 = a + "#frag"
    b = farm.url("b.example.com", "/status/404")
    results = await fetcher.fetch_all([a, b, a2, a, "mailto:x@example.com"])
    assert set(results) == {a, a2, b, "mailto:x@example.com"}
    assert results[a].status is S.OK and results[a2].status is S.OK
    assert results[b].status is S.NOT_FOUND
    assert results["mailto:x@example.com"].status is S.BLOCKED_SCHEME
    assert farm.count() == 2


async def test_fetch_all_runs_concurrently(farm: Farm, fetcher: Fetcher) -> None:
    release = asyncio.Event()
    arrived: list[str] = []

    async def gate(request: web.Request) -> web.StreamResponse:
        arrived.append(request.host)
        if len(arrived) == 6:
            release.set()
        await asyncio.wait_for(release.wait(), 5)  # only returns once all six are in flight
        return web.Response(text="ok", content_type="text/html")

    farm.add("*", "/gate", gate)
    hosts = ["a.example.com", "b.example.com", "example.org", "docs.example.net", "example.com"]
    urls = [farm.url(h, "/gate") for h in hosts] + [farm.url("a.example.com", "/gate?2")]
    results = await fetcher.fetch_all(urls)
    assert all(r.status is S.OK for r in results.values())


async def test_per_host_limit(farm: Farm, fetch_policy: FetchPolicy) -> None:
    active = {"now": 0, "max": 0}
    changed = asyncio.Condition()

    async def count(request: web.Request) -> web.StreamResponse:
        async with changed:
            active["now"] += 1
            active["max"] = max(active["max"], active["now"])
            changed.notify_all()
            # Hold each request until a second one runs beside it: with a limit of 2 the pairs
            # release each other; a broken limit lets a third in while these wait.
            await asyncio.wait_for(changed.wait_for(lambda: active["max"] >= 2), 5)
            active["now"] -= 1
        return web.Response(text="ok", content_type="text/html")

    farm.add("a.example.com", "/c", count)
    policy = _policy(fetch_policy, per_host_concurrency=2)
    async with Fetcher(policy, resolver=farm.resolver) as f:
        urls = [farm.url("a.example.com", f"/c?i={i}") for i in range(8)]
        results = await f.fetch_all(urls)
        assert all(r.status is S.OK for r in results.values())
        limiter = f.limiter
        assert isinstance(limiter, LocalHostLimiter)
        assert limiter._hosts == {}  # no per-host state left behind
    assert active["max"] == 2


async def test_positive_cache(farm: Farm, fetcher: Fetcher) -> None:
    url = farm.url("a.example.com", "/page/notes.html")
    first = await fetcher.fetch(url)
    second = await fetcher.fetch(url)
    assert not first.from_cache and second.from_cache
    assert second.body == first.body
    assert farm.count() == 1


async def test_head_result_does_not_serve_a_body_request(farm: Farm, fetcher: Fetcher) -> None:
    url = farm.url("a.example.com", "/page/notes.html")
    await fetcher.fetch(url, want_body=False)
    r = await fetcher.fetch(url, want_body=True)
    assert r.body is not None and not r.from_cache
    again = await fetcher.fetch(url, want_body=False)
    assert again.from_cache
    assert [m for m, _h, _p in farm.requests] == ["HEAD", "GET"]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_negative_cache_expires(farm: Farm, fetch_policy: FetchPolicy) -> None:
    clock = _Clock()
    policy = _policy(fetch_policy, negative_ttl=60.0, positive_ttl=3600.0)
    async with Fetcher(policy, resolver=farm.resolver, clock=clock) as f:
        url = farm.url("a.example.com", "/status/404")
        ok = farm.url("a.example.com", "/status/200")
        assert (await f.fetch(url)).status is S.NOT_FOUND
        assert (await f.fetch(ok)).status is S.OK
        clock.now += 30
        assert (await f.fetch(url)).from_cache
        clock.now += 31  # past the negative TTL, still inside the positive one
        assert not (await f.fetch(url)).from_cache
        assert (await f.fetch(ok)).from_cache
    assert farm.count(path="/status/404") == 2
    assert farm.count(path="/status/200") == 1


async def test_transient_failures_are_never_cached(
    farm: Farm, fetcher: Fetcher, sleeps: SleepRecorder
) -> None:
    url = farm.url("a.example.com", "/status/503")
    assert (await fetcher.fetch(url)).status is S.HTTP_ERROR
    assert (await fetcher.fetch(url)).from_cache is False
    assert farm.count() == 6


async def test_cache_is_per_fetcher(farm: Farm, fetch_policy: FetchPolicy) -> None:
    url = farm.url("a.example.com", "/status/200")
    for _ in range(2):
        async with Fetcher(fetch_policy, resolver=farm.resolver) as f:
            assert not (await f.fetch(url)).from_cache
    assert farm.count() == 2


async def test_cache_lru_bound(farm: Farm, fetch_policy: FetchPolicy) -> None:
    async with Fetcher(fetch_policy, resolver=farm.resolver, cache_size=2) as f:
        urls = [farm.url("a.example.com", f"/status/200?n={i}") for i in range(3)]
        for u in urls:
            await f.fetch(u)
        assert (await f.fetch(urls[2])).from_cache
        assert not (await f.fetch(urls[0])).from_cache  # evicted
    assert farm.count() == 4


async def test_closed_fetcher_answers_with_a_status(farm: Farm, fetch_policy: FetchPolicy) -> None:
    f = Fetcher(fetch_policy, resolver=farm.resolver)
    await f.aclose()
    r = await f.fetch(farm.url("a.example.com", "/status/200"))
    assert r.status is S.CONNECTION_ERROR


# --------------------------------------------------------------------------------------------
# StaticResolver
# --------------------------------------------------------------------------------------------


async def test_static_resolver_port_override(farm: Farm, fetch_policy: FetchPolicy) -> None:
    # Like curl --connect-to: a port-less URL served by the farm's port; Host keeps the name.
    resolver = StaticResolver({"helix.example.org": f"127.0.0.1:{farm.port}"})
    async with Fetcher(fetch_policy, resolver=resolver) as f:
        r = await f.fetch("http://helix.example.org/page/notes.html")
    assert r.status is S.OK
    assert r.url == "http://helix.example.org/page/notes.html"
    assert farm.requests == [("GET", "helix.example.org", "/page/notes.html")]


async def test_static_resolver_port_override_is_still_checked(farm: Farm) -> None:
    resolver = StaticResolver({"helix.example.org": f"127.0.0.1:{farm.port}"})
    async with Fetcher(FetchPolicy(), resolver=resolver) as f:
        r = await f.fetch("http://helix.example.org/")
    assert r.status is S.BLOCKED_ADDRESS
    assert farm.requests == []


async def test_static_resolver_shapes() -> None:
    r = StaticResolver(
        {"A.Example.com.": "10.0.0.1", "b.example.com": ["::1", "[::1]:8080", "10.0.0.2:81"]},
        fallback=StaticResolver({"c.example.com": "10.0.0.3"}),
    )
    assert await r.resolve("a.example.com", 80) == ["10.0.0.1"]
    assert await r.resolve("b.example.com", 80) == ["::1", "[::1]:8080", "10.0.0.2:81"]
    assert await r.resolve("c.example.com", 80) == ["10.0.0.3"]
    with pytest.raises(socket.gaierror):
        await r.resolve("d.example.com", 80)
    assert r.hosts == {"a.example.com", "b.example.com"}


@pytest.mark.parametrize("bad", ["not-an-ip", "127.1", "1.2.3.4:0", "1.2.3.4:x", "[::1]x", ""])
def test_static_resolver_rejects_bad_addresses(bad: str) -> None:
    with pytest.raises(ValueError):
        StaticResolver({"a.example.com": bad})


async def test_url_timeout_applies_inside_fetch_all(
    farm: Farm, fetch_policy: FetchPolicy, sleeps: SleepRecorder
) -> None:
    policy = _policy(fetch_policy, url_timeout=0.3, answer_deadline=30.0)
    async with Fetcher(policy, resolver=farm.resolver, sleep=sleeps) as f:
        results = await f.fetch_all([farm.url("a.example.com", "/slow/30")])
    (r,) = results.values()
    assert r.status is S.TIMEOUT
    assert "0.3 s" in r.reason  # the per-URL limit ended it, not the 30 s answer deadline


def test_fetcher_survives_a_new_event_loop(fetch_policy: FetchPolicy) -> None:
    """One Fetcher used from two successive ``asyncio.run`` calls (e.g. a CLI, then a test)."""

    async def ok(request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok", content_type="text/html")

    async def once(fetcher: Fetcher) -> CitationStatus:
        app = web.Application()
        app.router.add_get("/", ok)
        runner = web.AppRunner(app)
        await runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        try:
            r = await fetcher.fetch(f"http://127.0.0.1:{sock.getsockname()[1]}/")
            return r.status
        finally:
            await runner.cleanup()

    fetcher = Fetcher(fetch_policy)
    assert asyncio.run(once(fetcher)) is S.OK
    assert asyncio.run(once(fetcher)) is S.OK
    asyncio.run(fetcher.aclose())


# --------------------------------------------------------------------------------------------
# Pacing: requests go out while later ones are still starting
# --------------------------------------------------------------------------------------------


class _TurnCounter:
    """Counts turns of the running loop (a callback that re-schedules itself once per turn)."""

    def __init__(self) -> None:
        self.turn = 0
        self._loop = asyncio.get_running_loop()
        self._handle = self._loop.call_soon(self._tick)

    def _tick(self) -> None:
        self.turn += 1
        self._handle = self._loop.call_soon(self._tick)

    def stop(self) -> None:
        self._handle.cancel()


async def test_start_pacer_admits_a_burst_then_a_few_per_turn_in_order() -> None:
    from citeguard.web.fetch import _StartPacer

    pacer = _StartPacer(asyncio.get_running_loop(), 3, 5)
    turns = _TurnCounter()
    passed: list[tuple[int, int]] = []

    async def request(i: int) -> None:
        if not pacer.ready():
            await pacer.turn()
        passed.append((i, turns.turn))

    tasks = [asyncio.create_task(request(i)) for i in range(12)]
    await asyncio.sleep(0)  # every task has asked once
    tasks[6].cancel()  # a waiter that goes away gives its place up
    await asyncio.gather(*tasks, return_exceptions=True)
    turns.stop()
    assert [i for i, _ in passed] == [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11]
    per_turn: dict[int, int] = {}
    for _, t in passed:
        per_turn[t] = per_turn.get(t, 0) + 1
    counts = [per_turn[t] for t in sorted(per_turn)]
    assert counts == [5, 3, 3]  # the burst, then three a turn

    # idle again: the next requests start at once, a burst of them
    before = len(passed)
    await asyncio.gather(*(request(i) for i in range(20, 25)))
    assert len({t for _, t in passed[before:]}) == 1


async def test_first_request_goes_out_before_every_connection_is_opened(
    fetch_policy: FetchPolicy,
) -> None:
    """128 URLs at once on one server: the first request reaches it while most connections are
    not yet open (unpaced, all 128 were opened before any request was sent; paced, 48: a burst
    of 32, then two turns of 8)."""
    n = 128
    accepted = 0
    seen_at_first_request: list[int] = []
    all_open = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        if accepted == n:
            all_open.set()
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                if not seen_at_first_request:
                    seen_at_first_request.append(accepted)
                await all_open.wait()  # no answer (so no connection reused) before all are open
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    policy = _policy(fetch_policy, per_host_concurrency=n, global_concurrency=n)
    urls = [f"http://127.0.0.1:{port}/page/{i}" for i in range(n)]
    try:
        async with Fetcher(policy) as f:
            results = await f.fetch_all(urls, want_body=False)
    finally:
        server.close()
        await server.wait_closed()
    assert all(r.status is S.OK for r in results.values())
    assert seen_at_first_request and seen_at_first_request[0] <= n // 2


# --------------------------------------------------------------------------------------------
# Identifier resolvers: hops, not destinations
# --------------------------------------------------------------------------------------------


async def test_doi_resolver_redirect_to_the_publisher_is_followed(
    farm: Farm, fetcher: Fetcher
) -> None:
    landing = farm.add("www.publisher.example.net", "/article/42", body="<p>the paper</p>")
    url = farm.add("doi.org", "/10.5555/abc.42", status=302, headers={"Location": landing})
    r = await fetcher.fetch(url)
    assert r.status is S.OK
    assert r.final_url == landing
    assert r.via_resolver == "doi.org"
    assert "reached through doi.org" in r.reason
    assert r.body is not None and b"the paper" in r.body


async def test_resolver_chain_through_a_publisher_link_resolver(
    farm: Farm, fetcher: Fetcher
) -> None:
    landing = farm.add("www.sciencedirect.com", "/science/article/pii/S1", body="<p>paper</p>")
    hub = farm.add(
        "linkinghub.elsevier.com", "/retrieve/pii/S1", status=302, headers={"Location": landing}
    )
    url = farm.add("dx.doi.org", "/10.1016/j.x.1", status=301, headers={"Location": hub})
    r = await fetcher.fetch(url)
    assert r.status is S.OK
    assert r.final_url == landing
    assert r.via_resolver == "dx.doi.org"


async def test_unknown_doi_is_not_found(farm: Farm, fetcher: Fetcher) -> None:
    url = farm.add("doi.org", "/10.5555/nope", status=404, body="DOI Not Found")
    r = await fetcher.fetch(url)
    assert r.status is S.NOT_FOUND
    assert "doi.org does not know this identifier" in r.reason
    assert r.via_resolver is None


async def test_the_landing_site_may_not_redirect_off_site(farm: Farm, fetcher: Fetcher) -> None:
    elsewhere = farm.add("tracker.example.org", "/x", body="<p>elsewhere</p>")
    landing = farm.add(
        "www.publisher.example.net", "/a", status=302, headers={"Location": elsewhere}
    )
    url = farm.add("doi.org", "/10.5555/hop", status=302, headers={"Location": landing})
    r = await fetcher.fetch(url)
    assert r.status is S.CROSS_DOMAIN_REDIRECT
    assert "example.net" in r.reason and "example.org" in r.reason
    assert farm.count(host="tracker.example.org") == 0


async def test_a_resolver_page_that_redirects_within_a_non_resolver_site_is_unchanged(
    farm: Farm, fetcher: Fetcher
) -> None:
    # doi.org appearing as a redirect *target* does not make the citing site a resolver
    target = farm.add("doi.org", "/10.5555/x", status=302, headers={"Location": "/y"})
    url = farm.add("blog.example.com", "/cites", status=301, headers={"Location": target})
    r = await fetcher.fetch(url)
    assert r.status is S.CROSS_DOMAIN_REDIRECT
    assert farm.count(host="doi.org") == 0


async def test_doi_resolver_url_sends_doi_org_urls_to_a_mirror(
    farm: Farm, fetch_policy: FetchPolicy
) -> None:
    landing = farm.add("journal.example.net", "/p/7", body="<p>mirrored</p>")
    farm.add("doi.test", "/10.5555/m.7", status=302, headers={"Location": landing})
    policy = _policy(fetch_policy, doi_resolver_url=farm.url("doi.test", "/"))
    async with Fetcher(policy, resolver=farm.resolver) as f:
        r = await f.fetch("https://doi.org/10.5555/m.7")
    assert r.status is S.OK
    assert r.final_url == landing
    assert r.via_resolver == "doi.test"
    assert r.url == "https://doi.org/10.5555/m.7"

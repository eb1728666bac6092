"""The URL citeguard checks is the URL the browser opens (WHATWG URL standard, issue 14).

The tables below were written from the WHATWG URL standard (https://url.spec.whatwg.org/, the
basic URL parser and host parser) and the kinds of cases web-platform-tests' urltestdata.json
covers. ``browser`` is the host (as the standard serialises it) a browser opens, ``None`` where
the standard says the URL fails to parse; ``citeguard`` is what :func:`normalize_url` returns, or
``REFUSED`` where citeguard is stricter than the browser (it then fetches nothing at all, so it
never fetches a host the browser would not open).
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import ada_url
import pytest

import citeguard.web.fetch.fetcher as fetch_module
from citeguard.models import CitationStatus
from citeguard.policy import FetchPolicy
from citeguard.web.fetch import Fetcher
from citeguard.web.urls import (
    UrlProblem,
    blocked_address_reason,
    host_of,
    join_url,
    normalize_url,
    parse_ip_literal,
    registrable_domain,
)

if TYPE_CHECKING:
    from conftest import Farm

S = CitationStatus
REFUSED = "refused"

# (URL as cited, host the browser opens or None, citeguard's canonical URL or REFUSED)
CASES: list[tuple[str, str | None, str]] = [
    # --- backslashes are path separators in special schemes
    ("http://example.com\\a\\b", "example.com", "http://example.com/a/b"),
    ("https://example.com\\", "example.com", "https://example.com/"),
    ("http:\\\\example.com\\a", "example.com", "http://example.com/a"),
    ("http:/\\example.com/", "example.com", "http://example.com/"),
    # --- authority confusions: "\" ends the authority, the last "@" ends the userinfo
    ("http://evil.example\\@good.example/", "evil.example", "http://evil.example/@good.example/"),
    ("http://evil.example\\.good.example/", "evil.example", "http://evil.example/.good.example/"),
    (
        "http://good.example\\\\@evil.example/",
        "good.example",
        "http://good.example//@evil.example/",
    ),
    (
        "http://user:pass@evil.example\\@good.example/",
        "evil.example",
        "http://user:pass@evil.example/@good.example/",
    ),
    (
        "http://good.example%5C@evil.example/",
        "evil.example",
        "http://good.example%5C@evil.example/",
    ),
    ("http://good.example#@evil.example/", "good.example", "http://good.example/"),
    ("http://good.example?@evil.example/", "good.example", "http://good.example/?@evil.example/"),
    # --- tab, LF and CR are removed anywhere, before parsing
    ("ht\ttp://exa\nmple.com/pa\rth", "example.com", "http://example.com/path"),
    ("http://good.example\t@evil.example/", "evil.example", "http://good.example@evil.example/"),
    (
        "http://evil.example\n.good.example/",
        "evil.example.good.example",
        "http://evil.example.good.example/",
    ),
    ("http://[::1\n]/", "[::1]", "http://[::1]/"),
    # --- leading and trailing C0 controls and spaces are stripped
    ("  http://example.com/  ", "example.com", "http://example.com/"),
    ("\x0c\x1fhttp://example.com/\x1c ", "example.com", "http://example.com/"),
    ("\x00http://example.com/", "example.com", REFUSED),  # citeguard: no NUL anywhere
    ("http://example.com/\x01", "example.com", REFUSED),
    # --- the host is percent-decoded before it is parsed
    ("http://%65xample.com/", "example.com", "http://example.com/"),
    ("http://EX%41MPLE.com/", "example.com", "http://example.com/"),
    ("http://ex%2Eample.com/", "ex.ample.com", "http://ex.ample.com/"),
    ("http://%31%32%37.0.0.1/", "127.0.0.1", "http://127.0.0.1/"),
    ("http://%zz.example/", None, REFUSED),
    ("http://exa%20mple.com/", None, REFUSED),
    # --- IPv4: hex, octal, short and integer forms; a numeric last label must be IPv4
    ("http://0x7f.1/", "127.0.0.1", "http://127.0.0.1/"),
    ("http://0177.0.0.1/", "127.0.0.1", "http://127.0.0.1/"),
    ("http://2130706433/", "127.0.0.1", "http://127.0.0.1/"),
    ("http://127.1/", "127.0.0.1", "http://127.0.0.1/"),
    ("http://0x7F.0X00.0x0.01/", "127.0.0.1", "http://127.0.0.1/"),
    ("http://192.168.257/", "192.168.1.1", "http://192.168.1.1/"),
    ("http://0300.0250.0.01/", "192.168.0.1", "http://192.168.0.1/"),
    ("http://0xc0a80101/", "192.168.1.1", "http://192.168.1.1/"),
    ("http://4294967295/", "255.255.255.255", "http://255.255.255.255/"),
    ("http://0x/", "0.0.0.0", "http://0.0.0.0/"),
    ("http://1.2.3.4./", "1.2.3.4", "http://1.2.3.4/"),
    ("http://4294967296/", None, REFUSED),
    ("http://256.0.0.1/", None, REFUSED),
    ("http://1.2.3.08/", None, REFUSED),
    ("http://1.2.3.4.5/", None, REFUSED),
    ("http://foo.09/", None, REFUSED),
    ("http://foo.0x7f/", None, REFUSED),
    ("http://0x7f.1.example/", "0x7f.1.example", "http://0x7f.1.example/"),
    # --- IPv6: compressed, lowercase, embedded IPv4 in hex
    ("http://[0:0:0:0:0:0:0:1]/", "[::1]", "http://[::1]/"),
    ("http://[2001:DB8:0:0:1:0:0:1]/", "[2001:db8::1:0:0:1]", "http://[2001:db8::1:0:0:1]/"),
    ("http://[::ffff:127.0.0.1]/", "[::ffff:7f00:1]", "http://[::ffff:7f00:1]/"),
    ("http://[::127.0.0.1]/", "[::7f00:1]", "http://[::7f00:1]/"),
    ("http://[1:0::]/", "[1::]", "http://[1::]/"),
    ("http://[0:1:0:1:0:1:0:1]/", "[0:1:0:1:0:1:0:1]", "http://[0:1:0:1:0:1:0:1]/"),
    ("http://[::]:8080/", "[::]", "http://[::]:8080/"),
    ("http://[1::2::3]/", None, REFUSED),
    ("http://[::1/", None, REFUSED),
    ("http://[::1]x/", None, REFUSED),
    ("http://[fe80::1%25eth0]/", None, REFUSED),
    # --- IDNA (UTS #46, non-transitional): mapping, punycode, ignored code points
    ("http://B\u00fccher.example/", "xn--bcher-kva.example", "http://xn--bcher-kva.example/"),
    ("http://xn--bcher-kva.example/", "xn--bcher-kva.example", "http://xn--bcher-kva.example/"),
    ("http://fa\u00df.de/", "xn--fa-hia.de", "http://xn--fa-hia.de/"),
    ("http://example\u3002com/", "example.com", "http://example.com/"),
    (
        "http://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com/",
        "example.com",
        "http://example.com/",
    ),
    ("http://\uff11\uff12\uff17.0.0.1/", "127.0.0.1", "http://127.0.0.1/"),
    ("http://exa\u00admple.com/", "example.com", "http://example.com/"),
    ("http://a\u200bb.example/", "ab.example", "http://ab.example/"),
    ("http://example.com./", "example.com.", "http://example.com/"),
    # --- userinfo: the last "@" ends it; "@" in it is percent-encoded
    ("http://user:p@ss@example.com/", "example.com", "http://user:p%40ss@example.com/"),
    ("http://a@b@c.example/", "c.example", "http://a%40b@c.example/"),
    (
        "http://good.example:80@evil.example/",
        "evil.example",
        "http://good.example:80@evil.example/",
    ),
    ("http://user:@example.com/", "example.com", "http://user@example.com/"),
    ("http://@example.com/", "example.com", "http://example.com/"),
    # --- slashes after the scheme: a browser skips any number; citeguard wants two
    ("http:/x.example/", "x.example", REFUSED),
    ("http:x.example", "x.example", REFUSED),
    ("http:///x.example/", "x.example", REFUSED),
    ("http:\\\\\\x.example/", "x.example", REFUSED),
    ("http:\\\\x.example\\", "x.example", "http://x.example/"),
    # --- ports
    ("http://example.com:65535/", "example.com", "http://example.com:65535/"),
    ("http://example.com:0080/", "example.com", "http://example.com/"),
    ("http://example.com:/", "example.com", "http://example.com/"),
    ("http://example.com:443/", "example.com", "http://example.com:443/"),
    ("https://example.com:443/", "example.com", "https://example.com/"),
    ("http://example.com:0/", "example.com", REFUSED),  # citeguard: no port 0
    ("http://example.com:65536/", None, REFUSED),
    ("http://example.com:99999999999999999999/", None, REFUSED),
    ("http://example.com:-1/", None, REFUSED),
    ("http://example.com:8o/", None, REFUSED),
    # --- empty hosts
    ("http://", None, REFUSED),
    ("http://:80/", None, REFUSED),
    ("http://user@/", None, REFUSED),
    ("http://[]/", None, REFUSED),
    ("http://?x", None, REFUSED),
    ("http://#x", None, REFUSED),
]


def _bare(host: str) -> str:
    """A WHATWG host as host_of reports it: no IPv6 brackets, no trailing dot."""
    return host.strip("[]").rstrip(".")


@pytest.mark.parametrize(("raw", "browser", "expected"), CASES)
def test_table_matches_the_standard(raw: str, browser: str | None, expected: str) -> None:
    """The table is the standard; ada-url (citeguard's parser) must read it the same way."""
    if browser is None:
        assert not ada_url.check_url(raw)
    else:
        assert ada_url.parse_url(raw)["hostname"] == browser


@pytest.mark.parametrize(("raw", "browser", "expected"), CASES)
def test_citeguard_fetches_the_host_a_browser_opens(
    raw: str, browser: str | None, expected: str
) -> None:
    if expected == REFUSED:
        with pytest.raises(UrlProblem) as info:
            normalize_url(raw)
        assert info.value.status is S.MALFORMED_URL
        assert info.value.reason
        return
    assert browser is not None, "citeguard must refuse what a browser cannot open"
    got = normalize_url(raw)
    assert got == expected
    assert host_of(got) == _bare(browser)
    assert normalize_url(got) == got  # canonical: normalising again changes nothing


@pytest.mark.parametrize(("raw", "browser", "expected"), CASES)
def test_host_of_is_the_browser_host(raw: str, browser: str | None, expected: str) -> None:
    """Reports and site comparisons name the host a browser opens, even for refused URLs."""
    assert host_of(raw) == ("" if browser is None else _bare(browser))


@pytest.mark.parametrize(
    ("raw", "browser"),
    [
        ("http://evil.example\\@good.example/", "evil.example"),
        ("http://user:pass@evil.example\\@good.example/", "evil.example"),
        ("http://good.example\\\\@evil.example/", "good.example"),
    ],
)
def test_the_old_parser_read_another_host(raw: str, browser: str) -> None:
    """Why issue 14 exists: RFC 3986-style splitting (urllib) names a host the browser does not."""
    assert urlsplit(raw).hostname != browser
    assert host_of(raw) == browser
    assert registrable_domain(raw) == browser


def test_odd_hosts_stay_blocked_after_whatwg_parsing() -> None:
    """Every spelling of a private address that WHATWG accepts ends as a canonical blocked IP."""
    for raw in (
        "http://%31%32%37.0.0.1/",
        "http://\uff11\uff12\uff17.0.0.1/",
        "http://0x7F.0X00.0x0.01/",
        "http://192.168.257/",
        "http://169.254.169.254\\@example.com/",
        "http://[::ffff:169.254.169.254]/",
        "http://0x/",
    ):
        ip = parse_ip_literal(host_of(normalize_url(raw)))
        assert ip is not None, raw
        assert blocked_address_reason(ip) is not None, raw
    assert parse_ip_literal("::ffff:a9fe:a9fe") == ipaddress.ip_address("::ffff:169.254.169.254")


# (page URL, Location value, where a browser goes or None when it cannot)
BASE = "http://a.example.com/dir/page"
JOINS: list[tuple[str, str | None]] = [
    ("\\\\evil.example/x", "http://evil.example/x"),
    ("/\\evil.example/x", "http://evil.example/x"),
    ("\\/evil.example/x", "http://evil.example/x"),
    ("http:\\\\evil.example/x", "http://evil.example/x"),
    ("//evil.example/x", "http://evil.example/x"),
    ("/\t/evil.example/x", "http://evil.example/x"),
    ("https:evil.example/x", "https://evil.example/x"),  # another scheme: absolute
    ("http:other", "http://a.example.com/dir/other"),  # the same scheme: relative
    ("..\\up", "http://a.example.com/up"),
    ("  next?q=1  ", "http://a.example.com/dir/next?q=1"),
    ("?q=2", "http://a.example.com/dir/page?q=2"),
    ("http://[::ffff:127.0.0.1/x", None),
    ("//[::1/x", None),
    ("http://a.example.com:99999/", None),
    ("http://exa mple.com/", None),
]


@pytest.mark.parametrize(("location", "browser"), JOINS)
def test_join_url_resolves_like_a_browser(location: str, browser: str | None) -> None:
    if browser is None:
        with pytest.raises(UrlProblem) as info:
            join_url(BASE, location)
        assert info.value.status is S.MALFORMED_URL
        assert info.value.reason
    else:
        assert join_url(BASE, location) == browser


def test_join_url_says_why() -> None:
    with pytest.raises(UrlProblem) as info:
        join_url(BASE, "http://[::ffff:127.0.0.1/x")
    assert "IPv6" in info.value.reason
    with pytest.raises(UrlProblem) as info:
        join_url(BASE, "http://a.example.com:99999/")
    assert "port" in info.value.reason


# --------------------------------------------------------------------------------------------
# The fetcher connects to the host WHATWG parsing yields (the farm: real aiohttp on 127.0.0.1)
# --------------------------------------------------------------------------------------------


async def test_backslash_authority_fetches_the_browser_host(
    farm: Farm, fetch_policy: FetchPolicy
) -> None:
    port = farm.port
    farm.add("evil.example", f"/@good.example:{port}/", body="<p>evil</p>")
    farm.add("good.example", "/", body="<p>good</p>")
    cited = f"http://evil.example:{port}\\@good.example:{port}/"
    async with Fetcher(fetch_policy, resolver=farm.resolver) as f:
        r = await f.fetch(cited)
    assert r.status is S.OK, r.reason
    assert r.body == b"<p>evil</p>"
    assert farm.requests == [("GET", "evil.example", f"/@good.example:{port}/")]
    assert farm.count(host="good.example") == 0
    # ...and the result names that host, as every report built from it does.
    assert r.url == r.final_url == f"http://evil.example:{port}/@good.example:{port}/"
    assert host_of(r.url) == "evil.example"
    assert registrable_domain(r.url) == "evil.example"


async def test_tab_in_authority_fetches_the_browser_host(
    farm: Farm, fetch_policy: FetchPolicy
) -> None:
    port = farm.port
    farm.add("evil.example", "/x", body="<p>evil</p>")
    async with Fetcher(fetch_policy, resolver=farm.resolver) as f:
        r = await f.fetch(f"http://good.example\t@evil.example:{port}/x")
    assert r.status is S.OK, r.reason
    assert [h for _m, h, _p in farm.requests] == ["evil.example"]
    assert host_of(r.url) == "evil.example"


async def test_backslash_authority_to_a_metadata_address_is_blocked(farm: Farm) -> None:
    port = farm.port
    async with Fetcher(FetchPolicy(), resolver=farm.resolver) as f:
        r = await f.fetch(f"http://169.254.169.254:{port}\\@a.example.com:{port}/status/200")
    assert r.status is S.BLOCKED_ADDRESS
    assert "metadata" in r.reason
    assert farm.requests == []


@pytest.mark.parametrize(
    "host", ["%31%32%37.0.0.1", "\uff11\uff12\uff17.0.0.1", "0x7F.0X00.0x0.01"]
)
async def test_whatwg_spellings_of_loopback_are_blocked(farm: Farm, host: str) -> None:
    async with Fetcher(FetchPolicy(), resolver=farm.resolver) as f:
        r = await f.fetch(f"http://{host}:{farm.port}/status/200")
    assert r.status is S.BLOCKED_ADDRESS, r.reason
    assert "loopback" in r.reason
    assert farm.requests == []


async def test_redirect_with_a_malformed_location_is_malformed_url(
    farm: Farm, fetch_policy: FetchPolicy
) -> None:
    bad = "http://[::ffff:127.0.0.1/x"
    url = farm.add("a.example.com", "/bad", status=302, headers={"Location": bad})
    async with Fetcher(fetch_policy, resolver=farm.resolver) as f:
        r = await f.fetch(url)
    assert r.status is S.MALFORMED_URL
    assert "redirect" in r.reason and "IPv6" in r.reason
    assert "unexpected error" not in r.reason
    assert r.redirects == [bad]
    assert farm.count() == 1


@pytest.mark.parametrize(
    "location", ["/\\evil.example/x", "\\\\evil.example/x", "http:\\\\evil.example/x"]
)
async def test_backslash_location_leaves_the_site_as_in_a_browser(
    farm: Farm, fetch_policy: FetchPolicy, location: str
) -> None:
    farm.add("evil.example", "/x", body="<p>evil</p>")
    url = farm.add("a.example.com", "/go", status=302, headers={"Location": location})
    async with Fetcher(fetch_policy, resolver=farm.resolver) as f:
        r = await f.fetch(url)
    assert r.status is S.CROSS_DOMAIN_REDIRECT
    assert r.redirects == ["http://evil.example/x"]
    assert farm.count(host="evil.example") == 0


async def test_backslash_location_on_the_same_site_is_followed(
    farm: Farm, fetch_policy: FetchPolicy
) -> None:
    target = farm.add("b.example.com", "/y", body="<p>y</p>")
    location = f"\\\\b.example.com:{farm.port}\\y"
    url = farm.add("a.example.com", "/go", status=301, headers={"Location": location})
    async with Fetcher(fetch_policy, resolver=farm.resolver) as f:
        r = await f.fetch(url)
    assert r.status is S.OK, r.reason
    assert r.final_url == target
    assert farm.count(host="b.example.com", path="/y") == 1


async def test_no_request_when_the_http_client_would_read_another_host(
    farm: Farm, fetch_policy: FetchPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fetcher's last check: aiohttp's reading of the URL must name the WHATWG host."""
    monkeypatch.setattr(fetch_module, "host_of", lambda url: "elsewhere.example")
    async with Fetcher(fetch_policy, resolver=farm.resolver) as f:
        r = await f.fetch(farm.url("a.example.com", "/status/200"))
    assert r.status is S.MALFORMED_URL
    assert "elsewhere.example" in r.reason
    assert farm.requests == []


# --------------------------------------------------------------------------------------------
# The fast path (no ada call for the common URL) parses exactly as ada does
# --------------------------------------------------------------------------------------------

import random  # noqa: E402

from citeguard.web import urls as urls_module  # noqa: E402

_HOSTS = ["a", "example", "com", "_x", "-y", "z-", "ab--c", "b" * 64, "127", "0", "255", "1"]
_ODD_HOSTS = ["xn--bcher-kva", "256", "0x7f", "A", "010", "4294967295", "", "é", "a b"]
_PATHS = ["a", "~", "!$&()*+,;=:@", "x'y", "", "A-Z.txt", "p", "43", "x-0"]
_ODD_PATHS = [".", "..", "%2e", "%41", "b c", "\\", "é", ".well-known", "?", "#", "<"]
_QUERIES = ["", "?", "?a=1", "?a=1&utm_source=x", "?a/b?c", "??", "?x=y&"]
_ODD_QUERIES = ["?q='x'", "?x=%20", "?é", "?a b", "?<"]


def _generated_url(rng: random.Random, odd: float) -> str:
    def pick(good: list[str], bad: list[str]) -> str:
        return rng.choice(bad if rng.random() < odd else good)

    scheme = pick(["http", "https"], ["HTTP", "ftp", "Https", "ws"])
    host = ".".join(pick(_HOSTS, _ODD_HOSTS) for _ in range(rng.randint(1, 4)))
    port = pick(["", ":80", ":443", ":8080", ":65535"], [":0", ":65536", ":080", ":", ":x"])
    path = "/".join(pick(_PATHS, _ODD_PATHS) for _ in range(rng.randint(0, 4)))
    path = "/" + path if path or rng.random() < 0.5 else ""
    fragment = rng.choice(["", "#", "#f", "#:~:text=a%20b", "#x y\\z", "#@evil.example"])
    return f"{scheme}://{host}{port}{path}{pick(_QUERIES, _ODD_QUERIES)}{fragment}"


@pytest.mark.parametrize("odd", [0.0, 0.05, 0.3])
def test_the_fast_path_parses_as_ada_does(odd: float) -> None:
    """20,000 generated URLs near the fast path's edge: every URL it takes, ada parses, and
    to the same parts; the URLs it declines go to ada as before."""
    rng = random.Random(f"whatwg-fast-{odd}")
    taken = 0
    for _ in range(20_000):
        url = _generated_url(rng, odd)
        fast = urls_module._fast_parts(url)
        if fast is None:
            continue
        taken += 1
        slow = ada_url.parse_url(url, attributes=urls_module._ADA_PARTS)  # raises if invalid
        assert fast == dict(slow), url
    assert taken >= (2_000 if odd < 0.3 else 200)  # the comparison is not vacuous


def test_the_fast_path_takes_the_common_urls() -> None:
    common = [
        "https://www.example.com/a/b?x=1",
        "http://127.0.0.1:8080/p/43/x-0",
        "https://example.com",
        "https://example.com:443/x#frag",
        "http://site12.test/p?utm_source=openai&a=b",
    ]
    for url in common:
        assert urls_module._fast_parts(url) is not None, url
        assert urls_module._fast_parts(url) == dict(
            ada_url.parse_url(url, attributes=urls_module._ADA_PARTS)
        )

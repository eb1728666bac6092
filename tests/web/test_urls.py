"""URL normalisation, registrable domains and address safety (pure functions, no network)."""

from __future__ import annotations

import ipaddress

import pytest

from citeguard.models import CitationStatus
from citeguard.web.urls import (
    UrlProblem,
    blocked_address_reason,
    host_of,
    normalize_url,
    parse_ip_literal,
    registrable_domain,
    same_site,
    split_fragment,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("HTTP://Example.COM", "http://example.com/"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("https://example.com:8443/a", "https://example.com:8443/a"),
        ("http://example.com/a#section-2", "http://example.com/a"),
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/%7euser/%2f%zz", "http://example.com/~user/%2F%25zz"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("http://example.com/caf\u00e9?q=cr\u00e8me br\u00fbl\u00e9e", None),
        ("http://b\u00fccher.example/", "http://xn--bcher-kva.example/"),
        ("http://EXAMPLE.com./x", "http://example.com/x"),
        ("http://example.com/x?", "http://example.com/x"),
        ("http://example.com/x?b=2&a=1", "http://example.com/x?b=2&a=1"),
        ("  http://example.com/x  ", "http://example.com/x"),
        ("http://user:pa ss@example.com/", "http://user:pa%20ss@example.com/"),
        ("http://[2001:DB8:0:0::1]:8080/", "http://[2001:db8::1]:8080/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://2130706433/", "http://127.0.0.1/"),
        ("http://0177.0.0.1/", "http://127.0.0.1/"),
    ],
)
def test_normalize(raw: str, expected: str | None) -> None:
    got = normalize_url(raw)
    if expected is None:
        assert got == "http://example.com/caf%C3%A9?q=cr%C3%A8me%20br%C3%BBl%C3%A9e"
    else:
        assert got == expected


def test_normalize_is_idempotent() -> None:
    for raw in ("http://b\u00fccher.example/%7e/a b?x=%41", "https://Example.com:443/./a/../b#f"):
        once = normalize_url(raw)
        assert normalize_url(once) == once


@pytest.mark.parametrize(
    "raw",
    [
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "data:text/html,<b>x</b>",
        "file:///etc/passwd",
        "mailto:someone@example.com",
        "ftp://example.com/file",
        "gopher://example.com/",
    ],
)
def test_blocked_schemes(raw: str) -> None:
    with pytest.raises(UrlProblem) as info:
        normalize_url(raw)
    assert info.value.status is CitationStatus.BLOCKED_SCHEME
    assert "scheme" in info.value.reason


def test_allowed_schemes_can_be_narrowed() -> None:
    with pytest.raises(UrlProblem) as info:
        normalize_url("http://example.com/", allowed_schemes=frozenset({"https"}))
    assert info.value.status is CitationStatus.BLOCKED_SCHEME


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   ",
        "example.com/path",
        "http://",
        "http:///path",
        "http:example.com",
        "http://exa mple.com/",
        "http://example.com:99999/",
        "http://example.com:port/",
        "http://example.com:0/",
        "http://999.1.1.1/",
        "http://1.2.3.4.5/",
        "http://[::1/",
        "http://[not-ipv6]/",
        "http://exa<mple.com/",
        "http://-bad-.example.com/",
        "http://example.com/\x00",
        "http://" + "a" * 64 + ".com/",
    ],
)
def test_malformed(raw: str) -> None:
    with pytest.raises(UrlProblem) as info:
        normalize_url(raw)
    assert info.value.status is CitationStatus.MALFORMED_URL
    assert info.value.reason


def test_split_fragment() -> None:
    assert split_fragment("http://a.com/x#y") == ("http://a.com/x", "y")
    assert split_fragment("http://a.com/x#") == ("http://a.com/x", "")
    assert split_fragment("http://a.com/x") == ("http://a.com/x", None)
    assert split_fragment("http://a.com/#:~:text=hello") == ("http://a.com/", ":~:text=hello")


@pytest.mark.parametrize(
    ("value", "domain"),
    [
        ("https://news.bbc.co.uk/a", "bbc.co.uk"),
        ("http://www.example.com/", "example.com"),
        ("example.com", "example.com"),
        ("WWW.Example.COM", "example.com"),
        ("https://alice.github.io/blog", "alice.github.io"),  # private suffixes count
        ("http://localhost:8080/", "localhost"),
        ("http://127.0.0.1:8080/", "127.0.0.1"),
        ("http://[::1]/", "::1"),
        ("http://b\u00fccher.de/", "xn--bcher-kva.de"),
        ("intranet", "intranet"),
        ("", ""),
    ],
)
def test_registrable_domain(value: str, domain: str) -> None:
    assert registrable_domain(value) == domain


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("http://example.com/a", "https://www.example.com/b", True),
        ("https://docs.example.com/", "https://blog.example.com/", True),
        ("https://example.com/", "https://example.org/", False),
        ("https://alice.github.io/", "https://bob.github.io/", False),
        ("https://example.co.uk/", "https://other.co.uk/", False),
        ("http://127.0.0.1/", "http://127.0.0.2/", False),
        ("", "", False),
    ],
)
def test_same_site(a: str, b: str, same: bool) -> None:
    assert same_site(a, b) is same


def test_host_of() -> None:
    assert host_of("http://User@Example.COM:81/x") == "example.com"
    assert host_of("http://[::1]:80/") == "::1"
    assert host_of("not a url") == ""


@pytest.mark.parametrize(
    ("literal", "address"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7F000001", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
        ("10.0.0.1.", "10.0.0.1"),
        ("01.9", "1.0.0.9"),  # WHATWG: octal first part, short form
        ("0x", "0.0.0.0"),
        ("[::1]", "::1"),
        ("::ffff:127.0.0.1", "::ffff:7f00:1"),
        ("[fd00:ec2::254]", "fd00:ec2::254"),
    ],
)
def test_parse_ip_literal(literal: str, address: str) -> None:
    assert parse_ip_literal(literal) == ipaddress.ip_address(address)


@pytest.mark.parametrize(
    "host", ["example.com", "256.1.1.1", "1.2.3.4.5", "0xg", "1.2.3.0x1g", "[::1", "", "09.1.1.1"]
)
def test_not_ip_literals(host: str) -> None:
    assert parse_ip_literal(host) is None


@pytest.mark.parametrize(
    ("address", "fragment"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.5.4", "private"),
        ("192.168.0.1", "private"),
        ("169.254.1.1", "link-local"),
        ("169.254.169.254", "metadata"),
        ("100.100.100.200", "metadata"),
        ("100.64.0.1", "CGNAT"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.251", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "address"),
        ("192.0.2.1", "address"),  # documentation range: not globally routable
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("ff02::1", "multicast"),
        ("fec0::1", "site-local"),
        ("fd00:ec2::254", "metadata"),
        ("::ffff:127.0.0.1", "IPv4-mapped"),
        ("::ffff:169.254.169.254", "metadata"),
        ("::127.0.0.1", "IPv4-compatible"),
        ("2002:a00:1::", "6to4"),
        ("64:ff9b::7f00:1", "NAT64"),
        ("64:ff9b::a9fe:a9fe", "metadata"),
    ],
)
def test_blocked_addresses(address: str, fragment: str) -> None:
    reason = blocked_address_reason(ipaddress.ip_address(address))
    assert reason is not None
    assert fragment in reason


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "8.8.8.8",
        "1.1.1.1",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
        "2002:808:808::",
    ],
)
def test_public_addresses_pass(address: str) -> None:
    assert blocked_address_reason(ipaddress.ip_address(address)) is None

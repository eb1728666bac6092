"""citeguard.web.suffixes: the public-suffix list as sets agrees with tldextract's trie, which it
replaced (the trie was ~18,600 objects every full garbage collection walked)."""

from __future__ import annotations

import contextlib
import gc

import idna
import pytest
import tldextract
from conftest import fresh_python

from citeguard.web.suffixes import SuffixList, suffix_list
from citeguard.web.urls import registrable_domain


@pytest.fixture(scope="module")
def reference() -> tldextract.TLDExtract:
    return tldextract.TLDExtract(
        suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True
    )


def _hosts_around_every_rule() -> list[str]:
    hosts: list[str] = []
    for rule in sorted(suffix_list().rules):
        base = rule.lstrip("!").replace("*", "x")
        forms = [base]
        with contextlib.suppress(idna.IDNAError):
            forms.append(idna.encode(base, uts46=True).decode("ascii"))
        for form in forms:
            for prefix in ("", "a.", "b.a.", "www."):
                hosts.append(f"{prefix}{form}".lower())
    return hosts


def test_agrees_with_tldextract_on_every_rule_of_the_list(
    reference: tldextract.TLDExtract,
) -> None:
    """Every rule as a host, under one and two more labels and ``www.``, as written and
    IDNA-encoded: wildcards (``*.ck``), exceptions (``!www.ck``), private suffixes
    (``github.io``), Unicode rules matched by their ``xn--`` form."""
    hosts = _hosts_around_every_rule()
    assert len(hosts) > 60_000
    ours = suffix_list()
    differ = [
        (h, ours.registrable(h), reference(h).top_domain_under_public_suffix)
        for h in hosts
        if ours.registrable(h) != reference(h).top_domain_under_public_suffix
    ]
    assert differ == []


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("news.bbc.co.uk", "bbc.co.uk"),
        ("a.b.example.com", "example.com"),
        ("user.github.io", "user.github.io"),  # a private suffix counts: one user's site
        ("x.user.github.io", "user.github.io"),
        ("www.ck", "www.ck"),  # the exception to *.ck
        ("bar.ck", ""),  # *.ck: bar.ck is itself a public suffix
        ("a.bar.ck", "a.bar.ck"),
        ("co.uk", ""),  # a suffix alone has no registrable domain
        ("nosuchtld", ""),
        ("xn--80ak6aa92e.xn--p1ai", "xn--80ak6aa92e.xn--p1ai"),  # Cyrillic .рф, by its xn-- form
        ("", ""),
    ],
)
def test_registrable(host: str, expected: str) -> None:
    assert suffix_list().registrable(host) == expected


def test_registrable_domain_reads_host_like_text_as_tldextract_did() -> None:
    assert registrable_domain("Example.COM:8080") == "example.com"
    assert registrable_domain("user@shop.example.co.uk/path?q#f") == "example.co.uk"
    assert registrable_domain("https://www.bbc.co.uk/news") == "bbc.co.uk"
    assert registrable_domain("localhost") == "localhost"
    assert registrable_domain("127.0.0.1") == "127.0.0.1"


def test_a_list_from_text() -> None:
    text = "// comment\n\ncom\n*.ck\n!www.ck\n// ===BEGIN PRIVATE DOMAINS===\ngithub.io\n"
    rules = SuffixList.parse(text)
    assert rules.rules == frozenset({"com", "*.ck", "!www.ck", "github.io"})
    assert rules.registrable("a.b.com") == "b.com"
    assert rules.registrable("www.ck") == "www.ck"
    assert rules.registrable("a.b.github.io") == "b.github.io"


def test_the_list_is_a_handful_of_objects_to_the_garbage_collector() -> None:
    """What the collector walks in every full pass: the list's sets (their strings are not
    tracked), not one object per trie node."""
    rules = suffix_list()
    assert len(rules.nodes) > 9_000
    tracked = [o for o in (rules, rules.rules, rules.nodes) if gc.is_tracked(o)]
    assert len(tracked) <= 3
    assert not any(gc.is_tracked(s) for s in list(rules.nodes)[:100])


def test_reading_the_list_imports_neither_tldextract_nor_requests() -> None:
    code = (
        "import sys\n"
        "from citeguard.web.urls import registrable_domain\n"
        "assert registrable_domain('news.bbc.co.uk') == 'bbc.co.uk'\n"
        "print(sorted(m for m in ('tldextract', 'requests') if m in sys.modules))\n"
    )
    out = fresh_python(code)
    assert out.stdout.strip() == "[]", out.stderr


def test_without_the_snapshot_file_tldextract_reads_the_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tldextract that no longer ships ``.tld_set_snapshot`` where we look: its own reading
    of its bundled list gives the same rules."""
    from citeguard.web import suffixes

    monkeypatch.setattr(suffixes, "_SNAPSHOT", ".no_such_snapshot")
    suffixes.suffix_list.cache_clear()
    try:
        fallback = suffixes.suffix_list()
    finally:
        suffixes.suffix_list.cache_clear()
    assert fallback.rules == suffix_list().rules

"""Catch-all soft 404s (citeguard/web/soft404.py) against a real loopback farm: a cited page is
the host's catch-all only when it *is* the page the host serves for a made-up path (modulo the
echoed path and volatile tokens), never because it looks like it. Real Guard, real aiohttp."""

from __future__ import annotations

import hashlib
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from conftest import Farm

from citeguard import CitationStatus, EntailmentPolicy, FetchPolicy, Guard, Policy

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
SHOP = "shop.example.co.uk"

# the shop's frame: long enough that two product pages are > 95 % alike character for character
NAV = (
    "<header><nav>Home · Widgets · Gadgets · Gizmos · Spare parts · Gift cards · Offers · "
    "Delivery · Returns · Contact us · My account · Basket</nav></header>"
)
FOOTER = (
    "<footer><p>Example Shop Ltd, 1 High Street, Exampleton. Registered in England and Wales. "
    "Prices include VAT. Free delivery on orders over £50. Returns accepted within 30 days of "
    "delivery. Our customer service team is available Monday to Friday, nine to five. Sign up "
    "to our newsletter for weekly offers on widgets, gadgets and gizmos. Terms and conditions "
    "apply to every offer. Cookie settings. Privacy notice. Accessibility statement.</p></footer>"
)


def _policy() -> Policy:
    fetch = FetchPolicy(
        allow_private_addresses=True, url_timeout=3.0, answer_deadline=10.0, retries=0
    )
    return Policy(fetch=fetch, entailment=EntailmentPolicy(backend="none"))


def _page(main: str, title: str = "Example Shop") -> str:
    return (
        f"<html><head><title>{title}</title></head><body>{NAV}<main>{main}</main>{FOOTER}"
        "</body></html>"
    )


def _facts(path: str) -> tuple[int, str, int]:
    """A product's number, price and stock, derived from its path (any path has some)."""
    d = hashlib.sha256(path.encode()).digest()
    return d[0] * 4 + d[1] % 4, f"{d[2] % 50}.{d[3] % 100:02d}", d[4] % 20


def _product(request: web.Request) -> web.Response:
    n, price, stock = _facts(request.path)
    main = f"<p>Widget {n} costs ${price}, in stock: {stock}.</p>"
    return web.Response(text=_page(main, f"Widget {n} | Example Shop"), content_type="text/html")


async def _check(farm: Farm, urls: list[str], claims: list[str] | None = None) -> dict[str, Any]:
    claims = claims or [f"Claim number {i} holds" for i in range(len(urls))]
    answer = "".join(f"{c} [{i + 1}].\n" for i, c in enumerate(claims))
    answer += "\n" + "".join(f"[{i + 1}] {u}\n" for i, u in enumerate(urls))
    async with Guard(_policy(), resolver=farm.resolver, now=lambda: NOW) as guard:
        verdict = await guard.check(answer, question="What does the shop sell?")
    return {c.url: (c.status, c.reason) for c in verdict.citations}


# --------------------------------------------------------------------------------------------
# Templated pages that differ in their facts are each their own page
# --------------------------------------------------------------------------------------------


async def test_templated_pages_that_differ_in_their_facts_are_not_the_catch_all(
    farm: Farm,
) -> None:
    # every path, the probe's included, renders the product template with its own facts
    async def handler(request: web.Request) -> web.StreamResponse:
        return _product(request)

    farm.add(SHOP, "*", handler)
    urls = [farm.url(SHOP, f"/product/{i}") for i in range(1, 25)]
    claims = []
    for i in range(1, 25):
        n, price, stock = _facts(f"/product/{i}")
        claims.append(f"Widget {n} costs ${price} with {stock} in stock")
    status = await _check(farm, urls, claims)
    assert {s for s, _r in status.values()} == {CitationStatus.OK}, status
    probes = [p for _m, h, p in farm.requests if h == SHOP and "citeguard-probe" in p]
    assert len(set(probes)) == 1  # the host was asked, and answered 200 with a product page


async def test_profiles_that_differ_in_a_name_are_not_the_catch_all(farm: Farm) -> None:
    people = {
        "/team/ada": "Ada Lovelace",
        "/team/grace": "Grace Hopper",
        "/team/alan": "Alan Turing",
    }

    async def handler(request: web.Request) -> web.StreamResponse:
        name = people.get(request.path, "Unknown member")
        main = f"<h1>{name}</h1><p>{name} is a member of our engineering team.</p>"
        return web.Response(text=_page(main), content_type="text/html")

    farm.add(SHOP, "*", handler)
    claims = [f"{name} is a member of our engineering team" for name in people.values()]
    status = await _check(farm, [farm.url(SHOP, p) for p in people], claims)
    assert {s for s, _r in status.values()} == {CitationStatus.OK}, status


# --------------------------------------------------------------------------------------------
# Real catch-alls stay caught
# --------------------------------------------------------------------------------------------


async def test_a_catch_all_that_echoes_the_requested_path_is_caught(farm: Farm) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        slug = request.path.rstrip("/").rsplit("/", 1)[-1].replace("-", " ")
        main = (
            f"<p>You asked for {request.path}. Results for: {slug}. Browse our latest offers "
            "on widgets, gadgets and gizmos below.</p>"
        )
        return web.Response(text=_page(main), content_type="text/html")

    farm.add(SHOP, "*", handler)
    cited = [farm.url(SHOP, "/2024/annual-report"), farm.url(SHOP, "/press/new-ceo?lang=en")]
    status = await _check(farm, cited)
    assert {s for s, _r in status.values()} == {CitationStatus.SOFT_404}, status
    # the reason shows the evidence: the made-up URL the host was asked for
    (probe,) = {
        p
        for _m, h, p in farm.requests
        if h == SHOP and p not in ("/2024/annual-report", "/press/new-ceo")
    }
    assert all(f"(the same text as {farm.url(SHOP, probe)})" in r for _s, r in status.values())


async def test_a_catch_all_with_request_ids_and_timestamps_is_caught(farm: Farm) -> None:
    # the same page for any path, but each response carries its own id and time
    async def handler(request: web.Request) -> web.StreamResponse:
        stamp = datetime.now(UTC).isoformat()
        main = (
            "<p>Welcome to Example Shop. Browse our latest offers.</p>"
            f"<p>Request {uuid.uuid4()} · trace {uuid.uuid4().hex}{uuid.uuid4().hex[:8]} · "
            f"served {stamp} · build a1b2c3d4e5 · rendered in {time.perf_counter() % 1:.4f} s "
            f"({time.perf_counter() % 1 * 1000:.2f}ms)</p>"
        )
        return web.Response(text=_page(main), content_type="text/html")

    await _assert_caught(farm, handler)


async def test_a_catch_all_that_redirects_every_path_home_is_caught(farm: Farm) -> None:
    farm.add(SHOP, "/", body=_page("<p>Welcome to Example Shop. Browse our latest offers.</p>"))

    async def handler(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/")

    await _assert_caught(farm, handler)


async def _assert_caught(farm: Farm, catch_all: Any) -> None:
    farm.add(SHOP, "*", catch_all)
    cited = farm.url(SHOP, "/2024/annual-report")
    status = await _check(farm, [cited])
    assert status[cited][0] is CitationStatus.SOFT_404, status


async def test_a_real_page_beside_a_catch_all_on_its_host_stands(farm: Farm) -> None:
    # the host has one real page and a catch-all for everything else
    catch_all = _page("<p>Welcome to Example Shop. Browse our latest offers.</p>")
    farm.add(SHOP, "*", body=catch_all)
    real = farm.add(SHOP, "/widget-17", body=_page("<p>Widget 17 costs $4.20, in stock: 3.</p>"))
    made_up = farm.url(SHOP, "/widget-99")
    status = await _check(farm, [real, made_up], ["Widget 17 costs $4.20", "Widget 99 is cheap"])
    assert status[real][0] is CitationStatus.OK, status
    assert status[made_up][0] is CitationStatus.SOFT_404, status

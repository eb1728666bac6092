"""Bot walls served with 200 (issue 43, family 5): challenge interstitials (Cloudflare-style "Just a
moment…", reCAPTCHA / hCaptcha pages, "press and hold", "verify you are human", "enable JS and
disable any ad blocker") are ``bot_wall`` (unverifiable), as the 403 challenge is, in each
language the soft-404 rules cover; an article that mentions captchas or Cloudflare is judged on
what it says. The pages below are written for these tests in the shape of such interstitials.
Real Guard, real aiohttp farm on 127.0.0.1."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from conftest import Farm

from citeguard import CitationStatus, EntailmentPolicy, FetchPolicy, Guard, Outcome, Policy
from citeguard.web.botwall import bot_wall_reason
from citeguard.web.page import extract_page

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _challenge(lang: str, title: str, heading: str, note: str) -> str:
    """A JavaScript-challenge interstitial: a title, the host, what is happening, a noscript
    line, a ray id and the provider's footer; the challenge script does the rest."""
    return (
        f'<!DOCTYPE html><html lang="{lang}"><head><title>{title}</title>'
        '<meta name="robots" content="noindex,nofollow">'
        '<script src="/cdn-challenge/v1/orchestrate.js" async></script></head><body>'
        '<div class="main-wrapper" role="main"><div class="main-content">'
        '<h1 class="zone-name-title">www.example-times.com</h1>'
        f'<h2 id="challenge-running">{heading}</h2>'
        f"<noscript><div>{note}</div></noscript>"
        '<div id="challenge-body-text">www.example-times.com needs to review the security of '
        "your connection before proceeding.</div></div></div>"
        '<div class="footer"><div>Ray ID: <code>8c1f2a9b7d3e4f10</code></div>'
        "<div>Performance &amp; security by EdgeShield</div></div></body></html>"
    )


WALLS = {
    "js-en": _challenge(
        "en",
        "Just a moment...",
        "Verifying you are human. This may take a few seconds.",
        "Enable JavaScript and cookies to continue",
    ),
    "js-de": _challenge(
        "de",
        "Einen Moment bitte…",
        "Überprüfen, ob Sie ein Mensch sind. Dies kann einige Sekunden dauern.",
        "Aktivieren Sie JavaScript und Cookies, um fortzufahren",
    ),
    "js-fr": _challenge(
        "fr",
        "Un instant…",
        "Vérification que vous êtes un humain. Cela peut prendre quelques secondes.",
        "Activez JavaScript et les cookies pour continuer",
    ),
    "js-es": _challenge(
        "es",
        "Un momento…",
        "Verificando que usted es un ser humano. Esto puede tardar unos segundos.",
        "Habilita JavaScript y las cookies para continuar",
    ),
    "js-it": _challenge(
        "it",
        "Solo un momento…",
        "Verifica di essere un essere umano. Potrebbe richiedere qualche secondo.",
        "Abilita JavaScript e i cookie per continuare",
    ),
    "js-pt": _challenge(
        "pt",
        "Só um momento…",
        "Verificando se você é humano. Isso pode levar alguns segundos.",
        "Ative o JavaScript e os cookies para continuar",
    ),
    "js-nl": _challenge(
        "nl",
        "Een ogenblik…",
        "Verifiëren dat u een mens bent. Dit kan enkele seconden duren.",
        "Schakel JavaScript en cookies in om door te gaan",
    ),
    "recaptcha": (
        "<html><head><title>Example Times</title>"
        '<script src="/captcha/api.js" async defer></script></head><body><main>'
        "<h1>One more step</h1><p>Please complete the security check to access "
        "www.example-times.com</p>"
        '<form id="challenge-form" method="POST"><div class="g-recaptcha" '
        'data-sitekey="6Lc-example"></div><button type="submit">Continue</button></form>'
        "<p>Why do I have to complete a CAPTCHA? Completing the CAPTCHA proves you are a human "
        "and gives you temporary access to the web property.</p></main></body></html>"
    ),
    "hcaptcha": (
        '<html><head><title>Example Shop</title></head><body><div class="container">'
        "<h1>Please verify you are a human</h1>"
        '<div class="h-captcha" data-sitekey="10000000-ffff-ffff-ffff-000000000001"></div>'
        "<p>Reference 0a1b2c3d</p></div></body></html>"
    ),
    "press-and-hold": (
        "<html><head><title>Access to this page has been denied</title></head><body>"
        '<div class="px-captcha-container"><h1>Before we continue...</h1>'
        "<p>Press &amp; Hold to confirm you are a human (and not a bot).</p>"
        '<div id="px-captcha"></div><p>Reference ID 7f3c1e20-aa11-11ee-9c3b-0242ac120002</p>'
        "</div></body></html>"
    ),
    "press-and-hold-de": (
        "<html><head><title>Beispiel Zeitung</title></head><body><main>"
        "<p>Bitte bestätigen Sie, dass Sie ein Mensch sind.</p>"
        '<div id="px-captcha"><button>Gedrückt halten</button></div></main></body></html>'
    ),
    "ad-blocker": (
        "<html><head><title>example-times.com</title></head><body>"
        "<p>Please enable JS and disable any ad blocker</p>"
        '<script data-cfasync="false">var dd={"rt":"c","cid":"AHrlqAAAAAMA"}</script>'
        "</body></html>"
    ),
}

ARTICLE = (
    "<html><head><title>Why websites ask you to prove you are human | Tech Explained</title>"
    "</head><body><nav>Home · Security · Privacy</nav><article><h1>Why websites ask you to prove "
    "you are human</h1><p>Many publishers put a bot-mitigation service such as Cloudflare in "
    "front of their pages. When traffic looks automated, the service shows a short interstitial "
    "that says \u201cJust a moment\u201d while a script runs, or asks the visitor to solve a "
    "reCAPTCHA or hCaptcha puzzle. Some sites ask readers to press and hold a button, others to "
    "enable JavaScript and disable any ad blocker. Researchers at the university found that a "
    "typical captcha takes nine seconds to solve.</p></article></body></html>"
)
HOWTO = (
    "<html><head><title>Restart a frozen phone | Help</title></head><body><main>"
    "<h1>Restart a frozen phone</h1>"
    "<p>Press and hold the power button for ten seconds until the phone restarts.</p>"
    "</main></body></html>"
)


def _policy() -> Policy:
    fetch = FetchPolicy(
        allow_private_addresses=True, url_timeout=3.0, answer_deadline=10.0, retries=0
    )
    return Policy(fetch=fetch, entailment=EntailmentPolicy(backend="none"))


async def _statuses(farm: Farm, cited: dict[str, tuple[str, str]]) -> dict[str, tuple[Any, str]]:
    answer = "".join(f"{claim} [{i + 1}].\n" for i, (claim, _u) in enumerate(cited.values()))
    answer += "\n" + "".join(f"[{i + 1}] {u}\n" for i, (_c, u) in enumerate(cited.values()))
    async with Guard(_policy(), resolver=farm.resolver, now=lambda: NOW) as guard:
        verdict = await guard.check(answer, question="How long does a captcha take?")
    by_url = {c.url: (c.status, c.reason) for c in verdict.citations}
    return {name: by_url[url] for name, (_c, url) in cited.items()}


async def test_a_challenge_served_with_200_is_a_bot_wall(farm: Farm) -> None:
    cited = {
        name: (
            "A typical captcha takes nine seconds to solve",
            farm.add("www.example-times.com", f"/story/{name}", body=body),
        )
        for name, body in WALLS.items()
    }
    got = await _statuses(farm, cited)
    assert {n: s for n, (s, _r) in got.items()} == dict.fromkeys(WALLS, CitationStatus.BOT_WALL), (
        got
    )
    assert CitationStatus.BOT_WALL.outcome is Outcome.UNVERIFIABLE
    assert all("bot-mitigation challenge" in r for _s, r in got.values())
    # a challenge needs no catch-all probe: it is judged by what it is
    assert not [p for _m, _h, p in farm.requests if "citeguard-probe" in p]


async def test_an_article_about_captchas_is_judged_on_what_it_says(farm: Farm) -> None:
    cited = {
        "article": (
            "A typical captcha takes nine seconds to solve",
            farm.add("news.example.com", "/captchas", body=ARTICLE),
        ),
        "howto": (
            "Press and hold the power button for ten seconds until the phone restarts",
            farm.add("docs.example.net", "/restart", body=HOWTO),
        ),
        "challenge-403": (
            "A typical captcha takes nine seconds to solve",
            farm.add("a.example.com", "/walled", status=403, headers={"cf-mitigated": "challenge"}),
        ),
    }
    got = await _statuses(farm, cited)
    assert {n: s for n, (s, _r) in got.items()} == {
        "article": CitationStatus.OK,
        "howto": CitationStatus.OK,
        "challenge-403": CitationStatus.BOT_WALL,
    }, got


@pytest.mark.parametrize("name", sorted(WALLS))
def test_each_challenge_page_is_read_as_one(name: str) -> None:
    page = extract_page(WALLS[name], url=f"http://www.example-times.com/{name}")
    assert bot_wall_reason(page) is not None


@pytest.mark.parametrize("body", [ARTICLE, HOWTO])
def test_prose_about_challenges_is_not_one(body: str) -> None:
    assert bot_wall_reason(extract_page(body, url="http://news.example.com/a")) is None

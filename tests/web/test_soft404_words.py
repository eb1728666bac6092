"""Soft 404 by a word (issue 43, family 6): a short page that merely mentions "404" or "not
found" in its title or opening (a highway number, a height, a missing person, an article on the
status code) is not a soft 404; a page that presents itself as missing (its title, its heading or
its opening sentence is the message) still is, in every language the rules cover. Real Guard,
real aiohttp farm on 127.0.0.1."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from conftest import Farm

from citeguard import CitationStatus, EntailmentPolicy, FetchPolicy, Guard, Policy

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _html(title: str, main: str) -> str:
    return (
        f"<html><head><title>{title}</title></head><body><nav>Home · News · Sport · Contact"
        f"</nav><main>{main}</main><footer>© Example Media</footer></body></html>"
    )


# short pages whose title or opening mentions the words in ordinary prose
MENTIONS = {
    "route": _html(
        "Route 404 reopens after flood repairs | County News",
        "<h1>Route 404 reopens after flood repairs</h1><p>Route 404 reopened on Monday after "
        "three weeks of repairs to the bridge at Millford.</p>",
    ),
    "height": _html(
        "Skyline Tower | City Towers",
        "<h1>Skyline Tower</h1><p>404 metres: the Skyline Tower is 404 metres tall and opened "
        "in 2019.</p>",
    ),
    "height-symbol": _html(
        "404 m: the new tower", "<h1>Skyline Tower</h1><p>The tower stands 404 m tall.</p>"
    ),
    "hiker": _html(
        "Not found until Tuesday: the lost hiker's story",
        "<h1>Missing hiker found safe</h1><p>Not found until Tuesday, the hiker had sheltered "
        "in a barn near the ridge.</p>",
    ),
    "status-code": _html(
        "HTTP 404: what the status code means",
        "<h1>What does HTTP 404 mean?</h1><p>404 Not Found is the status a server sends when it "
        "has nothing at the address asked for. It is a client error.</p>",
    ),
    "table": _html(
        "Tall towers",
        "<h1>Tall towers</h1><table><tr><td>Skyline Tower</td></tr><tr><td>404</td></tr></table>",
    ),
}

# real "not found" pages, in each language the rules cover
NOT_FOUND = {
    "en-title": _html("Page not found | Example News", "<h1>Sorry</h1><p>Try the search.</p>"),
    "en-heading": _html("Example News", "<h1>Oops! We can't find that page.</h1><p>Home</p>"),
    "en-sentence": _html(
        "Example News",
        "<p>Sorry, the page you requested could not be found. Try the search box.</p>",
    ),
    "en-code": _html("Example News", "<h1>Error 404</h1><p>Back to the homepage.</p>"),
    "de": _html("Seite nicht gefunden – Beispiel", "<p>Zur Startseite</p>"),
    "de-heading": _html("Beispiel", "<h1>Die angeforderte Seite existiert nicht.</h1>"),
    "fr": _html("Exemple", "<h1>La page que vous recherchez n'existe pas</h1><p>Accueil</p>"),
    "es": _html("Página no encontrada | Ejemplo", "<p>Volver al inicio</p>"),
    "it": _html("Esempio", "<h1>Pagina non trovata</h1><p>Torna alla home</p>"),
    "pt": _html("Exemplo", "<h1>Página não encontrada</h1><p>Voltar</p>"),
    "nl": _html("Voorbeeld", "<h1>Pagina niet gevonden</h1><p>Terug</p>"),
}


# what each mention page says, as a claim citing it
CLAIMS = {
    "route": "Route 404 reopened on Monday after three weeks of repairs",
    "height": "The Skyline Tower is 404 metres tall and opened in 2019",
    "height-symbol": "The tower stands 404 m tall",
    "hiker": "Not found until Tuesday, the hiker had sheltered in a barn near the ridge",
    "status-code": "404 Not Found is the status a server sends when it has nothing at the address",
    "table": "Skyline Tower is one of the tall towers",
}


async def _statuses(
    farm: Farm, pages: dict[str, str], claims: dict[str, str] | None = None
) -> dict[str, tuple[CitationStatus, str]]:
    urls = {
        name: farm.add("news.example.com", f"/{name}", body=body) for name, body in pages.items()
    }
    said = [(claims or {}).get(name, f"Claim number {i} holds") for i, name in enumerate(urls)]
    answer = "".join(f"{c} [{i + 1}].\n" for i, c in enumerate(said))
    answer += "\n" + "".join(f"[{i + 1}] {u}\n" for i, u in enumerate(urls.values()))
    fetch = FetchPolicy(
        allow_private_addresses=True, url_timeout=3.0, answer_deadline=10.0, retries=0
    )
    policy = Policy(fetch=fetch, entailment=EntailmentPolicy(backend="none"))
    async with Guard(policy, resolver=farm.resolver, now=lambda: NOW) as guard:
        verdict = await guard.check(answer, question="What happened?")
    by_url = {c.url: (c.status, c.reason) for c in verdict.citations}
    return {name: by_url[url] for name, url in urls.items()}


async def test_a_short_page_that_mentions_404_or_not_found_is_not_a_soft_404(farm: Farm) -> None:
    got = await _statuses(farm, MENTIONS, CLAIMS)
    assert {name: s for name, (s, _r) in got.items() if s is CitationStatus.SOFT_404} == {}, got
    # each page is judged on what it says: the claims it backs pass
    assert {name: s for name, (s, _r) in got.items()} == dict.fromkeys(
        MENTIONS, CitationStatus.OK
    ), got


async def test_a_page_that_presents_itself_as_missing_is_still_a_soft_404(farm: Farm) -> None:
    got = await _statuses(farm, NOT_FOUND)
    assert {name: s for name, (s, _r) in got.items()} == dict.fromkeys(
        NOT_FOUND, CitationStatus.SOFT_404
    ), got
    # the reason quotes the label that says so
    assert "Seite nicht gefunden" in got["de"][1]
    assert "Pagina non trovata" in got["it"][1]


@pytest.mark.parametrize("name", sorted(MENTIONS))
def test_the_text_rule_alone_leaves_a_mention_alone(name: str) -> None:
    from citeguard.web.page import extract_page
    from citeguard.web.soft404 import soft_404_reason

    page = extract_page(MENTIONS[name], url=f"http://news.example.com/{name}")
    assert soft_404_reason(page) is None

"""Bot walls: a site that answers a robot with a challenge instead of the page.

Two signs, one room:

* the response itself (:func:`bot_wall_response`): HTTP 999, or a 403 / 429 / 503 that carries a
  bot-mitigation header (Cloudflare's ``cf-mitigated``, AWS WAF's ``x-amzn-waf-action``);
* the page (:func:`bot_wall_reason`): a challenge interstitial served with 200 — Cloudflare's
  "Just a moment…", reCAPTCHA / hCaptcha pages, "press and hold", "verify you are human",
  "enable JavaScript and disable any ad blocker" — in each language the soft-404 rules cover
  (English, German, French, Spanish, Italian, Portuguese, Dutch).

Either way the citation is ``bot_wall`` (unverifiable): the page was never seen, so it is
neither judged on the challenge's words nor called missing.

A page is a challenge only when it is short (the interstitial is a few lines) and one of its
own labels *is* the challenge: a part of its title, or a line of its text that begins with the
challenge's words. An article that mentions captchas or Cloudflare in its prose is not one.
Everything read is bounded: linear in a few thousand characters at most.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from citeguard.models import Page
from citeguard.text import title_parts

__all__ = ["MAX_BOT_WALL_CHARS", "bot_wall_reason", "bot_wall_response"]

# Headers that bot-mitigation services put on their challenge pages.
_BOT_WALL_HEADERS: tuple[tuple[str, str | None], ...] = (
    ("cf-mitigated", None),  # Cloudflare managed challenge
    ("x-amzn-waf-action", "captcha"),  # AWS WAF CAPTCHA / challenge
    ("x-amzn-waf-action", "challenge"),
)


def bot_wall_response(code: int, headers: Mapping[str, str]) -> str | None:
    """Why a response with status ``code`` and ``headers`` is a bot wall, or ``None``."""
    if code == 999:
        return "HTTP 999: the site refuses automated clients (bot wall)"
    if code in (403, 429, 503):
        for name, value in _BOT_WALL_HEADERS:
            got = headers.get(name)
            if got is not None and (value is None or got.strip().lower() == value):
                return f"HTTP {code} with {name}: {got}: a bot-mitigation challenge"
    return None


# a challenge interstitial is a few lines; an article is not
MAX_BOT_WALL_CHARS = 1_500
_TITLE_CHARS = 200
_LINES = 40
_LINE_CHARS = 300

# Titles a challenge page carries, read whole (after the site-name separators are cut off):
# Cloudflare's "Just a moment..." in each language it ships, and the generic captcha titles.
_TITLE_RE = re.compile(
    r"(?:"
    r"just\s+a\s+moment|one\s+moment,?\s+please|please\s+wait|one\s+more\s+step"
    r"|attention\s+required!?|security\s+check|human\s+verification|are\s+you\s+(?:a\s+)?"
    r"(?:robot|human)\??|robot\s+or\s+human\??|verify(?:ing)?\s+(?:that\s+)?you\s+are\s+"
    r"(?:a\s+)?human|pardon\s+our\s+interruption|access\s+to\s+this\s+page\s+has\s+been\s+denied"
    r"|captcha|recaptcha|hcaptcha|ddos-guard|checking\s+your\s+browser"
    # German, French, Spanish, Italian, Portuguese, Dutch
    r"|einen\s+moment(?:\s+bitte)?|nur\s+einen\s+moment|sicherheits(?:überprüfung|abfrage|check)"
    r"|un\s+instant|juste\s+un\s+instant|v[ée]rification\s+de\s+s[ée]curit[ée]"
    r"|un\s+momento|solo\s+un\s+momento|comprobaci[óo]n\s+de\s+seguridad|verificaci[óo]n\s+de"
    r"\s+seguridad|controllo\s+di\s+sicurezza|s[óo]\s+um\s+momento|um\s+momento"
    r"|verifica[çc][ãa]o\s+de\s+seguran[çc]a|een\s+ogenblik(?:\s+geduld)?|even\s+geduld"
    r"|beveiligingscontrole"
    r")[.!…\s]*",
    re.IGNORECASE,
)

# What a challenge page says, at the start of one of its lines (an optional host name first:
# "example.com needs to review the security of your connection before proceeding").
_CHALLENGE_RE = re.compile(
    r"(?:(?:[\w-]+\.)+[a-z]{2,}\s+)?(?:"
    # English
    r"checking\s+(?:if\s+the\s+site\s+connection\s+is\s+secure|your\s+browser\s+before\s+accessing)"
    r"|needs\s+to\s+review\s+the\s+security\s+of\s+your\s+connection"
    r"|verify(?:ing)?\s+(?:that\s+)?you\s+are\s+(?:a\s+)?human"
    r"|please\s+(?:verify|confirm)\s+(?:that\s+)?you\s+are\s+(?:a\s+)?human"
    r"|(?:please\s+)?(?:confirm|prove)\s+(?:that\s+)?you(?:['’]re|\s+are)\s+not\s+a\s+robot"
    r"|(?:sorry,\s+)?we\s+just\s+need\s+to\s+make\s+sure\s+you(?:['’]re|\s+are)\s+not\s+a\s+robot"
    r"|press\s*(?:&|and)\s*hold\s+to\s+confirm\s+you\s+are\s+(?:a\s+)?human"
    r"|enable\s+javascript\s+and\s+cookies\s+to\s+continue"
    r"|please\s+enable\s+(?:js|javascript)\s+and\s+disable\s+any\s+ad\s*blocker"
    r"|(?:please\s+)?complete\s+the\s+(?:security\s+check|captcha)"
    r"|our\s+systems\s+have\s+detected\s+unusual\s+traffic"
    r"|why\s+do\s+i\s+have\s+to\s+complete\s+a\s+captcha"
    # German
    r"|(?:bitte\s+)?best[äa]tigen\s+sie,?\s+dass\s+sie\s+(?:ein\s+)?mensch\s+sind"
    r"|(?:es\s+wird\s+)?[üu]berpr[üu]f(?:t|en),?\s+ob\s+sie\s+(?:ein\s+)?mensch\s+sind"
    r"|aktivieren\s+sie\s+javascript\s+und\s+cookies"
    # French
    r"|v[ée]rifi(?:ez|ons|cation)\s+(?:que\s+)?(?:vous\s+[êe]tes|d['’][êe]tre)\s+(?:un\s+)?humain"
    r"|activez\s+javascript\s+et\s+les\s+cookies"
    # Spanish
    r"|verific(?:a|ando|amos)\s+(?:que\s+)?(?:eres|es|usted\s+es)\s+(?:un\s+)?(?:ser\s+)?humano"
    r"|habilita\s+javascript\s+y\s+las\s+cookies"
    # Italian
    r"|verific(?:a|hiamo)\s+(?:di\s+essere|che\s+tu\s+sia)\s+(?:un\s+)?(?:essere\s+)?umano"
    r"|abilita\s+javascript\s+e\s+i\s+cookie"
    # Portuguese
    r"|verific(?:ando|ar|amos)\s+se\s+voc[êe]\s+[ée]\s+(?:um\s+)?humano"
    r"|ative\s+o\s+javascript\s+e\s+os\s+cookies"
    # Dutch
    r"|(?:bevestig|verifi[ëe]ren)\s+(?:dat\s+)?(?:u|je)\s+een\s+mens\s+(?:bent|is)"
    r"|schakel\s+javascript\s+en\s+cookies\s+in"
    r")",
    re.IGNORECASE,
)
# A challenge's button, alone on its line ("Press & Hold"): a how-to's "Press and hold the power
# button" goes on, this does not.
_BUTTON_RE = re.compile(
    r"press\s*(?:&|and)\s*hold|gedr[üu]ckt\s+halten|dr[üu]cken\s+und\s+halten"
    r"|appuyez\s+et\s+maintenez|maintenir\s+appuy[ée]|mant[ée]n\s+pulsado|mantener\s+pulsado"
    r"|tieni\s+premuto|pressione\s+e\s+segure|mantenha\s+pressionado|ingedrukt\s+houden"
    r"|houd\s+ingedrukt",
    re.IGNORECASE,
)


def bot_wall_reason(page: Page) -> str | None:
    """Why ``page`` (served with 200) is a bot-mitigation challenge, or ``None``: a short page
    whose title is a challenge title or one of whose lines begins with a challenge's words."""
    text = page.text or ""
    if len(text) > MAX_BOT_WALL_CHARS or len(page.main_text or "") > MAX_BOT_WALL_CHARS:
        return None
    title = (page.title or "")[:_TITLE_CHARS].strip()
    for part in title_parts(title):
        if _TITLE_RE.fullmatch(part):
            return f"the page answers 200 with a bot-mitigation challenge (title {title!r})"
    for n, line in enumerate(text.splitlines()):
        if n >= _LINES:
            break
        line = line.strip()[:_LINE_CHARS]
        if _CHALLENGE_RE.match(line) or _BUTTON_RE.fullmatch(line.rstrip(".!…")):
            return f"the page answers 200 with a bot-mitigation challenge ({line!r})"
    return None

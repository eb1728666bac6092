"""Soft 404s: pages served with 200 that say they do not exist.

A site that answers every unknown path with a friendly "page not found" and HTTP 200 makes a
fabricated URL look alive. A page is a soft 404 when it presents itself as missing: a part of
its title, its heading (the first line of its main text) or one of its opening sentences *is*
the message in one of the common phrasings (English, German, French, Spanish, Italian,
Portuguese, Dutch), read whole, and the page is short. A page that merely mentions the words
("Route 404", "a 404-metre tower", "not found until Tuesday", "What is a 404 error?") is not
one, nor is a long article *about* 404 errors. The read is bounded, so the check is linear in
nothing but a few hundred characters.

Pages that say nothing of the kind can still be the host's catch-all: like lychee, the guard
asks the host for a path that cannot exist (:func:`probe_urls`) and a short cited page that
*is* what comes back (:func:`same_as_probe`) is a soft 404 too: the same text chunk for chunk,
except for volatile chunks (request ids, timestamps), punctuation, and where each page echoes the
path it was asked for. Templated pages of one host that differ only in their facts (a price, a
count, a name) look alike but are not the catch-all.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from rapidfuzz.distance import Indel

from citeguard.models import Page
from citeguard.text import title_parts
from citeguard.web.botwall import bot_wall_reason

# a real "not found" page is short; an article discussing such pages is not
MAX_SOFT_404_CHARS = 2_000
_OPENING_CHARS = 300
_TITLE_CHARS = 300
_OPENING_SENTENCES = 4

# A page presents itself as missing when one of its own labels *is* the message: a part of its
# title (between the site-name separators), its heading (the first line of its main text), or
# one of its opening sentences, read whole. "Route 404 reopens", "a 404-metre tower", "not
# found until Tuesday" and "What is a 404 error?" mention the words; they are not the message.
_SORRY = (
    r"(?:oops|whoops|sorry|uh[- ]?oh|oh\s+no|ouch|hmm+|ups|oups|hoppla|oeps|helaas|leider"
    r"|entschuldigung|d[ée]sol[ée]e?|lo\s+sentimos|vaya|ops|opa|desculpe|spiacenti"
    r"|ci\s+dispiace)"
)
_CODE = r"(?:(?:http\s+)?(?:error|erreur|fehler|fout|errore|erro|code)\s*[:#]?\s*)?404(?:\s+error)?"
_PAGE = (
    r"(?:(?:the|this|that|requested|your)\s+)*(?:page|file|article|post|content|resource|document"
    r"|url|link|story)"
)
_ASKED = (
    r"(?:\s+(?:you(?:['’]re|\s+are|\s+were)?\s+(?:looking\s+for|trying\s+to\s+(?:reach|access)"
    r"|requested|tried\s+to\s+(?:reach|access))|(?:you\s+)?requested))?"
)
_MISSING = (
    r"(?:does\s*n['’o]t|does\s+not|can\s*not\s+be|can['’]t\s+be|could\s*n['’o]t\s+be"
    r"|could\s+not\s+be|was\s+not|wasn['’]t|is\s+no\s+longer|is\s+not|isn['’]t|has\s+been"
    r"|may\s+have\s+been|might\s+have\s+been)\s+(?:exist|found|be\s+found|available|removed"
    r"|moved|deleted)(?:\s+or\s+(?:has\s+been\s+|was\s+|been\s+)?(?:moved|removed|deleted"
    r"|renamed|(?:is\s+)?temporarily\s+unavailable))?(?:\s+(?:anymore|any\s+longer))?"
)
_MESSAGE = (
    r"(?:"
    # English
    r"(?:(?:page|file|article|post|content|resource|document)\s+)?not\s+found|nothing\s+(?:was\s+)?found"
    rf"|{_PAGE}{_ASKED}\s+{_MISSING}"
    r"|we\s+(?:can['’]t|can\s*not|could\s*n['’o]t|could\s+not)\s+find\s+(?:the\s+|that\s+|this\s+)?"
    r"(?:page|file|content|article)(?:\s+you(?:['’]re|\s+are)\s+looking\s+for|\s+you\s+requested)?"
    rf"|{_PAGE}\s+(?:is\s+)?(?:no\s+longer\s+available|unavailable|missing)"
    # German
    r"|(?:die\s+)?(?:(?:angeforderte|gesuchte|aufgerufene)\s+)?(?:seite|datei)\s+"
    r"(?:(?:wurde|konnte)\s+)?(?:leider\s+)?(?:nicht\s+gefunden(?:\s+werden)?|existiert\s+nicht"
    r"(?:\s+mehr)?|ist\s+nicht\s+(?:mehr\s+)?verf[üu]gbar)|nicht\s+gefunden"
    # French
    r"|(?:la\s+)?page\s+(?:que\s+vous\s+(?:recherchez|cherchez|avez\s+demand[ée]e)\s+)?"
    r"(?:introuvable|non\s+trouv[ée]e|n['’]existe\s+(?:pas|plus)|est\s+introuvable"
    r"|n['’]a\s+pas\s+[ée]t[ée]\s+trouv[ée]e)|introuvable"
    # Spanish
    r"|(?:la\s+)?p[áa]gina\s+(?:que\s+(?:buscas|busca|est[áa]s\s+buscando|solicitaste)\s+)?"
    r"(?:no\s+encontrada|no\s+existe|no\s+(?:se\s+)?(?:ha\s+)?(?:podido\s+)?(?:encontrar|encontrada))"
    r"|no\s+encontrad[oa]"
    # Italian
    r"|(?:la\s+)?pagina\s+(?:che\s+(?:stai\s+cercando|cerchi|hai\s+richiesto)\s+)?"
    r"non\s+(?:trovata|esiste|(?:[èe]\s+stata\s+)?trovata)|non\s+trovat[oa]"
    # Portuguese
    r"|(?:a\s+)?p[áa]gina\s+(?:que\s+(?:voc[êe]\s+)?(?:procura|est[áa]\s+procurando|procurava)\s+)?"
    r"n[ãa]o\s+(?:encontrada|existe|foi\s+encontrada)|n[ãa]o\s+encontrad[oa]"
    # Dutch
    r"|(?:de\s+)?pagina\s+(?:die\s+(?:je|u)\s+zoekt\s+)?(?:niet\s+gevonden|bestaat\s+niet"
    r"|is\s+niet\s+gevonden|kon\s+niet\s+(?:worden\s+)?gevonden(?:\s+worden)?)|niet\s+gevonden"
    r")"
)
# the whole label: an apology, the status code, the message, in any order of those
_NOT_FOUND_RE = re.compile(
    rf"(?:{_SORRY}\W*)*(?:(?:{_CODE})\W*)?(?:{_MESSAGE})?\W*(?:(?:{_CODE})\W*)?",
    re.IGNORECASE,
)
_HAS_CODE_RE = re.compile(_CODE, re.IGNORECASE)
_HAS_MESSAGE_RE = re.compile(_MESSAGE, re.IGNORECASE)
_SENTENCE_RE = re.compile(r"[^.!?\n]+[.!?]*")


def _is_message(label: str, *, code_alone: bool = True) -> bool:
    """Whether ``label`` (a title part, a heading, a sentence) is the not-found message whole;
    a bare "404" counts only where ``code_alone`` (a title or a heading, not a table cell)."""
    label = label.strip()
    if not label or len(label) > 160 or _NOT_FOUND_RE.fullmatch(label) is None:
        return False
    if _HAS_MESSAGE_RE.search(label) is not None:
        return True
    return code_alone and _HAS_CODE_RE.search(label) is not None


def soft_404_reason(page: Page) -> str | None:
    """Why ``page`` is a soft 404, or ``None`` when it is not: a short page whose title, heading
    or an opening sentence is the not-found message (not one that merely mentions "404")."""
    body = page.main_text if page.main_text else page.text
    if len(body) > MAX_SOFT_404_CHARS:
        return None
    title = (page.title or "")[:_TITLE_CHARS]
    for part in title_parts(title):
        if _is_message(part):
            return f"the page answers 200 but its title says {title.strip()!r}"
    opening = body[:_OPENING_CHARS]
    heading, _, _rest = opening.partition("\n")
    if _is_message(heading):
        return f"the page answers 200 but its heading says {heading.strip()!r}"
    for n, m in enumerate(_SENTENCE_RE.finditer(opening)):
        if n >= _OPENING_SENTENCES:
            break
        if _is_message(m.group(0), code_alone=False):
            return f"the page answers 200 but its text says {m.group(0).strip()!r}"
    return None


_INLINE_PAGES = 64  # pages a check looks at on the loop; more go to a thread

# what of the probe's page is compared: a cited page is short, a longer probe is not its page
_COMPARE_CHARS = 4_000
# words and the punctuation between them; a chunk holds its inner separators ("4.20", "a-b")
_CHUNK_RE = re.compile(r"\w+(?:[-.:]\w+)*|[^\w\s]")
_UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_CLOCK_RE = re.compile(
    r"(?:\d{4}-\d{2}-\d{2}[T_]?)?\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?:z|[+-]\d{2}:?\d{2})?", re.I
)
_HEX_RE = re.compile(r"[0-9a-f]{16,}", re.I)
_DIGITS_RE = re.compile(r"\d{10,}")
# render times ("generated in 0.0123 s", "0.45ms"); prices and measures have fewer decimals
_TIMING_RE = re.compile(r"\d+\.\d{3,}(?:m?s)?|\d+\.\d+m?s")
_ID_RE = re.compile(r"[a-z0-9_-]{8,}", re.I)
_WORD_SEP_RE = re.compile(r"[-.:_]+")


def _volatile(chunk: str) -> bool:
    """A chunk that changes from one request to the next on the same page: request ids,
    digests, clock times, timestamps, render times. Facts (prices, counts, names, dates) are
    not."""
    if _UUID_RE.fullmatch(chunk) or _CLOCK_RE.fullmatch(chunk) or _HEX_RE.fullmatch(chunk):
        return True
    if _DIGITS_RE.fullmatch(chunk) or _TIMING_RE.fullmatch(chunk):
        return True  # epoch seconds and milliseconds, long counters, render times
    if _ID_RE.fullmatch(chunk) is None:
        return False
    # a generated id mixes letters and digits ("a1b2c3d4", "01HFX3K9Z"); words and codes with
    # one number in them ("covid-19", "state-of-the-art-2024") switch between them rarely
    kinds = [c.isdigit() for c in chunk if c.isalnum()]
    return sum(a != b for a, b in itertools.pairwise(kinds)) >= 3


def _chunks(text: str) -> list[str]:
    return _CHUNK_RE.findall(text.lower())


def _echo(*urls: str) -> frozenset[str]:
    """The chunks of the URLs' paths and queries, and their words: what a page that echoes the
    address it was asked for may show of it."""
    out: set[str] = set()
    for url in urls:
        parts = urlsplit(url)
        raw = unquote_plus(f"{parts.path} {parts.query}".replace("/", " / "))
        for chunk in _chunks(raw):
            out.add(chunk)
            out.update(_WORD_SEP_RE.split(chunk))
    out.discard("")
    return frozenset(out)


def _neutral(chunk: str) -> bool:
    return (len(chunk) == 1 and not chunk.isalnum()) or _volatile(chunk)


def _is_probe_page(
    a: list[str], b: list[str], page_urls: tuple[str, ...], probe_urls: tuple[str, ...]
) -> bool:
    """Whether the chunks ``a`` of a page are the chunks ``b`` of the probe's page (what the
    host served for a made-up path): equal chunk for chunk, except where they differ only in
    volatile chunks (request ids, timestamps), punctuation, or the address each was asked for
    (``page_urls``, ``probe_urls``). A page that differs in one fact (a number, a name) is
    another page, however alike."""
    if not a or not b:
        return False
    echo: frozenset[str] | None = None
    probe_echo: frozenset[str] | None = None
    gaps: list[tuple[list[str], list[str]]] = []  # what lies between the equal runs
    i = j = 0
    for op in Indel.opcodes(a, b):
        if op.tag == "equal":
            gaps.append((a[i : op.src_start], b[j : op.dest_start]))
            i, j = op.src_end, op.dest_end
    gaps.append((a[i:], b[j:]))
    for x, y in gaps:
        page_left = [c for c in x if not _neutral(c)]
        probe_left = [c for c in y if not _neutral(c)]
        if page_left:
            echo = _echo(*page_urls) if echo is None else echo
            if not echo.issuperset(page_left):
                return False
        if probe_left:
            probe_echo = _echo(*probe_urls) if probe_echo is None else probe_echo
            if not probe_echo.issuperset(probe_left):
                return False
    return True


def _short(page: Page) -> bool:
    return len(page.main_text or page.text) <= MAX_SOFT_404_CHARS


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def probe_url(origin: str) -> str:
    """The made-up URL asked of ``origin``: a digest of the origin, so a recorded run asks for
    the same probe on replay."""
    digest = hashlib.sha256(origin.encode()).hexdigest()[:20]
    return f"{origin}/citeguard-probe-{digest}"


def probe_urls(pages: Mapping[str, Page]) -> dict[str, str]:
    """One made-up URL per origin of the short pages in ``pages`` (URL → page): origin → probe."""
    out: dict[str, str] = {}
    for url, page in pages.items():
        # a page that says it is missing, or a challenge page, needs no probe to be judged
        if not _short(page) or soft_404_reason(page) is not None or bot_wall_reason(page):
            continue
        origin = _origin(url)
        if origin not in out:
            out[origin] = probe_url(origin)
    return out


def same_as_probe(pages: Mapping[str, Page], probes: Mapping[str, Page]) -> dict[str, str]:
    """The short pages of ``pages`` that *are* what their origin serves for a made-up path
    (``probes``: origin → the probe's page, for probes answered with 200): URL → reason. Alike
    is not enough: templated pages of one host that differ in their facts are each their own."""
    out: dict[str, str] = {}
    probe_chunks: dict[str, list[str]] = {}
    for url, page in pages.items():
        origin = _origin(url)
        probe = probes.get(origin)
        if probe is None or not _short(page):
            continue
        if origin not in probe_chunks:
            probe_chunks[origin] = _chunks((probe.main_text or probe.text)[:_COMPARE_CHARS])
        page_chunks = _chunks(page.main_text or page.text)
        asked = (probe_url(origin), probe.url)
        if _is_probe_page(page_chunks, probe_chunks[origin], (url, page.url), asked):
            out[url] = (
                "the page answers 200 with what its host serves for any made-up path "
                f"(the same text as {asked[0]}): a catch-all page, not the cited one"
            )
    return out


class CatchAllProbes:
    """The catch-all probes of one check, each started the moment a short page is extracted,
    so a probe overlaps the fetches still in flight instead of following the slowest one.

    ``probe(url)`` fetches and extracts one made-up URL (``None``: no 200 page came back)."""

    def __init__(self, probe: Callable[[str], Awaitable[Page | None]]) -> None:
        self._probe = probe
        self._tasks: dict[str, asyncio.Task[Page | None]] = {}

    def page_extracted(self, url: str, page: Page | None) -> None:
        """Start the probe of ``url``'s origin if ``page`` is short (once per origin)."""
        if page is None:
            return
        for origin, probe_url in probe_urls({url: page}).items():
            if origin not in self._tasks:
                self._tasks[origin] = asyncio.ensure_future(self._probe(probe_url))

    def watch(self, url: str, job: asyncio.Future[Any]) -> None:
        """Start ``url``'s probe when ``job`` (its extraction, an ``ExtractedPage | None``)
        ends with a short page."""

        def done(job: asyncio.Future[Any]) -> None:
            if not job.cancelled() and job.exception() is None and job.result() is not None:
                self.page_extracted(url, job.result().page)

        job.add_done_callback(done)

    async def matches(self, pages: Mapping[str, Page]) -> dict[str, str]:
        """The pages that are their host's catch-all (URL → reason), once every probe is in;
        pages that arrived without a probe get theirs now."""
        # each page's look (its opening read for "not found", its text cut into chunks) is
        # ~30 us: a thousand pages held the loop for ~30 ms, so many go to a thread
        many = len(pages) > _INLINE_PAGES
        wanted = await asyncio.to_thread(probe_urls, pages) if many else probe_urls(pages)
        for origin, url in wanted.items():
            if origin not in self._tasks:
                self._tasks[origin] = asyncio.ensure_future(self._probe(url))
        if not self._tasks:
            return {}
        origins = list(self._tasks)
        answered = await asyncio.gather(*(self._tasks[o] for o in origins))
        probes = {o: p for o, p in zip(origins, answered, strict=True) if p is not None}
        if many:
            return await asyncio.to_thread(same_as_probe, pages, probes)
        return same_as_probe(pages, probes)

    def cancel(self) -> None:
        """Stop the probes still running."""
        for task in self._tasks.values():
            task.cancel()


__all__ = [
    "MAX_SOFT_404_CHARS",
    "CatchAllProbes",
    "probe_url",
    "probe_urls",
    "same_as_probe",
    "soft_404_reason",
]

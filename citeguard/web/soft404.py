"""Soft 404s: pages served with 200 that say they do not exist.

A site that answers every unknown path with a friendly "page not found" and HTTP 200 makes a
fabricated URL look alive. A page is a soft 404 when its title, or the opening of its main text,
says so in one of the common phrasings (English, German, French, Spanish, Italian, Portuguese,
Dutch), and the page is short: an article *about* 404 errors has a long body and is not one.
The opening read is bounded, so the check is linear in nothing but a few hundred characters.

Pages that say nothing of the kind can still be the host's catch-all: like lychee, the guard
asks the host for a path that cannot exist (:func:`probe_urls`) and a short cited page that
matches what comes back (:func:`same_as_probe`) is a soft 404 too.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from rapidfuzz import fuzz

from citeguard.models import Page

# a real "not found" page is short; an article discussing such pages is not
MAX_SOFT_404_CHARS = 2_000
_OPENING_CHARS = 300

_NOT_FOUND_RE = re.compile(
    r"\b(?:"
    r"(?:error\s*)?404\b|page\s+not\s+found|not\s+found|file\s+not\s+found"
    r"|(?:page|article|content|resource|post)\s+(?:you\s+(?:are\s+looking\s+for|requested)\s+)?"
    r"(?:does\s*n[o']t|does\s+not|doesn['’]t|cannot\s+be|can['’]t\s+be|could\s+not\s+be"
    r"|couldn['’]t\s+be|was\s+not|wasn['’]t|is\s+no\s+longer)\s+(?:exist|found|be\s+found|available)"
    r"|we\s+(?:can['’]t|cannot|could\s*n['’o]t)\s+find\s+(?:th(?:at|is|e)\s+)?page"
    r"|nothing\s+(?:was\s+)?found|no\s+longer\s+available"
    r"|seite\s+(?:wurde\s+)?nicht\s+gefunden|page\s+introuvable|page\s+non\s+trouv[ée]e"
    r"|p[áa]gina\s+no\s+encontrada|p[áa]gina\s+n[ãa]o\s+encontrada|pagina\s+non\s+trovata"
    r"|pagina\s+niet\s+gevonden"
    r")",
    re.IGNORECASE,
)


def soft_404_reason(page: Page) -> str | None:
    """Why ``page`` is a soft 404, or ``None`` when it is not."""
    body = page.main_text if page.main_text else page.text
    if len(body) > MAX_SOFT_404_CHARS:
        return None
    title = (page.title or "")[:_OPENING_CHARS]
    hit = _NOT_FOUND_RE.search(title)
    where = "title"
    if hit is None:
        hit = _NOT_FOUND_RE.search(body[:_OPENING_CHARS])
        where = "text"
    if hit is None:
        return None
    return f"the page answers 200 but its {where} says {hit.group(0).strip()!r}"


# a cited page this similar (0..100, over its first characters) to the probe is the catch-all
_SAME_PAGE = 95.0
_COMPARE_CHARS = 2_000


def _short(page: Page) -> bool:
    return len(page.main_text or page.text) <= MAX_SOFT_404_CHARS


def probe_urls(pages: Mapping[str, Page]) -> dict[str, str]:
    """One made-up URL per origin of the short pages in ``pages`` (URL → page): origin → probe.

    The path is a digest of the origin, so a recorded run asks for the same probe on replay."""
    out: dict[str, str] = {}
    for url, page in pages.items():
        if not _short(page) or soft_404_reason(page) is not None:
            continue
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin not in out:
            digest = hashlib.sha256(origin.encode()).hexdigest()[:20]
            out[origin] = f"{origin}/citeguard-probe-{digest}"
    return out


def same_as_probe(pages: Mapping[str, Page], probes: Mapping[str, Page]) -> dict[str, str]:
    """The short pages of ``pages`` that are what their origin serves for a made-up path
    (``probes``: origin → the probe's page, for probes answered with 200): URL → reason."""
    out: dict[str, str] = {}
    for url, page in pages.items():
        parts = urlsplit(url)
        probe = probes.get(f"{parts.scheme}://{parts.netloc}")
        if probe is None or not _short(page):
            continue
        a = " ".join((page.main_text or page.text).split())[:_COMPARE_CHARS]
        b = " ".join((probe.main_text or probe.text).split())[:_COMPARE_CHARS]
        if a and fuzz.ratio(a, b) >= _SAME_PAGE:
            out[url] = (
                "the page answers 200 with what its host serves for any made-up path "
                "(a catch-all page, not the cited one)"
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
        for url, page in pages.items():
            self.page_extracted(url, page)
        if not self._tasks:
            return {}
        origins = list(self._tasks)
        answered = await asyncio.gather(*(self._tasks[o] for o in origins))
        probes = {o: p for o, p in zip(origins, answered, strict=True) if p is not None}
        return same_as_probe(pages, probes)

    def cancel(self) -> None:
        """Stop the probes still running."""
        for task in self._tasks.values():
            task.cancel()


__all__ = [
    "MAX_SOFT_404_CHARS",
    "CatchAllProbes",
    "probe_urls",
    "same_as_probe",
    "soft_404_reason",
]

"""Pages of 50-150 kB for the long-page latency scenario (``guard_long``,
:mod:`benchmarks.bench_guard_long`): each a real page of ``../shared/data/passages`` (its main
text as citeguard extracts it) followed by the main texts of the next pages, one section each
under its own heading, until its HTML reaches a seeded size of 50-150 kB; quotes from anywhere on
the page. Without the data folder, generated pages are repeated up to the same sizes."""

from __future__ import annotations

import random
import re
from dataclasses import replace
from functools import cache

from benchmarks.longdata import PageSpec, host_files, host_page
from benchmarks.page_set import PASSAGES, PageSet, passage_pages

N_PAGES = 60  # a 50-citation answer cites 50 distinct pages
MIN_BYTES, MAX_BYTES = 50_000, 150_000
_ADDRESS = re.compile(r"https?://|www\.|\.(?:com|org|net|de)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-ZÄÖÜÀ-Ý0-9])")


def _quotes(paragraphs: list[str], rng: random.Random, k: int = 3) -> tuple[str, ...]:
    """``k`` sentences of the page (30-200 characters, no quotation marks or brackets)."""
    sentences = [
        s.strip()
        for p in paragraphs
        for s in _SENTENCE.split(p)
        if 30 <= len(s.strip()) <= 200 and not any(c in s for c in '"[]“”„')
    ]
    return tuple(rng.sample(sentences, min(k, len(sentences))))


@cache
def long_pages(
    seed: int,
    n_pages: int = N_PAGES,
    *,
    min_bytes: int = MIN_BYTES,
    max_bytes: int = MAX_BYTES,
    n_quotes: int = 3,
) -> PageSet:
    """``n_pages`` pages of ``min_bytes``-``max_bytes`` (50-150 kB: see the module doc), with
    ``n_quotes`` quotes on each. The shared pages are extracted as a long page needs them (by
    file name, in turn)."""
    files = host_files(None)
    names: list[str] = []
    quotes: list[tuple[str, ...]] = []
    bodies: list[bytes] = []
    if not files:
        gen = passage_pages(seed)  # generated pages: their sentences are the paragraphs
        for i in range(n_pages):
            rng = random.Random(f"{seed}|long|{i}")
            body = gen.body(i % len(gen), seed)
            unit = body.split(b"<article>", 1)[1].split(b"</article>", 1)[0]
            target = rng.randint(min_bytes, max_bytes)
            copies = target // max(1, len(unit)) + 1
            while copies > 1 and len(body) + (copies - 1) * len(unit) > max_bytes:
                copies -= 1
            bodies.append(body.replace(unit, unit * copies, 1))
            names.append(f"generated-long-{i}")
            quotes.append(gen.quotes[i % len(gen)])
        return PageSet(tuple(names), tuple(quotes), generated=True, bodies=tuple(bodies))
    for i in range(n_pages):
        rng = random.Random(f"{seed}|long|{i}")
        target = rng.randint(min_bytes, max_bytes)
        blocks: list[tuple[str, str]] = []
        paragraphs: list[str] = []
        first = None
        size = 0
        k = 0
        while size < target and k < len(files):
            h = host_page(files[(i + k) % len(files)])
            k += 1
            if h is None:
                continue
            first = first or h
            blocks.append(("h2", h.title))
            blocks += [("p", p) for p in h.paragraphs]
            paragraphs += h.paragraphs
            size += sum(len(p.encode()) + 8 for p in h.paragraphs) + len(h.title.encode())
        if first is None:
            break
        blocks.insert(0, ("h1", first.title))
        page = PageSpec(first.title, tuple(blocks))
        body = page.html()
        while len(body) > max_bytes and len(blocks) > 3:  # the last section made it too long
            blocks.pop()
            body = replace(page, blocks=tuple(blocks)).html()
        kept = {t for tag, t in blocks if tag == "p"}
        names.append(f"long-{i}-{first.file}")
        quotes.append(_quotes([p for p in paragraphs if p in kept], rng, n_quotes))
        bodies.append(body)
    return PageSet(tuple(names), tuple(quotes), generated=False, bodies=tuple(bodies))


@cache
def report_pages(seed: int, n_quotes: int = 12) -> PageSet:
    """The real pages of ``../shared/data/passages`` as they are (5-320 kB of HTML, with their
    markup, scripts and boilerplate: a research report's sources), each with up to ``n_quotes``
    sentences of its main text as citeguard extracts it; pages with under 1,500 characters of
    main text are left out. Without the data folder: the generated long pages."""
    files = host_files(None)
    if not files:
        return long_pages(seed, N_PAGES, n_quotes=n_quotes)
    from citeguard.web.page import extract_page

    names: list[str] = []
    quotes: list[tuple[str, ...]] = []
    for file in files:
        h = host_page(file)
        if h is None:
            continue
        # what a browser shows of the page as served (as UTF-8 HTML): a sentence of the page read
        # without its content type (a script's line among them) is not on it
        shown = extract_page(
            (PASSAGES / file).read_bytes(),
            url=f"http://pages.test/{file}",
            content_type="text/html; charset=utf-8",
        ).text
        # and a sentence naming a web address would be a citation of its own
        plain = [p for p in h.paragraphs if p in shown and not _ADDRESS.search(p)]
        found = _quotes(plain, random.Random(f"{seed}|report|{file}"), n_quotes)
        if found:
            names.append(file)
            quotes.append(found)
    bodies = tuple((PASSAGES / n).read_bytes() for n in names)
    return PageSet(tuple(names), tuple(quotes), generated=False, bodies=bodies)

"""Pathological inputs finish in bounded time and memory, with a status or a truncated page.

Each case once took seconds to minutes (regex backtracking, quadratic loops, tree builders that
are quadratic in nesting depth, decompression bombs, PDFs that draw one stream on every page).
Every test must finish within a CPU-time budget several times what it needs here (this
process's CPU, so other work on a busy machine does not count), under a wall-clock watchdog that
only a hang reaches: a loaded machine passes and a regression to super-linear work does not.
"""

from __future__ import annotations

import asyncio
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest
from aiohttp import web
from conftest import chat_completion

from citeguard import Guard, Policy
from citeguard.checks.passage import find_paraphrase, find_passage, prepare_text
from citeguard.models import CitationStatus
from citeguard.parse import parse_answer
from citeguard.policy import FetchPolicy
from citeguard.web.fetch import Fetcher
from citeguard.web.page import extract_page

if TYPE_CHECKING:
    from conftest import Farm

CPU_BUDGET = 5.0  # seconds of this process's CPU a case may use; each needs well under one
WATCHDOG = 120.0  # wall-clock seconds: a hang, not a busy machine, reaches this
N = 100_000
NOW = datetime(2025, 6, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def cpu_budget(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a case that spends more than its CPU budget (the test's own work and its fixtures')."""
    # a decompression bomb is inflated up to the cap first: twice the budget
    bomb = request.node.name.startswith("test_decompression_bombs")
    budget = CPU_BUDGET * (2 if bomb else 1)
    start = time.process_time()
    yield
    used = time.process_time() - start
    assert used < budget, f"{used:.1f} s of CPU (budget {budget:g} s)"


# --------------------------------------------------------------------------------------------
# The answer parser
# --------------------------------------------------------------------------------------------

ANSWERS = {
    "dots": "." * N,
    "bangs": "!" * N,
    "question marks": "?" * N,
    "spaces": " " * N,
    "words around spaces": "Rates rose" + " " * N + "again [1].\n\n[1]: https://a.example.com/",
    "spaces then table-like tail": " " * N + "]。",
    "tabs then tilde": "\t" * N + "~",
    "spaces then colon": " " * N + ":",
    "spaces then rule": " " * N + "`-- ",
    "dash table separator": "|" + "-" * N + " " * N + "x",
    "list items": "- item\n" * (N // 7),
    "numbered items": "".join(f"{i % 999 + 1}. item\n" for i in range(N // 8)),
    "open brackets": "[" * N,
    "open parentheses": "(" * N,
    "link openers": "[a](" * (N // 4),
    "markers": "[1]" * (N // 3),
    "quotes and markers in one claim": "Claim "
    + '"q w" [1] ' * (N // 10)
    + "x [1]\n\n[1]: https://a.example.com/",
    "unclosed anchors": "<a " * (N // 3),
    "long bare URL": "https://a.example.com/" + "a" * N,
}


@pytest.mark.timeout(WATCHDOG)
@pytest.mark.parametrize("name", list(ANSWERS))
def test_parse_answer_is_bounded(name: str) -> None:
    text = ANSWERS[name]
    answer = parse_answer(text)
    assert answer.text == text
    for c in answer.citations:
        assert c.start < 0 or text[c.start : c.end] == c.marker
    for cl in answer.claims:
        assert text[cl.start : cl.end] == cl.text


@pytest.mark.timeout(WATCHDOG)
def test_annotations_over_many_links_are_marked_in_bounded_time() -> None:
    # 2,000 annotations, each over the whole of a text of 2,000 links to other pages: every
    # annotation was compared with every link (URLs normalised per pair), 50 s of CPU
    links = [f"https://l{k}.example.com/p" for k in range(2_000)]
    text = " ".join(links)
    others = [(0, len(text), f"https://other{k}.example.com/") for k in range(2_000)]
    answer = parse_answer(chat_completion(text, others))
    assert len(answer.citations) == 4_000  # each link, and each annotation at the first link
    by_origin = {c.origin for c in answer.citations if c.url.startswith("https://other")}
    assert by_origin == {"openai"}


def test_an_annotation_over_several_links_annotates_the_one_it_names() -> None:
    links = [f"https://l{k}.example.com/p" for k in range(5)]
    text = "See " + " and ".join(links) + "."
    answer = parse_answer(chat_completion(text, [(0, len(text), links[3])]))
    assert [c.url for c in answer.citations] == links  # no extra citation
    assert [c.origin for c in answer.citations] == ["markdown"] * 3 + ["openai", "markdown"]


def test_quotes_bind_to_citations_by_position() -> None:
    # the bisect that replaced a scan per citation keeps the nearest preceding quote
    text = 'He said "one two" [1] and "three four" [1] then [1].\n\n[1]: https://a.example.com/'
    answer = parse_answer(text)
    assert [c.quote for c in answer.citations] == ["one two", "three four", "three four"]


# --------------------------------------------------------------------------------------------
# Passage matching
# --------------------------------------------------------------------------------------------

PAGE = "The rates rose by three percent in 2024, according to the bank. " * 3000


@pytest.mark.timeout(WATCHDOG)
@pytest.mark.parametrize(
    "quote",
    [
        "a." * 10_000,
        "[a]" * 6_000,
        "<a " * 6_000,
        " " * 19_000 + "x",
        "rates rose " * 1_800,
        "word… " * 3_000,
    ],
    ids=["dots", "brackets", "tags", "spaces", "repeated words", "many elisions"],
)
def test_find_passage_is_bounded(quote: str) -> None:
    result = find_passage(quote, prepare_text(PAGE))
    assert not result.found or PAGE[result.start : result.end] == result.matched_text


@pytest.mark.timeout(WATCHDOG)
def test_long_quote_with_a_changed_number_is_altered() -> None:
    # past the chunk size the quote is aligned chunk by chunk: still linear, still exact
    page = " ".join(f"Sentence {i} says the level reached {i * 7} units." for i in range(2000))
    start = page.index("Sentence 500 ")
    quote = page[start : start + 3000].rsplit(" ", 1)[0].replace("3528", "3529")
    result = find_passage(quote, prepare_text(page))
    assert not result.found and result.altered
    assert any("3529" in t for t in result.differing_tokens)


@pytest.mark.timeout(WATCHDOG)
def test_find_paraphrase_is_bounded_on_a_huge_repetitive_page() -> None:
    page = prepare_text("Rates rose sharply across the region this year.\n" * 100_000)
    claim = " ".join(f"rates rose term{i}" for i in range(2_000))
    result = find_paraphrase(claim, page)
    assert result.how == "paraphrase"
    for i in range(200):
        find_paraphrase(f"Rates rose {i} percent", page)


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------


def _html(body: str, head: str = "") -> bytes:
    return f"<html><head>{head}</head><body><p>lead text</p>{body}</body></html>".encode()


HOSTILE_HTML = {
    "100k nested divs": _html("<div>" * N + "deep text"),
    "1M nested divs": _html("<div>" * 1_000_000 + "deep text"),
    "nested and closed": _html("<div>" * 200_000 + "deep text" + "</div>" * 200_000),
    "nested lists": _html("<ul>" + "<li><ul>" * N + "deep text"),
    "nested tables": _html("<table><tr><td>" * 20_000 + "deep text"),
    "one element, 100k attributes": _html(
        "<div " + " ".join(f"a{i}=1" for i in range(N)) + ">deep text</div>"
    ),
    "attributes merged into body": _html(
        "deep text" + "".join(f"<body a{i}=1>" for i in range(40_000))
    ),
    "re-opened formatting elements": _html(
        "<p>" + "".join(f"<b id={i}>" for i in range(256)) + "</p>" + "<p>deep text</p>" * 20_000
    ),
    "1M line breaks": _html("deep text" + "<br>" * 1_000_000),
    # few tags, so no cheap count rules them out: one tag of bare attribute names (no "="),
    # thousands of nested articles over megabytes of text, formatting re-opened in every block
    "50k bare attributes": _html("<div " + " ".join(f"a{i}" for i in range(50_000)) + ">deep text"),
    "nested articles over much text": _html("<article>" * 3_900 + "deep text " * 200_000),
    "few tags, many re-openings": _html(
        "<p>" + "".join(f"<b id={i}>" for i in range(64)) + "</p>" + "<p>deep text</p>" * 1_900
    ),
    "unclosed noscripts": _html("deep text" + "<noscript x='<y>'>" * 30_000),
    "unclosed CDATA": _html("deep text" + "<![CDATA[</ul>" * 30_000),
    "tags hidden in raw text": _html(
        "<div>" * 200 + "deep text" + "<svg><font color=red><script></svg></script>" * 20_000
    ),
}


#: Cases whose last words lie past the node bound: the page is cut before them.
CUT_BEFORE_THE_END = {"1M nested divs", "nested and closed", "nested lists"}


@pytest.mark.timeout(WATCHDOG)
@pytest.mark.parametrize("name", list(HOSTILE_HTML))
def test_hostile_html_is_cut_to_a_safe_page(name: str) -> None:
    page = extract_page(HOSTILE_HTML[name], url="https://example.com/a", content_type="text/html")
    assert page.kind == "html"
    assert page.text.startswith("lead text")
    assert ("deep text" in page.text) is (name not in CUT_BEFORE_THE_END)
    assert len(page.text) <= len(HOSTILE_HTML[name])


def test_html_within_bounds_is_parsed_as_it_came() -> None:
    html = "<html><body>" + "<div>" * 100 + "<p>inside</p>" + "</div>" * 100 + "</body></html>"
    from citeguard.web.page import _bound_html

    assert _bound_html(html, FetchPolicy()) == (html, False)
    bounded, changed = _bound_html(html, FetchPolicy(max_html_depth=10))
    assert changed and bounded.count("<div>") == 10 and "inside" in bounded


def test_html_node_bound_cuts_the_document() -> None:
    html = _html("<p>first</p>" + "<p>more</p>" * 1000 + "<p>last</p>")
    page = extract_page(
        html,
        url="https://example.com/a",
        content_type="text/html",
        limits=FetchPolicy(max_html_nodes=100),
    )
    assert page.text.startswith("lead text\nfirst") and "last" not in page.text


@pytest.mark.timeout(WATCHDOG)
def test_a_deep_jsonld_block_is_ignored_not_the_page() -> None:
    head = (
        '<script type="application/ld+json">' + "[" * N + "]" * N + "</script>"
        '<script type="application/ld+json">{"@type": "NewsArticle", '
        '"datePublished": "2024-03-05T10:00:00Z"}</script>'
    )
    page = extract_page(
        _html("<p>" + "real text " * 50 + "</p>", head),
        url="https://example.com/a",
        content_type="text/html",
        now=NOW,
    )
    assert page.kind == "html"
    assert page.published is not None and page.published.date().isoformat() == "2024-03-05"


def test_jsonld_past_the_budget_is_skipped() -> None:
    block = '{"@type": "NewsArticle", "datePublished": "2024-03-05", "x": "' + "y" * 200 + '"}'
    html = _html("<p>text</p>", f'<script type="application/ld+json">{block}</script>')
    small = FetchPolicy(max_jsonld_chars=100)
    page = extract_page(html, url="https://e.example.com/a", content_type="text/html", now=NOW)
    capped = extract_page(
        html, url="https://e.example.com/a", content_type="text/html", now=NOW, limits=small
    )
    assert page.date_source == "json-ld" and capped.date_source != "json-ld"


# --------------------------------------------------------------------------------------------
# PDF
# --------------------------------------------------------------------------------------------


def _pdf(kids: int, content: bytes, *, shared_kid: bool = True) -> bytes:
    """A PDF whose page tree lists one page object ``kids`` times (a 4 kB file of hundreds of
    pages drawing one content stream), or ``kids`` page objects sharing that stream."""
    data = zlib.compress(content, 9)
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    refs = b"5 0 R " * kids if shared_kid else b" ".join(b"%d 0 R" % (5 + i) for i in range(kids))
    objs.append(b"<< /Type /Pages /Kids [" + refs + b"] /Count %d >>" % kids)
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    objs.append(
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream"
    )
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>"
    )
    objs.extend([page] * (1 if shared_kid else kids))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, obj in enumerate(objs):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % (i + 1) + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


def _text_ops(n: int) -> bytes:
    return b"BT /F1 12 Tf 72 712 Td " + b"(Hello world text) Tj 0 -1 Td " * n + b"ET"


@pytest.mark.timeout(WATCHDOG)
def test_a_small_pdf_of_hundreds_of_pages_sharing_one_stream() -> None:
    body = _pdf(600, _text_ops(2000))
    assert len(body) < 8 * 1024
    page = extract_page(body, url="https://example.com/a.pdf", content_type="application/pdf")
    assert page.kind == "pdf"
    assert "Hello world text" in page.text
    assert len(page.text) <= FetchPolicy().max_pdf_chars


@pytest.mark.timeout(WATCHDOG)
def test_pdf_pages_past_the_time_budget_are_not_read() -> None:
    body = _pdf(300, _text_ops(1000), shared_kid=False)  # distinct pages: no sharing to reuse
    # room for every page's text: only the time budget can stop the reading
    limits = FetchPolicy(max_pdf_seconds=0.5, max_pdf_chars=20_000_000)
    start = time.process_time()
    page = extract_page(
        body, url="https://example.com/a.pdf", content_type="application/pdf", limits=limits
    )
    cpu = time.process_time() - start
    assert page.kind == "pdf"
    # the pages read in half a second (none, on a machine too busy to parse the file in time)
    assert page.text.count("Hello world text") < 300 * 1000
    assert cpu < 3.0  # half a second of reading, then the page being read when it ran out


@pytest.mark.timeout(WATCHDOG)
def test_a_pdf_page_too_heavy_to_read_is_skipped() -> None:
    body = _pdf(1, _text_ops(100_000))  # 8 kB that inflate to a 3 MB content stream
    page = extract_page(body, url="https://example.com/a.pdf", content_type="application/pdf")
    assert page.kind == "pdf" and page.text == ""
    roomy = FetchPolicy(max_pdf_page_bytes=4 * 1024 * 1024, max_pdf_chars=1000)
    page = extract_page(
        _pdf(1, _text_ops(1000)),
        url="https://example.com/a.pdf",
        content_type="application/pdf",
        limits=roomy,
    )
    assert 0 < len(page.text) <= 1000


# --------------------------------------------------------------------------------------------
# Decompression bombs, over a real socket
# --------------------------------------------------------------------------------------------


def _bomb(encoding: str, inflated: int) -> bytes:
    zeros = b"\0" * (1 << 20)
    if encoding == "br":
        brotli = pytest.importorskip("brotli")
        c = brotli.Compressor(quality=5)
        parts = [c.process(zeros) for _ in range(inflated >> 20)]
        return b"".join([*parts, c.finish()])
    wbits = {"gzip": 31, "deflate": 15}[encoding]
    z = zlib.compressobj(9, zlib.DEFLATED, wbits)
    return b"".join([*(z.compress(zeros) for _ in range(inflated >> 20)), z.flush()])


@pytest.mark.timeout(WATCHDOG)
@pytest.mark.parametrize("chunked", [False, True], ids=["one read", "streamed"])
@pytest.mark.parametrize("encoding", ["br", "gzip", "deflate"])
async def test_decompression_bombs_stop_at_the_cap(
    farm: Farm, fetch_policy: FetchPolicy, encoding: str, chunked: bool
) -> None:
    bomb = _bomb(encoding, 512 << 20)  # 512 MB inflated; brotli sends it in about 1 kB
    headers = {"Content-Encoding": encoding, "Content-Type": "text/html"}

    async def serve(request: web.Request) -> web.StreamResponse:
        if not chunked:
            return web.Response(body=bomb, headers=headers)
        resp = web.StreamResponse(headers=headers)
        await resp.prepare(request)
        for i in range(0, len(bomb), 4096):
            await resp.write(bomb[i : i + 4096])
        await resp.write_eof()
        return resp

    url = farm.add("a.example.com", "/bomb", serve)
    tracemalloc.start()
    try:
        async with Fetcher(fetch_policy, resolver=farm.resolver) as fetcher:
            result = await asyncio.wait_for(fetcher.fetch(url), WATCHDOG)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.status is CitationStatus.TOO_LARGE
    assert "decompressed" in result.reason and encoding in result.reason
    assert result.body is None
    # the cap (2 MB here), a few decoding steps and the raw body; never the inflated 512 MB
    assert peak < 64 * 1024 * 1024


async def test_a_brotli_body_is_decoded(farm: Farm, fetch_policy: FetchPolicy) -> None:
    brotli = pytest.importorskip("brotli")
    text = b"<p>" + b"compressible words and more words " * 20_000 + b"</p>"  # 680 kB
    url = farm.add(
        "a.example.com",
        "/br",
        body=brotli.compress(text),
        headers={"Content-Encoding": "br", "Content-Type": "text/html"},
    )
    async with Fetcher(fetch_policy, resolver=farm.resolver) as fetcher:
        result = await fetcher.fetch(url)
    assert result.status is CitationStatus.OK and result.body == text


async def test_an_encoding_we_cannot_bound_is_unsupported(
    farm: Farm, fetch_policy: FetchPolicy
) -> None:
    url = farm.add(
        "a.example.com",
        "/zstd",
        body=b"\x28\xb5\x2f\xfd" + b"\0" * 64,
        headers={"Content-Encoding": "zstd", "Content-Type": "text/html"},
    )
    async with Fetcher(fetch_policy, resolver=farm.resolver) as fetcher:
        result = await fetcher.fetch(url)
    assert result.status is CitationStatus.UNSUPPORTED_TYPE
    assert "zstd" in result.reason


# --------------------------------------------------------------------------------------------
# The gate's entry
# --------------------------------------------------------------------------------------------


def _deep_list(depth: int) -> list[object]:
    root: list[object] = []
    node = root
    for _ in range(depth):
        child: list[object] = []
        node.append(child)
        node = child
    return root


@pytest.mark.timeout(60)  # the run's first check loads models once; the bad answer is timed
@pytest.mark.parametrize(
    "answer",
    [None, 42, 3.5, object(), b"x" * 50_000_000, _deep_list(100_000)],
    ids=["None", "int", "float", "object", "50 MB of bytes", "list nested 100k deep"],
)
async def test_guard_check_never_raises_on_a_bad_answer(answer: object) -> None:
    async with Guard(Policy(), entailer=None) as guard:
        await guard.check("A plain answer without sources.")
        start = time.process_time()
        verdict = await guard.check(answer)
        cpu = time.process_time() - start
    assert cpu < CPU_BUDGET
    assert not verdict.passed
    codes = {f.code for f in verdict.findings}
    assert codes & {"invalid_input", "structured_invalid_item"}

"""extract_page: visible text, main text, metadata, dates, charsets, PDF and odd bodies."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import htmldate.utils
import pytest

from citeguard.web.page import (
    EXTRACTION_VERSION,
    dehyphenate,
    extract_page,
    extraction_version,
    fallback_published,
    parse_date,
)

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
URL = "https://news.example.com/story"


def html_page(body: str, head: str = "", lang: str | None = None) -> bytes:
    lang_attr = f' lang="{lang}"' if lang else ""
    return (
        f"<!doctype html><html{lang_attr}><head><meta charset='utf-8'>{head}</head>"
        f"<body>{body}</body></html>"
    ).encode()


# --------------------------------------------------------------------------------------------
# visible text
# --------------------------------------------------------------------------------------------


def test_invisible_elements_are_dropped() -> None:
    page = extract_page(
        html_page(
            "<p>kept one</p>"
            "<script>var gone1 = 1;</script><style>.gone2{}</style>"
            "<noscript>gone3</noscript><template><p>gone4</p></template>"
            "<svg><text>gone5</text></svg>"
            "<div hidden>gone6</div><span aria-hidden='true'>gone7</span>"
            "<p style='color:red; DISPLAY: none'>gone8</p><p style='display:none'>gone9</p>"
            "<p>kept two</p>"
        ),
        url=URL,
        content_type="text/html",
        now=NOW,
    )
    assert page.kind == "html"
    assert page.text == "kept one\nkept two"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("<p>one</p><p>two</p>", "one\ntwo"),
        ("<ul><li>alpha</li><li>beta</li></ul>", "alpha\nbeta"),
        ("<div>outer<div>inner</div>tail</div>", "outer\ninner\ntail"),
        ("<h2>Heading</h2>Body text", "Heading\nBody text"),
        ("line<br>break", "line\nbreak"),
        ("<table><tr><td>cell1</td><td>cell2</td></tr></table>", "cell1\ncell2"),
        # inline elements do not split words
        ("<p><b>W</b>ord and <a href='#'>link</a>ed</p>", "Word and linked"),
        # spaces next to a block boundary go; empty blocks leave no blank lines
        ("<div> a <p> b </p> <p>\n c\t</p> d </div>", "a\nb\nc\nd"),
        ("<div>\n <div> \n </div><p></p> x <br> </div>", "x"),
    ],
)
def test_block_elements_never_glue_words(body: str, expected: str) -> None:
    page = extract_page(html_page(body), url=URL, content_type="text/html", now=NOW)
    assert page.text == expected


def test_whitespace_is_normalised() -> None:
    page = extract_page(
        html_page("<p>  many\t\tspaces\n and\u00a0nbsp  </p>\n\n\n<p>\n next </p>"),
        url=URL,
        content_type="text/html",
        now=NOW,
    )
    assert page.text == "many spaces and nbsp\nnext"


def test_soft_hyphens_and_zero_width_characters_are_invisible() -> None:
    page = extract_page(
        html_page("<p>Ver\u00adöffent\u00adlichung zero\u200bwidth</p>"),
        url=URL,
        content_type="text/html",
        now=NOW,
    )
    assert page.text == "Veröffentlichung zerowidth"


def test_title_canonical_and_language() -> None:
    page = extract_page(
        html_page(
            "<p>x</p>",
            head="<title> The  Title </title><link rel='canonical' href='/canonical/path?a=1'>",
            lang="de-AT",
        ),
        url="https://www.example.com/some/page?utm=1",
        content_type="text/html",
        now=NOW,
    )
    assert page.title == "The Title"
    assert page.canonical_url == "https://www.example.com/canonical/path?a=1"
    assert page.language == "de"


def test_language_falls_back_to_content_language_header() -> None:
    page = extract_page(
        b"<html><body><p>bonjour</p></body></html>",
        url=URL,
        headers={"Content-Type": "text/html", "Content-Language": "fr-CA, en"},
        now=NOW,
    )
    assert page.language == "fr"


def test_main_text_prefers_the_article_and_drops_boilerplate() -> None:
    article = " ".join([f"The article body sentence number {i}." for i in range(12)])
    page = extract_page(
        html_page(
            "<nav><a href='/'>Home</a> <a href='/news'>News</a></nav>"
            f"<article><h1>Headline</h1><p>{article}</p>"
            "<div class='share-buttons'>Share on Facebook</div>"
            "<div class='related-posts'>Related: other story</div></article>"
            "<aside>Sidebar teaser</aside><footer>Imprint and privacy</footer>"
        ),
        url=URL,
        content_type="text/html",
        now=NOW,
    )
    assert page.main_text is not None
    assert "article body sentence number 11" in page.main_text
    for boilerplate in ("Home", "Share on Facebook", "Related: other story", "Imprint"):
        assert boilerplate in page.text
        assert boilerplate not in page.main_text


def test_main_text_keeps_content_wrapped_in_a_sidebar_named_layout() -> None:
    article = " ".join([f"Body sentence {i} is here." for i in range(30)])
    page = extract_page(
        html_page(f"<article><div class='layout-with-sidebar'><p>{article}</p></div></article>"),
        url=URL,
        content_type="text/html",
        now=NOW,
    )
    assert page.main_text is not None
    assert "Body sentence 29 is here." in page.main_text


def test_jsonld_types_are_collected() -> None:
    ld = {
        "@context": "https://schema.org",
        "@graph": [
            {"@type": "WebSite", "name": "x"},
            {"@type": ["NewsArticle", "https://schema.org/Report"], "headline": "h"},
        ],
    }
    head = f"<script type='application/ld+json'>{json.dumps(ld)}</script>"
    page = extract_page(html_page("<p>x</p>", head=head), url=URL, content_type="text/html")
    assert page.types == ["WebSite", "NewsArticle", "Report"]


def test_extraction_version_is_a_stable_string() -> None:
    assert isinstance(extraction_version, str) and extraction_version
    assert extraction_version == EXTRACTION_VERSION


# --------------------------------------------------------------------------------------------
# dates
# --------------------------------------------------------------------------------------------


def _ld(obj: object) -> str:
    return f"<script type='application/ld+json'>{json.dumps(obj)}</script>"


@pytest.mark.parametrize(
    ("head", "body", "url", "want", "source"),
    [
        (
            _ld({"@type": "NewsArticle", "datePublished": "2021-03-15T08:00:00+01:00"}),
            "",
            URL,
            "2021-03-15",
            "json-ld",
        ),
        (
            _ld(
                {
                    "@graph": [
                        {"@type": "WebSite"},
                        {"@type": "Article", "datePublished": "2020-02-02"},
                    ]
                }
            ),
            "",
            URL,
            "2020-02-02",
            "json-ld",
        ),
        (
            "<meta property='article:published_time' content='2019-05-06T10:00:00Z'>",
            "",
            URL,
            "2019-05-06",
            "meta:article:published_time",
        ),
        (
            "<meta name='DC.date.issued' content='2018-07-08'>",
            "",
            URL,
            "2018-07-08",
            "meta:dc.date.issued",
        ),
        (
            "<meta name='parsely-pub-date' content='2017-01-02T03:04:05Z'>",
            "",
            URL,
            "2017-01-02",
            "meta:parsely-pub-date",
        ),
        (
            "<meta name='sailthru.date' content='2016-03-04 10:00:00'>",
            "",
            URL,
            "2016-03-04",
            "meta:sailthru.date",
        ),
        ("<meta name='pubdate' content='20150607'>", "", URL, "2015-06-07", "meta:pubdate"),
        (
            "",
            "<span itemprop='datePublished' content='2014-08-09'>9 Aug</span>",
            URL,
            "2014-08-09",
            "itemprop:datePublished",
        ),
        (
            "",
            "<article><time datetime='2013-10-11T12:00'>11 Oct</time><p>x</p></article>",
            URL,
            "2013-10-11",
            "time",
        ),
        ("", "<time pubdate datetime='2012-12-13'>x</time>", URL, "2012-12-13", "time"),
        (
            "",
            "<p>no metadata</p>",
            "https://blog.example.com/2011/04/05/some-post/",
            "2011-04-05",
            "url",
        ),
    ],
)
def test_published_date_sources(head: str, body: str, url: str, want: str, source: str) -> None:
    page = extract_page(
        html_page(body or "<p>x</p>", head=head), url=url, content_type="text/html", now=NOW
    )
    assert page.published is not None
    assert page.published.date().isoformat() == want
    assert page.published.tzinfo is not None
    assert page.date_source == source


def test_modified_dates_and_last_modified_header() -> None:
    head = (
        "<meta property='article:published_time' content='2020-01-01T00:00:00Z'>"
        "<meta property='og:updated_time' content='2020-02-03T04:05:06+00:00'>"
    )
    page = extract_page(
        html_page("<p>x</p>", head=head), url=URL, content_type="text/html", now=NOW
    )
    assert page.modified == datetime(2020, 2, 3, 4, 5, 6, tzinfo=UTC)

    page = extract_page(
        html_page("<p>x</p>"),
        url=URL,
        headers={"content-type": "text/html", "Last-Modified": "Wed, 21 Oct 2015 07:28:00 GMT"},
        now=NOW,
    )
    assert page.modified == datetime(2015, 10, 21, 7, 28, tzinfo=UTC)
    assert page.published is None or page.date_source == "htmldate"


def test_jsonld_modified_comes_from_the_same_graph() -> None:
    ld = {"@type": "BlogPosting", "datePublished": "2022-01-01", "dateModified": "2022-03-04"}
    page = extract_page(
        html_page("<p>x</p>", head=_ld(ld)), url=URL, content_type="text/html", now=NOW
    )
    assert page.published is not None and page.published.date().isoformat() == "2022-01-01"
    assert page.modified is not None and page.modified.date().isoformat() == "2022-03-04"


def test_conflicting_dates_article_jsonld_beats_meta() -> None:
    """Precedence: the JSON-LD article entity over meta tags over on-page markup over the URL."""
    head = _ld({"@type": "NewsArticle", "datePublished": "2021-06-01T10:00:00Z"}) + (
        "<meta property='article:published_time' content='2021-05-01T10:00:00Z'>"
        "<meta name='date' content='2021-04-01'>"
    )
    page = extract_page(
        html_page("<p>x</p>", head=head),
        url="https://x.example.com/2021/03/01/story",
        content_type="text/html",
        now=NOW,
    )
    assert page.published is not None and page.published.date().isoformat() == "2021-06-01"
    assert page.date_source == "json-ld"


def test_conflicting_dates_embedded_video_jsonld_loses_to_article_meta() -> None:
    head = _ld({"@type": "VideoObject", "uploadDate": "2020-09-29T22:40:00-07:00"}) + (
        "<meta itemprop='datePublished' content='2020-09-30T02:00:07-07:00'>"
    )
    page = extract_page(
        html_page("<p>x</p>", head=head), url=URL, content_type="text/html", now=NOW
    )
    assert page.published is not None and page.published.date().isoformat() == "2020-09-30"
    assert page.date_source == "meta:datepublished"


def test_generic_meta_date_ranks_below_on_page_itemprop() -> None:
    head = "<meta name='date' content='2022-01-21T15:38:44+01:00'>"
    body = "<span itemprop='datePublished' datetime='2022-01-27'>27.01.2022</span>"
    page = extract_page(html_page(body, head=head), url=URL, content_type="text/html", now=NOW)
    assert page.published is not None and page.published.date().isoformat() == "2022-01-27"


def test_url_day_settles_a_midnight_utc_timestamp() -> None:
    head = "<meta property='article:published_time' content='2018-12-31T23:11:59+00:00'>"
    page = extract_page(
        html_page("<p>x</p>", head=head),
        url="https://blog.example.com/2019/01/01/new-year/",
        content_type="text/html",
        now=NOW,
    )
    assert page.published is not None and page.published.date().isoformat() == "2019-01-01"


def test_timezone_offsets_are_kept_and_naive_dates_are_utc() -> None:
    aware = parse_date("2021-03-15T23:30:00-04:00")
    assert aware == datetime(2021, 3, 15, 23, 30, tzinfo=timezone(timedelta(hours=-4)))
    naive = parse_date("2021-03-15 10:00")
    assert naive == datetime(2021, 3, 15, 10, 0, tzinfo=UTC)
    assert parse_date("15.03.2021") == datetime(2021, 3, 15, tzinfo=UTC)
    assert parse_date("Mon, 15 Mar 2021 10:00:00 GMT") == datetime(2021, 3, 15, 10, tzinfo=UTC)
    assert parse_date("not a date") is None
    assert parse_date("2021-02-30") is None


@pytest.mark.parametrize("value", ["1990-01-01", "2024-06-05T00:00:00Z", "2099-01-01"])
def test_implausible_dates_are_rejected(value: str) -> None:
    head = f"<meta property='article:published_time' content='{value}'>"
    page = extract_page(
        html_page("<p>no date here</p>", head=head), url=URL, content_type="text/html", now=NOW
    )
    assert page.published is None


def test_future_limit_follows_the_injected_now() -> None:
    head = "<meta property='article:published_time' content='2024-06-02T00:00:00Z'>"
    body = html_page("<p>x</p>", head=head)
    assert extract_page(body, url=URL, content_type="text/html", now=NOW).published is not None
    early = NOW - timedelta(days=30)
    assert extract_page(body, url=URL, content_type="text/html", now=early).published is None


def test_page_without_any_date() -> None:
    page = extract_page(
        html_page("<p>Nothing here carries a date at all.</p>"),
        url=URL,
        content_type="text/html",
        now=NOW,
    )
    assert page.published is None
    assert page.modified is None
    assert page.date_source is None


def test_htmldate_fallback_reads_dates_from_text() -> None:
    body = html_page(
        "<div class='post'><h1>Titel</h1><p class='date'>Veröffentlicht am 12.03.2021</p>"
        "<p>Ein Text ohne Metadaten.</p></div>"
    )
    page = extract_page(body, url=URL, content_type="text/html", now=NOW)
    assert page.published is not None and page.published.date().isoformat() == "2021-03-12"
    assert page.date_source == "htmldate"
    skipped = extract_page(body, url=URL, content_type="text/html", now=NOW, date_fallback=False)
    assert skipped.published is None
    later = fallback_published(body, url=URL, content_type="text/html", now=NOW)
    assert later == page.published
    assert fallback_published(b"%PDF-1.4", url=URL, content_type="application/pdf") is None


def test_htmldate_is_never_asked_to_download(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("extraction must never fetch a URL")

    monkeypatch.setattr(htmldate.utils, "fetch_url", refuse)
    page = extract_page(b"https://evil.example.com/page", url=URL, content_type="text/html")
    assert page.kind == "html"
    assert page.published is None


def test_broken_jsonld_still_yields_its_date() -> None:
    head = (
        '<script type=\'application/ld+json\'>{"@type": "Article", '
        '"datePublished": "2019-09-09", }</script>'
    )
    page = extract_page(
        html_page("<p>x</p>", head=head), url=URL, content_type="text/html", now=NOW
    )
    assert page.published is not None and page.published.date().isoformat() == "2019-09-09"


# --------------------------------------------------------------------------------------------
# charsets
# --------------------------------------------------------------------------------------------

JAPANESE = "東京は日本の首都です。今日はいい天気ですね。"
FRENCH = "Le garçon a commandé un café crème et une pâtisserie. « Très bien », dit-il — naïvement."


def test_shift_jis_declared_in_the_header() -> None:
    body = f"<html><head><title>日本語</title></head><body><p>{JAPANESE}</p></body></html>"
    page = extract_page(
        body.encode("shift_jis"),
        url=URL,
        headers={"Content-Type": "text/html; charset=Shift_JIS"},
        now=NOW,
    )
    assert page.text == JAPANESE
    assert page.title == "日本語"
    assert page.charset == "cp932"


def test_shift_jis_declared_only_in_meta() -> None:
    body = (
        "<html><head><meta http-equiv='Content-Type' content='text/html; charset=Shift_JIS'>"
        f"<title>日本語</title></head><body><p>{JAPANESE}</p></body></html>"
    )
    page = extract_page(body.encode("shift_jis"), url=URL, content_type="text/html", now=NOW)
    assert page.text == JAPANESE


def test_windows_1252_without_any_declaration() -> None:
    body = f"<html><head><title>Café</title></head><body><p>{FRENCH}</p></body></html>"
    page = extract_page(body.encode("cp1252"), url=URL, content_type="text/html", now=NOW)
    assert page.text == FRENCH
    assert page.charset == "cp1252"


def test_stale_latin1_declaration_on_a_utf8_page() -> None:
    body = f"<html><head><meta charset='iso-8859-1'></head><body><p>{FRENCH}</p></body></html>"
    page = extract_page(body.encode("utf-8"), url=URL, content_type="text/html", now=NOW)
    assert page.text == FRENCH


def test_header_charset_wins_over_meta() -> None:
    body = f"<html><head><meta charset='utf-8'></head><body><p>{FRENCH}</p></body></html>"
    page = extract_page(
        body.encode("cp1252"),
        url=URL,
        headers={"content-type": "text/html; charset=windows-1252"},
        now=NOW,
    )
    assert page.text == FRENCH


def test_undecodable_bytes_never_crash() -> None:
    junk = bytes(range(256)) * 50
    page = extract_page(
        b"<html><body><p>" + junk + b"</p></body></html>",
        url=URL,
        headers={"content-type": "text/html; charset=utf-8"},
        now=NOW,
    )
    assert page.kind == "html"
    page = extract_page(
        junk, url=URL, headers={"content-type": "text/html; charset=bogus-9"}, now=NOW
    )
    assert page.kind == "html"


# --------------------------------------------------------------------------------------------
# PDF, plain text, unsupported and empty bodies
# --------------------------------------------------------------------------------------------


def make_pdf(lines: list[str], info: dict[str, str] | None = None) -> bytes:
    """A minimal valid one-page PDF (Helvetica text, one line per entry), built by hand."""

    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
    for i, line in enumerate(lines):
        ops.append(f"({esc(line)}) Tj" if i == 0 else f"T* ({esc(line)}) Tj")
    ops.append("ET")
    stream = "\n".join(ops).encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    if info:
        entries = b" ".join(
            b"/%s (%s)" % (k.encode(), v.encode("latin-1")) for k, v in info.items()
        )
        objects.append(b"<< " + entries + b" >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    trailer = b"<< /Size %d /Root 1 0 R" % (len(objects) + 1)
    if info:
        trailer += b" /Info %d 0 R" % len(objects)
    out += b"trailer\n" + trailer + b" >>\nstartxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def test_pdf_text_with_hyphenation_undone_and_metadata() -> None:
    pdf = make_pdf(
        [
            "The retrieval of infor-",
            "mation is hard. COVID-",
            "19 cases rose in the Anglo-",
            "Saxon world.",
        ],
        info={
            "Title": "A test report",
            "CreationDate": "D:20210315120000+01'00'",
            "ModDate": "D:20220101000000Z",
        },
    )
    page = extract_page(
        pdf, url="https://example.org/r.pdf", content_type="application/pdf", now=NOW
    )
    assert page.kind == "pdf"
    assert page.text == (
        "The retrieval of information is hard. COVID-19 cases rose in the Anglo-Saxon world."
    )
    assert page.title == "A test report"
    assert page.published == datetime(2021, 3, 15, 12, tzinfo=timezone(timedelta(hours=1)))
    assert page.modified == datetime(2022, 1, 1, tzinfo=UTC)


def test_pdf_is_sniffed_without_a_content_type() -> None:
    page = extract_page(make_pdf(["hello pdf"]), url="https://example.org/x", now=NOW)
    assert page.kind == "pdf"
    assert page.text == "hello pdf"


def test_broken_pdf_is_unsupported_not_a_crash() -> None:
    page = extract_page(
        b"%PDF-1.4\n1 0 obj << /Type /Catalog", url=URL, content_type="application/pdf", now=NOW
    )
    assert page.kind == "unsupported"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("infor-\nmation", "information"),
        ("COVID-\n19", "COVID-19"),
        ("Anglo-\nSaxon", "Anglo-Saxon"),
        ("Ver-\nöffentlichung", "Veröffentlichung"),
        ("a line -\nnext", "a line -\nnext"),
    ],
)
def test_dehyphenate(text: str, expected: str) -> None:
    assert dehyphenate(text) == expected


def test_plain_text_passes_through() -> None:
    body = b"Line one.\r\nLine  two."
    page = extract_page(body, url=URL, content_type="text/plain; charset=utf-8", now=NOW)
    assert page.kind == "text"
    assert page.text == "Line one.\nLine  two."


@pytest.mark.parametrize("ctype", ["image/png", "application/zip", "video/mp4"])
def test_other_types_are_unsupported(ctype: str) -> None:
    assert extract_page(b"\x89PNG....", url=URL, content_type=ctype).kind == "unsupported"


@pytest.mark.parametrize("body", [b"", b"   \n\t ", ""])
def test_empty_body(body: bytes | str) -> None:
    assert extract_page(body, url=URL, content_type="text/html").kind == "empty"


def test_html_is_sniffed_without_a_content_type() -> None:
    page = extract_page(b"<!DOCTYPE html><html><body><p>sniffed</p></body></html>", url=URL)
    assert page.kind == "html" and page.text == "sniffed"


def test_str_body_is_accepted() -> None:
    page = extract_page("<p>already decoded é</p>", url=URL, content_type="text/html")
    assert page.text == "already decoded é"


def test_five_megabyte_single_line_page_is_bounded() -> None:
    body = b"<html><body><p>" + b"lorem ipsum dolor sit amet " * 190_000 + b"</p></body></html>"
    assert len(body) > 5_000_000 and b"\n" not in body
    page = extract_page(body, url=URL, content_type="text/html", now=NOW)
    assert page.kind == "html"
    assert len(page.text) == len("lorem ipsum dolor sit amet ") * 190_000 - 1
    assert page.published is None


def test_five_megabyte_line_without_spaces() -> None:
    page = extract_page(b"<p>" + b"a" * 5_000_000, url=URL, content_type="text/html", now=NOW)
    assert len(page.text) == 5_000_000


# --------------------------------------------------------------------------------------------
# shared dev set: publication dates
# --------------------------------------------------------------------------------------------


def _decode_like_htmldate(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes

        best = from_bytes(body).best()
        return str(best) if best is not None else body.decode("utf-8", "replace")


def test_date_accuracy_at_least_htmldate_on_shared_dates() -> None:
    labels = DATA / "dates" / "dates.jsonl"
    if not labels.exists():
        pytest.skip(f"shared data not present at {DATA}")
    import htmldate

    rows = [json.loads(line) for line in labels.open(encoding="utf-8")]
    ours = theirs = 0
    for row in rows:
        body = (DATA / "dates" / row["file"]).read_bytes()
        page = extract_page(body, url=row["url"], content_type="text/html")
        ours += (
            page.published is not None and page.published.date().isoformat() == row["expected_date"]
        )
        found = htmldate.find_date(
            _decode_like_htmldate(body), url=row["url"], original_date=True, extensive_search=True
        )
        theirs += found == row["expected_date"]
    assert ours >= theirs, f"citeguard {ours}/{len(rows)} vs htmldate {theirs}/{len(rows)}"
    assert ours / len(rows) >= 0.9

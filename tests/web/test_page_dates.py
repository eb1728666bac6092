"""Publication dates: the precedence rules of ``extract_page``, one family of pages at a time.

Each test builds a small synthetic page for one rule of the table in
``citeguard.web.page._structured_dates`` (and of ``_JsonLd`` / ``_date_place`` it relies on).
The last test measures the rules against htmldate on the shared dates set, on the half of the
pages that was held out while the rules were written (skipped when the data is absent).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from citeguard.policy import DEFAULT_MAX_HTML_ATTRIBUTES
from citeguard.web.page import dates as page_module
from citeguard.web.page import extract_page

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
URL = "https://news.example.com/story/big-news"


def _ld(obj: Any) -> str:
    return f"<script type='application/ld+json'>{json.dumps(obj)}</script>"


def _page(body: str = "<p>x</p>", head: str = "") -> bytes:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>{head}</head><body>{body}</body></html>"
    ).encode()


def _date(body: str = "<p>x</p>", head: str = "", url: str = URL) -> tuple[str | None, str | None]:
    page = extract_page(_page(body, head), url=url, content_type="text/html", now=NOW)
    return (page.published.date().isoformat() if page.published else None), page.date_source


# --------------------------------------------------------------------------------------------
# The precedence ladder: every source present, each with its own date; remove the winner and
# the next rule decides.
# --------------------------------------------------------------------------------------------

_LADDER: list[tuple[str, str, str, str]] = [
    # (date_source, where, markup, date) in the documented order
    ("json-ld", "head", _ld({"@type": "NewsArticle", "datePublished": "2021-01-15"}), "2021-01-15"),
    (
        "meta:article:published_time",
        "head",
        "<meta property='article:published_time' content='2021-02-15T10:00:00Z'>",
        "2021-02-15",
    ),
    (
        "itemprop:datePublished",
        "article",
        "<span itemprop='datePublished' content='2021-03-15'>15 March</span>",
        "2021-03-15",
    ),
    (
        "time",
        "article",
        "<header><span class='byline'><time datetime='2021-04-15'>15.4.2021</time></span></header>",
        "2021-04-15",
    ),
    (
        "time:byline",
        "page",
        "<div class='post-meta'><time datetime='2021-05-15'>15.05.2021</time></div>",
        "2021-05-15",
    ),
    ("meta:date", "head", "<meta name='date' content='2021-06-15'>", "2021-06-15"),
    (
        "json-ld:other",
        "head",
        _ld({"@type": "VideoObject", "uploadDate": "2021-07-15"}),
        "2021-07-15",
    ),
    (
        "hatom:published",
        "page",
        "<abbr class='published' title='2021-08-15T10:00:00Z'>Aug 15</abbr>",
        "2021-08-15",
    ),
    ("url", "url", "https://news.example.com/2021/09/15/big-news", "2021-09-15"),
    (
        "url:canonical",
        "head",
        "<link rel='canonical' href='https://news.example.com/2021/10/15/big-news'>",
        "2021-10-15",
    ),
    ("time:page", "page", "<p><time datetime='2021-11-15'>15.11.2021</time></p>", "2021-11-15"),
    (
        "htmldate",
        "page",
        "<div class='post'><p class='date'>Veröffentlicht am 12.12.2021</p></div>",
        "2021-12-12",
    ),
]


def _ladder_page(rungs: list[tuple[str, str, str, str]]) -> tuple[bytes, str]:
    head = "".join(m for _, where, m, _ in rungs if where == "head")
    article = "".join(m for _, where, m, _ in rungs if where == "article")
    page = "".join(m for _, where, m, _ in rungs if where == "page")
    url = next((m for _, where, m, _ in rungs if where == "url"), URL)
    body = f"{page}<article><h1>Title</h1>{article}<p>Body text of the story.</p></article>"
    return _page(body, head), url


@pytest.mark.parametrize("start", range(len(_LADDER)), ids=[r[0] for r in _LADDER])
def test_precedence_ladder(start: int) -> None:
    """With rules ``start..`` present, rule ``start`` decides; the documented order holds."""
    body, url = _ladder_page(_LADDER[start:])
    page = extract_page(body, url=url, content_type="text/html", now=NOW)
    source, _, _, want = _LADDER[start]
    assert page.published is not None
    assert (page.published.date().isoformat(), page.date_source) == (want, source)


def test_precedence_table_is_documented() -> None:
    doc = page_module._structured_dates.__doc__ or ""
    positions = [doc.find(f"``{name.split(':')[0]}") for name, *_ in _LADDER]
    assert all(p >= 0 for p in positions)


# --------------------------------------------------------------------------------------------
# JSON-LD: the page's main entity wins
# --------------------------------------------------------------------------------------------


def test_article_node_beats_a_webpage_node_listed_first() -> None:
    graph = {
        "@context": "https://schema.org",
        "@graph": [
            {"@type": "WebSite", "@id": "https://news.example.com/#website"},
            {"@type": "WebPage", "@id": URL, "datePublished": "2019-01-01"},
            {"@type": "NewsArticle", "mainEntityOfPage": URL, "datePublished": "2020-05-05"},
        ],
    }
    assert _date(head=_ld(graph)) == ("2020-05-05", "json-ld")


def test_related_items_in_an_item_list_never_date_the_page() -> None:
    related = {
        "@type": "ItemList",
        "itemListElement": [
            {
                "@type": "ListItem",
                "item": {"@type": "NewsArticle", "datePublished": "2018-02-02"},
            },
            {"@type": "NewsArticle", "datePublished": "2018-03-03"},
        ],
    }
    main = {"@type": "NewsArticle", "headline": "Big news", "datePublished": "2020-06-06"}
    assert _date(head=_ld(related) + _ld(main)) == ("2020-06-06", "json-ld")
    # with only the list, JSON-LD says nothing; the page's meta decides
    meta = "<meta property='article:published_time' content='2020-07-07T00:00:00Z'>"
    assert _date(head=_ld(related) + meta) == ("2020-07-07", "meta:article:published_time")


@pytest.mark.parametrize(
    "node",
    [
        {"@type": "WebSite", "url": "https://news.example.com/", "dateCreated": "2001-01-01"},
        {"@type": "BreadcrumbList", "datePublished": "2001-01-01"},
        {"@type": "Person", "name": "A. Writer", "datePublished": "2001-01-01"},
        {"@type": "Organization", "name": "News", "dateCreated": "2001-01-01"},
    ],
    ids=["website", "breadcrumbs", "person", "organization"],
)
def test_site_list_and_people_nodes_never_date_the_page(node: dict[str, Any]) -> None:
    meta = "<meta property='article:published_time' content='2020-08-08T00:00:00Z'>"
    assert _date(head=_ld(node) + meta) == ("2020-08-08", "meta:article:published_time")


@pytest.mark.parametrize(
    "key", ["author", "publisher", "isPartOf", "hasPart", "relatedLink", "comment", "review"]
)
def test_works_below_a_related_property_never_date_the_page(key: str) -> None:
    main = {
        "@type": "WebPage",
        "url": URL,
        "datePublished": "2020-09-09",
        key: [{"@type": "Article", "datePublished": "2017-01-01"}],
    }
    assert _date(head=_ld(main)) == ("2020-09-09", "json-ld")


def test_article_naming_the_page_beats_one_naming_another_page() -> None:
    other = {
        "@type": "NewsArticle",
        "url": "https://news.example.com/story/older-news",
        "datePublished": "2016-01-01",
    }
    ours = {
        "@type": "NewsArticle",
        "mainEntityOfPage": {"@type": "WebPage", "@id": URL + "/"},
        "datePublished": "2020-10-10",
    }
    assert _date(head=_ld(other) + _ld(ours)) == ("2020-10-10", "json-ld")


def test_webpage_naming_the_page_beats_an_article_naming_another() -> None:
    teaser = {"@type": "Article", "url": "https://other.example.org/x", "datePublished": "2016-1-1"}
    page = {"@type": "WebPage", "url": URL, "datePublished": "2020-11-11"}
    assert _date(head=_ld(teaser) + _ld(page)) == ("2020-11-11", "json-ld")


def test_a_lone_article_naming_another_url_still_dates_the_page() -> None:
    """An AMP or syndicated copy names its original: demoted, not dropped."""
    node = {"@type": "Article", "url": "https://amp.example.org/x", "datePublished": "2020-12-12"}
    assert _date(head=_ld(node)) == ("2020-12-12", "json-ld")


def test_page_match_through_canonical_link_and_relative_id() -> None:
    fetched = "https://news.example.com/story/big-news?utm_source=feed"
    canonical = f"<link rel='canonical' href='{URL}'>"
    other = {"@type": "BlogPosting", "@id": "https://x.example/p#a", "datePublished": "2016-1-1"}
    relative = {"@type": "BlogPosting", "@id": "/story/big-news#top", "datePublished": "2021-1-2"}
    head = canonical + _ld(other) + _ld(relative)
    assert _date(head=head, url=fetched) == ("2021-01-02", "json-ld")


def test_discussion_forum_posting_is_an_article() -> None:
    nodes = [
        {"@type": "WebPage", "datePublished": "2015-01-01"},
        {"@type": "DiscussionForumPosting", "datePublished": "2011-02-21T17:47:28+01:00"},
    ]
    assert _date(head=_ld(nodes)) == ("2011-02-21", "json-ld")


def test_modified_date_comes_from_the_main_entity_too() -> None:
    related = {
        "@type": "ItemList",
        "itemListElement": [{"@type": "Article", "dateModified": "2023-01-01"}],
    }
    main = {"@type": "Article", "datePublished": "2021-03-03", "dateModified": "2021-04-04"}
    page = extract_page(
        _page(head=_ld(related) + _ld(main)), url=URL, content_type="text/html", now=NOW
    )
    assert page.modified is not None and page.modified.date().isoformat() == "2021-04-04"


# --------------------------------------------------------------------------------------------
# <time>: the byline's, never a related post's
# --------------------------------------------------------------------------------------------

_RELATED = (
    "<div class='related-posts'><h3>Related</h3><ul>"
    "<li><a href='/a'>Older story</a> <time datetime='2019-01-01'>1 Jan 2019</time></li>"
    "<li><a href='/b'>Another</a> <time datetime='2019-02-02'>2 Feb 2019</time></li></ul></div>"
)
_BYLINE = "<div class='byline'>By A. Writer, <time datetime='2021-05-05'>5 May 2021</time></div>"


def test_related_posts_time_inside_the_article_loses_to_the_byline() -> None:
    body = f"<article>{_RELATED}<h1>Title</h1>{_BYLINE}<p>Text.</p></article>"
    assert _date(body) == ("2021-05-05", "time")


@pytest.mark.parametrize(
    "block",
    [
        "<aside><time datetime='2019-03-03'>3 Mar 2019</time></aside>",
        "<nav><time datetime='2019-03-03'>3 Mar 2019</time></nav>",
        "<div class='teaser'><time datetime='2019-03-03'>3 Mar 2019</time></div>",
        "<div id='comments'><p><time datetime='2019-03-03'>3 Mar 2019</time></p></div>",
        "<div class='more-stories'><time datetime='2019-03-03'>3 Mar 2019</time></div>",
        "<article class='card'><time datetime='2019-03-03'>3 Mar 2019</time></article>",
    ],
    ids=["aside", "nav", "teaser", "comments", "more-stories", "nested-article"],
)
def test_times_in_other_blocks_of_the_article_are_skipped(block: str) -> None:
    body = f"<article><h1>Title</h1>{block}<p>Text <time datetime='2021-06-06'>6 June</time></p>"
    assert _date(body + "</article>") == ("2021-06-06", "time")


def test_byline_time_beats_an_earlier_time_in_the_article_body() -> None:
    body = (
        "<article><p>The event of <time datetime='2020-01-01'>1 January</time>.</p>"
        f"<footer class='entry-meta'>{_BYLINE}</footer></article>"
    )
    assert _date(body) == ("2021-05-05", "time")


def test_the_articles_own_aside_byline_box_counts() -> None:
    body = (
        "<article><h1>Title</h1><aside class='meta'><p class='meta__row--posted'>"
        "<time datetime='2022-01-21'>21.01.2022 - 13:30</time></p></aside><p>Text.</p></article>"
    )
    head = "<meta name='Date' content='2022-1-26T14:32:06+02:00'>"
    assert _date(body, head) == ("2022-01-21", "time")


def test_site_footer_time_is_skipped_and_the_articles_footer_is_not() -> None:
    site = "<footer><p>© <time datetime='2024-01-01'>2024</time></p></footer>"
    assert _date(f"<main><p>No date.</p></main>{site}")[1] != "time:page"
    own = "<article><p>Text.</p><footer><time datetime='2020-02-02'>2.2.2020</time></footer>"
    assert _date(own + "</article>" + site) == ("2020-02-02", "time")


def test_sidebar_outside_the_article_is_skipped_but_a_layout_wrapper_is_not() -> None:
    sidebar = "<div class='sidebar'><time datetime='2019-09-09'>9.9.2019</time></div>"
    assert _date(f"{sidebar}<div><p>Text.</p></div>")[1] != "time:page"
    wrapped = (
        "<div class='layoutTwoColumnsRightSidebar'><div id='artikelheader'><ul><li>"
        "<time datetime='2021-11-25 16:11'>25. November 2021</time></li></ul></div></div>"
    )
    assert _date(wrapped) == ("2021-11-25", "time:byline")


def test_taxonomy_classes_do_not_hide_a_date() -> None:
    body = (
        "<div class='post tag-related category-kommentar has-comments'>"
        "<div class='entry-meta'><time datetime='2020-03-03'>3.3.2020</time></div></div>"
    )
    assert _date(body) == ("2020-03-03", "time:byline")


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("29.04.2020, 12:01 Uhr", "2020-04-29"),
        ("March 3, 2011", "2011-03-03"),
        ("3rd of March 2011", "2011-03-03"),
        ("Publié le 29 juin 2019", "2019-06-29"),
        ("1er août 2020", "2020-08-01"),
        ("25. Dezember 2021", "2021-12-25"),
        ("3 de marzo de 2020", "2020-03-03"),
    ],
)
def test_time_without_a_datetime_attribute_is_read_from_its_text(text: str, want: str) -> None:
    body = f"<article><p class='date'><time>{text}</time></p><p>Text.</p></article>"
    assert _date(body) == (want, "time")


def test_visible_day_beats_a_different_datetime_attribute() -> None:
    body = (
        "<article><header><div class='time'><time datetime='2019-07-03T10:18:46Z'>"
        "Publié le 29 juin 2019</time></div></header><p>Text.</p></article>"
    )
    assert _date(body) == ("2019-06-29", "time")


def test_time_pubdate_beats_the_byline() -> None:
    body = f"<article>{_BYLINE}<p><time pubdate datetime='2021-04-04'>4.4.2021</time></p>"
    assert _date(body + "</article>") == ("2021-04-04", "time")


def test_page_level_time_ranks_below_the_url_date() -> None:
    body = "<div><p><time datetime='2020-01-20'>20.01.2020</time></p></div>"
    assert _date(body, url="https://blog.example.com/2019/05/06/post") == ("2019-05-06", "url")
    assert _date(body) == ("2020-01-20", "time:page")


def test_an_article_card_in_a_footer_or_aside_is_skipped() -> None:
    cards = (
        "<footer><article><time datetime='2019-04-04'>4.4.2019</time></article></footer>"
        "<aside class='meta'><article><time datetime='2019-05-05'>5.5.2019</time></article></aside>"
    )
    assert _date(cards + "<p>Text.</p>")[1] in (None, "htmldate")


def test_a_page_wrapped_in_a_form_still_has_dates() -> None:
    body = f"<form id='aspnetForm'><article>{_BYLINE}<p>Text.</p></article></form>"
    assert _date(body) == ("2021-05-05", "time")


# --------------------------------------------------------------------------------------------
# Microdata and hAtom in related blocks
# --------------------------------------------------------------------------------------------


def test_itemprop_in_a_related_card_is_skipped() -> None:
    card = (
        "<div class='related'><div itemscope itemtype='https://schema.org/NewsArticle'>"
        "<span itemprop='datePublished' content='2018-08-08'>8.8.2018</span></div></div>"
    )
    ours = "<span itemprop='datePublished' content='2021-09-09'>9.9.2021</span>"
    assert _date(f"{card}<div>{ours}</div>") == ("2021-09-09", "itemprop:datePublished")


def test_itemprop_in_an_article_footer_class_still_counts() -> None:
    body = (
        "<div class='article'><p>Text.</p><div class='footer'><span class='news-list-date'>"
        "<time itemprop='datePublished' datetime='2022-01-27'>27.01.2022</time></span></div></div>"
    )
    head = "<meta name='date' content='2022-01-21T15:38:44+01:00'>"
    assert _date(body, head) == ("2022-01-27", "itemprop:datePublished")


def test_microdata_meta_of_a_related_card_is_skipped() -> None:
    card = (
        "<aside><div itemscope itemtype='https://schema.org/Article'>"
        "<meta itemprop='datePublished' content='2018-01-01'></div></aside>"
    )
    head = "<meta name='date' content='2021-02-02'>"
    assert _date(card + "<p>Text.</p>", head) == ("2021-02-02", "meta:date")


def test_hatom_published_in_a_widget_is_skipped() -> None:
    widget = (
        "<div class='widget recent-posts'><span class='published' title='2018-05-05'>"
        "5 May</span></div>"
    )
    ours = "<div class='hentry'><span class='published' title='2021-05-05'>5 May</span></div>"
    assert _date(widget + ours) == ("2021-05-05", "hatom:published")


# --------------------------------------------------------------------------------------------
# htmldate only when the markup is silent
# --------------------------------------------------------------------------------------------


def test_htmldate_runs_only_when_the_markup_yields_no_date(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = page_module._htmldate_published

    def counting(html: str, url: str, now: datetime) -> datetime | None:
        calls.append(url)
        return real(html, url, now)

    monkeypatch.setattr(page_module, "_htmldate_published", counting)
    assert _date(f"<article>{_BYLINE}</article>")[1] == "time"
    assert calls == []
    assert _date("<div class='post'><p class='date'>Am 12.03.2021</p></div>")[1] == "htmldate"
    assert calls == [URL]


def _bounded_page(body: str) -> bytes:
    """``body`` after a tag with more attributes than the default bound (so the page is cut
    before it is parsed)."""
    attrs = " ".join(f"a{i}" for i in range(2 * DEFAULT_MAX_HTML_ATTRIBUTES))
    return _page(f"<span {attrs}>x</span>{body}")


@pytest.mark.parametrize(
    ("body", "want_source"),
    [
        (_page(head=_ld({"@type": "NewsArticle", "datePublished": "2021-01-15"})), "json-ld"),
        (
            _page(head="<meta property='article:published_time' content='2021-02-15'>"),
            "meta:article:published_time",
        ),
        (_page(f"<article>{_BYLINE}</article>"), "time"),
        (_page("<div class='post'><p class='date'>Am 12.03.2021</p></div>"), "htmldate"),
        (_page("<p>no date anywhere</p>"), None),
        # bounded: htmldate is skipped, by the stages as by extract_page
        (_bounded_page("<div class='post'><p class='date'>Am 12.03.2021</p></div>"), None),
        (_bounded_page(f"<article>{_BYLINE}</article>"), "time"),
    ],
    ids=["json-ld", "meta", "time", "htmldate", "none", "bounded-no-htmldate", "bounded-time"],
)
def test_date_stages_alone_give_extract_pages_dates(body: bytes, want_source: str | None) -> None:
    # benchmarks/bench_dates.py times the date stages on their own next to htmldate; what it
    # times must be what extract_page runs, family by family
    from benchmarks.bench_dates import date_stages

    page = extract_page(body, url=URL, content_type="text/html", now=NOW)
    assert page.date_source == want_source
    assert date_stages(body, URL, NOW) == (page.published, page.date_source)


# --------------------------------------------------------------------------------------------
# Shared dates set: held-out half against htmldate
# --------------------------------------------------------------------------------------------


def _half(file_name: str) -> str:
    """The split of benchmarks/bench_dates.py: parity of the SHA-1 of the file name."""
    return ("tuning", "held_out")[hashlib.sha1(file_name.encode()).digest()[-1] & 1]


def _decode_like_htmldate(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes

        best = from_bytes(body).best()
        return str(best) if best is not None else body.decode("utf-8", "replace")


def test_held_out_half_at_least_htmldate() -> None:
    labels = DATA / "dates" / "dates.jsonl"
    if not labels.exists():
        pytest.skip(f"shared data not present at {DATA}")
    import htmldate

    rows = [json.loads(line) for line in labels.open(encoding="utf-8")]
    held_out = [r for r in rows if _half(r["file"]) == "held_out"]
    assert 100 <= len(held_out) <= 150
    ours = theirs = 0
    for row in held_out:
        body = (DATA / "dates" / row["file"]).read_bytes()
        page = extract_page(body, url=row["url"], content_type="text/html")
        got = page.published.date().isoformat() if page.published else None
        ours += got == row["expected_date"]
        found = htmldate.find_date(
            _decode_like_htmldate(body), url=row["url"], original_date=True, extensive_search=True
        )
        theirs += found == row["expected_date"]
    n = len(held_out)
    assert ours >= theirs, f"held-out: citeguard {ours}/{n} vs htmldate {theirs}/{n}"


# --------------------------------------------------------------------------------------------
# Ages on the page, and htmldate over a weak source
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("vor 3 Tagen", 3),
        ("Aktualisiert vor einer Woche", 7),
        ("il y a 2 jours", 2),
        ("hace 4 días", 4),
        ("5 giorni fa", 5),
        ("2 dagen geleden", 2),
        ("3 days ago", 3),
        ("gestern, 14:30", 1),
    ],
)
def test_an_age_in_a_time_element_is_read_against_the_fetch_time(text: str, days: int) -> None:
    # htmldate reads none of these; the page was rendered when it was fetched (``now``)
    body = f"<article><p class='date'><time>{text}</time></p><p>Text.</p></article>"
    want = (NOW.date() - timedelta(days=days)).isoformat()
    assert _date(body) == (want, "time")


def test_words_that_are_no_age_give_no_date_from_a_time_element() -> None:
    body = "<article><p class='date'><time>Hier klicken</time></p><p>Text.</p></article>"
    assert _date(body)[1] != "time"


def test_htmldate_wins_over_a_weak_source_that_disagrees() -> None:
    # an embedded video's upload date against the page's printed day
    head = _ld({"@type": "VideoObject", "uploadDate": "2015-01-01"})
    body = "<div class='post'><p class='date'>Am 12.03.2021</p></div>"
    assert _date(body, head) == ("2021-03-12", "htmldate (over json-ld:other)")
    # where they agree, the page's own source keeps its name
    same = "<meta name='date' content='2021-03-12'>"
    assert _date(body, same) == ("2021-03-12", "meta:date")


def test_a_strong_source_or_the_url_day_is_not_second_guessed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(
        page_module,
        "_htmldate_published",
        lambda html, url, now: calls.append(url) or datetime(2001, 1, 1, tzinfo=UTC),
    )
    assert _date(head=_ld({"@type": "NewsArticle", "datePublished": "2021-01-15"})) == (
        "2021-01-15",
        "json-ld",
    )
    url = "https://blog.example.com/2019/05/06/post"
    assert _date("<p>x</p>", url=url) == ("2019-05-06", "url")
    assert calls == []

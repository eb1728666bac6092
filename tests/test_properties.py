"""Property tests: whatever the input, the parsers answer, stay inside it and stay bounded.

``parse_answer``, ``extract_page`` and the passage matchers read untrusted text. Hypothesis feeds
them arbitrary text and, more usefully, text built from the pieces their grammars react to
(markers, links, fences, tags, quotes, sentence ends), and checks what must always hold: no
exception, offsets that index the input, and output no larger than the input allows.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from citeguard.checks.passage import find_paraphrase, find_passage, prepare_text
from citeguard.parse import MAX_MARKER_RANGE, parse_answer
from citeguard.policy import FetchPolicy
from citeguard.web.page import _bound_html, extract_page

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

ANSWER_PIECES = [
    "[1]", "[2]", "[^1]", "[1, 2]", "[1-3]", "[0]", "[1-900]", "[a](https://a.example.com/x)",
    "[t][id]", "[id]: https://d.example.com/\n", "[1]: https://a.example.com/\n",
    "[2] https://b.example.com/two\n", "![img](x.png)", "[x](#frag)", "https://b.example.com/y",
    "www.example.org", "<https://e.example.com/>", "<a href='https://c.example.com/'>c</a>",
    "<a href=", "</a>", "javascript:alert(1)", "Sources:\n", "References:", "1. ", "2) ", "- ",
    "* ", "# ", "## ", "> ", "| a | b |\n", "|---|---|\n", "---\n", "```\n", "`", "~~~",
    "\n", "\n\n", " ", "\t", ". ", "! ", "? ", "...", "…", "。", "Dr. ", "e.g. ", "U.S. ", "J. ",
    '"', "“", "”", "‘", "’", "«", "»", "„", "「", "」", "(", ")", "[", "]", "<", ">", "*", "_",
    "\\", "word", "Claim", "rates rose", "3.5%", "2024", "\r\n", "\u200b",
]  # fmt: skip

answer_texts = st.one_of(
    st.text(max_size=400),
    st.lists(st.sampled_from(ANSWER_PIECES), max_size=80).map("".join),
)


@pytest.mark.timeout(120)
@SETTINGS
@given(answer_texts)
def test_parse_answer_stays_inside_its_text(text: str) -> None:
    answer = parse_answer(text)
    assert answer.text == text
    n = len(text)
    assert len(answer.claims) <= n
    assert len(answer.citations) <= MAX_MARKER_RANGE * (n // 3 + 1)
    previous_end = 0
    for i, claim in enumerate(answer.claims):
        assert claim.index == i
        assert 0 <= claim.start <= claim.end <= n
        assert text[claim.start : claim.end] == claim.text
        assert claim.text == claim.text.strip() and claim.text
        assert claim.start >= previous_end  # in order, never overlapping
        previous_end = claim.end
        for k in claim.citation_indices:
            assert answer.citations[k].claim_index == i
    for k, c in enumerate(answer.citations):
        assert c.index == k
        assert 0 <= c.start <= c.end <= n
        assert text[c.start : c.end] == c.marker
        assert c.claim_index is None or 0 <= c.claim_index < len(answer.claims)


structured_values = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=40),
    st.lists(st.one_of(st.text(max_size=30), st.integers(), st.none()), max_size=3),
)
structured_items = st.lists(
    st.one_of(
        st.dictionaries(
            st.sampled_from(["claim", "url", "quote", "other"]), structured_values, max_size=4
        ),
        structured_values,
    ),
    max_size=20,
)


@pytest.mark.timeout(120)
@SETTINGS
@given(structured_items)
def test_parse_answer_reads_any_structured_input(items: list[Any]) -> None:
    answer = parse_answer(items)
    for claim in answer.claims:
        assert answer.text[claim.start : claim.end] == claim.text
    for c in answer.citations:
        assert c.start == c.end == -1
        assert c.claim_index is None or 0 <= c.claim_index < len(answer.claims)


HTML_PIECES = [
    "<div>", "</div>", "<p>", "</p>", "<span>", "</span>", "<b>", "</b>", "<a href=x>", "</a>",
    "<ul><li>", "</li></ul>", "<table><tr><td>", "</td></tr></table>", "<svg>", "</svg>",
    "<math>", "<g>", "<foreignObject>", "<script>", "</script>", "<style>", "</style>", "<title>",
    "</title>", "<textarea>", "<noscript>", "</noscript>", "<select>", "<option>", "<template>",
    "<frameset>", "<plaintext>", "<br>", "<br/>", "<img src=x>", "<!--", "-->", "<![CDATA[",
    "]]>", "<!DOCTYPE html>", "<?x?>", "</>", "<", ">", '"', "'", "=", " a=1", ' b="c>d"',
    " color=red", ' hidden', ' style="display:none"', ' class="related"', "<article>",
    "</article>", "<main>", "<nav>", "<header>", "<h1>", "</h1>", "<html lang=en>", "<body a=1>",
    '<script type="application/ld+json">{"@type": "Article", "datePublished": "2024-01-02"}',
    '<meta property="article:published_time" content="2024-02-03">', "<time datetime=2024-03-04>",
    "words", " ", "\n", "&amp;", "&nbsp;", "\u00ad", "é", "日本",
]  # fmt: skip

html_bodies = st.one_of(
    st.binary(max_size=600),
    st.lists(st.sampled_from(HTML_PIECES), max_size=120).map(lambda ps: "".join(ps).encode()),
)
TIGHT = FetchPolicy(
    max_html_depth=6,
    max_html_nodes=40,
    max_html_attributes=2,
    max_jsonld_chars=50,
    max_html_chars=2_000,
)


@pytest.mark.timeout(120)
@SETTINGS
@given(
    html_bodies,
    st.sampled_from(["text/html", "application/pdf", "text/plain", None, "image/png"]),
    st.booleans(),
)
# found by a CI run: a plain-text body of only a byte-order mark was kind "text" with main_text ""
@example(b"\xfe\xff", "text/plain", False)
@example(b"\xef\xbb\xbf \n", "text/plain", True)
def test_extract_page_never_raises(body: bytes, content_type: str | None, tight: bool) -> None:
    page = extract_page(
        body,
        url="https://example.com/a",
        content_type=content_type,
        limits=TIGHT if tight else None,
    )
    assert page.kind in ("html", "pdf", "text", "unsupported", "empty")
    assert len(page.text) <= len(body)
    if page.main_text is not None:
        assert page.main_text


@pytest.mark.timeout(120)
@SETTINGS
@given(st.lists(st.sampled_from(HTML_PIECES), max_size=200).map("".join))
def test_bounded_html_is_never_longer(html: str) -> None:
    bounded, changed = _bound_html(html, TIGHT)
    assert len(bounded) <= len(html)
    if not changed:
        assert bounded is html  # a page within the bounds is parsed as it came


page_texts = st.one_of(
    st.text(max_size=500),
    st.lists(
        st.sampled_from(
            ["The rates rose", " by 3.5%", " in 2024", ". ", "\n", "“quoted”", "…", " not",
             "  ", "\u00ad", "ﬁ", "Müller", " said", "-\n", "[1]"]
        ),
        max_size=80,
    ).map("".join),
)  # fmt: skip


@pytest.mark.timeout(120)
@SETTINGS
@given(page_texts, page_texts)
def test_passage_matches_index_the_page(quote: str, page: str) -> None:
    prepared = prepare_text(page)
    for result in (find_passage(quote, prepared), find_paraphrase(quote, prepared)):
        assert 0.0 <= result.score <= 100.0
        if result.start >= 0:
            assert 0 <= result.start <= result.end <= len(page)
            assert page[result.start : result.end] == result.matched_text
        assert not result.found or result.start >= 0


# ---- bounded scans: the same matches as one finditer ------------------------------------------

from citeguard.checks.freshness import _CAVEAT_RE  # noqa: E402
from citeguard.parse.quotes import _QUOTE_PATTERNS  # noqa: E402
from citeguard.text import finditer_lines, finditer_windowed  # noqa: E402


def _spans(matches: Any) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group(0)) for m in matches]


@SETTINGS
@given(
    st.lists(
        st.sampled_from(
            [
                "as of ",
                "2 December 2026",
                "Dec 2026",
                " ",
                "x",
                ".",
                "\n",
                "checked on ",
                "2026-12-02",
                "ab",
            ]
        ),
        max_size=80,
    ),
    st.integers(min_value=1, max_value=40),
)
def test_windowed_scan_matches_finditer_for_short_matches(parts: list[str], window: int) -> None:
    """With matches shorter than the overlap, the windowed scan returns what finditer does,
    for a window as small as one character (every boundary case of the step logic)."""
    text = "".join(parts)
    want = _spans(_CAVEAT_RE.finditer(text))
    got = _spans(finditer_windowed(_CAVEAT_RE, text, overlap=64, window=window))
    assert got == want


@SETTINGS
@given(
    st.lists(
        st.sampled_from(
            ['"', "“", "”", "„", "«", "»", "‘", "’", "a", " word", "\n", "=", "「", "」"]
        ),
        max_size=120,
    ),
    st.integers(min_value=1, max_value=30),
)
def test_line_scan_matches_finditer_exactly(parts: list[str], window: int) -> None:
    """Every quote pattern, scanned in runs of whole lines, finds exactly finditer's matches."""
    text = "".join(parts)
    for pattern, _ in _QUOTE_PATTERNS:
        assert _spans(finditer_lines(pattern, text, window=window)) == _spans(
            pattern.finditer(text)
        )


def test_windowed_scan_steps_are_bounded() -> None:
    """A 1 MB text with no match is searched in steps of window + overlap characters, never
    as one call over the whole text (the event loop waited 80 ms for that one call)."""
    text = "word " * 200_000
    seen: list[int] = []

    class Spy:
        def search(self, s: str, pos: int, endpos: int) -> None:
            seen.append(endpos - pos)
            return None

        def finditer(self, s: str) -> Any:  # pragma: no cover - the short-text path only
            raise AssertionError("one call over the whole text")

    assert list(finditer_windowed(Spy(), text, overlap=512)) == []  # type: ignore[arg-type]
    assert seen and max(seen) <= (1 << 15) + 512
    assert sum(seen) >= len(text)

"""Lists and code as real answers write them (issue 33, family 3): a sources list broken with
``<br>`` after a table or with ``&nbsp;``, a source's URL on the line under its title, CSS
attribute selectors in prose and code, inline code of any backtick run, and URLs whose path
holds a pair of single quotes. Each case failed on the parser before; the hostile inputs of the
new paths stay linear."""

from __future__ import annotations

from typing import Any

import pytest

from citeguard.models import Answer
from citeguard.parse import parse_answer

BODY = "Rates rose in 2024 [1]. Jobs grew [2]."
CITED = [
    ("[1]", "https://a.org/1", "Rates rose in 2024 [1]."),
    ("[2]", "https://b.org/2", "Jobs grew [2]."),
]


def parse(text: Any) -> Answer:
    """parse_answer, plus the offset contract every answer keeps."""
    answer = parse_answer(text)
    for c in answer.citations:
        assert answer.text[c.start : c.end] == c.marker, c
    for cl in answer.claims:
        assert answer.text[cl.start : cl.end] == cl.text
    return answer


def cited(answer: Answer) -> list[tuple[str, str, str | None]]:
    """(marker, url, the claim's text) of every citation."""
    return [
        (c.marker, c.url, answer.claims[c.claim_index].text if c.claim_index is not None else None)
        for c in answer.citations
    ]


def codes(answer: Answer) -> list[str]:
    return [f.code for f in answer.findings]


# --------------------------------------------------------------------------------------------
# <br> and friends as the line breaks of a sources list
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        # the whole answer, table first, joined with <br> (the row's closing "|" ends it)
        "| Year | Rate |<br>|---|---|<br>| 2024 | 5% |<br><br>"
        + BODY
        + "<br><br>Sources:<br>[1] https://a.org/1<br>[2] https://b.org/2",
        # a non-breaking space after the break or the number
        BODY + "<br><br>Sources:<br>&nbsp;[1] https://a.org/1<br>&nbsp;[2] https://b.org/2",
        BODY + "<br><br>Sources:<br>[1]&nbsp;https://a.org/1<br>[2]&#160;https://b.org/2",
        # Unicode line separators
        BODY + "\u2028\u2028Sources:\u2028[1] https://a.org/1\u2028[2] https://b.org/2",
        # a source's title, then its URL on the next line
        BODY
        + "<br><br>Sources:<br>[1] Rates report<br>https://a.org/1<br>[2] Jobs<br>https://b.org/2",
        BODY + "\n\nSources:\n[1] Rates report\nhttps://a.org/1\n[2] Jobs report\nhttps://b.org/2",
        BODY + "\n\nSources:\n1. Rates report\nhttps://a.org/1\n2. Jobs report\nhttps://b.org/2",
    ],
)
def test_a_sources_list_broken_as_chat_uis_break_it_resolves_its_markers(text: str) -> None:
    a = parse(text)
    assert cited(a) == CITED
    assert codes(a) == []
    assert a.references == {"1": "https://a.org/1", "2": "https://b.org/2"}


def test_a_break_inside_a_table_cell_stays_in_the_cell() -> None:
    text = "| Item | Note |\n|---|---|\n| Rates | rose<br>fast [1] |\n\n[1] https://a.org/1"
    a = parse(text)
    assert [c.text for c in a.claims] == ["| Item | Note |", "| Rates | rose<br>fast [1] |"]
    assert cited(a) == [("[1]", "https://a.org/1", "| Rates | rose<br>fast [1] |")]


def test_a_titled_entry_outside_a_sources_block_takes_no_unindented_line() -> None:
    # no "Sources:" heading: "[1] Rates report" names no URL, and the next line is prose
    a = parse("Rates rose [1].\n\n[1] Rates report\nhttps://a.org/1 is where it is.")
    assert a.references == {}
    assert "unresolved_marker" in codes(a)


# --------------------------------------------------------------------------------------------
# CSS attribute selectors are no citation markers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "selector",
    [
        '[role="dialog"][aria-modal="true"]',
        "[role=dialog][open]",
        'input[type="checkbox"][checked]',
        "[data-state][data-open]",
        "[href^='http' i][target]",
    ],
)
@pytest.mark.parametrize(
    "where",
    [
        "Select it with {} and focus it [1].",
        "Select it with `{}` and focus it [1].",
        "Select it with ``{}`` and focus it [1].",
        "Select it with ```{}``` and focus it [1].",
        # a fence indented inside a list item
        "Style it:\n\n1. Add the rule:\n    ```css\n    {} {{ display: block }}\n    ```\n\n"
        "It works [1].",
    ],
)
def test_css_attribute_selectors_are_not_markers(selector: str, where: str) -> None:
    a = parse(where.format(selector) + "\n\n[1] https://a.org/1")
    assert codes(a) == []
    assert [(c.marker, c.url) for c in a.citations] == [("[1]", "https://a.org/1")]


def test_a_marker_right_after_a_selector_is_still_read() -> None:
    a = parse('It matches [role="dialog"][1].\n\n[1] https://a.org/1')
    assert [(c.marker, c.url, c.claim_index) for c in a.citations] == [
        ("[1]", "https://a.org/1", 0)
    ]


@pytest.mark.parametrize(
    ("text", "undefined"),
    [
        ("Rates rose [Reuters][nyt].", "nyt"),  # an id-like reference still counts
        ("Rates rose [see][ref-2].", "ref-2"),
    ],
)
def test_reference_ids_that_are_no_selectors_stay_unresolved(text: str, undefined: str) -> None:
    a = parse(text)
    assert [f.details["label"] for f in a.findings if f.code == "unresolved_marker"] == [undefined]


def test_inline_code_of_longer_backtick_runs_hides_its_markers() -> None:
    a = parse("Index it with ``a[1]`` or ```b[2]``` [1].\n\n[1] https://a.org/1")
    assert [c.marker for c in a.citations] == ["[1]"]
    assert codes(a) == []


# --------------------------------------------------------------------------------------------
# A pair of single quotes in a URL's path
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "url"),
    [
        ("See https://example.org/x/'quoted' now.", "https://example.org/x/'quoted'"),
        ("See https://example.org/x/'quoted'.", "https://example.org/x/'quoted'"),
        ("See https://example.org/search?q='a', then.", "https://example.org/search?q='a'"),
        (
            "Rates rose [1].\n\n[1] https://en.wikipedia.org/wiki/The_'Quoted'",
            "https://en.wikipedia.org/wiki/The_'Quoted'",
        ),
        # one quote, or a URL in quotes: the quote is prose
        ("Open 'https://a.org/x' now.", "https://a.org/x"),
        ("See https://a.org/x'.", "https://a.org/x"),
        (
            "See https://en.wikipedia.org/wiki/O'Brien's_law.",
            "https://en.wikipedia.org/wiki/O'Brien's_law",
        ),
    ],
)
def test_a_closing_single_quote_in_a_url_is_kept(text: str, url: str) -> None:
    assert [c.url for c in parse(text).citations] == [url]


# --------------------------------------------------------------------------------------------
# The new paths stay linear
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "text",
    [
        "| a " + "<br>" * 100_000 + "|",
        "| a |" + "<br>| b " * 50_000,
        "|" + " " * 100_000 + "<br>" * 1000,
        "&nbsp;" * 100_000,
        "\u2028" * 200_000,
        "`" * 100_000,
        "``a` " * 50_000,
        "`a ``" * 50_000 + "[1]",
        "`" * 1000 + "x" + "``" * 10_000,
        '[role="dialog"]' * 20_000,
        "[a=" + '"' * 100_000,
        '[x="' + " " * 100_000 + "][y]",
        "[data-a][data-b]" * 20_000,
        "https://x.org/" + "'" * 100_000,
        "https://x.org/" + "a'" * 50_000 + ".",
        "Sources:\n" + "[1] t\nhttps://a.org/1\n" * 20_000,
    ],
    ids=lambda t: repr(t[:10]),
)
def test_new_paths_stay_linear(text: str) -> None:
    assert parse_answer(text).text == text

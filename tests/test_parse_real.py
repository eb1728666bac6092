"""Answer parsing on real AI-search answers, not only tidy ones (issue 13, item 3).

One group per family of mess found in the wild: ``<br>`` line breaks, numbers in brackets that are
data, markers glued to words, lead-in sentences, backslash escapes in URLs, trailing punctuation
and URLs inside quotations. Each group ends with tidy inputs that must read as they always did.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from citeguard.models import Answer, Severity
from citeguard.parse import parse_answer


def parse(text: Any, **kwargs: Any) -> Answer:
    """parse_answer, plus the offset contract every answer keeps."""
    answer = parse_answer(text, **kwargs)
    for c in answer.citations:
        assert answer.text[c.start : c.end] == c.marker, c
    for i, cl in enumerate(answer.claims):
        assert cl.index == i
        assert answer.text[cl.start : cl.end] == cl.text
        assert cl.text == cl.text.strip() and cl.text
        for k in cl.citation_indices:
            assert answer.citations[k].claim_index == i
    return answer


def codes(answer: Answer) -> list[str]:
    return [f.code for f in answer.findings]


def cites(answer: Answer) -> list[tuple[str, str, int | None]]:
    """(marker, url, claim index) of every citation, in order."""
    return [(c.marker, c.url, c.claim_index) for c in answer.citations]


def claims(answer: Answer) -> list[str]:
    return [cl.text for cl in answer.claims]


# --------------------------------------------------------------------------------------------
# 1. <br> as the line break of a sources list
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sources",
    [
        "**Sources:**<br>[1] https://a.org/1<br>[2] https://b.org/2",
        "Sources:<br/>1. Labour report — https://a.org/1<br/>2. Price index - https://b.org/2",
        "References<br />[1]: https://a.org/1<br />[2]: https://b.org/2",
        "SOURCES:<BR>[1] [Labour report](https://a.org/1)<BR>[2] [CPI](https://b.org/2)",
        # the first entry on the heading's line
        "Sources: [1] https://a.org/1<br>[2] https://b.org/2",
    ],
)
def test_br_separated_sources_list_is_a_reference_list(sources: str) -> None:
    a = parse(f"Unemployment fell to 3.9% [1]. Prices rose 2.4% [2].<br><br>{sources}")
    assert claims(a) == ["Unemployment fell to 3.9% [1].", "Prices rose 2.4% [2]."]
    assert cites(a) == [("[1]", "https://a.org/1", 0), ("[2]", "https://b.org/2", 1)]
    assert a.references == {"1": "https://a.org/1", "2": "https://b.org/2"}
    assert a.findings == []


def test_br_sources_after_a_blank_line_and_footnotes() -> None:
    text = (
        "Coffee is popular.[^1] Tea is older.[^2]\n\n"
        "[^1]: Smith 2021, https://example.org/coffee<br>[^2]: https://tea.example.org/h"
    )
    a = parse(text)
    assert cites(a) == [
        ("[^1]", "https://example.org/coffee", 0),
        ("[^2]", "https://tea.example.org/h", 1),
    ]
    assert a.findings == []


def test_br_list_items_are_separate_claims() -> None:
    a = parse(
        "- Sales rose 4% [1]<br>- Costs fell [2]\n\n[1]: https://a.org/1\n[2]: https://a.org/2"
    )
    assert claims(a) == ["Sales rose 4% [1]", "Costs fell [2]"]
    assert [c.claim_index for c in a.citations] == [0, 1]


@pytest.mark.parametrize(
    ("text", "expected_claims"),
    [
        # a <br> in a table cell breaks the cell's line, not the row
        (
            "| Year | Note |\n|---|---|\n| 2023 | up<br>down [1] |\n\n[1]: https://a.org/1",
            ["| Year | Note |", "| 2023 | up<br>down [1] |"],
        ),
        # a <br> before a real line break adds no paragraph break
        (
            "Rates rose<br>\nsharply in May [1].\n\n[1]: https://a.org/1",
            ["Rates rose<br>\nsharply in May [1]."],
        ),
        # inside inline code it is code
        (
            "Use `a<br>b` to break lines [1].\n\n[1]: https://a.org/1",
            ["Use `a<br>b` to break lines [1]."],
        ),
    ],
)
def test_br_left_alone_where_it_is_no_line_break(text: str, expected_claims: list[str]) -> None:
    a = parse(text)
    assert claims(a) == expected_claims
    assert cites(a) == [("[1]", "https://a.org/1", len(expected_claims) - 1)]
    assert a.findings == []


def test_tidy_sources_list_without_br_unchanged() -> None:
    a = parse("Rates rose [1].\n\nSources:\n[1] https://a.org/1\n[2] https://b.org/2\n")
    assert cites(a) == [("[1]", "https://a.org/1", 0)]
    assert codes(a) == ["unused_reference"]


# --------------------------------------------------------------------------------------------
# 2. Numbers in brackets that are data, not markers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "In NumPy you build one with np.array([1, 2, 3]) and read a[1] back.",
        "Then x = [1, 2, 3] and y = x[1] gives 2.",
        "import numpy as np\na = np.array([1, 2, 3])\nprint(a[1])",  # fences lost
        "The first element is arr[0] and the second is arr[1].",
        "Set arr[2] = 5 before the loop.",
        "Read m[0][1] or m[i][j] from the matrix.",
        "Use my_list[2] or df.iloc[1] in pandas.",
        'The payload is {"ids": [1, 2, 3]} and nested = [[1, 2], [3, 4]].',
        "Call [3, 1, 2].sort() to sort in place.",
        'Select the modal with div[role="dialog"] and its first button.',
        "The ionic liquid [EMIM][TfO] dissolves cellulose, unlike [BMIM][PF6].",
    ],
)
def test_code_and_formulas_are_not_citations(text: str) -> None:
    a = parse(text)
    assert a.citations == []
    assert a.findings == []  # no "dangling marker" either
    assert all(cl.quotes == [] for cl in a.claims if "dialog" in cl.text)


@pytest.mark.parametrize(
    ("text", "data", "reason"),
    [
        ("The list [1, 2, 3] is already sorted.", ["[1, 2, 3]"], "'list'"),
        (
            "For the input [1, 2, 3], the function returns [1, 4, 9].",
            ["[1, 2, 3]", "[1, 4, 9]"],
            "it follows",
        ),
        ("Given [3, 1, 2], sorted() gives a new list.", ["[3, 1, 2]"], "ascending"),
        ("Studies [1, 2] show that the effect is small.", ["[1, 2]"], "goes on"),
    ],
)
def test_value_lists_are_data_with_an_info_finding(text: str, data: list[str], reason: str) -> None:
    a = parse(text)
    assert a.citations == []
    assert codes(a) == ["bracket_data_assumed"] * len(data)
    assert [f.details["marker"] for f in a.findings] == data
    assert all(f.severity is Severity.INFO for f in a.findings)
    assert reason in a.findings[0].message


def test_value_list_beside_a_real_citation() -> None:
    text = (
        "Sorting [3, 1, 2] takes O(n log n) comparisons [1].\n\n"
        "[1]: https://en.wikipedia.org/wiki/Sorting_algorithm"
    )
    a = parse(text)
    assert cites(a) == [("[1]", "https://en.wikipedia.org/wiki/Sorting_algorithm", 0)]
    assert codes(a) == ["bracket_data_assumed"]


def test_tidy_markers_next_to_data_are_unchanged() -> None:
    text = (
        "GDP grew [1, 2, 3]. Output rose[2]. The U.S.[1] and COVID-19[3] grew, as markets[1][3] "
        "did. Demand rose [1-2].\n\n"
        "[1]: https://a.org/1\n[2]: https://a.org/2\n[3]: https://a.org/3"
    )
    a = parse(text)
    assert [(c.marker, c.label, c.claim_index) for c in a.citations] == [
        ("[1, 2, 3]", "1", 0),
        ("[1, 2, 3]", "2", 0),
        ("[1, 2, 3]", "3", 0),
        ("[2]", "2", 1),
        ("[1]", "1", 2),
        ("[3]", "3", 2),
        ("[1]", "1", 2),
        ("[3]", "3", 2),
        ("[1-2]", "1", 3),
        ("[1-2]", "2", 3),
    ]
    assert a.findings == []


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        ("Rates rose [1, 2].", ["1", "2"]),  # the reference list was lost: still an error
        ("GDP grew [1, 2] in 2024.\n\n[1]: https://a.org/1", ["2"]),  # one is listed
        ("As [the paper][p9] shows.", ["p9"]),
        ("As the [Guardian][G] reported.", ["g"]),
    ],
)
def test_dangling_markers_are_still_unresolved(text: str, labels: list[str]) -> None:
    a = parse(text)
    assert codes(a) == ["unresolved_marker"] * len(labels)
    assert [f.details["label"] for f in a.findings] == labels


# --------------------------------------------------------------------------------------------
# 3. Markers glued to the preceding word (a chat UI's superscripts, copied)
# --------------------------------------------------------------------------------------------

_THREE = "\n\nSources:\n1. https://a.org/1\n2. https://b.org/2\n3. https://c.org/3\n"


def test_glued_markers_with_a_sources_list() -> None:
    a = parse("Prices rose in global markets13. Growth slowed2." + _THREE)
    assert claims(a) == ["Prices rose in global markets13.", "Growth slowed2."]
    assert [(c.kind, c.marker, c.label, c.url, c.claim_index) for c in a.citations] == [
        ("numbered", "1", "1", "https://a.org/1", 0),
        ("numbered", "3", "3", "https://c.org/3", 0),
        ("numbered", "2", "2", "https://b.org/2", 1),
    ]
    assert codes(a) == ["glued_marker_assumed"] * 2
    first, second = a.findings
    assert (first.severity, first.claim_index, first.details["labels"]) == (
        Severity.WARNING,
        0,
        ["1", "3"],
    )
    assert "[1][3]" in first.message and "'markets'" in first.message
    assert (second.claim_index, second.details["labels"], second.details["word"]) == (
        1,
        ["2"],
        "slowed",
    )


def test_glued_markers_make_a_trailing_numbered_list_the_references() -> None:
    text = (
        "Solar capacity doubled1. Wind grew too2.\n\n"
        "1. IEA — https://iea.org/r\n2. GWEC — https://gwec.net/w\n"
    )
    a = parse(text)
    assert cites(a) == [("1", "https://iea.org/r", 0), ("2", "https://gwec.net/w", 1)]
    assert claims(a) == ["Solar capacity doubled1.", "Wind grew too2."]
    assert codes(a) == ["glued_marker_assumed"] * 2


def test_glued_markers_in_list_items_and_whole_numbers() -> None:
    text = (
        "- Demand for copper rose sharply12\n- Supply lagged3\n- Inflation in Europe eased14,\n"
        "  while the dollar held12.\n\nSources:\n"
        + "".join(f"[{n}] https://a.org/{n}\n" for n in (1, 2, 3, 12, 14))
    )
    a = parse(text)
    # "12" is [12] when the list has a 12 (the whole number wins), else [1][2]
    assert [(c.marker, c.label, c.claim_index) for c in a.citations] == [
        ("12", "12", 0),
        ("3", "3", 1),
        ("14", "14", 2),
        ("12", "12", 2),
    ]
    assert codes(a) == ["glued_marker_assumed"] * 4 + ["unused_reference"] * 2


def test_glued_digits_split_when_the_whole_number_is_not_listed() -> None:
    a = parse("Demand for copper rose sharply12." + _THREE)
    assert [c.marker for c in a.citations] == ["1", "2"]
    assert [c.start for c in a.citations] == [30, 31]


@pytest.mark.parametrize(
    "body",
    [
        "COVID19 cases rose.",  # an acronym and its number
        "Covid19 cases fell.",
        "Most Covid19.",
        "Water is H2O.",
        "Save it as mp3.",
        "It happened in 2024.",
        "Install Python3.",
        "Growth was strong, growth2.5 even.",  # a decimal, not a marker
        "Prices rose in global markets13 and beyond.",  # not at a clause's end
    ],
)
def test_real_words_and_numbers_are_not_glued_markers(body: str) -> None:
    a = parse(body + _THREE)
    assert a.citations == []
    assert codes(a) == ["unused_reference"] * 3


@pytest.mark.parametrize(
    "text",
    [
        "Prices rose in global markets13.",  # no reference list
        "Prices rose in global markets13.\n\nSources:\n1. https://a.org/1\n2. https://b.org/2\n",
        "Prices rose in global markets13. Output grew [2]." + _THREE,  # bracketed markers exist
        "The ratio is `markets13`." + _THREE,  # code
    ],
)
def test_glued_reading_needs_a_plausible_reference_list(text: str) -> None:
    a = parse(text)
    assert "glued_marker_assumed" not in codes(a)
    assert all(c.marker.startswith("[") for c in a.citations)


# --------------------------------------------------------------------------------------------
# 4. Lead-in sentences are no claims; their links go to the previous claim
# --------------------------------------------------------------------------------------------


_BLS = "https://bls.gov/x"


@pytest.mark.parametrize(
    ("lead_in", "marker", "url"),
    [
        (
            "For more information, see [the BLS release](https://bls.gov/x).",
            "[the BLS release](https://bls.gov/x)",
            _BLS,
        ),
        ("For more details, visit https://bls.gov/x.", _BLS, _BLS),
        ("\n\nRead more at https://bls.gov/x.", _BLS, _BLS),
        ("\n\nSource: [2]", "[2]", "https://a.org/2"),
        ("Source: Reuters [2]", "[2]", "https://a.org/2"),
        ("(Source: [2])", "[2]", "https://a.org/2"),
        ("See [2] for details.", "[2]", "https://a.org/2"),
        ("Data from: [2]", "[2]", "https://a.org/2"),
    ],
)
def test_lead_in_citations_go_to_the_previous_claim(lead_in: str, marker: str, url: str) -> None:
    refs = "\n\n[1]: https://a.org/1\n[2]: https://a.org/2"
    a = parse(f"Unemployment fell to 3.9% in May [1]. {lead_in}{refs}")
    assert claims(a) == ["Unemployment fell to 3.9% in May [1]."]
    assert cites(a) == [("[1]", "https://a.org/1", 0), (marker, url, 0)]
    assert codes(a) == ([] if marker == "[2]" else ["unused_reference"])


def test_see_also_paragraph_with_several_links() -> None:
    text = (
        "Rust guarantees memory safety without a garbage collector [1].\n\n"
        "See also: [The Book](https://doc.rust-lang.org/book/), "
        "[Rustonomicon](https://doc.rust-lang.org/nomicon/).\n\n"
        "[1]: https://a.org/1"
    )
    a = parse(text)
    assert claims(a) == ["Rust guarantees memory safety without a garbage collector [1]."]
    assert cites(a) == [
        ("[1]", "https://a.org/1", 0),
        ("[The Book](https://doc.rust-lang.org/book/)", "https://doc.rust-lang.org/book/", 0),
        (
            "[Rustonomicon](https://doc.rust-lang.org/nomicon/)",
            "https://doc.rust-lang.org/nomicon/",
            0,
        ),
    ]


def test_lead_in_with_no_claim_before_it_is_a_reference_without_claim() -> None:
    a = parse("For more details, visit https://x.org/a.")
    assert a.claims == []
    assert cites(a) == [("https://x.org/a", "https://x.org/a", None)]


@pytest.mark.parametrize(
    ("text", "expected_claims"),
    [
        ("Sources say jobs grew [2].", ["Sources say jobs grew [2]."]),
        (
            "Via satellite data, NASA found ice loss [1].",
            ["Via satellite data, NASA found ice loss [1]."],
        ),
        ("According to [1], rates rose.", ["According to [1], rates rose."]),
        ("See [1]: prices fell sharply.", ["See [1]: prices fell sharply."]),
        ("See the 2023 report [1].", ["See the 2023 report [1]."]),
        # a bare "See X and Y." stays a claim (no "more", "also", "details": no pointer)
        (
            "See [t](https://a.org/t) and [u](https://a.org/u).",
            ["See [t](https://a.org/t) and [u](https://a.org/u)."],
        ),
    ],
)
def test_sentences_that_say_something_stay_claims(text: str, expected_claims: list[str]) -> None:
    a = parse(text + "\n\n[1]: https://a.org/1\n[2]: https://a.org/2")
    assert claims(a) == expected_claims
    assert all(c.claim_index == 0 for c in a.citations)


def test_sources_line_listing_urls_is_still_the_reference_list() -> None:
    a = parse("Rates rose.\nSources: https://a.org/x, https://b.org/y")
    assert claims(a) == ["Rates rose."]
    assert [c.claim_index for c in a.citations] == [None, None]


# --------------------------------------------------------------------------------------------
# 5. CommonMark backslash escapes in link destinations
# --------------------------------------------------------------------------------------------

_MERCURY = "https://en.wikipedia.org/wiki/Mercury_(planet)"


@pytest.mark.parametrize(
    "text",
    [
        r"Mercury is the smallest planet [Mercury](https://en.wikipedia.org/wiki/Mercury_\(planet\)).",
        "Mercury is the smallest planet [1].\n\n"
        r"[1]: https://en.wikipedia.org/wiki/Mercury_\(planet\)",
        "Mercury is the smallest planet [1].\n\n"
        r"[1]: <https://en.wikipedia.org/wiki/Mercury_\(planet\)>",
        "Mercury is the smallest planet [1].\n\nSources:\n"
        r"[1] Mercury (planet) (https://en.wikipedia.org/wiki/Mercury_\(planet\)).",
        r"Mercury is the smallest planet (https://en.wikipedia.org/wiki/Mercury_\(planet\)).",
    ],
)
def test_escaped_parentheses_are_unescaped(text: str) -> None:
    a = parse(text)
    assert len(a.citations) == 1
    c = a.citations[0]
    assert (c.url, c.normalized_url, c.claim_index) == (_MERCURY, _MERCURY, 0)
    assert "%5C" not in (c.normalized_url or "")
    assert a.findings == []


@pytest.mark.parametrize(
    ("text", "url"),
    [
        (
            r"Per the [guide](https://example.org/style\_guide\_v2).",
            "https://example.org/style_guide_v2",
        ),
        (r"Per https://example.org/some\_page today.", "https://example.org/some_page"),
        (r"Per [q](https://example.org/s?q=a\&b) today.", "https://example.org/s?q=a&b"),
        (r"Per [q](https://example.org/s?q=a\&amp;b) today.", "https://example.org/s?q=a&amp;b"),
        (r"Per [a](https://example.org/a\)b) today.", "https://example.org/a)b"),
        ("Per [x](https://x.org/?a=1&amp;b=2) today.", "https://x.org/?a=1&b=2"),  # tidy
    ],
)
def test_escapes_in_destinations_and_bare_urls(text: str, url: str) -> None:
    a = parse(text)
    assert [c.url for c in a.citations] == [url]
    assert a.citations[0].marker in text  # the marker is the text as written


# --------------------------------------------------------------------------------------------
# 6. Trailing punctuation at the end of a URL (GitHub's autolink rule)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "url"),
    [
        ("The note is at https://example.com/a.", "https://example.com/a"),
        ("The note is at https://example.com/a_ now.", "https://example.com/a"),
        ("The note is at https://example.com/a_.", "https://example.com/a"),
        ("The note is at https://example.com/a_b_ now.", "https://example.com/a_b"),
        ("The note is at https://example.com/a~.", "https://example.com/a"),
        ("The note is at https://example.com/a?!", "https://example.com/a"),
        ('The note is at "https://example.com/a".', "https://example.com/a"),
        ("The note is at ‘https://example.com/a’.", "https://example.com/a"),
        ("The note is at 'https://example.com/a'.", "https://example.com/a"),
        (
            "The note (https://en.wikipedia.org/wiki/Foo_(bar)).",
            "https://en.wikipedia.org/wiki/Foo_(bar)",
        ),
        ("The note is at https://example.com/a).", "https://example.com/a"),
        ("The note is at https://example.com/?q=1&amp; now.", "https://example.com/?q=1"),
        ("The note is at <https://example.com/a.> now.", "https://example.com/a."),  # delimited
        ("The note is at https://example.com/a_b now.", "https://example.com/a_b"),  # tidy
        ("The note is at https://x.org/a/b/?q=1#frag now.", "https://x.org/a/b/?q=1#frag"),
    ],
)
def test_trailing_punctuation_of_bare_urls(text: str, url: str) -> None:
    a = parse(text)
    assert [c.url for c in a.citations] == [url]
    assert a.citations[0].kind == "bare_url"


@pytest.mark.parametrize(
    ("entry", "url"),
    [
        ("[1] https://example.com/a_", "https://example.com/a"),
        ("[1] https://example.com/a.", "https://example.com/a"),
        ("1. Title — https://example.com/a.", "https://example.com/a"),
        ("[1]: https://example.com/a'", "https://example.com/a"),
        ("- [1] Title, “https://example.com/a”.", "https://example.com/a"),
        ('[1] "Title", https://example.com/a".', "https://example.com/a"),
        ("[1] Title (https://example.com/a_(b)).", "https://example.com/a_(b)"),
        ("[1] Title (https://example.com/a).", "https://example.com/a"),
        ("[1]: <https://example.com/a.>", "https://example.com/a."),
    ],
)
def test_trailing_punctuation_in_reference_lists(entry: str, url: str) -> None:
    a = parse(f"Rates rose [1].\n\nSources:\n{entry}\n")
    assert cites(a) == [("[1]", url, 0)]
    assert a.findings == []


# --------------------------------------------------------------------------------------------
# 7. A URL inside a quoted passage is part of the quote
# --------------------------------------------------------------------------------------------


def test_url_inside_a_quote_is_quote_text() -> None:
    text = (
        'The manual says "configuration is described at https://x.example/y in detail" [1].\n\n'
        "[1]: https://docs.example.org/manual"
    )
    a = parse(text)
    quote = "configuration is described at https://x.example/y in detail"
    assert cites(a) == [("[1]", "https://docs.example.org/manual", 0)]
    assert a.claims[0].quotes == [quote]
    assert a.citations[0].quote == quote


@pytest.mark.parametrize(
    ("text", "quote"),
    [
        (
            "The FAQ states: “... as described at https://x.example/y, tokens expire ...”",
            "... as described at https://x.example/y, tokens expire ...",
        ),
        (
            "Le guide précise « les détails sont sur https://x.example/fr/guide » ici.",
            "les détails sont sur https://x.example/fr/guide",
        ),
        (
            "Das Handbuch sagt „siehe https://x.example/de für Details“ dazu.",
            "siehe https://x.example/de für Details",
        ),
    ],
)
def test_quoted_urls_are_no_citations(text: str, quote: str) -> None:
    a = parse(text)
    assert a.citations == []
    assert a.claims[0].quotes == [quote]


@pytest.mark.parametrize(
    ("text", "url", "quote"),
    [
        ('It said "https://x.org/a".', "https://x.org/a", None),  # the quote is only the URL
        ("He said “prices rose” (https://x.org/a).", "https://x.org/a", "prices rose"),
        (
            "“According to [the IEA](https://iea.org/r), demand rose” in 2024.",
            "https://iea.org/r",
            None,
        ),
        ("Unclosed “quote at https://x.org/a stays a link.", "https://x.org/a", None),
    ],
)
def test_urls_outside_quotes_or_linked_stay_citations(
    text: str, url: str, quote: str | None
) -> None:
    a = parse(text)
    assert [c.url for c in a.citations] == [url]
    if quote is not None:
        assert a.citations[0].quote == quote


def test_attribute_values_are_neither_urls_nor_quotes() -> None:
    a = parse(
        'Style links with a[href="https://example.org/x"] or img src=https://example.org/i.png.'
    )
    assert a.citations == []
    assert a.claims[0].quotes == []


# --------------------------------------------------------------------------------------------
# Everything stays linear in the input's length
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)  # a hang, not a busy machine, reaches this
@pytest.mark.parametrize(
    "text",
    [
        "<br>" * 100_000,
        "| a " + "<br>" * 100_000,
        " " * 100_000 + "<br>" * 50_000,
        "markets13. " * 10_000 + _THREE,
        "a" * 200_000 + "1" + _THREE,
        "x[1]" * 50_000,
        "a" + "[1]" * 20_000 + _THREE,
        "[1, 2] " * 20_000,
        "[[1, 2], " * 30_000,
        "]" * 100_000 + "[1]",
        "See also " * 20_000 + "[1]" + _THREE,
        "Source: [1]. " * 10_000 + _THREE,
        "[a](https://x.org/" + "\\(" * 100_000,
        "https://x.org/" + "\\_" * 100_000,
        "https://x.org/" + "&a;" * 60_000,
        '"see https://x.org/a ' * 30_000,
        "[EMIM][TfO]" * 30_000,
        "Sources: [1] https://a.org/1\n" * 10_000,
    ],
    ids=lambda t: repr(t[:8]),
)
def test_new_paths_stay_linear(text: str) -> None:
    # CPU time, not wall time: a busy machine does not count; each needs well under a second
    start = time.process_time()
    assert parse_answer(text).text == text
    assert time.process_time() - start < 5.0

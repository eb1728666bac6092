"""Answer parsing: every citation format, claim splitting, quotes, findings and bad input."""

from __future__ import annotations

from typing import Any

import pytest

from citeguard.models import Answer, Citation, Severity
from citeguard.parse import parse_answer


def check_offsets(answer: Answer) -> None:
    """The offset contract: markers and claims can be cut back out of the answer text."""
    text = answer.text
    for c in answer.citations:
        if c.kind == "structured":
            assert (c.start, c.end) == (-1, -1)
        else:
            assert text[c.start : c.end] == c.marker, c
    for i, cl in enumerate(answer.claims):
        assert cl.index == i
        assert text[cl.start : cl.end] == cl.text
        assert cl.text == cl.text.strip() and cl.text
        for k in cl.citation_indices:
            assert answer.citations[k].claim_index == i
    for k, c in enumerate(answer.citations):
        assert c.index == k
        if c.claim_index is not None:
            assert k in answer.claims[c.claim_index].citation_indices
    starts = [cl.start for cl in answer.claims]
    assert starts == sorted(starts)
    assert all(a.end <= b.start for a, b in zip(answer.claims, answer.claims[1:], strict=False))


def parse(text: Any, **kwargs: Any) -> Answer:
    answer = parse_answer(text, **kwargs)
    check_offsets(answer)
    return answer


def codes(answer: Answer) -> list[str]:
    return [f.code for f in answer.findings]


def urls(answer: Answer) -> list[str]:
    return [c.url for c in answer.citations]


def only(answer: Answer) -> Citation:
    assert len(answer.citations) == 1, answer.citations
    return answer.citations[0]


# --------------------------------------------------------------------------------------------
# Inline links
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("marker", "url", "label"),
    [
        ("[Reuters](https://www.reuters.com/a)", "https://www.reuters.com/a", "Reuters"),
        ('[the report](https://x.org/r "The Report")', "https://x.org/r", "the report"),
        ("[t](https://x.org/r 'single')", "https://x.org/r", "t"),
        ("[t](https://x.org/r (paren title))", "https://x.org/r", "t"),
        ("[t](<https://x.org/a b>)", "https://x.org/a b", "t"),
        (
            "[Foo](https://en.wikipedia.org/wiki/Foo_(bar))",
            "https://en.wikipedia.org/wiki/Foo_(bar)",
            "Foo",
        ),
        (
            '[Foo](https://en.wikipedia.org/wiki/Foo_(bar) "wiki")',
            "https://en.wikipedia.org/wiki/Foo_(bar)",
            "Foo",
        ),
        ("[see [1]](https://x.org/n)", "https://x.org/n", "see [1]"),
        ("[x](https://x.org/?a=1&amp;b=2)", "https://x.org/?a=1&b=2", "x"),
    ],
)
def test_inline_link(marker: str, url: str, label: str) -> None:
    a = parse(f"Prices rose 3% in 2024 {marker}.")
    c = only(a)
    assert (c.kind, c.url, c.label, c.marker) == ("inline_link", url, label, marker)
    assert c.claim_index == 0
    assert a.findings == []


def test_inline_link_wikipedia_normalised() -> None:
    c = only(parse("See [Foo](https://EN.wikipedia.org/wiki/Foo_(bar))."))
    assert c.normalized_url == "https://en.wikipedia.org/wiki/Foo_(bar)"


@pytest.mark.parametrize("text", ["![chart](https://x.org/c.png)", "[jump](#section-2)", "[t]()"])
def test_images_and_in_page_links_are_not_citations(text: str) -> None:
    a = parse(f"Look at this {text} please.")
    assert a.citations == []
    assert a.findings == []


# --------------------------------------------------------------------------------------------
# Reference links
# --------------------------------------------------------------------------------------------


def test_reference_link_full_collapsed_and_shortcut() -> None:
    text = (
        "The [first study][S1] says so. The [Guardian][] agrees. And [NYT] too.\n"
        "\n"
        "[s1]: https://s1.example.org/study\n"
        "[guardian]: <https://theguardian.com/x> 'The Guardian'\n"
        '[NYT]: https://nytimes.com/y "title"\n'
    )
    a = parse(text)
    assert [(c.kind, c.label, c.url, c.claim_index) for c in a.citations] == [
        ("reference_link", "s1", "https://s1.example.org/study", 0),
        ("reference_link", "guardian", "https://theguardian.com/x", 1),
        ("reference_link", "nyt", "https://nytimes.com/y", 2),
    ]
    assert [c.marker for c in a.citations] == ["[first study][S1]", "[Guardian][]", "[NYT]"]
    assert a.references == {
        "s1": "https://s1.example.org/study",
        "guardian": "https://theguardian.com/x",
        "nyt": "https://nytimes.com/y",
    }
    assert a.findings == []
    assert len(a.claims) == 3  # the definitions are not claims


def test_reference_link_with_undefined_id_is_unresolved() -> None:
    a = parse("As [the paper][p9] shows.")
    assert a.citations == []
    assert codes(a) == ["unresolved_marker"]
    assert a.findings[0].claim_index == 0


def test_bracketed_prose_is_not_a_citation() -> None:
    a = parse("He wrote [sic] and [emphasis added][in the original text] twice.")
    assert a.citations == []
    assert a.findings == []


# --------------------------------------------------------------------------------------------
# Numbered markers and reference lists
# --------------------------------------------------------------------------------------------

_REFS = "\n\nSources:\n[1] https://one.org/a\n[2] https://two.org/b\n[3] https://three.org/c\n"


@pytest.mark.parametrize(
    ("body", "labels", "markers"),
    [
        ("GDP grew [1].", ["1"], ["[1]"]),
        ("GDP grew [1][3].", ["1", "3"], ["[1]", "[3]"]),
        ("GDP grew [1, 2].", ["1", "2"], ["[1, 2]", "[1, 2]"]),
        ("GDP grew [1,3].", ["1", "3"], ["[1,3]", "[1,3]"]),
        ("GDP grew [1-3].", ["1", "2", "3"], ["[1-3]"] * 3),
        ("GDP grew [1–3].", ["1", "2", "3"], ["[1–3]"] * 3),
        ("GDP grew [1; 3].", ["1", "3"], ["[1; 3]"] * 2),
        ("GDP grew[2].", ["2"], ["[2]"]),
    ],
)
def test_numbered_markers(body: str, labels: list[str], markers: list[str]) -> None:
    a = parse(body + _REFS, allowed_schemes=frozenset({"https"}))
    assert [c.label for c in a.citations] == labels
    assert [c.marker for c in a.citations] == markers
    assert all(c.kind == "numbered" and c.claim_index == 0 for c in a.citations)
    assert all(c.url == a.references[c.label or ""] for c in a.citations)
    assert len(a.claims) == 1
    unused = {f.details["label"] for f in a.findings if f.code == "unused_reference"}
    assert unused == {"1", "2", "3"} - set(labels)
    assert codes(a) == ["unused_reference"] * len(unused)


@pytest.mark.parametrize(
    ("entry", "url"),
    [
        ("[1] https://a.org/x", "https://a.org/x"),
        ("[1]: https://a.org/x", "https://a.org/x"),
        ("[1]: <https://a.org/x>", "https://a.org/x"),
        ("1. Title of the piece — https://a.org/x", "https://a.org/x"),
        ("1. Title of the piece - https://a.org/x", "https://a.org/x"),
        ("1) Title of the piece: https://a.org/x", "https://a.org/x"),
        ("[1] Title of the piece (https://a.org/x)", "https://a.org/x"),
        ("[1] Title (https://en.wikipedia.org/wiki/A_(b))", "https://en.wikipedia.org/wiki/A_(b)"),
        ("[1] [Title of the piece](https://a.org/x)", "https://a.org/x"),
        ("1. [Title of the piece](https://a.org/x)", "https://a.org/x"),
        ("- [1] Title, https://a.org/x.", "https://a.org/x"),
        ("[1]. <https://a.org/x>", "https://a.org/x"),
        ("[1] Title.\n    https://a.org/x", "https://a.org/x"),
    ],
)
@pytest.mark.parametrize(
    "heading", ["Sources:", "References:", "## Sources", "**References:**", "### References"]
)
def test_reference_list_shapes(entry: str, url: str, heading: str) -> None:
    a = parse(f"Inflation fell to 2.1% in May [1].\n\n{heading}\n{entry}\n")
    c = only(a)
    assert (c.kind, c.label, c.url, c.claim_index) == ("numbered", "1", url, 0)
    assert a.references == {"1": url}
    assert [cl.text for cl in a.claims] == ["Inflation fell to 2.1% in May [1]."]
    assert a.findings == []


def test_reference_list_with_mixed_shapes() -> None:
    text = (
        "Claim one [1]. Claim two [2]. Claim three [3]. Claim four [4]. Claim five [5]. "
        "Claim six [6].\n"
        "\n"
        "References\n"
        "[1] https://a.org/1\n"
        "[2]: https://b.org/2\n"
        "3. Third title — https://c.org/3\n"
        "\n"
        "4. Fourth title - https://d.org/4\n"
        "[5] Fifth title (https://e.org/5)\n"
        "- [6] [Sixth](https://f.org/6)\n"
    )
    a = parse(text)
    assert urls(a) == [f"https://{h}.org/{n}" for n, h in enumerate("abcdef", start=1)]
    assert [c.claim_index for c in a.citations] == [0, 1, 2, 3, 4, 5]
    assert len(a.claims) == 6
    assert a.findings == []


def test_trailing_numbered_list_without_heading_is_a_reference_list() -> None:
    text = (
        "Solar capacity doubled [1]. Wind grew too [2].\n\n"
        "1. IEA report — https://iea.org/r\n"
        "2. GWEC - https://gwec.net/w\n"
    )
    a = parse(text)
    assert urls(a) == ["https://iea.org/r", "https://gwec.net/w"]
    assert [c.claim_index for c in a.citations] == [0, 1]
    assert len(a.claims) == 2


def test_numbered_list_of_links_without_markers_is_claims() -> None:
    text = "Good reads:\n\n1. The IEA report https://iea.org/r\n2. The GWEC report https://gwec.net/w\n"
    a = parse(text)
    assert [c.kind for c in a.citations] == ["bare_url", "bare_url"]
    assert [cl.text for cl in a.claims] == [
        "Good reads:",
        "The IEA report https://iea.org/r",
        "The GWEC report https://gwec.net/w",
    ]
    assert [c.claim_index for c in a.citations] == [1, 2]
    assert a.references == {}


def test_unnumbered_sources_are_citations_without_a_claim() -> None:
    text = "The river flooded twice.\n\nSources:\n- https://a.org/flood\n- [Met Office](https://b.org/m)\n"
    a = parse(text)
    assert [(c.kind, c.url, c.claim_index) for c in a.citations] == [
        ("bare_url", "https://a.org/flood", None),
        ("inline_link", "https://b.org/m", None),
    ]
    assert [cl.text for cl in a.claims] == ["The river flooded twice."]


def test_inline_sources_line_is_not_a_claim() -> None:
    a = parse("Rates rose.\nSources: https://a.org/x, https://b.org/y")
    assert [cl.text for cl in a.claims] == ["Rates rose."]
    assert urls(a) == ["https://a.org/x", "https://b.org/y"]
    assert all(c.claim_index is None for c in a.citations)


def test_marker_without_reference() -> None:
    a = parse("Unemployment fell [4]. Output rose [1].\n\n[1]: https://a.org/1\n")
    assert urls(a) == ["https://a.org/1"]
    assert codes(a) == ["unresolved_marker"]
    f = a.findings[0]
    assert (f.severity, f.claim_index, f.details["label"]) == (Severity.ERROR, 0, "4")
    assert "[4]" in f.message


def test_unused_reference_is_a_warning() -> None:
    a = parse("Output rose [1].\n\n[1]: https://a.org/1\n[2]: https://b.org/2\n")
    assert codes(a) == ["unused_reference"]
    f = a.findings[0]
    assert (f.severity, f.url, f.details["label"]) == (Severity.WARNING, "https://b.org/2", "2")
    assert urls(a) == ["https://a.org/1"]  # an uncited reference is not a citation


@pytest.mark.parametrize(
    ("second", "severity"),
    [("https://a.org/1", Severity.WARNING), ("https://other.org/9", Severity.ERROR)],
)
def test_duplicate_reference_ids(second: str, severity: Severity) -> None:
    a = parse(f"Output rose [1].\n\n[1]: https://a.org/1\n[1]: {second}\n")
    assert urls(a) == ["https://a.org/1"]  # the first definition wins
    assert codes(a) == ["duplicate_reference"]
    assert a.findings[0].severity is severity


def test_reference_without_url() -> None:
    a = parse(
        "Output rose [1]. Prices fell [2].\n\nReferences:\n[1] Smith, J. (2020). Nature.\n[2] https://b.org/2\n"
    )
    assert urls(a) == ["https://b.org/2"]
    assert codes(a) == ["reference_without_url"]
    assert a.findings[0].claim_index == 0


@pytest.mark.parametrize("marker", ["[0, 1]", "[0]"])
def test_intervals_are_not_markers(marker: str) -> None:
    a = parse(f"The probability lies in {marker} always.")
    assert a.citations == [] and a.findings == []


def test_reversed_or_huge_range_is_a_finding() -> None:
    a = parse("Everything [3-1] and [1-900].\n\n[1]: https://a.org/1\n")
    assert "malformed_marker" in codes(a)
    assert a.citations == []


def test_markers_in_code_are_ignored() -> None:
    text = (
        "Index with `a[1]` in Python.\n\n```\nx = `c` + b[2]\nsee https://docs.python.org/3/\n```\n"
    )
    a = parse(text)
    assert a.findings == []
    assert urls(a) == ["https://docs.python.org/3/"]  # URLs in code still count
    assert a.citations[0].claim_index is None


def test_escaped_brackets_are_not_markers() -> None:
    a = parse(r"Literal \[1\] here.")
    assert a.citations == [] and a.findings == []


def test_numbered_marker_followed_by_parenthetical_is_not_a_link() -> None:
    a = parse("See [2](p.5) for details.\n\n[2]: https://a.org/2")
    c = only(a)
    assert (c.kind, c.marker, c.url) == ("numbered", "[2]", "https://a.org/2")


def test_sources_section_ends_at_prose() -> None:
    a = parse("Rates rose [1].\n\nSources:\n[1] https://a.org/1\n\nLet me know if you need more.")
    assert [cl.text for cl in a.claims] == ["Rates rose [1].", "Let me know if you need more."]
    assert urls(a) == ["https://a.org/1"]


def test_crlf_line_endings() -> None:
    a = parse("Rates rose.\r\nJobs grew [1].\r\n\r\n[1]: https://a.org/1\r\n")
    assert [cl.text for cl in a.claims] == ["Rates rose.", "Jobs grew [1]."]
    assert only(a).url == "https://a.org/1"


# --------------------------------------------------------------------------------------------
# Footnotes
# --------------------------------------------------------------------------------------------


def test_footnotes() -> None:
    text = (
        "Coffee is popular.[^1] Tea is older[^note].\n"
        "\n"
        "[^1]: Smith et al., 2021, https://example.org/coffee.\n"
        "[^note]: See [the history](https://tea.example.org/h)\n"
    )
    a = parse(text)
    assert [(c.kind, c.label, c.url, c.claim_index) for c in a.citations] == [
        ("footnote", "^1", "https://example.org/coffee", 0),
        ("footnote", "^note", "https://tea.example.org/h", 1),
    ]
    assert a.references == {
        "^1": "https://example.org/coffee",
        "^note": "https://tea.example.org/h",
    }
    assert [cl.text for cl in a.claims] == ["Coffee is popular.[^1]", "Tea is older[^note]."]
    assert a.findings == []


def test_footnote_without_definition() -> None:
    a = parse("Coffee is popular.[^7]")
    assert codes(a) == ["unresolved_marker"]
    assert a.citations == []


def test_footnote_and_numbered_namespaces_are_separate() -> None:
    a = parse("A [1]. B [^1].\n\n[1]: https://n.org/1\n[^1]: https://f.org/1\n")
    assert urls(a) == ["https://n.org/1", "https://f.org/1"]


# --------------------------------------------------------------------------------------------
# Bare URLs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "url"),
    [
        ("See https://x.org/a.", "https://x.org/a"),
        ("See https://x.org/a, then more.", "https://x.org/a"),
        ("See https://x.org/a; then more.", "https://x.org/a"),
        ("See https://x.org/a: it says so.", "https://x.org/a"),
        ("Did you see https://x.org/a?", "https://x.org/a"),
        ("Wow https://x.org/a!", "https://x.org/a"),
        ("Odd https://x.org/a...", "https://x.org/a"),
        ("(see https://x.org/a_(b))", "https://x.org/a_(b)"),
        ("(see https://x.org/a)", "https://x.org/a"),
        ("(see https://x.org/a).", "https://x.org/a"),
        ("It said 'https://x.org/a'.", "https://x.org/a"),
        ('It said "https://x.org/a".', "https://x.org/a"),
        ("It said “https://x.org/a”.", "https://x.org/a"),
        ("It said «https://x.org/a».", "https://x.org/a"),
        ("Bold **https://x.org** here.", "https://x.org"),
        ("Italic *https://x.org/a*.", "https://x.org/a"),
        ("Italic _https://x.org/a_b_.", "https://x.org/a_b"),
        ("Strike ~~https://x.org/a~~ now.", "https://x.org/a"),
        ("Auto <https://x.org/a?q=1&r=2> link.", "https://x.org/a?q=1&r=2"),
        ("Path https://x.org/a/b/?q=1#frag ok.", "https://x.org/a/b/?q=1#frag"),
        ("Insecure http://x.org/a ok.", "http://x.org/a"),
        ("Upper HTTPS://X.ORG/A ok.", "HTTPS://X.ORG/A"),
        ("In [https://x.org/a] brackets.", "https://x.org/a"),
        ("Trailing slash https://x.org/.", "https://x.org/"),
        ("Nested [t](https://x.org/a_(b_(c))) parens.", "https://x.org/a_(b_(c))"),
    ],
)
def test_bare_url_boundaries(text: str, url: str) -> None:
    c = only(parse(text))
    assert (c.kind, c.url, c.marker) == ("bare_url", url, url)


def test_bare_url_inside_parentheses_normalises() -> None:
    c = only(parse("(see https://x.org/a_(b))"))
    assert c.normalized_url == "https://x.org/a_(b)"


def test_www_becomes_https() -> None:
    c = only(parse("Read www.example.org/page, it is short."))
    assert (c.marker, c.url, c.normalized_url) == (
        "www.example.org/page",
        "https://www.example.org/page",
        "https://www.example.org/page",
    )


def test_bare_url_not_doubled_by_www_or_links() -> None:
    a = parse("See https://www.x.org/a and [https://y.org](https://y.org/b).")
    assert urls(a) == ["https://www.x.org/a", "https://y.org/b"]


@pytest.mark.parametrize(
    "text", ["email me at bob@www.example.org", "xhttps://x.org", "https:// x"]
)
def test_not_bare_urls(text: str) -> None:
    assert parse(text).citations == []


# --------------------------------------------------------------------------------------------
# HTML anchors
# --------------------------------------------------------------------------------------------


def test_html_anchors() -> None:
    text = (
        'Per <a href="https://h.org/?a=1&amp;b=2">the <b>report</b></a>, and '
        "<A HREF='https://g.org/x' target=_blank>G</A> and <a href=https://u.org/q>u</a>. "
        '<a name="anchor">not a link</a>'
    )
    a = parse(text)
    assert [(c.kind, c.url, c.label) for c in a.citations] == [
        ("html_anchor", "https://h.org/?a=1&b=2", "the report"),
        ("html_anchor", "https://g.org/x", "G"),
        ("html_anchor", "https://u.org/q", "u"),
    ]
    assert a.citations[0].marker == '<a href="https://h.org/?a=1&amp;b=2">the <b>report</b></a>'


def test_unclosed_anchor_marker_is_the_opening_tag() -> None:
    c = only(parse('Text <a href="https://h.org/x">never closed'))
    assert c.marker == '<a href="https://h.org/x">'


# --------------------------------------------------------------------------------------------
# Bad URLs become findings and still appear as citations
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("[x](javascript:alert(1))", "blocked_scheme"),
        ('<a href="javascript:alert(1)">x</a>', "blocked_scheme"),
        ("[x](data:text/html;base64,PHNjcmlwdD4=)", "blocked_scheme"),
        ("See file:///etc/passwd now.", "blocked_scheme"),
        ("[x](ftp://files.example.org/a)", "blocked_scheme"),
        ("[x](mailto:a@b.org)", "blocked_scheme"),
        ("Claim [1].\n\n[1]: javascript:void(0)\n", "blocked_scheme"),
        ("[x](/relative/path)", "malformed_url"),
        ("[x](https:///no-host)", "malformed_url"),
        ('<a href="https://bad host/">x</a>', "malformed_url"),
        ("Claim [1].\n\n[1]: ./local/file.html\n", "malformed_url"),
        ("[x](https://999.1.1.1/)", "malformed_url"),
    ],
)
def test_bad_urls_are_findings(text: str, code: str) -> None:
    a = parse(text)
    c = only(a)
    assert c.normalized_url is None
    assert codes(a) == [code]
    assert a.findings[0].url == c.url
    assert a.urls == []


def test_allowed_schemes_is_configurable() -> None:
    a = parse("[x](ftp://files.example.org/a)", allowed_schemes=frozenset({"http", "https", "ftp"}))
    assert only(a).normalized_url == "ftp://files.example.org/a"
    assert a.findings == []


def test_bad_url_cited_twice_gives_one_finding() -> None:
    a = parse("A [1]. B [1].\n\n[1]: javascript:x\n")
    assert len(a.citations) == 2
    assert codes(a) == ["blocked_scheme"]


# --------------------------------------------------------------------------------------------
# Claims
# --------------------------------------------------------------------------------------------


def test_sentence_splitting_keeps_abbreviations_decimals_versions_and_urls() -> None:
    text = (
        "The U.S. economy grew 3.5% in Q2, e.g. from exports. Dr. Smith used v1.2.3 of the "
        "model (see https://x.org/a.b?c=1.2). Mr. J. Doe disagreed! Did it work? Yes, approx. "
        "five times, according to Fig. 3 and No. 7."
    )
    a = parse(text)
    assert [cl.text for cl in a.claims] == [
        "The U.S. economy grew 3.5% in Q2, e.g. from exports.",
        "Dr. Smith used v1.2.3 of the model (see https://x.org/a.b?c=1.2).",
        "Mr. J. Doe disagreed!",
        "Did it work?",
        "Yes, approx. five times, according to Fig. 3 and No. 7.",
    ]
    assert only(a).claim_index == 1


@pytest.mark.parametrize(
    "text",
    [
        "Prices rose 3%. [2] Wages fell [1].",
        "Prices rose 3%.[2] Wages fell [1].",
        "Prices rose 3% [2]. Wages fell [1].",
        "Prices rose 3%.\n[2] Wages fell [1].",
        "Prices rose 3%. [2][3] Wages fell [1].",
        "Prices rose 3%. [^2] Wages fell [1].",
        "Prices rose 3%. (https://a.org/x) Wages fell [1].",
        "Prices rose 3%. ([a](https://a.org/y), [2]) Wages fell [1].",
    ],
)
def test_marker_after_full_stop_belongs_to_that_sentence(text: str) -> None:
    refs = "\n\n[1]: https://a.org/1\n[2]: https://a.org/2\n[3]: https://a.org/3\n[^2]: https://a.org/f"
    a = parse(text + refs)
    assert len(a.claims) == 2
    assert a.claims[1].text == "Wages fell [1]."
    first = [c for c in a.citations if c.label != "1"]
    assert first and all(c.claim_index == 0 for c in first)
    assert [c.claim_index for c in a.citations if c.label == "1"] == [1]


def test_bullets_and_numbered_items_are_claims() -> None:
    text = (
        "## Findings\n"
        "Key points:\n"
        "- Sales rose 4% [1]\n"
        "- Costs fell. Margins widened [2]\n"
        "  across all regions.\n"
        "* Staff grew\n"
        "1. First numbered item\n"
        "2) Second numbered item\n"
        "\n"
        "[1]: https://a.org/1\n"
        "[2]: https://a.org/2\n"
    )
    a = parse(text)
    assert [cl.text for cl in a.claims] == [
        "Key points:",
        "Sales rose 4% [1]",
        "Costs fell.",
        "Margins widened [2]\n  across all regions.",
        "Staff grew",
        "First numbered item",
        "Second numbered item",
    ]
    assert [c.claim_index for c in a.citations] == [1, 3]


def test_heading_with_citation_is_a_claim_and_without_is_not() -> None:
    a = parse("# Overview\n\n## Rates rose [1]\n\nText.\n\n[1]: https://a.org/1")
    assert [cl.text for cl in a.claims] == ["Rates rose [1]", "Text."]


def test_marker_on_its_own_paragraph_goes_to_previous_claim() -> None:
    a = parse("Rates rose sharply.\n\n[1]\n\n[1]: https://a.org/1\n")
    assert [cl.text for cl in a.claims] == ["Rates rose sharply."]
    assert only(a).claim_index == 0


def test_cjk_text_with_citations() -> None:
    text = (
        "东京是日本的首都[1]。人口约为1400万人「东京都的人口持续增长」[2]。"
        "详见https://example.cn/news的报道。另见 https://zh.wikipedia.org/wiki/东京 。\n\n"
        "[1]: https://ja.wikipedia.org/wiki/東京\n"
        "[2]: https://example.jp/pop\n"
    )
    a = parse(text)
    assert [cl.text for cl in a.claims] == [
        "东京是日本的首都[1]。",
        "人口约为1400万人「东京都的人口持续增长」[2]。",
        "详见https://example.cn/news的报道。",
        "另见 https://zh.wikipedia.org/wiki/东京 。",
    ]
    assert urls(a) == [
        "https://ja.wikipedia.org/wiki/東京",
        "https://example.jp/pop",
        "https://example.cn/news",
        "https://zh.wikipedia.org/wiki/东京",
    ]
    assert a.citations[0].normalized_url == "https://ja.wikipedia.org/wiki/%E6%9D%B1%E4%BA%AC"
    assert a.citations[1].quote == "东京都的人口持续增长"
    assert [c.claim_index for c in a.citations] == [0, 1, 2, 3]


def test_table_rows_are_claims() -> None:
    text = "| Year | Sales |\n|---|---|\n| 2023 | 4 [1] |\n\n[1]: https://a.org/1"
    a = parse(text)
    assert [cl.text for cl in a.claims] == ["| Year | Sales |", "| 2023 | 4 [1] |"]
    assert only(a).claim_index == 1


# --------------------------------------------------------------------------------------------
# Quotes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quoted", "quote"),
    [
        ('"prices will keep rising"', "prices will keep rising"),
        ("“prices will keep rising”", "prices will keep rising"),
        ("«les prix vont augmenter»", "les prix vont augmenter"),
        ("« les prix vont augmenter »", "les prix vont augmenter"),
        ("„die Preise steigen weiter“", "die Preise steigen weiter"),
        ("„ceny będą rosły”", "ceny będą rosły"),
        ("「物价将继续上涨」", "物价将继续上涨"),
        ("『物价将继续上涨』", "物价将继续上涨"),
        ("‘prices will keep rising’", "prices will keep rising"),
        ("‘it’s going to keep rising’", "it’s going to keep rising"),
        ('"unprecedented"', "unprecedented"),
    ],
)
def test_quote_styles(quoted: str, quote: str) -> None:
    a = parse(f"The governor said {quoted} on Monday [1].\n\n[1]: https://a.org/1")
    assert a.claims[0].quotes == [quote]
    assert only(a).quote == quote


@pytest.mark.parametrize(
    "text",
    [
        "The ‘team’ won [1].",  # a single curly word is a scare quote, not a quotation
        "It’s the team’s best year [1].",  # apostrophes
        "It was 'very good indeed' [1].",  # straight single quotes are too ambiguous
    ],
)
def test_not_quotes(text: str) -> None:
    a = parse(text + "\n\n[1]: https://a.org/1")
    assert a.claims[0].quotes == []
    assert only(a).quote is None


def test_nested_quote_keeps_the_outer_one() -> None:
    a = parse("He said “they called it ‘a very bad idea’ yesterday” [1].\n\n[1]: https://a.org/1")
    assert a.claims[0].quotes == ["they called it ‘a very bad idea’ yesterday"]


def test_quotes_pair_with_citations_in_order_when_counts_match() -> None:
    text = 'She said "rates will rise" [1] and "jobs will grow" [2].\n\n[1]: https://a.org/1\n[2]: https://a.org/2'
    a = parse(text)
    assert a.claims[0].quotes == ["rates will rise", "jobs will grow"]
    assert [c.quote for c in a.citations] == ["rates will rise", "jobs will grow"]


def test_quotes_bind_to_nearest_preceding_when_counts_differ() -> None:
    text = (
        'Per [1], she said "rates will rise", "jobs will grow" and "prices fall" [2].\n\n'
        "[1]: https://a.org/1\n[2]: https://a.org/2"
    )
    a = parse(text)
    # [1] precedes every quote, so it gets the first; [2] gets the one right before it.
    assert [c.quote for c in a.citations] == ["rates will rise", "prices fall"]


def test_quote_with_marker_inside_is_cleaned() -> None:
    a = parse("He said “prices rose [1] sharply” today.\n\n[1]: https://a.org/1")
    assert a.claims[0].quotes == ["prices rose sharply"]


def test_quote_characters_in_link_titles_and_attributes_are_not_quotes() -> None:
    a = parse('See [t](https://a.org/x "a long title") and <a href="https://b.org/y">b</a>.')
    assert a.claims[0].quotes == []


def test_sentence_not_split_inside_a_quote() -> None:
    a = parse('He said "Rates rose. Jobs grew." Then he left.')
    assert [cl.text for cl in a.claims] == ['He said "Rates rose. Jobs grew."', "Then he left."]


# --------------------------------------------------------------------------------------------
# Structured input
# --------------------------------------------------------------------------------------------


def test_structured_input() -> None:
    items: list[dict[str, Any]] = [
        {"claim": "Rates rose in May.", "url": "https://a.org/1", "quote": "rates rose"},
        {"claim": "Jobs grew “by two percent overall”.", "url": "https://b.org/2"},
        {"claim": "Both sources agree.", "url": ["https://a.org/1", "https://c.org/3"]},
    ]
    a = parse(items)
    assert a.text == "Rates rose in May.\nJobs grew “by two percent overall”.\nBoth sources agree."
    assert [cl.text for cl in a.claims] == [i["claim"] for i in items]
    assert [(c.kind, c.url, c.claim_index, c.quote) for c in a.citations] == [
        ("structured", "https://a.org/1", 0, "rates rose"),
        ("structured", "https://b.org/2", 1, "by two percent overall"),
        ("structured", "https://a.org/1", 2, None),
        ("structured", "https://c.org/3", 2, None),
    ]
    assert a.claims[0].quotes == ["rates rose"]
    assert a.claims[2].citation_indices == [2, 3]
    assert a.urls == ["https://a.org/1", "https://b.org/2", "https://c.org/3"]
    assert a.findings == []


@pytest.mark.parametrize(
    ("item", "field", "n_claims", "n_citations"),
    [
        ({"url": "https://a.org/1"}, "claim", 0, 1),
        ({"claim": "Rates rose."}, "url", 1, 0),
        ({"claim": "Rates rose.", "url": ""}, "url", 1, 0),
        ({"claim": "   ", "url": "https://a.org/1"}, "claim", 0, 1),
        ({"claim": 42, "url": "https://a.org/1"}, "claim", 0, 1),
        ({"claim": "Rates rose.", "url": 7}, "url", 1, 0),
        ({"claim": "Rates rose.", "url": "https://a.org/1", "quote": 3}, "quote", 1, 1),
        ({}, "claim", 0, 0),
    ],
)
def test_structured_missing_or_bad_fields(
    item: dict[str, Any], field: str, n_claims: int, n_citations: int
) -> None:
    a = parse([item])
    assert len(a.claims) == n_claims and len(a.citations) == n_citations
    missing = [f for f in a.findings if f.code == "structured_missing_field"]
    assert field in {f.details["field"] for f in missing}
    assert all(f.severity is Severity.ERROR for f in missing)


def test_structured_invalid_items_and_bad_urls() -> None:
    a = parse(["just a string", None, {"claim": "X.", "url": "javascript:alert(1)"}])
    assert codes(a) == ["structured_invalid_item", "structured_invalid_item", "blocked_scheme"]
    c = only(a)
    assert c.normalized_url is None and c.claim_index == 0


@pytest.mark.parametrize("value", [None, 42, b"bytes", {"claim": "x", "url": "https://a.org"}])
def test_invalid_top_level_input(value: Any) -> None:
    a = parse(value)
    assert codes(a) == ["invalid_input"]
    assert a.claims == [] and a.citations == []


# --------------------------------------------------------------------------------------------
# Degenerate and hostile input
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\n\n\n", "\t"])
def test_empty_input(text: str) -> None:
    a = parse(text)
    assert a.claims == [] and a.citations == [] and a.findings == []
    assert a.text == text


@pytest.mark.parametrize(
    "text",
    [
        "Unterminated [link text](https://x.org/a",
        "Unterminated [1 marker and [^2 footnote",
        "Unterminated <a href='https://x.org/a",
        "Unclosed “quote that never ends [1]",
        "[",
        "]",
        "[]()",
        "[^]",
        "[1]:",
        "Sources:",
        "1.",
        "```\nunclosed fence [1]",
        "<a href=>x</a>",
        "https://",
        "www.",
    ],
)
def test_malformed_input_never_raises(text: str) -> None:
    parse(text)


def test_unterminated_link_still_finds_the_url() -> None:
    a = parse("Unterminated [link text](https://x.org/a")
    assert urls(a) == ["https://x.org/a"]
    assert only(a).kind == "bare_url"


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "text",
    [
        "[" * 200_000,
        "(" * 200_000,
        "[a](" * 50_000,
        "](" * 100_000,
        "[a]" * 60_000,
        "[[a]" * 50_000,
        "https://x.org/" + "(" * 200_000,
        "https://x.org/" + ")" * 200_000,
        "<a href=x " * 20_000,
        '"' * 200_000,
        "‘a b c " * 30_000,
        "[1, " * 50_000,
        "[^" * 100_000,
        "*" * 200_000,
        "www." * 50_000,
        ". " * 100_000,
        "\n" * 200_000,
        "[x](<" * 40_000,
        "„" * 200_000,
        "1. " * 60_000,
        "```\n" * 50_001,
        "".join("`" * k + "\n" for k in range(600, 2, -1)),
        "[1]: https://x.org/a\n" * 10_000,
        "Sources:\n" + "- x\n" * 50_000,
    ],
    ids=lambda t: repr(t[:6]),
)
def test_pathological_input_returns(text: str) -> None:
    a = parse_answer(text)  # the timeout is the assertion; offsets are checked elsewhere
    assert a.text == text


@pytest.mark.timeout(20)
def test_large_realistic_answer() -> None:
    para = (
        "The U.S. economy grew 3.5% in 2023, e.g. strongly [1]. See [the report]"
        '(https://example.org/a_(b) "t") and https://x.org/y. Dr. Smith said “prices rose '
        "sharply” [2].\n\n"
    )
    text = para * 4000 + "Sources:\n[1] https://a.org\n[2] Title — https://b.org\n"
    assert len(text) > 600_000
    a = parse(text)
    assert len(a.claims) == 12_000
    assert len(a.citations) == 16_000
    assert a.urls == [
        "https://a.org/",
        "https://example.org/a_(b)",
        "https://x.org/y",
        "https://b.org/",
    ]


# --------------------------------------------------------------------------------------------
# Offsets across every format at once
# --------------------------------------------------------------------------------------------

_KITCHEN_SINK = (
    "# Answer\n"
    "\n"
    "The U.S. grew 3.5% [1][3]. Prices rose.[2] See [Wiki](https://en.wikipedia.org/wiki/A_(b)) "
    "and [the data][d] and [D]. A footnote[^a]. Bare (https://x.org/a_(b)), **www.y.org**, "
    '<a href="https://h.org/x">anchor</a>. He said “it is fine” [1-2]. 东京[2]。\n'
    "\n"
    "- Item with https://bullet.org/z.\n"
    "- Item two [4]\n"
    "\n"
    "[d]: https://data.org/d\n"
    "[^a]: Note https://note.org/n\n"
    "\n"
    "Sources:\n"
    "[1] https://one.org\n"
    "2. Two — https://two.org\n"
    "[3] Three (https://three.org)\n"
    "- https://unnumbered.org\n"
)


def test_offsets_on_every_format() -> None:
    a = parse(_KITCHEN_SINK)
    kinds = {c.kind for c in a.citations}
    assert kinds == {
        "numbered",
        "inline_link",
        "reference_link",
        "footnote",
        "bare_url",
        "html_anchor",
    }
    for c in a.citations:
        assert _KITCHEN_SINK[c.start : c.end] == c.marker
    for cl in a.claims:
        assert _KITCHEN_SINK[cl.start : cl.end] == cl.text
    assert codes(a) == ["unresolved_marker"]  # [4]
    by_marker = {c.marker: c for c in a.citations}
    assert by_marker["[D]"].url == "https://data.org/d"
    assert by_marker["www.y.org"].url == "https://www.y.org"
    assert by_marker["https://x.org/a_(b)"].url == "https://x.org/a_(b)"
    assert by_marker["https://unnumbered.org"].claim_index is None
    assert [c.quote for c in a.citations if c.marker == "[1-2]"] == ["it is fine"] * 2

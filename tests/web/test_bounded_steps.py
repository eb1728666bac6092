"""The named steps of the bounded-HTML pass (``web/page/bounded.py``): the model of the stack of
open elements and each decision the token loop makes, checked against what the HTML tree builder
does with the same markup."""

from __future__ import annotations

from citeguard.policy import FetchPolicy
from citeguard.web.page.bounded import (
    _MAX_POPS,
    _MAX_UNSURE,
    _SCOPE_M,
    _apply_edits,
    _bound_html,
    _Bounding,
    _OpenElements,
)


def _read(html: str, policy: FetchPolicy | None = None) -> _Bounding:
    """The pass after reading ``html``: its model of the open elements."""
    bounding = _Bounding(html, policy or FetchPolicy())
    bounding.run()
    return bounding


def test_apply_edits_replaces_in_order_and_cuts_at_the_end() -> None:
    edits = [(1, 3, "X"), (5, 6, ""), (7, 8, "Y")]
    assert _apply_edits("abcdefgh", edits, 7) == "aXdeg"  # the edit at the cut is left out
    assert _apply_edits("abc", [], 3) == "abc"


def test_next_of_remembers_and_reads_on_past_a_passed_match() -> None:
    model = _OpenElements("a]]>b]]>")
    assert model.next_of("]]>", 0) == 1
    assert model.next_of("]]>", 1) == 1
    assert model.next_of("]]>", 2) == 5
    assert model.next_of("]]>", 6) == -1


def test_pop_to_does_not_believe_a_close_of_too_many_elements() -> None:
    model = _OpenElements("")
    for _ in range(_MAX_POPS + 2):
        model.push("div", 0, ())
    assert model.pop_to(0) is False and model.unsure == 1
    assert len(model.keys) == _MAX_POPS + 2
    assert model.pop_to(5) is True and model.keys == ["div"] * 5


def test_close_stops_at_a_scope_boundary() -> None:
    # </li> closes an item only in list item scope: an <ul> opened inside it is a boundary
    model = _read("<ul><li><ul>")
    assert model.keys == ["ul", "li", "ul"]
    assert model.close("li", _SCOPE_M) is False and model.unsure == 1
    assert _read("<ul><li>a</li>").keys == ["ul"]


def test_end_tags_for_form_select_and_special_elements() -> None:
    assert _read("<form><div></form>").keys == ["form", "div"]  # only the current node closes
    assert _read("<form></form>").keys == []
    assert _read("<select><optgroup></select>").keys == []
    assert _read("<div><span></div>").keys == []  # </div> closes the span on its way
    assert _read("<div><span><p></span>").keys == ["div", "span", "p"]  # <p> is special


def test_end_tag_in_foreign_content() -> None:
    assert _read("<svg><g></g>").keys == ["^svg"]
    # </p> ends foreign content first, then closes by the HTML rules
    assert _read("<div><svg><g></p>").keys == ["div"]


def test_start_tags_close_what_they_imply() -> None:
    assert _read("<ul><li>a<li>b").keys == ["ul", "li"]
    assert _read("<dl><dt>a<dd>b").keys == ["dl", "dd"]
    assert _read("<p>x<div>").keys == ["div"]
    assert _read("<h1>a<h2>").keys == ["h*"]
    assert _read("<select><option><option>").keys == ["select", "option"]
    # a special element other than address, div or p keeps the open item open
    assert _read("<ul><li><section><li>").keys == ["ul", "li", "section", "li"]


def test_breakout_from_foreign_content() -> None:
    assert _read("<svg><g><b>").keys == ["b"]
    assert _read("<svg><font color=red>").keys == ["font"]
    assert _read("<svg><font x=1>").keys == ["^svg", "^font"]
    assert _read("<svg><foreignObject><div>").keys == ["^svg", "^foreignobject", "div"]


def test_leaves_open_nothing() -> None:
    assert _read("<div><br><img src=x><svg/>").keys == ["div"]
    assert _read("<div><svg><path/>").keys == ["div", "^svg"]


def test_raw_text_is_skipped_and_its_markup_opens_nothing() -> None:
    assert _read("<div><title><p></title><span>").keys == ["div", "span"]
    unended = _read("<div><script>let s = '<p>'")
    assert unended.keys == ["div"] and unended.tokens == 2


def test_markup_comments_and_cdata() -> None:
    assert _read("<div><!-- <p> --><span>").keys == ["div", "span"]
    assert _read("<div><!-- <p>").keys == ["div"]  # an unterminated comment holds the rest
    # a CDATA section is text in foreign content, a bogus comment up to its first ">" in HTML:
    # nothing up to its "]]>" closes what was open before it
    cdata = _read("<div><![CDATA[>x</div> y]]><p>")
    assert cdata.keys == ["div", "p"] and cdata.unsure == 1


def test_depth_bound_drops_start_tags_with_their_end_tags() -> None:
    policy = FetchPolicy(max_html_depth=3)
    html = "<div>" * 5 + "x" + "</div>" * 5
    assert _bound_html(html, policy) == ("<div>" * 3 + "x" + "</div>" * 3, True)


def test_formatting_bound_keeps_eight_open() -> None:
    bounded, changed = _bound_html("<b>" * 12 + "x", FetchPolicy())
    assert changed and bounded == "<b>" * 8 + "x"


def test_attribute_bound_cuts_attributes_and_repeated_roots() -> None:
    policy = FetchPolicy(max_html_attributes=2)
    assert _bound_html("<p a=1 b=2 c=3>x", policy) == ("<p a=1 b=2 >x", True)
    # repeated <body> tags merge their attributes into the first: counted together
    html = "<body a=1><body b=1><body c=1><body d=1>"
    assert _bound_html(html, policy) == ("<body a=1><body b=1><body c=1><body>", True)


def test_lost_track_cuts_the_document() -> None:
    # each stray </li> inside a nested list is a close the model cannot be sure of
    html = "<ul><li><ul>" + "</li>" * (_MAX_UNSURE + 5) + "<p>after</p>"
    bounded, changed = _bound_html(html, FetchPolicy())
    assert changed and "after" not in bounded and bounded.startswith("<ul><li><ul>")

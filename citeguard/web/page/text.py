"""The text stage: visible text (dropped and hidden elements, breaks between blocks) and the
main text (the article body without boilerplate)."""

from __future__ import annotations

import re
from typing import Any

# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------

_DROP_TAGS = [
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "math",
    "iframe",
    "object",
    "embed",
    "canvas",
    "head",
]
_HIDDEN_SELECTOR = (
    '[hidden], [aria-hidden="true" i], [style*="display:none" i], [style*="display: none" i]'
)
# Elements laid out as blocks: picked by tag name in Python from one walk of the tree, which
# is 2.5x faster than lexbor matching a 44-name selector list against every element.
_BLOCK_TAGS = frozenset(
    (
        "address",
        "article",
        "aside",
        "blockquote",
        "br",
        "caption",
        "dd",
        "details",
        "dialog",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "td",
        "th",
        "tr",
        "ul",
        "option",
        "legend",
        "button",
        "select",
        "textarea",
        "center",
    )
)
_BOILERPLATE_TAGS = "nav, footer, aside, form, menu, dialog, button, select"
# Class/id hints of boilerplate, matched in C by lexbor: substrings that rarely occur inside a
# content class name, and whole tokens for short ones ("ad" would match "header" as a substring).
_BOILERPLATE_SUBSTRINGS = (
    "comment",
    "kommentar",
    "related",
    "share",
    "sharing",
    "social",
    "newsletter",
    "subscribe",
    "sidebar",
    "breadcrumb",
    "teaser",
    "promo",
    "advert",
    "werbung",
    "cookie",
    "consent",
    "banner",
    "widget",
    "recommend",
    "popular",
    "footer",
    "navbar",
    "navigation",
    "menu",
    "tagcloud",
    "author-bio",
    "authorbio",
    "pagination",
    "pager",
    "modal",
    "popup",
    "overlay",
    "outbrain",
    "taboola",
    "signup",
    "paywall",
    "byline",
    "newsticker",
    "skiplink",
    "skip-link",
    "more-stories",
    "read-more",
)
_BOILERPLATE_TOKENS = (
    "nav",
    "ad",
    "ads",
    "anzeige",
    "tags",
    "print",
    "rss",
    "meta",
    "share",
    "social",
)
_BOILERPLATE_SELECTOR = ", ".join(
    [f'[class*="{x}" i], [id*="{x}" i]' for x in _BOILERPLATE_SUBSTRINGS]
    + [f'[class~="{x}" i], [id="{x}" i]' for x in _BOILERPLATE_TOKENS]
)
_MAIN_CANDIDATES = ('[itemprop="articleBody"]', "article", "main", '[role="main"]')
_INVISIBLE_RE = re.compile("[\u00ad\u200b\u200c\u200d\u2060\ufeff]")
_INVISIBLE_CHARS = ("\u00ad", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff")
#: Marks block boundaries in the DOM before text is read; not whitespace to ``str.split``.
_BLOCK_MARK = "\x01"


def _clean_text(raw: str) -> str:
    """Render text as a browser would lay it out, roughly.

    Any run of source whitespace (newlines included) is one space; a block boundary
    (``_BLOCK_MARK``) is one newline. Soft hyphens and zero-width characters are dropped.
    """
    if any(ch in raw for ch in _INVISIBLE_CHARS):
        raw = _INVISIBLE_RE.sub("", raw)
    # str.split() with no argument splits on every Unicode space (nbsp, thin space…) in C;
    # plain str methods beat a regex here by an order of magnitude on large pages
    flat = " ".join(raw.split())
    if _BLOCK_MARK not in flat:
        return flat
    # the only whitespace left is single spaces, so strip() drops the space on each side of a
    # mark; runs of marks leave empty pieces, which go
    return "\n".join(filter(None, map(str.strip, flat.split(_BLOCK_MARK))))


def _main_node(tree: Any) -> Any:
    """The element holding the article body: markup hints first, else the densest paragraphs."""
    for selector in _MAIN_CANDIDATES:
        best: Any = None
        best_len = 0
        for node in tree.css(selector):
            length = len(node.text(separator=" ").strip())
            if length > best_len:
                best, best_len = node, length
        if best is not None and best_len >= 200:
            return best
    # readability-style scoring: every paragraph credits its parent fully, its grandparent half
    scores: dict[int, float] = {}
    nodes: dict[int, Any] = {}
    for p in tree.css("p, pre, blockquote"):
        length = len(p.text(separator=" ").strip())
        if length < 25:
            continue
        parent = p.parent
        if parent is None:
            continue
        scores[parent.mem_id] = scores.get(parent.mem_id, 0.0) + length
        nodes[parent.mem_id] = parent
        grand = parent.parent
        if grand is not None:
            scores[grand.mem_id] = scores.get(grand.mem_id, 0.0) + length / 2
            nodes[grand.mem_id] = grand
    if not scores:
        return None
    return nodes[max(scores, key=scores.__getitem__)]


def _main_text(tree: Any) -> str | None:
    """The article body's text, or None when the page has no body text at all."""
    node = _main_node(tree)
    if node is None:
        node = tree.body
        if node is None:
            return None
    total = len(node.text(separator=""))
    for bad in node.css(_BOILERPLATE_TAGS):
        bad.decompose()
    for bad in node.css("header"):
        # a site header is boilerplate; an article's own header carries its headline and dek
        if not bad.css_matches("article header"):
            bad.decompose()
    for bad in node.css(_BOILERPLATE_SELECTOR):
        if bad.tag in ("html", "body", "main", "article"):
            continue
        # layout wrappers are often named after their sidebar ("has-sidebar", "share-zone"):
        # an element holding much of the candidate's text is content, whatever its name
        if len(bad.text(separator="")) * 5 >= total * 2:
            continue
        bad.decompose()
    text = _clean_text(node.text(separator=""))
    return text or None

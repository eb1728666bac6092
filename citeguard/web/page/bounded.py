"""Bounded HTML: one linear pass that keeps hostile markup within the parser's depth, node and
attribute bounds before lexbor sees it."""

from __future__ import annotations

import re
from collections.abc import Iterator

from citeguard.policy import FetchPolicy

# --------------------------------------------------------------------------------------------
# Bounded HTML
# --------------------------------------------------------------------------------------------
# lexbor's tree builder is worse than linear in the depth of its stack of open elements and in
# the attributes of one element (100k nested <div>s take a minute, one element with 100k
# attributes longer), and it re-opens unclosed formatting elements in every new block (a 160 kB
# page can become 5 million nodes). So before parsing, one linear pass reads the tokens as the
# HTML tokenizer does (quoted attribute values, comments, raw text and script escapes, foreign
# content, CDATA) and models the stack of open elements with the tree builder's rules for
# closing: scopes, special elements, implied ends, foreign content, integration points. Where
# the model cannot tell what the tree builder does, it keeps elements open: the real stack is
# never deeper than the model's, bar the three levels a table adds (table sections, rows and
# cells are not modelled), the formatting elements a block re-opens and what the model's own
# safety nets allow (a close pops at most _MAX_POPS elements; after _MAX_UNSURE closes it
# could not be sure of, the document is cut).
#
# Only when a bound is passed is the document rewritten: start tags nested past the depth
# bound, and formatting start tags past a small bound, are dropped with their end tags (their
# text stays, in the deepest element kept); attributes past the attribute bound are dropped; the
# document is cut at its size bound and before its token past the node bound. A page within the
# bounds is parsed exactly as it came.

_ATTR = (
    r"[^\t\n\f\r />][^\t\n\f\r />=]*+"
    r"(?:[\t\n\f\r ]*+=[\t\n\f\r ]*+(?:\"[^\"]*+\"|'[^']*+'|(?![\"'])[^\t\n\f\r >]*+))?+"
)
#: A start or end tag (1: "/", 2: name, 3: attributes), "<!--" (4), a letter that starts a tag
#: with no end (5), or a bogus comment, doctype or processing instruction.
_TOKEN_RE = re.compile(
    r"<(?:(/?)([A-Za-z][^\t\n\f\r />]*+)((?:[\t\n\f\r /]++|" + _ATTR + r")*+)>"
    r"|(!--)|([A-Za-z])|[!?/])"
)
_ATTR_RE = re.compile(_ATTR)
_ATTR_PARTS_RE = re.compile(
    r"([^\t\n\f\r />][^\t\n\f\r />=]*)(?:[\t\n\f\r ]*=[\t\n\f\r ]*(.*))?", re.S
)
_COMMENT_RE = re.compile(r"<!--(?:-?>|.*?--!?>)", re.S)
_SCRIPT_STATE_RE = re.compile(r"<!--|-->|<(/?)script[\t\n\f\r />]", re.I)


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Not modelled as open: void elements, the document's roots, and the parts of a table, which
#: the tree builder nests only inside a table (three levels per table: section, row, cell).
_UNMODELLED = _names(
    "area base basefont bgsound br col embed frame hr image img input keygen link meta param"
    " source track wbr html head body tr td th thead tbody tfoot caption colgroup"
)
#: Start tags that close an open <p> first (in button scope; <table> only in no-quirks mode,
#: which the model cannot know, so it keeps the <p>).
_CLOSES_P = _names(
    "address article aside blockquote center details dialog dir div dl fieldset figcaption"
    " figure footer header hgroup main menu nav ol p search section summary ul h* pre listing"
    " form li dd dt plaintext xmp hr"
)
_FORMATTING = _names("a b big code em font i nobr s small strike strong tt u")
#: Formatting elements left open past this many are dropped: the tree builder re-opens each in
#: every later block, so they multiply the tree (it keeps at most 3 identical ones).
_MAX_OPEN_FORMATTING = 8
#: A close that would pop more elements than this is not believed (the model keeps them), and
#: after this many closes the model could not be sure of, the rest of the document is cut.
_MAX_POPS = 8
_MAX_UNSURE = 128
#: End tags closing up to a boundary of the default scope; li adds ol and ul, table has its own
#: (table, template); every other end tag stops at a special element.
_SCOPED_END = _names(
    "address article aside blockquote button center details dialog dir div dl fieldset"
    " figcaption figure footer header hgroup listing main menu nav ol pre search section summary"
    " ul h* applet marquee object dd dt"
)
_SCOPE = _names("applet caption html table td th marquee object template")
_SVG_SCOPE = _names("^foreignobject ^desc ^title")
_MATH_SCOPE = _names("^mi ^mo ^mn ^ms ^mtext ^annotation-xml")
_FOREIGN_SCOPE = _SVG_SCOPE | _MATH_SCOPE
_SPECIAL = _SCOPE | _names(
    "address area article aside base basefont bgsound blockquote body br button center col"
    " colgroup dd details dir div dl dt embed fieldset figcaption figure footer form frame"
    " frameset h* head header hgroup hr iframe img input keygen li link listing main menu meta"
    " nav noembed noframes noscript ol p param plaintext pre script search section select"
    " source style summary tbody textarea tfoot thead title tr track ul wbr xmp"
)
#: Special elements that stop a new <li>, <dd> or <dt> from closing an open one.
_ITEM_BARRIERS = (_SPECIAL - _names("address div p")) | _FOREIGN_SCOPE
#: Elements whose content the tokenizer reads as text up to their end tag (lexbor parses
#: without scripting, so <noscript> holds markup).
_RAW_TEXT = _names("script style textarea title xmp iframe noembed noframes")
_RAW_END_RES: dict[str, re.Pattern[str]] = {
    name: re.compile(rf"</{name}[\t\n\f\r />]", re.I) for name in _RAW_TEXT
}
#: Foreign elements whose content is HTML again: SVG's, and MathML's (annotation-xml only with
#: an HTML encoding).
_SVG_INTEGRATION = _names("foreignobject desc title")
_MATH_INTEGRATION = _names("mi mo mn ms mtext")
#: HTML start tags that end foreign content (font only with color, face or size).
_BREAKOUT = _names(
    "b big blockquote body br center code dd div dl dt em embed h1 h2 h3 h4 h5 h6 head hr i img"
    " li listing menu meta nobr ol p pre ruby s small span strong strike sub sup table tt u ul var"
)
_HEADINGS = _names("h1 h2 h3 h4 h5 h6")
# the mark lists an open element belongs to (indexes into the model's marks)
_SCOPE_M, _LIST_M, _TABLE_M, _SPECIAL_M, _ITEM_M, _HTML_M, _BUTTON_M, _FMT_M = range(8)
# kinds of open element: HTML, SVG, an SVG element holding HTML, MathML, a MathML one holding it
_HTML, _SVG, _SVG_HTML, _MATH, _MATH_HTML = range(5)


def _attr_values(attrs: str) -> Iterator[tuple[str, str]]:
    """(lower-cased name, value) of each attribute, as the tokenizer reads them."""
    for a in _ATTR_RE.finditer(attrs):
        parts = _ATTR_PARTS_RE.fullmatch(a.group())
        if parts is None:  # pragma: no cover - _ATTR_RE matches only what this reads
            continue
        value = (parts.group(2) or "").strip()
        if value[:1] in ("'", '"'):
            value = value[1:-1]
        yield parts.group(1).lower(), value


def _foreign_kind(name: str, attrs: str, math: bool) -> int:
    """The kind of a new foreign element: SVG or MathML, holding HTML or not."""
    if not math:
        return _SVG_HTML if name in _SVG_INTEGRATION else _SVG
    if name in _MATH_INTEGRATION:
        return _MATH_HTML
    if name == "annotation-xml" and "encoding" in attrs.lower():
        for key, value in _attr_values(attrs):
            if key == "encoding" and value.lower() in ("text/html", "application/xhtml+xml"):
                return _MATH_HTML
    return _MATH


def _self_closing(attrs: str) -> bool:
    """Whether a tag's attributes end in the self-closing flag (a "/" not inside a value)."""
    if not attrs.endswith("/"):
        return False
    final = None
    for final in _ATTR_RE.finditer(attrs):  # noqa: B007 - the last attribute is wanted
        pass
    return final is None or final.end() < len(attrs) or "=" not in final.group()


def _script_end(html: str, pos: int) -> int:
    """Where the script data starting at ``pos`` ends (its ``</script``), or -1: the tokenizer's
    escaped and double-escaped states, in which ``</script>`` may not end it."""
    state = 0  # 0 data, 1 escaped ("<!--" seen), 2 double escaped ("<script" inside it)
    while True:
        m = _SCRIPT_STATE_RE.search(html, pos)
        if m is None:
            return -1
        token = m.group()
        pos = m.end()
        if token == "<!--":
            if state == 0:
                state = 1
                if html.startswith(">", pos) or html.startswith("->", pos):
                    state = 0  # "<!-->" and "<!--->" close at once
        elif token == "-->":
            state = 0
        elif m.group(1):  # </script
            if state == 2:
                state = 1
            else:
                return m.start()
        elif state == 1:  # <script inside an escaped part
            state = 2


_UNMODELLED_F, _RAW_F, _FORMATTING_F, _SCOPED_END_F, _BREAKOUT_F = (1 << i for i in range(5))


def _name_info(name: str) -> tuple[str, int]:
    """(the name the model keys an HTML element by, its _*_F flags)."""
    key = "h*" if name in _HEADINGS else name
    flags = 0
    for names, flag in (
        (_UNMODELLED, _UNMODELLED_F),
        (_RAW_TEXT, _RAW_F),
        (_FORMATTING, _FORMATTING_F),
        (_SCOPED_END, _SCOPED_END_F),
        (_BREAKOUT, _BREAKOUT_F),
    ):
        if key in names or name in names:
            flags |= flag
    return key, flags


def _marks_of(key: str, kind: int) -> tuple[int, ...]:
    """The mark lists an element opened with ``key`` and ``kind`` joins."""
    if kind:  # foreign ("^name"): the scope boundaries of its namespace
        scoped = _SVG_SCOPE if kind in (_SVG, _SVG_HTML) else _MATH_SCOPE
        return (_SCOPE_M, _SPECIAL_M, _ITEM_M) if key in scoped else ()
    out = [_HTML_M]
    if key == "button":
        out.append(_BUTTON_M)
    if key in _FORMATTING:
        out.append(_FMT_M)
    if key in _SCOPE:
        out.append(_SCOPE_M)
    if key in ("ol", "ul"):
        out.append(_LIST_M)
    if key in ("table", "template"):
        out.append(_TABLE_M)
    if key in _SPECIAL:
        out.append(_SPECIAL_M)
    if key in _ITEM_BARRIERS:
        out.append(_ITEM_M)
    return tuple(out)


# lexbor's cost grows with the square of the nesting depth and of one element's attribute
# count (measured: 4,000 nested <div> 10 ms, 4,000 attributes on one tag 18 ms; 20,000: 0.6 s
# and 1 s). A document that provably stays small on every axis is parsed as it is, skipping
# :func:`_bound_html` (a linear pass, ~1.5 ms per page in Python): at most _PARSE_AS_IS_TAGS
# "<" (so no deeper than that), no element with max_html_attributes attributes or more (an
# attribute needs no "=": one tag of 50,000 bare names took 19 s), little text per level of
# depth (the main-text pass reads an element's text once per nested candidate), few formatting
# tags per tag (each can be re-opened in every later block) and few repeated <html>/<body>
# tags (each merges its attributes into the first). Checked at C speed; 70% of the shared real
# pages pass.
_PARSE_AS_IS_TAGS = 4_000
_PARSE_AS_IS_TEXT_WORK = 1_000_000_000  # "<" x characters
_PARSE_AS_IS_REOPEN_WORK = 500_000  # formatting start tags x "<"
_PARSE_AS_IS_ROOTS = 64
# Formatting start tags (group 1) and <html>/<body> start tags (group 1 empty), in one pass.
# ASCII case only, as the tokenizer lowercases names (re.I alone would also let "<ſ" match
# "s"); the lookahead on the first letter skips most "<" at once: 2.6x faster on real pages
_COUNTED_START_RE = re.compile(
    r"<(?=[bcefhinstu])(?:(b|big|code|em|font|i|nobr|s|small|strike|strong|tt|u)|html|body)"
    r"[\t\n\f\r />]",
    re.I | re.A,
)


def _many_attributes_re(count: int) -> re.Pattern[str]:
    """A tag with at least ``count`` attributes, read as the tokenizer reads them (re caches
    the compiled pattern)."""
    return re.compile(r"<[A-Za-z][^\t\n\f\r />]*+(?:[\t\n\f\r /]*+" + _ATTR + f"){{{count}}}")


def _small_enough(html: str, policy: FetchPolicy) -> bool:
    """Whether ``html`` is too small for any bound to matter (counted at C speed)."""
    tags = html.count("<")
    if (
        len(html) > policy.max_html_chars
        or tags > min(_PARSE_AS_IS_TAGS, policy.max_html_nodes, 16 * policy.max_html_depth)
        or tags * len(html) > _PARSE_AS_IS_TEXT_WORK
    ):
        return False
    counted = _COUNTED_START_RE.findall(html)
    roots = counted.count("")
    if (len(counted) - roots) * tags > _PARSE_AS_IS_REOPEN_WORK or roots > _PARSE_AS_IS_ROOTS:
        return False
    return _many_attributes_re(policy.max_html_attributes).search(html) is None


# what a step tells the token loop: go on with the token's next step, read the next token, stop
_GO_ON, _NEXT, _STOP = range(3)
#: The scope an end tag closes its element in (a mark list; -1: none); an end tag not named here
#: closes up to a scope boundary when it is in _SCOPED_END, up to a special element otherwise.
_END_SCOPES: dict[str, int] = {"template": -1, "table": _TABLE_M, "li": _SCOPE_M, "p": _BUTTON_M}


class _OpenElements:
    """The model of the tree builder's stack of open elements.

    Open elements (key, kind; foreign keys are "^" + name), where each key sits, the marks (see
    :func:`_marks_of`), and fences: parts the tokenizer may read as text, inside which nothing
    closes what was open before them. ``pos`` is where the reading stands."""

    def __init__(self, html: str) -> None:
        self.html = html
        self.pos = 0
        self.end = len(html)
        self.keys: list[str] = []
        self.kinds: list[int] = []
        self.joined: list[tuple[int, ...]] = []
        self.positions: dict[str, list[int]] = {}
        self.marks: tuple[list[int], ...] = ([], [], [], [], [], [], [], [])
        self.fences: list[tuple[int, int]] = []  # (lowest index a close may pop, part's end)
        self.unsure = 0  # closes the model could not be sure of
        # where the next end of a raw text part ("</title", "]]>", "<!--") is, remembered:
        # asked again from a later position, a search only reads past what an earlier one read
        self.nexts: dict[str, tuple[int, int]] = {}  # what -> (searched from, found at or -1)

    def next_of(self, what: str, start: int) -> int:
        """Where ``what`` (a raw text element's end tag, or a string) next occurs from ``start``."""
        known = self.nexts.get(what)
        if known is not None and known[0] <= start and (known[1] < 0 or known[1] >= start):
            return known[1]
        if what in _RAW_END_RES:
            r = _RAW_END_RES[what].search(self.html, start)
            found = r.start() if r is not None else -1
        else:
            found = self.html.find(what, start)
        self.nexts[what] = (start, found)
        return found

    def floor(self) -> int:
        """The lowest index a close may pop at ``pos``: closes never pop below the floor, so each
        fence's floor is at least the one before: the last fence still open holds the highest."""
        fences = self.fences
        while fences and fences[-1][1] <= self.pos:
            fences.pop()
        return fences[-1][0] if fences else 0

    def fenced(self) -> bool:
        """Whether ``pos`` lies in a part the tokenizer may read as text."""
        self.floor()
        return bool(self.fences)

    def resume(self) -> int:
        """Where to read on when the markup seems to end at ``pos`` (an unterminated comment or
        tag): inside a part that may be text, at that part's end, which is where the tokenizer
        goes on if it read the part as text; elsewhere nowhere (-1): the document ends here."""
        if not self.fenced():
            return -1
        return min((e for _, e in self.fences if e > self.pos), default=-1)

    def last(self, m: int) -> int:
        """The index of the newest open element on mark list ``m``, or -1."""
        lst = self.marks[m]
        return lst[-1] if lst else -1

    def push(self, key: str, kind: int, into: tuple[int, ...]) -> None:
        """Open an element ``key`` of ``kind`` that joins the mark lists ``into``."""
        i = len(self.keys)
        self.keys.append(key)
        self.kinds.append(kind)
        where = self.positions.get(key)
        if where is None:
            self.positions[key] = [i]
        else:
            where.append(i)
        self.joined.append(into)
        for m in into:
            self.marks[m].append(i)

    def pop_to(self, i: int) -> bool:
        """Close the element at ``i`` and everything above it, if the model may: never below a
        fence, never more than _MAX_POPS at once (not believed: counted as unsure)."""
        keys = self.keys
        if (self.fences and i < self.floor()) or len(keys) - i > _MAX_POPS:
            self.unsure += 1
            return False
        while len(keys) > i:
            self.positions[keys.pop()].pop()
            self.kinds.pop()
            for m in self.joined.pop():
                self.marks[m].pop()
        return True

    def close(self, key: str, scope: int) -> bool:
        """Close the HTML element ``key`` if it is open and no boundary of ``scope`` (a mark
        list, or -1 for none) stands above it."""
        where = self.positions.get(key)
        if not where:
            return False
        i = where[-1]
        if self.kinds[i]:
            return False  # the newest element of that name is foreign: not an HTML one
        floor_at = -1
        if scope >= 0:
            floor_at = max(self.last(scope), self.last(_LIST_M) if key == "li" else -1)
        if i < floor_at:
            self.unsure += 1  # the tree builder ignores it, unless the boundary is stale
            return False
        return self.pop_to(i)

    def close_current(self, key: str) -> bool:
        """Close the current node when it is the HTML element ``key``."""
        current = bool(self.keys) and self.keys[-1] == key and self.kinds[-1] == _HTML
        return current and self.pop_to(len(self.keys) - 1)

    def end_foreign(self) -> None:
        """Close foreign elements up to an HTML element or an integration point (not past a
        fence)."""
        lowest = self.floor() if self.fences else 0
        while len(self.keys) > lowest and self.kinds[-1] in (_SVG, _MATH):
            if not self.pop_to(len(self.keys) - 1):
                break


class _Bounding(_OpenElements):
    """One pass of :func:`_bound_html` over one document: the token loop, one step per decision,
    and the edits it collects."""

    def __init__(self, html: str, policy: FetchPolicy) -> None:
        self.cut = len(html) > policy.max_html_chars
        super().__init__(html[: policy.max_html_chars] if self.cut else html)
        self.max_depth = policy.max_html_depth
        self.max_attrs = policy.max_html_attributes
        self.max_tokens = policy.max_html_nodes
        self.attrs_check = 2 * self.max_attrs  # only longer attributes can hold more
        self.edits: list[tuple[int, int, str]] = []  # (start, end, replacement), in order
        self.infos: dict[
            str, tuple[str, int, str, tuple[int, ...]]
        ] = {}  # key, flags, lower, marks
        self.foreign_marks: dict[tuple[str, int], tuple[int, ...]] = {}
        self.dropped: dict[str, int] = {}  # start tags dropped past a bound, by key
        self.formatting: dict[str, int] = {}  # formatting start tags not closed by an end tag
        self.open_formatting = 0
        self.roots: set[str] = set()  # <html>/<body> seen: a repeat only merges its attributes
        self.merged = 0  # attributes that repeated <html>/<body> tags merged
        self.tokens = 0

    def run(self) -> None:
        """Read the tokens to the end of the document, or to where a bound cuts it."""
        search = _TOKEN_RE.search
        html = self.html
        while True:
            if self.unsure > _MAX_UNSURE:
                self.end, self.cut = self.pos, True  # lost track: no deeper tree past here
                return
            m = search(html, self.pos)
            if m is None:
                return
            at = m.start()
            self.tokens += 1
            if self.tokens > self.max_tokens:
                self.end, self.cut = at, True
                return
            if m.group(2) is None:
                step = self.markup(m, at)
            else:
                self.pos = m.end()
                step = self.tag(m, at)
            if step == _STOP:
                return

    def markup(self, m: re.Match[str], at: int) -> int:
        """A comment, a bogus comment, a doctype, a processing instruction or CDATA."""
        comment, unclosed = m.group(4), m.group(5)
        c = _COMMENT_RE.match(self.html, at) if comment else None  # "<!--"
        close_at = -1 if comment or unclosed else self.html.find(">", at)
        if c is None and close_at < 0:
            # an unterminated comment, tag or doctype: the rest is inside it
            self.pos = self.resume()
            return _STOP if self.pos < 0 else _NEXT
        if c is not None:
            self.pos = c.end()
            return _NEXT
        self.pos = close_at + 1
        if self.html.startswith("<![CDATA[", at):
            # text up to "]]>" in foreign content, a bogus comment up to ">" elsewhere: read
            # what follows the ">" as markup that closes nothing open before it
            cdata_end = self.next_of("]]>", at)
            self.fences.append((len(self.keys), cdata_end if cdata_end >= 0 else self.end))
        return _NEXT

    def info(self, raw_name: str) -> tuple[str, int, str, tuple[int, ...]]:
        """(key, _*_F flags, lower-cased name, HTML marks) of a tag name first seen, kept."""
        lower = raw_name.lower()
        key, flags = _name_info(lower)
        info = self.infos[raw_name] = (key, flags, lower, _marks_of(key, _HTML))
        return info

    def tag(self, m: re.Match[str], at: int) -> int:
        """A start or end tag."""
        slash, raw_name, attrs = m.group(1, 2, 3)
        info = self.infos.get(raw_name) or self.info(raw_name)
        key, flags, lower, _ = info
        # formatting elements the tree builder may re-open at any point (left open, not on the
        # stack): the current node may be one of them, so nothing is closed for being current
        reopens = self.open_formatting > len(self.marks[_FMT_M])
        if slash:
            self.end_tag(at, key, flags, lower, reopens)
            return _NEXT
        return self.start_tag(at, raw_name, attrs, info, reopens)

    # ---- end tags ----------------------------------------------------------------------------

    def end_tag(self, at: int, key: str, flags: int, lower: str, reopens: bool) -> None:
        """An end tag: dropped with its start tag, closing foreign content, or by HTML rules."""
        if self.dropped and self.dropped.get(key):
            self.dropped[key] -= 1
            self.edits.append((at, self.pos, ""))
            return
        if self.kinds and self.kinds[-1] and not reopens and self.end_in_foreign(lower):
            return
        if flags & _FORMATTING_F and self.formatting.get(key):
            self.formatting[key] -= 1
            self.open_formatting -= 1
        if self.close_by_end_tag(key, flags) and self.dropped:
            self.dropped.clear()  # every element dropped was inside the one just closed

    def end_in_foreign(self, lower: str) -> bool:
        """An end tag in foreign content: the newest foreign element of that name closes when no
        HTML element stands above it (True: handled); otherwise the HTML rules apply, after
        </p> and </br> end foreign content."""
        where = self.positions.get("^" + lower)
        if where and where[-1] > self.last(_HTML_M):
            if self.pop_to(where[-1]) and self.dropped:
                self.dropped.clear()
            return True
        if lower in ("p", "br"):
            self.end_foreign()
        return False

    def close_by_end_tag(self, key: str, flags: int) -> bool:
        """Close what an HTML end tag closes; True when something closed."""
        if key in ("form", "frameset"):
            # </form> removes only the form, </frameset> pops only the current node: the
            # model closes them only when they are the current node
            return self.close_current(key)
        if key == "select":
            # select scope: only option and optgroup elements may stand above it
            where = self.positions.get("select")
            at_select = where[-1] if where else -1
            return (
                at_select >= 0
                and all(k == "optgroup" for k in self.keys[at_select + 1 :])
                and self.pop_to(at_select)
            )
        scope = _END_SCOPES.get(key)
        if scope is None:
            scope = _SCOPE_M if flags & _SCOPED_END_F else _SPECIAL_M
        return self.close(key, scope)

    # ---- start tags --------------------------------------------------------------------------

    def start_tag(
        self,
        at: int,
        raw_name: str,
        attrs: str,
        info: tuple[str, int, str, tuple[int, ...]],
        reopens: bool,
    ) -> int:
        """A start tag: its attributes bounded, then dropped, or read as text, or opened."""
        key, flags, lower, _ = info
        if len(attrs) > self.attrs_check:
            attrs = self.cap_attributes(at, raw_name, attrs)
        top = self.kinds[-1] if self.kinds else _HTML
        breakout, in_html = False, True  # the current node is HTML or an integration point
        if top in (_SVG, _MATH, _MATH_HTML):
            breakout, in_html = self.reading(top, key, flags, lower, attrs)
        positions = self.positions
        # certain: the tree builder reads this as HTML in body, outside any part that may be
        # text (only then is a raw text element surely read as text, plaintext surely final)
        certain = (
            in_html
            and not positions.get("select")
            and not positions.get("frameset")
            and not (self.fences and self.fenced())
        )
        leaf = self.is_leaf(key, flags, attrs, in_html, certain)
        if not leaf and self.drop_past_bound(at, key, flags, in_html):
            return _NEXT
        if breakout:
            self.end_foreign()
            if self.kinds and self.kinds[-1] in (_SVG, _MATH):
                self.unsure += 1  # a fence kept foreign content open the tree builder left
        if flags & _RAW_F and in_html:
            step = self.raw_text(key, certain)
            if step != _GO_ON:
                return step
        if in_html:  # an HTML element, whatever foreign content a fence kept open
            return self.open_html(at, raw_name, attrs, info, (certain, leaf, reopens))
        if not leaf:
            self.open_foreign(lower, attrs, top)
        return _NEXT

    def cap_attributes(self, at: int, raw_name: str, attrs: str) -> str:
        """The attributes the tree builder will read: past max_html_attributes they are cut
        (an edit rewrites the tag)."""
        for found, a in enumerate(_ATTR_RE.finditer(attrs)):
            if found >= self.max_attrs:
                attrs = attrs[: a.start()]
                self.edits.append((at, self.pos, f"<{raw_name}{attrs}>"))
                break
        return attrs

    def reading(self, top: int, key: str, flags: int, lower: str, attrs: str) -> tuple[bool, bool]:
        """(breakout, in_html): whether the start tag ends foreign content, and whether it is
        read as HTML. Foreign content: the current node is SVG or MathML, not an integration
        point (there HTML rules apply; MathML's text ones keep mglyph and malignmark foreign)."""
        foreign = top in (_SVG, _MATH)
        if top == _MATH_HTML and lower in ("mglyph", "malignmark"):
            foreign = True
        if top == _MATH and lower == "svg" and self.keys[-1] == "^annotation-xml":
            foreign = False  # <svg> in annotation-xml starts SVG, by the HTML rules
        breakout = foreign and bool(
            flags & _BREAKOUT_F
            or (
                key == "font"
                and any(k in ("color", "face", "size") for k, _ in _attr_values(attrs))
            )
        )
        return breakout, not foreign or breakout

    def is_leaf(self, key: str, flags: int, attrs: str, in_html: bool, certain: bool) -> bool:
        """Whether the element opens nothing the model keeps: void and unmodelled elements,
        self-closing foreign ones, raw text and plaintext read as text, "<svg/>"."""
        leaf = bool(flags & _UNMODELLED_F) if in_html else _self_closing(attrs)
        if certain and (flags & _RAW_F or key == "plaintext"):
            return True
        if in_html and key in ("svg", "math") and _self_closing(attrs):
            return True  # "<svg/>" closes at once
        return leaf

    def drop_past_bound(self, at: int, key: str, flags: int, in_html: bool) -> bool:
        """Drop the start tag when it would open past the depth bound or past the formatting
        bound (True): whole, before any of its effects, so what follows is read as the tree
        builder will read the document without it."""
        drop = len(self.keys) >= self.max_depth
        if not drop and flags & _FORMATTING_F and in_html:
            drop = self.open_formatting >= _MAX_OPEN_FORMATTING
        if not drop:
            return False
        self.dropped[key] = self.dropped.get(key, 0) + 1
        if self.edits and self.edits[-1][0] == at:
            self.edits.pop()  # the attribute edit of a tag now dropped whole
        self.edits.append((at, self.pos, ""))
        return True

    def raw_text(self, key: str, certain: bool) -> int:
        """A raw text element read as HTML. Surely read as text: skip to its end tag (_NEXT), or
        stop when there is none. Perhaps read as text: read it as markup, but let nothing inside
        close what was open before it (a script's escapes can carry it past its first end tag:
        then to the end of the document) (_GO_ON)."""
        if certain:
            raw_end = (
                _script_end(self.html, self.pos) if key == "script" else self.next_of(key, self.pos)
            )
            if raw_end < 0:
                return _STOP  # text to the end of the document
            self.pos = raw_end
            return _NEXT
        raw_end = self.next_of(key, self.pos)
        if raw_end < 0 or (key == "script" and 0 <= self.next_of("<!--", self.pos) < raw_end):
            raw_end = self.end
        self.fences.append((len(self.keys), raw_end))
        return _GO_ON

    def open_html(
        self,
        at: int,
        raw_name: str,
        attrs: str,
        info: tuple[str, int, str, tuple[int, ...]],
        state: tuple[bool, bool, bool],
    ) -> int:
        """An HTML start tag: repeated roots merged, plaintext's end, the closes it implies,
        then the element opened (``state``: certain, leaf, reopens)."""
        key, flags, _, html_marks = info
        certain, leaf, reopens = state
        if key in ("html", "body"):
            self.merge_root(at, raw_name, key, attrs)
        if key == "plaintext" and certain:
            return _STOP  # text to the end of the document
        if leaf:
            return _NEXT
        self.close_implied(key, reopens)
        if key in ("svg", "math"):
            self.push("^" + key, _SVG if key == "svg" else _MATH, ())  # foreign content begins
            return _NEXT
        if flags & _FORMATTING_F:
            self.formatting[key] = self.formatting.get(key, 0) + 1
            self.open_formatting += 1
        self.push(key, _HTML, html_marks)
        return _NEXT

    def merge_root(self, at: int, raw_name: str, key: str, attrs: str) -> None:
        """A repeated <html>/<body> adds its attributes to the first one (checking each against
        every attribute already there): bounded like one element's."""
        if key in self.roots and attrs.strip():
            self.merged += sum(1 for _ in _ATTR_RE.finditer(attrs))
            if self.merged > self.max_attrs:
                if self.edits and self.edits[-1][0] == at:
                    self.edits.pop()
                self.edits.append((at, self.pos, f"<{raw_name}>"))
        self.roots.add(key)

    def close_implied(self, key: str, reopens: bool) -> None:
        """What an HTML start tag closes before it opens: an open item of its kind, an open <p>
        in button scope, a heading or option that is the current node."""
        if key in ("li", "dd", "dt"):
            # a new item closes the open one of its kind, unless a special element other
            # than address, div or p stands between
            same = ("li",) if key == "li" else ("dd", "dt")
            positions = self.positions
            target = max((positions[k][-1] for k in same if positions.get(k)), default=-1)
            if target >= 0 and target >= self.last(_ITEM_M):
                self.pop_to(target)
        if key in _CLOSES_P and self.positions.get("p"):
            at_p = self.positions["p"][-1]
            if at_p > max(self.last(_SCOPE_M), self.last(_BUTTON_M)):
                self.pop_to(at_p)
        current_key = ""
        if self.keys and self.kinds[-1] == _HTML and not reopens:
            current_key = self.keys[-1]
        if key == "h*" and current_key == "h*":
            self.pop_to(len(self.keys) - 1)  # a heading closes a heading that is current
        elif key in ("option", "optgroup") and current_key == "option":
            self.pop_to(len(self.keys) - 1)  # so does an option an option

    def open_foreign(self, lower: str, attrs: str, top: int) -> None:
        """A foreign element: SVG or MathML as its parent, holding HTML or not."""
        kind = _foreign_kind(lower, attrs, top in (_MATH, _MATH_HTML))
        into = self.foreign_marks.get((lower, kind))
        if into is None:
            into = self.foreign_marks[(lower, kind)] = _marks_of("^" + lower, kind)
        self.push("^" + lower, kind, into)

    def result(self) -> tuple[str, bool]:
        """The document with the edits applied, cut at ``end``; True when changed."""
        if not self.edits and not self.cut:
            return self.html, False
        return _apply_edits(self.html, self.edits, self.end), True


def _apply_edits(html: str, edits: list[tuple[int, int, str]], end: int) -> str:
    """``html`` up to ``end`` with each (start, stop, replacement) in ``edits`` (in document
    order) applied; edits starting at or past ``end`` are left out."""
    pieces: list[str] = []
    last_end = 0
    for start, stop, replacement in edits:
        if start >= end:
            break
        pieces.append(html[last_end:start])
        pieces.append(replacement)
        last_end = stop
    pieces.append(html[last_end:end])
    return "".join(pieces)


def _bound_html(html: str, policy: FetchPolicy) -> tuple[str, bool]:
    """``html`` within ``policy``'s size, depth, node and attribute bounds; True when changed."""
    bounding = _Bounding(html, policy)
    bounding.run()
    return bounding.result()

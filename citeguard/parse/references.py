"""The reference list: code fences, reference definitions, ``Sources:`` blocks and a
trailing numbered list of URLs, found line by line into the answer's layout."""

from __future__ import annotations

import re

from citeguard.models import Finding, Severity
from citeguard.parse.base import (
    _AXIS,
    _QUICK_NUM_MARKER,
    _expand_numbers,
    _HitBudget,
    _Layout,
    _Line,
    _normalize_key,
    _RefDef,
)
from citeguard.parse.links import _extract_url, _looks_like_destination
from citeguard.parse.markdown import _FENCE
from citeguard.parse.markers import _GLUED, _glued_reading

# Reference list lines.
_FOOTNOTE_DEF = re.compile(r"[ \t]{0,3}\[\^([^\]\s]{1,100})\]:[ \t]*(.*)")

_LINK_DEF = re.compile(r"[ \t]{0,3}\[([^\[\]\n^][^\[\]\n]{0,199})\]:[ \t]*(.*)")

_BRACKET_NUM_ENTRY = re.compile(r"[ \t]*(?:[-*+•][ \t]+)?\[(\d{1,3})\][.:)]?[ \t]+(.*)")

_LIST_NUM_ENTRY = re.compile(r"[ \t]*(\d{1,3})[.)][ \t]+(.*)")

_SOURCES_WORDS = (
    r"(?:sources?(?:[ \t]+(?:cited|used))?|references?|citations?|bibliography|works[ \t]+cited"
    r"|links|further[ \t]+reading|reference[ \t]+list|quellen"
    r"|参考文献|参考资料|参考|来源|出典|出处)"
)

_SOURCES_HEADING = re.compile(
    r"[ \t]{0,3}(?:#{1,6}[ \t]*)?(?:[*_]{1,3})?[ \t]*"
    + _SOURCES_WORDS
    + r"[ \t]*(?:[*_]{1,3})?[ \t]*[:：]?[ \t]*(?:[*_]{1,3})?[ \t]*",
    re.IGNORECASE,
)

_SOURCES_INLINE = re.compile(
    r"[ \t]{0,3}(?:[*_]{1,3})?" + _SOURCES_WORDS + r"(?:[*_]{1,3})?[ \t]*[:：]", re.IGNORECASE
)

_ENTRY_START = re.compile(r"[ \t]*(?:[-*+•][ \t]+|\d{1,3}[.)][ \t]+|\[)")


def _scan_layout(text: str, lines: list[_Line], budget: _HitBudget) -> _Layout:
    """Find code fences, reference definitions and ``Sources:`` blocks, line by line. Each
    definition (or duplicate) takes one from ``budget``."""
    layout = _Layout(budget=budget)
    n = len(lines)

    # Fenced code: only a fence that is closed makes a code block (an LLM's stray ``` must not
    # swallow the rest of the answer).
    i = 0
    while i < n:
        m = _FENCE.match(lines[i].text)
        if m is not None:
            fence = m.group(1)
            j = i + 1
            while j < n and not lines[j].text.lstrip().startswith(fence):
                j += 1
            if j < n:
                layout.code_lines.update(range(i, j + 1))
                i = j + 1
                continue
        i += 1

    in_section = False
    i = 0
    while i < n:
        line = lines[i]
        s = line.text
        if i in layout.code_lines:
            in_section = False
            i += 1
            continue
        if len(s) <= 80 and _SOURCES_HEADING.fullmatch(s):
            in_section = True
            layout.source_lines.add(i)
            i += 1
            continue
        consumed = _try_definition(lines, i, layout, in_section=in_section)
        if consumed:
            i += consumed
            continue
        if in_section:
            if _ENTRY_START.match(s) or _extract_url(s) is not None:
                layout.source_lines.add(i)
                i += 1
                continue
            in_section = False
        inline = _SOURCES_INLINE.match(s)
        if inline is not None:
            # "Sources: [1] https://a.org" (the list's first entry shares the heading's line,
            # as when <br> separated them): a definition, and the section goes on.
            entry = _BRACKET_NUM_ENTRY.fullmatch(s, inline.end()) or _LIST_NUM_ENTRY.fullmatch(
                s, inline.end()
            )
            found = _extract_url(entry.group(2)) if entry is not None else None
            if entry is not None and found is not None:
                _add_definition(layout, _normalize_key(entry.group(1)), found[0], i, lines)
                layout.def_lines.add(i)
                in_section = True
            elif _extract_url(s[inline.end() :]) is not None:
                layout.source_lines.add(i)  # "Sources: https://a.org, https://b.org"
        i += 1

    _claim_trailing_numbered_block(text, lines, layout)
    return layout


def _try_definition(lines: list[_Line], i: int, layout: _Layout, *, in_section: bool) -> int:
    """Record line ``i`` as a reference definition if it is one; return how many lines it used."""
    s = lines[i].text
    stripped = s.lstrip()
    if not stripped or not (stripped[0] == "[" or stripped[0].isdigit() or stripped[0] in "-*+•"):
        return 0

    key: str | None = None
    url: str | None = None
    from_next = False  # the URL sits on an indented continuation line
    m = _FOOTNOTE_DEF.fullmatch(s)
    if m is not None:
        key = "^" + _normalize_key(m.group(1))
        found = _extract_url(m.group(2))
        url = found[0] if found else None
    else:
        m = _LINK_DEF.fullmatch(s)
        if m is not None:
            rest = m.group(2).strip()
            found = _extract_url(rest)
            if found is not None:
                key, url = _normalize_key(m.group(1)), found[0]
            elif rest.startswith("<") and ">" in rest:
                key, url = _normalize_key(m.group(1)), rest[1 : rest.index(">")]
            elif rest and _looks_like_destination(rest.split()[0]):
                key, url = _normalize_key(m.group(1)), rest.split()[0]
            elif m.group(1).strip().isdigit() and (in_section or not rest):
                key = _normalize_key(m.group(1))
        else:
            m = _BRACKET_NUM_ENTRY.fullmatch(s)
            if m is None and in_section:
                m = _LIST_NUM_ENTRY.fullmatch(s)
            if m is not None:
                found = _extract_url(m.group(2))
                if found is not None:
                    key, url = _normalize_key(m.group(1)), found[0]
                elif in_section:
                    key = _normalize_key(m.group(1))
    if key is None:
        return 0
    if url is None:
        url = _continuation_url(lines, i, in_section=in_section)
        from_next = url is not None
    _add_definition(layout, key, url, i, lines)
    used = 2 if from_next else 1
    layout.def_lines.update(range(i, i + used))
    return used


def _continuation_url(lines: list[_Line], i: int, *, in_section: bool) -> str | None:
    """The next line that carries the entry's URL: indented ("1. Long title\\n   https://…"),
    or, inside a ``Sources:`` block, a line that is nothing but the URL ("[1] Title<br>https://…",
    as chat UIs lay out a source)."""
    if i + 1 >= len(lines):
        return None
    nxt = lines[i + 1].text
    if lines[i + 1].gap_before or _ENTRY_START.match(nxt.strip() + " "):
        return None
    found = _extract_url(nxt)
    if found is None:
        return None
    if nxt[:1].isspace():
        return found[0]
    alone = in_section and found[1] == 0 and not any(ch.isspace() for ch in nxt.strip())
    return found[0] if alone else None


def _add_definition(layout: _Layout, key: str, url: str | None, i: int, lines: list[_Line]) -> None:
    layout.budget.take()
    existing = layout.defs.get(key)
    if existing is None:
        layout.defs[key] = _RefDef(key=key, url=url, line=i)
        return
    same = existing.url == url
    layout.findings.append(
        Finding(
            code="duplicate_reference",
            message=(
                f"reference [{key}] is defined twice"
                + (" with the same URL" if same else f" ({existing.url!r} and {url!r})")
                + "; the first definition is used"
            ),
            severity=Severity.WARNING if same else Severity.ERROR,
            axis=_AXIS,
            url=url,
            details={"label": key, "first_url": existing.url, "offset": lines[i].start},
        )
    )


def _claim_trailing_numbered_block(text: str, lines: list[_Line], layout: _Layout) -> None:
    """``1. Title — url`` lines at the very end are a reference list when body markers cite them.

    Without a ``Sources:`` heading a numbered list of links is ambiguous (it may be the answer's
    own list of claims), so it counts as references only when it is the answer's trailing block
    and at least one ``[n]`` marker elsewhere names one of its numbers.
    """
    candidates: list[tuple[int, str, str]] = []
    i = len(lines) - 1
    while i >= 0:
        line = lines[i]
        if i in layout.code_lines:
            break
        if i in layout.def_lines:
            i -= 1
            continue
        m = _LIST_NUM_ENTRY.fullmatch(line.text)
        if m is None or i in layout.source_lines:
            break
        found = _extract_url(m.group(2))
        if found is None:
            break
        candidates.append((i, _normalize_key(m.group(1)), found[0]))
        i -= 1
    if not candidates:
        return
    block_start = lines[candidates[-1][0]].start
    cited: set[str] = set()
    for m in _QUICK_NUM_MARKER.finditer(text, 0, block_start):
        cited.update(_expand_numbers(m.group(1))[0])
    if not cited:  # no bracketed marker: markers glued to words ("markets13.") may cite it
        keys = {key for _, key, _ in candidates}
        for m in _GLUED.finditer(text, 0, block_start):
            cited.update(key for _, key in _glued_reading(m.group(1), m.group(2), keys))
    if not cited.intersection(key for _, key, _ in candidates):
        return
    for idx, key, url in reversed(candidates):
        _add_definition(layout, key, url, idx, lines)
        layout.def_lines.add(idx)

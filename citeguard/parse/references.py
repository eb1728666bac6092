"""The reference list: code fences, reference definitions, ``Sources:`` blocks and a
trailing numbered list of URLs, found line by line into the answer's layout."""

from __future__ import annotations

import re

from citeguard.errors import CiteguardError
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
from citeguard.parse.scholarly import MAX_ENTRY_CHARS, looks_scholarly
from citeguard.web.urls import normalize_url

# Reference list lines.
_FOOTNOTE_DEF = re.compile(r"[ \t]{0,3}\[\^([^\]\s]{1,100})\][:：][ \t]*(.*)")

_LINK_DEF = re.compile(r"[ \t]{0,3}\[([^\[\]\n^][^\[\]\n]{0,199})\][:：][ \t]*(.*)")

# "[1] …", "- [1]: …", and an entry that lists several numbers for one source ("[31] [48] [54]
# https://…", as reports exported from a chat product write them; "[31, 48] https://…")
_BRACKET_NUM_ENTRY = re.compile(
    r"[ \t]*(?:[-*+•][ \t]+)?(\[\d{1,3}(?:[ \t]*,[ \t]*\d{1,3}){0,30}\]"
    r"(?:[ \t]*\[\d{1,3}\]){0,30})[.:)：]?[ \t]+(.*)"
)

_ENTRY_NUMBER = re.compile(r"\d{1,3}")

_LIST_NUM_ENTRY = re.compile(r"[ \t]*(\d{1,3})[.)][ \t]+(.*)")

# what may come before the URL on an entry's second line ("URL: https://…", "链接：https://…")
_URL_LABEL = re.compile(
    r"(?:url|link|source|available[ \t]+at|链接|网址|地址|来源|出处)[ \t]*[:：]?", re.I
)

_SOURCES_WORDS = (
    r"(?:sources?(?:[ \t]+(?:cited|used))?|references?|citations?|bibliography|works[ \t]+cited"
    r"|links|further[ \t]+reading|reference[ \t]+list|quellen"
    r"|参考文献|参考资料|参考来源|参考链接|资料来源|信息来源|引用来源|引用文献|引用|参考|来源|出典|出处)"
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
                for key in _entry_keys(entry.group(1)):
                    _add_definition(layout, key, found[0], i, lines)
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

    keys: list[str] = []
    url: str | None = None
    rest = ""
    m = _FOOTNOTE_DEF.fullmatch(s)
    if m is not None:
        keys = ["^" + _normalize_key(m.group(1))]
        rest = m.group(2)
        found = _extract_url(rest)
        url = found[0] if found else None
    else:
        m = _LINK_DEF.fullmatch(s)
        if m is not None:
            rest = m.group(2).strip()
            found = _extract_url(rest)
            if found is not None:
                keys, url = [_normalize_key(m.group(1))], found[0]
            elif "：" in s[: m.start(2)]:
                pass  # "[注]：1/2的用户…": a full-width colon takes a URL, not a bare path
            elif rest.startswith("<") and ">" in rest:
                keys, url = [_normalize_key(m.group(1))], rest[1 : rest.index(">")]
            elif rest and _looks_like_destination(rest.split()[0]):
                keys, url = [_normalize_key(m.group(1))], rest.split()[0]
            elif m.group(1).strip().isdigit() and (in_section or not rest):
                keys = [_normalize_key(m.group(1))]
        else:
            m = _BRACKET_NUM_ENTRY.fullmatch(s)
            if m is None and in_section:
                m = _LIST_NUM_ENTRY.fullmatch(s)
            if m is not None:
                rest = m.group(2)
                found = _extract_url(rest)
                keys = _entry_keys(m.group(1))
                url = found[0] if found is not None else None
    if not keys:
        return 0
    used = 1
    if url is None:
        url = _continuation_url(lines, i, in_section=in_section)
        used += url is not None
    if url is None and not in_section and m is not None and m.re is _BRACKET_NUM_ENTRY:
        return 0  # "[1] Some prose" outside a sources block, and no URL below: not an entry
    title = None if url is not None else _entry_title(rest)
    # an entry that reads as a paper (authors, a year, a title) is kept for the scholarly check
    text = rest.strip()[:MAX_ENTRY_CHARS]
    entry = text if text and looks_scholarly(text) else None
    for key in keys:
        _add_definition(layout, key, url, i, lines, title=title, entry=entry)
    layout.def_lines.update(range(i, i + used))
    return used


def _entry_keys(numbers: str) -> list[str]:
    """The reference numbers an entry lists ("[31] [48] [54]" → 31, 48, 54), each once."""
    return list(dict.fromkeys(str(int(n)) for n in _ENTRY_NUMBER.findall(numbers)))


def _entry_title(rest: str) -> str | None:
    """What an entry without a URL names ("《Title》, Publisher, 2024"): the title a citation of
    the same number in another list takes."""
    title = rest.strip().strip("*_").strip()
    return title[:300] or None


def _continuation_url(lines: list[_Line], i: int, *, in_section: bool) -> str | None:
    """The next line that carries the entry's URL: indented ("1. Long title\\n   https://…"),
    or a line that starts with the URL, perhaps after a label ("[1] Title\\nhttps://…",
    "[1] Title<br>URL: https://…", as chat UIs and exported reports lay out a source): the URL
    alone on its line, except inside a ``Sources:`` block, where more may follow it and a blank
    line may come between the two."""
    if i + 1 >= len(lines):
        return None
    nxt = lines[i + 1].text
    gap = lines[i + 1].gap_before
    if (gap and not in_section) or _ENTRY_START.match(nxt.strip() + " "):
        return None
    found = _extract_url(nxt)
    if found is None:
        return None
    if nxt[:1].isspace() and not gap:
        return found[0]
    lead = nxt[: found[1]].strip()
    if lead and not _URL_LABEL.fullmatch(lead):
        return None
    # outside a sources block the line is the URL and nothing else ("https://… is where it is"
    # is prose that starts with a URL)
    alone = not any(ch.isspace() for ch in nxt[found[1] :].strip())
    return found[0] if in_section or alone else None


def _add_definition(
    layout: _Layout,
    key: str,
    url: str | None,
    i: int,
    lines: list[_Line],
    *,
    title: str | None = None,
    entry: str | None = None,
) -> None:
    """Record reference ``key``. Where a number is defined twice (a report's list of titles, then
    its list of URLs), the definition with a URL is the one checked and the other gives its title;
    the duplicate is an error only when the two name different URLs."""
    layout.budget.take()
    existing = layout.defs.get(key)
    if existing is None:
        layout.defs[key] = _RefDef(key=key, url=url, line=i, title=title, entry=entry)
        return
    if existing.url is None or url is None:
        if existing.url is None and url is not None:
            layout.defs[key] = _RefDef(
                key=key, url=url, line=i, title=existing.title, entry=existing.entry or entry
            )
        elif existing.title is None:
            existing.title = title
        if existing.url is not None or url is not None:
            layout.findings.append(
                Finding(
                    code="duplicate_reference",
                    message=(
                        f"reference [{key}] is listed twice, once without a URL; the entry with "
                        "the URL is the one checked (the other gives its title)"
                    ),
                    severity=Severity.INFO,
                    axis=_AXIS,
                    url=url or existing.url,
                    details={"label": key, "first_url": existing.url, "offset": lines[i].start},
                )
            )
            return
    same = existing.url == url or _same_url(existing.url, url)
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


def _same_url(a: str | None, b: str | None) -> bool:
    """Whether two spellings name one URL ("https://a.org/x" and "https://A.org/x")."""
    if a is None or b is None:
        return False
    try:
        return normalize_url(a) == normalize_url(b)
    except CiteguardError:
        return False


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

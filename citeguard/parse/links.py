"""URLs in the text: link destinations, bare URLs (where they end, as GitHub's autolinks
end), HTML anchors; the first URL a reference entry names."""

from __future__ import annotations

import bisect
import html
import re

from citeguard.parse.base import _Hit, _HitBudget
from citeguard.parse.scholarly import IN_TEXT, first_identifier, resolver_of, scholarly_url
from citeguard.text import fold_whitespace

_LINK_TEXT = r"(?:[^\[\]\n]|\[[^\[\]\n]*\])*"

_LINK_DEST = (
    # "\(" / "\)" are CommonMark escapes: one unit, so they never open or close a group.
    r"[ \t]*(?:<(?P<adest>[^<>\n]*)>|(?P<dest>(?:[^\s()\\]|\\\S|\((?:[^\s()\\]|\\\S)*\))*))"
    r"(?:[ \t]+(?P<title>\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*"
)

# One pattern for every bracket construct; the Python loop decides what a match is.
_BRACKET = re.compile(
    r"(?<!\\)(?P<bang>!)?\[(?P<text>" + _LINK_TEXT + r")\]"
    r"(?:\((?P<inl>" + _LINK_DEST + r")\)|\[(?P<ref>[^\[\]\n]{0,200})\])?"
)

_INLINE_LINK = re.compile(
    r"(?<!!)\[(?P<text>" + _LINK_TEXT + r")\]\((?P<inl>" + _LINK_DEST + r")\)"
)

_DOTTED_HOST = re.compile(r"[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}")

# Bare URLs: ASCII word characters may not precede (so ``xhttps://`` and ``e-www.`` do not count),
# but CJK may ("详见https://…"). Quotes, brackets, whitespace and CJK punctuation end a URL.
_URL_CHARS = r"[^\s<>\"`{}|\\^\[\]“”‘’«»‹›„\u3000-\u303f\uff00-\uffef]"

# A markdown backslash escape ("Mercury_\(planet\)", "a\_b") continues a bare URL; it is
# unescaped in Citation.url (the marker keeps the text as written).
_MD_ESCAPE = r"\\[!-/:-@\[-`{-~]"

_MD_ESCAPE_SPLIT = re.compile(r"\\([!-/:-@\[-`{-~])")

_BARE = re.compile(
    r"(?<![A-Za-z0-9@.\-+])(?:(?:https?|ftp|file)://|www\.)(?:"
    + _URL_CHARS
    + "|"
    + _MD_ESCAPE
    + r")+",
    re.IGNORECASE,
)

_OTHER_SCHEME = re.compile(
    r"(?<![A-Za-z0-9+.\-])(?:javascript|vbscript|data|file|ftp|mailto|about|blob|tel|sms|ws|wss"
    r"|gopher|chrome|view-source|[a-z][a-z0-9+.\-]{1,30}(?=:\/\/)):" + _URL_CHARS + r"+",
    re.IGNORECASE,
)

_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\u3040-\u30ff]")

# GitHub's autolink rule (``?!.,:*_~`` never end a URL) plus ``;`` and the quote ``'``; a
# trailing backslash is what is left of an escape whose character was trimmed.
_TRAILING_PUNCT = frozenset(".,;:!?'*_~\\")

_ANCHOR_OPEN = re.compile(r"<a\s[^<>]*>", re.IGNORECASE)

_ANCHOR_CLOSE = re.compile(r"</a\s*>", re.IGNORECASE)

_HREF = re.compile(r"\bhref\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'>]+))", re.IGNORECASE)

_TAG = re.compile(r"<[^<>]*>")


def _trim_url(url: str) -> str:
    """Drop trailing prose punctuation, unbalanced closers and emphasis from a bare URL.

    As GitHub's autolinks: ``?!.,:*_~`` (and here ``;`` and ``'``) at the end are prose, a ``)``
    is kept only while parentheses balance, and a trailing entity (``&amp;``) is dropped whole.
    """
    opens = url.count("(")
    closes = url.count(")")
    quotes = url.count("'")
    sq_opens = url.count("[")
    sq_closes = url.count("]")
    end = len(url)
    while end > 0:
        ch = url[end - 1]
        if ch == ";":
            amp = url.rfind("&", max(0, end - 34), end - 1)
            end = amp if amp >= 0 and url[amp + 1 : end - 1].isalnum() else end - 1
        elif ch == "'" and quotes % 2 == 0:
            break  # it closes a pair of single quotes in the path (".../The_'Quoted'")
        elif ch in _TRAILING_PUNCT:
            quotes -= ch == "'"
            end -= 1
        elif ch == ")" and closes > opens:
            closes -= 1
            end -= 1
        elif ch == "]" and sq_closes > sq_opens:
            sq_closes -= 1
            end -= 1
        else:
            break
    return url[:end]


def _extract_url(rest: str) -> tuple[str, int] | None:
    """The first URL named in a reference entry's text, and where it starts."""
    best: tuple[str, int] | None = None
    link = _INLINE_LINK.search(rest)
    if link is not None:
        dest = _dest_of(link)
        if dest:
            best = (dest, link.start())
    bare = _BARE.search(rest)
    if bare is not None and (best is None or bare.start() < best[1]):
        url = bare.group()
        if not _angle_autolink(rest, bare.start(), bare.end()):
            url = _trim_url(url)
        url = _unescape(url, entities=False)
        if url.lower().startswith("www."):
            url = "https://" + url
        best = (url, bare.start())
    other = _OTHER_SCHEME.search(rest)
    if other is not None and (best is None or other.start() < best[1]):
        best = (_trim_url(other.group()), other.start())
    ident = first_identifier(rest, bare_doi=True)  # "doi:10.…", "arXiv:…", a bare "10.NNNN/…"
    if ident is not None and (best is None or ident.start() < best[1]):
        best = (resolver_of(ident, _trim_url(ident.group("id"))), ident.start())
    return best


def _dest_of(m: re.Match[str]) -> str | None:
    adest = m.group("adest")
    dest = adest if adest is not None else m.group("dest")
    if dest is None:
        return None
    dest = _unescape(dest.strip())
    return scholarly_url(dest) or dest  # "[Smith, 2012](doi:10.1038/…)": the DOI's resolver


def _unescape(url: str, *, entities: bool = True) -> str:
    """Undo CommonMark backslash escapes (``Mercury_\\(planet\\)`` → ``Mercury_(planet)``) and,
    in link destinations, HTML entities; an escaped ``\\&`` stays a literal ``&``."""
    if "\\" not in url:
        return html.unescape(url) if entities else url
    parts = _MD_ESCAPE_SPLIT.split(url)  # odd indexes: the escaped characters
    if not entities:
        return "".join(parts)
    return "".join(p if k % 2 else html.unescape(p) for k, p in enumerate(parts))


def _angle_autolink(text: str, start: int, end: int) -> bool:
    """``<https://…>``: the brackets delimit the URL, so nothing in it is trimmed as prose."""
    return start > 0 and text[start - 1] == "<" and text.startswith(">", end)


def _is_urlish(dest: str | None) -> bool:
    """Could ``dest`` be meant as a URL (scheme, path, ``www.`` or a dotted host name)?"""
    if not dest:
        return False
    return _looks_like_destination(dest) or bool(_DOTTED_HOST.fullmatch(dest))


def _looks_like_destination(token: str) -> bool:
    return (
        "/" in token
        or bool(re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", token))
        or token.lower().startswith("www.")
    )


def _find_anchors(masked: str, budget: _HitBudget) -> list[_Hit]:
    hits: list[_Hit] = []
    opens = list(_ANCHOR_OPEN.finditer(masked))
    if not opens:
        return hits
    closes = [m for m in _ANCHOR_CLOSE.finditer(masked)]
    close_starts = [m.start() for m in closes]
    for k, m in enumerate(opens):
        href = _HREF.search(m.group())
        if href is None:
            continue  # <a name="…"> is not a link
        raw = next(g for g in href.groups() if g is not None)
        url = html.unescape(raw).strip()
        url = scholarly_url(url) or url
        if not url or url.startswith("#"):
            continue
        next_open = opens[k + 1].start() if k + 1 < len(opens) else len(masked)
        j = bisect.bisect_left(close_starts, m.end())
        end = m.end()
        label: str | None = None
        if j < len(closes) and closes[j].start() < next_open:
            inner = masked[m.end() : closes[j].start()]
            label = fold_whitespace(html.unescape(_TAG.sub("", inner))) or None
            end = closes[j].end()
        budget.take()
        hits.append(_Hit(m.start(), end, "html_anchor", url=url, label=label))
    return hits


def _find_bare(masked: str, budget: _HitBudget) -> list[_Hit]:
    hits: list[_Hit] = []
    for m in _BARE.finditer(masked):
        start = m.start()
        raw = m.group()
        before = masked[start - 1] if start > 0 else ""
        if before and _CJK.match(before):
            cut = _CJK.search(raw)
            if cut is not None:
                raw = raw[: cut.start()]
        if not _angle_autolink(masked, start, start + len(raw)):
            raw = _trim_url(raw)
        if len(raw) <= (4 if raw.lower().startswith("www.") else raw.find("//") + 2):
            continue  # "https://" or "www." alone names nothing
        if before == "=" or (before in "\"'" and start > 1 and masked[start - 2] == "="):
            continue  # an attribute or setting's value (a[href="https://…"], src=…), not a cite
        url = _unescape(raw, entities=False)
        url = "https://" + url if url.lower().startswith("www.") else url
        budget.take()
        hits.append(_Hit(start, start + len(raw), "bare_url", url=url))
    return hits


def _find_scholarly(masked: str, budget: _HitBudget) -> list[_Hit]:
    """``doi:10.…`` and ``arXiv:…`` identifiers in running text: citations of their resolver
    URL (``bare_url`` hits; the marker is the identifier as written)."""
    found = sorted(
        (m for pattern in IN_TEXT for m in pattern.finditer(masked)), key=lambda m: m.start()
    )
    hits: list[_Hit] = []
    end = 0
    for m in found:
        if m.start() < end:
            continue  # (the two patterns never overlap; kept for safety)
        ident = _trim_url(m.group("id"))
        end = m.start("id") + len(ident)
        budget.take()
        hits.append(_Hit(m.start(), end, "bare_url", url=resolver_of(m, ident)))
    return hits

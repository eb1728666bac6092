"""Bracket constructs: inline and reference links, numbered markers and footnotes; the
heuristics that tell numbers in brackets that are data (code, values, formulas, CSS
selectors) from markers; markers glued to the word before them."""

from __future__ import annotations

import itertools
import re
from collections.abc import Container, Mapping
from typing import Any

from citeguard.models import Finding, Severity
from citeguard.parse.base import (
    _AXIS,
    _LOOKBACK,
    _NUM_MARKER_TEXT,
    _NUM_PART,
    MAX_MARKER_RANGE,
    _expand_numbers,
    _Hit,
    _HitBudget,
    _in_spans,
    _normalize_key,
    _RefDef,
)
from citeguard.parse.links import _BRACKET, _dest_of, _is_urlish
from citeguard.text import fold_whitespace, word_set

_FOOTNOTE_TEXT = re.compile(r"\^[^\s\[\]^]{1,100}")

# "【1】", "［2］", "〔3〕", "【1，2】", "［１］": a numbered marker in full-width brackets,
# as Chinese and Japanese reports write them (digits, separators and spaces only; "【新闻】"
# is no marker).
_FULLWIDTH_MARKER = re.compile(r"[【［〔]([ \t\d０-９,，、;；\-–—]{1,60})[】］〕]")

_FULLWIDTH = str.maketrans(
    {
        "【": "[",
        "［": "[",
        "〔": "[",
        "】": "]",
        "］": "]",
        "〕": "]",
        "，": ",",
        "、": ",",
        "；": ";",
    }
    | {chr(0xFF10 + d): str(d) for d in range(10)}
)


def _fullwidth_markers(text: str) -> str:
    """``text`` with each full-width numbered marker written with ASCII brackets, digits and
    commas ("首都【1】" → "首都[1]"; one character for one, so every offset stays valid), for the
    layout and marker passes; markers are still cut from the text as written."""
    if "【" not in text and "［" not in text and "〔" not in text:
        return text
    pieces: list[str] = []
    pos = 0
    for m in _FULLWIDTH_MARKER.finditer(text):
        marker = m.group().translate(_FULLWIDTH)
        if not _NUM_MARKER_TEXT.fullmatch(marker, 1, len(marker) - 1):
            continue
        pieces += (text[pos : m.start()], marker)
        pos = m.end()
    if not pieces:
        return text
    pieces.append(text[pos:])
    return "".join(pieces)


def _find_brackets(
    text: str,
    masked: str,
    code_spans: list[tuple[int, int]],
    defs: Mapping[str, _RefDef],
    findings: list[Finding],
    budget: _HitBudget,
) -> tuple[list[_Hit], list[tuple[int, int]]]:
    """Inline links, reference links, numbered markers and footnotes, left to right. Each hit
    and each finding takes one from ``budget``."""
    hits: list[_Hit] = []
    skipped: list[tuple[int, int]] = []
    code_starts = [s for s, _ in code_spans]
    data_ends: set[int] = set()  # where a bracket read as data ends ("[[1, 2], [3, 4]]")
    indexed: set[str] = set()  # words seen indexed ("arr" of "arr[0]")
    pos = 0
    n = len(masked)
    while pos < n:
        m = _BRACKET.search(masked, pos)
        if m is None:
            break
        start = m.start("text") - 1  # the "[" (an image's "!" is not part of a marker)
        label_text = m.group("text")
        text_end = m.end("text") + 1
        inline = m.group("inl") is not None
        if inline and _NUM_MARKER_TEXT.fullmatch(label_text) and not _is_urlish(_dest_of(m)):
            inline = False  # "[2](p.5)": a numbered marker and a parenthetical, not a link
        if inline:
            dest = _dest_of(m)
            if m.group("bang") or not dest or dest.startswith("#"):
                skipped.append((m.start(), m.end()))  # image or in-page link: not a citation
            else:
                label = fold_whitespace(label_text) or None
                budget.take()
                hits.append(_Hit(start, m.end(), "inline_link", url=dest, label=label))
            pos = m.end()
            continue
        in_code = _in_spans(start, code_starts, code_spans)
        stripped = label_text.strip()
        if not in_code and _FOOTNOTE_TEXT.fullmatch(stripped):
            key = "^" + _normalize_key(stripped[1:])
            budget.take()
            hits.append(_Hit(start, text_end, "footnote", keys=(key,), label=key))
            pos = text_end
            continue
        if not in_code and _NUM_MARKER_TEXT.fullmatch(label_text):
            numbers, ok = _expand_numbers(label_text)
            zero = "0" in numbers
            if _bracket_is_code(masked, start, text_end, data_ends, indexed, zero=zero):
                data_ends.add(text_end)  # "[0, 1]" is an interval; "x[1]", "f([1, 2])" code
                pos = text_end
                continue
            why = _data_list_reason(masked, start, text_end, label_text, numbers, defs)
            if why is not None:
                marker = text[start:text_end]
                budget.take()
                findings.append(
                    Finding(
                        code="bracket_data_assumed",
                        message=(
                            f"{marker!r} was read as data (a list or range of values), not as "
                            f"citation markers: {why}"
                        ),
                        severity=Severity.INFO,
                        axis=_AXIS,
                        details={"marker": marker, "start": start},
                    )
                )
                data_ends.add(text_end)
                pos = text_end
                continue
            if not ok:
                budget.take()
                findings.append(
                    Finding(
                        code="malformed_marker",
                        message=(
                            f"citation marker {text[start:text_end]!r} has a reversed range or one "
                            f"longer than {MAX_MARKER_RANGE}; its out-of-range part is ignored"
                        ),
                        axis=_AXIS,
                        details={"marker": text[start:text_end], "start": start},
                    )
                )
            if numbers:
                budget.take()
                hits.append(_Hit(start, text_end, "numbered", keys=tuple(numbers)))
            pos = text_end  # a following "[3]" of "[1][3]" is matched on its own
            continue
        if _is_selector(label_text):
            pos = text_end  # "[role=\"dialog\"][1]": a CSS selector, then whatever follows
            continue
        ref = m.group("ref")
        if ref is not None and not in_code:
            key = _normalize_key(ref if ref.strip() else label_text)
            # An undefined id is a broken citation when it looks like an id ("[t][nyt]"); with
            # spaces it is more likely bracketed prose ("[sic][emphasis added]").
            # "m[i][j]" (indexing) and "[EMIM][TfO]" (a formula) are neither.
            if key and (
                key in defs
                or (
                    len(key) <= 40
                    and " " not in key
                    and not _ref_pair_is_data(masked, start, label_text, ref)
                )
            ):
                budget.take()
                hits.append(
                    _Hit(
                        start, m.end(), "reference_link", keys=(key,), label=key, explicit_ref=True
                    )
                )
                pos = m.end()
                continue
        if not in_code and stripped and _normalize_key(stripped) in defs:
            key = _normalize_key(stripped)
            budget.take()
            hits.append(_Hit(start, text_end, "reference_link", keys=(key,), label=key))
            pos = text_end
            continue
        # Plain bracketed prose: look inside it for markers ("[see [1]]").
        pos = start + 1
    return hits, skipped


# A bracket after one of these words holds values ("the list [1, 2, 3]", "returns [1, 4, 9]").
_VALUE_WORDS = word_set(
    "list lists array arrays vector vectors tuple tuples set sets sequence sequences matrix"
    " input inputs output outputs value values element elements interval range ranges"
    " coordinates shape return returns returned yield yields gives equals becomes contains"
    " prints outputs is are was were"
)

_TLDS = word_set("com org net edu gov io co uk de fr info ai eu int us ca au jp cn in")

# "[EMIM][TfO]", "[BMIM][PF6]": bracketed ions, each a capitalised token without spaces.
_FORMULA_TOKEN = re.compile(r"[A-Z][A-Za-z0-9+\-()]{0,15}")

# A CSS attribute selector's bracket: "[role=\"dialog\"]", "[href^='http' i]", "[data-open]".
_ATTRIBUTE = re.compile(
    r"[ \t]*+(?P<name>[A-Za-z_][\w:.-]{0,60}+)[ \t]*+"
    r"(?P<value>[~|^$*]?=[ \t]*+(?:\"[^\"\n]*+\"|'[^'\n]*+'|[^\s\]\"']++)(?:[ \t]++[iIsS])?+)?+"
    r"[ \t]*+"
)

_SPACE = re.compile(r"\s")

_CODE_OPERATOR = re.compile(r"[ \t]{0,3}(?:[=!<>+\-*/%]=|=|\+[ \t])")  # "arr[1] = 5", "a[1] + b"


def _glued_base(text: str, pos: int) -> tuple[str, bool]:
    """The identifier a bracket at ``pos`` is glued to, walking back over glued bracket groups
    (``x`` for the ``[1]`` of ``x[0][1]``), and whether one of those groups is no citation
    marker (``[0]``, ``[i]``). ``""`` when the bracket is not glued to a word."""
    lo = max(0, pos - _LOOKBACK)
    p = pos
    odd_group = False
    groups = 0
    while p > lo and text[p - 1] == "]":
        q = text.rfind("[", lo, p - 1)
        groups += 1
        if q < 0 or groups > 4 or _SPACE.search(text, q, p) is not None:
            return "", False  # ("[a][b][c][d][e]…": no index goes that deep)
        inner = text[q + 1 : p - 1]
        if not (
            inner.startswith("^")
            or (
                _NUM_MARKER_TEXT.fullmatch(inner)
                and ("0" not in inner or "0" not in _expand_numbers(inner)[0])
            )
        ):
            odd_group = True
        p = q
    s = p
    while s > lo and text[s - 1].isascii() and (text[s - 1].isalnum() or text[s - 1] in "_."):
        s -= 1
    return text[s:p], odd_group


def _is_code_base(base: str) -> bool:
    """``x``, ``my_list``, ``df.iloc``: an identifier being indexed, not a word a marker follows
    (``grew[2]``, ``U.S.[1]``, ``reuters.com[1]`` stay markers)."""
    if not base or base.endswith("."):
        return False
    if len(base) == 1:
        return base.islower()
    if "_" in base.strip("._"):
        return True  # "my_list"; "_word_" is emphasis
    parts = base.split(".")
    return (
        len(parts) >= 2
        and all(part.isidentifier() for part in parts)
        and parts[0][0].islower()
        and parts[-1].lower() not in _TLDS
    )


def _bracket_is_code(
    text: str, start: int, end: int, data_ends: set[int], indexed: set[str], *, zero: bool
) -> bool:
    """Whether the numbers in ``text[start:end]`` are code: ``x[1]``, ``arr[0][2]``, ``arr[1] = 5``,
    ``np.array([1, 2, 3])``, ``[[1, 2], [3, 4]]``, ``x = [1, 2]``, ``{"k": [1]}``, ``[1, 2].sort()``
    (code whose fences were lost; markers inside real code spans are skipped earlier). ``zero``:
    the bracket holds a 0 (never a marker). ``indexed`` collects the words seen indexed
    (``arr[0]``), so that a later ``arr[1]`` is code as well."""
    base, odd_group = _glued_base(text, start)
    if base and (
        zero
        or odd_group
        or base in indexed
        or _is_code_base(base)
        or _CODE_OPERATOR.match(text, end) is not None
    ):
        indexed.add(base)
        return True
    if zero:
        return True
    before = text[start - 1] if start else ""
    if before == "[" or (
        before == "(" and start > 1 and (text[start - 2].isalnum() or text[start - 2] in "_.]")
    ):
        return True  # nested list, call argument
    p = start
    while p > 0 and start - p < _LOOKBACK and text[p - 1] in " \t":
        p -= 1
    prev = text[p - 1] if p else ""
    if prev == "=" or (prev == ":" and p > 1 and text[p - 2] in "\"'"):
        return True  # assignment, JSON value
    if prev == "," and (p - 1) in data_ends:
        return True  # the next element of a list of lists
    after = text[end : end + 2]
    return len(after) == 2 and after[0] == "." and (after[1] == "_" or after[1].islower())


def _data_list_reason(
    text: str, start: int, end: int, body: str, numbers: list[str], defs: Mapping[str, _RefDef]
) -> str | None:
    """Why a bracket of several numbers, not all of them listed references, reads as data.

    ``None`` (it stays a marker; missing numbers are ``unresolved_marker`` findings) unless its
    numbers are not ascending, it follows a word that introduces values ("the list", "returns",
    "is"), or, when none of its numbers is a listed reference, prose goes on right after it
    ("Studies [1, 2] show", where a marker would rather end a clause).
    """
    resolved = sum(k in defs for k in numbers)
    if len(numbers) < 2 or resolved == len(numbers):
        return None
    firsts = [int(m.group(1)) for m in _NUM_PART.finditer(body)]
    if any(b <= a for a, b in itertools.pairwise(firsts)):
        return "its numbers are not in ascending order"
    p = start
    while p > 0 and start - p < _LOOKBACK and text[p - 1] in " \t:":
        p -= 1
    w = p
    while w > 0 and p - w < 20 and text[w - 1].isalpha():
        w -= 1
    word = text[w:p].casefold()
    if word in _VALUE_WORDS:
        return f"it follows {text[w:p]!r}"
    q = end
    while q < len(text) and q - end < _LOOKBACK and text[q] in " \t":
        q += 1
    nxt = text[q] if q < len(text) else "\n"
    if not resolved and nxt.isalnum():
        return "the sentence goes on right after it, where a citation marker ends a clause"
    return None


def _ref_pair_is_data(text: str, start: int, label_text: str, ref: str) -> bool:
    """``m[i][j]`` indexes, ``[EMIM][TfO]`` is a formula and ``[role="dialog"][open]`` a CSS
    selector: not a ``[text][id]`` reference."""
    base, _ = _glued_base(text, start)
    if _is_code_base(base):
        return True
    if _is_selector(label_text, ref):
        return True
    a, b = label_text.strip(), (ref.strip() or label_text.strip())
    if not (_FORMULA_TOKEN.fullmatch(a) and _FORMULA_TOKEN.fullmatch(b)):
        return False
    return any(
        sum(ch.isupper() for ch in t) >= 2 or any(ch.isdigit() for ch in t) or t[-1] in "+-"
        for t in (a, b)
    )


def _is_selector(*brackets: str) -> bool:
    """Whether glued brackets read as CSS attribute selectors: each an attribute name with an
    optional value, and one of them with a value (``[role="dialog"]``) or an ``aria-`` /
    ``data-`` name, which no reference id looks like."""
    found = [_ATTRIBUTE.fullmatch(b) for b in brackets if b.strip()]
    if not found or not all(found):
        return False
    return any(
        m is not None
        and (m.group("value") is not None or m.group("name").startswith(("aria-", "data-")))
        for m in found
    )


# "markets13." / "growth2": a chat UI's superscript markers lost their brackets when copied. A
# word of three or more letters, then one to three digits, then the end of a clause or line.
_GLUED = re.compile(
    r"(?<![\w/.=?&#%@+\-])([^\W\d_]{3,})(\d{1,3})"
    r"(?=[;:!?)\]*]|[.,](?!\d)|[ \t]*(?:\r?\n|$))"
)

# Words that take a number as part of a name ("Covid19", "Python3", "Windows11", "base64").
_GLUED_DENY = word_set(
    "covid sars python windows iphone ipad galaxy pixel xbox playstation web llama gemini claude"
    " mistral qwen gpt ubuntu android macos office excel version gen level phase type class grade"
    " stage tier series model mark chapter section page room route zone sector block part step"
    " round season episode base utf sha ipv log top win html css http ddr usb wifi pcie area"
    " figure fig table item note appendix exhibit question problem exercise lesson unit"
)


def _glued_reading(word: str, digits: str, numbers: Container[str]) -> list[tuple[int, str]]:
    """The markers ``digits`` glued to ``word`` stand for, as (offset in digits, key); ``[]``
    when the reading is implausible: the word is an acronym or a name that takes a number
    (``COVID19``, ``mp3``, ``Python3``) or some number is not in the reference list. The whole
    number is preferred ("12" is [12] when the list has a 12), else one marker per digit."""
    if not word[1:].islower() or word.casefold() in _GLUED_DENY:
        return []
    if digits[0] != "0" and str(int(digits)) in numbers:
        return [(0, str(int(digits)))]
    if (
        len(digits) > 1
        and "0" not in digits
        and len(set(digits)) == len(digits)
        and all(d in numbers for d in digits)
    ):
        return list(enumerate(digits))
    return []


def _find_glued(
    masked: str,
    code_spans: list[tuple[int, int]],
    defs: Mapping[str, _RefDef],
    budget: _HitBudget,
) -> list[_Hit]:
    """Glued markers (``markets13`` = [1][3]); called only when the answer has a numbered
    reference list and no bracketed numbered marker. Each carries a ``glued_marker_assumed``
    note saying what was read."""
    numbers = {k for k in defs if k.isdigit()}
    if not numbers:
        return []
    code_starts = [s for s, _ in code_spans]
    hits: list[_Hit] = []
    for m in _GLUED.finditer(masked):
        word, digits = m.group(1), m.group(2)
        reading = _glued_reading(word, digits, numbers)
        start = m.start(2)
        if not reading or _in_spans(start, code_starts, code_spans):
            continue
        labels = "".join(f"[{key}]" for _, key in reading)
        note: dict[str, Any] = {
            "code": "glued_marker_assumed",
            "message": (
                f"{m.group()!r} was read as {word!r} followed by the citation marker(s) {labels}: "
                "the answer has a numbered reference list but no bracketed markers, as when a "
                "chat UI's superscripts are copied as plain digits"
            ),
            "severity": Severity.WARNING,
            "axis": _AXIS,
            "details": {"marker": digits, "word": word, "labels": [k for _, k in reading]},
        }
        for k, (offset, key) in enumerate(reading):
            s = start + offset
            e = start + len(digits) if len(reading) == 1 else s + 1
            budget.take()
            hits.append(
                _Hit(s, e, "numbered", keys=(key,), label=key, note=note if k == 0 else None)
            )
    return hits

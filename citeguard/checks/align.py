"""Word-level alignment of two near-identical texts, and what their differences carry.

One place for the idea both a quoted passage (:mod:`citeguard.checks.passage`) and an
unquoted near-copy (:mod:`citeguard.checks.near_copy`) are checked with: :func:`align` lines
a text's tokens up inside a wider page window (semi-global: page words outside the span are
context), and :func:`classify` says which differing blocks carry meaning — a number or date,
a negation added or dropped (in the languages reports are written in, Chinese and Japanese
included), a name, another word — and which do not (punctuation, spelling, diacritics, an
article, a typo).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise

from rapidfuzz.distance import Indel, Levenshtein

from citeguard.lang import has_no_space_script
from citeguard.text import strip_diacritics, word_set

__all__ = ["KIND_TEXT", "Block", "Diff", "align", "classify", "is_negation"]

_NEGATIONS = word_set(
    """
    not no never none nobody nothing neither nor nowhere cannot without nope nicht kein
    keine keinen keinem keiner keines nie niemals niemand nichts nirgends nirgendwo weder
    ohne ne pas non jamais aucun aucune rien ni sans nul nulle nunca jamás jamas ningún
    ningun ninguno ninguna nada nadie tampoco sin nie nigdy żaden żadna żadne żadnych nic
    nikt ani bez não nao nenhum nenhuma ninguém ninguem nem sem mai nessuno nessuna niente
    nulla senza niet geen nooit niets niemand 不 没 沒 未 非 无 無 别 勿 莫 否 ない ず
    """
)
# Contractions: "don't", "isn't", "n'est", "n'a".
_NEGATION_RE = re.compile(r"n't$|^n'|^nicht|^kein")
_NEGATING_PREFIXES = ("un", "in", "im", "il", "ir", "non", "dis", "nie", "des", "a", "k")
# Words whose insertion or removal changes nothing a reader would cite for.
_FILLERS = word_set(
    """
    the a an of and to that this so just also then der die das den dem des ein eine einen
    einem einer und auch so le la les l un une des de du et el la los las lo un una unos
    unas y de del o os as um uma e do da i w z a oraz
    """
)


def is_negation(token: str) -> bool:
    return token in _NEGATIONS or bool(_NEGATION_RE.search(token))


def _negating_pair(a: str, b: str) -> bool:
    """'possible'/'impossible', 'eine'/'keine', 'bewusst'/'unbewusst'."""
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    if not long_.endswith(short) or len(short) < 2:
        return False
    return long_[: len(long_) - len(short)] in _NEGATING_PREFIXES


def _small_edit(a: str, b: str) -> bool:
    """A typo or spelling variant rather than a different word."""
    if any(ch.isdigit() for ch in a + b):
        return False
    shortest = min(len(a), len(b))
    if shortest < 5:
        return False
    limit = 1 if shortest < 9 else 2
    return Levenshtein.distance(a, b, score_cutoff=limit) <= limit


@dataclass(frozen=True, slots=True)
class Diff:
    kinds: tuple[str, ...]  # e.g. ("number", "negation"); empty → only benign differences
    tokens: tuple[str, ...]


Block = tuple[int, int, int, int]  # quote tokens [i1, i2) differ from page tokens [j1, j2)


def align(q_tokens: list[str], p_tokens: list[str]) -> tuple[list[Block], int, int, int] | None:
    """Semi-global word alignment of the quote inside a wider page window.

    Returns the differing blocks, the page token span [j_start, j_end) that the quote covers and
    the number of quote words matched verbatim; None when no word matches. Page words outside the
    span are context, not differences. Quote words before the first (after the last) matching
    word pair with as many page words just before (after) it: "since 2015" against "since 2010.
    Maria Lopez" is "2015 → 2010", not "2015 → Lopez".
    """
    equal = [op for op in Indel.opcodes(q_tokens, p_tokens) if op.tag == "equal"]
    if not equal:
        return None
    first, last = equal[0], equal[-1]
    pre = first.src_start
    j_start = max(0, first.dest_start - pre)
    post = len(q_tokens) - last.src_end
    j_end = min(len(p_tokens), last.dest_end + post)
    blocks: list[Block] = []
    if pre:
        blocks.append((0, pre, j_start, first.dest_start))
    for left, right in pairwise(equal):
        if left.src_end < right.src_start or left.dest_end < right.dest_start:
            blocks.append((left.src_end, right.src_start, left.dest_end, right.dest_start))
    if post:
        blocks.append((last.src_end, len(q_tokens), last.dest_end, j_end))
    matched = sum(op.src_end - op.src_start for op in equal)
    return blocks, j_start, j_end, matched


def _joined(tokens: list[str]) -> str:
    """Tokens as written: with spaces, but none between characters of a script written without
    them ("没有", not "没 有")."""
    out = ""
    for t in tokens:
        if out and not (has_no_space_script(out[-1]) and has_no_space_script(t[:1])):
            out += " "
        out += t
    return out


def classify(
    blocks: list[Block],
    q_tokens: list[str],
    q_cased: list[str],
    p_tokens: list[str],
    p_cased: list[str],
) -> Diff:
    """Which of the differing word blocks carry meaning (and how to show them)."""
    kinds: list[str] = []
    tokens: list[str] = []
    for i1, i2, j1, j2 in blocks:
        qa, pa = q_tokens[i1:i2], p_tokens[j1:j2]
        qc, pc = q_cased[i1:i2], p_cased[j1:j2]
        if qa and pa and strip_diacritics("".join(qa)) == strip_diacritics("".join(pa)):
            # "e-mail" vs "email", "Radon Situation" vs "Radon-Situation", "Muller" vs "Müller"
            continue
        if qa and pa:
            label = f"{_joined(qc)} → {_joined(pc)}"
        elif qa:
            label = f"+{_joined(qc)}"  # the quote adds words the page does not have
        else:
            label = f"-{_joined(pc)}"  # the quote drops words the page has
        found: list[str] = []
        if any(is_negation(t) for t in qa + pa) or (
            len(qa) == 1 and len(pa) == 1 and _negating_pair(qa[0], pa[0])
        ):
            found.append("negation")
        if any(any(ch.isdigit() for ch in t) for t in qa + pa):
            found.append("number")
        if any(t[:1].isupper() for t in qc + pc):
            found.append("name")
        if not found:
            if len(qa) == 1 and len(pa) == 1 and _small_edit(qa[0], pa[0]):
                continue
            if len(qa) + len(pa) == 1 and (qa + pa)[0] in _FILLERS:
                continue
            found.append("word")
        for k in found:
            if k not in kinds:
                kinds.append(k)
        tokens.append(label)
    return Diff(tuple(kinds), tuple(tokens))


KIND_TEXT = {
    "number": "a number or date differs",
    "negation": "a negation was added or dropped",
    "name": "a name differs",
    "word": "a word differs",
}

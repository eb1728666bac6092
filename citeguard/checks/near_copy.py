"""An unquoted claim that is a copy of a page sentence with one thing changed.

Research agents rarely put quotation marks around what they copy. A claim that aligns word for
word with a sentence of its page (or a short stretch of it) except for a few words is compared
edit by edit, with the alteration-aware matcher quoted passages get
(:mod:`citeguard.checks.passage`): a changed number, a ``not`` added or dropped, a name replaced
by another, a content word replaced by a different one → ``passage_altered``, with the page's
sentence and the edit in the reason. What a rewording does without changing what is said is
not an alteration: words the claim leaves out (a shortened sentence, a dropped adjective),
words it adds before or after the copied part (attribution, a preface), punctuation, spelling
and inflection. A claim that is not that close to any stretch of the page is left to the
support step.

In scripts written without spaces (Chinese, Japanese, Thai) the alignment is character by
character; there only a changed number and an added or dropped negation count as alterations
(a character replaced is as often a synonym as not).
"""

from __future__ import annotations

import re

from citeguard.checks.align import Block, Diff, align, classify, is_negation
from citeguard.checks.passage import (
    FUZZY_CHUNK_CHARS,
    PreparedText,
    candidate_starts,
    cased_tokens,
    content_terms,
    sentence_of,
    word_end,
    word_start,
)
from citeguard.lang import has_no_space_script
from citeguard.models import PassageMatch
from citeguard.text import (
    ALIGN_TOKEN_RE,
    PARAPHRASE_STOPWORDS,
    normalise,
    normalise_cased,
    sentence_spans,
    word_set,
)

__all__ = ["find_near_copy"]

#: A claim shorter than this many tokens is not told apart from a common phrase.
MIN_TOKENS = 3
#: The share of the claim's tokens that must stand on the page, in order, for it to be a copy
#: (two of three words, seven of ten).
MIN_COPIED = 0.66
#: Differing stretches a copy may have (an edit and a shortening, say), and the claim tokens
#: that may differ in all.
MAX_BLOCKS = 3
MAX_DIFFERING_TOKENS = 4
#: A stretch of the claim before (after) everything it shares with the page longer than this is
#: a preface (an addition), not a replaced word.
_EDGE_REPLACE_TOKENS = 2
_EDGE_STRIP = " \t\n\"'“”„‟«»‹›‘’‚`´.,;:!?()[]{}-–—*_。，、；：！？"
_MARKER_RE = re.compile(r"\[\^?\d+(?:\s*[,–-]\s*\d+)*\]")
# clause breaks a claim is cut at when the whole is no copy ("X said; <copied clause>")
_CLAUSE_RE = re.compile(r"[;:；：]|,\s+(?:and|but|while|whereas|und|aber|während)\s+|，")


def _edge_blocks(blocks: list[Block], n_claim: int) -> list[Block]:
    """Blocks at the claim's edges longer than a replaced word or two become additions (the
    page words beside them are context, not what the claim changed)."""
    out: list[Block] = []
    for i1, i2, j1, j2 in blocks:
        edge = i1 == 0 or i2 == n_claim
        if edge and i2 - i1 > _EDGE_REPLACE_TOKENS and j2 > j1:
            # keep the page words only where the edge stretch holds a negation or number,
            # classified as an addition either way
            out.append((i1, i2, j1, j1) if i1 == 0 else (i1, i2, j2, j2))
            continue
        out.append((i1, i2, j1, j2))
    return out


#: Words a swap may change at most on either side: a one-word edit, or a two-word name.
_MAX_SWAP_TOKENS = 2


def _swapped_in_place(qa: list[str], pa: list[str], q: list[str], p: list[str]) -> bool:
    """A reordering, not a swap: each side's words stand elsewhere on the other side
    ("England, Scotland, Wales and Northern Ireland" listed in another order)."""
    return all(t in p for t in qa) and all(t in q for t in pa)


def _same_word(qa: list[str], pa: list[str]) -> bool:
    """The same word written another way: an abbreviation cut short ("US" / "U.S."), or
    an inflection ("chart" / "charts", "comes" / "come")."""
    a, b = "".join(qa), "".join(pa)
    short, long_ = sorted((a, b), key=len)
    if len(short) >= 1 and long_.startswith(short) and len(long_) - len(short) <= 3:
        return True
    return len(qa) == len(pa) == 1 and len(short) >= 4 and a[:4] == b[:4]


def _meaningful(
    blocks: list[Block],
    q: list[str],
    qc: list[str],
    p: list[str],
    pc: list[str],
) -> tuple[Diff, Diff]:
    """The edits among the differing blocks, as a near-copy reads them: (what is shown
    altered: a number changed, a negation added or dropped, a name replaced by another;
    what may be: a content word replaced). Additions and omissions other than a negation,
    edits at the claim's edges other than a number or a negation (a pronoun the page spells
    out: "It" / "The Orange Prize"), rewordings longer than a word or two, reorderings and
    inflections are rewording."""
    hard: list[Block] = []
    soft: list[Block] = []
    cjk = any(has_no_space_script(t) for t in q[:64])
    # negations the claim's edits add, less those they drop: none when one moved ("found no
    # evidence" / "have not found any evidence")
    added = sum(
        sum(map(is_negation, q[i1:i2])) - sum(map(is_negation, p[j1:j2]))
        for i1, i2, j1, j2 in blocks
    )
    for block in blocks:
        i1, i2, j1, j2 = block
        qa, pa = q[i1:i2], p[j1:j2]
        if added and _negation_edit(qa, pa):
            hard.append(block)
            continue
        if len(qa) > _MAX_SWAP_TOKENS or len(pa) > _MAX_SWAP_TOKENS or not (qa and pa):
            continue  # a longer rewording, an addition, an omission
        if _has_digit(qa) and _has_digit(pa):
            if "number" in classify([block], q, qc, p, pc).kinds:
                hard.append(block)
            continue
        # a word at the claim's start is often a pronoun or connective the page spells out
        # ("It" / "The Orange Prize"); one word swapped for one at its end is an edit when
        # it is the claim's one difference (else the alignment may have run on past the
        # copied sentence: "… the World's Fair (The Eiffel Tower)" / "… Eiffel. Millions")
        last_word = i2 == len(q) and len(qa) == len(pa) == 1 and len(blocks) == 1
        if i1 == 0 or (i2 == len(q) and not last_word):
            continue
        if cjk or _has_digit(qa) or _has_digit(pa) or _function_word(qa + pa):
            continue
        if _swapped_in_place(qa, pa, q, p) or _same_word(qa, pa):
            continue
        kinds = classify([block], q, qc, p, pc).kinds
        if not kinds:
            continue
        names = _capitalised(qc[i1:i2]) and _capitalised(pc[j1:j2])
        (hard if names else soft).append(block)
    return classify(hard, q, qc, p, pc), classify(soft, q, qc, p, pc)


def _function_word(tokens: list[str]) -> bool:
    """A pronoun, article or connective among the swapped words ("City" / "His" of the next
    sentence): no content word was replaced."""
    return any(t in PARAPHRASE_STOPWORDS for t in tokens)


def _has_digit(tokens: list[str]) -> bool:
    return any(ch.isdigit() for t in tokens for ch in t)


def _capitalised(tokens: list[str]) -> bool:
    return bool(tokens) and all(t[:1].isupper() for t in tokens)


# words that carry a negation without meaning of their own ("does not include")
_AUXILIARIES = word_set(
    """
    do does did is are was were be been has have had will would can could shall should may
    might must any longer 有 是
    """
)
#: Words either side of a negation edit, the negation and auxiliaries included.
_MAX_NEGATION_TOKENS = 4


def _negation_edit(qa: list[str], pa: list[str]) -> bool:
    """A negation added or dropped, and nothing else changed: "+nicht", "-not", "includes" /
    "does not include", "no longer needs" / "still needs"."""
    if len(qa) > _MAX_NEGATION_TOKENS or len(pa) > _MAX_NEGATION_TOKENS:
        return False
    neg_q = [t for t in qa if is_negation(t)]
    neg_p = [t for t in pa if is_negation(t)]
    if bool(neg_q) == bool(neg_p):
        return False
    rest_q = [t for t in qa if not is_negation(t) and t not in _AUXILIARIES]
    rest_p = [t for t in pa if not is_negation(t) and t not in _AUXILIARIES]
    if not rest_q and not rest_p:
        return True
    return len(rest_q) == len(rest_p) == 1 and _same_word(rest_q, rest_p)


_Aligned = tuple[list[tuple[int, int]], list[str], tuple[list[Block], int, int, int]]


def _aligned(q: list[str], norm: str, cand: int, size: int) -> _Aligned | None:
    """The claim's tokens aligned with the page around ``cand``: in a window about the claim's
    length and in one twice as long (a shortened copy), the one matching more words, the
    tighter of equals (a word the page repeats in the next sentence must not pull the
    alignment there)."""
    best: _Aligned | None = None
    for before, after in ((size // 4 + 16, size + size // 4 + 16), (size // 2 + 24, 2 * size + 24)):
        c0 = word_start(norm, max(0, cand - before))
        c1 = word_end(norm, min(len(norm), cand + after))
        spans = [m.span() for m in ALIGN_TOKEN_RE.finditer(norm, c0, c1)]
        p = [norm[s:e] for s, e in spans]
        got = align(q, p) if p else None
        if got is not None and (best is None or got[3] > best[2][3]):
            best = (spans, p, got)
    return best


def _near_copy_of(piece: str, page: PreparedText) -> PassageMatch | None:
    qn = normalise(piece).strip(_EDGE_STRIP)
    if not qn or len(qn) > FUZZY_CHUNK_CHARS:
        return None
    q_spans = [(m.start(), m.group()) for m in ALIGN_TOKEN_RE.finditer(qn)]
    if len(q_spans) < MIN_TOKENS or qn in page.norm or not _may_be_copied(piece, page):
        return None  # too short to tell, on the page as written, or nowhere near any sentence
    if _copied_within(qn, q_spans, page.norm):
        return None  # on the page as written behind a preface or before an attribution
    q = [t for _, t in q_spans]
    qc = cased_tokens(normalise_cased(piece).strip(_EDGE_STRIP))
    if len(qc) != len(q):
        qc = q
    norm = page.norm
    best: tuple[tuple[bool, float], PassageMatch] | None = None
    for cand in candidate_starts(qn, q_spans, norm, 0):
        got = _aligned(q, norm, cand, len(qn))
        if got is None:
            continue
        spans, p, (blocks, j0, j1, matched) = got
        if matched < MIN_COPIED * len(q):
            continue
        if j1 - j0 > 2 * len(q) + 4:
            continue  # the claim's words scattered over a long stretch: no copy of it
        blocks = _edge_blocks(blocks, len(q))
        # what the claim changed: every block but an addition at its edges
        changed = [b for b in blocks if not ((b[0] == 0 or b[1] == len(q)) and b[2] == b[3])]
        differing = sum(i2 - i1 for i1, i2, _, _ in changed)
        if len(changed) > MAX_BLOCKS or differing > MAX_DIFFERING_TOKENS:
            continue
        pc = [page.text[page.to_orig_start(s) : page.to_orig_end(e)] for s, e in spans]
        hard, soft = _meaningful(blocks, q, qc, p, pc)
        diff = hard if hard.kinds else soft
        if not diff.kinds:
            return None  # a copy, reworded at most: the support step reads it
        start, end = page.span(spans[j0][0], spans[j1 - 1][1])
        rank = (bool(hard.kinds), matched / len(q))
        if best is None or rank > best[0]:
            best = (rank, _match(page, start, end, diff, altered=bool(hard.kinds)))
    return None if best is None else best[1]


#: Tokens at either end of a claim that may be its own (a preface, "In short:", an
#: attribution, "the agency said") around a stretch of the page copied as written.
_EDGE_TOKENS = 3


def _copied_within(qn: str, q_spans: list[tuple[int, str]], norm: str) -> bool:
    """Whether the claim is a whole sentence of the page (or a run of them) as written, with at
    most :data:`_EDGE_TOKENS` words of its own before or after it: such a copy changes
    nothing, however an alignment would pair its words (the claim's "Nie" with the previous
    sentence's "noch nie" made a faithful copy read as a negation dropped). The words left out
    are additions only where the page's sentence begins (or ends) there: "in Berlin statt"
    against "in Bremen statt" leaves the page's sentence going on, so it is no preface."""
    n = len(q_spans)
    ends = [start + len(tok) for start, tok in q_spans]
    # only words may be the claim's own: a number or a negation left out could be the edit
    own = [not any(c.isdigit() for c in tok) and not is_negation(tok) for _, tok in q_spans]
    lead = next((k for k in range(n) if not own[k]), n)
    trail = next((k for k in range(n) if not own[n - 1 - k]), n)
    for a in range(min(_EDGE_TOKENS, n, lead) + 1):
        for b in range(min(_EDGE_TOKENS, n - a, trail) + 1):
            if (a == 0 and b == 0) or n - a - b < max(MIN_TOKENS, MIN_COPIED * n):
                continue
            sub = qn[q_spans[a][0] : ends[n - 1 - b]]
            at = norm.find(sub)
            for _ in range(_MAX_OCCURRENCES):
                if at < 0:
                    break
                if (not a or _sentence_starts(norm, at)) and (
                    not b or _sentence_ends(norm, at + len(sub))
                ):
                    return True
                at = norm.find(sub, at + 1)
    return False


_MAX_OCCURRENCES = 8
_SENTENCE_END_CHARS = ".!?。！？:;\n"


def _sentence_starts(norm: str, at: int) -> bool:
    before = norm[max(0, at - 3) : at].rstrip(" \t\"'“”„«»")
    return not before or before[-1] in _SENTENCE_END_CHARS


def _sentence_ends(norm: str, at: int) -> bool:
    after = norm[at : at + 3].lstrip(" \t\"'“”„«»")
    return not after or after[0] in _SENTENCE_END_CHARS


def _match(page: PreparedText, start: int, end: int, diff: Diff, *, altered: bool) -> PassageMatch:
    sentence = sentence_of(page, start, end)
    what = "; ".join(_KIND_TEXT[k] for k in diff.kinds)
    edits = ", ".join(diff.tokens[:6])
    return PassageMatch(
        found=False,
        score=0.0,
        start=start,
        end=end,
        matched_text=sentence,
        how="near_copy",
        altered=altered,
        differing_tokens=list(diff.tokens),
        reason=(
            f"the claim copies a sentence of the page with {what} ({edits}); the page says: "
            f"{sentence!r}"
        ),
    )


_KIND_TEXT = {
    "number": "a number or date changed",
    "negation": "a negation added or dropped",
    "name": "a name replaced",
    "word": "a word replaced",
}


def _pieces(claim: str) -> list[str]:
    """The claim, then its sentences and clauses when it has several (each long enough to
    be a copy)."""
    out = [claim]
    for s, e in sentence_spans(claim):
        sentence = claim[s:e]
        if sentence != claim:
            out.append(sentence)
        parts = [p.strip(_EDGE_STRIP) for p in _CLAUSE_RE.split(sentence)]
        parts = [p for p in parts if len(ALIGN_TOKEN_RE.findall(p)) >= MIN_TOKENS + 2]
        if len(parts) > 1:
            out.extend(parts)
    return [p for p in dict.fromkeys(out) if len(ALIGN_TOKEN_RE.findall(p)) >= MIN_TOKENS][:16]


#: Sentences of a page's index read per claim term when looking for one that holds the claim.
_MAX_POSTINGS = 2_000


def _may_be_copied(text: str, page: PreparedText) -> bool:
    """Whether one sentence of the page (or two in a row) holds at least half of the claim's
    content words, as a copy's must: dictionary look-ups in the page's sentence index, so a
    claim that is no copy (most are not) costs no scan of the page."""
    terms = set(content_terms(text))
    if len(terms) < 2:
        return True
    postings = page.sentences().postings
    counts: dict[int, int] = {}
    for t in terms:
        for i in postings.get(t, ())[:_MAX_POSTINGS]:
            counts[i] = counts.get(i, 0) + 1
    best = max((n + counts.get(i + 1, 0) for i, n in counts.items()), default=0)
    return 2 * best >= len(terms)


def find_near_copy(claim: str, page: PreparedText) -> PassageMatch | None:
    """An edit of a page sentence the unquoted ``claim`` (or one of its clauses) copies: a
    ``PassageMatch`` (``how="near_copy"``, never ``found``) with the page's sentence as
    ``matched_text`` and the edits as ``differing_tokens``; ``altered`` when an edit is shown
    to change what is said (a number, a negation, a name), else a content word was replaced
    (a synonym or not: the support step decides, and may not call it supported). ``None`` when
    the claim copies nothing or copies it faithfully."""
    text = _MARKER_RE.sub(" ", claim[: 4 * FUZZY_CHUNK_CHARS])
    if not page.norm.strip():
        return None
    soft: PassageMatch | None = None
    for piece in _pieces(text):
        found = _near_copy_of(piece, page)
        if found is not None and found.altered:
            return found
        soft = soft or found
    return soft

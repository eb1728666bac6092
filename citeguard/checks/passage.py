"""Is the quoted (or paraphrased) passage really on the page?

Three tiers, cheapest first:

1. **exact**: the quote occurs verbatim in the page text;
2. **normalised**: it occurs after folding case, Unicode (NFKC), curly quotes, dashes, ellipses,
   soft hyphens, zero-width characters, ligatures and whitespace. An offset map keeps positions in
   the original text, so the match still points at the page's own characters;
3. **fuzzy**: anchor words of the quote locate a few candidate windows, rapidfuzz aligns the quote
   in each, and a word-level diff decides. The match is accepted only when what differs carries no
   meaning (punctuation, spacing, hyphenation, a typo, an article). A changed number, date or name,
   an added or dropped negation, or any other swapped word makes the quote **altered**: it is
   rejected with the differing tokens listed.

An ellipsis inside a quote (``…``, ``...``, ``[…]``) marks elided text: its pieces must all be
found, in order.

Normalise a page once with :func:`prepare_text` and pass the :class:`PreparedText` to every
:func:`find_passage` / :func:`find_paraphrase` call on that page.
"""

from __future__ import annotations

import heapq
import math
import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote as _percent_quote

from rapidfuzz import fuzz

from citeguard.checks.align import KIND_TEXT as _KIND_TEXT
from citeguard.checks.align import Diff as _Diff
from citeguard.checks.align import align as _align
from citeguard.checks.align import classify as _classify
from citeguard.lang import has_no_space_script, segment
from citeguard.models import PassageMatch
from citeguard.policy import PassagePolicy
from citeguard.text import (
    ALIGN_TOKEN_RE,
    PARAPHRASE_STOPWORDS,
    PASSAGE_TOKEN_RE,
    fold,
    has_combining_marks,
    normalise,
    normalise_cased,
    page_sentence_spans,
    special_pattern,
    special_replacement,
)

__all__ = [
    "PreparedText",
    "find_as_written",
    "find_paraphrase",
    "find_passage",
    "normalise",
    "prepare_text",
    "sentence_of",
    "text_fragment_url",
]

_DEFAULT_POLICY = PassagePolicy()

# --------------------------------------------------------------------------------------------
# Normalisation with an offset map (the folding itself is citeguard.text.normalise)
# --------------------------------------------------------------------------------------------


class PreparedText:
    """A page text normalised once, with a map from normalised offsets back to the original.

    Build it with :func:`prepare_text`; it is immutable apart from a lazily built sentence index
    used by :func:`find_paraphrase`, which belongs to this object only.
    """

    __slots__ = ("_orig_starts", "_seg_linear", "_seg_starts", "_sentences", "norm", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        seg_starts: list[int] = []
        orig_starts: list[int] = []
        linear: list[bool] = []
        pieces: list[str] = []
        npos = 0
        pos = 0
        for m in special_pattern(text).finditer(text):
            if m.start() > pos:
                seg_starts.append(npos)
                orig_starts.append(pos)
                linear.append(True)
                piece = text[pos : m.start()]
                pieces.append(piece)
                npos += len(piece)
            rep = special_replacement(m.group())
            seg_starts.append(npos)
            orig_starts.append(m.start())
            linear.append(False)
            pieces.append(rep)
            npos += len(rep)
            pos = m.end()
        if pos < len(text) or not seg_starts:
            seg_starts.append(npos)
            orig_starts.append(pos)
            linear.append(True)
            pieces.append(text[pos:])
        self.norm: str = fold("".join(pieces))
        self._seg_starts = seg_starts
        self._orig_starts = orig_starts
        self._seg_linear = linear
        self._sentences: _SentenceIndex | None = None

    def _orig_end_of(self, k: int) -> int:
        return self._orig_starts[k + 1] if k + 1 < len(self._orig_starts) else len(self.text)

    def to_orig_start(self, i: int) -> int:
        """Original offset of the character at normalised offset ``i``."""
        k = max(0, bisect_right(self._seg_starts, i) - 1)
        if self._seg_linear[k]:
            return self._orig_starts[k] + (i - self._seg_starts[k])
        return self._orig_starts[k]

    def to_orig_end(self, j: int) -> int:
        """Original offset just past the character at normalised offset ``j - 1``."""
        if j <= 0:
            return 0
        k = max(0, bisect_right(self._seg_starts, j - 1) - 1)
        if self._seg_linear[k]:
            return self._orig_starts[k] + (j - self._seg_starts[k])
        return self._orig_end_of(k)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Normalised [start, end) → original [start, end)."""
        return self.to_orig_start(start), self.to_orig_end(end)

    @property
    def indexed(self) -> bool:
        """Whether the sentence index :func:`find_paraphrase` needs is built."""
        return self._sentences is not None

    def sentences(self) -> _SentenceIndex:
        if self._sentences is None:
            self._sentences = _SentenceIndex(self.text)
        return self._sentences


def prepare_text(page_text: str) -> PreparedText:
    """Normalise a page text once for repeated :func:`find_passage` calls."""
    return PreparedText(page_text)


def _prepared(value: str | PreparedText) -> PreparedText:
    return value if isinstance(value, PreparedText) else PreparedText(value)


# --------------------------------------------------------------------------------------------
# Quote matching
# --------------------------------------------------------------------------------------------

# A run of whitespace is tried from its start only ((?<!\s), possessive): one pass, not one
# per space, over a quote of 20 000 spaces.
_ELLIPSIS_RE = re.compile(r"(?<!\s)\s*+(?:[\[(]\s*+(?:…|\.\s?\.\s?\.)\s*+[\])]|…|\.{3,})\s*")
_EDGE_STRIP = " \t\n\"'“”„‟«»‹›‘’‚`´.,;:!?()[]{}-–—*_"
_MAX_QUOTE_CHARS = 20_000
#: Fuzzy matching needs enough words to tell a typo from a different passage.
_MIN_FUZZY_TOKENS = 3
#: Candidate windows aligned per quote piece (bounded work however repetitive the page).
_MAX_CANDIDATES = 4
_MAX_OCCURRENCES = 64
#: Approximate alignment costs about the cube of the quote's length (5 000 characters take
#: seconds): a longer quote piece is aligned as consecutive chunks of at most this many
#: characters, each after the one before it.
FUZZY_CHUNK_CHARS = 500
#: Elided pieces ("a … b … c") matched per quote; a quote with more is not checked.
_MAX_QUOTE_PIECES = 64


@dataclass(frozen=True, slots=True)
class _Hit:
    start: int  # normalised offsets
    end: int
    score: float
    how: str  # exact | normalised | fuzzy
    diff: _Diff | None = None


def cased_tokens(text: str) -> list[str]:
    return ALIGN_TOKEN_RE.findall(text)


def _search_piece(
    piece: str, page: PreparedText, start_at: int, policy: PassagePolicy
) -> _Hit | None:
    """Best match of one quote piece at or after normalised offset ``start_at``."""
    qn = normalise(piece).strip(_EDGE_STRIP)
    if not qn:
        return None
    norm = page.norm
    i = norm.find(qn, start_at)
    if i >= 0:
        return _Hit(i, i + len(qn), 100.0, "normalised")
    if len(qn) > FUZZY_CHUNK_CHARS:
        return _fuzzy_chunks(piece, page, start_at, policy)
    return _fuzzy(piece, qn, page, start_at, policy)


def _chunks(piece: str, size: int) -> list[str]:
    """``piece`` cut into consecutive chunks of about ``size`` characters, at most ``size``:
    at a space where there is one, else in the middle of a word."""
    count = -(-len(piece) // size)
    target = -(-len(piece) // count)
    out: list[str] = []
    pos = 0
    while len(piece) - pos > size:
        cut = piece.rfind(" ", pos + 1, pos + target + 1)
        if cut <= pos:
            out.append(piece[pos : pos + target])
            pos += target
            continue
        out.append(piece[pos:cut])
        pos = cut + 1
    out.append(piece[pos:])
    return [c for c in out if c.strip(_EDGE_STRIP)]


def _fuzzy_chunks(
    piece: str, page: PreparedText, start_at: int, policy: PassagePolicy
) -> _Hit | None:
    """A long piece aligned chunk by chunk: the first anywhere from ``start_at``, each later one
    just after the one before (a window of a few times its length), so the work is linear in the
    piece's length however long it is."""
    norm = page.norm
    hits: list[_Hit] = []
    kinds: list[str] = []
    tokens: list[str] = []
    pos, stop = start_at, len(norm)
    for chunk in _chunks(piece, FUZZY_CHUNK_CHARS):
        qn = normalise(chunk).strip(_EDGE_STRIP)
        if not qn:
            continue
        if hits:
            stop = min(len(norm), pos + 3 * len(qn) + 64)
        i = norm.find(qn, pos, stop)
        found = (
            _Hit(i, i + len(qn), 100.0, "normalised")
            if i >= 0
            else _fuzzy(chunk, qn, page, pos, policy, stop_at=stop)
        )
        if found is None:
            return None
        if hits:
            # page words between two chunks are words the quote left out
            spans = [m.span() for m in ALIGN_TOKEN_RE.finditer(norm, pos, found.start)]
            if spans:
                gap = _classify(
                    [(0, 0, 0, len(spans))],
                    [],
                    [],
                    [norm[s:e] for s, e in spans],
                    [page.text[page.to_orig_start(s) : page.to_orig_end(e)] for s, e in spans],
                )
                found = _Hit(found.start, found.end, found.score, "fuzzy", _merge(found.diff, gap))
        hits.append(found)
        pos = found.end
    if not hits:
        return None
    for h in hits:
        if h.diff is not None:
            kinds.extend(k for k in h.diff.kinds if k not in kinds)
            tokens.extend(h.diff.tokens)
    how = "normalised" if all(h.how == "normalised" for h in hits) else "fuzzy"
    diff = _Diff(tuple(kinds), tuple(tokens)) if how == "fuzzy" else None
    return _Hit(hits[0].start, hits[-1].end, min(h.score for h in hits), how, diff)


def _merge(a: _Diff | None, b: _Diff) -> _Diff:
    if a is None:
        return b
    return _Diff(a.kinds + tuple(k for k in b.kinds if k not in a.kinds), a.tokens + b.tokens)


def candidate_starts(
    qn: str, q_tokens: list[tuple[int, str]], norm: str, start_at: int, stop_at: int | None = None
) -> list[int]:
    """Where the quote could start in ``norm[start_at:stop_at]``, voted by its rarest words."""
    stop = len(norm) if stop_at is None else stop_at
    distinct: dict[str, int] = {}
    for offset, tok in q_tokens:
        if len(tok) >= 3 or tok.isdigit() or has_no_space_script(tok):
            distinct.setdefault(tok, offset)
    if not distinct:
        distinct = {tok: offset for offset, tok in q_tokens}
    counted = []
    for tok, offset in distinct.items():
        count = norm.count(tok, start_at, stop)
        if count:
            counted.append((count, -len(tok), tok, offset))
    counted.sort()
    bucket = max(16, len(qn) // 3)
    half = bucket // 2
    # each occurrence votes for where the quote would start; two grids offset by half a bucket,
    # so anchors that disagree by a few characters (an inserted word) still land together
    votes: dict[tuple[int, int], set[str]] = {}
    for count, _, tok, offset in counted[:8]:
        if count > _MAX_OCCURRENCES and len(votes) > 0:
            continue
        pos = norm.find(tok, start_at, stop)
        seen = 0
        while pos >= 0 and seen < _MAX_OCCURRENCES:
            guess = pos - offset
            votes.setdefault((0, guess // bucket), set()).add(tok)
            votes.setdefault((1, (guess + half) // bucket), set()).add(tok)
            pos = norm.find(tok, pos + 1, stop)
            seen += 1
    if not votes:
        return []
    ranked = sorted(votes.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    # two anchor words must agree on a window, unless the page has only one of them at all
    need = max(1, min(2, len(counted)))
    starts: list[int] = []
    for (grid, k), toks in ranked:
        if len(toks) < need or len(starts) >= _MAX_CANDIDATES:
            break
        start = k * bucket - grid * half
        if all(abs(start - other) >= bucket for other in starts):
            starts.append(start)
    return starts


def _fuzzy(
    piece: str,
    qn: str,
    page: PreparedText,
    start_at: int,
    policy: PassagePolicy,
    stop_at: int | None = None,
) -> _Hit | None:
    q_tok_spans = [(m.start(), m.group()) for m in ALIGN_TOKEN_RE.finditer(qn)]
    if len(q_tok_spans) < _MIN_FUZZY_TOKENS:
        return None
    norm = page.norm
    q_tokens = [t for _, t in q_tok_spans]
    cased_piece = normalise_cased(piece).strip(_EDGE_STRIP)
    q_cased = cased_tokens(cased_piece)
    if len(q_cased) != len(q_tokens):
        q_cased = q_tokens  # lower() changed tokenisation (rare scripts): lose case info
    best: _Hit | None = None
    pad = max(24, len(qn) // 2)
    for cand in candidate_starts(qn, q_tok_spans, norm, start_at, stop_at):
        w0 = max(start_at, cand - pad)
        w1 = min(len(norm), cand + len(qn) + 2 * pad)
        window = norm[w0:w1]
        align = fuzz.partial_ratio_alignment(qn, window, score_cutoff=50)
        if align is None:
            continue
        # widen the aligned span to whole words plus a little context on each side, then diff
        a0 = w0 + align.dest_start
        a1 = w0 + align.dest_end
        c0 = word_start(norm, max(start_at, a0 - 12))
        c1 = word_end(norm, min(len(norm), a1 + 12))
        ctx_spans = [m.span() for m in ALIGN_TOKEN_RE.finditer(norm, c0, c1)]
        p_tokens = [norm[s:e] for s, e in ctx_spans]
        if not p_tokens:
            continue
        aligned = _align(q_tokens, p_tokens)
        if aligned is None:
            continue
        blocks, j0, j1, matched = aligned
        if matched < 2 or matched * 2 < len(q_tokens):
            continue  # shares too few words to be this passage at all
        m_start = ctx_spans[j0][0]
        m_end = ctx_spans[j1 - 1][1]
        score = fuzz.ratio(qn, norm[m_start:m_end])
        # the page's own spelling of each context word, to tell names from common words
        p_cased = [page.text[page.to_orig_start(s) : page.to_orig_end(e)] for s, e in ctx_spans]
        diff = _classify(blocks, q_tokens, q_cased, p_tokens, p_cased)
        hit = _Hit(m_start, m_end, float(score), "fuzzy", diff)
        if best is None or _rank(hit) > _rank(best):
            best = hit
    return best


def _rank(hit: _Hit) -> tuple[int, float]:
    clean = hit.diff is None or not hit.diff.kinds
    return (1 if clean else 0, hit.score)


def word_start(s: str, i: int) -> int:
    while i > 0 and s[i - 1].isalnum():
        i -= 1
    return i


def word_end(s: str, j: int) -> int:
    while j < len(s) and s[j].isalnum():
        j += 1
    return j


def _verbatim(quote: str, page: PreparedText, policy: PassagePolicy) -> PassageMatch | None:
    """``quote`` exactly as it stands in the page's text, or ``None``."""
    stripped = quote.strip().strip(_EDGE_STRIP)
    i = page.text.find(stripped) if stripped else -1
    if i < 0:
        return None
    return _result(page, _Hit(-1, -1, 100.0, "exact"), i, i + len(stripped), policy)


def _as_written(text: str, page: PreparedText, policy: PassagePolicy) -> PassageMatch | None:
    """``text`` on the page verbatim or after normalising it whole (no fuzzy search)."""
    hit = _verbatim(text, page, policy)
    if hit is not None:
        return hit
    whole = normalise(text).strip(_EDGE_STRIP)
    i = page.norm.find(whole) if whole else -1
    if i < 0:
        return None
    return _result(
        page, _Hit(i, i + len(whole), 100.0, "normalised"), *page.span(i, i + len(whole)), policy
    )


def _match_quote(quote: str, page: PreparedText, policy: PassagePolicy) -> PassageMatch:
    # fast path: verbatim, then normalised as a whole (a page may contain a literal "...")
    hit = _verbatim(quote, page, policy)
    if hit is not None:
        return hit
    pieces = [p for p in _ELLIPSIS_RE.split(quote) if p.strip(_EDGE_STRIP)]
    if not pieces:
        return PassageMatch(found=False, score=0.0, reason="the quote is empty")
    if len(pieces) > _MAX_QUOTE_PIECES:
        return PassageMatch(
            found=False,
            score=0.0,
            reason=f"the quote has more than {_MAX_QUOTE_PIECES} elided parts to check",
        )
    if len(pieces) > 1:
        whole = normalise(quote).strip(_EDGE_STRIP)
        i = page.norm.find(whole) if whole else -1
        if i >= 0:
            full = _Hit(i, i + len(whole), 100.0, "normalised")
            return _result(page, full, *page.span(full.start, full.end), policy)
    hits: list[_Hit] = []
    pos = 0
    for piece in pieces:
        found = _search_piece(piece, page, pos, policy)
        if found is None:
            reason = (
                "the quote is not on the page"
                if len(pieces) == 1
                else "a part of the elided quote is not on the page (in this order)"
            )
            return PassageMatch(found=False, score=_best_score(hits), reason=reason)
        hits.append(found)
        pos = found.end
    start = hits[0].start
    end = hits[-1].end
    how = "normalised" if all(h.how == "normalised" for h in hits) else "fuzzy"
    kinds: list[str] = []
    tokens: list[str] = []
    for h in hits:
        if h.diff is not None:
            kinds.extend(k for k in h.diff.kinds if k not in kinds)
            tokens.extend(h.diff.tokens)
    score = min(h.score for h in hits)
    merged = _Hit(start, end, score, how, _Diff(tuple(kinds), tuple(tokens)))
    return _result(page, merged, *page.span(start, end), policy)


def _best_score(hits: Iterable[_Hit]) -> float:
    scores = [h.score for h in hits]
    return min(scores) if scores else 0.0


def _result(
    page: PreparedText, hit: _Hit, start: int, end: int, policy: PassagePolicy
) -> PassageMatch:
    matched = page.text[start:end]
    if hit.how in ("exact", "normalised"):
        return PassageMatch(
            found=True,
            score=100.0,
            start=start,
            end=end,
            matched_text=matched,
            how="exact" if hit.how == "exact" else "normalised",
            reason="quote found verbatim"
            if hit.how == "exact"
            else "quote found after normalising",
        )
    diff = hit.diff or _Diff((), ())
    if diff.kinds:
        what = "; ".join(_KIND_TEXT[k] for k in diff.kinds)
        return PassageMatch(
            found=False,
            score=hit.score,
            start=start,
            end=end,
            matched_text=matched,
            how="fuzzy",
            altered=True,
            differing_tokens=list(diff.tokens),
            reason=(
                f"the page has a different version of this quote: {what} ({', '.join(diff.tokens)})"
            ),
        )
    if hit.score < policy.fuzzy_threshold:
        return PassageMatch(
            found=False,
            score=hit.score,
            start=start,
            end=end,
            matched_text=matched,
            how="fuzzy",
            differing_tokens=list(diff.tokens),
            reason=(
                f"closest passage is too different "
                f"(score {hit.score:.0f} < {policy.fuzzy_threshold:.0f})"
            ),
        )
    return PassageMatch(
        found=True,
        score=hit.score,
        start=start,
        end=end,
        matched_text=matched,
        how="fuzzy",
        differing_tokens=list(diff.tokens),
        reason="quote found with minor differences (punctuation, spacing, spelling)",
    )


def find_passage(
    quote: str,
    page_text: str | PreparedText,
    *,
    main_text: str | PreparedText | None = None,
    policy: PassagePolicy | None = None,
) -> PassageMatch:
    """Look for ``quote`` in the page text; offsets in the result index ``page_text``.

    ``main_text`` (the article body, when known) sets ``in_main_text``; with
    ``policy.require_main_text`` a quote found only outside it (navigation, teasers, comments)
    is not accepted.
    """
    policy = policy or _DEFAULT_POLICY
    page = _prepared(page_text)
    if len(quote) > _MAX_QUOTE_CHARS:
        return PassageMatch(found=False, score=0.0, reason="the quote is too long to check")
    if not quote.strip(_EDGE_STRIP):
        return PassageMatch(found=False, score=0.0, reason="the quote is empty")
    if not page.norm.strip():
        return PassageMatch(found=False, score=0.0, reason="the page has no text")
    result = _match_quote(quote, page, policy)
    if main_text is None or not result.found:
        return result
    main = _prepared(main_text)
    in_main = _match_quote(quote, main, policy).found if main.norm.strip() else False
    if not in_main and policy.require_main_text:
        return result.model_copy(
            update={
                "found": False,
                "in_main_text": False,
                "reason": (
                    "the quote is only in the page's boilerplate (navigation, teasers, comments)"
                ),
            }
        )
    return result.model_copy(update={"in_main_text": in_main})


#: Characters either side of a match read to find the sentences holding it.
_SENTENCE_CONTEXT_CHARS = 600


def sentence_of(page: PreparedText, start: int, end: int) -> str:
    """The page's sentence (or run of sentences) holding original offsets [start, end)."""
    text = page.text
    lo = max(0, start - _SENTENCE_CONTEXT_CHARS)
    hi = min(len(text), end + _SENTENCE_CONTEXT_CHARS)
    spans = [
        (s + lo, e + lo)
        for s, e in page_sentence_spans(text[lo:hi])
        if s + lo < end and e + lo > start
    ]
    if not spans:
        return text[start:end]
    return text[spans[0][0] : spans[-1][1]]


def find_as_written(
    text: str,
    page_text: str | PreparedText,
    *,
    main_text: str | PreparedText | None = None,
    policy: PassagePolicy | None = None,
) -> PassageMatch | None:
    """``text`` on the page as written: verbatim, or after normalisation — never a fuzzy
    alignment (a claim that is not a copy costs two substring searches). ``None`` when it is
    not there, or when ``main_text`` is given and it is not in it."""
    policy = policy or _DEFAULT_POLICY
    if len(text) > _MAX_QUOTE_CHARS:
        return None
    hit = _as_written(text, _prepared(page_text), policy)
    if hit is None or main_text is None:
        return hit
    main = _prepared(main_text)
    if not main.norm.strip() or _as_written(text, main, policy) is None:
        return None
    return hit.model_copy(update={"in_main_text": True})


# --------------------------------------------------------------------------------------------
# Paraphrase
# --------------------------------------------------------------------------------------------

_STEM_CHARS = 6
_MARKER_RE = re.compile(r"\[\^?\d+(?:\s*[,–-]\s*\d+)*\]")


def _stem(token: str) -> str:
    """Stemming-lite: a long word's prefix stands for its inflections ("regulation(s)")."""
    return token[:_STEM_CHARS] if len(token) > _STEM_CHARS else token


def _terms_of(token: str) -> list[str]:
    """A token's content terms: none for a stopword or a lone letter; a run of a script
    written without spaces, its words (:func:`citeguard.lang.segment`), single characters
    left out as a lone letter is."""
    if has_no_space_script(token):
        return [w for w in segment(token) if len(w) > 1 or w.isdigit()]
    if token in PARAPHRASE_STOPWORDS or (len(token) < 2 and not token.isdigit()):
        return []
    return [_stem(token)]


def _content_terms(text: str) -> list[str]:
    return [term for t in PASSAGE_TOKEN_RE.findall(normalise(text)) for term in _terms_of(t)]


#: A text's content terms as the page's sentence index keys them (near-copies look up a claim's).
content_terms = _content_terms


# Between sentences normalised together: not a token character, not whitespace, untouched by
# normalisation, and composing with nothing.
_JOINER = "\x00"
_TOKEN_OR_JOINER_RE = re.compile(f"{PASSAGE_TOKEN_RE.pattern}|{_JOINER}")


# Characters of sentences normalised in one call: each C call stays well under a millisecond,
# so a thread building a long page's index never holds the GIL long against the event loop.
_TERMS_BATCH_CHARS = 16_000


def _sentence_terms(text: str, spans: list[tuple[int, int]]) -> list[list[str]]:
    """``_content_terms`` of every sentence span, in two C passes per batch of sentences
    instead of two per sentence (an index over a 10 kB page: ~140 sentences).

    A batch's sentences are joined with NUL, normalised and tokenised together, then split at
    the NULs. That equals normalising each one alone when the batch holds no NUL and no
    combining mark: each character's replacement then depends on that character alone (never
    on a neighbour, as a mark's does on its base letter), and no replacement or token reaches
    across a NUL. Any other batch is done sentence by sentence.
    """
    out: list[list[str]] = []
    # a token's terms (none: a stopword or a lone letter), each distinct token worked out once
    seen: dict[str, list[str]] = {}
    first = 0
    while first < len(spans):
        last, size = first, 0
        while last < len(spans) and (last == first or size < _TERMS_BATCH_CHARS):
            size += spans[last][1] - spans[last][0]
            last += 1
        pieces = [text[s:e] for s, e in spans[first:last]]
        first = last
        joined = _JOINER.join(pieces)
        # more NULs than the joins put there: a piece holds one of its own
        if joined.count(_JOINER) != len(pieces) - 1 or has_combining_marks(joined):
            out.extend(_content_terms(piece) for piece in pieces)
            continue
        current: list[str] = []
        no_space = has_no_space_script(joined)  # else every token is its own term (or none)
        for tok in _TOKEN_OR_JOINER_RE.findall(normalise(joined)):
            if tok == _JOINER:
                out.append(current)
                current = []
                continue
            terms = seen.get(tok)
            if terms is None:
                if no_space:
                    terms = _terms_of(tok)
                elif tok in PARAPHRASE_STOPWORDS or (len(tok) < 2 and not tok.isdigit()):
                    terms = []
                else:
                    terms = [_stem(tok)]
                seen[tok] = terms
            current.extend(terms)
        out.append(current)
    return out


class _SentenceIndex:
    """Sentences of a page with their content terms and an inverted index."""

    __slots__ = ("df", "postings", "spans", "terms")

    def __init__(self, text: str) -> None:
        spans = page_sentence_spans(text)[:_MAX_INDEXED_SENTENCES]
        self.spans = spans
        # Tuples (of strings, of ints), not sets and lists: the garbage collector stops tracking
        # them. 200 checks in flight held ~a million posting lists and term sets, and every
        # full collection walked them all: 300-400 ms of the event loop's time in one piece.
        self.terms: list[tuple[str, ...]] = []  # each sentence's distinct terms
        postings: dict[str, list[int]] = {}
        # sentences with the same terms share one tuple, so windows over them score alike at once
        shared: dict[frozenset[str], tuple[str, ...]] = {}
        for idx, sentence_terms in enumerate(_sentence_terms(text, spans)):
            key = frozenset(sentence_terms)
            terms = shared.get(key)
            if terms is None:
                terms = shared[key] = tuple(key)
            self.terms.append(terms)
            for t in terms:
                postings.setdefault(t, []).append(idx)
        self.postings: dict[str, tuple[int, ...]] = {t: tuple(ids) for t, ids in postings.items()}
        self.df = {t: len(ids) for t, ids in postings.items()}


#: A claim's candidate sentences come from at most this many postings (its rarest terms first)
#: and number at most so many (the best-scoring), however long the claim and the page.
_MAX_PARAPHRASE_POSTINGS = 20_000
_MAX_PARAPHRASE_SENTENCES = 1_000
#: Sentences of a page indexed for paraphrase search (a 20 MB page is cut near 10 MB).
_MAX_INDEXED_SENTENCES = 200_000


def _paraphrase_candidates(
    index: _SentenceIndex, claim_terms: list[str], weights: dict[str, float]
) -> list[int]:
    """The sentences that hold a claim term, in page order: all of them, unless there are more
    than the bounds allow; then the best by the weight of the claim terms each holds."""
    lists = [ids for ids in (index.postings.get(t) for t in claim_terms) if ids]
    if sum(len(ids) for ids in lists) <= _MAX_PARAPHRASE_POSTINGS:
        hits = set().union(*lists)
        if len(hits) <= _MAX_PARAPHRASE_SENTENCES:
            return sorted(hits)
    scores: dict[int, float] = {}
    budget = _MAX_PARAPHRASE_POSTINGS
    for t in sorted((t for t in claim_terms if t in index.postings), key=index.df.__getitem__):
        # rarest first; the first term past the budget counts in its first sentences only, and
        # the rest (commoner still: they weigh little and would cost the most) not at all
        ids = index.postings[t][:budget]
        budget -= len(ids)
        w = weights[t]
        for i in ids:
            scores[i] = scores.get(i, 0.0) + w
        if budget <= 0:
            break
    best = heapq.nlargest(_MAX_PARAPHRASE_SENTENCES, scores, key=scores.__getitem__)
    return sorted(best)


def find_paraphrase(
    claim: str,
    page_text: str | PreparedText,
    *,
    policy: PassagePolicy | None = None,
) -> PassageMatch:
    """Find the 1–3 sentence window of the page that best covers ``claim``'s content words.

    Similarity is the IDF-weighted share of the claim's content terms (stopwords dropped, words
    cut to a 6-character stem) that the window contains; ``score`` is that share × 100. Below
    ``policy.paraphrase_threshold`` the result is not found.
    """
    policy = policy or _DEFAULT_POLICY
    page = _prepared(page_text)
    # citation markers ("[3]", "[^2]", "[1, 4]") are the answer's plumbing, not its content
    claim = _MARKER_RE.sub(" ", claim[:_MAX_QUOTE_CHARS])
    claim_terms = list(dict.fromkeys(_content_terms(claim)))
    if not claim_terms:
        return PassageMatch(
            found=False, score=0.0, how="paraphrase", reason="the claim has no content words"
        )
    if not page.norm.strip():
        return PassageMatch(found=False, score=0.0, how="paraphrase", reason="the page has no text")
    index = page.sentences()
    n = len(index.spans)
    weights = {t: math.log(1.0 + (n + 1) / (index.df.get(t, 0) + 0.5)) for t in claim_terms}
    total = sum(weights.values())
    best_sim = 0.0
    best_span = (-1, -1)
    claim_set = frozenset(claim_terms)
    inter: dict[int, frozenset[str]] = {}  # a sentence's claim terms, for every window holding it
    # each window is scored once, and windows of the same sentences' terms share a score (a page
    # that repeats one sentence a thousand times costs one window, not three thousand)
    scored: dict[int | tuple[int, int, int], float] = {}
    terms = index.terms
    # a candidate whose neighbourhood (two sentences either side, and the page's ends) has the
    # same term sets as an earlier one's has windows scoring exactly as those did: none can win
    hoods: set[tuple[int, ...]] = set()
    for i in _paraphrase_candidates(index, claim_terms, weights):
        hood = (min(i, 2), min(n - 1 - i, 2), *map(id, terms[max(0, i - 2) : i + 3]))
        if hood in hoods:
            continue
        hoods.add(hood)
        for size in (1, 2, 3):
            for first in range(max(0, i - size + 1), i + 1):
                last = first + size
                if last > n:
                    continue
                # the window's sentences' term sets (shared when equal); 0: no third sentence
                parts = (
                    id(terms[first])
                    if size == 1
                    else (id(terms[first]), id(terms[first + 1]), id(terms[last - 1]) * (size - 2))
                )
                weight = scored.get(parts)
                if weight is None:
                    covered: set[str] = set()
                    for k in range(first, last):
                        got = inter.get(k)
                        if got is None:
                            got = inter[k] = claim_set.intersection(terms[k])
                        covered |= got
                    weight = scored[parts] = sum(weights[t] for t in covered)
                # a slight preference for shorter windows among equal coverage
                sim = weight / total - 0.01 * (size - 1)
                if sim > best_sim:
                    best_sim = sim
                    best_span = (index.spans[first][0], index.spans[last - 1][1])
    sim = max(0.0, min(1.0, best_sim))
    if best_span[0] < 0:
        return PassageMatch(
            found=False,
            score=0.0,
            how="paraphrase",
            reason="paraphrase drifts too far from the page",
        )
    start, end = best_span
    found = sim >= policy.paraphrase_threshold
    return PassageMatch(
        found=found,
        score=round(sim * 100.0, 2),
        start=start,
        end=end,
        matched_text=page.text[start:end],
        how="paraphrase",
        reason=(
            f"closest page window covers {sim:.0%} of the claim's content"
            if found
            else "paraphrase drifts too far from the page"
        ),
    )


# --------------------------------------------------------------------------------------------
# Text fragment links
# --------------------------------------------------------------------------------------------

#: Passages longer than this many words are linked as textStart,textEnd.
_FRAGMENT_MAX_WORDS = 10
_FRAGMENT_EDGE_WORDS = 5


def _fragment_encode(text: str) -> str:
    # Text Fragments: '-', '&' and ',' are syntax and must be percent-encoded; quote() with no
    # safe characters leaves only unreserved ones, of which '-' still needs escaping
    return _percent_quote(text, safe="").replace("-", "%2D")


def text_fragment_url(url: str, matched_text: str) -> str:
    """``url#:~:text=…`` opening the page scrolled to ``matched_text`` (any old fragment goes).

    Short passages are linked whole; long ones as ``textStart,textEnd`` (first and last five
    words), which browsers match across element boundaries.
    """
    base = url.split("#", 1)[0]
    words = matched_text.split()
    if not words:
        return base
    if len(words) <= _FRAGMENT_MAX_WORDS:
        directive = _fragment_encode(" ".join(words))
    else:
        start = " ".join(words[:_FRAGMENT_EDGE_WORDS])
        end = " ".join(words[-_FRAGMENT_EDGE_WORDS:])
        directive = f"{_fragment_encode(start)},{_fragment_encode(end)}"
    return f"{base}#:~:text={directive}"

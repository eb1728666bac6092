"""Evidence windows: long evidence cut into overlapping, sentence-aligned windows
(:func:`evidence_windows`), and the candidate windows a backend scores, best lexical match first."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from citeguard.checks._consistency import Consistency, check_consistency, content_words
from citeguard.errors import PolicyError
from citeguard.policy import EntailmentPolicy
from citeguard.text import bounded_sentence_spans

# --------------------------------------------------------------------------------------------
# Evidence windows
# --------------------------------------------------------------------------------------------


def _greedy_ranges(
    units: Sequence[tuple[int, int]], window_chars: int, lo: int = 0, hi: int | None = None
) -> list[tuple[int, int]]:
    """Inclusive unit-index ranges of windows over ``units[lo:hi]``, overlapping by one unit."""
    hi = len(units) if hi is None else hi
    ranges: list[tuple[int, int]] = []
    i = lo
    while i < hi:
        j = i
        while j + 1 < hi and units[j + 1][1] - units[i][0] <= window_chars:
            j += 1
        ranges.append((i, j))
        if j >= hi - 1:
            break
        # Overlap by the last sentence so a claim spanning a boundary is whole in some window.
        i = j if j > i else j + 1
    return ranges


def _centred_ranges(
    units: Sequence[tuple[int, int]], around: tuple[int, int], window_chars: int
) -> list[tuple[int, int]]:
    """One window grown sentence by sentence around ``around`` (more if the passage is long)."""
    a, b = around
    inside = [k for k, (s, e) in enumerate(units) if e > a and s < max(b, a + 1)]
    if not inside:
        # The span sits in whitespace or past the end: start from the nearest sentence.
        nearest = min(
            range(len(units)), key=lambda k: min(abs(units[k][0] - a), abs(units[k][1] - a))
        )
        inside = [nearest]
    i, j = inside[0], inside[-1]
    if units[j][1] - units[i][0] > window_chars:
        return _greedy_ranges(units, window_chars, i, j + 1)
    grew = True
    while grew:
        grew = False
        # Alternate sides so the passage stays near the middle.
        if i > 0 and units[j][1] - units[i - 1][0] <= window_chars:
            i -= 1
            grew = True
        if j + 1 < len(units) and units[j + 1][1] - units[i][0] <= window_chars:
            j += 1
            grew = True
    return [(i, j)]


def evidence_windows(
    evidence: str, *, window_chars: int, around: tuple[int, int] | None = None
) -> list[str]:
    """Cut ``evidence`` into sentence-aligned windows of at most ``window_chars`` characters.

    Without ``around``, the windows cover the whole text in order and overlap by one sentence.
    With ``around=(start, end)`` — the character span of a matched passage — the result is a
    single window grown sentence by sentence on both sides of the passage (several windows only
    if the passage itself is longer than ``window_chars``). Empty evidence gives ``[]``.
    """
    if window_chars <= 0:
        raise PolicyError("window_chars must be positive")
    units = bounded_sentence_spans(evidence, window_chars)
    if not units:
        return []
    ranges = (
        _centred_ranges(units, around, window_chars)
        if around is not None
        else _greedy_ranges(units, window_chars)
    )
    return [evidence[units[i][0] : units[j][1]] for i, j in ranges]


@dataclass(frozen=True, slots=True)
class _Window:
    text: str
    sentences: tuple[str, ...]
    consistency: Consistency


#: Evidence up to this long (a passage and what the page states of the claim's numbers,
#: :func:`citeguard.checks.evidence.with_stated_numbers`) is read whole for the numbers a window
#: lacks; a longer one (a whole page) is not.
_MAX_WHOLE_READ = 16_000


def _stated_elsewhere(window: Consistency, whole: Consistency) -> Consistency:
    """A window's facts with the numbers it lacks that the rest of the evidence states (the
    page's date, a sentence about the claim's subject) no longer missing: missing only if the
    whole evidence lacks them too; stated there only about something else, so marked."""
    missing = tuple(n for n in window.missing_numbers if n in whole.missing_numbers)
    elsewhere = window.elsewhere_numbers + tuple(
        n
        for n in window.missing_numbers
        if n in whole.elsewhere_numbers and n not in window.elsewhere_numbers
    )
    return replace(window, missing_numbers=missing, elsewhere_numbers=elsewhere)


def _candidate_windows(
    claim: str,
    evidence: str,
    policy: EntailmentPolicy,
    *,
    limit: int | None = None,
    pace: Callable[[], None] | None = None,
) -> list[_Window]:
    """Windows of ``evidence`` with their consistency facts, best lexical match first.

    Only ``limit`` (default ``policy.max_windows``) windows survive, so a 100 kB page costs a
    regex pass, not a hundred model calls. ``pace`` is called after each window (default
    :func:`_yield_gil`; a :class:`Pacer` yields only once its interval has passed).
    """
    pace = pace or _yield_gil
    units = bounded_sentence_spans(evidence, policy.window_chars)
    windows: list[_Window] = []
    whole: Consistency | None = None  # of the whole evidence, read once if a window lacks a number
    for i, j in _greedy_ranges(units, policy.window_chars):
        text = evidence[units[i][0] : units[j][1]]
        sentences = tuple(evidence[s:e] for s, e in units[i : j + 1])
        cons = check_consistency(claim, text)
        if cons.missing_numbers and len(text) < len(evidence) <= _MAX_WHOLE_READ:
            whole = check_consistency(claim, evidence) if whole is None else whole
            cons = _stated_elsewhere(cons, whole)
        windows.append(_Window(text, sentences, cons))
        pace()
    windows.sort(
        key=lambda w: (w.consistency.sentence_coverage, w.consistency.coverage), reverse=True
    )
    return windows[: limit or policy.max_windows]


def _shortlist(window: _Window, claim_words: set[str], keep: int) -> _Window:
    """The window with only its ``keep`` sentences richest in claim words (in page order)."""
    if len(window.sentences) <= keep:
        return window
    scored = sorted(
        range(len(window.sentences)),
        key=lambda i: -len(claim_words.intersection(content_words(window.sentences[i]))),
    )
    chosen = sorted(scored[:keep])
    return _Window(window.text, tuple(window.sentences[i] for i in chosen), window.consistency)


def _yield_gil() -> None:
    """Let the event-loop thread run now rather than at the next 5 ms GIL switch.

    The regex and token work here is pure Python in a worker thread; it holds the GIL until the
    interpreter's switch interval forces a hand-over, which would delay every loop wake-up by up
    to 5 ms. ``time.sleep(0)`` releases the GIL at once, so the loop's lag stays near the cost of
    one window's checks (well under a millisecond).
    """
    time.sleep(0)


#: The longest a :class:`Pacer` lets its thread hold the GIL between two yields.
PACE_SECONDS = 0.001


class Pacer:
    """:func:`_yield_gil`, at most once every :data:`PACE_SECONDS`: a worker that yields after
    every small step (each evidence window of each pair, ~0.1 ms once its words are read) pays a
    hand-over of the GIL for each, and on a busy machine each ``sleep(0)`` gives the core away
    too (~1 ms a yield measured at load 10, 3-4 yields a pair). Paced, the event loop still
    waits at most about one interval for the GIL. One per worker call; not thread-safe."""

    __slots__ = ("_clock", "_last")

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._last = clock()

    def __call__(self) -> None:
        now = self._clock()
        if now - self._last >= PACE_SECONDS:
            _yield_gil()
            self._last = self._clock()

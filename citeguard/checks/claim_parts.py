"""A claim of several facts, judged part by part.

"The terminal opened in 2019, and it handled 2.1 million containers in 2023" is two facts; a
long page may state them paragraphs apart, and a model that reads the claim against its single
best sentence sees only one. :func:`claim_parts` splits such a claim, conservatively, into its
clauses (sentences; clauses joined by ";" or by a comma and a coordinating word), each long
enough to stand alone; :func:`combine` reads the parts' scores back into one: ``contradicted``
when the whole claim is, ``supported`` when every part is (or the whole claim is),
``not_supported`` when the whole claim is, otherwise ``uncertain``, and the reason names the
part that was not settled.
A part the rules find contradicted makes the claim ``uncertain``, not a hard reject: a clause read
alone ("it handled 2.1 million") can meet a number about something else (on AB-long it
hard-rejected a supported claim); the whole claim's contradiction still rejects.
Linear in the claim (one regex pass, a bounded number of parts).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from citeguard.models import EntailmentScore
from citeguard.text import sentence_spans

__all__ = ["MAX_PARTS", "claim_parts", "combine"]

#: Parts a claim is judged in, at most (the last holds the rest).
MAX_PARTS = 4
#: Words a part needs to stand on its own (a shorter clause stays with its neighbour).
_MIN_WORDS = 4
#: Claims longer than this (characters) are judged whole: a part-by-part reading of a
#: paragraph-long "claim" would cost more than it tells.
_MAX_CLAIM_CHARS = 1_000
# a clause boundary: ";" or a comma before a coordinating word that opens a new clause
_BOUNDARY = re.compile(r";\s+|,\s+(?=(?:and|but|while|whereas|yet)\s)", re.IGNORECASE)
_LEADING = re.compile(r"^(?:and|but|while|whereas|yet)\s+", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+")


def _clauses(sentence: str) -> list[str]:
    pieces: list[str] = []
    pos = 0
    for m in _BOUNDARY.finditer(sentence):
        pieces.append(sentence[pos : m.start()])
        pos = m.end()
    pieces.append(sentence[pos:])
    out: list[str] = []
    for raw in pieces:
        piece = _LEADING.sub("", raw.strip())
        if out and len(_WORD.findall(piece)) < _MIN_WORDS:
            out[-1] = f"{out[-1]}, {raw.strip()}"
        elif not out or len(_WORD.findall(out[-1])) >= _MIN_WORDS:
            out.append(piece)
        else:
            out[-1] = f"{out[-1]}, {raw.strip()}"
    return [p.strip(" ,;") for p in out if p.strip(" ,;")]


def claim_parts(claim: str) -> list[str]:
    """The parts of ``claim`` judged one by one (one part: the claim is judged whole)."""
    text = " ".join(claim.split())
    if len(text) > _MAX_CLAIM_CHARS:
        return [claim]
    parts: list[str] = []
    for start, end in sentence_spans(text):
        parts.extend(_clauses(text[start:end]))
    parts = [p for p in parts if _WORD.search(p)]
    if len(parts) <= 1:
        return [claim]
    if len(parts) > MAX_PARTS:
        parts = [*parts[: MAX_PARTS - 1], " ".join(parts[MAX_PARTS - 1 :])]
    return [p[:1].upper() + p[1:] for p in parts]


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def combine(
    whole: EntailmentScore, parts: Sequence[tuple[str, EntailmentScore]]
) -> EntailmentScore:
    """One claim's score from its whole reading and its parts' (see the module docstring).
    P(supported) is the whole claim's, or the weakest part's when every part is supported."""
    if len(parts) <= 1:
        return whole
    if whole.label == "contradicted":
        return whole
    if all(s.label == "supported" for _, s in parts):
        weakest = min(parts, key=lambda ts: ts[1].score)[1]
        evidence = "\n".join(dict.fromkeys(s.evidence for _, s in parts if s.evidence))
        return weakest.model_copy(
            update={
                "evidence": evidence,
                "reason": f"supported part by part ({len(parts)} parts): {weakest.reason}",
            }
        )
    if whole.label in ("supported", "not_supported"):
        return whole
    failed = [(i, t, s) for i, (t, s) in enumerate(parts, 1) if s.label != "supported"]
    i, text, score = failed[0]
    return whole.model_copy(
        update={
            "reason": (
                f"{whole.reason}; part {i} of {len(parts)} (“{_short(text)}”) is {score.label}: "
                f"{score.reason}"
            )
        }
    )

"""Pure helpers over the growing text: where the complete prefix ends, the claims of the
latest parse as units (complete or not), a sentence's one-claim answer."""

from __future__ import annotations

from citeguard.models import (
    Answer,
    Claim,
    Severity,
)

_INLINE_PARSE_CHARS = 4_000  # as Guard._parse: longer prefixes are parsed off the event loop
# markers that may still resolve, or a reference line that may still get its URL
_UNRESOLVED = frozenset({"unresolved_marker", "reference_without_url"})
_QUOTE_PAIRS = (("“", "”"), ("„", "“”"), ("«", "»"), ("「", "」"), ("『", "』"), ("‘", "’"))


_Key = tuple[int, int]
# one claim of the latest parse: its key, the claim, whether it is complete
_Unit = tuple[_Key, Claim, bool]


def _complete_prefix(text: str) -> int:
    """The length of the longest prefix whose every URL is complete: up to its last
    whitespace (a reference line's end included), ``)`` or ``>``."""
    for i in range(len(text) - 1, -1, -1):
        ch = text[i]
        if ch.isspace() or ch in ")>":
            return i + 1
    return 0


def _open_quote(text: str) -> int | None:
    """Where a quote opened on the last line of ``text`` and not closed yet begins (quotes
    never span lines, so earlier lines are settled); ``None`` when none is open."""
    line_start = text.rfind("\n") + 1
    line = text[line_start:]
    opened: list[int] = []
    straight = [i for i, ch in enumerate(line) if ch == '"']
    if len(straight) % 2:
        opened.append(straight[-1])
    for opener, closers in _QUOTE_PAIRS:
        i = line.rfind(opener)
        if i >= 0 and not any(c in line[i + 1 :] for c in closers):
            opened.append(i)
    return line_start + min(opened) if opened else None


def _units(parsed: Answer) -> list[_Unit]:
    """The claims of a prefix, each with whether it is complete (see the module docstring)."""
    text = parsed.text
    open_at = _open_quote(text)
    unresolved = {
        f.claim_index
        for f in parsed.findings
        if f.code in _UNRESOLVED and f.claim_index is not None
    }
    out: list[_Unit] = []
    last = len(parsed.claims) - 1
    for i, claim in enumerate(parsed.claims):
        complete = (
            i < last
            and claim.index not in unresolved
            and (open_at is None or claim.end <= open_at)
            and not _stray_bracket(parsed, claim)
        )
        out.append(((claim.start, claim.end), claim, complete))
    return out


def _stray_bracket(parsed: Answer, claim: Claim) -> bool:
    """A ``[`` in the claim outside its citation markers: a ``[word]`` that a reference
    definition later in the stream may still turn into a citation."""
    spans = [(parsed.citations[i].start, parsed.citations[i].end) for i in claim.citation_indices]
    pos = parsed.text.find("[", claim.start, claim.end)
    while pos >= 0:
        if not any(s <= pos < e for s, e in spans):
            return True
        pos = parsed.text.find("[", pos + 1, claim.end)
    return False


def _one_claim(parsed: Answer, claim: Claim) -> Answer:
    """``parsed`` cut down to one claim and its citations (offsets into the same text), so the
    pair ``check()`` builds for it is the same: same claim text, quote and evidence."""
    cits = [parsed.citations[i] for i in claim.citation_indices]
    urls = {c.url for c in cits}
    return Answer(
        text=parsed.text,
        claims=[claim.model_copy(update={"citation_indices": list(range(len(cits)))})],
        citations=[c.model_copy(update={"index": k}) for k, c in enumerate(cits)],
        findings=[
            f
            for f in parsed.findings
            if f.code != "unused_reference"
            and (f.claim_index == claim.index or (f.url is not None and f.url in urls))
        ],
    )


def _errors(answer: Answer) -> bool:
    return any(f.severity is Severity.ERROR for f in answer.findings)

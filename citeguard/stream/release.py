"""Release in order: ``hold`` releases a sentence (with the text before it) once its
citations pass and holds back the first failing one and all after it; ``annotate`` releases
every chunk as it arrives."""

from __future__ import annotations

import time

from citeguard.stream.events import (
    StreamHeld,
    StreamText,
)
from citeguard.stream.state import (
    _Sentence,
    _span_event,
    _StreamState,
)


class _Release(_StreamState):
    """Sentence release (``hold``/``annotate``) over the stream's state."""

    # ---------------------------------------------------------------- release (hold mode)

    def _release(self) -> None:
        """Release, in order, every complete sentence whose citations passed."""
        if self.mode != "hold" or self.stopped:
            return
        for key, claim, complete in self.units:
            if claim.end <= self.released_upto:
                continue
            sentence = self.sentences.get(key) if complete else None
            if sentence is None or sentence.passed is None or sentence.fresh_wait:
                return
            if not sentence.passed:
                self._hold(self.released_upto, claim.end, claim.index, sentence)
                return
            self._release_span(self.released_upto, claim.end, claim.index)

    def _release_span(self, start: int, end: int, claim_index: int | None) -> None:
        if end <= start:
            return
        now = time.perf_counter()
        held = 0.0 if self.mode == "annotate" else (now - self._arrived(end - 1)) * 1000.0
        text = self.text[start:end]
        self.released_parts.append(text)
        if self.mode == "hold":  # annotate releases chunks; its sentences are not a frontier
            self.released_upto = end
        if claim_index is not None:
            self.hold_ms.append(held)
        if self.mode == "hold":
            _span_event(
                self._span,
                "citeguard.stream.released",
                {"claim_index": claim_index, "start": start, "end": end, "hold_ms": held},
            )
        self.emit(
            StreamText(
                text=text,
                start=start,
                end=end,
                claim_index=claim_index,
                held_ms=round(held, 3),
                at_ms=self._ms(),
            )
        )

    def _hold(self, start: int, end: int, claim_index: int | None, s: _Sentence) -> None:
        self.stopped = True
        self.held_sentences += 1
        self._held_span(start, end, claim_index, s.reason or "a citation failed", s.failing)

    def _held_span(
        self, start: int, end: int, claim_index: int | None, reason: str, urls: list[str]
    ) -> None:
        if end <= start:
            return
        text = self.text[start:end]
        self.held_parts.append(text)
        self.released_upto = end  # consumed: neither part is revisited
        _span_event(
            self._span,
            "citeguard.stream.held",
            {"claim_index": claim_index, "start": start, "end": end, "reason": reason},
        )
        self.emit(
            StreamHeld(
                text=text,
                start=start,
                end=end,
                claim_index=claim_index,
                reason=reason,
                urls=urls,
                at_ms=self._ms(),
            )
        )

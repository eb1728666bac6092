"""What every benchmark shares: the run's size and seed (:class:`Config`), its resources
(:class:`Context`: the loopback web, the local entailer) and the guard's fixed clock and
question. The scenarios (:mod:`benchmarks.scenarios`) and the benchmark modules they run both
import it; it imports none of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from benchmarks.web import LoopbackWeb
from citeguard.checks.entail import Entailer, LocalEntailer, WordOverlapEntailer

Size = Literal["full", "quick", "smoke"]

# The questions are "lookup" questions whose freshness regime is insensitive, so the guard does
# not run htmldate's date fallback (a freshness-sensitive question adds ~3 ms a page of CPU).
QUESTION = "What do these pages say about their subjects?"
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)  # the guard's clock: verdicts do not drift


@dataclass(frozen=True)
class Config:
    """What to run and how big. ``repeat`` overrides every scenario's repetition count."""

    seed: int = 0
    size: Size = "full"
    repeat: int | None = None
    nli_model: str | None = None

    def reps(self, full: int, quick: int, smoke: int = 1) -> int:
        """Repetitions for this size (``repeat`` wins when given)."""
        if self.repeat is not None:
            return max(1, self.repeat)
        return {"full": full, "quick": quick, "smoke": smoke}[self.size]

    def pick(self, full: Any, quick: Any, smoke: Any) -> Any:
        """The value for this size."""
        return {"full": full, "quick": quick, "smoke": smoke}[self.size]


@dataclass
class Context:
    """Resources shared by the scenarios of one run: the loopback web and the local entailer
    (its model loads once; a Guard's ``aclose`` releases only its thread pool)."""

    seed: int
    _web: LoopbackWeb | None = None
    _local: LocalEntailer | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def web(self) -> LoopbackWeb:
        """The loopback web, started on first use."""
        if self._web is None:
            self._web = LoopbackWeb(self.seed)
        return self._web

    def entailer(self, name: str) -> Entailer | None:
        """``off`` → None; ``local`` → the shared LocalEntailer; ``word_overlap`` → a baseline."""
        if name == "off":
            return None
        if name == "local":
            if self._local is None:
                self._local = LocalEntailer()
            return self._local
        if name == "word_overlap":
            return WordOverlapEntailer()
        raise ValueError(f"unknown entailer {name!r}")

    async def aclose(self) -> None:
        """Stop the web and release the entailer's thread."""
        if self._local is not None:
            await self._local.aclose()
        if self._web is not None:
            self._web.close()
            self._web = None

"""citeguard's exceptions. Expected web outcomes are values (``CitationStatus``), not exceptions.

Hierarchy::

    CiteguardError
    ├── PolicyError            a bad Policy or argument, raised at construction (programmer error)
    ├── MissingExtraError      an optional extra is not installed; the message names it
    ├── EntailerError          an entailment backend cannot be built (e.g. unmappable labels)
    ├── SnapshotError          a snapshot store problem
    │   ├── SnapshotMiss       replay mode asked for something never recorded
    │   └── SnapshotCorrupt    the store cannot be read
    └── CitationRejected       opt-in raise mode: carries the whole GuardResult
"""

from __future__ import annotations

from typing import Any


class CiteguardError(Exception):
    """Root of every exception citeguard raises."""


class PolicyError(CiteguardError, ValueError):
    """A Policy or argument is invalid."""


class MissingExtraError(CiteguardError, ImportError):
    """An optional dependency is missing."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package} is not installed; install it with: pip install 'citeguard-agent[{extra}]'"
        )
        self.package = package
        self.extra = extra


class EntailerError(CiteguardError):
    """An entailment backend could not be built or used."""


class SnapshotError(CiteguardError):
    """A snapshot store problem."""


class SnapshotMiss(SnapshotError):
    """Replay mode asked for a key that was never recorded."""

    def __init__(self, layer: str, key: str) -> None:
        super().__init__(f"snapshot miss in replay mode: no recorded {layer} for {key!r}")
        self.layer = layer
        self.key = key


class SnapshotCorrupt(SnapshotError):
    """The store is corrupted or truncated."""


class CitationRejected(CiteguardError):
    """Raised in ``on_fail="raise"`` mode; ``result`` holds the whole GuardResult."""

    def __init__(self, message: str, result: Any) -> None:
        super().__init__(message)
        self.result = result

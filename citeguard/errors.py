"""citeguard's exceptions. Expected web outcomes are values (``CitationStatus``), not exceptions.

Hierarchy::

    CiteguardError
    ├── PolicyError            a bad Policy or argument, raised at construction (programmer error)
    │                          (also a ValueError; ``.errors`` holds pydantic's error details)
    ├── InputError             input citeguard cannot read: a logged verdict, a runnable's input
    │                          (also a ValueError)
    ├── UsageError             an argument or return value of the wrong kind (also a TypeError)
    ├── EventLoopError         a blocking call made inside a running event loop (also a
    │                          RuntimeError)
    ├── MissingExtraError      an optional extra is not installed; the message names it
    ├── EntailerError          an entailment backend cannot be built (e.g. unmappable labels)
    ├── JudgeError             an LLM judge gave no usable answer (callers fall back to the rules)
    ├── UrlProblem             a URL citeguard refuses to fetch (also a ValueError; defined in
    │                          :mod:`citeguard.web.urls`, turned into a ``CitationStatus``)
    ├── SnapshotError          a snapshot store problem
    │   ├── SnapshotMiss       replay mode asked for something never recorded
    │   └── SnapshotCorrupt    the store cannot be read
    └── CitationRejected       opt-in raise mode: carries the whole GuardResult
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class CiteguardError(Exception):
    """Root of every exception citeguard raises."""


class PolicyError(CiteguardError, ValueError):
    """A Policy or argument is invalid.

    When the problem was found by pydantic validation, ``errors`` holds its error details (one
    mapping per problem, with ``loc``, ``msg`` and ``type``); otherwise it is empty.
    """

    def __init__(self, message: str, errors: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__(message)
        self.errors: tuple[Mapping[str, Any], ...] = tuple(errors)


class InputError(CiteguardError, ValueError):
    """Input citeguard cannot read (a logged verdict that is not an object, a runnable's input
    without the question). Answers and pages never raise this: they end as statuses."""


class UsageError(CiteguardError, TypeError):
    """An argument, callable or return value of a kind citeguard cannot work with."""


class EventLoopError(CiteguardError, RuntimeError):
    """A blocking entry point was called inside a running event loop; use its async twin."""


# torch first, as its CPU build: sentence-transformers would otherwise pull a multi-GB CUDA build
_TORCH_FIRST = "pip install torch --index-url https://download.pytorch.org/whl/cpu && "


def install_hint(extra: str) -> str:
    """The complete install line for an extra (the ``local`` one installs CPU torch first)."""
    first = _TORCH_FIRST if extra == "local" else ""
    return f"{first}pip install 'citeguard-agent[{extra}]'"


class MissingExtraError(CiteguardError, ImportError):
    """An optional dependency is missing."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(f"{package} is not installed; install it with: {install_hint(extra)}")
        self.package = package
        self.extra = extra


class EntailerError(CiteguardError):
    """An entailment backend could not be built or used."""


class JudgeError(CiteguardError):
    """A judge call that gave no usable answer; callers fall back to the deterministic rules.

    ``str(error)`` is a sentence about the judge (``"judge returned HTTP 503"``); ``detail`` is the
    same problem without the subject (``"HTTP 503"``), for messages that name the judge already.
    ``retryable`` says whether another try may help (429, 5xx, connection trouble, timeouts,
    malformed replies); ``retry_after`` is the server's ``Retry-After`` in seconds, if it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        detail: str | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.detail = detail if detail is not None else message
        self.retryable = retryable
        self.retry_after = retry_after


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

"""What a run's exclusions stand for: exclusion is context on an attempt, not a citation status.

A guarded run excludes, in each new attempt, the offending URLs of the attempts before it. An
excluded URL the answer cites again is not fetched again, and it keeps the status and reason of
its failure (a 404 stays ``not_found``, with its reason and HTTP status; the report says
``excluded``), in the verdict returned and in what counts it (serve's ``/metrics``). Only a URL
the caller excluded (``exclude_urls`` it passed) is ``excluded_by_policy``. A URL excluded for
what one of its claims said (no claim it backs passed) or for another axis (freshness,
diversity) is checked again on its merits when cited again: the new answer's claims are new.

The failures of one run live in a :class:`contextvars.ContextVar` (as the run's searches do,
:mod:`citeguard.recording`): each run sees its own, and a replayed run the same ones in the
same order, so replays stay byte-identical.
"""

from __future__ import annotations

import contextvars
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pydantic import ValidationError

from citeguard.models import CitationReport, Verdict
from citeguard.web.urls import normalize_all

__all__ = [
    "Failures",
    "carried_failures",
    "current_failures",
    "excluded_for",
    "exclusion_run",
    "logged_failures",
    "remember",
    "remember_failures",
    "split_excluded",
]

# normalised URL → the report of its failure (a failure of the URL itself: carried to later
# attempts), or None (excluded for a claim's failure or another axis: checked again)
Failures = dict[str, CitationReport | None]

_RUN_FAILURES: contextvars.ContextVar[Failures | None] = contextvars.ContextVar(
    "citeguard_run_failures", default=None
)


@contextmanager
def exclusion_run(failures: Failures | None = None) -> Iterator[Failures]:
    """Remember, inside this block (one guarded run), why each excluded URL was excluded: in
    ``failures`` when given (a run whose attempts do not share one context: serve's streams),
    else in a new record."""
    run: Failures = {} if failures is None else failures
    token = _RUN_FAILURES.set(run)
    try:
        yield run
    finally:
        _RUN_FAILURES.reset(token)


def current_failures() -> Failures | None:
    """The current run's record (None outside a run)."""
    return _RUN_FAILURES.get()


def carried_failures(
    excluded: frozenset[str],
) -> tuple[frozenset[str], Mapping[str, CitationReport]]:
    """:func:`split_excluded` over the current run's record."""
    return split_excluded(excluded, _RUN_FAILURES.get())


def split_excluded(
    excluded: frozenset[str], failures: Failures | None
) -> tuple[frozenset[str], Mapping[str, CitationReport]]:
    """(the URLs to leave unfetched, the earlier failure of each one the run excluded) for the
    normalised ``excluded`` URLs of an attempt: a URL this run excluded for a claim's failure
    or another axis is checked again (left out of the first); the rest are the caller's."""
    if not failures or not excluded:
        return excluded, {}
    skip = frozenset(u for u in excluded if u not in failures or failures[u] is not None)
    return skip, {u: r for u in skip if (r := failures.get(u)) is not None}


def excluded_for(urls: Collection[str], failures: Failures) -> frozenset[str]:
    """Which of a failed attempt's ``urls`` the next attempt excludes: all but those the record
    says failed for a claim only (the page may back the next answer's claims)."""
    out: set[str] = set()
    for u in urls:
        key = next(iter(normalize_all([u])), u)
        if key not in failures or failures[key] is not None:
            out.add(u)
    return frozenset(out)


def logged_failures(citations: Any, excluded: Collection[str]) -> Failures:
    """The record a logged attempt was checked with, read back from its verdict's citations
    (JSON): an ``excluded`` URL reported with its own earlier failure keeps it; one checked
    again stays checked; the rest were the caller's (``citeguard rescore``)."""
    keys = normalize_all(excluded)
    out: Failures = {}
    for c in citations if isinstance(citations, list) else []:
        if not isinstance(c, Mapping):
            continue
        key = c.get("normalized_url") or c.get("url")
        if not isinstance(key, str) or key not in keys:
            continue
        if not c.get("excluded"):
            out.setdefault(key, None)
        elif c.get("failure") == "url":
            try:
                out[key] = CitationReport.model_validate(c)
            except ValidationError:
                continue
    return out


def remember_failures(verdict: Verdict) -> None:
    """Note why each of ``verdict``'s offending URLs fails, for the run's later attempts (a
    no-op outside a run)."""
    remember(_RUN_FAILURES.get(), verdict.citations, verdict.offending_urls)


def remember(
    failures: Failures | None,
    citations: Sequence[CitationReport],
    offending_urls: Collection[str],
) -> None:
    """Note in ``failures`` why each offending URL of these ``citations`` fails (nothing when
    ``failures`` is None)."""
    if failures is None or not offending_urls:
        return
    offending = set(offending_urls) | normalize_all(offending_urls)
    for c in citations:
        key = c.normalized_url or c.url
        if key not in offending and c.url not in offending:
            continue
        if c.failure == "url":
            if failures.get(key) is None:
                failures[key] = c
        else:
            failures.setdefault(key, None)

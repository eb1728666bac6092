"""The Guard's step between parsing a provider answer and fetching its citations.

:func:`resolve_answer` is the one call :meth:`citeguard.Guard.check` makes into the providers:

* the searches given to ``check(searches=...)`` become :class:`SearchRecord` rows whatever their
  shape (:func:`~citeguard.search.as_search_record`), and the searches the provider response
  reports (``Answer.searches``) join them, their dates read against the Guard's clock;
* citations marked ``provider_redirect`` (Gemini's ``grounding-api-redirect`` links) are
  resolved: one GET per redirect URL that reads its ``Location`` without following it, through
  citeguard's own :class:`~citeguard.web.fetch.Fetcher` with the Guard's fetch policy (address
  safety, timeouts, retries) at ``max_redirects=0`` and its resolver, recorded and replayed by
  the Guard's snapshot store like every other fetch. The target becomes the cited URL (the
  redirect is kept in ``Citation.via``), so it is the target that is fetched, checked and
  counted for diversity, and search rows that named the redirect name the target too. A
  redirect that cannot be resolved is left as it is (the regular fetch then reports what it
  finds), with a ``provider_redirect_unresolved`` warning.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple
from urllib.parse import urljoin

from citeguard.models import (
    Answer,
    Citation,
    CitationStatus,
    FetchResult,
    Finding,
    SearchRecord,
    Severity,
)
from citeguard.policy import FetchPolicy
from citeguard.providers.base import strip_tracking
from citeguard.search import as_search_record, normalize_search_results
from citeguard.snapshot import SnapshotFetcher, SnapshotMode, SnapshotStore
from citeguard.web.fetch import Fetcher, Resolver
from citeguard.web.urls import UrlProblem, normalize_url

__all__ = ["Resolution", "resolve_answer", "resolve_redirects"]

_REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})


class Resolution(NamedTuple):
    """Where a provider redirect points (``target`` None: unresolved, ``reason`` says why)."""

    target: str | None
    reason: str


def _target(url: str, result: FetchResult) -> Resolution:
    location = result.headers.get("location")
    if location and result.http_status in _REDIRECT_CODES:
        return Resolution(urljoin(url, location.strip()), f"HTTP {result.http_status} redirect")
    if result.redirects:
        return Resolution(result.redirects[0], result.reason)
    if result.status.is_ok():
        return Resolution(None, f"answered HTTP {result.http_status} without redirecting")
    return Resolution(None, result.reason)


async def resolve_redirects(
    urls: Sequence[str],
    *,
    policy: FetchPolicy,
    resolver: Resolver | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    store: SnapshotStore | None = None,
    mode: SnapshotMode | str = SnapshotMode.LIVE,
) -> dict[str, Resolution]:
    """Each redirect URL's target, read from its ``Location`` without following it (see the
    module docstring); all within ``policy.url_timeout``."""
    if not urls:
        return {}
    once = policy.replace(max_redirects=0)

    def factory() -> Fetcher:
        return Fetcher(once, resolver=resolver, sleep=sleep)

    fetcher: Fetcher | SnapshotFetcher = (
        factory() if store is None else SnapshotFetcher(factory, store, mode)
    )
    try:
        fetched = await fetcher.fetch_all(list(urls), want_body=True, deadline=policy.url_timeout)
    finally:
        await fetcher.aclose()
    return {u: _target(u, r) for u, r in fetched.items()}


def _resolved(
    c: Citation, res: Resolution, allowed: frozenset[str], findings: list[Finding]
) -> Citation:
    if res.target is None:
        if any(f.url == c.url and f.code == "provider_redirect_unresolved" for f in findings):
            return c
        findings.append(
            Finding(
                code="provider_redirect_unresolved",
                message=f"provider redirect {c.url!r} could not be resolved: {res.reason}",
                severity=Severity.WARNING,
                axis="validity",
                url=c.url,
                claim_index=c.claim_index,
            )
        )
        return c
    normalized: str | None
    try:
        normalized = normalize_url(strip_tracking(res.target), allowed_schemes=allowed)
    except UrlProblem as exc:
        normalized = None
        blocked = exc.status is CitationStatus.BLOCKED_SCHEME
        known = ("blocked_scheme", "malformed_url")
        if not any(f.url == res.target and f.code in known for f in findings):
            findings.append(
                Finding(
                    code="blocked_scheme" if blocked else "malformed_url",
                    message=f"provider redirect {c.url!r} points at {res.target!r}: {exc.reason}",
                    axis="validity",
                    url=res.target,
                    claim_index=c.claim_index,
                    details={"status": exc.status.value, "via": c.url},
                )
            )
    return c.model_copy(update={"url": res.target, "normalized_url": normalized, "via": c.url})


def _retarget(record: SearchRecord, targets: dict[str, Resolution]) -> SearchRecord:
    if not any(r.url in targets and targets[r.url].target for r in record.results):
        return record
    rows = []
    for r in record.results:
        target = targets[r.url].target if r.url in targets else None
        if target is None:
            rows.append(r)
            continue
        again = normalize_search_results([{"url": target, "title": r.title, "snippet": r.snippet}])
        rows.append(
            again[0].model_copy(update={"rank": r.rank, "published": r.published})
            if again
            else r.model_copy(update={"url": target})
        )
    return record.model_copy(update={"results": rows})


def _dated(record: SearchRecord, now: datetime | None) -> SearchRecord:
    """A provider-reported search with its rows re-read against the Guard's clock (ages such as
    "3 days ago" need it)."""
    if now is None or record.raw is None:
        return record
    rows = normalize_search_results(record.raw, now=now)
    if len(rows) != len(record.results):
        return record
    return record.model_copy(update={"results": rows})


async def resolve_answer(
    answer: Answer,
    searches: Sequence[Any],
    *,
    policy: FetchPolicy,
    resolver: Resolver | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    store: SnapshotStore | None = None,
    mode: SnapshotMode | str = SnapshotMode.LIVE,
    now: datetime | None = None,
) -> tuple[Answer, list[SearchRecord]]:
    """The answer with its provider redirects resolved, and the run's searches as records with
    the answer's own searches added (see the module docstring)."""
    records = [as_search_record(s, now=now) for s in searches]
    records += [_dated(r, now) for r in answer.searches]
    pending = list(
        dict.fromkeys(c.url for c in answer.citations if c.provider_redirect and c.via is None)
    )
    if not pending:
        return answer, records
    targets = await resolve_redirects(
        pending, policy=policy, resolver=resolver, sleep=sleep, store=store, mode=mode
    )
    findings = list(answer.findings)
    citations = [
        _resolved(c, targets[c.url], policy.allowed_schemes, findings)
        if c.provider_redirect and c.via is None and c.url in targets
        else c
        for c in answer.citations
    ]
    resolved = answer.model_copy(update={"citations": citations, "findings": findings})
    return resolved, [_retarget(r, targets) for r in records]

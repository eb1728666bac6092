"""One hop: the outcome of one HTTP request (and :class:`_Progress`, what one URL's fetch has
learned over its hops), ``Retry-After``, and how a status code or a raised
error becomes a :class:`~citeguard.models.CitationStatus` with its reason."""

from __future__ import annotations

import email.utils
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import aiohttp

from citeguard.models import CitationStatus, FetchResult
from citeguard.web.botwall import bot_wall_response
from citeguard.web.fetch.resolve import _BlockedAddress

# --------------------------------------------------------------------------------------------
# One hop
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Hop:
    """The outcome of one HTTP request (one attempt at one hop)."""

    status: CitationStatus | None  # None: a redirect to follow
    reason: str
    method: Literal["HEAD", "GET", "NONE"] = "NONE"
    http_status: int | None = None
    headers: Mapping[str, str] | None = None  # None until a response came
    content_type: str | None = None
    location: str | None = None
    body: bytes | None = None
    truncated: bool = False
    transient: bool = False
    retry_after: float | None = None
    cookies: Mapping[str, str] | None = None


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delay-seconds or an HTTP date).

    ``None`` when the header is absent or unreadable; a date in the past gives ``0.0``. Shared
    by the fetcher and the judge client (:mod:`citeguard.checks.judge`).
    """
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _classify(code: int, phrase: str, headers: Mapping[str, str]) -> tuple[CitationStatus, str]:
    label = f"HTTP {code} {phrase}".strip()
    wall = bot_wall_response(code, headers)
    if wall is not None:
        return CitationStatus.BOT_WALL, wall
    if 200 <= code < 300:
        return CitationStatus.OK, label
    if code == 404:
        return CitationStatus.NOT_FOUND, f"{label}: the page does not exist"
    if code == 410:
        return CitationStatus.GONE, f"{label}: the page was removed"
    if code == 429:
        return CitationStatus.RATE_LIMITED, f"{label}: the site is rate-limiting requests"
    if 300 <= code < 400:
        return CitationStatus.HTTP_ERROR, f"{label} without a usable Location header"
    return CitationStatus.HTTP_ERROR, label


def _error_hop(exc: BaseException, method: Literal["HEAD", "GET"]) -> _Hop:
    """Translate a client-side exception into a hop outcome (the one place aiohttp errors map)."""
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        inner = exc.os_error
        if isinstance(inner, _BlockedAddress):
            return _Hop(CitationStatus.BLOCKED_ADDRESS, inner.reason, method)
        return _Hop(CitationStatus.UNREACHABLE, f"DNS lookup failed: {inner}", method)
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return _Hop(CitationStatus.TLS_ERROR, f"TLS certificate error: {exc.certificate_error}")
    if isinstance(exc, aiohttp.ClientSSLError | ssl.SSLError) or isinstance(
        getattr(exc, "os_error", None), ssl.SSLError
    ):
        return _Hop(CitationStatus.TLS_ERROR, f"TLS error: {exc}", method)
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return _Hop(CitationStatus.TIMEOUT, f"timed out: {exc}", method)
    if isinstance(exc, aiohttp.ClientConnectorError):
        inner = exc.os_error
        if isinstance(inner, ConnectionResetError):
            return _Hop(CitationStatus.CONNECTION_ERROR, f"connection reset: {exc}", transient=True)
        return _Hop(CitationStatus.UNREACHABLE, f"cannot connect: {exc.strerror or exc}", method)
    if isinstance(
        exc,
        aiohttp.ServerDisconnectedError
        | aiohttp.ClientPayloadError
        | aiohttp.ClientOSError
        | ConnectionResetError,
    ):
        return _Hop(
            CitationStatus.CONNECTION_ERROR,
            f"connection dropped: {type(exc).__name__}: {exc}",
            method,
            transient=True,
        )
    if isinstance(exc, aiohttp.InvalidURL | ValueError):
        return _Hop(CitationStatus.MALFORMED_URL, f"invalid URL: {exc}", method)
    if isinstance(exc, aiohttp.ClientResponseError):
        return _Hop(CitationStatus.CONNECTION_ERROR, f"invalid HTTP response: {exc.message}")
    return _Hop(CitationStatus.CONNECTION_ERROR, f"{type(exc).__name__}: {exc}", method)


@dataclass(slots=True)
class _Progress:
    """What one URL's fetch has learned so far (for the result, whatever ends it).

    ``redirects`` and ``headers`` start as empty tuples/None, not new containers: thousands of
    fetches may wait at once, and each object they hold is one more for the GC to walk."""

    url: str
    clock: Callable[[], float]
    start: float
    final_url: str | None = None
    redirects: list[str] | None = None
    method: Literal["HEAD", "GET", "NONE"] = "NONE"
    http_status: int | None = None
    headers: Mapping[str, str] | None = None
    content_type: str | None = None
    attempts: int = 1
    via_resolver: str | None = None

    def redirected(self, target: str) -> int:
        """Record a redirect to ``target``; returns how many there have been."""
        if self.redirects is None:
            self.redirects = []
        self.redirects.append(target)
        return len(self.redirects)

    def absorb(self, hop: _Hop) -> None:
        self.method = hop.method
        if hop.http_status is not None:
            self.http_status = hop.http_status
            self.headers = hop.headers
            self.content_type = hop.content_type

    def result(
        self,
        status: CitationStatus,
        reason: str,
        *,
        body: bytes | None = None,
        truncated: bool = False,
    ) -> FetchResult:
        return FetchResult(
            url=self.url,
            final_url=self.final_url,
            status=status,
            reason=reason,
            http_status=self.http_status,
            method=self.method,
            redirects=list(self.redirects or ()),
            headers=dict(self.headers or ()),
            content_type=self.content_type,
            body=body,
            truncated=truncated,
            attempts=self.attempts,
            elapsed_ms=(self.clock() - self.start) * 1000,
            fetched_at=datetime.now(UTC),
            via_resolver=self.via_resolver,
        )

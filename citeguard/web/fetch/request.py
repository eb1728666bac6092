"""One request and its retries: HEAD or GET (a refused HEAD falls back to GET), transient
failures retried by tenacity with backoff and ``Retry-After`` within the deadline, the per-host
lease, and the response read: status, headers, a redirect's target, and a body streamed under its
raw and decompressed caps. Mixed into :class:`~citeguard.web.fetch.fetcher.Fetcher`."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Awaitable, Callable, Mapping
from http.cookies import SimpleCookie
from typing import Literal

import aiohttp
from tenacity import AsyncRetrying, RetryCallState, retry_if_result
from yarl import URL

from citeguard.models import CitationStatus
from citeguard.policy import FetchPolicy
from citeguard.web.fetch.body import _Corrupt, _Decoder, _TooLarge, _Unsupported
from citeguard.web.fetch.hop import _classify, _error_hop, _Hop, _Progress, parse_retry_after
from citeguard.web.fetch.pacing import _StartPacer
from citeguard.web.limits import HostLimiter

_REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
_TRANSIENT_CODES = frozenset({429, 502, 503, 504})
# A refused HEAD is retried as GET only for these errors; a timeout or TLS failure would repeat.
_HEAD_FALLBACK_ERRORS = frozenset({CitationStatus.CONNECTION_ERROR})
# Bodies of non-2xx / redirect responses are drained (so the connection can be reused) only when
# they are this small; bigger ones are dropped with their connection.
_DRAIN_LIMIT = 64 * 1024
_CHUNK = 64 * 1024
_SMALL_BODY = 256 * 1024  # announced bodies up to this size are read in one call

# Response headers that are not worth keeping in a result (privacy, size).
_DROP_HEADERS = frozenset({"set-cookie"})


class _Requests:
    """The Fetcher's requests (see the module docstring); the Fetcher provides these."""

    policy: FetchPolicy
    _sleep: Callable[[float], Awaitable[None]]
    _clock: Callable[[], float]
    _pacer: _StartPacer | None
    _limiter: HostLimiter | None
    _get_session: Callable[[], aiohttp.ClientSession]

    # ---- retries ---------------------------------------------------------------------------

    async def _attempt(
        self,
        url: URL,
        use_head: bool,
        want_body: bool,
        cookies: Mapping[str, str],
        end: float,
        retry: bool = False,
    ) -> tuple[_Hop, bool]:
        """One attempt at one hop: HEAD (GET again when HEAD is refused) or GET. Returns the hop
        and whether a later attempt may still start with HEAD. ``retry``: the attempt follows
        a wait of its own (a host's pause is for the other requests)."""
        if use_head:
            hop = await self._request(url, "HEAD", want_body, cookies, end, retry)
            code = hop.http_status
            refused = code is not None and not (200 <= code < 300 or hop.status is None)
            if not refused and hop.status not in _HEAD_FALLBACK_ERRORS:
                return hop, True
            # Some servers refuse or mishandle HEAD: ask again with GET.
            if hop.transient:
                return hop, False  # the retry loop waits (Retry-After, backoff) before the GET
        return await self._request(url, "GET", want_body, cookies, end, retry), False

    async def _retried(
        self,
        hop: _Hop,
        use_head: bool,
        url: URL,
        want_body: bool,
        end: float,
        cookies: Mapping[str, str],
        st: _Progress,
    ) -> _Hop:
        """A transient first outcome, retried (it is tenacity's attempt 1); the reason says how
        many attempts were made and why they stopped early, if they did."""
        attempts, note = 1, None
        if self.policy.retries > 0:
            hop, attempts, note = await self._retry(hop, use_head, url, want_body, end, cookies)
        st.attempts = attempts
        if hop.transient and hop.status is not None:
            tried = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
            hop.reason = f"{hop.reason} ({tried}{'; ' + note if note else ''})"
        return hop

    async def _retry(
        self,
        first: _Hop,
        use_head: bool,
        url: URL,
        want_body: bool,
        end: float,
        cookies: Mapping[str, str],
    ) -> tuple[_Hop, int, str | None]:
        """Retry a transient first outcome under tenacity; (last hop, attempts, why it stopped
        early, if it did)."""
        policy = self.policy
        note: list[str] = []
        attempts = 1
        pending = [first]

        async def attempt() -> _Hop:
            nonlocal use_head, attempts
            if pending:
                return pending.pop()  # attempt 1 was made already
            attempts += 1
            hop, use_head = await self._attempt(url, use_head, want_body, cookies, end, True)
            return hop

        def wait(rs: RetryCallState) -> float:
            hop: _Hop = rs.outcome.result()  # type: ignore[union-attr]
            if hop.retry_after is not None:
                return hop.retry_after
            return float(policy.retry_backoff * (2 ** (rs.attempt_number - 1)))

        def stop(rs: RetryCallState) -> bool:
            if rs.attempt_number > policy.retries:
                return True
            hop: _Hop = rs.outcome.result()  # type: ignore[union-attr]
            delay = rs.upcoming_sleep
            if hop.retry_after is not None and hop.retry_after > policy.retry_after_cap:
                note.append(
                    f"server asked to retry after {hop.retry_after:.0f} s, "
                    f"more than the {policy.retry_after_cap:g} s cap"
                )
                return True
            if self._clock() + delay >= end:
                note.append(f"a retry in {delay:.2f} s would pass the deadline")
                return True
            return False

        def give_up(rs: RetryCallState) -> _Hop:
            return rs.outcome.result()  # type: ignore[union-attr,no-any-return]

        retrying = AsyncRetrying(
            sleep=self._sleep,
            stop=stop,
            wait=wait,
            retry=retry_if_result(lambda h: bool(h.transient)),
            retry_error_callback=give_up,
        )
        hop: _Hop = await retrying(attempt)
        return hop, attempts, (note[-1] if note else None)

    # ---- one request -----------------------------------------------------------------------

    async def _request(
        self,
        u: URL,
        method: Literal["HEAD", "GET"],
        want_body: bool,
        cookies: Mapping[str, str],
        end: float,
        retry: bool = False,
    ) -> _Hop:
        session = self._get_session()
        headers = None
        if cookies:
            headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())}
        limiter = self._limiter
        assert limiter is not None
        host = f"{u.raw_host}:{u.port}"
        lease = await limiter.acquire(host, end - self._clock(), honour_pause=not retry)
        if lease is None:
            return _Hop(
                CitationStatus.RATE_LIMITED,
                f"{u.raw_host} asked clients to wait {limiter.pause_left(host):.0f} s more "
                "(429 / Retry-After), past this URL's deadline; not asked again",
                method,
            )
        try:
            pacer = self._pacer
            assert pacer is not None
            if not pacer.ready():
                await pacer.turn()
            async with session.request(method, u, headers=headers, allow_redirects=False) as resp:
                hop = await self._read_response(resp, method, want_body)
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            hop = _error_hop(exc, method)
        finally:
            limiter.release(lease)
        if hop.transient and (hop.http_status == 429 or hop.retry_after is not None):
            # every request to this host (every replica, with a shared limiter) waits too
            pause = hop.retry_after if hop.retry_after is not None else self.policy.retry_backoff
            limiter.slow_down(host, pause)
        return hop

    async def _read_response(
        self, resp: aiohttp.ClientResponse, method: Literal["HEAD", "GET"], want_body: bool
    ) -> _Hop:
        code = resp.status
        raw_headers = resp.headers
        headers: dict[str, str] = {}
        for name, value in raw_headers.items():
            key = name.lower()
            if key in _DROP_HEADERS:
                continue
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        cookies: Mapping[str, str] | None = None
        if "Set-Cookie" in raw_headers:
            jar: SimpleCookie = SimpleCookie()
            for line in raw_headers.getall("Set-Cookie"):
                with contextlib.suppress(Exception):
                    jar.load(line)
            cookies = {k: m.value for k, m in jar.items()}
        hop = _Hop(
            status=None,
            reason="",
            method=method,
            http_status=code,
            headers=headers,
            content_type=headers.get("content-type"),
            cookies=cookies,
        )
        location = raw_headers.get("Location")
        if code in _REDIRECT_CODES and location:
            hop.location = location
            hop.reason = f"HTTP {code} redirect"
            await self._drain(resp)
            return hop
        hop.status, hop.reason = _classify(code, resp.reason or "", headers)
        if code in _TRANSIENT_CODES and hop.status is not CitationStatus.BOT_WALL:
            hop.transient = True
            hop.retry_after = parse_retry_after(raw_headers.get("Retry-After"))
        if method == "GET" and want_body and hop.status is CitationStatus.OK:
            await self._read_body(resp, hop)
        else:
            await self._drain(resp)
        return hop

    async def _drain(self, resp: aiohttp.ClientResponse) -> None:
        """Read a small leftover body so the connection can go back to the pool."""
        length = resp.content_length
        if resp.method == "HEAD" or (length is not None and length <= _DRAIN_LIMIT):
            with contextlib.suppress(aiohttp.ClientError, OSError):
                await resp.read()

    async def _read_body(self, resp: aiohttp.ClientResponse, hop: _Hop) -> None:
        p = self.policy
        length = resp.content_length
        if length is not None and length > p.max_body_bytes:
            hop.status = CitationStatus.TOO_LARGE
            hop.reason = f"body of {length} bytes exceeds the {p.max_body_bytes}-byte cap"
            hop.truncated = True
            return
        encoding = resp.headers.get("Content-Encoding", "").strip().lower()
        try:
            decoder = _Decoder(encoding, p.max_decompressed_bytes)
        except _Unsupported as exc:
            hop.status = CitationStatus.UNSUPPORTED_TYPE
            hop.reason = str(exc)
            return
        chunks: list[bytes] = []
        raw = 0
        try:
            if length is not None and length <= _SMALL_BODY:
                # Small and announced: one read (the parser stops at Content-Length), then
                # decode with the same decompressed-size cap.
                hop.body = decoder.feed(await resp.read())
                return
            async for chunk in resp.content.iter_chunked(_CHUNK):
                raw += len(chunk)
                if raw > p.max_body_bytes:
                    raise _TooLarge(f"body exceeds the {p.max_body_bytes}-byte cap")
                out = decoder.feed(chunk)
                if out:
                    chunks.append(out)
        except _TooLarge as exc:
            # Stop reading now; leaving the block closes the connection instead of draining it.
            hop.status = CitationStatus.TOO_LARGE
            hop.reason = exc.reason
            hop.truncated = True
            resp.close()
            return
        except (zlib.error, _Corrupt) as exc:
            hop.status = CitationStatus.CONNECTION_ERROR
            hop.reason = f"corrupt {encoding} body: {exc}"
            return
        hop.body = b"".join(chunks)

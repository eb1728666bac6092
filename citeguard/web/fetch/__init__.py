"""The fetcher: every cited URL of an answer, concurrently, safely, with one outcome each.

One :class:`Fetcher` owns one aiohttp ``ClientSession`` (created lazily inside the running loop)
and answers :meth:`Fetcher.fetch` / :meth:`Fetcher.fetch_all` with :class:`FetchResult` values.
Web outcomes are never raised: a 404, a timeout or a blocked address is a ``CitationStatus``.

How one URL is fetched:

1. The URL is normalised (:func:`citeguard.web.urls.normalize_url`); a malformed URL or a blocked
   scheme ends here.
2. A per-Fetcher TTL cache and in-flight de-duplication answer repeats (the same URL cited twice is
   fetched once).
3. At every hop the fetcher resolves the host itself through its :class:`Resolver`, refuses
   loopback/private/link-local/metadata addresses (unless the policy allows them), and hands the
   checked addresses to aiohttp through a pinned connector resolver, so the connection goes to the
   address that was checked (no DNS-rebinding gap). Host header and SNI keep the original name.
4. ``want_body=False`` sends HEAD first and falls back to GET when HEAD is refused;
   ``want_body=True`` sends one GET whose body serves every later check.
5. Redirects are followed by hand: ``Location`` is resolved as a browser resolves it (WHATWG,
   :func:`citeguard.web.urls.join_url`); a hop to another registrable domain fails without being
   fetched, as do loops, too many hops, malformed targets and hops to blocked schemes or addresses.
6. Transient failures (reset, 429, 502, 503, 504) are retried by tenacity with exponential backoff,
   honouring ``Retry-After`` up to ``policy.retry_after_cap`` and never past the deadline.
   Every request first takes a lease from the per-host limiter (:mod:`citeguard.web.limits`:
   concurrency, rate, pauses; shared across replicas with ``limits_redis``), and a 429 or a
   ``Retry-After`` pauses the host for every other request to it.
   Requests then start at most a few per turn of the event loop once many are waiting
   (:class:`_StartPacer`), so the loop keeps serving the ones already under way.
7. Bodies are streamed under a raw-size cap and a decompressed-size cap (decompression is done here,
   incrementally, so a gzip bomb never grows memory past the cap).

The package holds one room per part: :mod:`~citeguard.web.fetch.fetcher` (the :class:`Fetcher`:
cache, in-flight de-duplication, address checks, redirects), :mod:`~citeguard.web.fetch.request`
(HEAD/GET, retries, the response and its body streamed under the caps),
:mod:`~citeguard.web.fetch.resolve` (resolvers, step 3's look-ups), :mod:`~citeguard.web.fetch.hop`
(one request's outcome, ``Retry-After``, status codes and errors as statuses),
:mod:`~citeguard.web.fetch.body` (step 7's decoding under its cap) and
:mod:`~citeguard.web.fetch.pacing` (request starts per turn, shared deadline timers).
"""

from __future__ import annotations

from citeguard.web.fetch.fetcher import Fetcher
from citeguard.web.fetch.hop import parse_retry_after
from citeguard.web.fetch.pacing import _StartPacer as _StartPacer
from citeguard.web.fetch.resolve import Resolver, StaticResolver, SystemResolver
from citeguard.web.fetch.resolve import fewer_than as fewer_than

__all__ = [
    "Fetcher",
    "Resolver",
    "StaticResolver",
    "SystemResolver",
    "parse_retry_after",
]

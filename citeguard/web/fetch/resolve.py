"""Resolvers: host names to the addresses the fetcher may connect to (a fixed table, or the
system's resolver paced a few look-ups a turn), and :func:`fewer_than`, the window big answers
keep their fetches in."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar, runtime_checkable

import aiohttp
from aiohttp.abc import AbstractResolver

from citeguard.errors import PolicyError
from citeguard.web.fetch.pacing import _StartPacer
from citeguard.web.urls import (
    parse_ip_literal,
)

_DNS_CACHE_SIZE = 4096

# look-ups SystemResolver hands to the resolver in one turn, after a first burst (each c-ares
# call ~0.1 ms on the loop thread: 2,000 unknown hosts asked in one turn held it 20-180 ms)
_LOOKUPS_IN_BURST = 8
_LOOKUPS_PER_TURN = 4


# --------------------------------------------------------------------------------------------
# Resolvers
# --------------------------------------------------------------------------------------------


@runtime_checkable
class Resolver(Protocol):
    """Maps a host name to IP address strings; raises ``socket.gaierror`` (OSError) on NXDOMAIN.

    An entry may also be ``"ADDR:PORT"`` / ``"[V6]:PORT"`` to connect to another port (see
    :class:`StaticResolver`).
    """

    async def resolve(self, host: str, port: int) -> list[str]:
        """Return the IP addresses of ``host`` (as strings), or raise OSError."""
        ...


def _split_address(entry: str) -> tuple[str, int | None]:
    """``"1.2.3.4"``, ``"1.2.3.4:8080"``, ``"::1"`` or ``"[::1]:8080"`` → (address, port or None).

    Raises PolicyError when the address part is not an IP address or the port is invalid.
    """
    text = entry.strip()
    port: str | None = None
    if text.startswith("["):
        addr, _, rest = text[1:].partition("]")
        if rest:
            if not rest.startswith(":"):
                raise PolicyError(f"{entry!r} is not ADDR or ADDR:PORT")
            port = rest[1:]
    elif text.count(":") == 1:
        addr, port = text.split(":")
    else:
        addr = text
    ip = parse_ip_literal(addr) if addr else None
    if ip is None or (ip.version == 4 and addr.count(".") != 3):
        raise PolicyError(f"{entry!r} is not an IP address (ADDR or ADDR:PORT)")
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        raise PolicyError(f"{entry!r} has an invalid port")
    return str(ip), (int(port) if port is not None else None)


def _join_address(addr: str, port: int | None) -> str:
    if port is None:
        return addr
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


class StaticResolver:
    """A fixed host → address map, like ``curl --resolve``.

    ``StaticResolver({"news.example.com": "127.0.0.1"})`` sends ``news.example.com`` to 127.0.0.1
    while the registrable-domain and address-safety logic still see the real name. An address may
    carry a port (``"127.0.0.1:8080"``, ``"[::1]:8080"``): connections then go to that port
    whatever the URL says (like ``curl --connect-to``), so ``http://news.example.com/`` can be
    served by a local test server. Unmapped hosts go to ``fallback`` or fail as NXDOMAIN.
    """

    def __init__(
        self, mapping: Mapping[str, str | Sequence[str]], fallback: Resolver | None = None
    ) -> None:
        table: dict[str, list[str]] = {}
        for host, addresses in mapping.items():
            entries = [addresses] if isinstance(addresses, str) else list(addresses)
            if not entries:
                raise PolicyError(f"StaticResolver: no address for {host!r}")
            try:
                parsed = [_split_address(a) for a in entries]
            except ValueError as exc:
                raise PolicyError(f"StaticResolver: {host!r}: {exc}") from None
            table[host.strip().lower().rstrip(".")] = [_join_address(a, p) for a, p in parsed]
        self._table = table
        self._fallback = fallback

    @property
    def hosts(self) -> frozenset[str]:
        """The host names this resolver maps."""
        return frozenset(self._table)

    async def resolve(self, host: str, port: int) -> list[str]:
        """Return the mapped addresses, else ask the fallback, else raise NXDOMAIN."""
        addrs = self._table.get(host.lower().rstrip("."))
        if addrs is not None:
            return list(addrs)
        if self._fallback is not None:
            return await self._fallback.resolve(host, port)
        raise socket.gaierror(socket.EAI_NONAME, f"{host}: name not known (not in StaticResolver)")


class SystemResolver:
    """The system's DNS (aiohttp's default resolver: aiodns when installed, else getaddrinfo in a
    thread), with a TTL cache and concurrent look-ups of one host merged into one."""

    def __init__(
        self,
        *,
        ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        inner: AbstractResolver | None = None,
    ) -> None:
        """``inner``: the aiohttp resolver to ask (default: ``aiohttp.DefaultResolver()``, made
        in the loop that first asks, and closed by :meth:`aclose`; one given is not closed)."""
        self._ttl = ttl
        self._clock = clock
        self._given = inner
        self._inner: AbstractResolver | None = inner
        self._cache: dict[str, tuple[float, list[str]]] = {}
        self._pending: dict[str, asyncio.Task[list[str]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pacer: _StartPacer | None = None

    async def resolve(self, host: str, port: int) -> list[str]:
        """Return the addresses of ``host``; raises OSError (``socket.gaierror``) when unknown."""
        key = host.lower()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > self._clock():
            return list(hit[1])
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # the inner resolver and pending look-ups are loop-bound
            self._inner = self._given
            self._pending.clear()
            self._loop = loop
            self._pacer = _StartPacer(loop, _LOOKUPS_PER_TURN, _LOOKUPS_IN_BURST)
        task = self._pending.get(key)
        if task is None:
            task = loop.create_task(self._lookup(host, port))
            # Retrieve the outcome even when every waiter was cancelled (no "never retrieved"
            # noise).
            task.add_done_callback(lambda t: None if t.cancelled() else t.exception())
            self._pending[key] = task
        try:
            return list(await asyncio.shield(task))
        finally:
            # a failed look-up's error, raised here, keeps this frame in its traceback: were the
            # frame to keep the task, which keeps the error, each unknown host would leave a
            # cycle (task, error, tracebacks, frames) only the collector frees, 17 objects a
            # host: 34,000 for 2,000 hosts, walked in full passes of 50-100 ms on the loop
            del task

    async def _lookup(self, host: str, port: int) -> list[str]:
        try:
            pacer = self._pacer
            if pacer is not None and not pacer.ready():
                await pacer.turn()  # in turns: each look-up is ~0.1 ms of the loop's time
            if self._inner is None:
                self._inner = aiohttp.DefaultResolver()
            infos = await self._inner.resolve(host, port, family=socket.AF_UNSPEC)
            addrs = list(dict.fromkeys(info["host"] for info in infos))
            if not addrs:
                raise socket.gaierror(socket.EAI_NONAME, f"{host}: no addresses")
            if len(self._cache) >= _DNS_CACHE_SIZE:
                self._cache.pop(next(iter(self._cache)))  # oldest first: dicts keep order
            self._cache[host.lower()] = (self._clock() + self._ttl, addrs)
            return addrs
        finally:
            self._pending.pop(host.lower(), None)

    async def aclose(self) -> None:
        """Release the underlying resolver (the default one: one given stays open)."""
        if self._inner is not None and self._inner is not self._given:
            await self._inner.close()
        self._inner = self._given


_T = TypeVar("_T")


async def fewer_than(
    limit: int, running: set[asyncio.Future[_T]], left: Callable[[], float]
) -> set[asyncio.Future[_T]]:
    """Wait until fewer than ``limit`` (at least 1) of ``running`` are unfinished, or ``left()``
    (seconds) runs out; the unfinished ones. How a big answer keeps a window of its fetches under
    way instead of all of them (each waiting fetch is ~60 objects the collector walks)."""
    limit = max(1, limit)
    running = {t for t in running if not t.done()}
    while len(running) >= limit:
        remaining = left()
        if remaining <= 0:
            break
        await asyncio.wait(running, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        running = {t for t in running if not t.done()}
    return running


class _BlockedAddress(OSError):
    """Raised inside the connector when a host resolves to a refused address."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

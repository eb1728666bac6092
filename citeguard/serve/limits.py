"""Per-key concurrency and rate limits, in the app (one process; each replica keeps its own)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from citeguard.errors import CiteguardError

__all__ = ["KeyLimits", "LimitExceeded"]

_MAX_KEYS = 10_000  # distinct keys tracked (only configured keys pass auth, so this holds)


class LimitExceeded(CiteguardError):
    """A key is over its concurrency or rate; ``retry_after`` seconds, when known."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class _Bucket:
    tokens: float
    at: float
    in_flight: int = 0


class KeyLimits:
    """``concurrency`` requests in flight per key; ``rate`` per second per key (a token bucket
    holding up to ``max(1, 2 * rate)``; None: no rate limit). Over either:
    :class:`LimitExceeded`."""

    def __init__(
        self, concurrency: int, rate: float | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.concurrency = concurrency
        self.rate = rate
        self._clock = clock
        self._keys: dict[str, _Bucket] = {}
        self._burst = max(1.0, 2 * rate) if rate is not None else 0.0

    def acquire(self, key: str) -> None:
        now = self._clock()
        b = self._keys.get(key)
        if b is None:
            if len(self._keys) >= _MAX_KEYS:
                self._keys = {k: v for k, v in self._keys.items() if v.in_flight}
            b = self._keys[key] = _Bucket(tokens=self._burst, at=now)
        if b.in_flight >= self.concurrency:
            raise LimitExceeded(f"at most {self.concurrency} requests in flight per key")
        if self.rate is not None:
            b.tokens = min(self._burst, b.tokens + (now - b.at) * self.rate)
            b.at = now
            if b.tokens < 1:
                raise LimitExceeded(
                    f"at most {self.rate:g} requests per second per key",
                    retry_after=(1 - b.tokens) / self.rate,
                )
            b.tokens -= 1
        b.in_flight += 1

    def release(self, key: str) -> None:
        b = self._keys.get(key)
        if b is not None and b.in_flight:
            b.in_flight -= 1

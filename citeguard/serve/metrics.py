"""Prometheus metrics of one app, in its own ``CollectorRegistry`` (no global state)."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from citeguard.models import Verdict

__all__ = ["Metrics", "sample_loop_lag"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

_LAG_BUCKETS = (
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1,
    0.25, 0.5, 1, 2.5, 5,
)  # fmt: skip
LAG_INTERVAL = 0.01


async def sample_loop_lag(histogram: Histogram) -> None:
    """Until cancelled: how late a 10 ms timer fires on the running loop, into ``histogram``
    (a stalled loop delays everything it runs by as much)."""
    loop = asyncio.get_running_loop()
    while True:
        t = loop.time()
        await asyncio.sleep(LAG_INTERVAL)
        histogram.observe(max(0.0, loop.time() - t - LAG_INTERVAL))


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "citeguard_requests", "HTTP requests answered", ["route", "status"], registry=r
        )
        self.in_flight = Gauge("citeguard_in_flight", "requests being answered", registry=r)
        self.verdicts = Counter(
            "citeguard_verdicts", "answers by outcome", ["route", "verdict"], registry=r
        )
        self.axes = Counter(
            "citeguard_axis_results", "verdict axes by result", ["axis", "passed"], registry=r
        )
        self.attempts = Histogram(
            "citeguard_attempts",
            "upstream calls per guarded answer",
            buckets=(1, 2, 3, 4, 5, 8),
            registry=r,
        )
        self.citations = Counter(
            "citeguard_citations", "checked citations by status", ["status"], registry=r
        )
        self.added_latency = Histogram(
            "citeguard_added_latency_seconds",
            "time the service added to an answer (request time minus upstream time)",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.upstream_latency = Histogram(
            "citeguard_upstream_latency_seconds",
            "time spent waiting on the upstream per request",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )

        self.loop_lag = Histogram(
            "citeguard_event_loop_lag_seconds",
            "how late the HTTP event loop ran a timer (sampled every 10 ms)",
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        self.gc_full = Histogram(
            "citeguard_gc_full_seconds",
            "full garbage collections the tuned runtime ran (idle, or due)",
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        self.guard_loop_lag = Histogram(
            "citeguard_guard_loop_lag_seconds",
            "how late the guard's event loop (checks, upstream calls) ran a timer (every 10 ms)",
            buckets=_LAG_BUCKETS,
            registry=r,
        )

    def observe_verdict(
        self, route: str, verdict: Verdict | None, outcome: str, attempts: int
    ) -> None:
        self.verdicts.labels(route, outcome).inc()
        if attempts:
            self.attempts.observe(attempts)
        if verdict is None:
            return
        for name, axis in verdict.axes.items():
            if axis.evaluated:
                self.axes.labels(name, str(axis.passed).lower()).inc()
        for c in verdict.citations:
            self.citations.labels(c.status.value).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)

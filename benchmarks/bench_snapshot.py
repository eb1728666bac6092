"""Benchmark replay overhead: serving a 10-citation answer's fetches from the SQLite store.

    python benchmarks/bench_snapshot.py [--quick] [--runs N] [--out PATH]

A 10-URL answer is recorded once through the real ``Fetcher`` against an aiohttp server on
127.0.0.1 (ten ~60 kB HTML pages, all different). Then, in the same run:

* **replay**: ``SnapshotFetcher(..., mode=replay).fetch_all(urls)`` on a store that is already
  open (as the Guard keeps it): SQL lookup, zlib inflate, sha256 check and model decoding of all
  ten, off the event loop. Median and p95 over ``--runs`` answers. Target: median < 5 ms.
* **cold replay**: the same on a freshly opened store (connect, WAL, migration check) — what
  the first answer of a process pays.
* **live loopback**: the same ten URLs fetched live from the loopback server by a fresh
  ``Fetcher``: the cheapest a live check can ever be (a real network adds 10-1000 ms per URL).
  Reported as the ratio replay / live loopback.
* **record**: ``fetch_all`` in record mode (live + writing bodies), as a ratio to live.

Results: ``benchmarks/results/bench_snapshot[_quick].json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from citeguard.policy import FetchPolicy  # noqa: E402
from citeguard.snapshot import SnapshotFetcher, SQLiteSnapshotStore, prepare_snapshot  # noqa: E402
from citeguard.web.fetch import Fetcher  # noqa: E402

N_URLS = 10
PAGE_BYTES = 60_000
TARGET_MS = 5.0


def _page(i: int) -> bytes:
    para = f"<p>Paragraph {{}} of page {i}: the quick brown fox jumps over the lazy dog.</p>\n"
    out, k = [], 0
    size = 0
    while size < PAGE_BYTES:
        line = para.format(k)
        out.append(line)
        size += len(line)
        k += 1
    return f"<html><head><title>Page {i}</title></head><body>{''.join(out)}</body></html>".encode()


async def _serve() -> tuple[web.AppRunner, int]:
    pages = {f"/p{i}": _page(i) for i in range(N_URLS)}

    async def handle(request: web.Request) -> web.Response:
        return web.Response(body=pages[request.path], content_type="text/html")

    app = web.Application()
    app.router.add_get("/{name}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    return runner, int(sock.getsockname()[1])


def _ms(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {
        "median_ms": round(statistics.median(s) * 1000, 3),
        "p95_ms": round(s[int(0.95 * (len(s) - 1))] * 1000, 3),
        "min_ms": round(s[0] * 1000, 3),
        "runs": len(s),
    }


async def _time(fn: Callable[[], Awaitable[Any]], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - t0)
    return out


async def bench(runs: int, live_runs: int) -> dict[str, Any]:
    policy = FetchPolicy(allow_private_addresses=True, retries=0)
    runner, port = await _serve()
    urls = [f"http://127.0.0.1:{port}/p{i}" for i in range(N_URLS)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        store = SQLiteSnapshotStore(path)
        await prepare_snapshot(store, "record")

        async def record_once() -> None:
            f = SnapshotFetcher(lambda: Fetcher(policy), store, "record")
            got = await f.fetch_all(urls)
            await f.aclose()
            assert all(r.status.is_ok() and r.body for r in got.values())

        async def live_once() -> None:
            async with Fetcher(policy) as f:
                got = await f.fetch_all(urls)
            assert all(r.status.is_ok() for r in got.values())

        record = await _time(record_once, live_runs)
        live = await _time(live_once, live_runs)

        replayer = SnapshotFetcher(None, store, "replay")

        async def replay_once() -> None:
            got = await replayer.fetch_all(urls)
            assert len(got) == N_URLS and all(r.body for r in got.values())

        await replay_once()  # warm: the connection and page cache, as in a running guard
        replay = await _time(replay_once, runs)
        await store.close()

        async def cold_once() -> None:
            cold = SQLiteSnapshotStore(path)
            got = await SnapshotFetcher(None, cold, "replay").fetch_all(urls)
            assert len(got) == N_URLS
            await cold.close()

        cold = await _time(cold_once, max(5, runs // 20))
        size = path.stat().st_size
    await runner.cleanup()

    r, lv, rec = _ms(replay), _ms(live), _ms(record)
    return {
        "benchmark": "bench_snapshot",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "urls": N_URLS,
        "page_bytes": PAGE_BYTES,
        "replay": r,
        "cold_replay": _ms(cold),
        "live_loopback": lv,
        "record": rec,
        "replay_over_live_loopback": round(r["median_ms"] / lv["median_ms"], 4),
        "record_over_live_loopback": round(rec["median_ms"] / lv["median_ms"], 3),
        "store_bytes": size,
        "target_replay_median_ms": TARGET_MS,
        "meets_target": r["median_ms"] < TARGET_MS,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="fewer runs (a few seconds)")
    ap.add_argument("--runs", type=int, default=None, help="replayed answers to time")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    runs = args.runs or (50 if args.quick else 500)
    live_runs = 5 if args.quick else 20
    result = asyncio.run(bench(runs, live_runs))
    result["quick"] = args.quick
    out = args.out or ROOT / "benchmarks" / "results" / (
        "bench_snapshot_quick.json" if args.quick else "bench_snapshot.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    r = result["replay"]
    print(
        f"replay of a {N_URLS}-URL answer: median {r['median_ms']} ms, p95 {r['p95_ms']} ms "
        f"(target < {TARGET_MS} ms); cold store {result['cold_replay']['median_ms']} ms; "
        f"live loopback {result['live_loopback']['median_ms']} ms "
        f"(replay/live = {result['replay_over_live_loopback']}); "
        f"record/live = {result['record_over_live_loopback']}"
    )
    print(f"wrote {out}")
    return 0 if result["meets_target"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark the fetcher on a loopback farm: citeguard vs. a sequential check vs. lychee.

    python benchmarks/bench_fetch.py [--quick] [--reps N] [--out PATH]

The farm runs in its own process (so it never shares an event loop with the client being
measured) and is a minimal asyncio HTTP/1.1 server, so its own CPU cost stays small. It serves 20
"hosts", the loopback addresses 127.0.0.2 … 127.0.0.21 (all of 127/8 is loopback on Linux), each
with its own listening socket on one port, every response delayed by 50 ms. Both
citeguard and lychee check the same 200 URLs — 10 per host, 25 % of them 404 — in the same run.

Reported, as ratios against baselines measured in the same run:

* **throughput**: wall time for 200 URLs — citeguard ``fetch_all`` (GET, the guard's mode, and
  HEAD-first) against (a) the same fetcher checking one URL at a time and (b) lychee with high
  concurrency, no per-host request interval and no retries (``lychee --max-concurrency 256
  --host-concurrency 256 --host-request-interval 0s --max-retries 0``; lychee's own defaults are
  measured too, for reference). Each side starts cold (new session / new process).
  A bare aiohttp client (``gather`` of ``session.get``, no checks at all) is measured as well, to
  show what the safety checks cost on top of the HTTP library.
* **per-answer latency**: 10 citations on 10 hosts whose delays run up to 300 ms, fetched at once,
  as a ratio to the slowest of those URLs fetched alone (fresh fetcher each time). Target ≤ 1.15.

Targets: 10-citation latency ≤ 1.15 × the slowest URL; 200-URL wall time ≤ lychee's.
``--quick`` runs one repetition and a 60-URL sequential baseline (scaled to 200, and marked so).
Results: ``benchmarks/results/bench_fetch[_quick].json``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from citeguard.models import CitationStatus  # noqa: E402
from citeguard.policy import FetchPolicy  # noqa: E402
from citeguard.web.fetch import Fetcher  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
N_HOSTS = 20
URLS_PER_HOST = 10
LATENCY_MS = 50
MISSING_EVERY = 4  # every 4th URL is a 404: 25 %
ANSWER_DELAYS_MS = (20, 30, 40, 50, 60, 80, 100, 120, 150, 300)


def host_ip(i: int) -> str:
    return f"127.0.0.{2 + i}"


# --------------------------------------------------------------------------------------------
# The farm (child process)
# --------------------------------------------------------------------------------------------


class _FarmProtocol(asyncio.Protocol):
    """A minimal HTTP/1.1 server (keep-alive, Content-Length, GET/HEAD).

    Real remote servers do not share the client's CPU, so the farm's own per-request cost must be
    small: aiohttp's server would spend about as much CPU per request as the client being
    measured, on the same cores. ``/ok/<ms>/<n>`` → 200 after <ms>; ``/missing/<ms>/<n>`` → 404.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.close_after = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        loop = asyncio.get_running_loop()
        while b"\r\n\r\n" in self.buffer:
            head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            method, target, _version = lines[0].split(b" ", 2)
            if any(h.lower() == b"connection: close" for h in lines[1:]):
                self.close_after = True
            response, delay_s = self.respond(method, target, lines[1:])
            loop.call_later(delay_s, self._send, response)

    def respond(self, method: bytes, target: bytes, headers: list[bytes]) -> tuple[bytes, float]:
        """The response bytes for one request and the seconds to wait before sending them.

        Subclasses (``benchmarks/web.py``) override this to serve other routes.
        """
        parts = target.decode("ascii", "replace").strip("/").split("/")
        kind = parts[0]
        delay = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else LATENCY_MS
        if kind == "ok":
            status, body = b"200 OK", b"<html><body><p>benchmark page</p></body></html>"
        else:
            status, body = b"404 Not Found", b"not found"
        response = (
            b"HTTP/1.1 " + status + b"\r\nContent-Type: text/html; charset=utf-8\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        if method != b"HEAD":
            response += body
        return response, delay / 1000

    def _send(self, response: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(response)
            if self.close_after:
                self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


def serve() -> None:
    """Child process: serve the farm until stdin closes; print the port first."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        port = 0
        socks: list[socket.socket] = []
        for attempt in range(20):
            socks = []
            try:
                for i in range(N_HOSTS):
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((host_ip(i), port))
                    port = s.getsockname()[1]
                    socks.append(s)
                break
            except OSError:
                for s in socks:
                    s.close()
                port = 0
                if attempt == 19:
                    raise
        servers = [await loop.create_server(_FarmProtocol, sock=s, backlog=1024) for s in socks]
        print(port, flush=True)
        await loop.run_in_executor(None, sys.stdin.read)  # parent closes stdin to stop us
        for srv in servers:
            srv.close()

    asyncio.run(main())


class FarmProcess:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.close()
            raise RuntimeError(f"farm failed to start: {line!r}")
        self.port = int(line)

    def url(self, i: int, kind: str, delay_ms: int, n: int) -> str:
        return f"http://{host_ip(i)}:{self.port}/{kind}/{delay_ms}/{n}"

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=5)


# --------------------------------------------------------------------------------------------
# Clients
# --------------------------------------------------------------------------------------------


CONCURRENCY = 256  # the same global limit lychee gets (--max-concurrency 256)


def policy(concurrency: int = CONCURRENCY) -> FetchPolicy:
    return FetchPolicy(
        allow_private_addresses=True,
        url_timeout=20.0,
        answer_deadline=60.0,
        global_concurrency=concurrency,
    )


def tally(statuses: list[CitationStatus]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in statuses:
        out[s.value] = out.get(s.value, 0) + 1
    return out


async def citeguard_all(urls: list[str], *, want_body: bool) -> tuple[float, dict[str, int]]:
    t0 = time.perf_counter()
    async with Fetcher(policy()) as f:
        results = await f.fetch_all(urls, want_body=want_body)
        wall = time.perf_counter() - t0
    return wall, tally([r.status for r in results.values()])


async def citeguard_sequential(urls: list[str]) -> tuple[float, dict[str, int]]:
    t0 = time.perf_counter()
    statuses = []
    async with Fetcher(policy()) as f:
        for u in urls:
            statuses.append((await f.fetch(u)).status)
        wall = time.perf_counter() - t0
    return wall, tally(statuses)


async def bare_aiohttp(urls: list[str]) -> float:
    """The floor: aiohttp alone, no normalisation, address checks, caps or result models."""
    import aiohttp

    t0 = time.perf_counter()
    connector = aiohttp.TCPConnector(limit=CONCURRENCY, limit_per_host=16)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(url: str) -> int:
            async with session.get(url, allow_redirects=False) as resp:
                await resp.read()
                return resp.status

        await asyncio.gather(*(one(u) for u in urls))
        return time.perf_counter() - t0


def lychee(binary: str, urls: list[str], extra: list[str]) -> tuple[float, dict[str, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp) / "urls.txt"
        inputs.write_text("\n".join(urls) + "\n")
        report = Path(tmp) / "report.json"
        cmd = [
            binary,
            "--no-progress",
            "--max-retries",
            "0",
            "--format",
            "json",
            "--output",
            str(report),
            "--timeout",
            "20",
            *extra,
            str(inputs),
        ]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, check=False)
        wall = time.perf_counter() - t0
        if proc.returncode not in (0, 2):
            raise RuntimeError(f"lychee failed ({proc.returncode}): {proc.stderr[-2000:]}")
        data = json.loads(report.read_text())
    counts = {"ok": int(data.get("successful", 0)), "errors": int(data.get("errors", 0))}
    counts["total"] = int(data.get("total", 0))
    return wall, counts


async def answer_latency(farm: FarmProcess) -> tuple[float, float]:
    """(wall for 10 citations at once, wall for the slowest one alone), fresh fetchers."""
    urls = [farm.url(i, "ok", d, 999) for i, d in enumerate(ANSWER_DELAYS_MS)]
    slowest = urls[ANSWER_DELAYS_MS.index(max(ANSWER_DELAYS_MS))]
    t0 = time.perf_counter()
    async with Fetcher(policy()) as f:
        r = await f.fetch(slowest)
        alone = time.perf_counter() - t0
    assert r.status is CitationStatus.OK, r.reason
    await settle()
    t0 = time.perf_counter()
    async with Fetcher(policy()) as f:
        results = await f.fetch_all(urls)
        together = time.perf_counter() - t0
    assert all(x.status is CitationStatus.OK for x in results.values())
    return together, alone


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def build_urls(farm: FarmProcess) -> list[str]:
    urls = []
    for n in range(N_HOSTS * URLS_PER_HOST):
        kind = "missing" if n % MISSING_EVERY == MISSING_EVERY - 1 else "ok"
        urls.append(farm.url(n % N_HOSTS, kind, LATENCY_MS, n))
    return urls


async def settle() -> None:
    gc.collect()
    await asyncio.sleep(0.3)


def med(xs: list[float]) -> float:
    return statistics.median(xs)


async def run(quick: bool, reps: int) -> dict[str, Any]:
    binary = shutil.which("lychee")
    farm = FarmProcess()
    try:
        urls = build_urls(farm)
        # Warm the farm process (first-request costs inside aiohttp's server).
        await citeguard_all(urls[:N_HOSTS], want_body=True)

        get_walls: list[float] = []
        head_walls: list[float] = []
        bare_walls: list[float] = []
        lychee_walls: list[float] = []
        lychee_default_walls: list[float] = []
        get_counts: dict[str, int] = {}
        head_counts: dict[str, int] = {}
        lychee_counts: dict[str, int] = {}
        lychee_fast = [
            "--max-concurrency",
            "256",
            "--host-concurrency",
            "256",
            "--host-request-interval",
            "0s",
        ]

        async def run_get() -> None:
            nonlocal get_counts
            w, get_counts = await citeguard_all(urls, want_body=True)
            get_walls.append(w)

        async def run_head() -> None:
            nonlocal head_counts
            w, head_counts = await citeguard_all(urls, want_body=False)
            head_walls.append(w)

        async def run_bare() -> None:
            bare_walls.append(await bare_aiohttp(urls))

        async def run_lychee() -> None:
            nonlocal lychee_counts
            if binary:
                w, lychee_counts = await asyncio.to_thread(lychee, binary, urls, lychee_fast)
                lychee_walls.append(w)

        contenders = [run_get, run_lychee, run_head, run_bare]
        for rep in range(reps):
            # Rotate the order each repetition so drifting machine load and "who goes first"
            # hit every contender alike; let the farm finish closing the last contender's
            # connections (and collect garbage) before the next one starts.
            for run_one in contenders[rep % 4 :] + contenders[: rep % 4]:
                await settle()
                await run_one()
        if binary:
            w, _ = await asyncio.to_thread(lychee, binary, urls, ["--max-concurrency", "256"])
            lychee_default_walls.append(w)

        await settle()
        seq_urls = urls if not quick else urls[:60]
        seq_wall, seq_counts = await citeguard_sequential(seq_urls)
        seq_scaled = seq_wall * len(urls) / len(seq_urls)

        ratios, together_walls, alone_walls = [], [], []
        for _ in range(max(reps, 3)):
            await settle()
            together, alone = await answer_latency(farm)
            together_walls.append(together)
            alone_walls.append(alone)
            ratios.append(together / alone)
    finally:
        farm.close()

    get_wall = med(get_walls)
    out: dict[str, Any] = {
        "benchmark": "bench_fetch",
        "quick": quick,
        "reps": reps,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "farm": {
            "hosts": N_HOSTS,
            "urls": len(urls),
            "latency_ms": LATENCY_MS,
            "share_404": 1 / MISSING_EVERY,
        },
        "citeguard_get": {"wall_s": get_wall, "walls": get_walls, "statuses": get_counts},
        "bare_aiohttp": {"wall_s": med(bare_walls), "walls": bare_walls},
        "citeguard_head_first": {
            "wall_s": med(head_walls),
            "walls": head_walls,
            "statuses": head_counts,
        },
        "sequential": {
            "urls_measured": len(seq_urls),
            "wall_s_measured": seq_wall,
            "wall_s_for_all": seq_scaled,
            "scaled": len(seq_urls) != len(urls),
            "statuses": seq_counts,
        },
        "speedup_vs_sequential": seq_scaled / get_wall,
        "answer_latency": {
            "delays_ms": list(ANSWER_DELAYS_MS),
            "together_s": together_walls,
            "slowest_alone_s": alone_walls,
            "ratios": ratios,
            "ratio_median": med(ratios),
            "target": 1.15,
            "meets_target": med(ratios) <= 1.15,
        },
    }
    if binary:
        version = await asyncio.to_thread(subprocess.check_output, [binary, "--version"], text=True)
        lw = med(lychee_walls)
        out["lychee"] = {
            "version": version.strip(),
            "args": [*lychee_fast, "--max-retries", "0"],
            "wall_s": lw,
            "walls": lychee_walls,
            "counts": lychee_counts,
            "defaults_wall_s": lychee_default_walls[0] if lychee_default_walls else None,
        }
        out["ratio_citeguard_over_lychee"] = get_wall / lw
        out["ratio_head_first_over_lychee"] = med(head_walls) / lw
        out["meets_lychee_target"] = get_wall <= lw
    else:
        out["lychee"] = None
    return out


def print_table(r: dict[str, Any]) -> None:
    n = r["farm"]["urls"]
    rows = [
        ("citeguard fetch_all (GET)", r["citeguard_get"]["wall_s"], r["citeguard_get"]["statuses"]),
        (
            "citeguard fetch_all (HEAD first)",
            r["citeguard_head_first"]["wall_s"],
            r["citeguard_head_first"]["statuses"],
        ),
        (
            "sequential (same fetcher)" + (" [scaled]" if r["sequential"]["scaled"] else ""),
            r["sequential"]["wall_s_for_all"],
            r["sequential"]["statuses"],
        ),
    ]
    if r["lychee"]:
        rows.append(
            ("lychee (no interval, 256 conc.)", r["lychee"]["wall_s"], r["lychee"]["counts"])
        )
        if r["lychee"]["defaults_wall_s"] is not None:
            rows.append(
                ("lychee (its default per-host limits)", r["lychee"]["defaults_wall_s"], {})
            )
    rows.append(("bare aiohttp, no checks (floor)", r["bare_aiohttp"]["wall_s"], {}))
    print(f"\n{n} URLs, {r['farm']['hosts']} hosts, {r['farm']['latency_ms']} ms latency, 25% 404")
    print(f"{'contender':40} {'wall (s)':>9}  statuses")
    for name, wall, counts in rows:
        print(f"{name:40} {wall:9.3f}  {counts}")
    print(f"\nspeed-up vs sequential:             {r['speedup_vs_sequential']:.1f}x")
    if r["lychee"]:
        print(
            f"citeguard / lychee wall-time ratio: {r['ratio_citeguard_over_lychee']:.2f} "
            f"(HEAD first: {r['ratio_head_first_over_lychee']:.2f}; target <= 1.00)"
        )
    a = r["answer_latency"]
    together_ms = med(a["together_s"]) * 1000
    alone_ms = med(a["slowest_alone_s"]) * 1000
    print(
        f"10-citation answer / slowest URL alone: {a['ratio_median']:.3f} "
        f"(median of {len(a['ratios'])}; target <= 1.15; "
        f"together {together_ms:.0f} ms, alone {alone_ms:.0f} ms)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repetition, short baseline")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 5; quick 1)")
    parser.add_argument("--out", type=Path, help="result file (default benchmarks/results/...)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve()
        return 0
    if sys.platform != "linux":
        print("bench_fetch needs Linux (127.0.0.2+ as loopback hosts)", file=sys.stderr)
        return 2
    reps = args.reps if args.reps is not None else (1 if args.quick else 5)
    result = asyncio.run(run(args.quick, reps))
    out = args.out or RESULTS / ("bench_fetch_quick.json" if args.quick else "bench_fetch.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

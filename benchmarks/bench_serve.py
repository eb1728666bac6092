"""``citeguard serve`` measured: what the service adds, streams at load, throughput, start-up.

Real parts: the service is a ``citeguard serve`` process on 127.0.0.1 (so the clients here do
not share its GIL); the upstream is the scripted OpenAI-wire server of
``tests/serve/servers.py``; the cited pages are served by a loopback aiohttp server (both in
this process, on their own loop thread). Policy: the tests' (loopback allowed,
validity axis, word-overlap entailment), so the figures are the service's and the gate's, not a
model's.

* ``added_latency``: the same Chat Completions request, interleaved, (a) straight to the
  upstream, (b) through the proxy (pages cached after the warm-up), and (c) ``Guard.check`` of
  the same answer in process on a warm Guard; (d) ``Guard.run`` in process with an answer
  function returning the upstream's response (the loop the proxy runs, no network). The
  service's own cost is (b) - (a) - (c), p50 and p95 (target: <= 5 ms at p50), and beside it
  (b) - (a) - (d).
* ``streams``: first the service loop's lag idle for 3 s (the baseline: what the machine's
  load alone does to it); then 200 concurrent ``stream: true`` requests, each answer citing
  10 pages, through the proxy in hold mode: all complete with a verdict; the service loop's
  lag (its own ``citeguard_event_loop_lag_seconds`` histogram, a 10 ms timer's lateness,
  read from /metrics before and after the round: p50/p99 as bucket upper bounds; target
  p99 <= 20 ms) and beside it the guard loop's (``citeguard_guard_loop_lag_seconds``: how
  long a turn of the loop the checks share runs; target p99 <= 100 ms, issue 56); the
  server's RSS; its open file descriptors after each round once they settle (no growth).
  ``streams_runtime_default``: one more round against a second server started with
  ``--runtime default`` (the interpreter's own GIL switch interval and garbage collector),
  for contrast.
* ``check_rps``: /v1/check requests per second on cached pages, 16 clients for ~5 s.
* ``ready``: ``citeguard serve`` (default policy: the local model) from exec to /readyz 200,
  with the model cache warm (target <= 3 s).

The servers run at the caller's priority; once they are up, this process (the clients, the
upstream and the page server: the load generator) lowers its own to nice +10, so on a 2-core
machine it does not take the cores the server is being measured on.

Run: ``python -m benchmarks.bench_serve`` → ``benchmarks/results/serve.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from serve.servers import FakeUpstream, Loop, Pages, serve_policy  # noqa: E402

from citeguard import Guard  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "serve.json"
CHAT = "/v1/chat/completions"


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * len(s)))], 3)


def _answer(pages: Pages, n: int) -> str:
    # n sentences, each citing its own page of the farm (the mirror repeats the good text)
    claims = []
    for i in range(n):
        path = "/good" if i % 2 == 0 else "/mirror"
        claims.append(
            "The Eiffel Tower is 330 metres tall and stands on the Champ de Mars in Paris "
            f"([s{i}]({pages.url(path)}?v={i}))."
        )
    return " ".join(claims)


def _proc(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _settled_fds(pid: int) -> int:
    # closed connections leave the server a moment later: read until the count stops moving
    last, stable = _fds(pid), 0
    deadline = time.monotonic() + 10
    while stable < 5 and time.monotonic() < deadline:
        time.sleep(0.1)
        now = _fds(pid)
        stable = stable + 1 if now == last else 0
        last = now
    return last


class Server:
    """A ``citeguard serve`` process (the tests' policy, loopback, no keys)."""

    def __init__(self, upstream: str, tmp: Path, runtime: str = "tuned") -> None:
        policy = tmp / "serve_policy.json"
        policy.write_text(serve_policy().model_dump_json())
        env = {k: v for k, v in os.environ.items() if not k.startswith("CITEGUARD_")}
        env["CITEGUARD_PER_KEY_CONCURRENCY"] = "1000"
        env["CITEGUARD_RUNTIME"] = runtime
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "citeguard", "serve", "--port", "0", "--policy", str(policy),
             "--upstream", upstream],
            env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert self.proc.stderr is not None
        self.url = ""
        for line in self.proc.stderr:
            if '"listening"' in line:
                self.url = json.loads(line)["url"]
                break
        assert self.url, "citeguard serve did not start"
        # the request log goes to stderr: drain it so the pipe never fills
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()
        _wait_ready(self.url)

    def lag_buckets(self, loop: str = "event") -> dict[float, float]:
        """The lag histogram of the HTTP loop (``event``) or of the guard loop (``guard``)."""
        text = httpx.get(self.url + "/metrics").text
        out = {}
        for line in text.splitlines():
            if line.startswith(f"citeguard_{loop}_loop_lag_seconds_bucket"):
                le = line.split('le="')[1].split('"')[0]
                out[float("inf") if le == "+Inf" else float(le)] = float(line.rsplit(" ", 1)[1])
        return out

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def _wait_ready(url: str) -> None:
    with httpx.Client(timeout=30) as client:
        while True:
            try:
                if client.get(url + "/readyz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.02)


def _bucket_pct(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    counts = {le: after[le] - before.get(le, 0.0) for le in sorted(after)}
    total = counts.get(float("inf"), 0.0)
    if not total:
        return None
    for le, n in counts.items():
        if n >= q * total:
            return round(le * 1000, 2)
    return None


def added_latency(svc: Server, up: FakeUpstream, pages: Pages, reps: int) -> dict[str, Any]:
    text = _answer(pages, 3)
    up.script(text)
    body = {"model": "m", "messages": [{"role": "user", "content": "How tall is it?"}]}
    guard = Guard(serve_policy())
    guard_loop = asyncio.new_event_loop()
    guard_loop.run_until_complete(guard.warm_up())
    direct, proxied, checked, ran = [], [], [], []
    with httpx.Client(timeout=60) as client:
        response = client.post(up.url + CHAT, json=body).json()
        for i in range(reps + 5):
            t0 = time.perf_counter()
            r = client.post(up.url + CHAT, json=body)
            t1 = time.perf_counter()
            p = client.post(svc.url + CHAT, json=body)
            t2 = time.perf_counter()
            guard_loop.run_until_complete(guard.check(text, question="How tall is it?"))
            t3 = time.perf_counter()
            guard_loop.run_until_complete(guard.run(lambda q, **kw: response, "How tall is it?"))
            t4 = time.perf_counter()
            assert r.status_code == 200 and p.headers["x-citeguard-verdict"] == "passed", p.text
            if i >= 5:  # warm-up: pages cached, connections open
                direct.append((t1 - t0) * 1000)
                proxied.append((t2 - t1) * 1000)
                checked.append((t3 - t2) * 1000)
                ran.append((t4 - t3) * 1000)
    guard_loop.run_until_complete(guard.aclose())
    guard_loop.close()
    added = [p - d for p, d in zip(proxied, direct, strict=True)]
    over_check = [a - c for a, c in zip(added, checked, strict=True)]
    over_run = [a - c for a, c in zip(added, ran, strict=True)]
    return {
        "reps": reps,
        "citations": 3,
        "direct_ms": {"p50": _pct(direct, 0.5), "p95": _pct(direct, 0.95)},
        "proxy_ms": {"p50": _pct(proxied, 0.5), "p95": _pct(proxied, 0.95)},
        "added_ms": {"p50": _pct(added, 0.5), "p95": _pct(added, 0.95)},
        "guard_check_ms": {"p50": _pct(checked, 0.5), "p95": _pct(checked, 0.95)},
        "guard_run_ms": {"p50": _pct(ran, 0.5), "p95": _pct(ran, 0.95)},
        "service_over_check_ms": {
            "p50": round(statistics.median(added) - statistics.median(checked), 3),
            "p50_of_pairs": _pct(over_check, 0.5),
            "p95_of_pairs": _pct(over_check, 0.95),
        },
        "service_over_run_ms": {
            "p50": round(statistics.median(added) - statistics.median(ran), 3),
            "p95_of_pairs": _pct(over_run, 0.95),
        },
        "target_p50_ms": 5.0,
    }


async def _one_stream(client: httpx.AsyncClient, url: str) -> tuple[bool, str | None]:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "q"}]}
    verdict = None
    async with client.stream("POST", url + CHAT, json=body) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: {") and '"citeguard"' in line:
                verdict = json.loads(line[6:])["citeguard"]["verdict"]
    return r.status_code == 200, verdict


def streams(svc: Server, up: FakeUpstream, pages: Pages, n: int, rounds: int) -> dict[str, Any]:
    up.script(_answer(pages, 10))
    pid = svc.proc.pid
    # the baseline: the same loop's lag with nothing to do, on the machine as loaded now
    idle0 = svc.lag_buckets()
    time.sleep(3)
    idle1 = svc.lag_buckets()
    out: dict[str, Any] = {
        "idle_loop_lag_ms_bucket": {
            "p50": _bucket_pct(idle0, idle1, 0.5),
            "p99": _bucket_pct(idle0, idle1, 0.99),
            "samples": idle1.get(float("inf"), 0) - idle0.get(float("inf"), 0),
        },
        "concurrent": n,
        "citations_each": 10,
        "server_rss_mb_before": round(_proc(pid, "VmRSS"), 1),
        "server_fds_before": _settled_fds(pid),
        "rounds": [],
    }
    for _ in range(rounds):
        before = svc.lag_buckets()
        guard_before = svc.lag_buckets("guard")

        async def go() -> list[tuple[bool, str | None]]:
            limits = httpx.Limits(max_connections=n + 10)
            async with httpx.AsyncClient(timeout=300, limits=limits) as client:
                return await asyncio.gather(*(_one_stream(client, svc.url) for _ in range(n)))

        t0 = time.perf_counter()
        results = asyncio.run(go())
        wall = time.perf_counter() - t0
        after = svc.lag_buckets()
        guard_after = svc.lag_buckets("guard")
        out["rounds"].append(
            {
                "completed_200": sum(ok for ok, _ in results),
                "verdicts": {
                    v: sum(1 for _, x in results if x == v) for v in {x for _, x in results}
                },
                "wall_s": round(wall, 2),
                "loop_lag_ms_bucket": {
                    "p50": _bucket_pct(before, after, 0.5),
                    "p99": _bucket_pct(before, after, 0.99),
                    "samples": after.get(float("inf"), 0) - before.get(float("inf"), 0),
                },
                "guard_loop_lag_ms_bucket": {
                    "p50": _bucket_pct(guard_before, guard_after, 0.5),
                    "p99": _bucket_pct(guard_before, guard_after, 0.99),
                    "samples": guard_after.get(float("inf"), 0) - guard_before.get(float("inf"), 0),
                },
                "server_rss_mb": round(_proc(pid, "VmRSS"), 1),
                "server_rss_peak_mb": round(_proc(pid, "VmHWM"), 1),
                "server_fds_settled": _settled_fds(pid),
            }
        )
    out["target_loop_lag_p99_ms"] = 20.0
    # issue 56: the checks' CPU work shares the guard loop's turns (citeguard/loop_turns.py)
    out["target_guard_loop_lag_p99_ms"] = 100.0
    return out


def check_rps(svc: Server, pages: Pages, clients: int, seconds: float) -> dict[str, Any]:
    body = {"answer": _answer(pages, 3), "question": "How tall is it?"}

    async def go() -> tuple[int, list[float]]:
        done, lat = 0, []
        end = time.perf_counter() + seconds

        async def worker(client: httpx.AsyncClient) -> None:
            nonlocal done
            while time.perf_counter() < end:
                t = time.perf_counter()
                r = await client.post(svc.url + "/v1/check", json=body)
                assert r.status_code == 200
                lat.append((time.perf_counter() - t) * 1000)
                done += 1

        async with httpx.AsyncClient(timeout=60) as client:
            await client.post(svc.url + "/v1/check", json=body)  # pages cached
            t0 = time.perf_counter()
            await asyncio.gather(*(worker(client) for _ in range(clients)))
            return done, [time.perf_counter() - t0, *lat]

    done, data = asyncio.run(go())
    elapsed, lat = data[0], data[1:]
    return {
        "clients": clients,
        "requests": done,
        "rps": round(done / elapsed, 1),
        "latency_ms": {"p50": _pct(lat, 0.5), "p95": _pct(lat, 0.95)},
    }


def ready_time(reps: int) -> dict[str, Any]:
    """Default policy (the local model), model cache warm: exec → listening → /readyz 200."""
    listening, ready = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CITEGUARD_")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "citeguard", "serve", "--port", "0"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        url = None
        for line in proc.stderr:
            if '"listening"' in line:
                url = json.loads(line)["url"]
                break
        assert url is not None
        listening.append(time.perf_counter() - t0)
        _wait_ready(url)
        ready.append(time.perf_counter() - t0)
        proc.terminate()
        proc.wait(60)
    return {
        "reps": reps,
        "listening_s": [round(t, 2) for t in listening],
        "ready_s": [round(t, 2) for t in ready],
        "median_ready_s": round(statistics.median(ready), 2),
        "target_s": 3.0,
    }


def _lower_own_priority(by: int = 10) -> None:
    """Every thread of this process (clients, upstream, pages) at nice +``by``: the load
    generator shares the server's two cores and must not take them from the server."""
    for tid in os.listdir("/proc/self/task"):
        t = int(tid)
        os.setpriority(os.PRIO_PROCESS, t, os.getpriority(os.PRIO_PROCESS, t) + by)


def main() -> None:
    quick = "--quick" in sys.argv
    load = os.getloadavg()
    ready = ready_time(1 if quick else 3)  # alone, before anything else runs
    loop = Loop()
    pages, up = Pages(loop), FakeUpstream(loop)
    tmp = Path(tempfile.mkdtemp())
    svc = Server(up.url, tmp)
    plain = Server(up.url, tmp, runtime="default")
    _lower_own_priority()
    n = 50 if quick else 200
    try:
        result = {
            "machine": {
                "cpus": os.cpu_count(),
                "loadavg_at_start": [round(x, 2) for x in load],
                "note": "servers at nice 0; this process (clients, upstream, pages) at nice +10",
            },
            "added_latency": added_latency(svc, up, pages, 30 if quick else 150),
            "streams": streams(svc, up, pages, n, 2),
            # the same architecture with the interpreter's own GIL switch interval and collector
            "streams_runtime_default": streams(plain, up, pages, n, 1),
            "check_rps": check_rps(svc, pages, 16, 2 if quick else 5),
            "ready": ready,
        }
    finally:
        svc.close()
        plain.close()
        up.close()
        pages.close()
        loop.stop()
    result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(result, indent=2)
    if not quick:
        OUT.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()

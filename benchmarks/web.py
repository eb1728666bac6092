"""A loopback web for the benchmark suite: many hosts, real pages, seeded latencies.

One child process serves every host. It reuses the minimal HTTP/1.1 server of
``benchmarks/bench_fetch.py`` (``_FarmProtocol``: keep-alive, delayed responses, tiny CPU cost
per request, so the server does not steal much CPU from the client being measured) with other
routes. Each host has its own loopback address, ``127.0.0.2``, ``127.0.0.3``, … (all of 127/8 is
loopback on Linux), every one listening on the same port:

* citeguard reaches hosts by name (``http://www.site07.test/...``) through a
  :class:`~citeguard.web.fetch.StaticResolver` that maps each name to ``"127.0.0.9:PORT"``
  (``curl --connect-to`` style), so registrable domains, redirects and diversity see real names;
* tools that do their own DNS (lychee, LinkChecker) get the same pages by address
  (``http://127.0.0.9:PORT/...``).

The server tells hosts apart by the local address a connection arrived on, so both kinds of URL
reach the same host profile.

Host profiles (:data:`DEFAULT_HOSTS`): fixed latencies, log-normal latencies with a slow tail, and
one host that accepts connections but never answers. The delay of every request is a pure
function of (seed, host, path) — :func:`delay_ms` — so the client can know in advance which URL
of an answer is the slowest, and a run is the same given its seed.

Routes, on every host: ``/p/<page>/<tag>`` → 200 with a real page body; ``/moved/<page>/<tag>``
→ 301 to ``/p/<page>/<tag>`` on the same host; ``/missing/<tag>`` (and anything else) → 404.
Page bodies are the pages of ``shared/data/passages`` (read at run time from
``Path(__file__).resolve().parents[2] / "shared" / "data"``, never copied into the repo), with
their hand-labelled exact quotes, so passage checks find real passages in real HTML. Without
that folder, seeded generated pages stand in (:attr:`PageSet.generated` says which).

Every response carries a ``LinkChecker`` header: LinkChecker otherwise caps itself at a few
requests per second per host unless the server sends it (its documented politeness rule), and
the comparison is between checkers at full speed.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from benchmarks.bench_fetch import _FarmProtocol, host_ip
from benchmarks.long_pages import N_PAGES, long_pages, report_pages
from benchmarks.page_set import DATA as DATA  # re-exported: the scenarios read it here
from benchmarks.page_set import PageSet, passage_pages
from citeguard.web.fetch import StaticResolver

ROOT = Path(__file__).resolve().parents[1]

HostKind = Literal["fixed", "lognormal", "uniform", "timeout"]
UrlKind = Literal["ok", "redirect", "missing"]

NEVER_S = 3600.0  # the timeout host "answers" after an hour: the client gives up long before
MAX_DELAY_MS = 2000.0  # the slow tail is capped so one URL cannot dominate a whole run


@dataclass(frozen=True)
class HostProfile:
    """One host of the loopback web and its latency distribution.

    ``fixed``: every request waits ``median_ms``. ``lognormal``: ``median_ms · exp(σ·N(0,1))``,
    and with probability ``tail_p`` that is multiplied by ``tail_factor`` (the slow tail).
    ``uniform``: anywhere in ``[low_ms, high_ms]``, evenly. ``timeout``: accepts the
    connection and never answers.
    """

    index: int
    kind: HostKind
    median_ms: float = 0.0
    sigma: float = 0.0
    tail_p: float = 0.0
    tail_factor: float = 1.0
    low_ms: float = 0.0
    high_ms: float = 0.0

    @property
    def name(self) -> str:
        """The host name citeguard uses (a distinct registrable domain per host)."""
        return f"www.site{self.index:02d}.test"

    @property
    def ip(self) -> str:
        """The loopback address this host listens on."""
        return host_ip(self.index)


def _default_hosts() -> tuple[HostProfile, ...]:
    fixed = [5, 10, 20, 30, 40, 60, 80, 120]
    medians = [15, 25, 35, 45, 60]
    hosts: list[HostProfile] = [HostProfile(i, "fixed", float(ms)) for i, ms in enumerate(fixed)]
    for k in range(15):
        hosts.append(
            HostProfile(
                len(hosts),
                "lognormal",
                float(medians[k % len(medians)]),
                sigma=0.6,
                tail_p=0.03,
                tail_factor=6.0,
            )
        )
    hosts.append(HostProfile(len(hosts), "timeout"))
    return tuple(hosts)


DEFAULT_HOSTS = _default_hosts()

#: The report-scale web (:mod:`benchmarks.bench_report_scale`): 12 hosts, every URL delayed
#: 50-400 ms (a research report's sources: news sites, papers, encyclopedias, vendors' pages).
REPORT_HOSTS = tuple(HostProfile(i, "uniform", low_ms=50.0, high_ms=400.0) for i in range(12))

HOST_SETS: dict[str, tuple[HostProfile, ...]] = {"default": DEFAULT_HOSTS, "report": REPORT_HOSTS}


def delay_ms(seed: int, host: HostProfile, path: str) -> float | None:
    """The delay before ``host`` answers a request for ``path`` (``None``: it never answers).

    Pure in (seed, host, path): the server and the client compute the same number.
    """
    if host.kind == "timeout":
        return None
    if host.kind == "fixed":
        return host.median_ms
    rng = random.Random(f"{seed}|{host.index}|{path}")
    if host.kind == "uniform":
        return rng.uniform(host.low_ms, host.high_ms)
    ms = host.median_ms * math.exp(host.sigma * rng.gauss(0.0, 1.0))
    if rng.random() < host.tail_p:
        ms *= host.tail_factor
    return min(ms, MAX_DELAY_MS)


# --------------------------------------------------------------------------------------------
# Pages
# --------------------------------------------------------------------------------------------


def load_pages(seed: int, kind: str = "passages") -> PageSet:
    """Pages of ``shared/data/passages`` with at least one usable exact quote, else generated
    (:func:`benchmarks.page_set.passage_pages`). ``kind="long"`` (or ``"long:N"``, N of them):
    pages of 50-150 kB built from them (:func:`benchmarks.long_pages.long_pages`);
    ``"report"``: the real pages as they are, 12 quotes each
    (:func:`benchmarks.long_pages.report_pages`)."""
    if kind == "report":
        return report_pages(seed)
    if kind == "long" or kind.startswith("long:"):
        return long_pages(seed, int(kind[5:]) if kind != "long" else N_PAGES)
    return passage_pages(seed)


# --------------------------------------------------------------------------------------------
# The server (child process)
# --------------------------------------------------------------------------------------------


_ROUTES = ("p", "moved", "u", "umoved")


def _unique(body: bytes, tag: str) -> bytes:
    """Page ``body`` made unique to ``tag``: a paragraph naming it before ``</body>`` (or at
    the end), so no two URLs of a ``unique`` plan serve the same bytes."""
    note = f"<p>Reference {tag}: filed under {sum(map(ord, tag)) % 9973}.</p>".encode()
    at = body.rfind(b"</body>")
    return body + note if at < 0 else body[:at] + note + body[at:]


class _WebProtocol(_FarmProtocol):
    def __init__(self, seed: int, hosts: dict[str, HostProfile], bodies: Sequence[bytes]) -> None:
        super().__init__()
        self.seed = seed
        self.hosts = hosts
        self.bodies = bodies
        self.host: HostProfile | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.host = self.hosts.get(transport.get_extra_info("sockname")[0])

    def respond(self, method: bytes, target: bytes, headers: list[bytes]) -> tuple[bytes, float]:
        path = target.decode("ascii", "replace").split("?", 1)[0]
        parts = path.strip("/").split("/")
        extra = b""
        body = b"not found"
        status = b"404 Not Found"
        if len(parts) == 3 and parts[0] in _ROUTES and parts[1].isdigit():
            page = int(parts[1]) % len(self.bodies)
            if parts[0] == "p":
                status, body = b"200 OK", self.bodies[page]
            elif parts[0] == "u":
                status, body = b"200 OK", _unique(self.bodies[page], parts[2])
            else:
                status, body = b"301 Moved Permanently", b""
                to = b"/u/" if parts[0] == "umoved" else b"/p/"
                extra = b"Location: " + to + parts[1].encode() + b"/" + parts[2].encode() + b"\r\n"
        response = (
            b"HTTP/1.1 " + status + b"\r\nContent-Type: text/html; charset=utf-8\r\n"
            b"LinkChecker: benchmark\r\n"
            + extra
            + b"Content-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
        )
        if method != b"HEAD":
            response += body
        host = self.host
        ms = delay_ms(self.seed, host, path) if host is not None else 0.0
        return response, NEVER_S if ms is None else ms / 1000.0


def serve(seed: int, n_hosts: int, kind: str = "passages", host_set: str = "default") -> None:
    """Child process: bind every host, print the port, serve until stdin closes."""
    hosts = HOST_SETS[host_set][:n_hosts]
    pages = load_pages(seed, kind)
    bodies = [pages.body(i, seed) for i in range(len(pages))]
    by_ip = {h.ip: h for h in hosts}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        socks: list[socket.socket] = []
        for attempt in range(20):
            port = 0
            socks = []
            try:
                for h in hosts:
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((h.ip, port))
                    port = s.getsockname()[1]
                    socks.append(s)
                break
            except OSError:
                for s in socks:
                    s.close()
                if attempt == 19:
                    raise
        servers = [
            await loop.create_server(
                lambda: _WebProtocol(seed, by_ip, bodies), sock=s, backlog=2048
            )
            for s in socks
        ]
        print(port, flush=True)
        await loop.run_in_executor(None, sys.stdin.read)  # the parent closes stdin to stop us
        for srv in servers:
            srv.close()

    asyncio.run(main())


# --------------------------------------------------------------------------------------------
# The client side
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedUrl:
    """One URL of a plan: its host, route kind, page, and the delay it will see end to end."""

    host: HostProfile
    kind: UrlKind
    path: str
    page: int | None
    delay_ms: float | None  # for a redirect, both hops; None: never answers

    def quote(self, pages: PageSet, seed: int) -> str | None:
        """A quote that is on this URL's page (None for a 404)."""
        if self.page is None:
            return None
        options = pages.quotes[self.page]
        return options[random.Random(f"{seed}|quote|{self.path}").randrange(len(options))]


class LoopbackWeb:
    """Start the loopback web in a child process; use as a context manager or call close().

    ``n_hosts`` takes the first hosts of :data:`DEFAULT_HOSTS` (the last one, the timeout host,
    only when all are taken). ``pages``: the page set (:func:`load_pages`' ``kind``).
    ``host_set``: a key of :data:`HOST_SETS` (``n_hosts`` defaults to all of its hosts).
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        n_hosts: int | None = None,
        pages: str = "passages",
        host_set: str = "default",
    ) -> None:
        if sys.platform != "linux":
            raise RuntimeError("the loopback web needs Linux (127.0.0.2+ as loopback hosts)")
        self.seed = seed
        if n_hosts is None:
            n_hosts = len(HOST_SETS[host_set])
        self.hosts = HOST_SETS[host_set][:n_hosts]
        self.pages = load_pages(seed, pages)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.web",
                "--serve",
                str(seed),
                str(n_hosts),
                "--pages",
                pages,
                "--hosts",
                host_set,
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.close()
            raise RuntimeError(f"the loopback web failed to start: {line!r}")
        self.port = int(line)

    def __enter__(self) -> LoopbackWeb:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the server process."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    @property
    def answering_hosts(self) -> tuple[HostProfile, ...]:
        """Hosts that answer (every host but the timeout one)."""
        return tuple(h for h in self.hosts if h.kind != "timeout")

    @property
    def timeout_host(self) -> HostProfile | None:
        """The host that never answers, if this web has it."""
        return next((h for h in self.hosts if h.kind == "timeout"), None)

    def resolver(self) -> StaticResolver:
        """Host names → ``"127.0.0.N:PORT"`` (names work only through this resolver)."""
        return StaticResolver({h.name: f"{h.ip}:{self.port}" for h in self.hosts})

    def url(self, planned: PlannedUrl, *, by_name: bool = True) -> str:
        """The URL of ``planned``: by host name (citeguard) or by address (external tools)."""
        if by_name:
            return f"http://{planned.host.name}{planned.path}"
        return f"http://{planned.host.ip}:{self.port}{planned.path}"

    def planned(
        self,
        host: HostProfile,
        kind: UrlKind,
        tag: str,
        page: int | None = None,
        *,
        unique: bool = False,
    ) -> PlannedUrl:
        """One URL of ``kind`` on ``host``; ``tag`` makes it unique (no cache hits).
        ``unique``: the page's bytes are unique to the URL too (a paragraph naming ``tag``)."""
        if kind == "missing":
            path = f"/missing/{tag}"
            return PlannedUrl(host, kind, path, None, delay_ms(self.seed, host, path))
        assert page is not None
        page %= len(self.pages)
        target = f"/{'u' if unique else 'p'}/{page}/{tag}"
        if kind == "ok":
            return PlannedUrl(host, kind, target, page, delay_ms(self.seed, host, target))
        path = f"/{'umoved' if unique else 'moved'}/{page}/{tag}"
        first, second = delay_ms(self.seed, host, path), delay_ms(self.seed, host, target)
        total = None if first is None or second is None else first + second
        return PlannedUrl(host, kind, path, page, total)

    def plan(
        self,
        n: int,
        *,
        tag: str,
        share_missing: float = 0.15,
        share_redirect: float = 0.10,
        hosts: Sequence[HostProfile] | None = None,
        distinct_pages: bool = False,
        unique: bool = False,
    ) -> list[PlannedUrl]:
        """``n`` URLs spread over ``hosts`` (default: every answering host), seeded by ``tag``.

        Kinds are drawn per URL (ok / missing / redirect by the given shares). With
        ``distinct_pages`` no page repeats (up to the number of pages); with ``unique`` no two
        URLs serve the same bytes (:meth:`planned`).
        """
        pool = list(hosts if hosts is not None else self.answering_hosts)
        rng = random.Random(f"{self.seed}|plan|{tag}")
        rng.shuffle(pool)
        pages = list(range(len(self.pages)))
        rng.shuffle(pages)
        out: list[PlannedUrl] = []
        for k in range(n):
            # distinct pages: round-robin over the shuffled hosts (an answer spreads over sites)
            host = pool[k % len(pool)] if distinct_pages else pool[rng.randrange(len(pool))]
            r = rng.random()
            kind: UrlKind = (
                "missing"
                if r < share_missing
                else "redirect"
                if r < share_missing + share_redirect
                else "ok"
            )
            page = pages[k % len(pages)] if distinct_pages else rng.randrange(len(self.pages))
            out.append(self.planned(host, kind, f"{tag}-{k}", page, unique=unique))
        return out


def build_answer(web: LoopbackWeb, urls: Sequence[PlannedUrl], *, quoted: bool = True) -> str:
    """An answer citing every URL once: one sentence per citation (quoting its page when it has
    one), then a numbered reference list — the shape an LLM writes. ``quoted=False`` states
    the page's sentence as the answer's own claim behind a lead-in ("In short: …"), without
    quotation marks: neither a quote nor a word-for-word copy, so the support model judges
    each (a verified quote or a verbatim claim needs no model)."""
    lines = []
    for k, u in enumerate(urls, 1):
        quote = u.quote(web.pages, web.seed)
        if quote is not None and not quoted:
            lines.append(f"In short: {quote.rstrip('.!?。 ')} [{k}].")
        elif quote is not None:
            lines.append(f'Source number {k} says that "{quote}" [{k}].')
        else:
            lines.append(f"Source number {k} covers this topic as well [{k}].")
    refs = [f"[{k}] {web.url(u)}" for k, u in enumerate(urls, 1)]
    return "\n".join(lines) + "\n\n" + "\n".join(refs) + "\n"


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="serve the loopback web (used by the suite)")
    parser.add_argument("--serve", nargs=2, type=int, metavar=("SEED", "HOSTS"), required=True)
    parser.add_argument("--pages", default="passages", help="passages, long, long:N or report")
    parser.add_argument("--hosts", default="default", choices=sorted(HOST_SETS))
    args = parser.parse_args(argv)
    serve(args.serve[0], args.serve[1], args.pages, args.hosts)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())

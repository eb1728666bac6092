"""Send a guarded run's spans to a local Phoenix over OTLP, then read them back from its API.

Everything runs on 127.0.0.1, offline: a small aiohttp site serves two pages and one dead URL;
a scripted agent cites all three, the guard rejects the answer (the dead URL is ``not_found``),
and the agent answers again without it. The run's spans go to Phoenix through the OTLP/HTTP
exporter (``/v1/traces``); once Phoenix has stored them, they are fetched back through its REST
API (``GET /v1/projects/{project}/spans``) and printed as the tree Phoenix holds: the guard run
at the root, each attempt's synthesis and check under it, the fetch, the citations and the four
axes under each check, with the failing URL and the axis scores on the spans.

    pip install 'citeguard-agent[phoenix]'     # arize-phoenix, the OTLP/HTTP exporter
    python examples/phoenix_spans.py           # starts Phoenix itself, in a temporary folder
    python examples/phoenix_spans.py --keep    # ... and leaves it up to browse (Ctrl-C ends it)
    python examples/phoenix_spans.py --phoenix-url http://127.0.0.1:6006   # a Phoenix you run

Phoenix is started as ``python -m phoenix.server.main serve`` with its working directory (and so
its SQLite database) in a fresh temporary folder, telemetry and external resources switched off,
HTTP on 127.0.0.1 and free ports; it is stopped when the example ends. The helpers here
(:func:`phoenix_server`, and :func:`round_trip` over :func:`run_guarded` and :func:`read_spans`)
are what ``tests/integrations/test_phoenix.py`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from citeguard.feedback import Feedback
from citeguard.guard import Guard
from citeguard.models import GuardResult
from citeguard.policy import EntailmentPolicy, FetchPolicy, Policy
from citeguard.web.fetch import StaticResolver

PROJECT = "citeguard-phoenix-example"
QUESTION = "Who wrote the novel Middlemarch, and when was it first published?"
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)

GOOD_URL = "http://books.example.com/middlemarch"
SECOND_URL = "http://encyclopedia.example.org/wiki/Middlemarch"
DEAD_URL = "http://library.example.net/catalogue/middlemarch-first-edition"

_BOOKS = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Middlemarch - Books</title></head><body><article>
<h1>Middlemarch</h1>
<p>Middlemarch is a novel by the English author George Eliot, the pen name of Mary Ann Evans.</p>
<p>The novel is set in the fictitious Midlands town of Middlemarch during 1829 to 1832.</p>
</article></body></html>"""

_ENCYCLOPEDIA = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Middlemarch - Encyclopedia</title></head><body><article>
<h1>Middlemarch</h1>
<p>Middlemarch was first published in eight installments in 1871 and 1872.</p>
<p>It is often counted among the greatest novels written in English.</p>
</article></body></html>"""

#: (host, path) -> (status, body): what the local site serves; anything else is a 404.
PAGES: dict[tuple[str, str], tuple[int, str]] = {
    ("books.example.com", "/middlemarch"): (200, _BOOKS),
    ("encyclopedia.example.org", "/wiki/Middlemarch"): (200, _ENCYCLOPEDIA),
    ("library.example.net", "/catalogue/middlemarch-first-edition"): (404, "not found"),
}
HOSTS = sorted({h for h, _ in PAGES})

SEARCH_RESULTS: list[dict[str, Any]] = [
    {"url": GOOD_URL, "title": "Middlemarch - Books", "content": "A novel by George Eliot."},
    {"url": SECOND_URL, "title": "Middlemarch - Encyclopedia", "content": "Published 1871-72."},
    {"url": DEAD_URL, "title": "Middlemarch, first edition", "content": "Library catalogue."},
]

# Attempt 1 cites the dead catalogue page; attempt 2, written without it, passes.
ANSWER_1 = f"""\
Middlemarch is a novel by the English author George Eliot [1].
It was first published in eight installments in 1871 and 1872 [2].
A first edition of the novel is listed in the library catalogue [3].

[1] {GOOD_URL}
[2] {SECOND_URL}
[3] {DEAD_URL}
"""
ANSWER_2 = f"""\
Middlemarch is a novel by the English author George Eliot [1].
It was first published in eight installments in 1871 and 1872 [2].

[1] {GOOD_URL}
[2] {SECOND_URL}
"""


# ---------------------------------------------------------------------------- the local site


@contextlib.asynccontextmanager
async def serve_pages() -> AsyncIterator[int]:
    """Serve :data:`PAGES` on 127.0.0.1 (an OS-chosen port), dispatching on the Host header."""

    async def handle(request: web.Request) -> web.StreamResponse:
        host = (request.host or "").split(":", 1)[0].lower()
        status, body = PAGES.get((host, request.path), (404, "not found"))
        ctype = "text/html" if status == 200 else "text/plain"
        return web.Response(status=status, text=body, content_type=ctype, charset="utf-8")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


# ---------------------------------------------------------------------------- Phoenix


class PhoenixError(RuntimeError):
    """Phoenix did not start, or did not return what was sent to it in time."""


@dataclass(frozen=True)
class Phoenix:
    """A running Phoenix: its base URL; ``log`` is where a started one writes its output."""

    url: str
    log: Path | None = None

    @property
    def traces_endpoint(self) -> str:
        """The OTLP/HTTP traces endpoint."""
        return f"{self.url}/v1/traces"


_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 (all held open while they are chosen)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(n):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("127.0.0.1", 0))
            ports.append(int(s.getsockname()[1]))
        return ports


def _get(url: str, *, timeout: float = 5.0) -> tuple[int, bytes]:
    """GET ``url``: (HTTP status, body); status 0 when nothing answered. No proxies: loopback."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as resp:
            return int(resp.status), bytes(resp.read())
    except urllib.error.HTTPError as e:
        return int(e.code), bytes(e.read())
    except (urllib.error.URLError, OSError):
        return 0, b""


def _tail(path: Path, n: int = 40) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    return ""


@contextlib.contextmanager
def phoenix_server(
    workdir: str | os.PathLike[str] | None = None, *, start_timeout: float = 180.0
) -> Iterator[Phoenix]:
    """Start Phoenix in a subprocess, wait until it answers, yield it, and always stop it.

    Offline: ``PHOENIX_WORKING_DIR`` (and so the SQLite database) is ``workdir`` (a fresh
    temporary folder when None), telemetry and external resources (web fonts) are off, HTTP
    listens on 127.0.0.1 on a free port, and the gRPC collector gets a free port of its own
    (Phoenix binds it on every interface; nothing here sends to it). The caller's ``PHOENIX_*``
    variables are not passed on. Readiness is polled on ``/healthz`` until ``start_timeout``.
    """
    if importlib.util.find_spec("phoenix") is None:
        raise PhoenixError("arize-phoenix is not installed: pip install 'citeguard-agent[phoenix]'")
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="phoenix-"))
        work = Path(workdir)
        work.mkdir(parents=True, exist_ok=True)
        port, grpc_port = _free_ports(2)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))}
        env.update(
            {
                "PHOENIX_WORKING_DIR": str(work),
                "PHOENIX_SQL_DATABASE_URL": f"sqlite:///{work / 'phoenix.db'}",
                "PHOENIX_TELEMETRY_ENABLED": "false",
                "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
                "PHOENIX_HOST": "127.0.0.1",
                "PHOENIX_PORT": str(port),
                "PHOENIX_GRPC_PORT": str(grpc_port),
            }
        )
        log = work / "phoenix.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "phoenix.server.main", "serve"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, stopped as one below
                preexec_fn=_die_with_parent(),
            )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + start_timeout
            while _get(f"{url}/healthz", timeout=2.0)[0] != 200:
                if time.monotonic() > deadline:
                    raise PhoenixError(
                        f"Phoenix did not answer within {start_timeout:.0f}s:\n{_tail(log)}"
                    )
                with contextlib.suppress(subprocess.TimeoutExpired):
                    code = proc.wait(timeout=0.25)  # the poll interval; returns if it died
                    raise PhoenixError(f"Phoenix exited with {code}:\n{_tail(log)}")
            yield Phoenix(url, log)
        finally:
            _stop(proc)


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` for Linux: the kernel SIGTERMs the child when this process dies, so a
    parent killed outright (no ``finally``) leaves no Phoenix behind. Resolved here, before the
    fork: the child only calls ``prctl``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    sigterm = int(signal.SIGTERM)

    def hook() -> None:
        prctl(1, sigterm)  # PR_SET_PDEATHSIG

    return hook


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM Phoenix's process group, SIGKILL it if it is still there after 15 s."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 15.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)
            return


def read_spans(
    phoenix: Phoenix,
    project: str,
    *,
    trace_id: str | None = None,
    expect_span_ids: Sequence[str] = (),
    timeout: float = 60.0,
) -> list[dict[str, Any]]:
    """The project's spans as Phoenix's REST API returns them (every page), optionally of one
    trace. Phoenix stores OTLP spans in batches, so this polls until every span id in
    ``expect_span_ids`` is there (or at least one span when none is given), up to ``timeout``."""
    query: list[tuple[str, str]] = [("limit", "1000")]
    if trace_id:
        query.append(("trace_id", trace_id))
    base = f"{phoenix.url}/v1/projects/{urllib.parse.quote(project, safe='')}/spans"
    wanted = set(expect_span_ids)
    deadline = time.monotonic() + timeout
    while True:
        spans = _all_pages(base, query)
        seen = {s["context"]["span_id"] for s in spans}
        if spans and wanted <= seen:
            return spans
        if time.monotonic() > deadline:
            raise PhoenixError(
                f"Phoenix holds {len(wanted & seen)} of the {len(wanted)} spans sent "
                f"after {timeout:.0f}s"
            )
        time.sleep(0.25)  # the poll interval: Phoenix inserts received spans in batches


def _all_pages(base: str, query: list[tuple[str, str]]) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = [*query, ("cursor", cursor)] if cursor else query
        status, body = _get(f"{base}?{urllib.parse.urlencode(params)}")
        if status == 404:  # the project appears with its first stored span
            return []
        if status != 200:
            raise PhoenixError(f"GET {base}: HTTP {status}: {body[:300]!r}")
        page = json.loads(body)
        spans.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return spans


# ---------------------------------------------------------------------------- the guarded run


def example_policy() -> Policy:
    """Defaults, except that the site lives on loopback. Claims are judged by the local
    entailment model shipped in the package."""
    return Policy(
        fetch=FetchPolicy(allow_private_addresses=True, url_timeout=5.0, answer_deadline=10.0),
        entailment=EntailmentPolicy(backend="local"),
    )


async def search_tool(query: str) -> dict[str, Any]:
    """The example's search API: fixed results, in Tavily's shape."""
    return {"query": query, "results": SEARCH_RESULTS}


def make_agent(search: Any) -> Any:
    """A scripted agent: searches, then answers; it learns only from ``exclude_urls``."""

    async def agent(
        question: str,
        *,
        exclude_urls: frozenset[str] = frozenset(),
        feedback: Feedback | None = None,
    ) -> str:
        await search("Middlemarch novel author first published")
        return ANSWER_2 if DEAD_URL in exclude_urls else ANSWER_1

    return agent


async def run_guarded(
    endpoint: str, *, project: str = PROJECT, extra_exporters: Sequence[Any] = ()
) -> GuardResult:
    """Run the scenario once, its spans exported over OTLP/HTTP to ``endpoint`` (batched, and
    flushed before this returns). ``extra_exporters`` get every span too (a test keeps an
    in-memory copy, to know what Phoenix must hold)."""
    import requests  # the OTLP/HTTP exporter's own dependency
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    # openinference.project.name is the Phoenix project the spans land in
    resource = Resource.create({"service.name": project, "openinference.project.name": project})
    provider = TracerProvider(resource=resource)
    session = requests.Session()
    # loopback goes direct: an environment proxy would never reach this machine's Phoenix
    session.trust_env = urllib.parse.urlsplit(endpoint).hostname not in _LOOPBACK
    exporter = OTLPSpanExporter(endpoint=endpoint, session=session)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    for exporter in extra_exporters:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        async with serve_pages() as port:
            resolver = StaticResolver({h: f"127.0.0.1:{port}" for h in HOSTS})
            async with Guard(
                example_policy(), resolver=resolver, tracer_provider=provider, now=lambda: NOW
            ) as guard:
                agent = guard.wrap(make_agent(guard.wrap_search(search_tool, provider="example")))
                result: GuardResult = await agent(QUESTION)
    finally:
        provider.shutdown()  # flushes the batch to Phoenix
    return result


# ---------------------------------------------------------------------------- the tree


_SHOWN = (
    "citeguard.attempt",
    "citeguard.status",
    "citeguard.reason",
    "citeguard.failed_axes",
    "citeguard.offending_urls",
    "citeguard.excluded_urls",
    "citeguard.score",
    "citeguard.outcome",
)


def axis_scores(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The OpenInference evaluations on a span, as {name: score}: on citeguard's GUARDRAIL
    spans, the four axes (``evaluations.N.evaluation.name`` / ``.score``)."""
    scores: dict[str, Any] = {}
    i = 0
    while (name := attributes.get(f"evaluations.{i}.evaluation.name")) is not None:
        scores[str(name)] = attributes.get(f"evaluations.{i}.evaluation.score")
        i += 1
    return scores


def list_attribute(attributes: Mapping[str, Any], key: str) -> list[Any]:
    """A list attribute as Phoenix returns it: a JSON list, or flattened to ``key.0``, ..."""
    value = attributes.get(key)
    if isinstance(value, list):
        return value
    out: list[Any] = []
    while (item := attributes.get(f"{key}.{len(out)}")) is not None:
        out.append(item)
    return out


def render_tree(spans: Sequence[Mapping[str, Any]]) -> str:
    """An indented text tree of spans as Phoenix's REST API returns them."""
    children: dict[str | None, list[Mapping[str, Any]]] = {}
    for s in spans:
        children.setdefault(s.get("parent_id"), []).append(s)
    for group in children.values():
        group.sort(key=lambda s: (str(s["start_time"]), str(s["name"])))
    lines: list[str] = []

    def walk(span: Mapping[str, Any], depth: int) -> None:
        a = span.get("attributes") or {}
        head = f"{'  ' * depth}{span['name']} [{span['span_kind']}]"
        if span.get("status_code") == "ERROR":
            head += " ✗"
        if span["name"] in ("citeguard.search", "citeguard.citation"):
            head += f"  {a.get('input.value', '')}"
        shown: dict[str, Any] = {}
        for key in _SHOWN:
            value: Any = a.get(key)
            if value is None:
                value = list_attribute(a, key) or None
            if value is not None:
                shown[key.removeprefix("citeguard.")] = value
        if span["name"] in ("citeguard.run", "citeguard.check"):
            shown["axes"] = axis_scores(a)
        if shown:
            head += "  " + json.dumps(shown, ensure_ascii=False, default=str)
        lines.append(head)
        for child in children.get(span["context"]["span_id"], []):
            walk(child, depth + 1)

    ids = {s["context"]["span_id"] for s in spans}
    for parent, group in children.items():
        if parent is None or parent not in ids:
            for root in group:
                walk(root, 0)
    return "\n".join(lines)


# ---------------------------------------------------------------------------- main


@dataclass(frozen=True)
class RoundTrip:
    """One guarded run sent to Phoenix and read back: the run's result, the spans as the
    process recorded them (OpenTelemetry ``ReadableSpan``), and its trace as Phoenix's REST API
    returns it."""

    result: GuardResult
    trace_id: str
    sent: list[Any]
    stored: list[dict[str, Any]]


def round_trip(phoenix: Phoenix, *, project: str = PROJECT, timeout: float = 60.0) -> RoundTrip:
    """Run the scenario with its spans sent to ``phoenix``, then read its trace back (polling
    until Phoenix holds every span that was sent, up to ``timeout``)."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    kept = InMemorySpanExporter()
    result = asyncio.run(
        run_guarded(phoenix.traces_endpoint, project=project, extra_exporters=[kept])
    )
    sent = list(kept.get_finished_spans())
    roots = [s for s in sent if s.parent is None and s.name == "citeguard.run"]
    if len(roots) != 1:
        raise PhoenixError(f"expected one citeguard.run root span, the run made {len(roots)}")
    trace_id = f"{roots[0].context.trace_id:032x}"
    stored = read_spans(
        phoenix,
        project,
        trace_id=trace_id,
        expect_span_ids=[f"{s.context.span_id:016x}" for s in sent],
        timeout=timeout,
    )
    return RoundTrip(result, trace_id, sent, stored)


def _show(phoenix: Phoenix, project: str) -> int:
    trip = round_trip(phoenix, project=project)
    print(f"=== trace {trip.trace_id} as Phoenix holds it ({len(trip.stored)} spans) ===\n")
    print(render_tree(trip.stored))
    result = trip.result
    print(f"\noutcome: {result.outcome} after {len(result.attempts)} attempt(s)")
    print(f"Phoenix: {phoenix.url}/projects  (project {project!r})")
    return 0 if result.passed else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--phoenix-url", help="a running Phoenix (default: start one here)")
    parser.add_argument("--project", default=PROJECT, help="the Phoenix project name")
    parser.add_argument("--keep", action="store_true", help="keep the started Phoenix up")
    args = parser.parse_args(argv)
    # SIGTERM ends the example through its ``finally`` blocks, which stop Phoenix
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if args.phoenix_url:
        return _show(Phoenix(args.phoenix_url.rstrip("/")), args.project)
    try:
        with phoenix_server() as phoenix:
            code = _show(phoenix, args.project)
            if args.keep:
                print("Phoenix stays up until Ctrl-C")
                with contextlib.suppress(KeyboardInterrupt):
                    signal.pause()
            return code
    except PhoenixError as e:
        print(e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""No false soft 404 under load: the ``soft404_load`` scenario of the benchmark suite.

Issue 43 (family 6): under load, a short page stating a height of 404 metres was called a soft
404. Here ``n`` ``Guard.check`` calls run at once (200 in the full size), 10 citations each, every
URL distinct, each a short templated page of a tower that differs from the others only in its
facts (name, city, height, floors, year); about one page in seven states a height of 404 metres,
in its opening line ("404 metres · 81 floors · opened 2019"). Half the hosts answer a made-up path
with 404; the other half render the template for any path (each path its own facts), so the
catch-all probe runs and compares under load too. No page is missing, so every ``soft_404`` is
false: the count must be 0.

The control, on the same Guard: seven real "page not found" pages served with 200, one per
language the rules cover: each must still be ``soft_404``.

The pages are served by an aiohttp server on 127.0.0.1 in its own thread and event loop; a
:class:`~citeguard.web.fetch.StaticResolver` sends the host names there. Entailment is off
(``backend="none"``): the soft-404 decision is taken before any claim is judged, and the model
would only add minutes of CPU on a small machine.

Run alone: ``python -m benchmarks.bench_soft404_load [--quick | --smoke]`` prints the result as
JSON; in the suite: ``python -m benchmarks --only soft404_load``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from benchmarks.context import Config, Context
from citeguard import CitationStatus, EntailmentPolicy, FetchPolicy, Guard, Policy
from citeguard.web.fetch import StaticResolver

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
HOSTS = 20
PER_ANSWER = 10
CITIES = ("Lisbon", "Porto", "Ghent", "Lyon", "Turin", "Graz", "Malmö", "Leeds", "Cork", "Bern")
NAMES = ("Skyline", "Harbour", "Meridian", "Aurora", "Beacon", "Summit", "Zenith", "Atlas")

NOT_FOUND_PAGES = {
    "en": ("Page not found | City Towers", "<h1>Sorry</h1><p>Try the search box.</p>"),
    "de": ("Seite nicht gefunden | Türme", "<p>Zur Startseite</p>"),
    "fr": ("Tours", "<h1>Page introuvable</h1><p>Retour à l'accueil</p>"),
    "es": ("Torres", "<h1>Página no encontrada</h1><p>Volver</p>"),
    "it": ("Torri", "<h1>Pagina non trovata</h1><p>Torna alla home</p>"),
    "pt": ("Torres", "<h1>Página não encontrada</h1><p>Voltar</p>"),
    "nl": ("Torens", "<h1>Pagina niet gevonden</h1><p>Terug</p>"),
}


def host(k: int) -> str:
    return f"towers{k}.example{k % 5}.org"


def facts(path: str) -> dict[str, Any]:
    """A tower's facts, from its path: any path has some; one in seven is 404 metres tall."""
    d = hashlib.sha256(path.encode()).digest()
    height = 404 if d[0] % 7 == 0 else 150 + d[1] * 2
    return {
        "name": f"{NAMES[d[2] % len(NAMES)]} Tower {d[3] % 90 + 10}",
        "city": CITIES[d[4] % len(CITIES)],
        "height": height,
        "floors": 20 + d[5] % 80,
        "year": 1960 + d[6] % 64,
    }


def page(title: str, main: str) -> str:
    return (
        f"<html><head><title>{title}</title></head><body><nav>Home · Towers · Cities · About"
        f"</nav><main>{main}</main><footer>City Towers, an open register of tall buildings."
        "</footer></body></html>"
    )


def tower_page(path: str) -> str:
    f = facts(path)
    return page(
        f"{f['name']} | City Towers",
        f"<h1>{f['name']}</h1><p>{f['height']} metres · {f['floors']} floors · opened "
        f"{f['year']}</p><p>The {f['name']} in {f['city']} is {f['height']} metres tall and "
        f"opened in {f['year']}.</p>",
    )


def claim(path: str) -> str:
    f = facts(path)
    return f"The {f['name']} in {f['city']} is {f['height']} metres tall and opened in {f['year']}"


class TowerWeb:
    """The tower hosts on 127.0.0.1, served from their own thread and event loop."""

    def __init__(self) -> None:
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._runner: web.AppRunner | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._ready.set()
        self._loop.run_forever()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _handle(self, request: web.Request) -> web.Response:
        name = request.host.split(":")[0]
        k = int(name.split(".")[0].removeprefix("towers"))
        path = request.path
        if path.startswith("/missing/"):
            title, main = NOT_FOUND_PAGES[path.rsplit("/", 1)[-1]]
            return web.Response(text=page(title, main), content_type="text/html")
        if path.startswith("/tower/") or k % 2 == 1:  # odd hosts: the template for any path
            return web.Response(text=tower_page(path), content_type="text/html")
        return web.Response(status=404, text="Not Found")

    def __enter__(self) -> TowerWeb:
        self._thread.start()
        self._ready.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)

    def resolver(self) -> StaticResolver:
        return StaticResolver({host(k): f"127.0.0.1:{self.port}" for k in range(HOSTS)})

    def url(self, k: int, path: str) -> str:
        return f"http://{host(k)}{path}"


def _answer(items: list[tuple[str, str]]) -> str:
    text = "".join(f"{c} [{i + 1}].\n" for i, (c, _u) in enumerate(items))
    return text + "\n" + "".join(f"[{i + 1}] {u}\n" for i, (_c, u) in enumerate(items))


async def run(n: int, per_answer: int = PER_ANSWER) -> dict[str, Any]:
    """``n`` checks of ``per_answer`` templated tower pages at once, then the control."""
    policy = Policy(
        fetch=FetchPolicy(allow_private_addresses=True),
        entailment=EntailmentPolicy(backend="none"),
    )
    with TowerWeb() as towers:
        answers: list[list[tuple[str, str, str]]] = []  # (claim, url, path) per citation
        for a in range(n):
            row = []
            for j in range(per_answer):
                k = (a * per_answer + j) % HOSTS
                path = f"/tower/{a}-{j}"
                row.append((claim(path), towers.url(k, path), path))
            answers.append(row)
        async with Guard(policy, resolver=towers.resolver(), now=lambda: NOW) as guard:
            t0 = time.perf_counter()
            verdicts = await asyncio.gather(
                *(
                    guard.check(_answer([(c, u) for c, u, _p in row]), question="How tall?")
                    for row in answers
                )
            )
            wall = time.perf_counter() - t0
            load = [round(x, 2) for x in os.getloadavg()]
            control_urls = [towers.url(0, f"/missing/{lang}") for lang in NOT_FOUND_PAGES]
            control = await guard.check(
                _answer([(f"Control claim {i}", u) for i, u in enumerate(control_urls)]),
                question="Where did it go?",
            )
    path_of = {u: p for row in answers for _c, u, p in row}
    statuses: Counter[str] = Counter()
    false_soft: list[dict[str, Any]] = []
    for v in verdicts:
        for c in v.citations:
            statuses[c.status.value] += 1
            if c.status is CitationStatus.SOFT_404:
                false_soft.append(
                    {"url": c.url, "height_m": facts(path_of[c.url])["height"], "reason": c.reason}
                )
    pages_404m = sum(1 for p in path_of.values() if facts(p)["height"] == 404)
    caught = sum(1 for c in control.citations if c.status is CitationStatus.SOFT_404)
    return {
        "checks_in_flight": n,
        "citations_per_check": per_answer,
        "citations": n * per_answer,
        "pages_stating_404_metres": pages_404m,
        "entailment": "none",
        "wall_s": round(wall, 2),
        "loadavg": load,
        "statuses": dict(statuses),
        "false_soft_404": len(false_soft),
        "false_soft_404_on_404_metre_pages": sum(1 for f in false_soft if f["height_m"] == 404),
        "false_soft_404_examples": false_soft[:3],
        "control_not_found_pages": len(control_urls),
        "control_soft_404": caught,
        "targets": [
            {
                "name": f"{n} checks x {per_answer} templated pages in flight: false soft_404",
                "target": "== 0",
                "value": len(false_soft),
                "met": not false_soft,
            },
            {
                "name": "real 'page not found' pages (7 languages) still soft_404",
                "target": f"== {len(control_urls)}",
                "value": caught,
                "met": caught == len(control_urls),
            },
        ],
    }


async def scenario(cfg: Config, ctx: Context) -> dict[str, Any]:
    """The suite's entry: 200 checks x 10 citations (quick: 50 x 10, smoke: 6 x 3)."""
    del ctx
    return await run(cfg.pick(200, 50, 6), cfg.pick(PER_ANSWER, PER_ANSWER, 3))


def _main(argv: list[str]) -> int:
    size = "quick" if "--quick" in argv else "smoke" if "--smoke" in argv else "full"
    cfg = Config(size=size)
    res = asyncio.run(run(cfg.pick(200, 50, 6), cfg.pick(PER_ANSWER, PER_ANSWER, 3)))
    print(json.dumps(res, indent=2, ensure_ascii=False))
    return 0 if all(t["met"] for t in res["targets"]) else 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

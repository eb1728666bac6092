"""Ask, don't block (issue 45): guarded runs on the development questions with scripted agents.

    python benchmarks/bench_fresher.py [--limit N] [--out PATH]

Data: the four labelled freshness sources under ``shared/data/freshness`` (FreshQA dev,
SituatedQA temporal, RealTimeQA, PAT-Questions; ``training/train_regime.load_rows``: the
same rows and "today" per source that ``regime_confidence.py`` uses). A question is **fast** when
its label is fast-changing (SituatedQA: ``regime_fine == "fast"``), **slow** when it is slow- or
never-changing (SituatedQA: never, or ``regime_fine == "slow"``); SituatedQA "changing" rows with
no finer label are left out.

Every question runs through ``Guard.run`` twice, with two scripted agents, against pages served
by an aiohttp server on 127.0.0.1 (hosts reached by name through a ``StaticResolver``): an old
page dated 90 days before the question's "today" (meta ``article:published_time``) and a fresh
one dated 3 days before. Both agents first cite the old page; given any feedback, the **able**
agent cites the fresh page, the **unable** one cites the old page again. Each answer carries a
dated caveat ("as of <today>"), so only the sources' age is at stake; claim support is not
checked (no entailment), so the freshness axis decides.

Figures, per source and over all (targets from the issue):

* ``fast_cites_fresher``: share of fast questions whose final answer (able agent) cites the
  fresh page (target ≥ 55%);
* ``slow_extra_attempt``: share of slow / never questions with more than one attempt (able
  agent; ≤ 20%);
* ``slow_not_blocked`` (able and unable agents): share of slow / never questions whose final
  answer is not failed by the freshness axis (≥ 98%);
* ``slow_check_hard_reject``: share of slow / never questions whose first answer
  ``Guard.check`` fails on freshness (≤ 5%);
* for fast questions too: extra attempts and not-blocked shares, for both agents.

Results: ``benchmarks/results/fresher.json``. The rules decide the regime (the Guard's default,
``regime_model=False``); nothing here is tuned.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

from citeguard import FetchPolicy, Guard, GuardResult, Policy  # noqa: E402
from citeguard.feedback import Feedback  # noqa: E402
from citeguard.web.fetch import StaticResolver  # noqa: E402
from training.train_regime import Row, load_rows  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
OLD_DAYS = 90
NEW_DAYS = 3
OLD_HOST = "archive.example.com"
NEW_HOST = "news.example.org"
CONCURRENCY = 16


def kind_of(row: Row) -> str | None:
    """``"fast"``, ``"slow"`` (slow or never) or ``None`` (no label fine enough)."""
    if row.gold == "fast" or (row.gold == "changing" and row.fine == "fast"):
        return "fast"
    if row.gold in ("slow", "insensitive") or (row.gold == "changing" and row.fine == "slow"):
        return "slow"
    return None


def _page(day: str, fresh: bool) -> str:
    what = "Latest figures" if fresh else "Figures"
    return (
        f"<html><head><title>{what}</title>"
        f"<meta property='article:published_time' content='{day}T08:00:00Z'></head>"
        f"<body><article><h1>{what}</h1><p>{what} and the answer to the question, as "
        f"published on {day}.</p></article></body></html>"
    )


async def _handler(request: web.Request) -> web.Response:
    parts = request.path.strip("/").split("/")
    if len(parts) == 2 and parts[0] in ("old", "new"):
        return web.Response(text=_page(parts[1], parts[0] == "new"), content_type="text/html")
    return web.Response(status=404, text="not found")


class Agent:
    """Cites the old page; given feedback, the fresh one (``able``) or the old one again."""

    def __init__(self, port: int, now: datetime, able: bool) -> None:
        self.old = f"http://{OLD_HOST}:{port}/old/{(now - timedelta(days=OLD_DAYS)):%Y-%m-%d}"
        self.new = f"http://{NEW_HOST}:{port}/new/{(now - timedelta(days=NEW_DAYS)):%Y-%m-%d}"
        self.caveat = f"as of {now.day} {now:%B %Y}"
        self.able = able
        self.day_old = f"{(now - timedelta(days=OLD_DAYS)):%Y-%m-%d}"
        self.told: list[str] = []  # the freshness feedback it was given

    async def __call__(
        self, question: str, *, exclude_urls: frozenset[str], feedback: Feedback | None = None
    ) -> str:
        if feedback is not None and (feedback.kind == "fresher" or "freshness" in feedback.message):
            self.told.append(feedback.message)  # feedback about freshness (not diversity, ...)
        url = self.new if feedback is not None and self.able else self.old
        return f"The answer, {self.caveat}, is on this page [1].\n\n[1] {url}\n"


def _freshness_failed(result: GuardResult) -> bool:
    axis = result.verdict.axes.get("freshness")
    return not result.passed and axis is not None and axis.evaluated and not axis.passed


async def _one(guard: Guard, port: int, row: Row, sem: asyncio.Semaphore) -> dict[str, Any]:
    out: dict[str, Any] = {"source": row.source, "kind": kind_of(row)}
    async with sem:
        for able in (True, False):
            agent = Agent(port, row.now, able)
            result = await guard.run(agent, row.question)
            first = result.attempts[0].verdict.axes["freshness"]
            tag = "able" if able else "unable"
            out[f"{tag}_attempts"] = len(result.attempts)
            out[f"{tag}_fresher"] = any(c.url == agent.new for c in result.verdict.citations)
            out[f"{tag}_blocked"] = _freshness_failed(result)
            if able:
                out["feedback_complete"] = _complete(agent) if agent.told else None
            out["check_hard_reject"] = first.evaluated and not first.passed
            out["regime"] = result.verdict.regime
    return out


def _complete(agent: Agent) -> bool:
    """Whether the first feedback names what the issue asks for: the question's regime, the
    stale source and its date, and what "fresh" means for the question (a day or a span)."""
    text = agent.told[0]
    regime = any(f"{r}-changing" in text or f"{r} question" in text for r in _REGIMES)
    fresh = "on or after" in text or "within the last" in text
    return regime and agent.old in text and agent.day_old in text and fresh


_REGIMES = ("fast", "real-time", "real_time", "slow")


def _share(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    return round(sum(1 for r in rows if r[key]) / len(rows), 4) if rows else None


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    fast = [r for r in rows if r["kind"] == "fast"]
    slow = [r for r in rows if r["kind"] == "slow"]
    extra = [{**r, "x": r["able_attempts"] > 1, "y": r["unable_attempts"] > 1} for r in slow]
    fextra = [{**r, "x": r["able_attempts"] > 1, "y": r["unable_attempts"] > 1} for r in fast]
    told = [r for r in rows if r.get("feedback_complete") is not None]
    return {
        "n_fast": len(fast),
        "n_slow": len(slow),
        "fast_cites_fresher": _share(fast, "able_fresher"),
        "fast_extra_attempt_able": _share(fextra, "x"),
        "fast_not_blocked_able": None if not fast else 1 - (_share(fast, "able_blocked") or 0),
        "fast_not_blocked_unable": None if not fast else 1 - (_share(fast, "unable_blocked") or 0),
        "slow_extra_attempt_able": _share(extra, "x"),
        "slow_extra_attempt_unable": _share(extra, "y"),
        "slow_not_blocked_able": None if not slow else 1 - (_share(slow, "able_blocked") or 0),
        "slow_not_blocked_unable": None if not slow else 1 - (_share(slow, "unable_blocked") or 0),
        "slow_check_hard_reject": _share(slow, "check_hard_reject"),
        # of the runs given freshness feedback, the share whose feedback named the regime, the stale
        # source with its date, and what "fresh" means for the question
        "feedback_complete": _share(told, "feedback_complete") if told else None,
    }


async def run(limit: int | None = None) -> dict[str, Any]:
    rows = [r for r in load_rows() if kind_of(r) is not None]
    if limit is not None:
        by_source: dict[str, list[Row]] = defaultdict(list)
        for r in rows:
            if len(by_source[r.source]) < limit:
                by_source[r.source].append(r)
        rows = [r for rs in by_source.values() for r in rs]
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", _handler)
    app.router.add_route("HEAD", "/{tail:.*}", _handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    site = web.SockSite(runner, sock)
    await site.start()
    port = sock.getsockname()[1]
    fetch = FetchPolicy(allow_private_addresses=True, url_timeout=5.0, answer_deadline=10.0)
    policy = Policy(fetch=fetch, entailment={"check_entailment": False})
    resolver = StaticResolver({OLD_HOST: "127.0.0.1", NEW_HOST: "127.0.0.1"})
    today: list[datetime] = [rows[0].now]
    by_now: dict[datetime, list[Row]] = defaultdict(list)
    for r in rows:
        by_now[r.now].append(r)
    out: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    sem = asyncio.Semaphore(CONCURRENCY)
    try:
        async with Guard(policy, resolver=resolver, now=lambda: today[0]) as guard:
            for now, group in sorted(by_now.items()):
                today[0] = now  # one "today" at a time: the group's rows share it
                out += await asyncio.gather(*(_one(guard, port, r, sem) for r in group))
    finally:
        await runner.cleanup()
    sources = sorted({r["source"] for r in out})
    return {
        "benchmark": "fresher",
        "rows": len(out),
        "seconds": round(time.perf_counter() - t0, 1),
        "old_days": OLD_DAYS,
        "new_days": NEW_DAYS,
        "all": summarise(out),
        "by_source": {s: summarise([r for r in out if r["source"] == s]) for s in sources},
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="questions per source (default all)")
    ap.add_argument("--out", type=Path, default=RESULTS / "fresher.json")
    args = ap.parse_args(argv)
    result = asyncio.run(run(args.limit))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

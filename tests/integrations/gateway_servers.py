"""Real servers for the gateway tests and benchmark: a site of cited pages, an upstream that
speaks OpenAI's Chat Completions (JSON and SSE), citeguard's gateway endpoints under uvicorn,
and a LiteLLM proxy process (``litellm --config``) from the ``.venv-litellm`` environment.

Everything binds 127.0.0.1 on a port the OS picks. The site and the upstream run on one
background event loop (:class:`Servers`), so sync tests and the ``openai`` SDK can use them.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "How tall is the Eiffel Tower and what is it made of?"

PAGE = """<!doctype html><html><head><title>The Eiffel Tower</title></head><body><article>
<h1>The Eiffel Tower</h1>
<p>The Eiffel Tower stands 330 metres tall and was completed in 1889 for the World's Fair.</p>
<p>It was designed by the engineering company of Gustave Eiffel and is made of wrought iron.</p>
<p>Around seven million people visit the tower every year, most of them from abroad.</p>
</article></body></html>"""


def answers(site: str) -> dict[str, str]:
    """The upstream's answers by model name (OpenAI's search-model style: a markdown link
    after each sentence, the same link as a ``url_citation`` annotation)."""

    def link(path: str) -> str:
        return f"([tower.example]({site}{path}?utm_source=openai))"

    return {
        # every citation passes
        "good": (
            f'The Eiffel Tower "stands 330 metres tall" {link("/tower")}. '
            f'It is "made of wrought iron" {link("/tower")}.'
        ),
        # the first citation is dead, the second page supports its claim: repair swaps it
        "dead": (
            f'The Eiffel Tower "stands 330 metres tall" {link("/gone")}. '
            f'It is "made of wrought iron" {link("/tower")}.'
        ),
        # the first sentence passes, the second cites a dead page
        "dead_second": (
            f'The Eiffel Tower "stands 330 metres tall" {link("/tower")}. '
            f'It is "made of wrought iron" {link("/gone")}.'
        ),
        # the quote is not what the page says
        "misquoted": (
            f'The Eiffel Tower "stands 450 metres tall" {link("/tower")}. '
            f'It is "made of wrought iron" {link("/tower")}.'
        ),
        # the misquote alone: nothing on the page mends it and no other claim stands
        "misquoted_alone": f'The Eiffel Tower "stands 450 metres tall" {link("/tower")}.',
        # no quote: the page's words paraphrased (uncertain to word overlap: a judge decides)
        "paraphrased": (
            "In Paris, the tower on the Champ de Mars rises to a height of 330 metres "
            f"{link('/tower')}."
        ),
        # the dead citation exists only as an annotation: the text names no link
        "annotated": 'The Eiffel Tower "stands 330 metres tall".',
    }


def completion(model: str, content: str, site: str) -> dict[str, Any]:
    """A Chat Completions response with ``url_citation`` annotations over its links."""
    annotations = [
        {
            "type": "url_citation",
            "url_citation": {
                "url": m.group(2),
                "title": "The Eiffel Tower",
                "start_index": m.start(),
                "end_index": m.end(),
            },
        }
        for m in re.finditer(r"\[([^\]]+)\]\(([^)]+)\)", content)
    ]
    if model == "annotated":
        annotations = [
            {
                "type": "url_citation",
                "url_citation": {
                    "url": f"{site}/gone",
                    "title": "The Eiffel Tower",
                    "start_index": 0,
                    "end_index": len(content),
                },
            }
        ]
    return {
        "id": f"chatcmpl-{model}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content, "annotations": annotations},
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 40, "total_tokens": 52},
    }


def responses_api(model: str, content: str, site: str) -> dict[str, Any]:
    """The same answer as an OpenAI Responses API response (one ``output_text`` part)."""
    annotations = [
        {"type": "url_citation", **a["url_citation"]}
        for a in completion(model, content, site)["choices"][0]["message"]["annotations"]
    ]
    return {
        "id": f"resp_{model}",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": model,
        "output": [
            {
                "type": "web_search_call",
                "id": "ws_1",
                "status": "completed",
                "action": {"type": "search", "query": "Eiffel Tower height material"},
            },
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": content, "annotations": annotations}],
            },
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [{"type": "web_search_preview"}],
        "usage": {
            "input_tokens": 12,
            "output_tokens": 40,
            "total_tokens": 52,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


class Servers:
    """The cited site and the OpenAI-format upstream, on one background event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runners: list[web.AppRunner] = []
        self.site = ""
        self.upstream = ""
        self.upstream_calls = 0
        # the judge's questions the upstream answered: (request body, Authorization header)
        self.judged: list[tuple[dict[str, Any], str]] = []

    def __enter__(self) -> Servers:
        self._thread.start()
        self.site = self._run(self._start(self._site_app()))
        self.upstream = self._run(self._start(self._upstream_app()))
        return self

    def __exit__(self, *exc: object) -> None:
        for runner in self._runners:
            self._run(runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    async def _start(self, app: web.Application) -> str:
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        self._runners.append(runner)
        return f"http://127.0.0.1:{sock.getsockname()[1]}"

    def _site_app(self) -> web.Application:
        async def tower(request: web.Request) -> web.Response:
            return web.Response(text=PAGE, content_type="text/html")

        async def slow(request: web.Request) -> web.Response:
            await asyncio.sleep(float(request.query.get("s", "5")))
            return web.Response(text=PAGE, content_type="text/html")

        app = web.Application()
        app.router.add_get("/tower", tower)
        app.router.add_get("/slow", slow)
        return app  # anything else: 404

    def _upstream_app(self) -> web.Application:
        async def chat(request: web.Request) -> web.StreamResponse:
            self.upstream_calls += 1
            body = await request.json()
            model = str(body.get("model", "good")).split("/")[-1]
            content = answers(self.site).get(model)
            judged = judge_reply(body)
            if judged is not None:  # the upstream is the judge too: "supported"
                self.judged.append((body, request.headers.get("Authorization", "")))
                return web.json_response(completion(model, judged, self.site))
            if model == "fresh":  # the good answer citing pages never fetched before
                content = answers(self.site)["good"].replace(
                    "?utm_source", f"?n={self.upstream_calls}&utm_source"
                )
            if content is None:
                return web.json_response({"error": {"message": f"no model {model}"}}, status=404)
            data = completion(model, content, self.site)
            if not body.get("stream"):
                return web.json_response(data)
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            base = {k: data[k] for k in ("id", "created", "model")}
            base["object"] = "chat.completion.chunk"
            first = {"index": 0, "delta": {"role": "assistant", "content": ""}}
            await _sse(resp, {**base, "choices": [first]})
            for i in range(0, len(content), 16):
                delta = {"index": 0, "delta": {"content": content[i : i + 16]}}
                await _sse(resp, {**base, "choices": [delta]})
            done = {"index": 0, "delta": {}, "finish_reason": "stop"}
            await _sse(resp, {**base, "choices": [done]})
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp

        async def responses(request: web.Request) -> web.StreamResponse:
            self.upstream_calls += 1
            body = await request.json()
            model = str(body.get("model", "good")).split("/")[-1]
            content = answers(self.site).get(model)
            if content is None:
                return web.json_response({"error": {"message": f"no model {model}"}}, status=404)
            return web.json_response(responses_api(model, content, self.site))

        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        app.router.add_post("/v1/responses", responses)
        return app


def judge_reply(body: Mapping[str, Any]) -> str | None:
    """citeguard's entailment judge's answer, "supported", when ``body`` asks its question
    (the system prompt is one of the judge's); None for any other request."""
    from citeguard.checks.entail import JUDGE_PAGE_SYSTEM_PROMPT, JUDGE_SYSTEM_PROMPT

    messages = body.get("messages") or []
    system = messages[0].get("content") if messages else None
    if system not in (JUDGE_PAGE_SYSTEM_PROMPT, JUDGE_SYSTEM_PROMPT):
        return None
    verdict = {"label": "supported", "confidence": 0.9, "reason": "the page says so"}
    if system == JUDGE_SYSTEM_PROMPT:
        return json.dumps(verdict)
    claims = json.loads(messages[1]["content"])["claims"]
    return json.dumps({"verdicts": [verdict | {"id": c["id"]} for c in claims]})


def recorded_judges(store: Path) -> int:
    """The judge replies an SQLite snapshot store holds, over all its versions."""
    from citeguard.snapshot import SQLiteSnapshotStore

    async def count() -> int:
        s = SQLiteSnapshotStore(store)
        try:
            return sum(v.judges for v in await s.list_versions())
        finally:
            await s.close()

    return asyncio.run(count())


async def _sse(resp: web.StreamResponse, data: Mapping[str, Any]) -> None:
    await resp.write(f"data: {json.dumps(data)}\n\n".encode())


# --------------------------------------------------------------------------------------------
# citeguard's gateway endpoints under uvicorn
# --------------------------------------------------------------------------------------------


def policy_json(**extra: Any) -> str:
    """The test policy: loopback pages allowed, claims judged by word overlap."""
    policy: dict[str, Any] = {
        "fetch": {"allow_private_addresses": True},
        "entailment": {"backend": "word_overlap"},
    }
    policy.update(extra)
    return json.dumps(policy)


GATEWAYS_DOC = ROOT / "docs" / "gateways.md"


def documented(heading: str, lang: str) -> str:
    """The first ``lang`` code block of docs/gateways.md's section ``## <heading>``."""
    text = GATEWAYS_DOC.read_text().split(f"## {heading}\n", 1)[1]
    return text.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def documented_keys(shell: str) -> tuple[list[str], str, str]:
    """Of the docs' shell lines: ``citeguard serve``'s keys (``CITEGUARD_API_KEYS``), and the
    variable the gateway reads its key from with the key it holds (the other ``export``)."""
    exports = dict(re.findall(r"export (\w+)=(\S+)", shell))
    keys = exports.pop("CITEGUARD_API_KEYS").split(",")
    ((variable, key),) = exports.items()
    return keys, variable, key


@contextmanager
def gateway_app(policy: str | None = None, api_keys: frozenset[str] = frozenset()) -> Iterator[str]:
    """``citeguard serve``'s app (``create_app``: the gateway router on its one Guard), served by
    uvicorn on 127.0.0.1:<free port> in a thread; yields its base URL. ``api_keys``: the keys
    it takes (none: any request)."""
    import uvicorn

    from citeguard import Policy
    from citeguard.serve import Settings, create_app

    settings = Settings(
        policy=Policy.model_validate_json(policy or policy_json()), port=0, api_keys=api_keys
    )
    app = create_app(settings)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    _wait(lambda: server.started, "uvicorn did not start")
    _wait(lambda: app.state.ready.is_set(), "citeguard serve did not get ready")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


def _wait(ready: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Wait for a server to report itself ready (a readiness poll, with a deadline)."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


# --------------------------------------------------------------------------------------------
# A LiteLLM proxy process
# --------------------------------------------------------------------------------------------


def litellm_python() -> Path | None:
    """The Python of the environment with ``litellm[proxy]`` and citeguard (scripts/test builds
    ``.venv-litellm``; ``CITEGUARD_LITELLM_PYTHON`` names another)."""
    named = os.environ.get("CITEGUARD_LITELLM_PYTHON")
    path = Path(named) if named else ROOT / ".venv-litellm" / "bin" / "python"
    return path if path.exists() else None


def require_litellm() -> Path:
    """That Python, or a skip (outside CI) / a failure (in CI, ``CI=true``)."""
    import pytest

    python = litellm_python()
    if python is None:
        why = "no LiteLLM environment: run scripts/test or set CITEGUARD_LITELLM_PYTHON"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why)
        pytest.skip(why)
    return python


class LiteLLMProxy:
    """``litellm --config CONFIG --port 0`` from the LiteLLM environment, started and stopped
    by the test; ``url`` once it answers its liveness probe; ``key``: its master key."""

    def __init__(
        self,
        python: Path,
        config: Path,
        env: Mapping[str, str] | None = None,
        *,
        master_key: str | None = None,
    ) -> None:
        """``master_key``: the one ``config``'s ``general_settings`` names (none is then put in
        the environment); else a new one, in ``LITELLM_MASTER_KEY``."""
        self.python = python
        self.config = config
        self.env = dict(env or {})
        self.url = ""
        self.key = master_key or "sk-" + secrets.token_hex(24)
        self._key_in_env = master_key is None
        self.proc: subprocess.Popen[str] | None = None
        self.log = config.with_suffix(".log")

    def __enter__(self) -> LiteLLMProxy:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CITEGUARD_")},
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no network at start
            "LITELLM_LOG": "INFO",
            "PYTHONUNBUFFERED": "1",
            **self.env,
        }
        for key in ("DATABASE_URL", "OPENAI_API_KEY", "VIRTUAL_ENV", "LITELLM_MASTER_KEY"):
            env.pop(key, None)
        if self._key_in_env:
            env["LITELLM_MASTER_KEY"] = self.key  # the proxy refuses to start without one
        # the citeguard of this checkout, whichever one the LiteLLM environment installed
        here = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        cli = self.python.parent / "litellm"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [str(cli), "--config", str(self.config), "--host", "127.0.0.1", "--port", "0"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.config.parent,
                text=True,
            )
        _wait(self._ready, f"the LiteLLM proxy did not start:\n{self.output()[-4000:]}", 180.0)
        return self

    def _ready(self) -> bool:
        import httpx

        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"the LiteLLM proxy exited:\n{self.output()[-4000:]}")
        if not self.url:
            # uvicorn names the port the OS gave it
            found = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", self.output())
            if found is None:
                return False
            self.url = found.group(1)
        try:
            return httpx.get(f"{self.url}/health/liveliness", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stop it with ``sig`` (SIGTERM, as a supervisor does; SIGINT, as Ctrl-C does); its
        exit status (uvicorn re-raises the signal after a graceful shutdown: ``-sig``)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def __exit__(self, *exc: object) -> None:
        self.stop()


def write_config(
    path: Path,
    *,
    upstream: str,
    guardrails: list[dict[str, Any]],
    models: list[str],
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """A LiteLLM ``config.yaml`` (as JSON, which YAML reads) routing ``models`` to the
    upstream; ``extra``: more top-level sections (``policies``, ``policy_attachments``)."""
    config = {
        "model_list": [
            {
                "model_name": m,
                "litellm_params": {
                    "model": f"openai/{m}",
                    "api_base": f"{upstream}/v1",
                    "api_key": "sk-upstream",
                },
            }
            for m in models
        ],
        "guardrails": guardrails,
        "litellm_settings": {"drop_params": True},
        **(extra or {}),
    }
    path.write_text(json.dumps(config, indent=2))
    return path


__all__ = [
    "QUESTION",
    "LiteLLMProxy",
    "Servers",
    "answers",
    "completion",
    "gateway_app",
    "judge_reply",
    "litellm_python",
    "policy_json",
    "recorded_judges",
    "require_litellm",
    "responses_api",
    "write_config",
]

if __name__ == "__main__":  # pragma: no cover - a manual look at the servers
    with Servers() as s:
        print(s.site, s.upstream, file=sys.stderr)

"""citeguard's exceptions: one tree under CiteguardError, validating policies, the judge client.

The judge client runs against a real aiohttp server on 127.0.0.1 speaking the chat-completions
wire format.
"""

from __future__ import annotations

import ast
import email.utils
import importlib
import inspect
import json
import pkgutil
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from pydantic import ValidationError

import citeguard
from citeguard.checks.freshness import JudgeFreshnessClassifier
from citeguard.checks.judge import ChatJudge, judge_for
from citeguard.checks.query import JudgeQueryScorer
from citeguard.errors import CiteguardError, JudgeError, MissingExtraError, PolicyError
from citeguard.policy import (
    EntailmentPolicy,
    FetchPolicy,
    FreshnessPolicy,
    JudgePolicy,
    Policy,
    QueryPolicy,
)
from citeguard.web.urls import UrlProblem, normalize_url

# --------------------------------------------------------------------------------------------
# One tree
# --------------------------------------------------------------------------------------------


def _citeguard_modules() -> list[ModuleType]:
    modules = [citeguard]
    for info in pkgutil.walk_packages(citeguard.__path__, "citeguard."):
        try:
            modules.append(importlib.import_module(info.name))
        except (MissingExtraError, ImportError):  # an optional extra that is not installed
            continue
    return modules


def test_every_public_exception_class_derives_from_citeguard_error() -> None:
    found: dict[str, type[BaseException]] = {}
    for module in _citeguard_modules():
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
                and not name.startswith("_")  # private control flow, caught where it is raised
            ):
                found[f"{module.__name__}.{name}"] = obj
    assert {"citeguard.web.urls.UrlProblem", "citeguard.errors.JudgeError"} <= set(found)
    outside = sorted(name for name, cls in found.items() if not issubclass(cls, CiteguardError))
    assert outside == []


# Builtins raised by protocol: a module's __getattr__ must raise AttributeError, the CLI exits
# with SystemExit and argparse types raise ArgumentTypeError, a resolver reports a failed lookup
# as socket.gaierror (the fetcher turns it into a status), an unreachable branch asserts.
# Pydantic validators raise ValueError; the Policy turns it into a PolicyError (tested below).
_PROTOCOL_RAISES = {
    "AttributeError",
    "SystemExit",
    "ArgumentTypeError",
    "gaierror",
    "AssertionError",
    "NotImplementedError",
}


def _validator_raises(tree: ast.AST) -> set[int]:
    """Line numbers of the raises inside pydantic validators (decorated ``*_validator``)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
            "validator" in ast.unparse(d) for d in node.decorator_list
        ):
            lines |= {n.lineno for n in ast.walk(node) if isinstance(n, ast.Raise)}
    return lines


def test_every_raise_in_the_package_raises_a_citeguard_error() -> None:
    exceptions = {
        name: obj
        for module in _citeguard_modules()
        for name, obj in vars(module).items()
        if inspect.isclass(obj) and issubclass(obj, BaseException)
    }
    wrong: list[str] = []
    for path in sorted(Path(citeguard.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_validators = _validator_raises(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue  # a bare re-raise passes on what was caught
            if node.lineno in in_validators:
                continue
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            cls = exceptions.get(name)
            if name in _PROTOCOL_RAISES or name.startswith("_"):
                continue
            if cls is None and isinstance(node.exc, ast.Name):
                continue  # re-raising a caught exception object (``raise exc``)
            if cls is None or not issubclass(cls, CiteguardError):
                wrong.append(f"{path.name}:{node.lineno} raises {name or ast.unparse(node.exc)}")
    assert wrong == [], "\n".join(wrong)


def test_url_problem_is_a_citeguard_error_and_still_a_value_error() -> None:
    with pytest.raises(CiteguardError) as info:
        normalize_url("javascript:alert(1)")
    assert isinstance(info.value, UrlProblem) and isinstance(info.value, ValueError)
    with pytest.raises(ValueError):  # callers written against the old base keep working
        normalize_url("http://[::1")


def test_judge_error_lives_in_errors_and_is_re_exported() -> None:
    from citeguard.checks import judge

    assert judge.JudgeError is JudgeError is citeguard.JudgeError
    assert issubclass(JudgeError, CiteguardError)


# --------------------------------------------------------------------------------------------
# Policy validation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "loc"),
    [
        (lambda: Policy(max_attempts=0), ("max_attempts",)),
        (lambda: FetchPolicy(timeout=-1), ("timeout",)),  # no such key
        (lambda: FetchPolicy(url_timeout=-1), ("url_timeout",)),
        (lambda: Policy(fetch={"retries": -1}), ("fetch", "retries")),
        (lambda: Policy(fetch=FetchPolicy(retries=-1)), ("retries",)),
        (lambda: Policy(judge={"timeout": 0}), ("judge", "timeout")),
        (lambda: Policy.model_validate({"query": {"min_score": 9}}), ("query", "min_score")),
        (lambda: FetchPolicy.model_validate_json('{"retries": "many"}'), ("retries",)),
    ],
)
def test_a_bad_policy_raises_policy_error(
    build: Callable[[], object], loc: tuple[str, ...]
) -> None:
    with pytest.raises(PolicyError) as info:
        build()
    assert not isinstance(info.value, ValidationError)
    assert isinstance(info.value, ValueError) and isinstance(info.value, CiteguardError)
    assert [e["loc"] for e in info.value.errors] == [loc]
    assert ".".join(loc) in str(info.value)


def test_cross_field_checks_raise_policy_error() -> None:
    with pytest.raises(PolicyError, match="must not exceed"):
        Policy(fetch=FetchPolicy(url_timeout=30.0, answer_deadline=20.0))
    switched_on: list[Callable[[], Policy]] = [
        lambda: Policy(query=QueryPolicy(use_judge=True)),
        lambda: Policy(freshness=FreshnessPolicy(use_judge=True)),
        lambda: Policy(entailment=EntailmentPolicy(backend="judge")),
    ]
    for build in switched_on:
        with pytest.raises(PolicyError, match=r"needs judge\.base_url and judge\.model"):
            build()
    judged = Policy(judge=JudgePolicy(base_url="http://127.0.0.1:9/v1", model="m"))
    assert judged.replace(query={"use_judge": True}).query.use_judge


def test_replace_merges_sections_and_keeps_the_rest() -> None:
    base = Policy(max_attempts=2, fetch=FetchPolicy(retries=0, url_timeout=4.0))
    variant = base.replace(fetch={"url_timeout": 5.0}, unverifiable_fails=False)
    assert variant.fetch.url_timeout == 5.0
    assert variant.fetch.retries == 0  # merged into the existing section
    assert variant.max_attempts == 2 and variant.unverifiable_fails is False
    assert variant.passage == base.passage
    assert base.fetch.url_timeout == 4.0 and base.unverifiable_fails is True  # frozen original
    whole = base.replace(fetch=FetchPolicy(url_timeout=6.0))
    assert whole.fetch.url_timeout == 6.0 and whole.fetch.retries == FetchPolicy().retries
    assert base.fetch.replace(retries=3) == FetchPolicy(retries=3, url_timeout=4.0)


@pytest.mark.parametrize(
    "updates",
    [
        {"max_attempts": 0},
        {"fetch": {"url_timeout": -1.0}},
        {"fetch": {"url_timeot": 5.0}},  # a typo is not silently ignored
        {"fetch": {"url_timeout": 60.0}},  # beyond answer_deadline
        {"no_such_field": 1},
        {"query": {"use_judge": True}},  # no judge endpoint
    ],
)
def test_an_invalid_variant_raises_policy_error(updates: dict[str, Any]) -> None:
    with pytest.raises(PolicyError):
        Policy().replace(**updates)


# --------------------------------------------------------------------------------------------
# The judge client
# --------------------------------------------------------------------------------------------


Reply = Callable[[], web.StreamResponse]


def chat(content: object) -> web.Response:
    text = content if isinstance(content, str) else json.dumps(content)
    return web.json_response({"choices": [{"message": {"role": "assistant", "content": text}}]})


class Server:
    """Answers each POST with the next scripted reply (the last one repeats)."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[tuple[float, dict[str, str], dict[str, Any]]] = []
        self.base_url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((time.monotonic(), dict(request.headers), await request.json()))
        return self.replies[min(len(self.requests), len(self.replies)) - 1]()


@pytest_asyncio.fixture
async def server() -> AsyncIterator[Server]:
    srv = Server()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", srv.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    srv.base_url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    yield srv
    await runner.cleanup()


def _keys(data: dict[str, Any]) -> list[str]:
    return sorted(data)


async def test_retries_429_5xx_and_garbage_then_answers(server: Server) -> None:
    server.replies = [
        lambda: web.Response(status=429),
        lambda: web.Response(status=502),
        lambda: chat("not json"),
        lambda: chat({"ok": 1}),
    ]
    async with ChatJudge(server.base_url, "m", retries=3, backoff=0.0) as judge:
        assert await judge.ask("sys", "user", _keys) == ["ok"]
    assert len(server.requests) == 4
    body = server.requests[0][2]
    assert body["model"] == "m" and body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


async def test_a_reply_parse_rejects_is_retried_then_reported(server: Server) -> None:
    server.replies = [lambda: chat({"score": 9})]

    def parse(data: dict[str, Any]) -> int:
        if not 1 <= data["score"] <= 5:
            raise ValueError("score outside 1-5")
        return int(data["score"])

    async with ChatJudge(server.base_url, "m", retries=2, backoff=0.0) as judge:
        with pytest.raises(JudgeError) as info:
            await judge.ask("s", "u", parse)
    assert len(server.requests) == 3
    assert info.value.detail == "invalid response (score outside 1-5)"


async def test_a_4xx_other_than_429_is_not_retried(server: Server) -> None:
    server.replies = [lambda: web.Response(status=401, text="bad key")]
    async with ChatJudge(server.base_url, "m", retries=3, backoff=0.0) as judge:
        with pytest.raises(JudgeError) as info:
            await judge.ask("s", "u", _keys)
    assert len(server.requests) == 1
    assert not info.value.retryable
    assert info.value.detail == "HTTP 401: bad key"
    assert str(info.value) == "judge returned HTTP 401: bad key"


@pytest.mark.parametrize("form", ["seconds", "http-date"])
async def test_retry_after_is_read_by_the_fetchers_parser(server: Server, form: str) -> None:
    when = datetime.now(UTC) + timedelta(seconds=120)
    value = "120" if form == "seconds" else email.utils.format_datetime(when, usegmt=True)
    server.replies = [lambda: web.Response(status=429, headers={"Retry-After": value})]
    async with ChatJudge(server.base_url, "m", retries=0) as judge:
        with pytest.raises(JudgeError) as info:
            await judge.ask("s", "u", _keys)
    assert info.value.retryable and info.value.detail == "HTTP 429"
    assert info.value.retry_after is not None
    assert 110.0 <= info.value.retry_after <= 120.0


async def test_the_retry_waits_for_retry_after(server: Server) -> None:
    server.replies = [
        lambda: web.Response(status=503, headers={"Retry-After": "1"}),
        lambda: chat({"ok": True}),
    ]
    async with ChatJudge(server.base_url, "m", retries=1, backoff=0.0) as judge:
        assert await judge.ask("s", "u", _keys) == ["ok"]
    (first, *_), (second, *_) = server.requests
    assert second - first >= 0.9  # backoff is 0: only Retry-After explains the wait


def test_judge_for_builds_a_judge_only_when_switched_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEGUARD_TEST_JUDGE_KEY", "sk-x")
    policy = Policy(
        judge=JudgePolicy(
            base_url="http://127.0.0.1:9/v1", model="m", api_key_env="CITEGUARD_TEST_JUDGE_KEY"
        ),
        query=QueryPolicy(use_judge=True),
    )
    scorer = judge_for(policy, JudgeQueryScorer, policy.query.use_judge)
    assert isinstance(scorer, JudgeQueryScorer)
    assert judge_for(policy, JudgeFreshnessClassifier, policy.freshness.use_judge) is None
    assert judge_for(Policy(), JudgeQueryScorer, True) is None  # no endpoint configured
    with pytest.raises(PolicyError):
        ChatJudge.from_policy(JudgePolicy())


async def test_from_policy_sends_the_key_from_the_environment(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CITEGUARD_TEST_JUDGE_KEY", "sk-x")
    server.replies = [lambda: chat({"ok": 1})]
    settings = JudgePolicy(
        base_url=server.base_url, model="m2", api_key_env="CITEGUARD_TEST_JUDGE_KEY"
    )
    async with ChatJudge.from_policy(settings) as judge:
        await judge.ask("s", "u", _keys)
    (_, headers, body) = server.requests[0]
    assert headers["Authorization"] == "Bearer sk-x" and body["model"] == "m2"

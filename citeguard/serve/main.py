"""``citeguard serve``: flags and ``CITEGUARD_*`` variables → :class:`Settings` → uvicorn."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import sys
from collections.abc import Mapping
from typing import Any, Literal

from citeguard.errors import PolicyError
from citeguard.serve.settings import (
    ENV_PREFIX,
    UPSTREAM_KEY_ENV,
    Settings,
    load_policy,
    read_secret_lines,
    settings_from,
)

__all__ = [
    "add_arguments",
    "listen",
    "runtime_of",
    "serve_main",
    "settings_of",
    "upstream_line",
]

# flag → (settings field, environment variable)
_OPTIONS: dict[str, tuple[str, str]] = {
    "host": ("host", "HOST"),
    "port": ("port", "PORT"),
    "upstream": ("upstream", "UPSTREAM"),
    "anthropic_upstream": ("anthropic_upstream", "ANTHROPIC_UPSTREAM"),
    "redis": ("redis", "REDIS"),
    "store": ("store", "STORE"),
    "stream_mode": ("stream_mode", "STREAM_MODE"),
    "max_body_bytes": ("max_body_bytes", "MAX_BODY_BYTES"),
    "body_timeout": ("body_timeout", "BODY_TIMEOUT"),
    "per_key_concurrency": ("per_key_concurrency", "PER_KEY_CONCURRENCY"),
    "per_key_rate": ("per_key_rate", "PER_KEY_RATE"),
    "upstream_connect_timeout": ("upstream_connect_timeout", "UPSTREAM_CONNECT_TIMEOUT"),
    "upstream_read_timeout": ("upstream_read_timeout", "UPSTREAM_READ_TIMEOUT"),
    "drain_seconds": ("drain_seconds", "DRAIN_SECONDS"),
    "runtime": ("runtime", "RUNTIME"),
    "max_header_bytes": ("max_header_bytes", "MAX_HEADER_BYTES"),
    "http_parser": ("http_parser", "HTTP_PARSER"),
    "judge_model": ("judge_model", "JUDGE_MODEL"),
}
_FLAGS = {
    "allow_unauthenticated": "ALLOW_UNAUTHENTICATED",
    "log_answers": "LOG_ANSWERS",
    "allow_private": "ALLOW_PRIVATE",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``citeguard serve``'s flags (each also read from ``CITEGUARD_<NAME>``)."""
    p.add_argument("--host", help="address to bind (default 127.0.0.1; CITEGUARD_HOST)")
    p.add_argument("--port", help="port (default 8787, 0: any free port; CITEGUARD_PORT)")
    p.add_argument("--policy", metavar="FILE", help="the Policy as JSON (CITEGUARD_POLICY)")
    p.add_argument(
        "--upstream",
        metavar="URL",
        help="OpenAI-compatible API root the proxy calls, e.g. https://api.openai.com "
        "(CITEGUARD_UPSTREAM)",
    )
    p.add_argument(
        "--anthropic-upstream",
        metavar="URL",
        help="Anthropic API root for /v1/messages (default: --upstream; "
        "CITEGUARD_ANTHROPIC_UPSTREAM)",
    )
    p.add_argument(
        "--redis",
        metavar="URL",
        help="Redis the replicas share their per-host fetch limits through (CITEGUARD_REDIS)",
    )
    p.add_argument(
        "--store",
        metavar="LOCATION",
        help="record every fetched page into this snapshot store: an SQLite path or redis:// URL "
        "(CITEGUARD_STORE)",
    )
    p.add_argument("--stream-mode", choices=["hold", "annotate"], help="default stream mode")
    p.add_argument("--api-keys-file", metavar="FILE", help="clients' API keys, one a line")
    p.add_argument(
        "--upstream-api-key-file",
        metavar="FILE",
        help="the key sent to the upstream (or CITEGUARD_UPSTREAM_API_KEY; neither: each "
        "request forwards the client's own key)",
    )
    p.add_argument(
        "--judge-model",
        metavar="NAME",
        help="uncertain claims go to the upstream's /v1/chat/completions with this model "
        "(metered and budgeted like any judge; CITEGUARD_JUDGE_MODEL)",
    )
    p.add_argument(
        "--allow-private",
        action="store_true",
        default=None,
        help="fetch cited URLs on loopback and private addresses (CITEGUARD_ALLOW_PRIVATE)",
    )
    p.add_argument("--max-body-bytes", help="request body cap (default 2 MiB)")
    p.add_argument(
        "--max-header-bytes",
        help="request line and headers cap, past it 431 (default 64 KiB; "
        "CITEGUARD_MAX_HEADER_BYTES)",
    )
    p.add_argument(
        "--http-parser",
        choices=["auto", "httptools", "h11"],
        help="uvicorn's HTTP parser (default auto: httptools when installed; "
        "CITEGUARD_HTTP_PARSER)",
    )
    p.add_argument("--body-timeout", help="seconds a client may take to send its body")
    p.add_argument("--per-key-concurrency", help="requests in flight per API key (default 32)")
    p.add_argument("--per-key-rate", help="requests per second per API key (default: none)")
    p.add_argument("--upstream-connect-timeout", help="seconds (default 10)")
    p.add_argument("--upstream-read-timeout", help="longest upstream silence, seconds (120)")
    p.add_argument("--drain-seconds", help="on SIGTERM, how long requests in flight may finish")
    p.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        default=None,
        help="listen beyond 127.0.0.1 with no API key configured",
    )
    p.add_argument("--log-answers", action="store_true", default=None, help="log answer text too")
    p.add_argument(
        "--runtime",
        choices=["tuned", "default"],
        help="tuned (the default here): GIL switch interval 0.1 ms, start-up heap frozen, full "
        "garbage collections when idle; default: the interpreter's own (CITEGUARD_RUNTIME)",
    )


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def settings_of(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    """Settings from flags, then ``CITEGUARD_*`` variables, then the defaults."""
    values: dict[str, Any] = {}
    for flag, (name, var) in _OPTIONS.items():
        value = getattr(args, flag, None)
        if value is None:
            value = env.get(ENV_PREFIX + var)
        if value not in (None, ""):
            values[name] = value
    for flag, var in _FLAGS.items():
        value = getattr(args, flag, None)
        if value is None and env.get(ENV_PREFIX + var):
            value = _truthy(env[ENV_PREFIX + var])
        if value is not None:
            values[flag] = value
    policy = getattr(args, "policy", None) or env.get(ENV_PREFIX + "POLICY")
    if policy:
        values["policy"] = load_policy(policy)
    keys: list[str] = []
    if env.get(ENV_PREFIX + "API_KEYS"):
        keys += [k.strip() for k in env[ENV_PREFIX + "API_KEYS"].split(",") if k.strip()]
    keys_file = getattr(args, "api_keys_file", None) or env.get(ENV_PREFIX + "API_KEYS_FILE")
    if keys_file:
        keys += read_secret_lines(keys_file)
    if keys:
        values["api_keys"] = frozenset(keys)
    upstream_key = env.get(UPSTREAM_KEY_ENV)
    source = UPSTREAM_KEY_ENV if upstream_key else None
    key_file = getattr(args, "upstream_api_key_file", None) or env.get(
        ENV_PREFIX + "UPSTREAM_API_KEY_FILE"
    )
    if key_file:
        lines = read_secret_lines(key_file)
        upstream_key = lines[0] if lines else None
        source = f"the file {key_file}" if upstream_key else None
    if upstream_key:
        values["upstream_api_key"] = upstream_key
        values["upstream_api_key_source"] = source
    return settings_from(values)


def upstream_line(settings: Settings, env: Mapping[str, str]) -> dict[str, Any]:
    """The start log's line on the upstream: where its key comes from (never the key) and the
    judge, if any. Raises PolicyError for a judge that could not be sent the key."""
    line: dict[str, Any] = {"event": "upstream", "url": settings.upstream}
    if settings.upstream is None:
        line["key"] = "no upstream: the proxy routes answer 503, /v1/check works"
    elif settings.upstream_api_key is not None:
        line["key"] = f"from {settings.upstream_api_key_source}"
    elif settings.authenticated:
        line["key"] = (
            "none: each request forwards the client's X-Upstream-Api-Key header (clients "
            "authenticate to the guard with a CITEGUARD_API_KEYS key); set "
            f"{UPSTREAM_KEY_ENV} to use one key for all"
        )
    else:
        line["key"] = (
            "none: each request forwards the client's own Authorization (or x-api-key); set "
            f"{UPSTREAM_KEY_ENV} to use one key for all"
        )
    if settings.judge_model:
        if settings.upstream_api_key is not None and not env.get(UPSTREAM_KEY_ENV):
            raise PolicyError(
                f"--judge-model sends the upstream key from {UPSTREAM_KEY_ENV}; with a key "
                "file, set the variable instead"
            )
        key = f"from {UPSTREAM_KEY_ENV}" if env.get(UPSTREAM_KEY_ENV) else "none"
        line["judge"] = f"{settings.judge_model} at the upstream, key {key}"
    return line


class _JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if msg.startswith("{"):
            return msg
        return json.dumps({"event": "log", "level": record.levelname, "message": msg})


def _logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonLines())
    for name in ("citeguard.serve", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.INFO)
        logger.propagate = False


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, with TCP_NODELAY (accepted sockets inherit it): without it, a
    response's headers and body go out in two segments and the second waits for the client's
    delayed ACK, ~40 ms per keep-alive request (measured: /healthz 48 ms -> 0.5 ms)."""
    try:
        sock = socket.create_server((host, port))
    except OSError as e:
        raise PolicyError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def runtime_of(args: argparse.Namespace, env: Mapping[str, str]) -> Literal["tuned", "default"]:
    """The runtime of a ``citeguard serve`` process: ``--runtime``, else ``CITEGUARD_RUNTIME``,
    else ``tuned`` (the process is the service's; see ``citeguard/runtime.py``)."""
    chosen = getattr(args, "runtime", None) or env.get(ENV_PREFIX + "RUNTIME") or "tuned"
    return settings_from({"runtime": chosen}).runtime


# the most asyncio reads from a socket at once (selector_events.max_size)
_READ_SIZE = 256 * 1024


def _parser(settings: Settings) -> Literal["httptools", "h11"]:
    if settings.http_parser != "auto":
        return settings.http_parser
    try:
        import httptools  # noqa: F401
    except ImportError:
        return "h11"
    return "httptools"


def serve_main(args: argparse.Namespace, *, env: Mapping[str, str] | None = None) -> int:
    """Run the service until SIGINT/SIGTERM (requests in flight drain first)."""
    try:
        import uvicorn

        from citeguard.serve.app import create_app
        from citeguard.serve.http_head import protocol_class
    except ImportError as e:
        from citeguard.errors import MissingExtraError

        raise MissingExtraError(e.name or "fastapi", "serve") from e
    env_map = os.environ if env is None else env
    settings = settings_of(args, env_map)
    settings = settings.model_copy(update={"runtime": runtime_of(args, env_map)})
    settings.check_bind()
    _logging()
    sock = listen(settings.host, settings.port)
    host, port = sock.getsockname()[:2]
    print(json.dumps(upstream_line(settings, env_map)), file=sys.stderr, flush=True)
    config = uvicorn.Config(
        create_app(settings),
        http=protocol_class(_parser(settings), settings.max_header_bytes),
        # h11's own limit (a 400) above the head cap, so the answer is the cap's 431
        h11_max_incomplete_event_size=settings.max_header_bytes + _READ_SIZE,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=int(settings.drain_seconds),
        timeout_keep_alive=5,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    announce = json.dumps({"event": "listening", "url": f"http://{host}:{port}"})
    print(announce, file=sys.stderr, flush=True)
    asyncio.run(server.serve(sockets=[sock]))
    return 0

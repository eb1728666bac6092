"""The service's settings: one frozen model, read from flags, ``CITEGUARD_*`` variables and files.

Precedence: a command-line flag, then its environment variable, then the default. Secrets (the
clients' API keys, the upstream's key) come from the environment or from a file
(``--api-keys-file``, ``CITEGUARD_UPSTREAM_API_KEY_FILE``), never from a flag value, so they
stay out of ``ps`` and shell history.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from citeguard.checks.judge import judge_base_url, with_judge
from citeguard.errors import PolicyError
from citeguard.policy import Policy

__all__ = [
    "ENV_PREFIX",
    "SERVE_ON_FAIL",
    "UPSTREAM_KEY_ENV",
    "Settings",
    "judge_base_url",
    "key_id",
    "load_policy",
    "read_secret_lines",
    "serve_policy",
    "service_policy",
]

ENV_PREFIX = "CITEGUARD_"
DEFAULT_PORT = 8787
DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_HEADER_BYTES = 64 * 1024
UPSTREAM_KEY_ENV = ENV_PREFIX + "UPSTREAM_API_KEY"
#: the service fails closed: when no attempt passes, the failing claims are cut and the answer
#: is marked as the API marks what its own content filter cut (docs/serve.md, "When every
#: attempt fails"); a policy that names ``on_fail`` (``return``: the old way) keeps its own
SERVE_ON_FAIL = "strip"


def service_policy() -> Policy:
    """The service's default Policy: the library's, failing closed (``SERVE_ON_FAIL``)."""
    return Policy(on_fail=SERVE_ON_FAIL)


class Settings(BaseModel):
    """Everything ``citeguard serve`` is configured by (see docs/serve.md, Configuration)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    policy: Policy = Field(default_factory=service_policy)
    # an OpenAI- or Anthropic-compatible API root, e.g. https://api.openai.com (the /v1/... path
    # of each route is appended); None: the proxy routes answer 503, /v1/check still works
    upstream: str | None = None
    # a different root for /v1/messages (Anthropic); None: upstream
    anthropic_upstream: str | None = None
    # the key sent upstream when the client sends none of its own (None: the client's is used)
    upstream_api_key: SecretStr | None = None
    upstream_connect_timeout: float = Field(10.0, gt=0)
    # the longest silence between two bytes of the upstream's answer
    upstream_read_timeout: float = Field(120.0, gt=0)
    upstream_max_bytes: int = Field(16 * 1024 * 1024, gt=0)
    # clients' bearer keys; empty: no authentication, and the server binds to loopback only
    # unless allow_unauthenticated is set
    api_keys: frozenset[SecretStr] = frozenset()
    allow_unauthenticated: bool = False
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, gt=0)
    body_timeout: float = Field(30.0, gt=0)  # seconds a client may take to send its body
    per_key_concurrency: int = Field(32, gt=0)
    per_key_rate: float | None = Field(None, gt=0)  # requests per second per key (burst: 2x)
    # snapshot store: an SQLite path, a redis:// URL, or None (no store)
    store: str | None = None
    # a Redis URL the per-host fetch limits are shared through (and the store, when no store
    # is given)
    redis: str | None = None
    stream_mode: Literal["hold", "annotate"] = "hold"
    log_answers: bool = False
    drain_seconds: float = Field(30.0, ge=0)
    # how long a request waits for the model to load before it is refused (503)
    ready_timeout: float = Field(60.0, gt=0)
    # "tuned": the process is the service's (citeguard/runtime.py: GIL switch interval, frozen
    # start-up heap, full collections when idle); the `citeguard serve` command's default. An
    # app that embeds create_app keeps "default" (process-wide switches are its own to set).
    runtime: Literal["tuned", "default"] = "default"
    # the longest request head (request line and headers) read; past it: 431 and the connection
    # closed (citeguard/serve/http_head.py)
    max_header_bytes: int = Field(DEFAULT_MAX_HEADER_BYTES, ge=1024)
    # uvicorn's HTTP parser: "auto" is httptools when installed (the serve extra), else h11
    http_parser: Literal["auto", "httptools", "h11"] = "auto"
    # the following two are folded into ``policy`` by create_app (serve_policy)
    # fetch loopback and private addresses (policy.fetch.allow_private_addresses)
    allow_private: bool = False
    # uncertain claims go to the upstream itself with this model (policy.judge)
    judge_model: str | None = None
    # where the upstream key came from, for the start log (never the key): "env", "file" or None
    upstream_api_key_source: str | None = None

    @property
    def authenticated(self) -> bool:
        return bool(self.api_keys)

    def check_bind(self) -> None:
        """Refuse to listen beyond loopback without keys unless told to."""
        if self.api_keys or self.allow_unauthenticated:
            return
        if self.host not in ("127.0.0.1", "::1", "localhost"):
            raise PolicyError(
                f"no API key is configured, so citeguard serve binds to 127.0.0.1 only (asked "
                f"for {self.host}): set CITEGUARD_API_KEYS / --api-keys-file, or pass "
                "--allow-unauthenticated"
            )


def key_id(key: str) -> str:
    """A short, non-reversible name for a key (logs, metrics and limits never hold the key)."""
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def read_secret_lines(path: str | os.PathLike[str]) -> list[str]:
    """Non-empty, non-comment lines of a secrets file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise PolicyError(f"cannot read {path}: {e.strerror or e}") from None
    return [
        ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")
    ]


def load_policy(path: str | os.PathLike[str]) -> Policy:
    """A Policy from a JSON file (keys left out keep their defaults; ``on_fail`` left out is
    the service's, ``SERVE_ON_FAIL``)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise PolicyError(f"cannot read the policy {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise PolicyError(f"the policy {path} is not JSON: {e}") from None
    if not isinstance(data, Mapping):
        raise PolicyError(f"the policy {path} must be a JSON object")
    return Policy.model_validate({"on_fail": SERVE_ON_FAIL, **data})


def serve_policy(settings: Settings) -> Policy:
    """``settings.policy`` with ``allow_private`` and ``judge_model`` applied: the judge is the
    upstream itself (its ``/v1/chat/completions``, the key from ``CITEGUARD_UPSTREAM_API_KEY``),
    metered and budgeted like any judge (``Policy.judge`` prices, ``Policy.cost_budget``)."""
    policy = settings.policy
    if settings.allow_private:
        policy = policy.replace(fetch={"allow_private_addresses": True})
    if settings.judge_model:
        if not settings.upstream:
            raise PolicyError("--judge-model asks the upstream: give --upstream too")
        policy = with_judge(
            policy,
            base_url=settings.upstream,
            model=settings.judge_model,
            api_key_env=UPSTREAM_KEY_ENV,
        )
    return policy


def settings_from(values: Mapping[str, object]) -> Settings:
    """Settings from a mapping, pydantic's errors as one PolicyError."""
    try:
        return Settings.model_validate(dict(values))
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()
        )
        raise PolicyError(f"bad citeguard serve settings: {problems}", e.errors()) from None

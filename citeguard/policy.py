"""Policy: every threshold and switch citeguard uses, with documented defaults.

A ``Policy`` is frozen. Make variants with ``policy.model_copy(update={...})`` or by building the
nested section you want to change::

    strict = Policy(fetch=FetchPolicy(url_timeout=5.0), unverifiable_fails=True)

Defaults are module-level ``DEFAULT_*`` constants so they can be quoted in docs and tests.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_URL_TIMEOUT = 10.0
DEFAULT_ANSWER_DEADLINE = 20.0
DEFAULT_MAX_REDIRECTS = 10
DEFAULT_MAX_BODY_BYTES = 5 * 1024 * 1024
DEFAULT_MAX_DECOMPRESSED_BYTES = 20 * 1024 * 1024
DEFAULT_GLOBAL_CONCURRENCY = 256
DEFAULT_PER_HOST_CONCURRENCY = 16
DEFAULT_RETRIES = 2
DEFAULT_RETRY_BACKOFF = 0.25
DEFAULT_RETRY_AFTER_CAP = 5.0
DEFAULT_POSITIVE_TTL = 6 * 3600.0
DEFAULT_NEGATIVE_TTL = 5 * 60.0
DEFAULT_USER_AGENT = "citeguard/0.1 (+https://pypi.org/project/citeguard-agent/)"


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FetchPolicy(_Section):
    """Network limits. Every call has a timeout and every body a size cap."""

    connect_timeout: float = Field(DEFAULT_CONNECT_TIMEOUT, gt=0)
    url_timeout: float = Field(DEFAULT_URL_TIMEOUT, gt=0)
    answer_deadline: float = Field(DEFAULT_ANSWER_DEADLINE, gt=0)
    max_redirects: int = Field(DEFAULT_MAX_REDIRECTS, ge=0)
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, gt=0)
    max_decompressed_bytes: int = Field(DEFAULT_MAX_DECOMPRESSED_BYTES, gt=0)
    global_concurrency: int = Field(DEFAULT_GLOBAL_CONCURRENCY, gt=0)
    per_host_concurrency: int = Field(DEFAULT_PER_HOST_CONCURRENCY, gt=0)
    retries: int = Field(DEFAULT_RETRIES, ge=0)
    retry_backoff: float = Field(DEFAULT_RETRY_BACKOFF, ge=0)
    retry_after_cap: float = Field(DEFAULT_RETRY_AFTER_CAP, ge=0)
    positive_ttl: float = Field(DEFAULT_POSITIVE_TTL, ge=0)
    negative_ttl: float = Field(DEFAULT_NEGATIVE_TTL, ge=0)
    allow_private_addresses: bool = False
    # Host names whose private/loopback addresses are trusted even when allow_private_addresses
    # is False (e.g. an intranet docs site). Every other host, and every redirect hop, is checked.
    allowed_private_hosts: frozenset[str] = frozenset()
    allowed_schemes: frozenset[str] = frozenset({"http", "https"})
    user_agent: str = DEFAULT_USER_AGENT
    dns_cache_ttl: int = 300


class PassagePolicy(_Section):
    """Quote and paraphrase matching."""

    check_passages: bool = True
    fuzzy_threshold: float = Field(90.0, ge=0, le=100)
    paraphrase_threshold: float = Field(0.35, ge=0, le=1)
    require_main_text: bool = False  # accept quotes found only in boilerplate?


class EntailmentPolicy(_Section):
    """Claim entailment."""

    check_entailment: bool = True
    backend: Literal["local", "nli", "judge", "none"] = "local"
    model_path: str | None = None
    judge_base_url: str | None = None
    judge_model: str | None = None
    judge_api_key_env: str = "OPENAI_API_KEY"
    judge_timeout: float = Field(30.0, gt=0)
    support_threshold: float = Field(0.5, ge=0, le=1)
    contradiction_threshold: float = Field(0.5, ge=0, le=1)
    window_chars: int = Field(1200, gt=0)
    max_windows: int = Field(4, gt=0)  # evidence windows scored per pair (best lexical first)
    # sentences of a window the local model embeds (those sharing most words with the claim)
    max_sentences_embedded: int = Field(4, gt=0)
    batch_size: int = Field(32, gt=0)
    judge_retries: int = Field(2, ge=0)  # extra attempts on 429/5xx/connection/garbage
    judge_backoff: float = Field(0.5, ge=0)  # first retry wait, doubled each retry
    judge_concurrency: int = Field(8, gt=0)  # judge requests in flight per score() call
    min_supported_share: float = Field(0.0, ge=0, le=1)  # share of claims that must be supported
    fail_unsupported: bool = True  # a claim whose citations are all unsupported fails validity


class DiversityPolicy(_Section):
    enabled: bool = True
    domain_floor: dict[str, int] = Field(
        default_factory=lambda: {"lookup": 1, "comparison": 2, "synthesis": 4}
    )
    per_domain_cap: int = Field(2, ge=1)
    min_primary_share: dict[str, float] = Field(
        default_factory=lambda: {"regulatory": 0.34, "legal": 0.34, "medical": 0.34}
    )
    question_class: str | None = None  # override the classifier


class FreshnessPolicy(_Section):
    enabled: bool = True
    floor_days: dict[str, float | None] = Field(
        default_factory=lambda: {"real_time": 2.0, "fast": 30.0, "slow": 365.0, "insensitive": None}
    )
    undated_counts_as_stale: bool = True
    require_caveat: bool = True
    # optional LLM judge for the question's regime (OpenAI-compatible; falls back to the rules)
    judge_base_url: str | None = None
    judge_model: str | None = None
    judge_api_key_env: str = "OPENAI_API_KEY"


class QueryPolicy(_Section):
    enabled: bool = True
    gating: bool = False  # report and feed back by default; re-synthesis cannot fix a bad query
    min_score: float = Field(3.0, ge=1, le=5)
    # optional LLM judge for the same rubric (OpenAI-compatible; falls back to the rules)
    judge_base_url: str | None = None
    judge_model: str | None = None
    judge_api_key_env: str = "OPENAI_API_KEY"


class Policy(BaseModel):
    """Every threshold and switch. Frozen; copy to make variants."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fetch: FetchPolicy = Field(default_factory=FetchPolicy)
    passage: PassagePolicy = Field(default_factory=PassagePolicy)
    entailment: EntailmentPolicy = Field(default_factory=EntailmentPolicy)
    diversity: DiversityPolicy = Field(default_factory=DiversityPolicy)
    freshness: FreshnessPolicy = Field(default_factory=FreshnessPolicy)
    query: QueryPolicy = Field(default_factory=QueryPolicy)

    unverifiable_fails: bool = True  # the gate is a hard gate: "could not tell" fails
    not_retrieved_fails: bool = False  # cited URL that no recorded search returned
    max_attempts: int = Field(3, ge=1)
    time_budget: float | None = Field(None, gt=0)  # wall-clock seconds for a whole guarded run
    cost_budget: float | None = Field(None, gt=0)
    on_fail: Literal["raise", "return", "strip", "report"] = "return"

    @model_validator(mode="after")
    def _check(self) -> Policy:
        if self.fetch.url_timeout > self.fetch.answer_deadline:
            raise ValueError("fetch.url_timeout must not exceed fetch.answer_deadline")
        return self

    @classmethod
    def for_tests(cls) -> Policy:
        """A policy that allows loopback/private addresses (for local test servers)."""
        return cls(fetch=FetchPolicy(allow_private_addresses=True))

"""Per-request policy overrides, validated and bounded by the server's own policy.

A client may tighten the gate or switch axes, never widen what the server spends or reaches:

* numeric caps (timeouts, sizes, concurrency, redirects, retries, attempts, budgets, answer
  limits) may only go down to at most the server's value;
* where the server fetches and who it trusts (``allow_private_addresses``,
  ``allowed_private_hosts``, ``user_agent``, extraction processes and limits, the entailment
  model's path and encoder, the whole ``judge`` section) are the operator's alone;
* ``allowed_schemes`` may only shrink; ``entailment.backend`` may only be the server's, or a
  cheaper one (``word_overlap``, ``none``); the judge switches only when the server's judge is
  configured.

Anything else (thresholds, axis switches, ``on_fail``, ``repair``) is validated by
``Policy.replace``. A rejected override is a :class:`~citeguard.errors.PolicyError` naming the
field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from citeguard.errors import PolicyError
from citeguard.policy import Policy

__all__ = ["MAX_OVERRIDE_KEYS", "bounded_policy"]

MAX_OVERRIDE_KEYS = 64

# fields a client can never set
_FORBIDDEN: frozenset[str] = frozenset(
    {
        "judge",
        "fetch.allow_private_addresses",
        "fetch.allowed_private_hosts",
        "fetch.user_agent",
        "fetch.dns_cache_ttl",
        "fetch.extract_in",
        "fetch.extract_timeout",
        "fetch.extract_memory_mb",
        "fetch.extract_processes",
        "fetch.limits_redis_timeout",
        "fetch.limits_fallback_seconds",
        "fetch.per_host_rate_margin",
        "fetch.positive_ttl",
        "fetch.negative_ttl",
        "entailment.model_path",
        "entailment.encoder",
        "entailment.batch_size",
        "freshness.regime_model",
    }
)
# numeric fields a client may lower but not raise (None counts as "no cap": the highest)
_CAPPED: frozenset[str] = frozenset(
    {
        "fetch.connect_timeout",
        "fetch.url_timeout",
        "fetch.answer_deadline",
        "fetch.max_redirects",
        "fetch.max_body_bytes",
        "fetch.max_decompressed_bytes",
        "fetch.global_concurrency",
        "fetch.per_host_concurrency",
        "fetch.retries",
        "fetch.retry_after_cap",
        "fetch.max_html_chars",
        "fetch.max_html_depth",
        "fetch.max_html_nodes",
        "fetch.max_html_attributes",
        "fetch.max_jsonld_chars",
        "fetch.max_pdf_pages",
        "fetch.max_pdf_chars",
        "fetch.max_pdf_page_bytes",
        "fetch.max_pdf_seconds",
        "entailment.window_chars",
        "entailment.max_windows",
        "entailment.max_sentences_embedded",
        "max_answer_chars",
        "max_claims",
        "max_citations",
        "max_attempts",
        "time_budget",
        "cost_budget",
    }
)
# a per-host rate: a client may set one (or a lower one), never lift the server's
_RATE = "fetch.per_host_rate"
_CHEAP_BACKENDS = frozenset({"word_overlap", "none"})


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _bound(name: str, value: Any, server: Any) -> None:
    if name in _FORBIDDEN or name.split(".")[0] in _FORBIDDEN:
        raise PolicyError(f"policy.{name} is set by the server and cannot be overridden")
    if name in _CAPPED or name == _RATE:
        if value is None:
            if server is not None:
                raise PolicyError(
                    f"policy.{name}: the server's limit is {server}; it cannot be lifted"
                )
            return
        if not _number(value):
            raise PolicyError(f"policy.{name} must be a number")
        if server is not None and value > server:
            raise PolicyError(f"policy.{name} may be at most the server's {server}, not {value}")
        return
    if name == "fetch.allowed_schemes":
        if not isinstance(value, list | tuple | set | frozenset) or not set(value) <= set(server):
            raise PolicyError(f"policy.{name} may only be a subset of {sorted(server)}")
        return
    if name == "entailment.backend" and value != server and value not in _CHEAP_BACKENDS:
        raise PolicyError(
            f"policy.{name} may be the server's {server!r}, 'word_overlap' or 'none', not {value!r}"
        )


def bounded_policy(server: Policy, overrides: Mapping[str, Any] | None) -> Policy:
    """``server`` with the client's ``overrides`` applied, or a PolicyError naming what was
    refused. Sections are given as nested objects: ``{"fetch": {"url_timeout": 3}}``."""
    if not overrides:
        return server
    if not isinstance(overrides, Mapping):
        raise PolicyError("policy must be an object")
    updates: dict[str, Any] = {}
    count = 0
    for key, value in overrides.items():
        if not isinstance(key, str) or key not in type(server).model_fields:
            raise PolicyError(f"policy.{key} is not a policy field")
        current = getattr(server, key)
        if isinstance(value, Mapping) and isinstance(current, BaseModel):
            for sub, sub_value in value.items():
                count += 1
                if not isinstance(sub, str) or sub not in type(current).model_fields:
                    raise PolicyError(f"policy.{key}.{sub} is not a policy field")
                _bound(f"{key}.{sub}", sub_value, getattr(current, sub))
        else:
            count += 1
            if isinstance(current, BaseModel):
                raise PolicyError(f"policy.{key} must be an object of {key} settings")
            _bound(key, value, current)
        if count > MAX_OVERRIDE_KEYS:
            raise PolicyError(f"at most {MAX_OVERRIDE_KEYS} policy overrides per request")
        updates[key] = value
    return server.replace(**updates)

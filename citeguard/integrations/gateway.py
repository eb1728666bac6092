"""What a gateway does with an answer: the decision every gateway path shares.

A gateway (LiteLLM's proxy, Portkey's gateway) sits between the apps and the LLM. It cannot call
the LLM again, so on a failing verdict it has four choices, the ``on_fail`` setting:

* ``block``: refuse the answer with a clear error naming each failing citation and why;
* ``repair``: mend it from the pages the answer itself cites (:mod:`citeguard.repair`: a failing
  citation re-pointed at a cited page that supports the claim, quotes corrected and unsupported
  claims dropped with ``Policy.repair="full"``), else strip the failing citations and the
  claims that relied only on them (``on_fail="strip"``); the result is checked again and, if
  it still fails, blocked;
* ``annotate``: let it through with the verdict attached.

A passing answer always goes through unchanged. Settings come from the gateway's own
configuration, else the same ``CITEGUARD_*`` environment variables as ``citeguard serve``
(``CITEGUARD_POLICY``: a Policy JSON file; ``CITEGUARD_REDIS``: the Redis URL per-host fetch
limits are shared through; ``CITEGUARD_ON_FAIL``; ``CITEGUARD_STORE``: the snapshot store;
``CITEGUARD_JUDGE_MODEL``, ``CITEGUARD_JUDGE_BASE_URL``, ``CITEGUARD_JUDGE_API_KEY_ENV``: the
judge uncertain claims go to). ``on_fail`` also takes the library's ``Policy.on_fail`` words:
``raise`` is ``block``, ``strip`` is ``repair``, ``report`` and ``return`` are ``annotate``.

Nothing here imports a gateway's package: ``citeguard.integrations.litellm`` (the LiteLLM
class) and ``citeguard.serve.gateway_routes`` (LiteLLM's generic guardrail API, Portkey's
webhook) build on it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from citeguard.checks.judge import with_judge
from citeguard.errors import CiteguardError, PolicyError
from citeguard.guard import Guard
from citeguard.loop import ON_FAIL
from citeguard.models import Attempt, SearchRecord, Severity, Verdict, VerdictWord
from citeguard.parse import parse_answer
from citeguard.policy import Policy
from citeguard.providers.dispatch import read_provider
from citeguard.snapshot import open_store

__all__ = [
    "ON_FAIL_WORDS",
    "SETTINGS",
    "CitationsBlocked",
    "GatewayOutcome",
    "GatewaySettings",
    "OnFail",
    "annotation",
    "block_message",
    "build_guard",
    "chat_completion_with_text",
    "close_guard",
    "guard_answer",
    "question_of",
    "url_citations",
]

OnFail = Literal["block", "repair", "annotate"]
#: every word ``on_fail`` accepts → the gateway action
ON_FAIL_WORDS: Mapping[str, OnFail] = {
    "block": "block",
    "repair": "repair",
    "annotate": "annotate",
    "raise": "block",
    "strip": "repair",
    "report": "annotate",
    "return": "annotate",
}
#: the settings a gateway's own configuration (or ``CITEGUARD_<NAME>``) gives
SETTINGS = (
    "policy",
    "redis",
    "on_fail",
    "store",
    "judge_model",
    "judge_base_url",
    "judge_api_key_env",
)
_MAX_POLICY_BYTES = 1_000_000
_MAX_QUESTION_CHARS = 4_000
_MAX_REASONS = 5  # failing citations named in a block message
_MAX_REASON_CHARS = 200


def on_fail_word(value: object) -> OnFail:
    """The gateway action an ``on_fail`` setting names; a clear error for anything else."""
    word = ON_FAIL_WORDS.get(str(value).strip().lower()) if isinstance(value, str) else None
    if word is None:
        raise PolicyError(
            f"on_fail must be one of {', '.join(sorted(ON_FAIL_WORDS))}, not {value!r}"
        )
    return word


class GatewaySettings(BaseModel):
    """A gateway guardrail's settings. ``policy``: a Policy JSON file (as
    ``Policy.model_dump_json()`` writes it; keys left out keep their defaults); ``redis``: the
    Redis URL per-host fetch limits are shared through (extra ``redis``); ``on_fail``: what a
    failing answer gets (see the module docstring); ``store``: a snapshot store (an SQLite path
    or a ``redis://`` URL) every page and judge reply is recorded in.

    ``judge_model``: the claims the local model is unsure of go to this model at
    ``judge_base_url`` (an OpenAI-compatible API root, ``/v1`` added when missing: the
    provider the gateway already pays for, or the gateway itself), its key read from the
    variable ``judge_api_key_env`` (default ``Policy.judge.api_key_env``, ``OPENAI_API_KEY``),
    metered and budgeted like any judge (``Policy.judge`` prices, ``Policy.cost_budget``). A
    policy file that configures a judge of its own keeps it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: str | None = None
    redis: str | None = None
    on_fail: OnFail = "block"
    store: str | None = None
    judge_model: str | None = None
    judge_base_url: str | None = None
    judge_api_key_env: str | None = None

    @field_validator("on_fail", mode="before")
    @classmethod
    def _word(cls, value: object) -> OnFail:
        return on_fail_word(value)

    @model_validator(mode="after")
    def _judge(self) -> GatewaySettings:
        if self.judge_model and not self.judge_base_url:
            raise ValueError(
                "judge_model needs judge_base_url (CITEGUARD_JUDGE_BASE_URL): the API root "
                "the judge is asked at, e.g. https://api.openai.com/v1"
            )
        return self

    @classmethod
    def load(
        cls, params: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
    ) -> GatewaySettings:
        """Settings from ``params`` (e.g. LiteLLM's ``litellm_params``), else the ``CITEGUARD_*``
        variables of ``env`` (default: the process environment). Raises PolicyError."""
        env = os.environ if env is None else env
        params = params or {}
        values: dict[str, Any] = {}
        for name in SETTINGS:
            value = params.get(name)
            if value is None or value == "":
                value = env.get(f"CITEGUARD_{name.upper()}") or None
            if value is not None:
                values[name] = value
        try:
            return cls(**values)
        except PolicyError:
            raise
        except ValueError as e:  # pydantic's ValidationError
            raise PolicyError(f"invalid citeguard gateway settings: {e}") from e

    def load_policy(self) -> Policy:
        """The Policy the ``policy`` file holds (the default Policy without one), with the
        settings' judge when the policy configures none."""
        policy = self._read_policy()
        if self.judge_model and self.judge_base_url and not policy.judge.configured:
            policy = with_judge(
                policy,
                base_url=self.judge_base_url,
                model=self.judge_model,
                api_key_env=self.judge_api_key_env,
            )
        return policy

    def _read_policy(self) -> Policy:
        if self.policy is None:
            return Policy()
        path = Path(self.policy)
        try:
            with path.open("rb") as f:
                data = f.read(_MAX_POLICY_BYTES + 1)
        except OSError as e:
            raise PolicyError(f"cannot read the policy file {path}: {e}") from e
        if len(data) > _MAX_POLICY_BYTES:
            raise PolicyError(f"the policy file {path} is larger than {_MAX_POLICY_BYTES} bytes")
        try:
            return Policy.model_validate_json(data)
        except PolicyError as e:
            raise PolicyError(f"the policy file {path}: {e}") from e
        except ValueError as e:
            raise PolicyError(f"the policy file {path} is not a Policy as JSON: {e}") from e


def build_guard(settings: GatewaySettings, *, policy: Policy | None = None) -> Guard:
    """The Guard a gateway path uses: the settings' policy (or ``policy``), Redis URL and
    snapshot store (closed with the Guard by :func:`close_guard`)."""
    return Guard(
        settings.load_policy() if policy is None else policy,
        cache=open_store(settings.store) if settings.store else None,
        limits_redis=settings.redis,
    )


async def close_guard(guard: Guard) -> None:
    """Close a Guard :func:`build_guard` made, and its snapshot store."""
    await guard.aclose()
    if guard.cache is not None:
        close = getattr(guard.cache, "aclose", None) or getattr(guard.cache, "close", None)
        out = close() if close is not None else None
        if asyncio.iscoroutine(out):
            await out


class CitationsBlocked(CiteguardError):
    """A gateway refused an answer whose citations failed. ``status_code`` (400) and
    ``message`` are what gateways read off a guardrail's exception (LiteLLM answers the client
    ``{"error": {"message": ..., "code": "400"}}``)."""

    status_code = 400
    blocked_content = True

    def __init__(self, message: str, *, guardrail_name: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.guardrail_name = guardrail_name


@dataclass(frozen=True)
class GatewayOutcome:
    """What became of one answer. ``action``: ``pass`` (it passed; unchanged), ``annotate``
    (it failed and goes through with its verdict), ``repair`` (``text`` is the mended answer,
    which passed), ``block``. ``verdict``: the verdict on what the user gets (the repaired
    answer's after a repair); ``failed``: the verdict that failed, if one did."""

    action: Literal["pass", "annotate", "repair", "block"]
    verdict: Verdict
    message: str
    text: str | None = None
    failed: Verdict | None = None
    repairs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def blocked(self) -> bool:
        return self.action == "block"

    @property
    def word(self) -> VerdictWord:
        """What became of the answer, in the one vocabulary (``models.VerdictWord``): passed,
        repaired, or rejected (blocked, or annotated and let through)."""
        return _WORDS[self.action]

    def metadata(self) -> dict[str, Any]:
        """The verdict in brief, JSON-safe: what a gateway attaches to the answer. ``verdict``
        is the word ``citeguard serve`` gives the same outcome; ``action`` says what the
        gateway did with it (``pass``, ``repair``, ``annotate``, ``block``)."""
        shown = self.failed or self.verdict
        return {
            "verdict": self.word,
            "passed": self.word != "rejected",
            "action": self.action,
            "message": self.message,
            "failed_axes": _failed_axes(shown),
            "offending_urls": sorted(shown.offending_urls),
            "citations": [
                {"url": c.url, "status": c.status.value, "reason": c.reason}
                for c in shown.citations
            ],
            "repairs": self.repairs,
            "elapsed_ms": round(self.verdict.elapsed_ms, 1),
            # what the judge used on the answer the user gets (None: no judge was asked)
            "judge_usage": _usage(self.verdict),
        }


_WORDS: Mapping[str, VerdictWord] = {
    "pass": "passed",
    "repair": "repaired",
    "annotate": "rejected",
    "block": "rejected",
}


def question_of(messages: object) -> str:
    """The last user message of a chat request's ``messages`` (text parts joined), capped."""
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        return ""
    for message in reversed(messages):
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content[:_MAX_QUESTION_CHARS]
        if isinstance(content, Sequence):
            parts = [
                p.get("text", "")
                for p in content
                if isinstance(p, Mapping) and isinstance(p.get("text"), str)
            ]
            return " ".join(parts)[:_MAX_QUESTION_CHARS]
        return ""
    return ""


async def guard_answer(
    guard: Guard, answer: object, *, question: str = "", on_fail: OnFail = "block"
) -> GatewayOutcome:
    """Check ``answer`` (text, or a provider response with its citation objects) and decide
    per ``on_fail``. ``repair`` mends it from the pages it cites, else strips what failed."""
    if on_fail != "repair":
        verdict = await guard.check(answer, question=question)
        if verdict.passed:
            return GatewayOutcome("pass", verdict, "the citations passed")
        if on_fail == "annotate":
            return GatewayOutcome("annotate", verdict, annotation(verdict), failed=verdict)
        return GatewayOutcome("block", verdict, block_message(verdict), failed=verdict)

    return await _repair(guard, answer, question)


async def _repair(guard: Guard, answer: object, question: str) -> GatewayOutcome:
    """The loop's repair and ``strip`` steps on one answer, with no regeneration (the gateway
    holds no answer function): whatever the Guard's ``max_attempts`` and ``on_fail``."""

    async def recheck(
        a: object, q: str, searches: list[SearchRecord] | None, exclude: frozenset[str]
    ) -> Verdict:
        return await guard.check(a, question=q, searches=searches, exclude_urls=exclude)

    verdict = await recheck(answer, question, None, frozenset())
    if verdict.passed:
        return GatewayOutcome("pass", verdict, "the citations passed")
    provider = read_provider(answer)
    text = provider.synthesis().text if provider is not None else str(answer)
    attempts = [Attempt(number=1, answer=text, verdict=verdict)]
    repairer = guard.repairer(recheck, policy=guard.policy.replace(on_fail="strip"))
    repairs: list[dict[str, Any]] = []
    if repairer is not None:
        fixed = await repairer(attempts, question, [], guard.policy.time_budget)
        if fixed.attempt is not None and fixed.passed:
            return GatewayOutcome(
                "repair",
                fixed.attempt.verdict,
                f"citeguard repaired the answer ({fixed.summary()})",
                text=fixed.attempt.answer,
                failed=verdict,
                repairs=[r.model_dump(mode="json", exclude_none=True) for r in fixed.found],
            )
    stripped = await ON_FAIL["strip"].finish(attempts, "the citations failed", recheck)
    if stripped.passed:
        repairs += [{"kind": "strip", "before": u} for u in sorted(stripped.removed_urls)]
        return GatewayOutcome(
            "repair",
            stripped.verdict,
            f"citeguard repaired the answer: {stripped.message}",
            text=stripped.answer,
            failed=verdict,
            repairs=repairs,
        )
    return GatewayOutcome(
        "block", verdict, block_message(verdict) + " (repair could not fix it)", failed=verdict
    )


def block_message(verdict: Verdict, *, head: str = "citeguard blocked the answer") -> str:
    """One paragraph a user can act on: each failing citation and why, the failing axes."""
    # the offending URLs, and a page one claim failed on while it backs the others (a pair)
    bad = [
        c
        for c in verdict.citations
        if c.normalized_url in verdict.offending_urls or c.failure is not None
    ]
    bad = bad or [c for c in verdict.citations if c.status.value != "ok"]
    parts = [f"{c.url} ({c.status.value}: {_short(c.reason)})" for c in bad[:_MAX_REASONS]]
    if len(bad) > _MAX_REASONS:
        parts.append(f"and {len(bad) - _MAX_REASONS} more")
    axes = _failed_axes(verdict)
    head = f"{head}: {', '.join(axes) or 'the gate'} failed"
    if parts:
        return f"{head}; failing citations: " + "; ".join(parts)
    errors = [
        f.message
        for ax in verdict.axes.values()
        if ax.gating and not ax.passed
        for f in ax.findings
        if f.severity is Severity.ERROR
    ] + [f.message for f in verdict.findings if f.severity is Severity.ERROR]
    return f"{head}: " + "; ".join(_short(m) for m in errors[:_MAX_REASONS]) if errors else head


def annotation(verdict: Verdict) -> str:
    """What ``on_fail="annotate"`` says of a failing answer it lets through."""
    return block_message(verdict, head="citeguard let a failing answer through (on_fail=annotate)")


def _usage(verdict: Verdict) -> dict[str, Any] | None:
    usage = verdict.judge_usage
    return None if usage is None else usage.model_dump(mode="json")


def _failed_axes(verdict: Verdict) -> list[str]:
    return [name for name, ax in verdict.axes.items() if ax.gating and not ax.passed]


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_REASON_CHARS else text[: _MAX_REASON_CHARS - 1] + "…"


def url_citations(text: str) -> list[dict[str, Any]]:
    """Chat Completions ``url_citation`` annotations for the links of ``text`` (a repaired
    answer's: its markers moved, so the provider's offsets no longer hold)."""
    answer = parse_answer(text)
    out: list[dict[str, Any]] = []
    for c in answer.citations:
        if c.start < 0 or c.kind in ("annotation", "external", "structured"):
            continue
        out.append(
            {
                "type": "url_citation",
                "url_citation": {
                    "url": c.url,
                    "title": c.title or c.label or "",
                    "start_index": c.start,
                    "end_index": c.end,
                },
            }
        )
    return out


def chat_completion_with_text(response: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A Chat Completions response (its ``dict``) whose first choice says ``text`` instead,
    with its ``url_citation`` annotations rebuilt from ``text``'s links."""
    out = dict(response)
    choices = [dict(c) if isinstance(c, Mapping) else c for c in out.get("choices") or []]
    if not choices or not isinstance(choices[0], dict):
        raise CitationsBlocked("citeguard cannot place a repaired answer: no choices")
    message = dict(choices[0].get("message") or {})
    message["content"] = text
    message["annotations"] = url_citations(text)
    choices[0]["message"] = message
    out["choices"] = choices
    return out

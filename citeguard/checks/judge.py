"""The one client for OpenAI-compatible chat-completions judges, shared by the judge backends of
the entailment, freshness and query axes.

:class:`ChatJudge` posts one system + user message pair with ``response_format`` set to a JSON
object, and retries (tenacity) on 429, 5xx, connection errors, timeouts and malformed replies,
waiting an exponential backoff or the server's ``Retry-After`` (parsed by the fetcher's own
:func:`~citeguard.web.fetch.parse_retry_after`). Every failure ends as one
:class:`~citeguard.errors.JudgeError`, so callers catch one thing and fall back to their
deterministic rules. Its settings come from :class:`~citeguard.policy.JudgePolicy`
(``Policy.judge``); :func:`judge_for` builds a judge for an axis that switched it on.

Inside a guarded run (:func:`~citeguard.checks.judge_usage.judge_run`) every request is metered
(requests, the reply's ``usage`` tokens, their cost at the judge's prices), refused once the
run's cost budget is spent, traced as an LLM span, and recorded in or replayed from the run's
snapshot store (the ``judge`` layer, keyed by model and prompts): a replay never reaches the
judge, and a question it lacks is a :class:`~citeguard.errors.SnapshotMiss`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Generic, Self, TypeVar

import aiohttp
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from citeguard.checks.judge_usage import (
    LLM_COST_TOTAL,
    LLM_MODEL_NAME,
    LLM_TOKEN_COUNT_COMPLETION,
    LLM_TOKEN_COUNT_PROMPT,
    LLM_TOKEN_COUNT_TOTAL,
    JudgeRun,
    current_judge_run,
)
from citeguard.closing import AsyncClosing
from citeguard.errors import JudgeError, PolicyError, SnapshotMiss
from citeguard.policy import (
    DEFAULT_JUDGE_BACKOFF,
    DEFAULT_JUDGE_RETRIES,
    DEFAULT_JUDGE_TIMEOUT,
    JudgePolicy,
    Policy,
)
from citeguard.snapshot import JudgeRecord, SnapshotMode, judge_key
from citeguard.web.fetch import parse_retry_after

__all__ = [
    "RETRY_AFTER_CAP",
    "ChatJudge",
    "JudgeError",
    "judge_base_url",
    "judge_for",
    "with_judge",
]

RETRY_AFTER_CAP = 30.0  # longest wait between two judge attempts, whatever Retry-After says

T = TypeVar("T")
J = TypeVar("J", bound="ChatJudge")


def judge_base_url(root: str) -> str:
    """The chat-completions root (``.../v1``) of an API given with or without ``/v1``."""
    root = root.rstrip("/")
    return root if root.endswith("/v1") else root + "/v1"


def with_judge(
    policy: Policy, *, base_url: str, model: str, api_key_env: str | None = None
) -> Policy:
    """``policy`` whose judge is ``model`` at ``base_url`` (``/v1`` added when missing), the key
    from ``api_key_env`` (None: the policy's); the judge section's other settings (prices,
    timeout, retries) are the policy's. What ``citeguard serve --judge-model`` and the gateway
    settings' ``judge_model`` set: uncertain claims then go to this judge
    (``Policy.on_uncertain_mode``), metered and budgeted like any judge."""
    judge: dict[str, Any] = {"base_url": judge_base_url(base_url), "model": model}
    if api_key_env:
        judge["api_key_env"] = api_key_env
    return policy.replace(judge=judge)


# Some models wrap JSON in a code fence despite response_format.
_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:160]


def _reply_object(body: str) -> dict[str, Any]:
    """The JSON object in a chat-completions reply's first message, or a retryable JudgeError."""
    try:
        content = json.loads(body)["choices"][0]["message"]["content"]
        data = json.loads(_FENCE.sub("", str(content)))
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise JudgeError(
            "judge reply is not a JSON object",
            detail=f"invalid response (not a JSON object: {_first_line(exc)})",
            retryable=True,
        ) from exc
    if not isinstance(data, dict):
        raise JudgeError(
            "judge reply is not a JSON object",
            detail=f"invalid response (not a JSON object: a {type(data).__name__})",
            retryable=True,
        )
    return data


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, JudgeError) and exc.retryable


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _usage_of(body: str) -> tuple[int, int]:
    """(prompt_tokens, completion_tokens) of a chat-completions reply; (0, 0) when absent."""
    try:
        usage = json.loads(body).get("usage")
    except (ValueError, AttributeError):
        return 0, 0
    if not isinstance(usage, dict):
        return 0, 0
    return _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))


def _snippet(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass
class _Tally(Generic[T]):
    """One question's attempts: for the snapshot record, and the best partial answer so far."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    partial: tuple[T, dict[str, Any]] | None = None

    def record(
        self, model: str, reply: dict[str, Any] | None, error: JudgeError | None
    ) -> JudgeRecord:
        return JudgeRecord(
            model=model,
            reply=reply,
            error=error.detail if error is not None else None,
            message=str(error) if error is not None else None,
            retryable=error.retryable if error is not None else False,
            requests=self.requests,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
        )


class ChatJudge(AsyncClosing):
    """One OpenAI-compatible chat-completions judge: endpoint, model, key, retries and session.

    ``base_url`` is the API root (``.../v1``); requests go to ``/chat/completions``. A failed
    attempt that may succeed on another try (429, 5xx, connection trouble, a timeout, a reply
    that is not a JSON object or that ``parse`` rejects) is retried ``retries`` times, waiting
    ``backoff`` seconds doubled each retry, or the server's ``Retry-After`` when longer (at most
    :data:`RETRY_AFTER_CAP`). Pass ``session`` to share an aiohttp session (it is then not
    closed by :meth:`aclose`). Build one from a policy with :meth:`from_policy`.
    ``input_price_per_million`` / ``output_price_per_million`` price the tokens of each reply's
    ``usage`` for the run's meter (see the module docstring).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_JUDGE_TIMEOUT,
        retries: int = DEFAULT_JUDGE_RETRIES,
        backoff: float = DEFAULT_JUDGE_BACKOFF,
        session: aiohttp.ClientSession | None = None,
        input_price_per_million: float = 0.0,
        output_price_per_million: float = 0.0,
    ) -> None:
        if not base_url or not model:
            raise PolicyError("a judge needs a base_url and a model")
        if timeout <= 0 or retries < 0 or backoff < 0:
            raise PolicyError("a judge needs timeout > 0, retries >= 0 and backoff >= 0")
        if input_price_per_million < 0 or output_price_per_million < 0:
            raise PolicyError("a judge's token prices must not be negative")
        self._prices = (float(input_price_per_million), float(output_price_per_million))
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._api_key = api_key
        self._timeout = timeout
        self._retries = retries
        self._backoff = backoff
        self._session = session
        self._owns_session = session is None

    @classmethod
    def from_policy(
        cls,
        judge: JudgePolicy,
        *,
        api_key: str | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> Self:
        """A judge with ``judge``'s settings; the key defaults to ``$<judge.api_key_env>``.

        Raises :class:`PolicyError` when ``judge.base_url`` or ``judge.model`` is not set.
        """
        if not judge.base_url or not judge.model:
            raise PolicyError("the judge needs judge.base_url and judge.model")
        return cls(
            judge.base_url,
            judge.model,
            api_key if api_key is not None else os.environ.get(judge.api_key_env),
            timeout=judge.timeout,
            retries=judge.retries,
            backoff=judge.backoff,
            session=session,
            input_price_per_million=judge.input_price_per_million,
            output_price_per_million=judge.output_price_per_million,
        )

    @property
    def model(self) -> str:
        """The model this judge asks."""
        return self._model

    def cost_of(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The cost of these tokens at this judge's prices."""
        inp, out = self._prices
        return (prompt_tokens * inp + completion_tokens * out) / 1_000_000

    async def ask(
        self,
        system: str,
        user: str,
        parse: Callable[[dict[str, Any]], T],
        *,
        complete: Callable[[T], str | None] | None = None,
    ) -> T:
        """Ask the judge; ``parse`` of its reply's JSON object, or :class:`JudgeError`.

        ``parse`` may raise ``ValueError`` (pydantic's ``ValidationError`` included),
        ``KeyError``, ``TypeError`` or a :class:`JudgeError` for a reply it cannot use; the
        first three count as a malformed reply and are retried. ``complete``, when given, says
        what a parsed answer lacks (``None``: nothing): an incomplete answer is retried too,
        and when the retries are spent the last incomplete answer is returned, not an error.

        Inside a guarded run the question is metered, budgeted, traced and snapshotted (see the
        module docstring); in replay a question never recorded raises
        :class:`~citeguard.errors.SnapshotMiss`.
        """
        run = current_judge_run()
        if run is not None:
            run.meter.admit()
        store = run.store if run is not None else None
        if run is None or store is None:
            return (await self._attempts(system, user, parse, complete, run, _Tally[T]()))[0]
        key = judge_key(self._model, system, user)
        if run.mode is SnapshotMode.REPLAY:
            record = await store.get_judge(key)
            if record is None:
                raise SnapshotMiss("judge", f"{self._model}: {_snippet(user)}")
            return self._replayed(record, parse, run)
        tally = _Tally[T]()
        try:
            result, reply = await self._attempts(system, user, parse, complete, run, tally)
        except JudgeError as exc:
            if tally.requests:  # a question refused before any request is not recorded
                await store.put_judge(key, tally.record(self._model, None, exc))
            raise
        await store.put_judge(key, tally.record(self._model, reply, None))
        return result

    def _replayed(
        self, record: JudgeRecord, parse: Callable[[dict[str, Any]], T], run: JudgeRun
    ) -> T:
        run.meter.add(record.requests, record.prompt_tokens, record.completion_tokens, self._prices)
        if record.error is not None or record.reply is None:
            detail = record.error or "invalid response (nothing recorded)"
            raise JudgeError(
                record.message or f"judge failed: {detail}",
                detail=detail,
                retryable=record.retryable,
            )
        try:
            return parse(record.reply)
        except (ValueError, KeyError, TypeError) as exc:
            raise JudgeError(
                f"recorded judge reply is invalid: {_first_line(exc)}",
                detail=f"invalid response ({_first_line(exc)})",
            ) from exc

    async def _attempts(
        self,
        system: str,
        user: str,
        parse: Callable[[dict[str, Any]], T],
        complete: Callable[[T], str | None] | None,
        run: JudgeRun | None,
        tally: _Tally[T],
    ) -> tuple[T, dict[str, Any]]:
        """The retried requests: the answer and the reply object it came from."""
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self._retries + 1),
                wait=self._wait,
                retry=retry_if_exception(_is_retryable),
                reraise=True,
            ):
                with attempt:
                    if run is not None and tally.requests:
                        run.meter.admit()  # a retry is a request too
                    data = await self._post(system, user, run=run, tally=tally)
                    try:
                        result = parse(data)
                    except (ValueError, KeyError, TypeError) as exc:
                        raise JudgeError(
                            f"judge reply is invalid: {_first_line(exc)}",
                            detail=f"invalid response ({_first_line(exc)})",
                            retryable=True,
                        ) from exc
                    problem = complete(result) if complete is not None else None
                    if problem is None:
                        return result, data
                    tally.partial = (result, data)
                    raise JudgeError(
                        f"judge reply is incomplete: {problem}",
                        detail=f"incomplete response ({problem})",
                        retryable=True,
                    )
        except JudgeError:
            if tally.partial is not None:
                return tally.partial
            raise
        raise AssertionError("unreachable: tenacity either returns or reraises")

    def _wait(self, state: RetryCallState) -> float:
        base = self._backoff * 2.0 ** (state.attempt_number - 1)
        exc = state.outcome.exception() if state.outcome else None
        retry_after = exc.retry_after if isinstance(exc, JudgeError) else None
        return min(max(base, retry_after or 0.0), RETRY_AFTER_CAP)

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
            self._owns_session = True
        return self._session

    async def _post(
        self,
        system: str,
        user: str,
        *,
        run: JudgeRun | None = None,
        tally: _Tally[Any] | None = None,
    ) -> dict[str, Any]:
        """One attempt, metered and traced: the reply's JSON object, or :class:`JudgeError`."""
        span = run.span if run is not None else None
        scope = (
            span(
                "citeguard.judge",
                kind="LLM",
                input=user,
                attributes={LLM_MODEL_NAME: self._model},
            )
            if span is not None
            else nullcontext(None)
        )
        with scope as sp:
            if tally is not None:
                tally.requests += 1
            if run is not None:
                run.meter.add(1, 0, 0, self._prices)
            status, body, retry_after = await self._send(system, user)
            prompt, completion = _usage_of(body)
            if tally is not None:
                tally.prompt_tokens += prompt
                tally.completion_tokens += completion
            if run is not None:
                run.meter.add(0, prompt, completion, self._prices)
            _record_tokens(sp, prompt, completion, self.cost_of(prompt, completion))
            return self._reply(status, body, retry_after)

    async def _send(self, system: str, user: str) -> tuple[int, str, float | None]:
        """POST the messages: (HTTP status, body, Retry-After), or :class:`JudgeError`."""
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        payload = {
            "model": self._model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        }
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        try:
            async with self._get_session().post(
                self._url, json=payload, headers=headers, timeout=timeout
            ) as resp:
                body = await resp.text(errors="replace")
                status = resp.status
                retry_after = parse_retry_after(resp.headers.get("Retry-After"))
        except TimeoutError as exc:
            raise JudgeError(
                f"judge timed out after {self._timeout:g}s",
                detail=f"timed out after {self._timeout:g}s",
                retryable=True,
            ) from exc
        except aiohttp.ClientError as exc:
            detail = f"{type(exc).__name__}: {exc}"
            raise JudgeError(f"judge unreachable: {detail}", detail=detail, retryable=True) from exc
        return status, body, retry_after

    @staticmethod
    def _reply(status: int, body: str, retry_after: float | None) -> dict[str, Any]:
        """The reply's JSON object for a 2xx, else the :class:`JudgeError` its status means."""
        if status == 429 or status >= 500:
            raise JudgeError(
                f"judge returned HTTP {status}",
                detail=f"HTTP {status}",
                retryable=True,
                retry_after=retry_after,
            )
        if status >= 400:  # a bad key, a bad request: another try will not help
            detail = f"HTTP {status}: {body[:160]}"
            raise JudgeError(f"judge returned {detail}", detail=detail)
        return _reply_object(body)

    async def aclose(self) -> None:
        """Close the session this judge opened (a passed-in session is left open)."""
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None


def _record_tokens(span: Any, prompt: int, completion: int, cost: float) -> None:
    """Put a reply's token counts (and cost, when priced) on its LLM span; never raises."""
    if span is None:
        return
    attrs: dict[str, int | float] = {
        LLM_TOKEN_COUNT_PROMPT: prompt,
        LLM_TOKEN_COUNT_COMPLETION: completion,
        LLM_TOKEN_COUNT_TOTAL: prompt + completion,
    }
    if cost:
        attrs[LLM_COST_TOTAL] = cost
    for key, value in attrs.items():
        try:
            span.set_attribute(key, value)
        except Exception:  # tracing never fails a judge call
            continue


def judge_for(policy: Policy, cls: type[J], enabled: bool) -> J | None:
    """A ``cls`` judge built from ``policy.judge`` when ``enabled``, else ``None``.

    ``enabled`` is the axis's switch (e.g. ``policy.query.enabled and policy.query.use_judge``).
    A switched-on axis with no judge endpoint cannot happen: :class:`Policy` refuses it.
    """
    if not enabled or not policy.judge.configured:
        return None
    return cls.from_policy(policy.judge)

"""The one client for OpenAI-compatible chat-completions judges, shared by the judge backends of
the entailment, freshness and query axes.

:class:`ChatJudge` posts one system + user message pair with ``response_format`` set to a JSON
object, and retries (tenacity) on 429, 5xx, connection errors, timeouts and malformed replies,
waiting an exponential backoff or the server's ``Retry-After`` (parsed by the fetcher's own
:func:`~citeguard.web.fetch.parse_retry_after`). Every failure ends as one
:class:`~citeguard.errors.JudgeError`, so callers catch one thing and fall back to their
deterministic rules. Its settings come from :class:`~citeguard.policy.JudgePolicy`
(``Policy.judge``); :func:`judge_for` builds a judge for an axis that switched it on.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any, Self, TypeVar

import aiohttp
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from citeguard.closing import AsyncClosing
from citeguard.errors import JudgeError, PolicyError
from citeguard.policy import (
    DEFAULT_JUDGE_BACKOFF,
    DEFAULT_JUDGE_RETRIES,
    DEFAULT_JUDGE_TIMEOUT,
    JudgePolicy,
    Policy,
)
from citeguard.web.fetch import parse_retry_after

__all__ = ["RETRY_AFTER_CAP", "ChatJudge", "JudgeError", "judge_for"]

RETRY_AFTER_CAP = 30.0  # longest wait between two judge attempts, whatever Retry-After says

T = TypeVar("T")
J = TypeVar("J", bound="ChatJudge")

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


class ChatJudge(AsyncClosing):
    """One OpenAI-compatible chat-completions judge: endpoint, model, key, retries and session.

    ``base_url`` is the API root (``.../v1``); requests go to ``/chat/completions``. A failed
    attempt that may succeed on another try (429, 5xx, connection trouble, a timeout, a reply
    that is not a JSON object or that ``parse`` rejects) is retried ``retries`` times, waiting
    ``backoff`` seconds doubled each retry, or the server's ``Retry-After`` when longer (at most
    :data:`RETRY_AFTER_CAP`). Pass ``session`` to share an aiohttp session (it is then not
    closed by :meth:`aclose`). Build one from a policy with :meth:`from_policy`.
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
    ) -> None:
        if not base_url or not model:
            raise PolicyError("a judge needs a base_url and a model")
        if timeout <= 0 or retries < 0 or backoff < 0:
            raise PolicyError("a judge needs timeout > 0, retries >= 0 and backoff >= 0")
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
        )

    async def ask(self, system: str, user: str, parse: Callable[[dict[str, Any]], T]) -> T:
        """Ask the judge; ``parse`` of its reply's JSON object, or :class:`JudgeError`.

        ``parse`` may raise ``ValueError`` (pydantic's ``ValidationError`` included),
        ``KeyError``, ``TypeError`` or a :class:`JudgeError` for a reply it cannot use; the
        first three count as a malformed reply and are retried.
        """
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(self._retries + 1),
            wait=self._wait,
            retry=retry_if_exception(_is_retryable),
            reraise=True,
        ):
            with attempt:
                data = await self._post(system, user)
                try:
                    return parse(data)
                except (ValueError, KeyError, TypeError) as exc:
                    raise JudgeError(
                        f"judge reply is invalid: {_first_line(exc)}",
                        detail=f"invalid response ({_first_line(exc)})",
                        retryable=True,
                    ) from exc
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

    async def _post(self, system: str, user: str) -> dict[str, Any]:
        """One attempt: POST the messages; the reply's JSON object, or :class:`JudgeError`."""
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


def judge_for(policy: Policy, cls: type[J], enabled: bool) -> J | None:
    """A ``cls`` judge built from ``policy.judge`` when ``enabled``, else ``None``.

    ``enabled`` is the axis's switch (e.g. ``policy.query.enabled and policy.query.use_judge``).
    A switched-on axis with no judge endpoint cannot happen: :class:`Policy` refuses it.
    """
    if not enabled or not policy.judge.configured:
        return None
    return cls.from_policy(policy.judge)

"""A small client for OpenAI-compatible chat-completions judges (shared by the optional judge
backends of the freshness and query axes).

Every failure becomes :class:`JudgeError`, so callers catch one thing and fall back to their
deterministic rules.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp


class JudgeError(Exception):
    """A judge call that gave no usable answer; callers fall back to the deterministic rules."""


async def _chat_json(
    session: aiohttp.ClientSession,
    url: str,
    *,
    model: str,
    api_key: str | None,
    system: str,
    user: str,
    limit_s: float,
) -> dict[str, Any]:
    """POST one chat completion to an OpenAI-compatible endpoint; the reply's JSON object.

    Raises :class:`JudgeError` for every failure (HTTP status, timeout, connection, a reply
    that is not a JSON object), so callers have one thing to catch.
    """
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    payload = {
        "model": model,
        "temperature": 0,
        "response_format": {"type": "json_object"},
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    try:
        async with session.post(
            url, json=payload, headers=headers, timeout=aiohttp.ClientTimeout(total=limit_s)
        ) as resp:
            body = await resp.text()
            if resp.status != 200:
                raise JudgeError(f"judge returned HTTP {resp.status}")
    except TimeoutError as exc:
        raise JudgeError(f"judge timed out after {limit_s:g}s") from exc
    except aiohttp.ClientError as exc:
        raise JudgeError(f"judge unreachable: {type(exc).__name__}") from exc
    try:
        content = json.loads(body)["choices"][0]["message"]["content"]
        # Some models wrap JSON in a code fence despite response_format.
        text = str(content).strip().removeprefix("```json").removeprefix("```").removesuffix("```")
        data = json.loads(text)
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise JudgeError("judge reply is not a JSON object") from exc
    if not isinstance(data, dict):
        raise JudgeError("judge reply is not a JSON object")
    return data


class ChatJudge:
    """Holds the endpoint, model, key and (owned or shared) aiohttp session of one judge.

    ``base_url`` is the API root (``.../v1``); requests go to ``/chat/completions``. Pass
    ``session`` to share an aiohttp session (it is then not closed by :meth:`aclose`).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._api_key = api_key
        self._timeout = timeout
        self._session = session
        self._owns_session = session is None

    async def _ask(self, system: str, user: str) -> dict[str, Any]:
        """One judge call; its reply's JSON object, or :class:`JudgeError`."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return await _chat_json(
            self._session,
            self._url,
            model=self._model,
            api_key=self._api_key,
            system=system,
            user=user,
            limit_s=self._timeout,
        )

    async def aclose(self) -> None:
        """Close the session this judge opened (a passed-in session is left open)."""
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

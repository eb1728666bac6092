"""The upstream LLM API: one aiohttp session, JSON calls and server-sent event streams.

Every call has a connect timeout, a read timeout (the longest silence between two reads) and a
size cap; every failure is an :class:`UpstreamError` with the HTTP status the client should
see (502 for a bad answer, 504 for a timeout) and the upstream's own status and body when it
answered.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from citeguard.errors import CiteguardError

__all__ = ["SseEvent", "Upstream", "UpstreamError", "UpstreamStream"]

_MAX_EVENT_BYTES = 1024 * 1024  # one SSE event (all its data lines)
# request headers passed on to the upstream (the rest are the client's hop or ours)
_FORWARDED = ("anthropic-version", "anthropic-beta", "openai-organization", "openai-project")


class UpstreamError(CiteguardError):
    """The upstream could not be reached, timed out, or gave an answer that cannot be used.

    ``status``: the HTTP status to answer the client with; ``upstream_status`` and ``body``: the
    upstream's own, when it answered with an error (passed through for a 4xx)."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 502,
        code: str = "upstream_error",
        upstream_status: int | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.upstream_status = upstream_status
        self.body = body


@dataclass(frozen=True)
class SseEvent:
    """One server-sent event: its ``event`` name (None when unnamed) and its ``data`` text."""

    event: str | None
    data: str

    def json(self) -> Any:
        try:
            return json.loads(self.data)
        except ValueError:
            raise UpstreamError(
                "the upstream sent an event whose data is not JSON", code="upstream_bad_stream"
            ) from None

    def encode(self) -> bytes:
        head = f"event: {self.event}\n" if self.event else ""
        lines = "".join(f"data: {ln}\n" for ln in self.data.split("\n"))
        return f"{head}{lines}\n".encode()


def sse(data: Any, event: str | None = None) -> bytes:
    """One event's bytes, ``data`` as compact JSON."""
    return SseEvent(event, json.dumps(data, separators=(",", ":"))).encode()


class UpstreamStream:
    """An open streaming answer: iterate its events; :meth:`aclose` when done."""

    def __init__(self, response: aiohttp.ClientResponse, read_timeout: float) -> None:
        self._response = response
        self._read_timeout = read_timeout

    async def __aiter__(self) -> AsyncIterator[SseEvent]:
        event: str | None = None
        data: list[str] = []
        size = 0
        buffer = b""
        content = self._response.content
        while True:
            # whatever has arrived, split into lines here: one await per network read, not per
            # line; the session's sock_read timeout bounds each read
            try:
                raw = await content.readany()
            except aiohttp.ServerTimeoutError:
                raise UpstreamError(
                    f"the upstream's stream was silent for {self._read_timeout:g}s",
                    status=504,
                    code="upstream_timeout",
                ) from None
            except (aiohttp.ClientError, ValueError) as e:
                raise UpstreamError(
                    f"the upstream's stream broke: {type(e).__name__}", code="upstream_bad_stream"
                ) from None
            if not raw:
                if data:
                    yield SseEvent(event, "\n".join(data))
                raise UpstreamError(
                    "the upstream closed the stream before it ended", code="upstream_closed"
                )
            buffer += raw
            *lines, buffer = buffer.split(b"\n")
            if len(buffer) > _MAX_EVENT_BYTES:
                raise UpstreamError(
                    "the upstream sent a line over 1 MiB", code="upstream_bad_stream"
                )
            for raw_line in lines:
                line = raw_line.decode("utf-8", "replace").rstrip("\r")
                if not line:
                    if data:
                        yield SseEvent(event, "\n".join(data))
                    event, data, size = None, [], 0
                    continue
                if line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    event = value
                elif name == "data":
                    size += len(value)
                    if size > _MAX_EVENT_BYTES:
                        raise UpstreamError(
                            "the upstream sent an event over 1 MiB", code="upstream_bad_stream"
                        )
                    data.append(value)

    async def aclose(self) -> None:
        self._response.release()
        self._response.close()


class Upstream:
    """The configured upstream root; one connection pool for the app's life."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        connect_timeout: float,
        read_timeout: float,
        max_bytes: int,
        auth_style: str = "bearer",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._auth_style = auth_style
        self._read_timeout = read_timeout
        self._max_bytes = max_bytes
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout, sock_read=read_timeout
        )
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout, auto_decompress=True)
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _url(self, path: str) -> str:
        # a root given with /v1 (https://api.openai.com/v1) and one without both work
        if self.base_url.endswith("/v1") and path.startswith("/v1/"):
            return self.base_url + path[3:]
        return self.base_url + path

    def _headers(self, incoming: Mapping[str, str]) -> dict[str, str]:
        """The upstream request's headers: the provider headers the client sent, and the key:
        the server's own when configured, else the client's (``incoming["credential"]``)."""
        headers = {"content-type": "application/json"}
        for name in _FORWARDED:
            if name in incoming:
                headers[name] = incoming[name]
        key = self._api_key if self._api_key is not None else incoming.get("credential", "")
        if key:
            if self._auth_style == "x-api-key":
                headers["x-api-key"] = key
            else:
                headers["authorization"] = f"Bearer {key}"
        return headers

    async def _post(self, path: str, body: Mapping[str, Any], incoming: Mapping[str, str]) -> Any:
        try:
            return await self._client().post(
                self._url(path), json=body, headers=self._headers(incoming)
            )
        except TimeoutError:
            raise UpstreamError(
                "the upstream did not answer in time", status=504, code="upstream_timeout"
            ) from None
        except aiohttp.ClientError as e:
            raise UpstreamError(
                f"cannot reach the upstream: {type(e).__name__}", code="upstream_unreachable"
            ) from None

    async def _error_of(self, response: aiohttp.ClientResponse) -> UpstreamError:
        try:
            async with asyncio.timeout(self._read_timeout):
                raw = await response.content.read(64 * 1024)
        except (TimeoutError, aiohttp.ClientError):
            raw = b""
        finally:
            response.release()
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")[:500]
        # an upstream 4xx is the client's to see (a bad model name, a bad key); a 5xx is ours
        client_side = 400 <= response.status < 500
        return UpstreamError(
            f"the upstream answered {response.status}",
            status=response.status if client_side else 502,
            code="upstream_status",
            upstream_status=response.status,
            body=body if client_side else None,
        )

    async def post_json(
        self, path: str, body: Mapping[str, Any], incoming: Mapping[str, str]
    ) -> dict[str, Any]:
        """POST ``body``; the JSON object it answers, or an UpstreamError."""
        response = await self._post(path, body, incoming)
        if response.status != 200:
            err = await self._error_of(response)
            raise err
        try:
            async with asyncio.timeout(self._read_timeout):
                raw = await response.content.read(self._max_bytes + 1)
        except TimeoutError:
            raise UpstreamError(
                "the upstream did not finish its answer in time",
                status=504,
                code="upstream_timeout",
            ) from None
        except aiohttp.ClientError as e:
            raise UpstreamError(
                f"the upstream's answer broke off: {type(e).__name__}", code="upstream_bad_answer"
            ) from None
        finally:
            response.release()
        if len(raw) > self._max_bytes:
            raise UpstreamError("the upstream's answer is too large", code="upstream_too_large")
        try:
            data = json.loads(raw)
        except ValueError:
            raise UpstreamError(
                "the upstream's answer is not JSON", code="upstream_bad_answer"
            ) from None
        if not isinstance(data, dict):
            raise UpstreamError(
                "the upstream's answer is not a JSON object", code="upstream_bad_answer"
            )
        return data

    async def open_stream(
        self, path: str, body: Mapping[str, Any], incoming: Mapping[str, str]
    ) -> UpstreamStream:
        """POST ``body`` (with ``stream: true``); the open event stream, or an UpstreamError."""
        response = await self._post(path, body, incoming)
        if response.status != 200:
            err = await self._error_of(response)
            raise err
        ctype = response.headers.get("content-type", "")
        if "text/event-stream" not in ctype:
            response.release()
            raise UpstreamError(
                f"the upstream answered a stream request with {ctype or 'no content type'}",
                code="upstream_bad_stream",
            )
        return UpstreamStream(response, self._read_timeout)

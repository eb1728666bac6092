"""A cap on a request's head (request line and headers), whatever HTTP parser uvicorn runs.

uvicorn's httptools protocol reads a request head of any size (llhttp buffers a header until it
ends: 100 MB of header was read whole and answered), and its h11 protocol answers 400 past
h11's own buffer limit. Both are wrapped here: the bytes a connection sends while the parser is
still in a request's head are counted after each read, and past ``max_header_bytes`` the
connection is answered ``431 Request Header Fields Too Large`` and closed. What a parser holds
is then at most the cap plus one read (asyncio reads at most 256 KiB at a time).

uvicorn offers no knob for this with httptools (``h11_max_incomplete_event_size`` covers h11
only, and answers 400), hence these two small subclasses rather than a setting.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["HEAD_TOO_LARGE", "protocol_class"]

_BODY = (
    b'{"error": {"type": "invalid_request_error", "code": "request_header_too_large", '
    b'"message": "the request line and headers are too large"}}'
)
HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: application/json\r\n"
    b"content-length: " + str(len(_BODY)).encode() + b"\r\n"
    b"connection: close\r\n\r\n" + _BODY
)


class _HeadCap:
    """Counts a request head's bytes; the subclass says when the parser is inside a head."""

    max_header_bytes = 64 * 1024
    _head_bytes = 0
    transport: asyncio.Transport

    def _in_head(self) -> bool:
        raise NotImplementedError

    def _over(self, received: int) -> bool:
        """Whether the head read so far (``received`` more bytes) is past the cap; resets the
        count once a head is complete."""
        if not self._in_head():
            self._head_bytes = 0
            return False
        self._head_bytes += received
        if self._head_bytes <= self.max_header_bytes:
            return False
        if not self.transport.is_closing():
            self.transport.write(HEAD_TOO_LARGE)
            self.transport.close()
        return True


class CappedHttpTools(_HeadCap, HttpToolsProtocol):
    """uvicorn's httptools protocol with the head cap."""

    _reading_head = True

    def _in_head(self) -> bool:
        return self._reading_head

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return
        super().data_received(data)
        self._over(len(data))

    def on_message_begin(self) -> None:
        self._reading_head = True
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._reading_head = False
        self._head_bytes = 0
        super().on_headers_complete()


class CappedH11(_HeadCap, H11Protocol):
    """uvicorn's h11 protocol with the head cap (h11's own buffer limit set above it, so the
    answer is this 431, not h11's 400)."""

    conn: Any

    def _in_head(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return
        super().data_received(data)
        self._over(len(data))


def protocol_class(parser: Literal["httptools", "h11"], max_header_bytes: int) -> type[Any]:
    """The protocol class for ``uvicorn.Config(http=...)``: ``parser`` with the head cap."""
    base: type[_HeadCap] = CappedHttpTools if parser == "httptools" else CappedH11
    return type(base.__name__, (base,), {"max_header_bytes": max_header_bytes})

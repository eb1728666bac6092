"""A cap on a request's head (request line and headers), whatever HTTP parser uvicorn runs.

uvicorn's httptools protocol reads a request head of any size (llhttp buffers a header until it
ends: 100 MB of header was read whole and answered), and its h11 protocol answers 400 past
h11's own buffer limit. Both are wrapped here: each read is looked at *before* the parser gets
it. While the parser is in a request's head, the head's bytes are counted up to where the head
ends in that read (its blank line included) or to the read's end; a head past
``max_header_bytes`` never reaches the parser: the connection is answered ``431 Request Header
Fields Too Large`` and closed. A head of exactly the cap is served, one byte more is not, however
the head arrives (in one read or many); a request pipelined behind another in one read is
counted from the next read. What a parser holds is then at most the cap (plus one read, for such
a pipelined head).

uvicorn offers no knob for this with httptools (``h11_max_incomplete_event_size`` covers h11
only, and answers 400), hence these two small subclasses rather than a setting.
"""

from __future__ import annotations

import asyncio
import re
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


#: where a head ends: its blank line (bare LF line ends too, which the parsers may take)
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_TAIL = 3  # bytes of a read kept: a head's end may straddle two reads


class _HeadCap:
    """Counts a request head's bytes before the parser reads them; the subclass says when the
    parser is inside a head."""

    max_header_bytes = 64 * 1024
    _head_bytes = 0  # of the head under way, read so far
    _tail = b""  # the last bytes of it
    _open = False  # the last read went on with a head and did not end it
    transport: asyncio.Transport

    def _in_head(self) -> bool:
        raise NotImplementedError

    def _refused(self, data: bytes) -> bool:
        """Before the parser reads ``data``: whether the head it begins or goes on with is
        past the cap, counted to where the head ends in ``data`` or to its end; if so the
        connection is answered 431 and closed."""
        self._open = False
        if not self._in_head():
            self._head_bytes, self._tail = 0, b""
            return False
        window = self._tail + data
        # empty lines before a request line are not the end of its head
        skip = len(window) - len(window.lstrip(b"\r\n")) if self._head_bytes == 0 else 0
        end = _HEAD_END.search(window, skip)
        size = self._head_bytes + (end.end() - len(self._tail) if end else len(data))
        if size <= self.max_header_bytes:
            self._open = end is None  # the head goes on past this read
            return False
        if not self.transport.is_closing():
            self.transport.write(HEAD_TOO_LARGE)
            self.transport.close()
        return True

    def _counted(self, data: bytes) -> None:
        """After the parser read ``data``: a head it neither began nor ended, counted. A head
        that ended in ``data`` starts the count again at the next read (a request pipelined
        behind another in the same read is counted from the read after)."""
        if self._open and self._in_head():
            self._head_bytes += len(data)
            self._tail = (self._tail + data)[-_TAIL:]
        else:
            self._head_bytes, self._tail = 0, b""


class CappedHttpTools(_HeadCap, HttpToolsProtocol):
    """uvicorn's httptools protocol with the head cap."""

    _reading_head = True

    def _in_head(self) -> bool:
        return self._reading_head

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing() or self._refused(data):
            return
        super().data_received(data)
        self._counted(data)

    def on_message_begin(self) -> None:
        self._reading_head = True
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._reading_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._reading_head = True  # what comes next on the connection is a request's head
        super().on_message_complete()


class CappedH11(_HeadCap, H11Protocol):
    """uvicorn's h11 protocol with the head cap (h11's own buffer limit set above it, so the
    answer is this 431, not h11's 400)."""

    conn: Any

    def _in_head(self) -> bool:
        # IDLE: before a request; DONE: a request read, what comes next is a pipelined one's
        return self.conn.their_state in (h11.IDLE, h11.DONE)

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing() or self._refused(data):
            return
        super().data_received(data)
        self._counted(data)


def protocol_class(parser: Literal["httptools", "h11"], max_header_bytes: int) -> type[Any]:
    """The protocol class for ``uvicorn.Config(http=...)``: ``parser`` with the head cap."""
    base: type[_HeadCap] = CappedHttpTools if parser == "httptools" else CappedH11
    return type(base.__name__, (base,), {"max_header_bytes": max_header_bytes})

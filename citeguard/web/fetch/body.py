"""Bodies: incremental Content-Encoding decoding under a decompressed-size cap (a gzip or brotli
bomb never grows memory past it), and the errors a body read ends in."""

from __future__ import annotations

import zlib
from typing import Any

_DECODE_STEP = 1024 * 1024  # the most one brotli call may inflate (memory per step)

try:  # brotli is optional; without it we do not advertise "br" at all
    import brotli as _brotli  # type: ignore[import-not-found, import-untyped, unused-ignore]
except ImportError:  # pragma: no cover - depends on the environment
    _brotli = None


def _brotli_can_limit() -> bool:
    """Whether this brotli bounds each output (``output_buffer_limit``, brotli >= 1.2)."""
    try:
        _brotli.Decompressor().process(b"", output_buffer_limit=1)
    except TypeError:  # pragma: no cover - older brotli: one call may inflate without bound
        return False
    return True


if _brotli is not None and not _brotli_can_limit():  # pragma: no cover - old brotli
    # 1.6 kB of brotli can inflate to 2 GB in one process() call; without an output limit we
    # cannot stop it part-way, so "br" is neither advertised nor decoded (unsupported_type)
    _brotli = None

_ACCEPT_ENCODING = "gzip, deflate, br" if _brotli is not None else "gzip, deflate"

# --------------------------------------------------------------------------------------------
# Bodies
# --------------------------------------------------------------------------------------------


class _TooLarge(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Unsupported(Exception):
    pass


class _Corrupt(Exception):
    """A body its Content-Encoding cannot decode (zlib reports its own ``zlib.error``)."""


class _Decoder:
    """Incremental Content-Encoding decoder whose output never exceeds ``limit`` bytes in total."""

    def __init__(self, encoding: str, limit: int) -> None:
        self.encoding = encoding
        self.limit = limit
        self.total = 0
        self._raw_deflate_tried = False
        self._zlib: Any = None
        self._brotli: Any = None
        if encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS)
        elif encoding == "br" and _brotli is not None:
            self._brotli = _brotli.Decompressor()
        elif encoding not in ("", "identity"):
            raise _Unsupported(f"content-encoding {encoding!r} is not supported")

    def _count(self, data: bytes) -> bytes:
        self.total += len(data)
        if self.total > self.limit:
            raise _TooLarge(
                f"decompressed body exceeds {self.limit} bytes ({self.encoding} bomb or huge page)"
            )
        return data

    def feed(self, chunk: bytes) -> bytes:
        if self._zlib is None and self._brotli is None:
            return self._count(chunk)
        if self._brotli is not None:
            return self._feed_brotli(chunk)
        out: list[bytes] = []
        data = chunk
        while data:
            room = self.limit - self.total + 1
            try:
                piece = self._zlib.decompress(data, room)
            except zlib.error:
                if self.encoding == "deflate" and not self._raw_deflate_tried and not self.total:
                    # Many servers send raw DEFLATE under "deflate"; retry without the header.
                    self._raw_deflate_tried = True
                    self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise
            out.append(self._count(piece))
            data = self._zlib.unconsumed_tail
            if self._zlib.eof:
                rest = self._zlib.unused_data
                if rest and self.encoding in ("gzip", "x-gzip"):
                    self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)  # next gzip member
                    data = rest
                else:
                    break
        return b"".join(out)

    def _feed_brotli(self, chunk: bytes) -> bytes:
        # Every process() call is capped at the room left (plus one byte, to detect the
        # overflow): a bomb stops at the cap instead of inflating in one call. While the output
        # limit holds data back, brotli wants empty input until it can accept more.
        out: list[bytes] = []
        data = chunk
        while True:
            room = min(self.limit - self.total + 1, _DECODE_STEP)
            try:
                piece = self._brotli.process(data, output_buffer_limit=room)
            except _brotli.error as exc:
                raise _Corrupt(str(exc)) from None
            out.append(self._count(piece))
            data = b""
            if self._brotli.is_finished() or self._brotli.can_accept_more_data():
                return b"".join(out)
            if not piece:  # pragma: no cover - defensive: no progress, no more input
                raise _Corrupt("the brotli decoder made no progress")

"""Charset: the bytes of a body as text, decoded as a browser would (header, BOM, ``<meta>``,
detection)."""

from __future__ import annotations

import codecs
import re

from citeguard.web.page.base import _DETECT_SAMPLE_BYTES, _LOG

# --------------------------------------------------------------------------------------------
# Charset
# --------------------------------------------------------------------------------------------

# WHATWG maps these labels to supersets; decoding with the superset matches what browsers show.
_CHARSET_ALIASES = {
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "l1": "cp1252",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
    "windows-1252": "cp1252",
    "shift_jis": "cp932",
    "shift-jis": "cp932",
    "sjis": "cp932",
    "x-sjis": "cp932",
    "ms_kanji": "cp932",
    "windows-31j": "cp932",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "euc-kr": "cp949",
    "ks_c_5601-1987": "cp949",
    "tis-620": "cp874",
    "iso-8859-9": "cp1254",
    "iso-8859-11": "cp874",
    # a <meta> can never truthfully declare UTF-16 (it would not be ASCII-readable)
    "utf-16": "utf-8",
    "utf-16le": "utf-8",
    "utf-16be": "utf-8",
}
_TEXT_CODEC_BLOCKLIST = frozenset({"base64", "hex", "rot13", "zlib", "bz2", "quopri", "uu"})
_META_CHARSET_RE = re.compile(
    rb"<meta[^>]{0,512}?charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]{1,40})", re.I
)
_CT_CHARSET_RE = re.compile(r"charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]{1,40})", re.I)


def _codec_for(label: str | None) -> str | None:
    """A Python codec name for a charset label, or None when the label is unknown or unsafe."""
    if not label:
        return None
    name = label.strip().strip("\"'").lower()
    name = _CHARSET_ALIASES.get(name, name)
    try:
        info = codecs.lookup(name)
    except LookupError:
        return None
    if info.name in _TEXT_CODEC_BLOCKLIST or info.name.endswith("_codec"):
        return None
    return info.name


def _is_utf8_with_non_ascii(body: bytes) -> bool:
    if body.isascii():
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _decode(body: bytes, header_charset: str | None, *, sniff_meta: bool) -> tuple[str, str]:
    """Decode ``body``: BOM, then the header charset, then ``<meta>``, then detection.

    A legacy single-byte declaration is overridden when the bytes are valid UTF-8 containing
    non-ASCII: that combination is a page re-saved as UTF-8 with a stale declaration, and
    following the declaration would only produce mojibake.
    """
    for bom, codec in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if body.startswith(bom):
            return body[len(bom) :].decode(codec, errors="replace"), codec
    declared = _codec_for(header_charset)
    if declared is None and sniff_meta:
        m = _META_CHARSET_RE.search(body[:4096])
        if m:
            declared = _codec_for(m.group(1).decode("ascii", "replace"))
    if declared is not None:
        if declared != "utf-8" and _is_utf8_with_non_ascii(body):
            return body.decode("utf-8"), "utf-8"
        return body.decode(declared, errors="replace"), declared
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    codec = _detect_charset(body)
    return body.decode(codec, errors="replace"), codec


def _detect_charset(body: bytes) -> str:
    """charset_normalizer's pick; among equally good candidates, windows-1252 wins.

    Short Western European texts decode equally well as cp1250, cp1252 or cp1257; browsers fall
    back to windows-1252 for undeclared legacy pages, so a tie is settled the same way.
    """
    from charset_normalizer import from_bytes

    try:
        matches = list(from_bytes(body[:_DETECT_SAMPLE_BYTES]))
    except Exception:  # detection is best effort; a failure must not fail extraction
        _LOG.debug("charset detection failed", exc_info=True)
        matches = []
    if matches:
        best = matches[0]
        tied = [
            m
            for m in matches
            if abs(m.chaos - best.chaos) < 1e-9 and abs(m.coherence - best.coherence) < 1e-9
        ]
        if any("cp1252" in m.could_be_from_charset for m in tied):
            return "cp1252"
        codec = _codec_for(best.encoding)
        if codec is not None:
            return codec
    return "cp1252"

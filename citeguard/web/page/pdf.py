"""PDF and plain text: pypdf text, bounded in pages, characters, page weight and time, with
line-break hyphenation undone."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from citeguard.dates import (
    parse_date,
    parse_pdf_date,
)
from citeguard.models import Page
from citeguard.policy import FetchPolicy
from citeguard.web.page.base import _DEFAULT_LIMITS, _LOG, _plausible
from citeguard.web.page.text import _BLOCK_MARK, _clean_text

# --------------------------------------------------------------------------------------------
# PDF and plain text
# --------------------------------------------------------------------------------------------

# "infor-\nmation": a hyphen ending a line, after a letter, before a lower-case letter
_HYPHEN_BREAK_RE = re.compile(
    r"(?<=[^\W\d_])[-\u00ad\u2010][ \t]*\r?\n\s*(?=[^\W\d_])(?=[^A-ZÀ-ÖØ-Þ])"
)
# "COVID-\n19", "Anglo-\nSaxon": the hyphen belongs to the word; only the line break goes
_HYPHEN_KEEP_RE = re.compile(r"(?<=\w)([-\u2010])[ \t]*\r?\n\s*(?=\w)")


def dehyphenate(text: str) -> str:
    """Undo line-break hyphenation: ``"infor-\\nmation"`` → ``"information"``.

    A hyphen at a line end is dropped when a lower-case letter follows; before a digit or a
    capital ("COVID-\\n19", "Anglo-\\nSaxon") it is a real hyphen, so only the line break goes.
    """
    text = _HYPHEN_BREAK_RE.sub("", text)
    return _HYPHEN_KEEP_RE.sub(r"\1", text)


class _PdfBudget(Exception):
    """Raised from inside pypdf's text walk once the document's time is spent."""


#: Form XObjects and fonts weighed per page, at most (a page may name thousands).
_MAX_PDF_RESOURCES = 256


def _pdf_weight(page: Any, limit: int, deadline: float) -> int:
    """Decoded bytes of what extracting ``page``'s text parses: its content streams, the form
    XObjects it may draw and the character maps of their fonts (counting stops past ``limit``)."""
    from pypdf.generic import StreamObject

    contents = page.get_contents()
    total = len(contents.get_data()) if contents is not None else 0
    seen: set[int] = set()
    todo = [page.get("/Resources")]
    while todo and total <= limit and len(seen) < _MAX_PDF_RESOURCES:
        if time.monotonic() > deadline:
            raise _PdfBudget
        resources = todo.pop()
        resources = resources.get_object() if resources is not None else None
        if not isinstance(resources, dict):
            continue
        for group in ("/XObject", "/Font"):
            entries = resources.get(group)
            entries = entries.get_object() if entries is not None else None
            if not isinstance(entries, dict):
                continue
            for ref in list(entries.values())[:_MAX_PDF_RESOURCES]:
                obj = ref.get_object() if ref is not None else None
                if obj is None or id(obj) in seen:
                    continue
                seen.add(id(obj))
                if group == "/Font" and isinstance(obj, dict):
                    cmap = obj.get("/ToUnicode")
                    cmap = cmap.get_object() if cmap is not None else None
                    if isinstance(cmap, StreamObject):
                        total += len(cmap.get_data())
                elif isinstance(obj, StreamObject) and obj.get("/Subtype") == "/Form":
                    total += len(obj.get_data())
                    todo.append(obj.get("/Resources"))
    return total


def _pdf_texts(reader: Any, limits: FetchPolicy) -> list[str]:
    """The text of each page, within ``limits``: at most ``max_pdf_pages`` pages and
    ``max_pdf_chars`` characters in ``max_pdf_seconds``; a page heavier than
    ``max_pdf_page_bytes`` is skipped. Pages that share their content and resources (one stream
    drawn on hundreds of pages) are read once."""
    deadline = time.monotonic() + limits.max_pdf_seconds

    def on_time(*_: Any) -> None:  # pypdf calls it before every operator, in forms too
        if time.monotonic() > deadline:
            raise _PdfBudget

    parts: list[str] = []
    room = limits.max_pdf_chars
    known: dict[tuple[Any, Any], str] = {}
    try:
        for i, pdf_page in enumerate(reader.pages):
            if i >= limits.max_pdf_pages or room <= 0 or time.monotonic() > deadline:
                break
            contents, resources = pdf_page.raw_get("/Contents"), pdf_page.raw_get("/Resources")
            key = (_pdf_ref(contents), _pdf_ref(resources))
            text = known.get(key)
            if text is None:
                if _pdf_weight(pdf_page, limits.max_pdf_page_bytes, deadline) > (
                    limits.max_pdf_page_bytes
                ):
                    text = ""  # too heavy to read in bounded time: skipped
                else:
                    text = pdf_page.extract_text(visitor_operand_before=on_time) or ""
                known[key] = text
            parts.append(text[:room])
            room -= len(parts[-1]) + 1  # and the line break between pages
    except _PdfBudget:
        pass  # out of time: the pages read so far are the page's text
    return parts


def _pdf_ref(value: Any) -> Any:
    """A hashable identity for a page's /Contents or /Resources entry."""
    from pypdf.generic import IndirectObject

    if isinstance(value, IndirectObject):
        return (value.idnum, value.generation)
    if isinstance(value, list):
        return tuple(_pdf_ref(v) for v in value)
    return id(value)


def _extract_pdf(
    body: bytes,
    url: str,
    now: datetime,
    headers: Mapping[str, str],
    limits: FetchPolicy = _DEFAULT_LIMITS,
) -> Page:
    try:
        from pypdf import PdfReader

        reader = PdfReader(io.BytesIO(body), strict=False)
        if reader.is_encrypted:
            reader.decrypt("")
        parts = _pdf_texts(reader, limits)
        info = reader.metadata
    except Exception:  # encrypted, truncated or malformed: we cannot read it, so say so
        _LOG.debug("pdf text extraction failed for %s", url, exc_info=True)
        return Page(url=url, kind="unsupported")
    # pages are blocks; within a page a line break is only layout
    text = _clean_text(_BLOCK_MARK.join(dehyphenate(part) for part in parts))
    title = None
    published = modified = None
    if info is not None:
        title_raw = info.get("/Title")
        title = _clean_text(str(title_raw)) or None if title_raw else None
        published = _plausible(parse_pdf_date(info.get("/CreationDate")), now)
        modified = _plausible(parse_pdf_date(info.get("/ModDate")), now)
    if modified is None:
        modified = _plausible(parse_date(headers.get("last-modified")), now)
    return Page(
        url=url,
        kind="pdf",
        text=text,
        main_text=text or None,
        title=title,
        published=published,
        modified=modified,
        date_source="pdf:CreationDate" if published is not None else None,
    )

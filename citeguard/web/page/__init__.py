"""Body → :class:`~citeguard.models.Page`: visible text, main text, title, canonical URL, dates.

The hot path is one lexbor parse (selectolax) per HTML page: the head is read for metadata, then
scripts, styles and hidden elements are dropped and block elements are separated by newlines, so
words from neighbouring blocks never glue together. Dates come from structured metadata first
(JSON-LD, Open Graph / article meta, itemprop, ``<time>``, common meta names, the URL path); only
when none of it yields a plausible publication date does the slower htmldate fallback run, on an
lxml tree we build for it (never on a raw string, which htmldate would treat as a URL to download).

Extraction never raises on bad input: undecodable bytes are replaced, broken PDFs become
``kind="unsupported"``, and an empty body becomes ``kind="empty"``.

The stages, one module each (this module is the entry point and runs them in order):

* :mod:`~citeguard.web.page.charset`: bytes → text;
* :mod:`~citeguard.web.page.bounded` and :mod:`~citeguard.web.page.head`: HTML bounded when
  it must be, parsed once, its head read (with :mod:`~citeguard.web.page.jsonld`);
* :mod:`~citeguard.web.page.dates`: which date to believe (with
  :mod:`~citeguard.web.page.date_places`: where a date element sits);
* :mod:`~citeguard.web.page.text`: visible text and main text;
* :mod:`~citeguard.web.page.pdf`: PDF and plain text;
* :mod:`~citeguard.web.page.base`: what they share (extraction version, default bounds).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime

from citeguard.dates import parse_date
from citeguard.models import Page, PageKind
from citeguard.policy import FetchPolicy
from citeguard.web.page.base import (
    _DEFAULT_LIMITS,
    _GENERIC_TYPES,
    _HTML_TYPES,
    _TEXT_TYPES,
    EXTRACTION_VERSION,
    _plausible,
    extraction_version,
)
from citeguard.web.page.bounded import _bound_html as _bound_html
from citeguard.web.page.charset import _CT_CHARSET_RE, _decode
from citeguard.web.page.dates import _html_dates, _htmldate_published
from citeguard.web.page.dates import _structured_dates as _structured_dates
from citeguard.web.page.head import _language, _lexbor_bytes, _parse_html
from citeguard.web.page.pdf import _extract_pdf, dehyphenate
from citeguard.web.page.text import (
    _BLOCK_MARK,
    _BLOCK_TAGS,
    _DROP_TAGS,
    _HIDDEN_SELECTOR,
    _clean_text,
    _main_text,
)

__all__ = [
    "EXTRACTION_VERSION",
    "dehyphenate",
    "extract_page",
    "extraction_version",
    "fallback_published",
    "parse_date",
]
# _bound_html, _decode, _html_dates, _lexbor_bytes, _parse_html and _structured_dates stay
# importable from here, as when this package was one module (tests and benchmarks use them)


def _extract_html(
    html: str,
    url: str,
    now: datetime,
    charset: str | None,
    headers: Mapping[str, str],
    utf8_body: bytes | None = None,
    date_fallback: bool = True,
    limits: FetchPolicy | None = None,
) -> Page:
    parsed = _parse_html(html, url, utf8_body, limits or _DEFAULT_LIMITS)
    tree, head = parsed.tree, parsed.head
    # dates first: on-page date elements are placed (on demand) while the tree is whole
    published, source, modified = _html_dates(parsed, url, now, headers, date_fallback)
    tree.strip_tags(_DROP_TAGS, recursive=True)
    for node in tree.css(_HIDDEN_SELECTOR):
        if node.tag not in ("html", "body"):
            node.decompose()
    # a newline on both sides of every block element, so "<p>a</p><p>b</p>" reads "a\nb"
    if tree.root is not None:
        for node in [n for n in tree.root.traverse() if n.tag in _BLOCK_TAGS]:
            node.insert_before(_BLOCK_MARK)
            node.insert_after(_BLOCK_MARK)
    root = tree.body if tree.body is not None else tree.root
    text = _clean_text(root.text(separator="")) if root is not None else ""
    main_text = _main_text(tree) if text else None
    language = head.language or _language(headers.get("content-language"))
    return Page(
        url=url,
        kind="html",
        text=text,
        main_text=main_text,
        title=head.title,
        canonical_url=head.canonical,
        language=language,
        published=published,
        modified=modified,
        date_source=source,
        types=head.jsonld.types,
        charset=charset,
    )


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def _mime(content_type: str | None) -> str:
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


_HTML_SNIFF_RE = re.compile(
    rb"^\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body|meta|title|div|p\b|script|!--)",
    re.I | re.S,
)


def _sniff(body: bytes) -> PageKind:
    head = body[:1024].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"%PDF-"):
        return "pdf"
    if _HTML_SNIFF_RE.match(head):
        return "html"
    if b"\x00" in body[:1024]:
        return "unsupported"
    return "text"


def extract_page(
    body: bytes | str,
    *,
    url: str,
    content_type: str | None = None,
    headers: Mapping[str, str] | None = None,
    now: datetime | None = None,
    date_fallback: bool = True,
    limits: FetchPolicy | None = None,
) -> Page:
    """Turn a response body into a :class:`Page`.

    ``content_type`` (else the ``Content-Type`` header) picks the parser: HTML, PDF (pypdf, with
    line-break hyphenation undone) or plain text; any other type gives ``kind="unsupported"`` and
    an empty body ``kind="empty"``. A missing or generic type is sniffed from the bytes. ``now``
    bounds plausible dates (default: the current UTC time). With ``date_fallback=False`` a page
    without date metadata is not handed to htmldate (a few ms per such page): use it when
    nothing downstream needs that page's publication date.

    Work is bounded by ``limits`` (default: ``FetchPolicy()``'s extraction bounds), whatever the
    body holds: HTML past its size, depth, node or attribute bounds is cut or has the excess
    tags dropped before it is parsed (a truncated page, still read); a JSON-LD block past the
    page's budget or nested too deep is ignored; a PDF is read for at most ``max_pdf_pages``
    pages, ``max_pdf_chars`` characters and ``max_pdf_seconds``, skipping pages heavier than
    ``max_pdf_page_bytes``.
    """
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    ctype = content_type if content_type is not None else lowered.get("content-type")
    mime = _mime(ctype)
    if isinstance(body, str):
        raw_bytes: bytes | None = None
        is_empty = not body.strip()
    else:
        raw_bytes = body
        is_empty = not body.strip()
    if is_empty:
        return Page(url=url, kind="empty")

    if raw_bytes is not None and raw_bytes[:1024].lstrip().startswith(b"%PDF-"):
        kind: PageKind = "pdf"  # servers label PDFs as text/html or octet-stream often enough
    elif mime in _HTML_TYPES:
        kind = "html"
    elif mime == "application/pdf" or mime == "application/x-pdf":
        kind = "pdf"
    elif mime in _TEXT_TYPES:
        kind = "text"
    elif mime in _GENERIC_TYPES:
        kind = _sniff(
            raw_bytes if raw_bytes is not None else str(body)[:1024].encode("utf-8", "replace")
        )
    else:
        return Page(url=url, kind="unsupported")

    if kind == "pdf":
        if raw_bytes is None:
            return Page(url=url, kind="unsupported")  # a PDF that was decoded to str is mangled
        return _extract_pdf(raw_bytes, url, now, lowered, limits or _DEFAULT_LIMITS)
    if kind == "unsupported":
        return Page(url=url, kind="unsupported")

    header_charset = None
    if ctype:
        m = _CT_CHARSET_RE.search(ctype)
        header_charset = m.group(1) if m else None
    if raw_bytes is None:
        text, charset = str(body), None
    else:
        text, charset = _decode(raw_bytes, header_charset, sniff_meta=kind == "html")
    if kind == "text":
        plain = text.replace("\r\n", "\n").replace("\r", "\n")
        if not plain.strip():  # a body of only a byte-order mark, say
            return Page(url=url, kind="empty", charset=charset)
        modified = _plausible(parse_date(lowered.get("last-modified")), now)
        return Page(
            url=url,
            kind="text",
            text=plain,
            main_text=plain,
            language=_language(lowered.get("content-language")),
            modified=modified,
            charset=charset,
        )
    utf8_body = _lexbor_bytes(raw_bytes, charset)
    return _extract_html(text, url, now, charset, lowered, utf8_body, date_fallback, limits)


def fallback_published(
    body: bytes | str,
    *,
    url: str,
    content_type: str | None = None,
    headers: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> datetime | None:
    """The htmldate fallback on its own, for pages extracted with ``date_fallback=False``.

    Lets a caller keep extraction on the fast path and pay for htmldate (a few ms per page)
    only when a page's publication date is actually needed, e.g. by the freshness check.
    Returns None for non-HTML bodies and when htmldate finds nothing plausible.
    """
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    ctype = content_type if content_type is not None else lowered.get("content-type")
    if _mime(ctype) not in _HTML_TYPES | _GENERIC_TYPES:
        return None
    if isinstance(body, str):
        html = body
    else:
        m = _CT_CHARSET_RE.search(ctype or "")
        html, _ = _decode(body, m.group(1) if m else None, sniff_meta=True)
    if not html.strip():
        return None
    return _htmldate_published(html, url, now)

"""What every stage of page extraction shares: the extraction version, default bounds,
content types, the window of plausible dates."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from citeguard.policy import FetchPolicy

extraction_version = "page-2"  # page-2: main-entity JSON-LD, placed <time> dates
EXTRACTION_VERSION = extraction_version

_LOG = logging.getLogger("citeguard.web.page")  # the name it had as one module

#: Publication dates before this are implausible for a web page.
_MIN_DATE = datetime(1995, 1, 1, tzinfo=UTC)
#: Slack for pages stamped in a timezone ahead of ``now``.
_FUTURE_SLACK = timedelta(days=1)
#: htmldate's pattern search is slow on huge pages; beyond this many characters we skip it.
_HTMLDATE_MAX_CHARS = 1_500_000
#: Charset detection on huge bodies is slow and gains nothing over a sample.
_DETECT_SAMPLE_BYTES = 256 * 1024
#: What one body may cost to extract (HTML size, depth, nodes, attributes; JSON-LD; PDF pages,
#: characters, page weight, seconds) when the caller passes no ``limits``: FetchPolicy's.
_DEFAULT_LIMITS = FetchPolicy()

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "application/html"})
_TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/x-markdown", "text/csv"})
_GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream", "unknown"})


def _plausible(dt: datetime | None, now: datetime) -> datetime | None:
    if dt is None:
        return None
    if dt < _MIN_DATE or dt > now + _FUTURE_SLACK:
        return None
    return dt

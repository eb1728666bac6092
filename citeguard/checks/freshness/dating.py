"""Dates and floors: each cited source's date, where it came from, and how old it is."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from citeguard.dates import as_aware
from citeguard.models import (
    CitationReport,
    Regime,
)
from citeguard.web.urls import UrlProblem, normalize_url

# --------------------------------------------------------------------------------------------
# Source dates and the axis
# --------------------------------------------------------------------------------------------


def source_date(
    report: CitationReport, search_published: datetime | None
) -> tuple[datetime | None, str]:
    """The date a cited source speaks for and where it came from.

    The page's modified date, else its published date, else the search result's published
    date, else ``(None, "none")``. HTTP ``Last-Modified`` reaches ``modified`` during page
    extraction, so it ranks with the page's own modified date. A published date guessed from the
    page's text (:func:`is_weak_date_source`) ranks below the search result's date, as
    ``"published_weak"``.
    """
    if report.modified is not None:
        return as_aware(report.modified), "modified"
    weak = is_weak_date_source(report.date_source)
    if report.published is not None and not weak:
        return as_aware(report.published), "published"
    if search_published is not None:
        return as_aware(search_published), "search"
    if report.published is not None:
        return as_aware(report.published), "published_weak"
    return None, "none"


#: ``Page.date_source`` values read from the page's text rather than its markup or URL
WEAK_DATE_SOURCES = frozenset({"htmldate"})


def is_weak_date_source(date_source: str | None) -> bool:
    """Whether a page's publication date came from a text heuristic (htmldate's guess), not
    from structured metadata (JSON-LD, meta tags, ``<time>``, ``itemprop``), the URL or a PDF's
    own metadata. Such a date cannot alone make a source stale."""
    return date_source is not None and date_source.split("+", 1)[0] in WEAK_DATE_SOURCES


def _date_gap(report: CitationReport, search_published: datetime | None) -> float | None:
    """Days between the search result's date and the nearest of the page's own dates.

    The provider's date (``published_date``, ``page_age``) may be the page's publication or its
    last update, so the nearer of the two counts. None when either side has no date.
    """
    if search_published is None:
        return None
    searched = as_aware(search_published)
    gaps = [
        abs((searched - as_aware(d)).total_seconds()) / 86400.0
        for d in (report.published, report.modified)
        if d is not None
    ]
    return min(gaps) if gaps else None


def _get_normalized(dates: Mapping[str, datetime], url: str | None) -> datetime | None:
    if not url:
        return None
    try:
        return dates.get(normalize_url(url))
    except UrlProblem:
        return None


def _day(dt: datetime) -> str:
    return f"{dt.day} {dt:%B %Y}"


def _iso(dt: datetime | None) -> str | None:
    return None if dt is None else dt.isoformat()


_FAST_REGIMES = frozenset({Regime.FAST, Regime.REAL_TIME})


def _normalized_keys(dates: Mapping[str, datetime]) -> dict[str, datetime]:
    out: dict[str, datetime] = {}
    for url, date in dates.items():
        try:
            out.setdefault(normalize_url(url), date)
        except UrlProblem:
            continue
    return out


def _days(days: float) -> str:
    if days >= 730:
        return f"{days / 365.25:.1f} years"
    if days >= 10:
        return f"{days:.0f} days"
    if days >= 2:
        # One decimal, so "2.5 days old" is not read as within a "2 days" floor.
        return f"{days:.1f}".removesuffix(".0") + " days"
    return f"{days * 24:.0f} hours"

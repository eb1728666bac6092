"""citeguard.dates: machine dates, ISO, dates in words, caveat dates and PDF dates."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest
from linear_time import assert_linear

from citeguard.dates import (
    DATE_PATTERN,
    as_aware,
    date_from_match,
    parse_date,
    parse_human_date,
    parse_iso,
    parse_pdf_date,
)
from citeguard.search import normalize_search_results

_DATE_RE = re.compile(DATE_PATTERN, re.IGNORECASE)


def test_iso_with_offset_is_aware_and_keeps_the_instant() -> None:
    dt = parse_date("2021-03-15T23:30:00-04:00")
    assert dt is not None
    assert dt.utcoffset() == timedelta(hours=-4)
    assert dt.astimezone(UTC) == datetime(2021, 3, 16, 3, 30, tzinfo=UTC)


def test_no_offset_means_the_default_zone() -> None:
    assert parse_date("2021-03-15 10:00") == datetime(2021, 3, 15, 10, tzinfo=UTC)
    plus2 = timezone(timedelta(hours=2))
    dt = parse_date("2021-03-15 10:00", default_tz=plus2)
    assert dt is not None and dt.utcoffset() == timedelta(hours=2)
    # an explicit offset wins over the default
    z = parse_date("2021-03-15T10:00Z", default_tz=plus2)
    assert z is not None and z.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Mon, 15 Mar 2021 10:00:00 GMT", datetime(2021, 3, 15, 10, tzinfo=UTC)),
        ("Mon, 15 Mar 2021 10:00:00 +0100", datetime(2021, 3, 15, 9, tzinfo=UTC)),
        ("1615802400", datetime(2021, 3, 15, 10, tzinfo=UTC)),
        ("1615802400000", datetime(2021, 3, 15, 10, tzinfo=UTC)),
        ("20210315", datetime(2021, 3, 15, tzinfo=UTC)),
        ("2021/03/15", datetime(2021, 3, 15, tzinfo=UTC)),
        ("15.03.2021", datetime(2021, 3, 15, tzinfo=UTC)),
        ("Published: 2021-03-15 by staff", datetime(2021, 3, 15, tzinfo=UTC)),
        (datetime(2021, 3, 15), datetime(2021, 3, 15, tzinfo=UTC)),
    ],
)
def test_machine_dates(raw: str | datetime, expected: datetime) -> None:
    assert parse_date(raw) == expected


@pytest.mark.parametrize(
    "raw", ["not a date", "2021-02-30", "", "   ", None, "31.13.2021", "yesterday", "1" * 500]
)
def test_bad_dates_are_none(raw: str | None) -> None:
    assert parse_date(raw) is None


def test_parse_iso_is_whole_string_and_precise() -> None:
    assert parse_iso("2025-05-20T10:00:00.250Z") == datetime(
        2025, 5, 20, 10, 0, 0, 250_000, tzinfo=UTC
    )
    assert parse_iso("2021-W11-1") == datetime(2021, 3, 15, tzinfo=UTC)
    assert parse_iso("Published 2021-03-15") is None
    assert parse_iso("15 March 2021") is None
    # parse_date reads the embedded date, to the second
    assert parse_date("2025-05-20T10:00:00.250Z") == datetime(2025, 5, 20, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    "raw",
    ["2 December 2026", "2nd of Dec. 2026", "Dec 2, 2026", "december 2 2026", " 02 Dec 2026 "],
)
def test_human_day(raw: str) -> None:
    assert parse_human_date(raw) == datetime(2026, 12, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    "raw", ["31 February 2026", "December 2026", "2 December 2026 at noon", "2026-12-02", ""]
)
def test_human_day_rejects(raw: str) -> None:
    assert parse_human_date(raw) is None


@pytest.mark.parametrize(
    ("text", "date", "granularity"),
    [
        ("as of 2 December 2026", datetime(2026, 12, 2, tzinfo=UTC), "day"),
        ("checked Dec 2026", datetime(2026, 12, 1, tzinfo=UTC), "month"),
        ("data through 2026-12", datetime(2026, 12, 1, tzinfo=UTC), "month"),
        ("on 13/02/2026", datetime(2026, 2, 13, tzinfo=UTC), "day"),
        ("on 02/13/2026", datetime(2026, 2, 13, tzinfo=UTC), "day"),
        ("in 2026", None, "year"),
        ("on 30 Feb 2026", None, "day"),
    ],
)
def test_dates_in_prose(text: str, date: datetime | None, granularity: str) -> None:
    m = _DATE_RE.search(text)
    assert m is not None
    assert date_from_match(m) == (date, granularity)


def test_pdf_dates() -> None:
    assert parse_pdf_date("D:20210315103000+01'00'") == datetime(2021, 3, 15, 9, 30, tzinfo=UTC)
    assert parse_pdf_date("D:2021") == datetime(2021, 1, 1, tzinfo=UTC)
    assert parse_pdf_date("D:20210315103000Z") == datetime(2021, 3, 15, 10, 30, tzinfo=UTC)
    # an offset no timezone can hold is no date, not an exception
    assert parse_pdf_date("D:20210315103000+99'00'") is None
    assert parse_pdf_date("D:20211345") is None
    assert parse_pdf_date(None) is None


def test_as_aware() -> None:
    naive = datetime(2021, 3, 15, 10)
    assert as_aware(naive).tzinfo is UTC
    aware = datetime(2021, 3, 15, 10, tzinfo=timezone(timedelta(hours=5)))
    assert as_aware(aware) is aware


def test_search_results_use_the_shared_parser() -> None:
    rows = normalize_search_results(
        [
            {"url": "https://a.example/", "published_date": "2025-05-20T10:00:00.250Z"},
            {"url": "https://b.example/", "date": "15 March 2021"},
            {"url": "https://c.example/", "date": "Mon, 15 Mar 2021 10:00:00 GMT"},
            {"url": "https://d.example/", "age": "2 days ago"},
        ]
    )
    assert [r.published for r in rows] == [
        datetime(2025, 5, 20, 10, 0, 0, 250_000, tzinfo=UTC),
        datetime(2021, 3, 15, tzinfo=UTC),
        datetime(2021, 3, 15, 10, tzinfo=UTC),
        None,
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "fn",
    [parse_date, parse_iso, parse_human_date, parse_pdf_date],
    ids=lambda f: f.__name__,
)
@pytest.mark.parametrize("unit", ["2021-03-15 ", "1", "Dec 2, ", " "])
def test_long_input_costs_no_more_than_short(fn: Callable[[str], object], unit: str) -> None:
    assert_linear(fn, unit)


def test_prose_date_pattern_is_linear() -> None:
    def scan(text: str) -> int:
        return sum(1 for _ in _DATE_RE.finditer(text))

    assert_linear(scan, "12 Dec 12/12/ 2026-1 ")


def test_european_ages_are_read_against_now_and_nothing_else_is() -> None:
    from citeguard.dates import find_european_age

    now = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    cases = {
        "vor 3 Tagen": timedelta(days=3),
        "Veröffentlicht vor einer Woche": timedelta(days=7),
        "il y a 2 heures": timedelta(hours=2),
        "hace 4 días": timedelta(days=4),
        "5 giorni fa": timedelta(days=5),
        "2 dagen geleden": timedelta(days=2),
        "gestern, 14:30": timedelta(days=1),
        "heute": timedelta(0),
    }
    for text, back in cases.items():
        assert find_european_age(text, now=now) == now - back, text
    assert find_european_age("vor 2 Monaten", now=now) == datetime(2026, 1, 10, 12, tzinfo=UTC)
    for text in ("Hier klicken", "vor 3 Autos", "Ein Artikel über heute und morgen im ganzen Land"):
        assert find_european_age(text, now=now) is None, text
    assert find_european_age("vor 3 Tagen", now=None) is None
    assert find_european_age("vor " * 50_000, now=now) is None  # read up to MAX_DATE_CHARS

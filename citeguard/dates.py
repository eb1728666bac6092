"""One room for reading dates out of strings: page metadata, HTTP headers, search results, caveats.

* :func:`parse_date` reads machine-written dates (meta tags, JSON-LD, ``Last-Modified``, search
  APIs): ISO 8601 (also embedded in a longer string), compact ``YYYYMMDD``, Unix epochs, RFC 2822
  (through :func:`email.utils.parsedate_to_datetime`), ``Y/M/D`` and ``D.M.Y``;
* :func:`parse_iso` reads a whole ISO 8601 string through :meth:`datetime.fromisoformat`, keeping
  sub-second precision (search APIs that promise ISO);
* :func:`parse_human_date` reads a day written out in words: "2 December 2026", "Dec 2, 2026";
* :data:`DATE_PATTERN` and :func:`date_from_match` find a date inside prose (the recency caveat
  "as of 2 December 2026"), with the granularity it was written to;
* :func:`parse_pdf_date` reads a PDF info-dictionary date (``D:20210315103000+01'00'``);
* :func:`parse_relative_date` reads an age against a clock ("3 days ago", "1 week ago",
  "yesterday"), as search APIs write it (Serper, SerpAPI, Brave's ``age``).

Every result is timezone-aware: a date that names no offset is taken in ``default_tz`` (UTC).
Every pattern is anchored or bounded, and inputs are cut to :data:`MAX_DATE_CHARS` first, so a
hostile string costs no more than a short one.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from email.utils import parsedate_to_datetime
from typing import Any, Literal

__all__ = [
    "DATE_PATTERN",
    "MAX_DATE_CHARS",
    "Granularity",
    "as_aware",
    "date_from_match",
    "make_date",
    "parse_date",
    "parse_human_date",
    "parse_iso",
    "parse_pdf_date",
    "parse_relative_date",
]

#: A date field is short; anything past this is not part of it.
MAX_DATE_CHARS = 100

#: How precisely a date was written.
Granularity = Literal["day", "month", "year"]


def as_aware(dt: datetime, default_tz: tzinfo = UTC) -> datetime:
    """``dt`` itself when it carries an offset, else ``dt`` taken in ``default_tz``."""
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=default_tz)


def make_date(
    y: int,
    mo: int,
    d: int,
    tz: tzinfo | None = None,
    h: int = 0,
    mi: int = 0,
    s: int = 0,
) -> datetime | None:
    """``datetime(y, mo, d, h, mi, s)`` in ``tz`` (UTC when None), or None when out of range."""
    try:
        return datetime(y, mo, d, h, mi, s, tzinfo=tz or UTC)
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------
# Machine-written dates
# --------------------------------------------------------------------------------------------

_ISO_RE = re.compile(
    r"(?P<y>(?:19|20)\d\d)-(?P<m>[01]?\d)-(?P<d>[0-3]?\d)"
    r"(?:[T ](?P<H>[0-2]?\d):(?P<M>[0-5]\d)(?::(?P<S>[0-5]\d)(?:[.,]\d+)?)?"
    r"\s*(?P<tz>Z|[+-][01]\d:?[0-5]\d|[+-][01]\d)?)?"
)
_SLASH_YMD_RE = re.compile(r"\b(?P<y>(?:19|20)\d\d)[/.](?P<m>[01]?\d)[/.](?P<d>[0-3]?\d)\b")
_DMY_RE = re.compile(r"\b(?P<d>[0-3]?\d)\.\s?(?P<m>[01]?\d)\.\s?(?P<y>(?:19|20)\d\d)\b")
_COMPACT_RE = re.compile(r"^(?P<y>(?:19|20)\d\d)(?P<m>[01]\d)(?P<d>[0-3]\d)(?:\d{4,6})?$")
_EPOCH_RE = re.compile(r"^\d{10}(?:\d{3})?$")


def _parse_offset(raw: str | None) -> timezone | None:
    """``Z``, ``+02:00``, ``-0530``, ``+01`` → a fixed offset; None when absent or impossible."""
    if not raw:
        return None
    if raw == "Z":
        return UTC
    sign = -1 if raw[0] == "-" else 1
    digits = raw[1:].replace(":", "")
    hours = int(digits[:2])
    minutes = int(digits[2:4]) if len(digits) >= 4 else 0
    if hours > 14:
        return None
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def parse_iso(raw: str, *, default_tz: tzinfo = UTC) -> datetime | None:
    """A whole string in ISO 8601 as :meth:`datetime.fromisoformat` reads it, or None.

    Stricter than :func:`parse_date` about the shape (nothing around the date) and looser about
    the content: sub-second precision, week dates, hour-only times and any year are kept. For
    API fields that are ISO by contract (search results), where that precision is the value.
    """
    s = raw.strip()[:MAX_DATE_CHARS]
    if not s:
        return None
    try:
        return as_aware(datetime.fromisoformat(s.replace("Z", "+00:00")), default_tz)
    except ValueError:
        return None


def parse_date(raw: str | datetime | None, *, default_tz: tzinfo = UTC) -> datetime | None:
    """Parse a date as found in metadata: ISO 8601, RFC 2822, ``Y/M/D``, ``D.M.Y``, compact, epoch.

    Returns a timezone-aware datetime (``default_tz`` when the source gives no offset) or None.
    A ``datetime`` is passed through, made aware. Seconds are the finest unit kept.
    """
    if isinstance(raw, datetime):
        return as_aware(raw, default_tz)
    if not raw:
        return None
    s = raw.strip()[:MAX_DATE_CHARS]
    if not s:
        return None
    m = _ISO_RE.search(s)
    if m:
        return make_date(
            int(m.group("y")),
            int(m.group("m")),
            int(m.group("d")),
            _parse_offset(m.group("tz")) or default_tz,
            int(m.group("H") or 0),
            int(m.group("M") or 0),
            int(m.group("S") or 0),
        )
    m = _COMPACT_RE.match(s)
    if m:
        return make_date(int(m.group("y")), int(m.group("m")), int(m.group("d")), default_tz)
    if _EPOCH_RE.match(s):
        try:
            return datetime.fromtimestamp(int(s[:10]), tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if "," in s or s[:3].isalpha():
        try:
            parsed = parsedate_to_datetime(s)
        except (TypeError, ValueError, IndexError):
            parsed = None
        if parsed is not None:
            return as_aware(parsed, default_tz)
    m = _SLASH_YMD_RE.search(s) or _DMY_RE.search(s)
    if m:
        return make_date(int(m.group("y")), int(m.group("m")), int(m.group("d")), default_tz)
    return None


# --------------------------------------------------------------------------------------------
# Dates written in words
# --------------------------------------------------------------------------------------------

_MONTH_NUMBERS = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DMY = (
    rf"(?P<dmy>(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m1>{_MONTH}),?\s+(?P<y1>\d{{4}}))"
)
_MDY = rf"(?P<mdy>(?P<m2>{_MONTH})\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y2>\d{{4}}))"
_MY = rf"(?P<my>(?P<m3>{_MONTH}),?\s+(?P<y3>\d{{4}}))"
_ISO_DAY = r"(?P<iso>(?P<y4>\d{4})-(?P<m4>\d{1,2})(?:-(?P<d4>\d{1,2}))?)"
_NUMERIC = r"(?P<num>(?P<a5>\d{1,2})/(?P<b5>\d{1,2})/(?P<y5>\d{4}))"

#: A date inside prose, most precise reading first; compile it case-insensitively, usually as part
#: of a larger pattern, and read the match with :func:`date_from_match`. The named groups are
#: ``dmy`` ("2 Dec 2026"), ``mdy`` ("December 2, 2026"), ``my`` ("Dec 2026"), ``iso``
#: ("2026-12-02", "2026-12"), ``num`` ("12/02/2026") and ``year`` ("2026").
DATE_PATTERN = rf"{_DMY}|{_MDY}|{_MY}|{_ISO_DAY}|{_NUMERIC}|(?P<year>\b\d{{4}}\b)"

_HUMAN_DAY_RE = re.compile(rf"{_DMY}|{_MDY}", re.IGNORECASE)


def date_from_match(
    m: re.Match[str], *, default_tz: tzinfo = UTC
) -> tuple[datetime | None, Granularity]:
    """The date a :data:`DATE_PATTERN` match names, and whether it names a day, month or year.

    A month is dated to its first day. A bare year, or a day that does not exist ("31 Feb"),
    gives no date.
    """
    g = m.groupdict()
    try:
        if g.get("dmy"):
            month = _MONTH_NUMBERS[g["m1"][:3].lower()]
            return datetime(int(g["y1"]), month, int(g["d1"]), tzinfo=default_tz), "day"
        if g.get("mdy"):
            month = _MONTH_NUMBERS[g["m2"][:3].lower()]
            return datetime(int(g["y2"]), month, int(g["d2"]), tzinfo=default_tz), "day"
        if g.get("my"):
            month = _MONTH_NUMBERS[g["m3"][:3].lower()]
            return datetime(int(g["y3"]), month, 1, tzinfo=default_tz), "month"
        if g.get("iso"):
            day = int(g["d4"]) if g["d4"] else 1
            gran: Granularity = "day" if g["d4"] else "month"
            return datetime(int(g["y4"]), int(g["m4"]), day, tzinfo=default_tz), gran
        if g.get("num"):
            # Ambiguous day/month order: month first unless the first number cannot be a month.
            a, b = int(g["a5"]), int(g["b5"])
            month, day = (a, b) if a <= 12 else (b, a)
            return datetime(int(g["y5"]), month, day, tzinfo=default_tz), "day"
    except ValueError:
        return None, "day"
    return None, "year"


def parse_human_date(text: str, *, default_tz: tzinfo = UTC) -> datetime | None:
    """A whole string naming one day in words: "2 December 2026", "2nd of Dec 2026", "Dec 2, 2026".

    Case-insensitive; surrounding whitespace is ignored; anything else in the string, or a day
    that does not exist, gives None.
    """
    m = _HUMAN_DAY_RE.fullmatch(text.strip()[:MAX_DATE_CHARS])
    if m is None:
        return None
    return date_from_match(m, default_tz=default_tz)[0]


# --------------------------------------------------------------------------------------------
# PDF dates
# --------------------------------------------------------------------------------------------

_PDF_DATE_RE = re.compile(
    r"D?:?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?([Zz+-])?(\d{2})?'?(\d{2})?"
)


def parse_pdf_date(raw: Any) -> datetime | None:
    """A PDF date (``D:YYYYMMDDHHmmSSOHH'mm'``, any tail omitted) → aware datetime or None."""
    if not isinstance(raw, str):
        return None
    m = _PDF_DATE_RE.match(raw.strip()[:MAX_DATE_CHARS])
    if not m:
        return None
    y, mo, d, h, mi, s, sign, tzh, tzm = m.groups()
    tz: tzinfo = UTC
    if sign in ("+", "-") and tzh:
        offset = timedelta(hours=int(tzh), minutes=int(tzm or 0))
        if offset >= timedelta(hours=24):
            return None  # an offset timezone() cannot hold: no date rather than a crash
        tz = timezone(offset if sign == "+" else -offset)
    return make_date(int(y), int(mo or 1), int(d or 1), tz, int(h or 0), int(mi or 0), int(s or 0))


# --------------------------------------------------------------------------------------------
# Ages: "3 days ago"
# --------------------------------------------------------------------------------------------

_RELATIVE_RE = re.compile(
    r"(?P<n>\d{1,4}|an?|one)\s*(?P<unit>s(?:ec(?:ond)?s?)?|m(?:in(?:ute)?s?)?|h(?:(?:ou)?rs?)?"
    r"|d(?:ays?)?|w(?:(?:ee)?ks?)?|mo(?:nths?)?|y(?:(?:ea)?rs?)?)\.?\s+ago",
    re.IGNORECASE,
)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# The same ages in German, French, Spanish, Italian and Dutch ("vor 3 Tagen", "il y a 2 jours",
# "hace 5 horas", "3 giorni fa", "2 dagen geleden"), found anywhere in a short text. Each unit
# word maps to the English unit letter(s) above.
_EU_UNITS = {
    **dict.fromkeys(
        (
            "sekunde",
            "sekunden",
            "seconde",
            "secondes",
            "segundo",
            "segundos",
            "secondo",
            "secondi",
            "seconden",
        ),
        "s",
    ),
    **dict.fromkeys(("minute", "minuten", "minutes", "minuto", "minutos", "minuti"), "m"),
    **dict.fromkeys(
        ("stunde", "stunden", "heure", "heures", "hora", "horas", "ora", "ore", "uur"), "h"
    ),
    **dict.fromkeys(
        (
            "tag",
            "tagen",
            "jour",
            "jours",
            "día",
            "días",
            "dia",
            "dias",
            "giorno",
            "giorni",
            "dag",
            "dagen",
        ),
        "d",
    ),
    **dict.fromkeys(
        (
            "woche",
            "wochen",
            "semaine",
            "semaines",
            "semana",
            "semanas",
            "settimana",
            "settimane",
            "week",
            "weken",
        ),
        "w",
    ),
    **dict.fromkeys(
        ("monat", "monaten", "mois", "mes", "meses", "mese", "mesi", "maand", "maanden"), "mo"
    ),
    **dict.fromkeys(
        (
            "jahr",
            "jahren",
            "an",
            "ans",
            "année",
            "années",
            "año",
            "años",
            "anno",
            "anni",
            "jaar",
            "jaren",
        ),
        "y",
    ),
}
_EU_N = r"(?P<n>\d{1,4}|einem|einer|une?|una|uno|een)"
_EU_UNIT = r"(?P<unit>[^\W\d_]{2,9})"
_RELATIVE_EU_RE = re.compile(
    rf"\b(?:vor|il\s+y\s+a|hace)\s+{_EU_N}\s+{_EU_UNIT}\b"
    rf"|\b{_EU_N.replace('<n>', '<n2>')}\s+{_EU_UNIT.replace('<unit>', '<unit2>')}\s+"
    r"(?:fa|geleden)\b",
    re.IGNORECASE,
)
_EU_YESTERDAY = frozenset(("gestern", "ayer", "ieri", "gisteren"))  # not "hier": German "here"
_EU_TODAY = frozenset(("heute", "aujourd'hui", "hoy", "oggi", "vandaag"))


def _months_before(now: datetime, months: int) -> datetime | None:
    """``now`` moved ``months`` calendar months back (the day clamped to the month's length);
    None before year 1."""
    total = now.year * 12 + (now.month - 1) - months
    year, month = divmod(total, 12)
    if year < 1:
        return None
    day = now.day
    while day > 28:
        try:
            return now.replace(year=year, month=month + 1, day=day)
        except ValueError:
            day -= 1
    return now.replace(year=year, month=month + 1, day=day)


def _age_before(now: datetime, n: int, unit: str) -> datetime | None:
    """``now`` moved ``n`` units (``_UNIT_SECONDS``' letters, "mo", "y") back."""
    if unit.startswith("mo"):
        return _months_before(now, n)
    if unit.startswith("y"):
        return _months_before(now, 12 * n)
    try:
        return now - timedelta(seconds=n * _UNIT_SECONDS[unit[0]])
    except OverflowError:
        return None


def find_european_age(text: str, *, now: datetime | None) -> datetime | None:
    """An age written in German, French, Spanish, Italian or Dutch anywhere in ``text`` (its
    first ``MAX_DATE_CHARS`` characters): "vor 3 Tagen", "il y a 2 jours", "hace 5 horas",
    "3 giorni fa", "2 dagen geleden", "gestern" / "ayer" (yesterday), "heute" / "hoy" (today:
    only in a text of at most four words, a date line rather than a sentence), relative to
    ``now``; None without ``now`` or an age. French "hier" is left out: in German it is "here"."""
    if now is None or not text:
        return None
    s = " ".join(text[:MAX_DATE_CHARS].lower().split())
    now = as_aware(now)
    m = _RELATIVE_EU_RE.search(s)
    if m is not None:
        raw_n = m.group("n") or m.group("n2")
        unit = _EU_UNITS.get(m.group("unit") or m.group("unit2") or "")
        if unit is not None:
            return _age_before(now, int(raw_n) if raw_n.isdigit() else 1, unit)
    words = set(re.findall(r"[^\W\d_]+(?:'[^\W\d_]+)?", s))
    if words & _EU_TODAY and len(words) <= 4:
        return now
    if words & _EU_YESTERDAY and len(words) <= 4:
        return now - timedelta(days=1)
    return None


def parse_relative_date(text: str, *, now: datetime | None) -> datetime | None:
    """An age written relative to ``now``: "3 days ago", "1 week ago", "an hour ago",
    "2 mins ago", "5 months ago", "yesterday", "today", "just now".

    The whole string must be the age (surrounding whitespace and a leading "about"/"over" are
    ignored). Months and years are calendar steps back from ``now``. ``now`` is the caller's
    clock (the Guard's injected one); without it an age names no date and the result is None.
    """
    if now is None:
        return None
    s = " ".join(text.strip()[:MAX_DATE_CHARS].lower().split())
    for lead in ("about ", "over ", "almost ", "nearly "):
        if s.startswith(lead):
            s = s[len(lead) :]
    now = as_aware(now)
    if s in ("today", "just now", "now"):
        return now
    if s == "yesterday":
        return now - timedelta(days=1)
    m = _RELATIVE_RE.fullmatch(s)
    if m is None:
        return None
    raw_n = m.group("n")
    return _age_before(now, 1 if not raw_n.isdigit() else int(raw_n), m.group("unit"))

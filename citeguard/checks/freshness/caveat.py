"""The recency caveat: a dated "as of ..." an answer to a fast question must carry."""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from citeguard.checks.freshness.rules import _F
from citeguard.dates import DATE_PATTERN, date_from_match
from citeguard.text import finditer_windowed


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CaveatMatch(_Model):
    """A dated recency caveat found in an answer."""

    text: str
    start: int
    end: int
    date_text: str
    date: datetime | None = None  # parsed when it names a day or a month
    granularity: str  # "day", "month" or "year"


# --------------------------------------------------------------------------------------------
# Recency caveat
# --------------------------------------------------------------------------------------------

# The date after the cue is citeguard.dates.DATE_PATTERN, read by date_from_match.
_CAVEAT_CUE = (
    r"\b(?:as\s+(?:of|at|on)|(?:current|accurate|correct|valid|true)\s+as\s+(?:of|at)|"
    r"(?:last\s+)?(?:checked|retrieved|accessed|verified|updated|reviewed)(?:\s+on)?|"
    r"at\s+(?:the\s+)?time\s+of\s+(?:writing|checking|publication)|data\s+(?:from|through)|"
    r"prices?\s+(?:as\s+of|on)|figures\s+(?:as\s+of|from)|snapshot\s+(?:of|from))"
)
# The date may follow the cue after a few words ("as of today (2 December 2026)").
_CAVEAT_RE = re.compile(rf"{_CAVEAT_CUE}[^.\n;]{{0,30}}?(?:{DATE_PATTERN})", _F)


def find_caveat(answer_text: str) -> CaveatMatch | None:
    """The first dated recency caveat in ``answer_text`` ("as of 2 December 2026", ...).

    A caveat is a cue (as of, checked, retrieved, last updated, at the time of writing, ...)
    followed within a few words by a date: a day ("2 Dec 2026", "December 2, 2026",
    "2026-12-02"), a month ("Dec 2026", "2026-12") or a bare year. A caveat dated to a year
    only is returned (granularity "year") but does not satisfy the check.
    """
    best: CaveatMatch | None = None
    # a caveat over 512 characters (a run of spaces in it) is not seen: the check only gets stricter
    for m in finditer_windowed(_CAVEAT_RE, answer_text, overlap=512):
        date, granularity = date_from_match(m)
        date_start = next(
            (m.start(k) for k in ("dmy", "mdy", "my", "iso", "num", "year") if m.group(k)),
            m.start(),
        )
        match = CaveatMatch(
            text=m.group(0),
            start=m.start(),
            end=m.end(),
            date_text=answer_text[date_start : m.end()],
            date=date,
            granularity=granularity,
        )
        if granularity != "year":
            return match
        best = best or match
    return best

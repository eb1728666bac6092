"""The repair's internal records: candidates, failing pairs, decisions and fates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from citeguard.models import (
    CitationStatus,
    Claim,
    PassageMatch,
)
from citeguard.web.urls import UrlProblem, normalize_url

_REF_KINDS = frozenset({"numbered", "footnote", "reference_link"})
_TEXT_KINDS = frozenset({"inline_link", "html_anchor", "bare_url", *_REF_KINDS})


# --------------------------------------------------------------------------------------------
# Internal records
# --------------------------------------------------------------------------------------------


@dataclass
class _Candidate:
    url: str  # normalised
    raw: str  # as the search result or the earlier citation wrote it
    title: str = ""
    snippet: str = ""
    fetched: bool = False  # cited (so fetched) earlier in this run: free to try
    order: int = 0


@dataclass
class _Failure:
    """One failing (claim, cited URL) pair, or a failing URL no claim cites (``claim`` None)."""

    claim: Claim | None
    url: str  # normalised
    raw_url: str
    status: CitationStatus
    reason: str
    quote: str | None
    passage: PassageMatch | None
    citations: list[int]
    pair: Any = None  # the validity pair (checks.validity) of the claim and this URL
    claim_text: str = ""  # without markers


@dataclass
class _Found:
    """A candidate that supports a failing pair, judged as the validity axis would."""

    cand: _Candidate
    pair: Any
    rank: tuple[int, float, float]


@dataclass
class _Decision:
    failure: _Failure
    kind: Literal["swap", "dedup", "correct_quote", "drop_claim", "drop_url"]
    target: _Candidate | None = None
    quote: str | None = None
    passage: str | None = None
    evidence_url: str | None = None


@dataclass
class _Fate:
    kind: Literal["keep", "to", "remove"] = "keep"
    url: str = ""  # normalised target
    raw: str = ""
    title: str = ""


@dataclass
class _Diagnosis:
    failures: list[_Failure] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)


def _norm(url: str) -> str:
    try:
        return normalize_url(url)
    except UrlProblem:
        return url


def _short(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"

"""Candidates: the pages a failing pair may be re-pointed at, ranked, and how a candidate
is judged (a fresh validity pair)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from citeguard.models import (
    Answer,
    Attempt,
    CitationStatus,
    Outcome,
    PassageMatch,
    SearchRecord,
)
from citeguard.policy import Policy
from citeguard.repair.records import (
    _Candidate,
    _Failure,
    _norm,
)
from citeguard.text import PARAPHRASE_STOPWORDS, PASSAGE_TOKEN_RE, normalise
from citeguard.web.urls import UrlProblem, normalize_url

_STEM = 6


def _terms(text: str) -> frozenset[str]:
    return frozenset(
        t[:_STEM] if len(t) > _STEM else t
        for t in PASSAGE_TOKEN_RE.findall(normalise(text))
        if t not in PARAPHRASE_STOPWORDS and (len(t) > 1 or t.isdigit())
    )


def _url_words(url: str) -> str:
    parts = urlsplit(url)
    return re.sub(r"[\W_]+", " ", f"{parts.hostname or ''} {parts.path}")


def _candidates(
    attempts: Sequence[Attempt], searches: Sequence[SearchRecord], policy: Policy
) -> dict[str, _Candidate]:
    """Pages cited earlier in the run (they resolved) and the run's search results, by
    normalised URL; never one the run found broken or told the agent not to cite."""
    bad: set[str] = set()
    for a in attempts:
        bad |= {_norm(u) for u in a.excluded_urls}
        for c in a.verdict.citations:
            if c.status.outcome is not Outcome.RESOLVES or c.status is CitationStatus.NOT_RETRIEVED:
                bad.add(c.normalized_url or _norm(c.url))
    pool: dict[str, _Candidate] = {}
    for a in attempts:
        for c in a.verdict.citations:
            key = c.normalized_url
            if key is None or key in bad or key in pool:
                continue
            pool[key] = _Candidate(key, c.url, c.title or "", fetched=True, order=len(pool))
    retrieved: set[str] = set()
    for s in searches:
        for r in s.results:
            try:
                key = normalize_url(r.url, allowed_schemes=policy.fetch.allowed_schemes)
            except UrlProblem:
                continue
            retrieved.add(key)
            if key in bad:
                continue
            cand = pool.get(key)
            if cand is None:
                pool[key] = _Candidate(
                    key, r.url, r.title or "", r.snippet or "", fetched=False, order=len(pool)
                )
            else:
                cand.title = cand.title or r.title or ""
                cand.snippet = cand.snippet or r.snippet or ""
    if policy.not_retrieved_fails and searches:
        pool = {k: c for k, c in pool.items() if k in retrieved}
    return pool


def _rank(f: _Failure, answer: Answer, pool: Mapping[str, _Candidate]) -> list[_Candidate]:
    """``pool`` for one failing pair, best first: content-word overlap of the claim (and its
    quote) with the candidate's title, snippet and URL, then pages already fetched (free),
    then the order the run met them in. How many are fetched is the caller's budget."""
    assert f.claim is not None
    cited = {answer.citations[i].normalized_url for i in f.claim.citation_indices}
    want = _terms(f.claim_text + " " + (f.quote or ""))
    scored: list[tuple[float, int, _Candidate]] = []
    for c in pool.values():
        if c.url == f.url or c.url in cited:
            continue
        have = _terms(f"{c.title} {c.snippet} {_url_words(c.raw)}")
        overlap = len(want & have) / len(want) if want else 0.0
        scored.append((overlap, c.order, c))
    scored.sort(key=lambda t: (-t[0], not t[2].fetched, t[1]))
    return [c for _o, _n, c in scored]


def _trial(base: Any, url: str, **changes: Any) -> Any:
    """A fresh validity pair: ``base`` (the failing claim's pair) against another page."""
    return dataclasses.replace(
        base,
        url=url,
        judged=None,
        verified=False,
        status=CitationStatus.OK,
        reason="ok",
        passage=None,
        evidence=None,
        entailment=None,
        **changes,
    )


def _wants_score(pair: Any) -> bool:
    return pair.status is CitationStatus.OK and bool(pair.evidence) and pair.entailment is None


def _support_rank(pair: Any, cand: _Candidate) -> tuple[int, float, float]:
    m: PassageMatch | None = pair.passage
    how = 2 if m is not None and m.how in ("exact", "normalised") else 1 if m and m.found else 0
    score = pair.entailment.score if pair.entailment is not None else 0.0
    return how, score, 1.0 if cand.fetched else 0.0


def _passage_of(pair: Any) -> str | None:
    m: PassageMatch | None = pair.passage
    if m is not None and m.matched_text:
        return " ".join(m.matched_text.split())[:600]
    if pair.entailment is not None and pair.entailment.evidence:
        return " ".join(str(pair.entailment.evidence).split())[:600]
    return None


def _corrected_quote(f: _Failure, answer: Answer) -> str | None:
    """The cited page's own words for an altered quote, when the quote can be replaced in
    the claim as written."""
    m = f.passage
    if m is None or not m.altered or not m.matched_text or f.quote is None or f.claim is None:
        return None
    words = " ".join(m.matched_text.split()).strip()
    if not words or words == f.quote or any(ch in words for ch in '"“”[]\n'):
        return None
    claim = f.claim
    if claim.start >= 0 and f.quote not in answer.text[claim.start : claim.end]:
        return None
    if f.quote not in f.claim_text:
        return None
    return words


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------

"""Scholarly references: the reference names the paper it points at.

A citation that resolved to a reference-list entry reading as a scholarly reference (authors,
a year, a title; or a BibTeX-like entry) is compared with the paper:

* **linked** (a DOI, an arXiv id, a URL): the landing page's scholarly metadata
  (:func:`~.sources.page_work`), else, for a DOI or an arXiv id, the metadata service
  (Crossref ``/works/{doi}``, the arXiv API's ``id_list``);
* **unlinked**: looked up by the entry's text in Crossref (``/works?query.bibliographic=…``);
  no work whose title the entry carries (or nearly carries) is ``not_found``.

A field the entry gets wrong is ``metadata_mismatch``, naming the field, both values and the
source (:mod:`~.compare`). Every lookup is a request through the Guard's fetcher (its timeouts,
caps, retries, pacing and snapshot store). Rooms: ``entry`` (the entry read), ``work`` (a
paper's metadata, venue names), ``sources`` (the metadata readers), ``compare``, this stage.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from urllib.parse import quote, unquote, urlencode

from citeguard.checks.scholarly.compare import find_work, mismatches, place_title
from citeguard.checks.scholarly.entry import Entry, looks_scholarly, read_entry
from citeguard.checks.scholarly.sources import arxiv_works, crossref_works, page_work
from citeguard.checks.scholarly.work import Work
from citeguard.models import (
    Answer,
    Citation,
    CitationStatus,
    FetchResult,
    MetadataMismatch,
    Outcome,
    ScholarlyReport,
)
from citeguard.parse.scholarly import REFERENCE_SCHEME
from citeguard.policy import ScholarlyPolicy

__all__ = ["REFERENCE_SCHEME", "ScholarlyOutcome", "check_references", "looks_scholarly"]


_DOI_URL = re.compile(r"https?://(?:dx\.)?doi\.org/(10\.\d{4,9}/\S+)", re.IGNORECASE)
_ARXIV_URL = re.compile(
    r"https?://(?:www\.|export\.)?arxiv\.org/(?:abs|pdf)/([\w.\-/]+?)(?:\.pdf)?/?$", re.IGNORECASE
)
_HTML = ("text/html", "application/xhtml")


class _Fetches(Protocol):
    async def fetch(self, url: str, *, want_body: bool = True) -> FetchResult: ...


@dataclass(frozen=True, slots=True)
class ScholarlyOutcome:
    """A reference's status from the scholarly check (``ok``, ``metadata_mismatch``,
    ``not_found`` or a lookup's failure), its reason, and what was found."""

    status: CitationStatus
    reason: str
    report: ScholarlyReport
    # when the paper came out, from the metadata service (a reference with no page of its own
    # is dated by it)
    published: datetime | None = None


def _doi_of(url: str) -> str | None:
    m = _DOI_URL.match(url)
    return unquote(m.group(1)) if m is not None else None  # the URL's path is percent-encoded


def _arxiv_of(url: str) -> str | None:
    m = _ARXIV_URL.match(url)
    return m.group(1) if m is not None else None


class _Lookups:
    """The metadata services, through the fetcher, at most ``max_lookups`` requests."""

    def __init__(self, fetcher: _Fetches, policy: ScholarlyPolicy) -> None:
        self._fetcher = fetcher
        self._policy = policy
        self._left = policy.max_lookups

    def _base(self, url: str) -> str:
        return url if url.endswith("/") else url + "/"

    async def _get(self, url: str) -> FetchResult | None:
        if self._left <= 0:
            return None
        self._left -= 1
        return await self._fetcher.fetch(url)

    def _mailto(self) -> dict[str, str]:
        mail = self._policy.crossref_mailto
        return {"mailto": mail} if mail else {}

    async def crossref_doi(self, doi: str) -> list[Work]:
        url = self._base(self._policy.crossref_url) + "works/" + quote(doi, safe="/:;()._-")
        if self._mailto():
            url += "?" + urlencode(self._mailto())
        res = await self._get(url)
        if res is None or res.status is not CitationStatus.OK or res.body is None:
            return []
        return crossref_works(res.body) or []

    async def arxiv_id(self, arxiv_id: str) -> list[Work]:
        url = self._base(self._policy.arxiv_api_url) + "query?" + urlencode({"id_list": arxiv_id})
        res = await self._get(url)
        if res is None or res.status is not CitationStatus.OK or res.body is None:
            return []
        return arxiv_works(res.body)

    async def search(self, entry: Entry) -> list[Work] | FetchResult | None:
        params = {"query.bibliographic": entry.query(), "rows": str(self._policy.rows)}
        params.update(self._mailto())
        url = self._base(self._policy.crossref_url) + "works?" + urlencode(params)
        res = await self._get(url)
        if res is None or res.status is not CitationStatus.OK or res.body is None:
            return res
        works = crossref_works(res.body)
        return works if works is not None else res


def _report(
    work: Work | None, via: str | None, mism: list[MetadataMismatch] | None = None
) -> ScholarlyReport:
    return ScholarlyReport(
        doi=work.doi if work is not None else None,
        arxiv_id=work.arxiv_id if work is not None else None,
        title=work.title if work is not None else None,
        source=work.source if work is not None else None,
        via_resolver=via,
        mismatches=list(mism or []),
    )


def _judged(entry: Entry, work: Work, via: str | None, *, linked: bool) -> ScholarlyOutcome:
    if linked:
        placed = place_title(entry, work)
    else:
        found = find_work(entry, [work])
        placed = found[1] if found is not None else None
    mism = mismatches(entry, work, placed)
    report = _report(work, via, mism)
    if mism:
        parts = "; ".join(
            f"{m.field}: the reference says {m.cited!r}, {m.source} says {m.found!r}" for m in mism
        )
        return ScholarlyOutcome(
            CitationStatus.METADATA_MISMATCH,
            f"the reference does not name this paper ({parts})",
            report,
        )
    ident = f"DOI {work.doi}" if work.doi else (f"arXiv:{work.arxiv_id}" if work.arxiv_id else "")
    how = f"reached through {via}, " if via else ""
    return ScholarlyOutcome(
        CitationStatus.OK,
        f"the reference names the paper ({how}{work.source}{'; ' + ident if ident else ''})",
        report,
        work.published,
    )


async def _linked(entry: Entry, res: FetchResult, lookups: _Lookups) -> ScholarlyOutcome | None:
    final = res.final_url or res.url
    work = None
    if res.body is not None and (res.content_type or "text/html").startswith(_HTML):
        work = await asyncio.to_thread(page_work, res.body, final)
    if work is None:
        doi = _doi_of(res.url)
        arxiv = _arxiv_of(res.url) or _arxiv_of(final)
        works = (
            await lookups.crossref_doi(doi)
            if doi
            else await lookups.arxiv_id(arxiv)
            if arxiv
            else []
        )
        work = works[0] if works else None
    if work is None:
        return None  # a page with no scholarly metadata: checked as a web page only
    return _judged(entry, work, res.via_resolver, linked=True)


async def _unlinked(entry: Entry, lookups: _Lookups) -> ScholarlyOutcome:
    found = await lookups.search(entry)
    if found is None:
        return ScholarlyOutcome(
            CitationStatus.NOT_CHECKABLE,
            "the reference names no link and this answer's metadata look-ups are spent",
            ScholarlyReport(),
        )
    if isinstance(found, FetchResult):
        status = found.status if found.status.outcome is Outcome.UNVERIFIABLE else None
        return ScholarlyOutcome(
            status or CitationStatus.CONNECTION_ERROR,
            f"the Crossref look-up of this reference failed: {found.reason}",
            ScholarlyReport(source="Crossref"),
        )
    match = find_work(entry, found)
    if match is None:
        title = entry.title_guess() or entry.text[:200]
        return ScholarlyOutcome(
            CitationStatus.NOT_FOUND,
            f"no work with this title in Crossref: {title!r}",
            ScholarlyReport(source="Crossref"),
        )
    work, _placed = match
    return _judged(entry, work, None, linked=False)


_INLINE_ENTRIES = 32


def _read_all(wanted: Mapping[str, tuple[Citation, str]]) -> dict[str, Entry]:
    """The entries that read as papers, read."""
    return {key: read_entry(text) for key, (_c, text) in wanted.items() if looks_scholarly(text)}


async def check_references(
    answer: Answer,
    fetched: Mapping[str, FetchResult],
    *,
    fetcher: _Fetches,
    policy: ScholarlyPolicy,
) -> dict[str, ScholarlyOutcome]:
    """Each scholarly reference's outcome, keyed by its citation's normalised URL (a linked
    entry whose page resolved) or its ``reference:`` URL (an entry with no link)."""
    if not policy.enabled:
        return {}
    wanted: dict[str, tuple[Citation, str]] = {}
    for c in answer.citations:
        key = c.normalized_url or c.url
        if c.reference is not None and key not in wanted:
            wanted[key] = (c, c.reference)
    if not wanted:
        return {}
    # reading the entries is ~50 µs each: many are read in a thread, not on the event loop
    if len(wanted) > _INLINE_ENTRIES:
        entries = await asyncio.to_thread(_read_all, wanted)
    else:
        entries = _read_all(wanted)
    lookups = _Lookups(fetcher, policy)
    jobs: dict[str, asyncio.Future[ScholarlyOutcome | None]] = {}
    for key, entry in entries.items():
        c = wanted[key][0]
        if c.normalized_url is None:
            if c.url.startswith(REFERENCE_SCHEME) and policy.lookup_unlinked:
                jobs[key] = asyncio.ensure_future(_unlinked(entry, lookups))
            continue
        res = fetched.get(c.normalized_url)
        if res is not None and res.status is CitationStatus.OK:
            jobs[key] = asyncio.ensure_future(_linked(entry, res, lookups))
    if not jobs:
        return {}
    done = await asyncio.gather(*jobs.values())
    return {k: v for k, v in zip(jobs, done, strict=True) if v is not None}

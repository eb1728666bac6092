"""Diagnosis: which (claim, cited URL) pairs fail, and what repair cannot fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from citeguard.checks.validity import (
    build_pairs,
)
from citeguard.models import (
    Answer,
    AxisResult,
    CitationReport,
    CitationStatus,
    Claim,
    ClaimCheck,
    ClaimReport,
    Severity,
    Verdict,
)
from citeguard.policy import Policy
from citeguard.repair.records import (
    _TEXT_KINDS,
    _Diagnosis,
    _Failure,
    _norm,
)

# the error findings repair addresses (a citation's status); any other error finding (a marker
# citing no reference, too few citations, ...) is the answer function's to fix
_ADDRESSED_CODES = frozenset(s.value for s in CitationStatus) | {"uncited_reference_broken"}


def _diagnose(answer: Answer, verdict: Verdict, policy: Policy) -> _Diagnosis:
    """The failing pairs of a failing validity axis, and the failures repair cannot place."""
    diag = _Diagnosis()
    validity = verdict.axes.get("validity")
    # other failing axes are left to the re-check: a swap can mend diversity (a dead citation
    # counts no domain), while what it cannot mend fails there and goes to the feedback
    if validity is None or validity.passed:
        return diag
    seen = _Seen.of(answer, verdict, validity)
    diag.blockers.extend(
        f.message
        for f in validity.findings
        if f.severity is Severity.ERROR and f.code not in _ADDRESSED_CODES
    )
    covered: set[str] = set()
    for report in verdict.claims:
        if report.index >= len(answer.claims):
            continue
        for check in report.checks:
            got = _check_failure(seen, report, check, policy)
            if isinstance(got, _Failure):
                covered.add(got.url)
            _record(diag, got)
    # failing URLs (or their occurrences) that no claim cites: entries of the reference list
    # and links of a "Sources:" block
    for key in sorted(seen.offenders):
        _record(diag, _listed_failure(seen, key, covered))
    diag.blockers = list(dict.fromkeys(diag.blockers))
    return diag


def _record(diag: _Diagnosis, got: _Failure | str | None) -> None:
    if isinstance(got, _Failure):
        diag.failures.append(got)
    elif got is not None:
        diag.blockers.append(got)


@dataclass
class _Seen:
    """What the diagnosis reads: the answer, each cited URL's normalised form, the offending
    URLs (normalised), the URL reports and the validity pairs."""

    answer: Answer
    raw_norm: dict[str, str]
    offenders: set[str]
    reports: dict[str, CitationReport]
    pairs: dict[tuple[int, str], Any]
    listed: set[str]  # the reference list's URLs

    @classmethod
    def of(cls, answer: Answer, verdict: Verdict, validity: AxisResult) -> _Seen:
        raw_norm: dict[str, str] = {}
        for c in answer.citations:
            raw_norm.setdefault(c.url, c.normalized_url or c.url)
        return cls(
            answer,
            raw_norm,
            {raw_norm.get(u) or _norm(u) for u in validity.offending_urls},
            {(r.normalized_url or r.url): r for r in verdict.citations},
            {(p.claim.index, p.url): p for p in build_pairs(answer)},
            {_norm(u) for u in answer.references.values()},
        )

    def key(self, url: str) -> str:
        return self.raw_norm.get(url) or _norm(url)


def _check_failure(
    seen: _Seen, report: ClaimReport, check: ClaimCheck, policy: Policy
) -> _Failure | str | None:
    """One claim check as a failing pair, a blocker (why repair cannot place it), or ``None``
    (nothing to repair)."""
    answer = seen.answer
    claim = answer.claims[report.index]
    key = seen.key(check.url)
    # an offending URL, or a claim's own failure on a page that backs other claims
    if key not in seen.offenders and check.failure != "pair":
        return None
    failed = _failed_status(report, check, seen.reports.get(key), policy)
    if failed is None:
        return None
    cits = [
        i
        for i in claim.citation_indices
        if (answer.citations[i].normalized_url or answer.citations[i].url) == key
    ]
    if not cits or any(answer.citations[i].kind not in _KINDS_OK for i in cits):
        return (
            f"{check.url}: the failing citation is not part of the answer's text "
            "(a provider's citation object), so it cannot be rewritten"
        )
    pair = seen.pairs.get((claim.index, key))
    return _Failure(
        claim=claim,
        url=key,
        raw_url=check.url,
        status=failed[0],
        reason=failed[1],
        quote=check.quote,
        passage=check.passage,
        citations=cits,
        pair=pair,
        claim_text=pair.claim_text if pair is not None else claim.text,
    )


def _failed_status(
    report: ClaimReport,
    check: ClaimCheck,
    url_report: CitationReport | None,
    policy: Policy,
) -> tuple[CitationStatus, str] | None:
    """The status and reason a claim check fails with, or ``None`` when it does not fail: a
    passing check fails only when its URL was not retrieved by the run's searches; a claim not
    entailed fails only when the claim is unsupported and the policy fails unsupported claims."""
    if check.status is CitationStatus.OK:
        if url_report is None or url_report.status is not CitationStatus.NOT_RETRIEVED:
            return None
        return url_report.status, url_report.reason
    if check.status is CitationStatus.NOT_ENTAILED and (
        report.supported or not policy.entailment.fail_unsupported
    ):
        return None
    return check.status, check.reason


def _listed_failure(seen: _Seen, key: str, covered: set[str]) -> _Failure | str | None:
    """An offending URL as a failure no claim cites (its claimless occurrences), a blocker
    when it fails where repair cannot place it, or ``None`` when the claims' failures cover it."""
    url_report = seen.reports.get(key)
    claimless = [
        c.index
        for c in seen.answer.citations
        if (c.normalized_url or c.url) == key and c.claim_index is None
    ]
    if key in covered and not claimless:
        return None
    if key not in covered:
        cited = url_report is not None and bool(url_report.claim_indices)
        if cited or (not claimless and key not in seen.listed):
            why = url_report.reason if url_report is not None else "fails"
            return f"{url_report.url if url_report else key}: {why}"
    return _Failure(
        claim=None,
        url=key,
        raw_url=url_report.url if url_report is not None else key,
        status=url_report.status if url_report is not None else CitationStatus.NOT_FOUND,
        reason=url_report.reason if url_report is not None else "listed and broken",
        quote=None,
        passage=None,
        citations=claimless,
    )


_KINDS_OK = _TEXT_KINDS | {"structured"}


def _passing_urls(verdict: Verdict, claim: Claim, failing: set[str]) -> list[str]:
    """The claim's cited URLs whose check passed (raw, as cited), failing URLs left out."""
    report = next((r for r in verdict.claims if r.index == claim.index), None)
    if report is None:
        return []
    out: list[str] = []
    for check in report.checks:
        if check.status is CitationStatus.OK and _norm(check.url) not in failing:
            out.append(check.url)
    return out


# --------------------------------------------------------------------------------------------

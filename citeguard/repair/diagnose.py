"""Diagnosis: which (claim, cited URL) pairs fail, and what repair cannot fix."""

from __future__ import annotations

from citeguard.checks.validity import (
    build_pairs,
)
from citeguard.models import (
    Answer,
    CitationStatus,
    Claim,
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
    diag = _Diagnosis()
    validity = verdict.axes.get("validity")
    # other failing axes are left to the re-check: a swap can mend diversity (a dead citation
    # counts no domain), while what it cannot mend fails there and goes to the feedback
    if validity is None or validity.passed:
        return diag
    raw_norm: dict[str, str] = {}
    for c in answer.citations:
        raw_norm.setdefault(c.url, c.normalized_url or c.url)
    offenders = {raw_norm.get(u) or _norm(u) for u in validity.offending_urls}
    reports = {(r.normalized_url or r.url): r for r in verdict.citations}
    for f in validity.findings:
        if f.severity is Severity.ERROR and f.code not in _ADDRESSED_CODES:
            diag.blockers.append(f.message)
    pairs = {(p.claim.index, p.url): p for p in build_pairs(answer)}
    covered: set[str] = set()
    for report in verdict.claims:
        if report.index >= len(answer.claims):
            continue
        claim = answer.claims[report.index]
        for check in report.checks:
            key = raw_norm.get(check.url) or _norm(check.url)
            # an offending URL, or a claim's own failure on a page that backs other claims
            if key not in offenders and check.failure != "pair":
                continue
            url_report = reports.get(key)
            status, reason = check.status, check.reason
            if status is CitationStatus.OK:
                if url_report is None or url_report.status is not CitationStatus.NOT_RETRIEVED:
                    continue
                status, reason = url_report.status, url_report.reason
            elif status is CitationStatus.NOT_ENTAILED and (
                report.supported or not policy.entailment.fail_unsupported
            ):
                continue
            cits = [
                i
                for i in claim.citation_indices
                if (answer.citations[i].normalized_url or answer.citations[i].url) == key
            ]
            if not cits or any(answer.citations[i].kind not in _KINDS_OK for i in cits):
                diag.blockers.append(
                    f"{check.url}: the failing citation is not part of the answer's text "
                    "(a provider's citation object), so it cannot be rewritten"
                )
                continue
            pair = pairs.get((claim.index, key))
            covered.add(key)
            diag.failures.append(
                _Failure(
                    claim=claim,
                    url=key,
                    raw_url=check.url,
                    status=status,
                    reason=reason,
                    quote=check.quote,
                    passage=check.passage,
                    citations=cits,
                    pair=pair,
                    claim_text=pair.claim_text if pair is not None else claim.text,
                )
            )
    # failing URLs (or their occurrences) that no claim cites: entries of the reference list
    # and links of a "Sources:" block
    listed = {_norm(u) for u in answer.references.values()}
    for key in sorted(offenders):
        url_report = reports.get(key)
        claimless = [
            c.index
            for c in answer.citations
            if (c.normalized_url or c.url) == key and c.claim_index is None
        ]
        if key in covered and not claimless:
            continue
        if key not in covered:
            cited = url_report is not None and bool(url_report.claim_indices)
            if cited or (not claimless and key not in listed):
                # a failure repair cannot place in the answer
                why = url_report.reason if url_report is not None else "fails"
                diag.blockers.append(f"{url_report.url if url_report else key}: {why}")
                continue
        raw = url_report.url if url_report is not None else key
        diag.failures.append(
            _Failure(
                claim=None,
                url=key,
                raw_url=raw,
                status=url_report.status if url_report is not None else CitationStatus.NOT_FOUND,
                reason=url_report.reason if url_report is not None else "listed and broken",
                quote=None,
                passage=None,
                citations=claimless,
            )
        )
    diag.blockers = list(dict.fromkeys(diag.blockers))
    return diag


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

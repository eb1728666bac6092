"""The citation-validity axis: the URL resolves, the passage is on the page, the claim is entailed.

Composed per (claim, cited URL) pair, then rolled up per distinct URL (the unit that regeneration
excludes) and per claim (the unit users read). Pure with respect to its inputs: the fetch results
and extracted pages come in, an :class:`AxisResult` and reports come out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from citeguard.checks.base import AnnotatorKind, CheckContext, is_llm_backend
from citeguard.checks.entail import Entailer, evidence_windows
from citeguard.checks.freshness import find_caveat
from citeguard.checks.passage import (
    PreparedText,
    find_paraphrase,
    find_passage,
    prepare_text,
    text_fragment_url,
)
from citeguard.models import (
    Answer,
    AxisResult,
    CitationReport,
    CitationStatus,
    Claim,
    ClaimCheck,
    ClaimReport,
    EntailmentScore,
    FetchResult,
    Finding,
    Outcome,
    Page,
    PassageMatch,
    Severity,
    Verdict,
)
from citeguard.policy import Policy
from citeguard.web.urls import registrable_domain

_PASS_STATUSES = frozenset({CitationStatus.OK})


@dataclass
class _Pair:
    claim: Claim
    url: str
    claim_text: str
    quote: str | None
    status: CitationStatus = CitationStatus.OK
    reason: str = "ok"
    passage: PassageMatch | None = None
    evidence: str | None = None
    entailment: EntailmentScore | None = None


@dataclass(frozen=True)
class ExtractedPage:
    """A page with its texts normalised once for every quote and paraphrase matched on it."""

    page: Page
    text: PreparedText
    main: PreparedText | None

    @classmethod
    def of(cls, page: Page) -> ExtractedPage:
        main = prepare_text(page.main_text) if page.main_text else None
        return cls(page=page, text=prepare_text(page.text), main=main)


@dataclass
class ValidityOutcome:
    axis: AxisResult
    citations: list[CitationReport]
    claims: list[ClaimReport]
    offending_urls: frozenset[str] = field(default_factory=frozenset)


def claim_text_without_markers(answer: Answer, claim: Claim) -> str:
    """The claim's words with citation markers removed (what an entailer should judge)."""
    pieces: list[str] = []
    pos = claim.start
    for ci in sorted(claim.citation_indices, key=lambda i: answer.citations[i].start):
        c = answer.citations[ci]
        if c.start < 0 or c.start < pos or c.end > claim.end:
            continue
        if c.kind in ("inline_link", "reference_link", "html_anchor"):
            # keep the link text: it is part of the sentence
            pieces.append(answer.text[pos : c.start])
            pieces.append(c.label or "")
        else:
            pieces.append(answer.text[pos : c.start])
        pos = c.end
    pieces.append(answer.text[pos : claim.end])
    text = " ".join("".join(pieces).split())
    # "As of 2 December 2026, X is ..." — the caveat dates the answer, it is not a claim the
    # source must back (the freshness axis checks it)
    caveat = find_caveat(text)
    if caveat is not None:
        rest = (text[: caveat.start] + text[caveat.end :]).strip(" ,;:—–-")
        text = rest[:1].upper() + rest[1:] if caveat.start == 0 else rest
    return text or claim.text


def _evidence_window(text: str, match: PassageMatch | None, window_chars: int) -> str:
    """The sentences around the matched passage (the whole text when nothing was matched)."""
    if not text:
        return ""
    if match is None or match.start < 0:
        return text  # the entailer windows it and keeps the best windows
    # cut a bounded slice first so sentence splitting never walks the whole page
    lo = max(0, match.start - window_chars)
    hi = min(len(text), match.end + window_chars)
    windows = evidence_windows(
        text[lo:hi], window_chars=window_chars, around=(match.start - lo, match.end - lo)
    )
    return windows[0] if windows else text[lo:hi]


def _passage_for(pair: _Pair, page: ExtractedPage, policy: Policy) -> PassageMatch:
    if pair.quote:
        return find_passage(pair.quote, page.text, main_text=page.main, policy=policy.passage)
    return find_paraphrase(pair.claim_text, page.text, policy=policy.passage)


def _failed_passage(match: PassageMatch, quoted: bool) -> tuple[CitationStatus, str] | None:
    if match.found:
        return None
    if match.altered:
        toks = ", ".join(match.differing_tokens[:6])
        return CitationStatus.PASSAGE_ALTERED, (
            f"the quote differs from the page in meaning-bearing words ({toks})"
            if toks
            else "the quote differs from the page in meaning-bearing words"
        )
    if quoted:
        return (
            CitationStatus.PASSAGE_MISSING,
            match.reason or "the quoted passage is not on the page",
        )
    return CitationStatus.PASSAGE_MISSING, match.reason or "paraphrase drifts too far from the page"


async def check_validity(
    answer: Answer,
    fetched: Mapping[str, FetchResult],
    extracted: Mapping[str, ExtractedPage],
    *,
    policy: Policy,
    entailer: Entailer | None,
    excluded: frozenset[str] = frozenset(),
    retrieved: frozenset[str] | None = None,
) -> ValidityOutcome:
    """Compose resolution, passage presence and entailment into the validity axis.

    ``fetched`` and ``extracted`` are keyed by normalised URL. ``retrieved`` is the set of
    normalised URLs that recorded searches returned (None when no search was recorded).
    """
    pages = {u: e.page for u, e in extracted.items()}
    findings: list[Finding] = list(answer.findings)
    url_status: dict[str, tuple[CitationStatus, str]] = {}
    url_claims: dict[str, list[int]] = {}
    raw_url: dict[str, str] = {}
    normalized = {c.normalized_url for c in answer.citations if c.normalized_url}

    # 1. resolution (per distinct URL)
    for c in answer.citations:
        key = c.normalized_url or c.url
        raw_url.setdefault(key, c.url)
        if c.claim_index is not None:
            lst = url_claims.setdefault(key, [])
            if c.claim_index not in lst:
                lst.append(c.claim_index)
        if key in url_status:
            continue
        if c.normalized_url is None:
            bad = next(
                (
                    f
                    for f in answer.findings
                    if f.url == c.url and f.code in ("blocked_scheme", "malformed_url")
                ),
                None,
            )
            if bad is not None and bad.code == "blocked_scheme":
                url_status[key] = (CitationStatus.BLOCKED_SCHEME, bad.message)
            else:
                reason = bad.message if bad is not None else "the URL cannot be parsed"
                url_status[key] = (CitationStatus.MALFORMED_URL, reason)
        elif c.normalized_url in excluded:
            url_status[key] = (
                CitationStatus.EXCLUDED_BY_POLICY,
                "this URL was excluded after it failed an earlier attempt",
            )
        else:
            res = fetched.get(c.normalized_url)
            if res is None:
                url_status[key] = (CitationStatus.TIMEOUT, "not fetched before the deadline")
            else:
                url_status[key] = (res.status, res.reason)
                page = pages.get(c.normalized_url)
                if (
                    res.status is CitationStatus.OK
                    and page is not None
                    and page.kind == "unsupported"
                ):
                    url_status[key] = (
                        CitationStatus.UNSUPPORTED_TYPE,
                        f"cannot read the page (content type {res.content_type or 'unknown'})",
                    )

    # 2. per (claim, URL) pairs on resolving pages
    pairs: list[_Pair] = []
    for claim in answer.claims:
        seen: set[str] = set()
        ctext = claim_text_without_markers(answer, claim)
        for ci in claim.citation_indices:
            cit = answer.citations[ci]
            key = cit.normalized_url or cit.url
            if key in seen:
                continue
            seen.add(key)
            pair = _Pair(claim=claim, url=key, claim_text=ctext, quote=cit.quote)
            st, why = url_status.get(key, (CitationStatus.MALFORMED_URL, "unknown URL"))
            if st is not CitationStatus.OK:
                pair.status, pair.reason = st, why
            pairs.append(pair)

    check_passages = policy.passage.check_passages
    for pair in pairs:
        if pair.status is not CitationStatus.OK:
            continue
        ext = extracted.get(pair.url)
        if ext is None:
            continue
        page = ext.page
        if check_passages and (pair.quote or pair.claim_text):
            match = _passage_for(pair, ext, policy)
            pair.passage = match
            failed = _failed_passage(match, quoted=bool(pair.quote))
            if failed is not None:
                pair.status, pair.reason = failed
                continue
            if pair.quote and policy.passage.require_main_text and match.in_main_text is False:
                pair.status = CitationStatus.PASSAGE_MISSING
                pair.reason = "the quote is only in the page's boilerplate, not its main text"
                continue
        pair.evidence = _evidence_window(page.text, pair.passage, policy.entailment.window_chars)

    # 3. entailment, batched across the whole answer
    to_score = [
        p for p in pairs if p.status is CitationStatus.OK and p.evidence and entailer is not None
    ]
    if to_score and entailer is not None and policy.entailment.check_entailment:
        scores = await entailer.score([(p.claim_text, p.evidence or "") for p in to_score])
        for p, s in zip(to_score, scores, strict=True):
            p.entailment = s
            if s.label != "supported":
                p.status = CitationStatus.NOT_ENTAILED
                p.reason = (
                    f"the page contradicts the claim ({s.reason})"
                    if s.label == "contradicted"
                    else f"the passage does not support the claim ({s.reason})"
                ).replace(" ()", "")

    # 4. roll up per claim
    claim_reports: list[ClaimReport] = []
    by_claim: dict[int, list[_Pair]] = {}
    for p in pairs:
        by_claim.setdefault(p.claim.index, []).append(p)
    failing_pairs: list[_Pair] = []
    for claim in answer.claims:
        cps = by_claim.get(claim.index, [])
        checks = [
            ClaimCheck(
                claim_index=claim.index,
                url=raw_url.get(p.url, p.url),
                status=p.status,
                reason=p.reason,
                quote=p.quote,
                passage=p.passage,
                entailment=p.entailment,
            )
            for p in cps
        ]
        if not cps:
            claim_reports.append(ClaimReport(index=claim.index, text=claim.text, checks=[]))
            continue
        supported = any(p.status is CitationStatus.OK for p in cps)
        best = max((p.entailment.score for p in cps if p.entailment), default=None)
        claim_reports.append(
            ClaimReport(
                index=claim.index, text=claim.text, checks=checks, supported=supported, support=best
            )
        )
        for p in cps:
            if p.status is CitationStatus.OK:
                continue
            # one unsupported citation is tolerated when another citation carries the claim
            if p.status is CitationStatus.NOT_ENTAILED and (
                supported or not policy.entailment.fail_unsupported
            ):
                continue
            failing_pairs.append(p)

    # 5. roll up per URL
    pair_fail: dict[str, _Pair] = {}
    for p in failing_pairs:
        pair_fail.setdefault(p.url, p)
    reports: list[CitationReport] = []
    offenders: set[str] = set()
    for key, (st, why) in url_status.items():
        pf = pair_fail.get(key)
        if st is CitationStatus.OK and pf is not None:
            st, why = pf.status, pf.reason
        if st is CitationStatus.OK and retrieved is not None and key not in retrieved:
            msg = "no recorded search returned this URL (a common sign of a fabricated URL)"
            if policy.not_retrieved_fails:
                st, why = CitationStatus.NOT_RETRIEVED, msg
            else:
                findings.append(
                    Finding(
                        code="not_retrieved",
                        message=msg,
                        severity=Severity.WARNING,
                        axis="validity",
                        url=raw_url[key],
                    )
                )
        res = fetched.get(key)
        page = pages.get(key)
        url_pairs = [p for p in pairs if p.url == key]
        shown = next((p for p in url_pairs if p.passage is not None and p.passage.found), None)
        passage = (pf.passage if pf is not None else None) or (shown.passage if shown else None)
        ent = (pf.entailment if pf is not None else None) or (shown.entailment if shown else None)
        frag = None
        final = res.final_url if res is not None else None
        if shown is not None and shown.passage is not None and shown.passage.matched_text:
            frag = text_fragment_url(final or raw_url[key], shown.passage.matched_text)
        report = CitationReport(
            url=raw_url[key],
            normalized_url=key if key in normalized else None,
            final_url=final,
            domain=_domain(key),
            status=st,
            reason=why,
            http_status=res.http_status if res is not None else None,
            redirects=list(res.redirects) if res is not None else [],
            claim_indices=url_claims.get(key, []),
            passage=passage,
            entailment=ent,
            published=page.published if page is not None else None,
            modified=page.modified if page is not None else None,
            text_fragment_url=frag,
            title=page.title if page is not None else None,
            elapsed_ms=res.elapsed_ms if res is not None else 0.0,
        )
        reports.append(report)
        if st in _PASS_STATUSES:
            continue
        fails = st.outcome is not Outcome.UNVERIFIABLE or policy.unverifiable_fails
        findings.append(
            Finding(
                code=st.value,
                message=f"{raw_url[key]}: {why}",
                severity=Severity.ERROR if fails else Severity.WARNING,
                axis="validity",
                url=raw_url[key],
                details={"outcome": st.outcome.value},
            )
        )
        if fails:
            offenders.add(key)

    n = len(reports)
    ok = sum(1 for r in reports if r.status in _PASS_STATUSES)
    cited_claims = [c for c in claim_reports if c.supported is not None]
    supported_share = (
        sum(1 for c in cited_claims if c.supported) / len(cited_claims) if cited_claims else None
    )
    supports = [c.support for c in cited_claims if c.support is not None]
    mean_support = sum(supports) / len(supports) if supports else None
    share_ok = True
    if (
        supported_share is not None
        and policy.entailment.min_supported_share > 0
        and supported_share < policy.entailment.min_supported_share
    ):
        share_ok = False
        findings.append(
            Finding(
                code="low_supported_share",
                message=(
                    f"only {supported_share:.0%} of cited claims are supported; the policy asks "
                    f"for {policy.entailment.min_supported_share:.0%}"
                ),
                axis="validity",
            )
        )
    if n == 0:
        findings.append(
            Finding(
                code="no_citations",
                message="the answer cites no sources",
                severity=Severity.WARNING,
                axis="validity",
            )
        )
    axis = AxisResult(
        name="validity",
        passed=not offenders and share_ok,
        score=(ok / n) if n else None,
        evaluated=n > 0,
        findings=findings,
        offending_urls=sorted(raw_url[k] for k in offenders),
        details={
            "citations": n,
            "resolving": ok,
            "claims_cited": len(cited_claims),
            "supported_share": supported_share,
            "mean_support": mean_support,
        },
    )
    return ValidityOutcome(
        axis=axis,
        citations=reports,
        claims=claim_reports,
        offending_urls=frozenset(raw_url[k] for k in offenders),
    )


def _domain(url: str) -> str | None:
    try:
        return registrable_domain(url)
    except Exception:  # a malformed URL has no domain; that is already its finding
        return None


class ValidityCheck:
    """The validity axis. Its work happens in the citation stage (:func:`check_validity`), which
    also yields the per-citation and per-claim reports every other axis reads; this check hands
    that stage's axis to the verdict."""

    name = "validity"
    hint = "Cite only pages that load and that state what you claim; quote them verbatim."
    feeds_back_when_advisory = False

    def __init__(self, policy: Policy) -> None:
        self._policy = policy

    async def run(self, ctx: CheckContext) -> AxisResult:
        assert ctx.validity is not None, "the citation stage runs before the checks"
        return ctx.validity

    def annotator(self, axis: AxisResult, verdict: Verdict) -> AnnotatorKind:
        backends = [str(axis.details.get("backend") or "")]
        backends += [c.entailment.backend for c in verdict.citations if c.entailment]
        backends += [
            ch.entailment.backend for cl in verdict.claims for ch in cl.checks if ch.entailment
        ]
        return "LLM" if any(is_llm_backend(b) for b in backends) else "CODE"

    async def aclose(self) -> None:
        return None


__all__ = ["ValidityCheck", "ValidityOutcome", "check_validity", "claim_text_without_markers"]

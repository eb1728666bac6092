"""The citation-validity axis: the URL resolves, the passage is on the page, the claim is entailed.

Composed per (claim, cited URL) pair, then rolled up per distinct URL (the unit that regeneration
excludes) and per claim (the unit users read). Pure with respect to its inputs: the fetch results
and extracted pages come in, an :class:`AxisResult` and reports come out.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from citeguard.checks.base import AnnotatorKind, CheckContext, is_llm_backend
from citeguard.checks.claim_view import claim_fragment, claim_report, mark_gated
from citeguard.checks.entail import Entailer
from citeguard.checks.failures import excludes, mark_failures, pair_findings
from citeguard.checks.minilm import LOCAL_MODEL_HINT
from citeguard.checks.pairs import (
    _INLINE_ITEMS,
    EarlyValidity,
    ExtractedPage,
    OnUncertain,
    ScoreCache,
    _Pair,
    _unsettled,
    _verify_pairs,
    _wants_score,
    build_pairs,
    claim_text_without_markers,
    judge_uncertain,
    score_pairs,
    verify_pair,
)

# the per-pair room's private names the tests import from here, as they always did
from citeguard.checks.pairs import _TurnBudget as _TurnBudget
from citeguard.checks.passage import text_fragment_url
from citeguard.models import (
    Answer,
    AxisResult,
    CitationReport,
    CitationStatus,
    ClaimCheck,
    ClaimReport,
    EntailmentLabel,
    FailureKind,
    FetchResult,
    Finding,
    Outcome,
    Page,
    Severity,
    Verdict,
)
from citeguard.policy import Policy
from citeguard.web.botwall import bot_wall_reason
from citeguard.web.soft404 import soft_404_reason
from citeguard.web.urls import UrlProblem, normalize_url, registrable_domain

_PASS_STATUSES = frozenset({CitationStatus.OK})


@dataclass
class ValidityOutcome:
    axis: AxisResult
    citations: list[CitationReport]
    claims: list[ClaimReport]
    offending_urls: frozenset[str] = field(default_factory=frozenset)


def uncited_references(answer: Answer) -> dict[str, str]:
    """Reference-list entries no marker cites, normalised URL → URL as written: the user still
    sees and can click them, so the guard checks that they resolve."""
    out: dict[str, str] = {}
    cited = set(answer.urls)
    for f in answer.findings:
        if f.code != "unused_reference" or not f.url:
            continue
        try:
            key = normalize_url(f.url)
        except UrlProblem:
            continue
        if key not in cited:
            out.setdefault(key, f.url)
    return out


async def check_validity(
    answer: Answer,
    fetched: Mapping[str, FetchResult],
    extracted: Mapping[str, ExtractedPage],
    *,
    policy: Policy,
    entailer: Entailer | None,
    excluded: frozenset[str] = frozenset(),
    retrieved: frozenset[str] | None = None,
    early: EarlyValidity | None = None,
    cache: ScoreCache | None = None,
    soft_404s: Mapping[str, str] | None = None,
    cascade: Entailer | None = None,
    carried: Mapping[str, CitationReport] | None = None,
) -> ValidityOutcome:
    """Compose resolution, passage presence and entailment into the validity axis.

    ``fetched`` and ``extracted`` are keyed by normalised URL. ``retrieved`` is the set of
    normalised URLs that recorded searches returned (None when no search was recorded).
    ``early`` holds the pairs of pages verified and scored as they arrived (the Guard's
    pipeline); ``cache`` the scores of earlier attempts; ``soft_404s`` the pages found to be
    their host's catch-all page (URL → reason); ``cascade`` the judge that uncertain claims go
    to when ``Policy.on_uncertain_mode`` is "judge". ``carried``: the ``excluded`` URLs that
    failed an earlier attempt of the run (normalised URL → that failure's report): each keeps
    its status and reason; any other excluded URL is the caller's (``excluded_by_policy``).
    """
    soft_404s = soft_404s or {}
    carried = carried or {}
    pages = {u: e.page for u, e in extracted.items()}
    findings: list[Finding] = list(answer.findings)
    url_status: dict[str, tuple[CitationStatus, str]] = {}
    url_claims: dict[str, dict[int, None]] = {}
    raw_url: dict[str, str] = {}
    normalized = {c.normalized_url for c in answer.citations if c.normalized_url}
    # reference-list entries no marker cites: shown to the user, so checked like citations
    many = len(answer.findings) > _INLINE_ITEMS  # each unused reference is a finding
    listed = (
        await asyncio.to_thread(uncited_references, answer) if many else uncited_references(answer)
    )
    normalized.update(listed)

    # 1. resolution (per distinct URL); in a thread for an answer of many citations
    resolve = functools.partial(
        _resolution,
        answer,
        fetched,
        pages,
        excluded=excluded,
        carried=carried,
        soft_404s=soft_404s,
        url_status=url_status,
        url_claims=url_claims,
        raw_url=raw_url,
        listed=listed,
    )
    if len(answer.citations) + len(listed) > _INLINE_ITEMS:
        await asyncio.to_thread(resolve)
    else:
        resolve()

    # 2. per (claim, URL) pairs on resolving pages (pages that arrived early were verified then)
    pairs = early.pairs if early is not None else build_pairs(answer)
    if early is not None:
        await early.verified()
    judge = entailer if policy.entailment.check_entailment else None
    fallback = getattr(judge, "fallback", None)
    if isinstance(fallback, str) and answer.claims:  # backend="auto" without the local model
        findings.append(
            Finding(
                code="validity.entailment_fallback",
                message=fallback,
                severity=Severity.WARNING,
                axis="validity",
                details={"backend": getattr(judge, "name", "?"), "hint": LOCAL_MODEL_HINT},
            )
        )
    if len(pairs) > _INLINE_ITEMS:
        work = await asyncio.to_thread(_unverified, pairs, url_status, extracted)
    else:
        work = _unverified(pairs, url_status, extracted)
    await _verify_pairs(work, policy, judged=judge is not None)

    # 3. entailment, batched across the whole answer (and begun per page as pages arrived)
    if early is not None:
        await early.scored()
    if judge is not None:
        mode = policy.on_uncertain_mode
        await score_pairs(
            judge, [p for p in pairs if _wants_score(p)], cache=cache, on_uncertain=mode
        )
        # 3b. the cascade: only the claims the first backend left uncertain go to the judge
        if mode == "judge" and cascade is not None and cascade is not judge:
            await judge_uncertain(cascade, pairs, cache=cache)

    # 4-6. the reports, on the loop when that is quick, else in a thread (a hostile answer
    # can hold 100,000 claims: building their reports takes seconds)
    roll_up = functools.partial(
        _roll_up,
        answer,
        pairs,
        fetched=fetched,
        pages=pages,
        policy=policy,
        excluded=excluded,
        carried=carried,
        retrieved=retrieved,
        findings=findings,
        url_status=url_status,
        url_claims=url_claims,
        raw_url=raw_url,
        normalized=normalized,
        listed=listed,
    )
    # per citation too: 2,000 bare URLs (no claim, no pair) held the event loop for ~100 ms;
    # and per listed reference: 3,000 that no marker cites held it for ~30 ms
    items = len(pairs) + len(answer.claims) + len(answer.citations) + len(listed)
    if items > _INLINE_ITEMS:
        return await asyncio.to_thread(roll_up)
    return roll_up()


def _unverified(
    pairs: Sequence[_Pair],
    url_status: Mapping[str, tuple[CitationStatus, str]],
    extracted: Mapping[str, ExtractedPage],
) -> list[tuple[_Pair, ExtractedPage]]:
    """Each pair's URL status applied; the pairs on resolving pages still to verify."""
    for pair in pairs:
        st, why = url_status.get(pair.url, (CitationStatus.MALFORMED_URL, "unknown URL"))
        if st is not CitationStatus.OK:
            pair.status, pair.reason = st, why
    return [
        (pair, ext)
        for pair in pairs
        if pair.status is CitationStatus.OK
        and not pair.verified
        and (ext := extracted.get(pair.url)) is not None
    ]


def _resolution(
    answer: Answer,
    fetched: Mapping[str, FetchResult],
    pages: Mapping[str, Page],
    *,
    excluded: frozenset[str],
    carried: Mapping[str, CitationReport],
    soft_404s: Mapping[str, str],
    url_status: dict[str, tuple[CitationStatus, str]],
    url_claims: dict[str, dict[int, None]],
    raw_url: dict[str, str],
    listed: Mapping[str, str],
) -> None:
    """Each distinct URL's status and reason (fetch, exclusion, unreadable page, soft 404),
    the claims citing it and its first spelling, filled into the given dicts; the ``listed``
    references no marker cites (normalised URL → as written) after the citations."""
    url_problems: dict[str, Finding] = {}
    for f in answer.findings:
        if f.url is not None and f.code in ("blocked_scheme", "malformed_url", "not_checkable"):
            url_problems.setdefault(f.url, f)
    for c in answer.citations:
        key = c.normalized_url or c.url
        raw_url.setdefault(key, c.url)
        if c.claim_index is not None:
            # claims per URL, in order, each once (a dict: linear in the citations)
            url_claims.setdefault(key, {})[c.claim_index] = None
        if key in url_status:
            continue
        if c.normalized_url is None:
            bad = url_problems.get(c.url)
            if bad is not None and bad.code == "blocked_scheme":
                url_status[key] = (CitationStatus.BLOCKED_SCHEME, bad.message)
            elif bad is not None and bad.code == "not_checkable":
                # a provider's document citation with no URL (citeguard.providers)
                url_status[key] = (CitationStatus.NOT_CHECKABLE, bad.message)
            else:
                reason = bad.message if bad is not None else "the URL cannot be parsed"
                url_status[key] = (CitationStatus.MALFORMED_URL, reason)
        else:
            url_status[key] = _fetched_status(
                c.normalized_url, fetched, pages, excluded, carried, soft_404s
            )
    for key, raw in listed.items():
        raw_url.setdefault(key, raw)
        if key not in url_status:
            url_status[key] = _fetched_status(key, fetched, pages, excluded, carried, soft_404s)


def _fetched_status(
    key: str,
    fetched: Mapping[str, FetchResult],
    pages: Mapping[str, Page],
    excluded: frozenset[str],
    carried: Mapping[str, CitationReport],
    soft_404s: Mapping[str, str],
) -> tuple[CitationStatus, str]:
    """A well-formed URL's status and reason: excluded (its failure in an earlier attempt, or
    the caller's exclusion), not fetched in time, the fetch's own, an unreadable page, or a soft
    404 (a "not found" page, or the host's catch-all)."""
    if key in excluded:
        earlier = carried.get(key)
        if earlier is not None:
            return earlier.status, earlier.reason
        return (
            CitationStatus.EXCLUDED_BY_POLICY,
            "the caller excluded this URL (exclude_urls); it was not fetched",
        )
    res = fetched.get(key)
    if res is None:
        return CitationStatus.TIMEOUT, "not fetched before the deadline"
    page = pages.get(key)
    if res.status is CitationStatus.OK and page is not None and page.kind == "unsupported":
        return (
            CitationStatus.UNSUPPORTED_TYPE,
            page.problem or f"cannot read the page (content type {res.content_type or 'unknown'})",
        )
    if res.status is CitationStatus.OK and page is not None:
        wall = bot_wall_reason(page)
        if wall is not None:
            return CitationStatus.BOT_WALL, wall
        soft = soft_404_reason(page) or soft_404s.get(key)
        if soft is not None:
            return CitationStatus.SOFT_404, soft
    return res.status, res.reason


def _final_url(fetched: Mapping[str, FetchResult], key: str) -> str | None:
    res = fetched.get(key)
    return None if res is None else res.final_url


# claims, citations or pairs handled on the event loop at once, at most, when building pairs,


def _roll_up(
    answer: Answer,
    pairs: Sequence[_Pair],
    *,
    fetched: Mapping[str, FetchResult],
    pages: Mapping[str, Page],
    policy: Policy,
    excluded: frozenset[str],
    carried: Mapping[str, CitationReport],
    retrieved: frozenset[str] | None,
    findings: list[Finding],
    url_status: Mapping[str, tuple[CitationStatus, str]],
    url_claims: Mapping[str, Mapping[int, None]],
    raw_url: dict[str, str],
    normalized: set[str],
    listed: Mapping[str, str],
) -> ValidityOutcome:
    """Claim and citation reports (the ``listed`` references no marker cites among them, cited
    by no claim) and the validity axis."""
    # 4. roll up per claim
    claim_reports: list[ClaimReport] = []
    by_claim: dict[int, list[_Pair]] = {}
    by_url: dict[str, list[_Pair]] = {}
    for p in pairs:
        by_claim.setdefault(p.claim.index, []).append(p)
        by_url.setdefault(p.url, []).append(p)
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
                text_fragment_url=claim_fragment(
                    _final_url(fetched, p.url) or raw_url.get(p.url, p.url), p.passage, p.entailment
                ),
            )
            for p in cps
        ]
        claim_reports.append(claim_report(claim, checks))
        if not cps:
            continue
        supported = any(p.status is CitationStatus.OK for p in cps)
        for p in cps:
            if p.status is CitationStatus.OK:
                continue
            # one unsupported citation is tolerated when another citation carries the claim
            if p.status is CitationStatus.NOT_ENTAILED and (
                supported or not policy.entailment.fail_unsupported
            ):
                continue
            failing_pairs.append(p)

    # 5. roll up per URL: a URL's own failure excludes it; a failing (claim, URL) pair excludes
    # it only when no claim it backs passes (checks/failures.py)
    pair_fail: dict[str, list[_Pair]] = {}
    for p in failing_pairs:
        pair_fail.setdefault(p.url, []).append(p)
    backed = {p.url for p in pairs if p.status is CitationStatus.OK}
    kinds: dict[str, FailureKind] = {}
    reports: list[CitationReport] = []
    offenders: set[str] = set()
    for key, (st, why) in url_status.items():
        url_fails = pair_fail.get(key, [])
        pf = url_fails[0] if url_fails else None
        kind: FailureKind = "url"
        if st is CitationStatus.OK and pf is not None:
            st, why, kind = pf.status, pf.reason, "pair"
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
        url_pairs = by_url.get(key, [])
        shown = next((p for p in url_pairs if p.passage is not None and p.passage.found), None)
        passage = (pf.passage if pf is not None else None) or (shown.passage if shown else None)
        unsettled = [p for p in url_pairs if _unsettled(p)] if st is CitationStatus.OK else []
        ent = (
            (pf.entailment if pf is not None else None)
            or (unsettled[0].entailment if unsettled else None)
            or (shown.entailment if shown else None)
            or next((p.entailment for p in url_pairs if p.entailment is not None), None)
        )
        support = _support_of(st, pf, unsettled, url_pairs)
        findings.extend(_uncertain_finding(p, raw_url[key]) for p in unsettled)
        frag = None
        final = res.final_url if res is not None else None
        if shown is not None and shown.passage is not None and shown.passage.matched_text:
            frag = text_fragment_url(final or raw_url[key], shown.passage.matched_text)
        fails = st not in _PASS_STATUSES and (
            st.outcome is not Outcome.UNVERIFIABLE or policy.unverifiable_fails
        )
        report = CitationReport(
            url=raw_url[key],
            normalized_url=key if key in normalized else None,
            final_url=final,
            domain=_domain(key),
            status=st,
            reason=why,
            http_status=(
                res.http_status
                if res is not None
                else (earlier.http_status if (earlier := carried.get(key)) else None)
            ),
            redirects=list(res.redirects) if res is not None else [],
            claim_indices=list(url_claims.get(key, {})),
            cited_by_claim=bool(url_claims.get(key)),
            passage=passage,
            entailment=ent,
            support=support,
            published=page.published if page is not None else None,
            modified=page.modified if page is not None else None,
            date_source=page.date_source if page is not None else None,
            text_fragment_url=frag,
            title=page.title if page is not None else None,
            elapsed_ms=res.elapsed_ms if res is not None else 0.0,
            failure=kind if fails else None,
            excluded=key in excluded,
        )
        reports.append(report)
        if st in _PASS_STATUSES:
            continue
        if fails:
            kinds[key] = kind
        if fails and kind == "pair":
            excluded_here = excludes(kind, key, backed)
            findings.extend(pair_findings(raw_url[key], url_fails, excluded=excluded_here))
            if excluded_here:
                offenders.add(key)
            continue
        # a reference-list entry no marker cites is shown to the user: it must resolve too
        uncited = key in listed
        findings.append(
            Finding(
                code=(
                    st.value
                    if not uncited
                    else "uncited_reference_broken"
                    if st.outcome is Outcome.BROKEN
                    else "uncited_reference_unverifiable"
                ),
                message=(
                    f"{raw_url[key]}"
                    + (" (listed in the references, cited by no claim)" if uncited else "")
                    + f": {why}"
                ),
                severity=Severity.ERROR if fails else Severity.WARNING,
                axis="validity",
                url=raw_url[key],
                details={"outcome": st.outcome.value, "status": st.value}
                | ({"failure": "url"} if fails else {}),
            )
        )
        if fails:
            offenders.add(key)

    # the per-claim view: which (claim, URL) pairs failed the axis, and whether the URL or the
    # pair failed
    failed = {
        (p.claim.index, raw_url.get(p.url, p.url)): kinds[p.url]
        for p in failing_pairs
        if p.url in kinds
    }
    claim_reports = mark_failures(mark_gated(claim_reports, failed), failed)

    # the answer's citations (the listed references no marker cites are reported, not counted)
    counted = [r for r in reports if (r.normalized_url or r.url) not in listed]
    n = len(counted)
    ok = sum(1 for r in counted if r.status in _PASS_STATUSES)
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
    too_few = n < policy.min_citations
    if n == 0 or too_few:
        findings.append(
            Finding(
                code="no_citations" if n == 0 else "too_few_citations",
                message=(
                    "the answer cites no sources"
                    + (f"; the {len(listed)} it lists are cited by no claim" if listed else "")
                    if n == 0
                    else f"the answer cites {n} source(s); the policy asks for at least "
                    f"{policy.min_citations}"
                ),
                severity=Severity.ERROR if too_few else Severity.WARNING,
                axis="validity",
            )
        )
    # an error finding fails its axis (a marker citing no reference, a bad URL, no sources)
    errors = any(f.severity is Severity.ERROR and f.axis in (None, "validity") for f in findings)
    axis = AxisResult(
        name="validity",
        passed=not offenders and share_ok and not errors,
        score=(ok / n) if n else None,
        evaluated=n > 0 or too_few,
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


def _support_of(
    status: CitationStatus,
    failing: _Pair | None,
    unsettled: Sequence[_Pair],
    pairs: Sequence[_Pair],
) -> EntailmentLabel | None:
    """A cited URL's support: its failing claim's label (when support failed it), else
    "uncertain" when a claim passed unsettled, else "supported" when a claim's support was
    judged; None when none was."""
    if failing is not None and failing.entailment is not None:
        return failing.entailment.label
    if status is not CitationStatus.OK:
        return None
    if unsettled:
        return "uncertain"
    judged = [p for p in pairs if p.entailment is not None and p.status is CitationStatus.OK]
    return "supported" if judged else None


def _uncertain_finding(pair: _Pair, url: str) -> Finding:
    """``validity.support_uncertain``: the citation passes, but its claim's support could not be
    settled either way (what the user should read before trusting the claim)."""
    e = pair.entailment
    assert e is not None  # an unsettled pair has its score
    claim = " ".join(pair.claim_text.split())
    claim = claim if len(claim) <= 120 else claim[:119] + "…"
    return Finding(
        code="validity.support_uncertain",
        message=(
            f"{url}: could not settle whether the page supports claim {pair.claim.index + 1} "
            f"(“{claim}”): {e.reason}"
        ),
        severity=Severity.WARNING,
        axis="validity",
        url=url,
        claim_index=pair.claim.index,
        details={
            "backend": e.backend,
            "p_supported": round(e.score, 4),
            "thresholds": list(e.thresholds) if e.thresholds is not None else None,
        },
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


__all__ = [
    "EarlyValidity",
    "ExtractedPage",
    "OnUncertain",
    "ScoreCache",
    "ValidityCheck",
    "ValidityOutcome",
    "build_pairs",
    "check_validity",
    "claim_text_without_markers",
    "judge_uncertain",
    "score_pairs",
    "uncited_references",
    "verify_pair",
]

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
    relevance_floor,
    score_pairs,
    verify_pair,
)

# the per-pair room's private names the tests import from here, as they always did
from citeguard.checks.pairs import _TurnBudget as _TurnBudget
from citeguard.checks.passage import text_fragment_url
from citeguard.checks.scholarly import ScholarlyOutcome
from citeguard.models import (
    Answer,
    AxisResult,
    CitationReport,
    CitationStatus,
    ClaimCheck,
    ClaimReport,
    EntailmentLabel,
    EntailmentScore,
    FailureKind,
    FetchResult,
    Finding,
    Outcome,
    Page,
    PassageMatch,
    Severity,
    Verdict,
)
from citeguard.parse.scholarly import REFERENCE_SCHEME
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
    scholarly: Mapping[str, ScholarlyOutcome] | None = None,
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
    ``scholarly``: the scholarly references' outcomes (:mod:`citeguard.checks.scholarly`), by
    normalised URL (or ``reference:`` URL): a page that resolved takes its reference's status.
    """
    soft_404s = soft_404s or {}
    scholarly = scholarly or {}
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
        scholarly=scholarly,
    )
    if len(answer.citations) + len(listed) > _INLINE_ITEMS:
        await asyncio.to_thread(resolve)
    else:
        resolve()

    # 2. per (claim, URL) pairs on resolving pages (pages that arrived early were verified then)
    pairs = early.pairs if early is not None else build_pairs(answer)
    if early is not None:
        await early.verified()
        await early.turn()  # what is left is verified in a turn of the loop with time for it
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
    await _verify_pairs(work, policy, floor=relevance_floor(policy, judge))

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
    if early is not None:
        await early.turn()  # the reports, the other axes and the verdict: one stretch of CPU

    # 4-6. the reports, on the loop when that is quick, else in a thread (a hostile answer
    # can hold 100,000 claims: building their reports takes seconds)
    ctx = _RollUp(
        fetched=fetched,
        pages=pages,
        policy=policy,
        excluded=excluded,
        carried=carried,
        retrieved=retrieved,
        url_claims=url_claims,
        raw_url=raw_url,
        normalized=normalized,
        listed=listed,
        scholarly=scholarly,
    )
    roll_up = functools.partial(_roll_up, answer, pairs, ctx, findings, url_status)
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
    scholarly: Mapping[str, ScholarlyOutcome],
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
            elif c.reference is not None and c.url.startswith(REFERENCE_SCHEME):
                url_status[key] = _looked_up(scholarly.get(key))
            elif bad is not None and bad.code == "not_checkable":
                # a provider's document citation with no URL (citeguard.providers)
                url_status[key] = (CitationStatus.NOT_CHECKABLE, bad.message)
            else:
                reason = bad.message if bad is not None else "the URL cannot be parsed"
                url_status[key] = (CitationStatus.MALFORMED_URL, reason)
        else:
            url_status[key] = _fetched_status(
                c.normalized_url, fetched, pages, excluded, carried, soft_404s, scholarly
            )
    for key, raw in listed.items():
        raw_url.setdefault(key, raw)
        if key not in url_status:
            url_status[key] = _fetched_status(
                key, fetched, pages, excluded, carried, soft_404s, scholarly
            )


def _fetched_status(
    key: str,
    fetched: Mapping[str, FetchResult],
    pages: Mapping[str, Page],
    excluded: frozenset[str],
    carried: Mapping[str, CitationReport],
    soft_404s: Mapping[str, str],
    scholarly: Mapping[str, ScholarlyOutcome],
) -> tuple[CitationStatus, str]:
    """A well-formed URL's status and reason: excluded (its failure in an earlier attempt, or
    the caller's exclusion), not fetched in time, the fetch's own, an unreadable page, a soft
    404 (a "not found" page, or the host's catch-all), or its scholarly reference's (a page that
    is not the paper the reference names)."""
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
    paper = scholarly.get(key) if res.status is CitationStatus.OK else None
    if paper is not None:
        return paper.status, paper.reason
    return res.status, res.reason


def _looked_up(outcome: ScholarlyOutcome | None) -> tuple[CitationStatus, str]:
    """A reference that names no link: its look-up's status, or not checkable without one."""
    if outcome is None:
        return (
            CitationStatus.NOT_CHECKABLE,
            "the reference names no link and was not looked up (Policy.scholarly)",
        )
    return outcome.status, outcome.reason


def _final_url(fetched: Mapping[str, FetchResult], key: str) -> str | None:
    res = fetched.get(key)
    return None if res is None else res.final_url


# claims, citations or pairs handled on the event loop at once, at most, when building pairs,


@dataclass(frozen=True)
class _RollUp:
    """What the roll-up reads: the stage's inputs and the resolution's per-URL tables."""

    fetched: Mapping[str, FetchResult]
    pages: Mapping[str, Page]
    policy: Policy
    excluded: frozenset[str]
    carried: Mapping[str, CitationReport]
    retrieved: frozenset[str] | None
    url_claims: Mapping[str, Mapping[int, None]]
    raw_url: Mapping[str, str]
    normalized: set[str]
    listed: Mapping[str, str]
    scholarly: Mapping[str, ScholarlyOutcome] = field(default_factory=dict)


@dataclass
class _UrlRollUp:
    """The per-URL roll-up so far: the reports, each failing URL's kind, the URLs the axis
    rejects."""

    reports: list[CitationReport] = field(default_factory=list)
    kinds: dict[str, FailureKind] = field(default_factory=dict)
    offenders: set[str] = field(default_factory=set)


def _roll_up(
    answer: Answer,
    pairs: Sequence[_Pair],
    ctx: _RollUp,
    findings: list[Finding],
    url_status: Mapping[str, tuple[CitationStatus, str]],
) -> ValidityOutcome:
    """Claim and citation reports (the ``listed`` references no marker cites among them, cited
    by no claim) and the validity axis: per claim (4), per URL (5), the per-claim view of
    what failed, then the axis."""
    by_claim: dict[int, list[_Pair]] = {}
    by_url: dict[str, list[_Pair]] = {}
    for p in pairs:
        by_claim.setdefault(p.claim.index, []).append(p)
        by_url.setdefault(p.url, []).append(p)
    # 4. roll up per claim
    claim_reports = [
        claim_report(claim, _claim_checks(by_claim.get(claim.index, []), ctx))
        for claim in answer.claims
    ]
    failing_pairs = [
        p
        for claim in answer.claims
        for p in _failing_pairs(by_claim.get(claim.index, []), ctx.policy)
    ]
    # 5. roll up per URL: a URL's own failure excludes it; a failing (claim, URL) pair excludes
    # it only when no claim it backs passes (checks/failures.py)
    pair_fail: dict[str, list[_Pair]] = {}
    for p in failing_pairs:
        pair_fail.setdefault(p.url, []).append(p)
    backed = {p.url for p in pairs if p.status is CitationStatus.OK}
    urls = _UrlRollUp()
    for key, (st, why) in url_status.items():
        _roll_up_url(
            key, st, why, pair_fail.get(key, []), by_url.get(key, []), backed, ctx, urls, findings
        )
    # the per-claim view: which (claim, URL) pairs failed the axis, and whether the URL or the
    # pair failed
    failed = {
        (p.claim.index, ctx.raw_url.get(p.url, p.url)): urls.kinds[p.url]
        for p in failing_pairs
        if p.url in urls.kinds
    }
    claim_reports = mark_failures(mark_gated(claim_reports, failed), failed)
    axis = _axis(urls, claim_reports, ctx, findings)
    return ValidityOutcome(
        axis=axis,
        citations=urls.reports,
        claims=claim_reports,
        offending_urls=frozenset(ctx.raw_url[k] for k in urls.offenders),
    )


def _claim_checks(pairs: Sequence[_Pair], ctx: _RollUp) -> list[ClaimCheck]:
    """One claim's checks: one per URL it cites, with its link to the passage on the page."""
    return [
        ClaimCheck(
            claim_index=p.claim.index,
            url=ctx.raw_url.get(p.url, p.url),
            status=p.status,
            reason=p.reason,
            quote=p.quote,
            passage=p.passage,
            entailment=p.entailment,
            text_fragment_url=claim_fragment(
                _final_url(ctx.fetched, p.url) or ctx.raw_url.get(p.url, p.url),
                p.passage,
                p.entailment,
            ),
        )
        for p in pairs
    ]


def _failing_pairs(pairs: Sequence[_Pair], policy: Policy) -> list[_Pair]:
    """One claim's pairs that fail: any failed pair, except an unsupported one when another
    citation carries the claim (or the policy lets unsupported claims pass)."""
    supported = any(p.status is CitationStatus.OK for p in pairs)
    tolerated = supported or not policy.entailment.fail_unsupported
    return [
        p
        for p in pairs
        if p.status is not CitationStatus.OK
        and not (p.status is CitationStatus.NOT_ENTAILED and tolerated)
    ]


def _roll_up_url(
    key: str,
    status: CitationStatus,
    reason: str,
    url_fails: Sequence[_Pair],
    url_pairs: Sequence[_Pair],
    backed: set[str],
    ctx: _RollUp,
    out: _UrlRollUp,
    findings: list[Finding],
) -> None:
    """One distinct URL: its status (its own, else its first failing pair's, else not
    retrieved), its report, and the findings and exclusion its failure brings."""
    pf = url_fails[0] if url_fails else None
    st, why, kind = _url_status(status, reason, pf)
    st, why, warning = _retrieval(key, st, why, ctx)
    if warning is not None:
        findings.append(warning)
    unsettled = [p for p in url_pairs if _unsettled(p)] if st is CitationStatus.OK else []
    findings.extend(_uncertain_finding(p, ctx.raw_url[key]) for p in unsettled)
    fails = _fails(st, ctx.policy)
    out.reports.append(
        _citation_report(key, st, why, kind if fails else None, pf, unsettled, url_pairs, ctx)
    )
    if st in _PASS_STATUSES:
        return
    if fails:
        out.kinds[key] = kind
    if fails and kind == "pair":
        excluded_here = excludes(kind, key, backed)
        findings.extend(pair_findings(ctx.raw_url[key], url_fails, excluded=excluded_here))
    else:
        excluded_here = fails
        findings.append(_status_finding(ctx.raw_url[key], st, why, fails, key in ctx.listed))
    if excluded_here:
        out.offenders.add(key)


def _url_status(
    status: CitationStatus, reason: str, failing: _Pair | None
) -> tuple[CitationStatus, str, FailureKind]:
    """A URL that resolved takes its first failing pair's status ("pair"); otherwise its own
    ("url")."""
    if status is CitationStatus.OK and failing is not None:
        return failing.status, failing.reason, "pair"
    return status, reason, "url"


_NOT_RETRIEVED = "no recorded search returned this URL (a common sign of a fabricated URL)"


def _retrieval(
    key: str, status: CitationStatus, reason: str, ctx: _RollUp
) -> tuple[CitationStatus, str, Finding | None]:
    """A passing URL no recorded search returned: ``NOT_RETRIEVED`` when the policy fails it,
    else it passes with a ``not_retrieved`` warning. Anything else is unchanged."""
    if status is not CitationStatus.OK or ctx.retrieved is None or key in ctx.retrieved:
        return status, reason, None
    if ctx.policy.not_retrieved_fails:
        return CitationStatus.NOT_RETRIEVED, _NOT_RETRIEVED, None
    warning = Finding(
        code="not_retrieved",
        message=_NOT_RETRIEVED,
        severity=Severity.WARNING,
        axis="validity",
        url=ctx.raw_url[key],
    )
    return status, reason, warning


def _fails(status: CitationStatus, policy: Policy) -> bool:
    """Whether a URL's status fails the axis: any failure, an unverifiable one only when the
    policy says so."""
    return status not in _PASS_STATUSES and (
        status.outcome is not Outcome.UNVERIFIABLE or policy.unverifiable_fails
    )


def _shown(
    failing: _Pair | None, unsettled: Sequence[_Pair], pairs: Sequence[_Pair]
) -> tuple[PassageMatch | None, EntailmentScore | None, PassageMatch | None]:
    """What a URL's report shows: the passage (the failing pair's, else the first found), the
    score (the failing pair's, else an unsettled one's, else the shown passage's pair's, else
    any), and the found passage its text fragment links to."""
    shown = next((p for p in pairs if p.passage is not None and p.passage.found), None)
    found = shown.passage if shown is not None else None
    passage = (failing.passage if failing is not None else None) or found
    ent = (
        (failing.entailment if failing is not None else None)
        or (unsettled[0].entailment if unsettled else None)
        or (shown.entailment if shown is not None else None)
        or next((p.entailment for p in pairs if p.entailment is not None), None)
    )
    return passage, ent, found


def _citation_report(
    key: str,
    st: CitationStatus,
    why: str,
    failure: FailureKind | None,
    failing: _Pair | None,
    unsettled: Sequence[_Pair],
    pairs: Sequence[_Pair],
    ctx: _RollUp,
) -> CitationReport:
    """One distinct URL's report."""
    res = ctx.fetched.get(key)
    page = ctx.pages.get(key)
    raw = ctx.raw_url[key]
    passage, ent, found = _shown(failing, unsettled, pairs)
    final = res.final_url if res is not None else None
    frag = None
    if found is not None and found.matched_text:
        frag = text_fragment_url(final or raw, found.matched_text)
    earlier = ctx.carried.get(key)
    claims = ctx.url_claims.get(key, {})
    paper = ctx.scholarly.get(key)
    return CitationReport(
        url=raw,
        normalized_url=key if key in ctx.normalized else None,
        final_url=final,
        domain=_domain(key),
        status=st,
        reason=why,
        http_status=(
            res.http_status if res is not None else (earlier.http_status if earlier else None)
        ),
        redirects=list(res.redirects) if res is not None else [],
        claim_indices=list(claims),
        cited_by_claim=bool(claims),
        passage=passage,
        entailment=ent,
        support=_support_of(st, failing, unsettled, pairs),
        published=page.published if page is not None else (paper.published if paper else None),
        modified=page.modified if page is not None else None,
        date_source=(
            page.date_source
            if page is not None
            else ("scholarly metadata" if paper is not None and paper.published else None)
        ),
        text_fragment_url=frag,
        title=page.title if page is not None else None,
        elapsed_ms=res.elapsed_ms if res is not None else 0.0,
        failure=failure,
        excluded=key in ctx.excluded,
        via_resolver=res.via_resolver if res is not None else None,
        scholarly=paper.report if paper is not None else None,
    )


def _status_code(status: CitationStatus, uncited: bool) -> str:
    """A failing URL's finding code: its status; a reference no marker cites, broken or
    unverifiable."""
    if not uncited:
        return status.value
    if status.outcome is Outcome.BROKEN:
        return "uncited_reference_broken"
    return "uncited_reference_unverifiable"


def _status_finding(
    url: str, status: CitationStatus, reason: str, fails: bool, uncited: bool
) -> Finding:
    """A URL's own failure (an error when it fails the axis, else a warning); a reference-list
    entry no marker cites is shown to the user, so it must resolve too."""
    where = " (listed in the references, cited by no claim)" if uncited else ""
    return Finding(
        code=_status_code(status, uncited),
        message=f"{url}{where}: {reason}",
        severity=Severity.ERROR if fails else Severity.WARNING,
        axis="validity",
        url=url,
        details={"outcome": status.outcome.value, "status": status.value}
        | ({"failure": "url"} if fails else {}),
    )


def _share_finding(supported_share: float | None, policy: Policy) -> Finding | None:
    """``low_supported_share`` when fewer cited claims are supported than the policy asks."""
    floor = policy.entailment.min_supported_share
    if supported_share is None or floor <= 0 or supported_share >= floor:
        return None
    return Finding(
        code="low_supported_share",
        message=(
            f"only {supported_share:.0%} of cited claims are supported; the policy asks "
            f"for {floor:.0%}"
        ),
        axis="validity",
    )


def _count_finding(n: int, listed: int, policy: Policy) -> Finding | None:
    """``no_citations`` (a warning, unless the policy asks for citations) or
    ``too_few_citations`` (an error); None when the answer cites enough."""
    too_few = n < policy.min_citations
    if n > 0 and not too_few:
        return None
    if n == 0:
        message = "the answer cites no sources" + (
            f"; the {listed} it lists are cited by no claim" if listed else ""
        )
    else:
        message = (
            f"the answer cites {n} source(s); the policy asks for at least {policy.min_citations}"
        )
    return Finding(
        code="no_citations" if n == 0 else "too_few_citations",
        message=message,
        severity=Severity.ERROR if too_few else Severity.WARNING,
        axis="validity",
    )


def _claim_support(claims: Sequence[ClaimReport]) -> tuple[int, float | None, float | None]:
    """The cited claims (those with a support verdict): how many, the share supported, and
    their mean support score (None when there are none)."""
    cited = [c for c in claims if c.supported is not None]
    share = sum(1 for c in cited if c.supported) / len(cited) if cited else None
    supports = [c.support for c in cited if c.support is not None]
    return len(cited), share, (sum(supports) / len(supports) if supports else None)


def _axis(
    urls: _UrlRollUp, claims: Sequence[ClaimReport], ctx: _RollUp, findings: list[Finding]
) -> AxisResult:
    """The axis over the answer's citations (the listed references no marker cites are
    reported, not counted): it fails on a rejected URL, too low a supported share, or an
    error finding (a marker citing no reference, a bad URL, no sources)."""
    counted = [r for r in urls.reports if (r.normalized_url or r.url) not in ctx.listed]
    n = len(counted)
    ok = sum(1 for r in counted if r.status in _PASS_STATUSES)
    cited, supported_share, mean_support = _claim_support(claims)
    low_share = _share_finding(supported_share, ctx.policy)
    few = _count_finding(n, len(ctx.listed), ctx.policy)
    findings.extend(f for f in (low_share, few) if f is not None)
    errors = any(f.severity is Severity.ERROR and f.axis in (None, "validity") for f in findings)
    return AxisResult(
        name="validity",
        passed=not urls.offenders and low_share is None and not errors,
        score=(ok / n) if n else None,
        evaluated=n > 0 or n < ctx.policy.min_citations,
        findings=findings,
        offending_urls=sorted(ctx.raw_url[k] for k in urls.offenders),
        details={
            "citations": n,
            "resolving": ok,
            "claims_cited": cited,
            "supported_share": supported_share,
            "mean_support": mean_support,
        },
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
    "relevance_floor",
    "score_pairs",
    "uncited_references",
    "verify_pair",
]

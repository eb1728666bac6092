"""The named steps of the validity roll-up (``checks/validity.py``: ``_roll_up`` and the
decisions it is made of), each on hand-built pairs and policies."""

from __future__ import annotations

from citeguard.checks.validity import (
    _claim_support,
    _count_finding,
    _failing_pairs,
    _fails,
    _Pair,
    _retrieval,
    _RollUp,
    _share_finding,
    _shown,
    _status_code,
    _status_finding,
    _url_status,
)
from citeguard.models import (
    CitationStatus,
    Claim,
    ClaimReport,
    EntailmentScore,
    PassageMatch,
    Severity,
)
from citeguard.policy import Policy

URL = "http://example.org/a"


def _pair(status: CitationStatus = CitationStatus.OK, **kw: object) -> _Pair:
    claim = Claim(index=0, text="The sky is blue.", start=0, end=16)
    pair = _Pair(claim=claim, url=URL, claim_text=claim.text, quote=None)
    pair.status = status
    pair.reason = str(kw.pop("reason", status.value))
    for k, v in kw.items():
        setattr(pair, k, v)
    return pair


def _score(label: str, backend: str = "b") -> EntailmentScore:
    return EntailmentScore(label=label, score=0.5, backend=backend)  # type: ignore[arg-type]


def _ctx(policy: Policy, retrieved: frozenset[str] | None) -> _RollUp:
    return _RollUp(
        fetched={},
        pages={},
        policy=policy,
        excluded=frozenset(),
        carried={},
        retrieved=retrieved,
        url_claims={},
        raw_url={URL: URL},
        normalized={URL},
        listed={},
    )


def test_an_unsupported_citation_is_tolerated_when_another_carries_the_claim() -> None:
    policy = Policy()
    unsupported = _pair(CitationStatus.NOT_ENTAILED)
    missing = _pair(CitationStatus.PASSAGE_MISSING)
    carried = [_pair(), unsupported, missing]
    assert _failing_pairs(carried, policy) == [missing]
    # nothing carries it: the unsupported citation fails with the rest
    assert _failing_pairs([unsupported, missing], policy) == [unsupported, missing]
    # or the policy lets unsupported claims pass
    lenient = policy.replace(entailment={"fail_unsupported": False})
    assert _failing_pairs([unsupported, missing], lenient) == [missing]
    assert _failing_pairs([], policy) == []


def test_a_resolving_url_takes_its_failing_pairs_status() -> None:
    failing = _pair(CitationStatus.PASSAGE_ALTERED, reason="altered")
    assert _url_status(CitationStatus.OK, "ok", failing) == (
        CitationStatus.PASSAGE_ALTERED,
        "altered",
        "pair",
    )
    assert _url_status(CitationStatus.OK, "ok", None) == (CitationStatus.OK, "ok", "url")
    # a URL's own failure comes first
    assert _url_status(CitationStatus.NOT_FOUND, "404", failing) == (
        CitationStatus.NOT_FOUND,
        "404",
        "url",
    )


def test_a_url_no_search_returned_warns_or_fails_by_policy() -> None:
    ctx = _ctx(Policy(), retrieved=frozenset({"http://other.org/"}))
    st, why, warning = _retrieval(URL, CitationStatus.OK, "ok", ctx)
    assert (st, why) == (CitationStatus.OK, "ok")
    assert warning is not None and warning.code == "not_retrieved" and warning.url == URL
    assert warning.severity is Severity.WARNING
    strict = _ctx(Policy(not_retrieved_fails=True), retrieved=frozenset())
    st, why, warning = _retrieval(URL, CitationStatus.OK, "ok", strict)
    assert st is CitationStatus.NOT_RETRIEVED and "no recorded search" in why
    assert warning is None
    # returned by a search, no search recorded, or failing already: unchanged
    assert _retrieval(URL, CitationStatus.OK, "ok", _ctx(Policy(), frozenset({URL}))) == (
        CitationStatus.OK,
        "ok",
        None,
    )
    assert _retrieval(URL, CitationStatus.OK, "ok", _ctx(Policy(), None))[2] is None
    assert _retrieval(URL, CitationStatus.NOT_FOUND, "404", strict) == (
        CitationStatus.NOT_FOUND,
        "404",
        None,
    )


def test_an_unverifiable_status_fails_only_when_the_policy_says_so() -> None:
    assert not _fails(CitationStatus.OK, Policy())
    assert _fails(CitationStatus.NOT_FOUND, Policy(unverifiable_fails=False))
    assert _fails(CitationStatus.TIMEOUT, Policy(unverifiable_fails=True))
    assert not _fails(CitationStatus.TIMEOUT, Policy(unverifiable_fails=False))


def test_the_report_shows_the_failing_pair_first_then_an_unsettled_one() -> None:
    found = PassageMatch(found=True, score=100.0, matched_text="blue sky", how="exact")
    other = PassageMatch(found=False, score=10.0)
    shown = _pair(passage=found, entailment=_score("supported", "shown"))
    unsettled = _pair(entailment=_score("uncertain", "unsettled"))
    failing = _pair(
        CitationStatus.NOT_ENTAILED, passage=other, entailment=_score("not_supported", "fail")
    )
    passage, ent, link = _shown(failing, [unsettled], [shown, unsettled, failing])
    assert passage is other and link is found
    assert ent is not None and ent.backend == "fail"
    passage, ent, link = _shown(None, [unsettled], [shown, unsettled])
    assert passage is found and ent is not None and ent.backend == "unsettled"
    passage, ent, link = _shown(None, [], [unsettled, shown])
    assert ent is not None and ent.backend == "shown"
    # no passage found: the first score there is
    passage, ent, link = _shown(None, [], [unsettled])
    assert passage is None and link is None and ent is not None and ent.backend == "unsettled"


def test_a_failing_urls_finding_names_an_uncited_reference() -> None:
    assert _status_code(CitationStatus.NOT_FOUND, uncited=False) == "not_found"
    assert _status_code(CitationStatus.NOT_FOUND, uncited=True) == "uncited_reference_broken"
    assert _status_code(CitationStatus.TIMEOUT, uncited=True) == "uncited_reference_unverifiable"
    f = _status_finding(URL, CitationStatus.NOT_FOUND, "HTTP 404", fails=True, uncited=True)
    assert f.message == f"{URL} (listed in the references, cited by no claim): HTTP 404"
    assert f.severity is Severity.ERROR
    assert f.details == {"outcome": "broken", "status": "not_found", "failure": "url"}
    w = _status_finding(URL, CitationStatus.TIMEOUT, "slow", fails=False, uncited=False)
    assert w.message == f"{URL}: slow" and w.severity is Severity.WARNING
    assert "failure" not in w.details


def test_too_low_a_supported_share_is_a_finding() -> None:
    policy = Policy().replace(entailment={"min_supported_share": 0.5})
    low = _share_finding(0.25, policy)
    assert low is not None and low.code == "low_supported_share"
    assert "25%" in low.message and "50%" in low.message
    assert _share_finding(0.5, policy) is None
    assert _share_finding(None, policy) is None
    assert _share_finding(0.0, Policy()) is None  # no floor set


def test_no_or_too_few_citations() -> None:
    none = _count_finding(0, 0, Policy(min_citations=0))
    assert none is not None and none.code == "no_citations"
    assert none.severity is Severity.WARNING and none.message == "the answer cites no sources"
    listed = _count_finding(0, 2, Policy())
    assert listed is not None and listed.severity is Severity.ERROR
    assert listed.message.endswith("; the 2 it lists are cited by no claim")
    few = _count_finding(1, 0, Policy(min_citations=2))
    assert few is not None and few.code == "too_few_citations"
    assert few.severity is Severity.ERROR
    assert _count_finding(2, 0, Policy(min_citations=2)) is None


def test_claim_support_counts_only_cited_claims() -> None:
    claims = [
        ClaimReport(index=0, text="a", supported=True, support=0.9),
        ClaimReport(index=1, text="b", supported=False, support=0.1),
        ClaimReport(index=2, text="c", supported=False),
        ClaimReport(index=3, text="d"),  # cites nothing
    ]
    cited, share, mean = _claim_support(claims)
    assert cited == 3 and share == 1 / 3 and mean == 0.5
    assert _claim_support([ClaimReport(index=0, text="a")]) == (0, None, None)

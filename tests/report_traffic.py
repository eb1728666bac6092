"""Logged traffic for the report tests: real verdicts, as ``GuardResult.to_case()`` writes them.

Eight days of cases (two a day, three on the last three days, and one untimed), built from the
models and the axes' own checks: passing answers, a dead link, an invented quote, a one-site
overview, a query that drops the year, and one hostile answer (a ``<script>``, an ``onerror``
attribute, a ``javascript:`` URL) that the HTML page must show as text.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

from citeguard.checks.diversity import check_diversity
from citeguard.checks.passage import text_fragment_url
from citeguard.checks.query import check_queries
from citeguard.models import (
    Attempt,
    AxisResult,
    CitationReport,
    CitationStatus,
    ClaimReport,
    Finding,
    GuardResult,
    SearchRecord,
    Verdict,
)
from citeguard.policy import Policy

POLICY = Policy()
START = datetime(2026, 11, 20, 9, tzinfo=UTC)
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def cite(
    url: str, status: CitationStatus, reason: str, passage: str | None = None
) -> CitationReport:
    return CitationReport(
        url=url,
        normalized_url=url,
        final_url=url,
        domain=url.split("/")[2],
        status=status,
        reason=reason,
        claim_indices=[0],
        text_fragment_url=text_fragment_url(url, passage) if passage else None,
        title=f"Page at {url.split('/')[2]}",
    )


def result(
    prompt: str,
    queries: list[str],
    answer: str,
    cites: list[CitationReport],
    *,
    validity_error: Finding | None = None,
) -> GuardResult:
    broken = [c for c in cites if not c.status.is_ok()]
    validity = AxisResult(
        name="validity",
        passed=not broken and validity_error is None,
        findings=[validity_error] if validity_error else [],
        offending_urls=[c.url for c in broken],
    )
    axes = {
        "validity": validity,
        "diversity": check_diversity(prompt, cites, POLICY.diversity),
        "freshness": AxisResult(name="freshness", passed=True, evaluated=False),
        "query": check_queries(prompt, queries, POLICY.query),
    }
    # the per-claim view, as validity builds it: the best citation's support and evidence
    best = next((c for c in cites if c.status.is_ok()), cites[0] if cites else None)
    evidence = (
        unquote(best.text_fragment_url.split("#:~:text=")[1])
        if best is not None and best.text_fragment_url
        else None
    )
    claim = ClaimReport(
        index=0,
        text=answer.split("\n")[0][:200],
        supported=not broken,
        urls=[c.url for c in cites],
        label="supported" if best is not None and best.status.is_ok() else "contradicted",
        probability=0.91 if not broken else 0.08,
        backend="local",
        evidence=evidence,
        text_fragment_url=best.text_fragment_url if best is not None else None,
        gated=bool(broken),
    )
    verdict = Verdict(
        passed=all(a.passed for a in axes.values() if a.gating),
        axes=axes,
        citations=cites,
        claims=[claim],
    )
    attempt = Attempt(
        number=1, answer=answer, verdict=verdict, searches=[SearchRecord(query=q) for q in queries]
    )
    return GuardResult(
        answer=answer,
        passed=verdict.passed,
        verdict=verdict,
        attempts=[attempt],
        outcome="passed" if verdict.passed else "failed",
    )


def traffic() -> list[dict[str, Any]]:
    """The logged cases, one JSON-able dict each (``GuardResult.to_case()``)."""
    good = cite(
        "https://www.nasa.gov/artemis",
        CitationStatus.OK,
        "passage found and entailed",
        passage="Artemis II will send four astronauts around the Moon",
    )
    other = cite(
        "https://www.esa.int/artemis",
        CitationStatus.OK,
        "passage found and entailed",
        passage="ESA provides the service module",
    )
    dead = cite("https://gone.example.org/artemis", CitationStatus.NOT_FOUND, "HTTP 404")
    invented = cite(
        "https://news.example.com/moon",
        CitationStatus.PASSAGE_ALTERED,
        "the quote differs from the page",
        passage="the crew will orbit the Moon",
    )
    hostile = cite(
        "https://evil.example.net/x",
        CitationStatus.NOT_ENTAILED,
        HOSTILE,
        passage="a page that says <b>nothing</b>",
    )
    hostile = hostile.model_copy(
        update={"final_url": "javascript:window.__pwned=3", "title": HOSTILE}
    )
    ok_answer = "Artemis II will send four astronauts around the Moon [1][2].\n\n[1] nasa\n[2] esa"
    day = timedelta(days=1)
    cases: list[dict[str, Any]] = []
    for d in range(8):
        at = START + d * day
        cases.append(
            result(
                "Who builds the Artemis II service module?",
                ["Artemis II service module"],
                ok_answer,
                [good, other],
            ).to_case("Who builds the Artemis II service module?", timestamp=at)
        )
        # the later days go wrong more often
        bad = [dead] if d % 2 else [invented, good]
        cases.append(
            result(
                "How many astronauts fly on Artemis II in 2026?",
                ["Artemis II astronauts"],  # the year dropped
                "Artemis II carries four astronauts [1].",
                bad,
            ).to_case(
                "How many astronauts fly on Artemis II in 2026?", timestamp=at + timedelta(hours=3)
            )
        )
        if d >= 5:  # and from day 6 on, a one-site overview too
            prompt = "Give an overview of the history of solid-state battery research"
            cases.append(
                result(
                    prompt,
                    ["solid-state battery research history"],
                    "Solid-state batteries date back to the 1830s [1][2].",
                    [
                        cite("https://www.example.com/a", CitationStatus.OK, "entailed"),
                        cite("https://www.example.com/b", CitationStatus.NOT_FOUND, "HTTP 404"),
                    ],
                ).to_case(prompt, timestamp=at + timedelta(hours=5))
            )
    cases.append(
        result(
            f"Is this safe? {HOSTILE}",
            [f"safe {HOSTILE}"],
            f"Yes it is {HOSTILE} [1].",
            [hostile],
            validity_error=Finding(code="validity.not_entailed", message=HOSTILE),
        ).to_case(f"Is this safe? {HOSTILE}")
    )
    del cases[-1]["timestamp"]  # one case logged without a timestamp (to_case stamps every one)
    return cases

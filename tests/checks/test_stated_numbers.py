"""A number the page states about the claim's subject is not missing (issue 53): a claim judged
on a passage (a window around its quoted title) citing a paper's year, "“Title” (2023)", gets
what the page states of that year after the window (its date, a sentence about the paper, the
paper's reference entry); a year the page states only about something else stays missing.
Real aiohttp farm, real Guard, the real local model."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from conftest import Farm

from citeguard import FetchPolicy, Guard, Policy
from citeguard.checks.entail.windows import _candidate_windows
from citeguard.checks.evidence import with_stated_numbers
from citeguard.checks.passage import prepare_text
from citeguard.policy import EntailmentPolicy

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)

FILLER = " ".join(
    f"Paragraph {i} discusses the conference venue, the catering and the schedule of the "
    "workshop sessions."
    for i in range(60)
)
TITLE = "Sparse Attention Improves Long-Context Retrieval"
FINDING = (
    f"The paper “{TITLE}” by Smith and Lee shows that sparse attention reduces memory use by 40% "
    "on long documents."
)
CLAIM = (
    f"The paper “{TITLE}” (2023) shows that sparse attention reduces memory use by 40% on long "
    "documents"
)

PAGES = {
    # the year as the page's own date (its metadata)
    "dated": ('<meta property="article:published_time" content="2023-05-04">', ""),
    # the year in a sentence about the paper, far from the passage
    "about": ("", "<p>Smith and Lee presented the sparse attention paper at ACL in 2023.</p>"),
    # the year in the paper's reference entry, which the sentence splitter cuts at the year
    "reference": (
        "",
        f"<h2>References</h2><p>Smith, J. and Lee, K. (2023). {TITLE}. Proceedings of ACL.</p>",
    ),
}
# the year only about something else: still missing
ELSEWHERE = ("", "<p>The venue was renovated in 2023.</p>")


def _page(meta: str, tail: str) -> str:
    return (
        f"<html><head><title>Research digest</title>{meta}</head><body><main><p>{FILLER}</p>"
        f"<h2>Sparse attention</h2><p>{FINDING}</p><p>{FILLER}</p>{tail}</main></body></html>"
    )


def _policy() -> Policy:
    fetch = FetchPolicy(allow_private_addresses=True, url_timeout=5.0, retries=0)
    return Policy(fetch=fetch).replace(
        diversity={"enabled": False}, freshness={"enabled": False}, query={"enabled": False}
    )


@pytest.mark.parametrize("where", list(PAGES))
async def test_a_year_the_page_states_about_the_claim_is_not_missing(
    farm: Farm, where: str
) -> None:
    url = farm.add("digest.example.com", f"/{where}", body=_page(*PAGES[where]))
    async with Guard(_policy(), resolver=farm.resolver, now=lambda: NOW) as g:
        verdict = await g.check(f"{CLAIM} [1].\n\n[1] {url}\n")
    (citation,) = verdict.citations
    assert citation.status.value == "ok", citation.reason
    assert "numbers not in evidence" not in (citation.reason or "")


async def test_a_year_stated_only_about_something_else_is_still_missing(farm: Farm) -> None:
    url = farm.add("digest.example.com", "/elsewhere", body=_page(*ELSEWHERE))
    async with Guard(_policy(), resolver=farm.resolver, now=lambda: NOW) as g:
        verdict = await g.check(f"{CLAIM} [1].\n\n[1] {url}\n")
    (citation,) = verdict.citations
    assert citation.status.value != "ok"
    assert "numbers not in evidence: 2023" in (citation.reason or "")


def test_what_is_added_and_what_is_not() -> None:
    page = prepare_text(
        f"{FILLER} {FINDING} {FILLER} The venue was renovated in 2023. Monroe, B., Colaresi, M. "
        "(2008). Fightin' Words. Smith and Lee presented the sparse attention paper in 2023."
    )
    window = FINDING
    added = with_stated_numbers(CLAIM, window, page)
    assert added.startswith(window)
    assert added.endswith("Smith and Lee presented the sparse attention paper in 2023.")
    assert "venue" not in added  # 2023 about something else
    # a reference entry cut at its year: the sentence beside the year names the subject
    monroe = with_stated_numbers("Monroe et al. (2008) measure partisan words.", "x", page)
    assert monroe == "x\nMonroe, B., Colaresi, M. (2008)."
    # the metadata, when it states the number
    head = "Research digest.\nPublished 4 May 2023 (2023-05-04)."
    assert with_stated_numbers(CLAIM, window, page, head) == f"{window}\n{head}"
    # nothing to add: the window states every number, or the claim has none
    assert with_stated_numbers(f"{FINDING} (2023)", f"{window} 2023", page) == f"{window} 2023"
    assert with_stated_numbers("Sparse attention saves memory.", window, page) == window


def test_a_window_lacking_a_number_the_rest_of_the_evidence_states_is_not_missing_it() -> None:
    policy = EntailmentPolicy(window_chars=200)
    evidence = f"{FINDING}\n{'Filler words about nothing at all. ' * 8}\nIt appeared in 2023."
    windows = _candidate_windows(CLAIM, evidence, policy)
    assert len(windows) > 1
    assert all("2023" not in w.consistency.missing_numbers for w in windows)
    alone = _candidate_windows(CLAIM, FINDING, policy)
    assert alone[0].consistency.missing_numbers == ("2023",)

"""A verified quote is evidence: attribution frames need no judge, added content does, and a
quote that drops the page's negation is its own status. Guard runs use a real aiohttp farm."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from conftest import Farm, RecordingEntailer

from citeguard import CitationStatus, FetchPolicy, Guard, Policy
from citeguard.checks.quoted import dropped_qualifier, residual_claim, sentence_around, words_in

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)

PAGE = """<html><head><title>Planner rewrite lands</title></head><body><article>
<p>Maintainer Priya Raman said the team spent two years rebuilding the planner from scratch.</p>
<p>The new drug is not effective against the common cold, the trial found.</p>
<p>Whether or not the market recovers, the fund will keep its bond holdings.</p>
<p>Analysts expect the central bank to hold rates steady through the spring.</p>
</article></body></html>"""


def _guard(farm: Farm, entailer: RecordingEntailer) -> Guard:
    fetch = FetchPolicy(
        allow_private_addresses=True, url_timeout=3.0, answer_deadline=5.0, retries=0
    )
    return Guard(Policy(fetch=fetch), resolver=farm.resolver, entailer=entailer, now=lambda: NOW)


async def _status(farm: Farm, claim: str) -> tuple[CitationStatus, str, RecordingEntailer]:
    url = farm.add("news.example.com", "/planner", body=PAGE)
    recorder = RecordingEntailer("unsupported", 0.1, "no")
    async with _guard(farm, recorder) as guard:
        verdict = await guard.check(f"{claim}\n\n[1] {url}\n", question="What did they say?")
    (report,) = verdict.citations
    return report.status, report.reason, recorder


# --------------------------------------------------------------------------------------------
# Through the guard
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "claim",
    [
        '"The team spent two years rebuilding the planner from scratch" [1].',
        'The article states that "the team spent two years rebuilding the planner from scratch"'
        " [1].",
        'According to the source, "the team spent two years rebuilding the planner" [1].',
        'News reports: "the team spent two years rebuilding the planner from scratch" [1].',
        'As example.com notes, "the team spent two years rebuilding the planner" [1].',
        # the speaker's name is added, and it stands in the passage around the quote
        'Maintainer Priya Raman said the team "spent two years rebuilding the planner" [1].',
    ],
)
async def test_a_verified_quote_with_only_attribution_passes_without_a_judge(
    farm: Farm, claim: str
) -> None:
    status, reason, recorder = await _status(farm, claim)
    assert status is CitationStatus.OK, reason
    assert recorder.asked == []  # nothing was left to judge


async def test_content_added_around_a_quote_goes_to_the_judge_alone(farm: Farm) -> None:
    status, _, recorder = await _status(
        farm,
        'The article states that "the team spent two years rebuilding the planner from scratch",'
        " which proves that the database is now the fastest on the market [1].",
    )
    assert status is CitationStatus.NOT_ENTAILED
    ((judged, evidence),) = recorder.asked
    assert "proves" in judged and "fastest" in judged
    assert "rebuilding" not in judged  # the verified quote is not judged again
    assert "rebuilding the planner" in evidence


async def test_a_quote_that_drops_the_pages_negation_is_out_of_context(farm: Farm) -> None:
    status, reason, recorder = await _status(
        farm, 'The trial found the new drug "effective against the common cold" [1].'
    )
    assert status is CitationStatus.QUOTE_OUT_OF_CONTEXT
    assert "'not'" in reason
    assert recorder.asked == []


async def test_a_claim_that_keeps_the_negation_is_not_out_of_context(farm: Farm) -> None:
    status, reason, _ = await _status(
        farm, 'The trial found the new drug is not "effective against the common cold" [1].'
    )
    assert status is not CitationStatus.QUOTE_OUT_OF_CONTEXT, reason


async def test_whether_or_not_before_a_quote_negates_nothing(farm: Farm) -> None:
    status, reason, _ = await _status(
        farm, 'The fund says "the market recovers, the fund will keep its bond holdings" [1].'
    )
    assert status is not CitationStatus.QUOTE_OUT_OF_CONTEXT, reason


async def test_an_altered_quote_is_not_taken_as_a_verified_quote(farm: Farm) -> None:
    status, _, recorder = await _status(
        farm, 'Analysts say "the central bank will cut rates through the spring" [1].'
    )
    assert status is CitationStatus.PASSAGE_ALTERED
    assert recorder.asked == []


# --------------------------------------------------------------------------------------------
# The pieces
# --------------------------------------------------------------------------------------------


async def test_an_unquoted_claim_that_copies_the_page_needs_no_judge(farm: Farm) -> None:
    status, reason, recorder = await _status(
        farm, "Analysts expect the central bank to hold rates steady through the spring [1]."
    )
    assert status is CitationStatus.OK, reason
    assert recorder.asked == []  # the page says exactly this: nothing left to judge


async def test_an_unquoted_copy_that_drops_the_pages_negation_is_out_of_context(
    farm: Farm,
) -> None:
    page = (
        "<html><body><article><p>Doctors say it is a myth that cracking your knuckles causes "
        "arthritis in later life.</p></article></body></html>"
    )
    url = farm.add("health.example.org", "/knuckles", body=page)
    recorder = RecordingEntailer("unsupported", 0.1, "no")
    async with _guard(farm, recorder) as guard:
        verdict = await guard.check(
            f"Cracking your knuckles causes arthritis in later life [1].\n\n[1] {url}\n",
            question="Does cracking knuckles cause arthritis?",
        )
    (report,) = verdict.citations
    assert report.status is CitationStatus.QUOTE_OUT_OF_CONTEXT
    assert "'myth'" in report.reason and recorder.asked == []


@pytest.mark.parametrize(
    "claim",
    [
        # one word changed: not on the page as written, so the judge decides
        "Analysts expect the central bank to cut rates steady through the spring [1].",
        # the page's words with content added after them
        "Analysts expect the central bank to hold rates steady through the spring, "
        "which proves inflation is beaten [1].",
        # too short to be settled by being on the page
        "The trial found [1].",
    ],
)
async def test_unquoted_claims_not_on_the_page_as_written_go_to_the_judge(
    farm: Farm, claim: str
) -> None:
    status, _, recorder = await _status(farm, claim)
    assert status is CitationStatus.NOT_ENTAILED
    assert len(recorder.asked) == 1


def test_residual_of_a_frame_is_none_and_of_added_content_is_the_content() -> None:
    quote = "rates will stay at 4%"
    frame = f'Reuters reports that "{quote}".'
    assert residual_claim(frame, quote, source_words=["reuters"]) is None
    assert residual_claim(f'"{quote}," the article notes.', quote) is None
    added = residual_claim(f'The article says "{quote}", so mortgages will get cheaper.', quote)
    assert added is not None
    assert set(added.content) >= {"mortgages", "cheaper"}
    assert "rates" not in added.content


def test_a_number_naming_the_source_is_attribution_not_content() -> None:
    quote = "the bridge reopened on Monday"
    assert residual_claim(f'Source number 12 says that "{quote}".', quote) is None
    assert residual_claim(f'Reference 3 notes "{quote}".', quote) is None
    added = residual_claim(f'In 2021 the paper said "{quote}".', quote)
    assert added is not None and "2021" in added.content  # a year is a fact to check


def test_a_quote_not_in_the_claim_leaves_the_whole_claim_to_judge() -> None:
    residual = residual_claim("Rates stay unchanged.", "the committee held rates")
    assert residual is not None and residual.text == "Rates stay unchanged."


def test_source_words_name_the_source_not_content() -> None:
    quote = "the bridge reopened on Monday"
    claim = f'City Herald: "{quote}".'
    assert residual_claim(claim, quote) is not None  # "city herald" is content by default
    assert residual_claim(claim, quote, source_words=["City Herald | Local news"]) is None


def test_the_speaker_of_an_attribution_verb_is_attribution() -> None:
    quote = "the bridge reopened on Monday"
    assert residual_claim(f'The project says "{quote}".', quote) is None
    assert residual_claim(f'City engineer Ana Lopez said that "{quote}".', quote) is None
    added = residual_claim(f'Traffic doubled after "{quote}".', quote)  # no speaking verb
    assert added is not None and "traffic" in added.content


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        ("The new drug is not ", "not"),
        ("Officials never said that ", "never"),
        ("The company allegedly ", "allegedly"),
        ("Whether or not ", None),
        ("It is not only ", None),
        ("There is no doubt that ", None),
        ("It was not raining. Then ", None),  # a negation in an earlier sentence
        ("", None),
    ],
)
def test_dropped_qualifier(before: str, expected: str | None) -> None:
    page = before + "the markets rallied"
    assert dropped_qualifier(page, len(before)) == expected


def test_dropped_qualifier_reads_a_bounded_slice() -> None:
    page = "not " + "x" * 1_000_000 + " quoted words"
    assert dropped_qualifier(page, len(page) - len("quoted words")) is None


def test_words_in_needs_every_word_and_no_extra_negation_in_the_quotes_sentence() -> None:
    assert words_in("Maintainer Priya Raman said the team spent", ["priya", "raman"])
    assert not words_in("Maintainer Priya said", ["priya", "raman"])
    assert not words_in("Priya Raman did not say it", ["priya", "raman"])
    assert words_in("Priya Raman did not say it", ["priya", "raman", "not"])
    window = "Priya Raman spoke. The drug is not effective."
    assert words_in(window, ["priya", "raman"], sentence="Priya Raman spoke.")
    assert not words_in(window, ["priya", "raman"], sentence="The drug is not effective.")


def test_sentence_around_is_the_quotes_sentence() -> None:
    text = "First one. Priya Raman said the team rebuilt it. Last one."
    start = text.index("the team")
    assert (
        sentence_around(text, start, start + 8).strip() == "Priya Raman said the team rebuilt it."
    )
    assert sentence_around("no stops here", 3, 5) == "no stops here"

"""Gemini grounding: supports bound to the claims their UTF-8 byte segments cover, grounding
redirects resolved through the Guard's fetcher (one request, Location read, not followed), the
target checked and counted for diversity."""

from __future__ import annotations

from pathlib import Path

from conftest import Farm
from google.genai import types
from provider_pages import QUESTION, VERTEX, gemini_response, guard, policy, redirect, site

from citeguard import (
    CitationStatus,
    FetchPolicy,
    Policy,
    SnapshotMode,
    SQLiteSnapshotStore,
    parse_answer,
)
from citeguard.providers import is_redirect, read_provider

# em dashes and an accented word: UTF-8 byte offsets differ from character offsets
FIRST = "Middlemarch — a novel by George Eliot — was published in 1871 and 1872."
SECOND = "George Eliot was the pen name of Mary Ann Evans, née in Warwickshire."
TEXT = f"{FIRST} {SECOND}"


def _data(uris: list[str], **kw: object) -> dict:
    return gemini_response(
        TEXT,
        [(FIRST, [0, 2], [0.97, 0.42]), (SECOND, [1], [0.91])],
        [(uris[0], "example.com"), (uris[1], "example.org"), (uris[0], "example.com")],
        queries=["Middlemarch author", "George Eliot real name"],
        **kw,  # type: ignore[arg-type]
    )


def test_byte_offsets_become_character_offsets() -> None:
    uris = ["https://books.example.com/m", "https://library.example.org/e"]
    for with_text in (True, False):
        answer = parse_answer(_data(uris, with_text=with_text))
        assert [c.text for c in answer.claims] == [FIRST, SECOND]
        assert [(c.normalized_url, c.claim_index) for c in answer.citations] == [
            ("https://books.example.com/m", 0),
            ("https://books.example.com/m", 0),
            ("https://library.example.org/e", 1),
        ]
        assert [c.confidence for c in answer.citations] == [0.97, 0.42, 0.91]
        assert {c.origin for c in answer.citations} == {"gemini"}


def test_the_segment_text_wins_over_offsets_that_disagree() -> None:
    uris = ["https://books.example.com/m", "https://library.example.org/e"]
    answer = parse_answer(_data(uris, shift=7))
    assert [c.claim_index for c in answer.citations] == [0, 0, 1]


def test_sdk_object_and_rest_json_read_alike() -> None:
    uris = [
        f"https://{VERTEX}/grounding-api-redirect/AUZIYQ1",
        f"https://{VERTEX}/grounding-api-redirect/AUZIYQ2",
    ]
    data = _data(uris)
    sdk = types.GenerateContentResponse.model_validate(data)
    assert sdk.candidates and sdk.candidates[0].grounding_metadata is not None
    from_sdk, from_json = parse_answer(sdk), parse_answer(data)
    assert from_sdk.citations == from_json.citations
    assert all(c.provider_redirect for c in from_sdk.citations)
    assert [s.query for s in from_sdk.searches] == ["Middlemarch author", "George Eliot real name"]
    provider = read_provider(sdk)
    assert provider is not None and provider.input_tokens == 12


def test_is_redirect() -> None:
    assert is_redirect(f"https://{VERTEX}/grounding-api-redirect/AUZIYQ")
    assert not is_redirect(f"https://{VERTEX}/other")
    assert not is_redirect("https://example.com/grounding-api-redirect/x")


async def test_guard_resolves_grounding_redirects_and_checks_the_targets(farm: Farm) -> None:
    urls = site(farm)
    uris = [redirect(farm, "AUZIYQ1", urls["book"]), redirect(farm, "AUZIYQ2", urls["library"])]
    sdk = types.GenerateContentResponse.model_validate(_data(uris))
    async with guard(farm) as g:
        verdict = await g.check(sdk, question=QUESTION)
    assert verdict.axes["validity"].passed
    by_url = {c.url: c for c in verdict.citations}
    assert set(by_url) == {urls["book"], urls["library"]}  # the targets, not the redirects
    assert all(c.status is CitationStatus.OK for c in verdict.citations)
    assert by_url[urls["book"]].claim_indices == [0]
    # the target's domain counts for diversity: two sites, not one google.com
    assert verdict.axes["diversity"].details["distinct_domains"] == 2
    # each redirect was asked once, and not followed by that request
    assert farm.count(VERTEX, "/grounding-api-redirect/AUZIYQ1") == 1
    assert farm.count("books.example.com", "/middlemarch") == 1
    # the search rows name the targets too, so nothing is "not retrieved"
    assert not [f for f in verdict.axes["validity"].findings if f.code == "not_retrieved"]
    # the web search queries are the run's searches: the query axis judged them
    assert verdict.axes["query"].evaluated


async def test_the_resolved_citation_keeps_the_redirect_it_came_from(farm: Farm) -> None:
    from citeguard.providers import resolve_answer

    urls = site(farm)
    uris = [redirect(farm, "A1", urls["book"]), redirect(farm, "A2", urls["library"])]
    g = guard(farm)
    parsed = parse_answer(_data(uris))
    resolved, searches = await resolve_answer(
        parsed, [], policy=g.policy.fetch, resolver=g._resolver
    )
    assert [(c.url, c.via) for c in resolved.citations] == [
        (urls["book"], uris[0]),
        (urls["book"], uris[0]),
        (urls["library"], uris[1]),
    ]
    assert [r.url for r in searches[0].results] == [urls["book"], urls["library"], urls["book"]]
    await g.aclose()


async def test_an_unresolvable_redirect_is_checked_as_it_is(farm: Farm) -> None:
    urls = site(farm)
    gone = farm.add(VERTEX, "/grounding-api-redirect/GONE", status=404, body="no")
    uris = [gone, redirect(farm, "AUZIYQ2", urls["library"])]
    async with guard(farm) as g:
        verdict = await g.check(_data(uris), question=QUESTION)
    dead = next(c for c in verdict.citations if c.url == gone)
    assert dead.status is CitationStatus.NOT_FOUND
    codes = [f.code for f in verdict.axes["validity"].findings]
    assert "provider_redirect_unresolved" in codes


async def test_redirect_resolution_keeps_address_safety(farm: Farm) -> None:
    urls = site(farm)
    uris = [redirect(farm, "AUZIYQ1", urls["book"]), redirect(farm, "AUZIYQ2", urls["library"])]
    strict = Policy(fetch=FetchPolicy(url_timeout=3.0, answer_deadline=5.0, retries=0))
    async with guard(farm, policy=strict) as g:
        verdict = await g.check(_data(uris), question=QUESTION)
    # the redirect host resolves to 127.0.0.1: refused before any request is sent
    assert farm.count(VERTEX) == 0
    assert {c.status for c in verdict.citations} == {CitationStatus.BLOCKED_ADDRESS}


async def test_a_redirect_to_a_blocked_scheme_is_reported(farm: Farm) -> None:
    urls = site(farm)
    uris = [
        farm.add(
            VERTEX,
            "/grounding-api-redirect/JS",
            status=302,
            headers={"Location": "javascript:alert(1)"},
        ),
        redirect(farm, "AUZIYQ2", urls["library"]),
    ]
    async with guard(farm, policy=policy()) as g:
        verdict = await g.check(_data(uris), question=QUESTION)
    statuses = {c.url: c.status for c in verdict.citations}
    assert statuses[urls["library"]] is CitationStatus.OK
    assert CitationStatus.BLOCKED_SCHEME in statuses.values()


async def test_a_snapshot_replays_the_redirect_resolution_offline(
    farm: Farm, tmp_path: Path
) -> None:

    urls = site(farm)
    uris = [redirect(farm, "R1", urls["book"]), redirect(farm, "R2", urls["library"])]
    store = SQLiteSnapshotStore(str(tmp_path / "snap.sqlite"))
    try:
        async with guard(farm, cache=store, snapshot_mode=SnapshotMode.RECORD) as g:
            recorded = await g.check(_data(uris), question=QUESTION)
        sent = len(farm.requests)
        async with guard(farm, cache=store, snapshot_mode=SnapshotMode.REPLAY) as g:
            replayed = await g.check(_data(uris), question=QUESTION)
    finally:
        await store.close()
    assert len(farm.requests) == sent  # replay opened no socket, the redirects included
    assert [c.url for c in replayed.citations] == [urls["book"], urls["library"]]
    assert [c.url for c in replayed.citations] == [c.url for c in recorded.citations]
    assert {c.status for c in replayed.citations} == {CitationStatus.OK}

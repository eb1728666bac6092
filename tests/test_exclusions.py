"""Exclusion is context on an attempt, not a citation status (issue 44, "The verdict names what
failed"): a URL a later attempt excluded keeps the status and reason of its failure, in the
verdict returned and in a replay of it; only the caller's own exclusions are
``excluded_by_policy``. Scripted agents answer against real pages on the 127.0.0.1 farm."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from conftest import Farm
from test_guard import ELIOT, QUESTION, _guard, _policy
from test_pair_failures import _ByClaim

from citeguard import CitationStatus
from citeguard.rescore import rescore_file
from citeguard.snapshot import SQLiteSnapshotStore


async def test_a_dead_url_keeps_its_404_through_every_later_attempt(farm: Farm) -> None:
    dead = farm.add("gone.example.net", "/middlemarch", status=404, body="nope")
    page = farm.add("books.example.com", "/middlemarch", body=ELIOT)
    n = 0

    async def agent(question: str, *, exclude_urls: frozenset[str]) -> str:
        nonlocal n
        n += 1
        # the first answer cites a 404; later ones keep it and add a page that does not hold
        # their claim, so no attempt passes
        text = f"Middlemarch is by George Eliot [1]. It sold {n} million copies [2]."
        return f"{text}\n\n[1] {dead}\n[2] {page}\n"

    async with _guard(farm, policy=_policy(max_attempts=3, repair="off")) as guard:
        result = await guard.run(agent, QUESTION)
    assert not result.passed and len(result.attempts) == 3
    # the verdict returned (the best attempt's: one of the later ones, which excluded the URL)
    by_url = {c.url: c for c in result.verdict.citations}
    assert by_url[dead].status is CitationStatus.NOT_FOUND
    assert by_url[dead].http_status == 404 and "404" in by_url[dead].reason
    assert all(
        c.status is not CitationStatus.EXCLUDED_BY_POLICY
        for a in result.attempts
        for c in a.verdict.citations
    )
    assert dead in result.verdict.offending_urls
    codes = {f.code for f in result.verdict.axes["validity"].findings}
    assert "not_found" in codes and "excluded_by_policy" not in codes


async def test_only_the_callers_exclusion_is_excluded_by_policy(farm: Farm) -> None:
    page = farm.add("books.example.com", "/middlemarch", body=ELIOT)
    text = f"Middlemarch is a novel by the English author George Eliot [1].\n\n[1] {page}\n"
    async with _guard(farm) as guard:
        verdict = await guard.check(text, question=QUESTION, exclude_urls={page})
        result = await guard.run(lambda q, **_: text, QUESTION, exclude_urls=frozenset({page}))
    for v in (verdict, result.verdict):
        (c,) = v.citations
        assert c.status is CitationStatus.EXCLUDED_BY_POLICY and c.excluded
        assert "caller" in c.reason
    assert farm.count("books.example.com") == 0


async def test_a_page_excluded_for_its_claims_is_checked_again_on_new_ones(farm: Farm) -> None:
    page = farm.add("books.example.com", "/middlemarch", body=ELIOT)
    answers = [
        f"Middlemarch first came out in one volume in 1901 [1].\n\n[1] {page}\n",
        f"Middlemarch is a novel written by George Eliot [1].\n\n[1] {page}\n",
    ]
    calls: list[frozenset[str]] = []

    async def agent(question: str, *, exclude_urls: frozenset[str]) -> str:
        calls.append(exclude_urls)
        return answers[len(calls) - 1]

    policy = _policy(max_attempts=2, repair="off")
    async with _guard(farm, policy=policy, entailer=_ByClaim("1901")) as guard:
        result = await guard.run(agent, QUESTION)
    # no claim passed on the page: it was excluded; cited again for a claim it backs, it is
    # judged on that claim, not on the earlier one's failure
    assert calls[1] == {page}
    assert result.passed
    (c,) = result.verdict.citations
    assert c.status is CitationStatus.OK and not c.excluded


async def test_a_replayed_run_gives_the_same_carried_failure(farm: Farm, tmp_path: Path) -> None:
    dead = farm.add("gone.example.net", "/middlemarch", status=404, body="nope")

    async def stubborn(question: str, *, exclude_urls: frozenset[str]) -> str:
        return f"Middlemarch is by George Eliot [1].\n\n[1] {dead}\n"

    path = tmp_path / "run.sqlite"
    dumps = []
    for mode in ("record", "replay", "replay"):
        store = SQLiteSnapshotStore(path)
        policy = _policy(max_attempts=2, repair="off")
        async with _guard(farm, policy=policy, cache=store, snapshot_mode=mode) as guard:
            result = await guard.run(stubborn, QUESTION)
        await store.close()
        assert result.verdict.citations[0].status is CitationStatus.NOT_FOUND
        dumps.append(result.model_dump_json())
    assert farm.count("gone.example.net") == 1  # recorded once, replayed from the snapshot
    assert dumps[1] == dumps[2]


async def test_rescoring_a_logged_later_attempt_keeps_its_carried_failure(
    farm: Farm, tmp_path: Path
) -> None:
    dead = farm.add("gone.example.net", "/middlemarch", status=404, body="nope")
    page = farm.add("books.example.com", "/middlemarch", body=ELIOT)
    log, snap = tmp_path / "cases.jsonl", tmp_path / "snap.sqlite"

    async def stubborn(question: str, *, exclude_urls: frozenset[str]) -> str:
        text = "Middlemarch is a novel by the English author George Eliot [1] [2]."
        return f"{text}\n\n[1] {dead}\n[2] {page}\n"

    store = SQLiteSnapshotStore(snap)
    policy = _policy(max_attempts=2, repair="off")
    async with _guard(farm, policy=policy, cache=store, log_to=log) as guard:
        result = await guard.run(stubborn, QUESTION)
    await store.close()
    assert result.attempts[-1].verdict.citations[0].excluded  # the logged case: attempt 2
    summary = await asyncio.to_thread(rescore_file, log, policy, out=tmp_path / "new.jsonl")
    assert summary.rescored == 1 and summary.moved == 0 and summary.changes == []
    (new,) = [json.loads(line) for line in (tmp_path / "new.jsonl").read_text().splitlines()]
    statuses = {c["url"]: c["status"] for c in new["verdict"]["citations"]}
    assert statuses == {dead: "not_found", page: "ok"}

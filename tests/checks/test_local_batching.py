"""What the local entailer's worker is handed: a page's claims (and their parts) together, in one
batch and one encoder call; requests that ask the same thing, once. Real aiohttp farm, real
Guard, the real local model and encoder (counted, never replaced)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from conftest import Farm

from citeguard import EntailmentPolicy, FetchPolicy, Guard, Policy
from citeguard.checks.entail import EntailmentRequest, LocalEntailer

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)

PAGE = (
    "<html><head><title>Harbour report</title></head><body><article>"
    "<p>The harbour authority opened a container terminal on the east quay in 2019.</p>"
    "<p>Last year the terminal handled 2.1 million containers, a record for the port.</p>"
    "<p>Dredging of the outer channel finished in March, two months ahead of plan.</p>"
    "<p>The authority employs 640 people across its three sites.</p>"
    "</article></body></html>"
)
# paraphrases (no quotation marks, no word-for-word copy): the model judges each
CLAIMS = (
    "In short, the port's authority started running an east quay terminal in 2019.",
    "The terminal moved about 2.1 million boxes last year; that was a record.",
    "Work deepening the outer channel ended early, in March.",
)


@pytest.fixture(scope="module")
def local() -> Iterator[LocalEntailer]:
    entailer = LocalEntailer()
    yield entailer
    asyncio.run(entailer.aclose())


class _Counted:
    """Records what a real LocalEntailer's worker and encoder are handed (and passes it on)."""

    def __init__(self, entailer: LocalEntailer) -> None:
        self.batches: list[int] = []
        self.encoder_calls: list[int] = []
        score_sync = entailer._score_sync

        def counted_batch(pairs: list[tuple[str, str]], *args: Any) -> Any:
            self.batches.append(len(pairs))
            return score_sync(pairs, *args)

        entailer._score_sync = counted_batch  # type: ignore[method-assign]
        encoder = entailer._scorer()._encoder
        encode = encoder.encode

        def counted_encode(texts: Sequence[str]) -> Any:
            self.encoder_calls.append(len(texts))
            return encode(texts)

        encoder.encode = counted_encode  # type: ignore[method-assign]


def _policy() -> Policy:
    fetch = FetchPolicy(allow_private_addresses=True, url_timeout=5.0, retries=0)
    return Policy(fetch=fetch, entailment=EntailmentPolicy(backend="local", on_uncertain="warn"))


async def test_one_pages_claims_go_to_the_encoder_in_one_call(farm: Farm) -> None:
    entailer = LocalEntailer()
    try:
        counted = _Counted(entailer)
        url = farm.add("port.example.com", "/report", body=PAGE)
        answer = " ".join(f"{c} [1]" for c in CLAIMS) + f"\n\n[1] {url}\n"
        guard = Guard(_policy(), resolver=farm.resolver, entailer=entailer, now=lambda: NOW)
        async with guard:
            verdict = await guard.check(answer)
        judged = [c for c in verdict.claims if c.backend == "local"]
        assert len(judged) == len(CLAIMS)
        # the page's three claims (and the two parts of the second) in one batch
        assert counted.batches == [len(CLAIMS) + 2]
        assert len(counted.encoder_calls) == 1
        assert entailer.texts_encoded == counted.encoder_calls[0]
    finally:
        await entailer.aclose()


async def test_requests_asking_the_same_thing_are_scored_once(local: LocalEntailer) -> None:
    counted = _Counted(local)
    evidence = "The harbour authority opened a container terminal on the east quay in 2019."
    same = EntailmentRequest(CLAIMS[0], evidence, page="p", claim_id="0", whole_page=True)
    again = EntailmentRequest(CLAIMS[0], evidence, page="p", claim_id="1", whole_page=True)
    other = EntailmentRequest(CLAIMS[2], evidence, page="p", claim_id="2", whole_page=True)
    scores = await local.score_requests([same, other, again, same])
    assert counted.batches == [2]
    assert scores[0] == scores[2] == scores[3]
    assert scores[0] is not scores[2]  # each request its own copy
    assert scores[1].score != scores[0].score

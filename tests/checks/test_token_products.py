"""The support scorer's claim-token × evidence-token products are taken a few rows at a time,
each small enough for OpenBLAS to run on one thread: its helper threads would otherwise spin on
the second core (the one extraction and the event loop need) after every tiny product."""

from __future__ import annotations

import numpy as np
import pytest

from citeguard.checks.support import _ONE_THREAD_MNK, _best_match, _unit_rows, one_thread_rows

DIM = 384


@pytest.mark.parametrize("claim_tokens", [1, 2, 9, 20, 64, 255])
@pytest.mark.parametrize("evidence_tokens", [1, 30, 70, 180, 255, 1200])
def test_each_chunk_is_one_threads_and_the_result_the_whole_products(
    claim_tokens: int, evidence_tokens: int
) -> None:
    rng = np.random.default_rng(claim_tokens * 10_000 + evidence_tokens)
    claim = _unit_rows(rng.normal(size=(claim_tokens, DIM)))
    evidence = _unit_rows(rng.normal(size=(evidence_tokens, DIM)))
    rows = one_thread_rows(evidence_tokens, DIM)
    assert rows * evidence_tokens * DIM <= _ONE_THREAD_MNK or rows == 2
    got = _best_match(claim, evidence)
    whole = (claim @ evidence.T).max(axis=1)
    assert got.shape == (claim_tokens,)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, whole, rtol=0, atol=1e-6)


def test_a_typical_pair_is_split() -> None:
    # ~20 claim tokens against a ~70-token unit: 537,600 multiply-adds, past the one-thread
    # bound, so the rows are taken in chunks
    assert one_thread_rows(70, DIM) < 20

"""The local entailer's pure-Python work (each pair's window and deterministic facts) done in
the extraction children: the same scores as in this process, and this process's own work when
the children cannot take it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from citeguard.checks.entail import LocalEntailer
from citeguard.checks.entail.local import pair_windows
from citeguard.extract_worker import ProcessExtractor
from citeguard.policy import EntailmentPolicy

PAGE = " ".join(
    [
        "The harbour bridge opened in 1932 after eight years of work.",
        "It carries eight lanes of traffic and two railway tracks.",
        "Die Brücke wurde 1932 eröffnet und trägt acht Fahrspuren.",
        "About 160,000 vehicles cross it every day, the transport agency said.",
        "Its arch spans 503 metres and rises 134 metres above the water.",
    ]
    * 60  # a whole page: read through its shared lexicon
)
PAIRS = [
    ("The harbour bridge opened in 1932.", PAGE),
    ("The bridge carries ten lanes of traffic.", PAGE),
    ("About 160,000 vehicles cross the bridge daily.", PAGE),
    ("Die Brücke wurde 1932 eröffnet.", PAGE),
    ("The arch spans 503 metres.", PAGE),
    ("The bridge was painted red in 2001.", PAGE),
    ("It rises 134 metres above the water.", "Its arch rises 134 metres above the water."),
    ("Two railway tracks cross the harbour.", PAGE),
    ("The transport agency counts the vehicles.", PAGE),
]


@pytest.fixture(scope="module")
def children() -> Iterator[ProcessExtractor]:
    ex = ProcessExtractor(workers=2)
    assert ex.wait_ready(120, every_lane=True)
    try:
        yield ex
    finally:
        ex.shutdown(wait=True)


def test_windows_in_a_child_are_the_windows_here(children: ProcessExtractor) -> None:
    policy = EntailmentPolicy()
    here = pair_windows(PAIRS, policy)
    there = children.submit(pair_windows, PAIRS, policy).result(timeout=120)
    assert there == here
    assert all(w is not None for w in here)


async def test_offloaded_scores_are_the_scores_of_this_process(
    children: ProcessExtractor,
) -> None:
    alone, offloaded = LocalEntailer(), LocalEntailer()
    offloaded.offload_to(lambda: children)
    before = children.completed
    try:
        expected = await alone.score(PAIRS)
        got = await offloaded.score(PAIRS)
    finally:
        await alone.aclose()
        await offloaded.aclose()
    assert got == expected
    assert children.completed > before  # the windows were computed there
    assert {s.label for s in got} >= {"supported", "contradicted"}


async def test_children_that_cannot_take_the_work_leave_it_here() -> None:
    gone = ProcessExtractor()
    gone.shutdown(wait=True)  # submit now raises
    alone, offloaded = LocalEntailer(), LocalEntailer()
    offloaded.offload_to(lambda: gone)
    try:
        assert await offloaded.score(PAIRS) == await alone.score(PAIRS)
    finally:
        await alone.aclose()
        await offloaded.aclose()

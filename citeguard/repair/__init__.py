"""Repair before regenerate: fix a failing answer from what the run already holds.

Regeneration costs a full LLM call per attempt, and the fix is often at hand: the run's
searches returned, and the guard may already have fetched, a page that does support the claim.
Before the answer function is called again, :class:`Repairer` looks, for each failing
(claim, cited URL) pair, among the pages cited (and so fetched) earlier in this run and the
results of the run's recorded searches. Search results are ranked by the claim's content-word
overlap with their title, snippet and URL; the best few are fetched within the time left,
through the Guard's own fetcher and extract stage (address safety, size caps, redirects, the
TTL cache and snapshots all apply), and each candidate is judged exactly as the validity axis
judges a citation (:func:`~citeguard.checks.validity.verify_pair`: the quote or paraphrase on
the page, then the Guard's entailer). What it finds is written into the answer as the agent
wrote it:

* ``swap``: the failing citation points at the supporting page. A reference list entry
  ``[n] URL`` that only failing claims use gets the new URL (and title); one shared with
  passing claims keeps its URL, and the failing markers point at a new number (or at an
  entry that already lists the page). Inline links, HTML anchors, bare URLs and structured
  ``{claim, url, quote}`` items get the URL in place. A claim whose other citation already
  supports it loses the failing one (a swap to that source).
* ``correct_quote`` (``repair="full"``): a ``passage_altered`` quote becomes the cited page's
  own words, when the claim with those words is supported there.
* ``drop`` (``repair="full"``): a claim nothing supports is removed (as ``on_fail="strip"``
  does), and so is a broken entry no claim cites.

The repaired answer is verified again like any other attempt (the loop's ``recheck``); it is
returned only if it passes, and every change is a :class:`~citeguard.models.Repair` on the
attempt, the result and an INFO finding of its verdict. A repair that cannot address every
failure is not verified at all: the answer function is called again, and its feedback names
what the repair found and what remains (:meth:`RepairOutcome.feedback`).

``Policy.repair``: ``"off"``, ``"citations"`` (the default: swaps only; the agent's claims and
quotes are kept word for word) or ``"full"`` (swaps, quote corrections and drops).
"""

from __future__ import annotations

from citeguard.repair.outcome import RepairFn, RepairMode, RepairOutcome
from citeguard.repair.repairer import (
    MAX_FETCHED_PER_PAIR as MAX_FETCHED_PER_PAIR,
)
from citeguard.repair.repairer import (
    MAX_NEW_FETCHES as MAX_NEW_FETCHES,
)
from citeguard.repair.repairer import (
    MAX_NEW_PER_PAIR as MAX_NEW_PER_PAIR,
)
from citeguard.repair.repairer import (
    MAX_ROUNDS as MAX_ROUNDS,
)
from citeguard.repair.repairer import (
    Recheck as Recheck,
)
from citeguard.repair.repairer import (
    Repairer,
    repairer_for,
)

__all__ = ["RepairFn", "RepairMode", "RepairOutcome", "Repairer", "repairer_for"]

"""A Guard's warm-up: what its first check would otherwise load inside a user's request (the
extraction children, the public-suffix list, the word dictionary and language model, the
support model, the regime model), loaded at once, side by side."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from citeguard.checks.entail import Entailer
from citeguard.checks.freshness import RegimeClassifier
from citeguard.extract_stage import ExtractStage
from citeguard.lang import warm_up as lang_warm_up
from citeguard.web.urls import registrable_domain

__all__ = ["warm_parts"]


async def warm_parts(
    pages: ExtractStage,
    entailer_of: Callable[[], Entailer | None],
    regimes: RegimeClassifier,
    *,
    wait_for_extraction: bool,
    every_child: bool = True,
) -> None:
    """Warm what a check reads; ``wait_for_extraction``: until every extraction child is up
    and warm (:meth:`~citeguard.extract_stage.ExtractStage.warm_up`; ``every_child=False``:
    until the first is up, the children warming beside their first pages), else they start
    in the background."""
    # the extraction child (Policy.fetch.extract_in) starts while the model loads
    extraction = None
    if wait_for_extraction:
        extraction = asyncio.ensure_future(pages.warm_up(every_child=every_child))
    else:
        pages.start()
    # the public-suffix list is read on first use (~10-20 ms of Python): in a thread now,
    # not on the loop inside the first check that meets a host name
    sites = asyncio.ensure_future(asyncio.to_thread(registrable_domain, "example.com"))
    # so are the word dictionary and the language model the lexical checks read (~1 s)
    words = asyncio.ensure_future(asyncio.to_thread(lang_warm_up))
    try:
        entailer = entailer_of()
        warm = getattr(entailer, "warm_up", None)
        if warm is not None:
            await warm()
        await regimes.warm_up()  # the regime model, when the freshness axis uses one
    finally:
        if extraction is not None:
            await extraction
        await sites
        await words

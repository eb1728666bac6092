"""Scripted answers citing the loopback pages."""

from __future__ import annotations

from serve.servers import Pages


def good(pages: Pages) -> str:
    return (
        "The Eiffel Tower is 330 metres tall and stands on the Champ de Mars in Paris "
        f"([source]({pages.url('/good')}))."
    )


def dead(pages: Pages) -> str:
    return f"The Eiffel Tower is 330 metres tall ([source]({pages.url('/dead')}))."


def misquoted(pages: Pages) -> str:
    return (
        f"The page says “The Eiffel Tower is 500 metres tall and stands in London” "
        f"([source]({pages.url('/good')}))."
    )


# a sentence cited only by a url_citation annotation (no link in the text), between a sentence
# with an inline link to /good and one that cites nothing; the annotation is a zero-width marker
# at the sentence's end, where a provider places it
ANNOTATED = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris."
AFTER = "Visitors like it."


def annotated(pages: Pages, path: str) -> tuple[str, list[list[dict[str, object]]]]:
    """(text, citations for FakeUpstream.script): ``ANNOTATED`` cited by an annotation of
    ``path`` only, after ``good(pages)``."""
    head = good(pages) + " "
    text = head + ANNOTATED + " " + AFTER
    at = len(head) + len(ANNOTATED)
    return text, [[{"url": pages.url(path), "start": at, "end": at}]]

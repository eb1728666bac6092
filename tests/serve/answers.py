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

"""What every provider adapter hands the parser: the answer text and the provider's citations.

An adapter reads one LLM API's response (the SDK object, its ``dict`` form or its JSON text)
into a :class:`ProviderAnswer`: the text the user sees, each citation with the offsets it marks
in that text, the searches the response reports, and the usage it was billed. The parser
(:func:`citeguard.parse.parse_answer`) binds those citations to the claims of the text; the
Guard resolves provider redirects (:mod:`citeguard.providers.resolve`).

Nothing here imports an SDK: SDK objects are read through :func:`as_data` (``model_dump()``,
``to_dict()``, duck-typed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from citeguard.models import CitationOrigin, Finding, SearchRecord, Synthesis
from citeguard.search import plain
from citeguard.web.urls import TRACKING_PARAMS, strip_tracking

__all__ = [
    "TRACKING_PARAMS",
    "ProviderAnswer",
    "ProviderCitation",
    "as_data",
    "looks_like_json",
    "pick",
    "read_references",
    "strip_tracking",
    "untruncate",
]

_ELLIPSIS_RE = re.compile(r"^\s*(?:\.{3}|…)\s*|\s*(?:\.{3}|…)\s*$")


def untruncate(text: str | None) -> str | None:
    """A provider's excerpt without the ellipses that mark where it was cut ("…", "..." at
    either end): the part that stands on the page, to verify as it is (not an elision)."""
    if text is None:
        return None
    out = text
    while True:
        cut = _ELLIPSIS_RE.sub("", out)
        if cut == out:
            break
        out = cut
    out = out.strip()
    return out or None


_JSON_START_RE = re.compile(r"\{|\[\s*\{")


def looks_like_json(text: str) -> bool:
    """Whether ``text`` opens like a JSON object or a list of objects (a response's JSON)."""
    return _JSON_START_RE.match(text.lstrip()) is not None


def as_data(obj: Any) -> Any:
    """An SDK response as plain data: ``model_dump()`` / ``to_dict()`` (deep, duck-typed), a
    JSON text parsed, mappings and lists as they are; anything else unchanged."""
    if isinstance(obj, bytes | bytearray):
        obj = obj.decode("utf-8", "replace")
    if isinstance(obj, str):
        s = obj.strip()
        if looks_like_json(s):
            try:
                return json.loads(s)
            except (ValueError, RecursionError):
                return obj
        return obj
    return plain(obj)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def pick(data: Any, *names: str) -> Any:
    """``data[name]`` for the first name present, in snake_case or camelCase (REST JSON), the
    value made plain (:func:`~citeguard.search.plain`); None when absent."""
    data = plain(data)
    if not isinstance(data, Mapping):
        return None
    for name in names:
        for key in (name, _camel(name)):
            value = data.get(key)
            if value is not None:
                return plain(value)
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


@dataclass(frozen=True, slots=True)
class ProviderCitation:
    """One citation object of a provider response.

    ``start``/``end``: character offsets into :attr:`ProviderAnswer.text` (-1: none).
    ``marks="marker"``: the range is a marker (OpenAI's ``url_citation``) and the citation backs
    the sentence it closes; ``"span"``: the range is the text it supports (Anthropic, Gemini).
    ``quote``: a passage the provider says it took from the page (verified on it).
    ``redirect``: ``url`` is a provider redirect the Guard resolves before checking.
    ``unchecked``: why the citation cannot be checked (a document with no URL); ``document``
    names that document.
    """

    url: str | None
    start: int = -1
    end: int = -1
    marks: Literal["marker", "span"] = "span"
    title: str | None = None
    quote: str | None = None
    confidence: float | None = None
    redirect: bool = False
    document: str | None = None
    unchecked: str | None = None


@dataclass(frozen=True)
class ProviderAnswer:
    """A provider response read for the parser: see the module docstring.

    ``references``: the sources numbered ``[1]``, ``[2]``, ... markers in the text cite, in
    order (Perplexity's ``citations``). ``searches``: the searches the response reports.
    """

    origin: CitationOrigin
    text: str
    citations: tuple[ProviderCitation, ...] = ()
    references: tuple[ProviderCitation, ...] = ()
    searches: tuple[SearchRecord, ...] = ()
    findings: tuple[Finding, ...] = ()
    cost: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    def synthesis(self) -> Synthesis:
        """The answer text with its cost and token counts (for the cost budget and LLM spans)."""
        return Synthesis(
            text=self.text,
            cost=self.cost,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
        )


_URL_FIELDS = ("url", "uri", "link", "href", "source")


def _reference(item: Any) -> ProviderCitation | None:
    if isinstance(item, ProviderCitation):
        return item
    if isinstance(item, str):
        return ProviderCitation(url=item.strip()) if item.strip() else None
    data = plain(item)
    if not isinstance(data, Mapping):
        return None
    url = next((u for u in (_str(data.get(k)) for k in _URL_FIELDS) if u), None)
    if url is None:
        return None
    return ProviderCitation(
        url=url.strip(),
        title=_str(data.get("title")) or _str(data.get("name")),
        quote=untruncate(_str(data.get("quote")) or _str(data.get("cited_text"))),
    )


def read_references(
    references: Sequence[Any] | Mapping[Any, Any] | None,
) -> list[tuple[str, ProviderCitation | None]]:
    """``references=`` as ``(marker id, source)`` pairs: a sequence numbers its items ``1``,
    ``2``, ... (what ``[1]`` cites); a mapping keeps its keys (``{"nyt": url}`` for
    ``[t][nyt]``). A source is a URL, a mapping or object with ``url`` (``uri``, ``link``,
    ``href``, ``source``) and ``title``/``quote``, or a :class:`ProviderCitation`; one with no
    URL is kept as None (a finding)."""
    if references is None:
        return []
    if isinstance(references, Mapping):
        pairs: list[tuple[str, Any]] = [(str(k), v) for k, v in references.items()]
    elif isinstance(references, str | bytes):
        pairs = [("1", references)]
    else:
        pairs = [(str(n), v) for n, v in enumerate(references, start=1)]
    return [(key, _reference(value)) for key, value in pairs]

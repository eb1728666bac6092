"""Provider adapters: the citation objects of LLM APIs, read into citeguard's answers.

One module per provider, each reading the SDK's response object, its ``dict`` form and its JSON
text alike (no SDK is imported: objects are read through ``model_dump()`` / ``to_dict()``):

==============  ================================================================================
module          reads
==============  ================================================================================
``openai``      Responses API (``output_text`` parts with ``url_citation`` annotations, and
                ``web_search_call`` searches) and Chat Completions (``message.annotations``)
``anthropic``   Messages: text blocks with ``citations`` (web search results, and documents
                through a ``documents={index_or_title: url}`` map), ``web_search_tool_result``
``gemini``      ``candidates[].grounding_metadata``: chunks, supports (UTF-8 byte offsets),
                confidence scores; grounding redirects resolved by the Guard
``perplexity``  chat completions: ``[n]`` markers, ``citations`` and ``search_results``
==============  ================================================================================

:func:`read_provider` (``dispatch``) picks the adapter, and reads the parts of a response a
developer may hold as well (an OpenAI output item, content part, choice or message; an Anthropic
text block; a Gemini candidate, content or part; a Perplexity choice or message);
:func:`citeguard.parse.parse_answer`, :meth:`citeguard.Guard.check` and guarded answer functions
call it, so each accepts any of these. :func:`resolve_answer` (``resolve``) is the Guard's step
that resolves provider redirects and adds the searches a response reports to the run's.
"""

from citeguard.providers.base import (
    TRACKING_PARAMS,
    ProviderAnswer,
    ProviderCitation,
    read_references,
    strip_tracking,
    untruncate,
)
from citeguard.providers.dispatch import is_provider_response, read_provider
from citeguard.providers.gemini import is_redirect
from citeguard.providers.resolve import Resolution, resolve_answer, resolve_redirects

__all__ = [
    "TRACKING_PARAMS",
    "ProviderAnswer",
    "ProviderCitation",
    "Resolution",
    "is_provider_response",
    "is_redirect",
    "read_provider",
    "read_references",
    "resolve_answer",
    "resolve_redirects",
    "strip_tracking",
    "untruncate",
]

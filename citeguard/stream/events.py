"""What a guarded stream yields: text released, text held, each citation's status, the
verdict (and, from :func:`stream_run`, each attempt and the result)."""

from __future__ import annotations

from collections.abc import (
    AsyncIterator,
    Callable,
)
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from citeguard.models import (
    CitationStatus,
    GuardResult,
    UrlSet,
    Verdict,
)

StreamMode = Literal["hold", "annotate"]
_MODES = ("hold", "annotate")


# --------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    at_ms: float = 0.0  # when it happened, in ms since the stream began


class StreamText(_Event):
    """Answer text the user may see now: ``text == answer[start:end]``.

    ``hold``: a verified sentence with the text since the previous release (``claim_index``
    set; ``None`` for the text after the last sentence, released with a passing verdict), and
    ``held_ms``, how long it waited after its last character arrived. ``annotate``: each chunk
    as it arrives (``claim_index`` ``None``, ``held_ms`` 0)."""

    type: Literal["text"] = "text"
    text: str
    start: int
    end: int
    claim_index: int | None = None
    held_ms: float = 0.0


class StreamHeld(_Event):
    """Answer text held back for good (``hold`` mode): a sentence whose citation failed, or the
    text after it; ``urls`` are the failing citations."""

    type: Literal["held"] = "held"
    text: str
    start: int
    end: int
    claim_index: int | None = None
    reason: str
    urls: list[str] = Field(default_factory=list)


class StreamCitation(_Event):
    """A citation's status as it lands. ``stage="fetch"``: a URL's fetch finished (``url`` is
    normalised; the status says whether it resolves). ``stage="claim"``: one (sentence, cited
    URL) pair was verified: resolution, passage on the page, claim entailed (``url`` as
    cited; ``claim_index`` and ``claim`` name the sentence)."""

    type: Literal["citation"] = "citation"
    stage: Literal["fetch", "claim"]
    url: str
    status: CitationStatus
    reason: str
    http_status: int | None = None
    claim_index: int | None = None
    claim: str | None = None

    @property
    def passed(self) -> bool:
        return self.status is CitationStatus.OK


class StreamVerdict(_Event):
    """The last event of a stream: ``guard.check()`` on the whole answer.

    ``released`` is what the user was shown, ``held`` what was kept back (their concatenation
    is ``text``). ``feedback`` (on failure): the message ``Guard.run`` would hand the next
    attempt; regenerate with ``exclude_urls=verdict.offending_urls`` and it, or use
    :meth:`Guard.stream_run`. ``after_last_chunk_ms``: from the end of the stream to this
    verdict."""

    type: Literal["verdict"] = "verdict"
    passed: bool
    verdict: Verdict
    text: str
    released: str
    held: str
    feedback: str | None = None
    after_last_chunk_ms: float = 0.0
    # Guard.stream_run, hold: text neither released nor held, kept back from the first sentence
    # citing a source stale under an uncertain faster regime while the run asks once for
    # fresher sources (the StreamResult's answer is the one that stands)
    pending: str = ""


class StreamAttempt(_Event):
    """``stream_run``: attempt ``number`` begins (what earlier attempts released is void)."""

    type: Literal["attempt"] = "attempt"
    number: int
    exclude_urls: UrlSet = frozenset()


class StreamResult(_Event):
    """``stream_run``'s last event: the guarded run's result, as ``Guard.run`` returns it."""

    type: Literal["result"] = "result"
    result: GuardResult


StreamEvent = Annotated[
    StreamText | StreamHeld | StreamCitation | StreamVerdict | StreamAttempt | StreamResult,
    Field(discriminator="type"),
]
EventStream = AsyncIterator[StreamEvent]
#: ``fn(question, *, exclude_urls, feedback=None, **kwargs)`` → a :data:`ChunkSource` (or an
#: awaitable of one), e.g. ``lambda q, **kw: client.chat.completions.create(..., stream=True)``
StreamAnswerFn = Callable[..., Any]

"""Verifying an answer while it streams: Guard.stream, Guard.stream_run and the adapters.

Every stream is answered against the real aiohttp farm on 127.0.0.1. Orderings ("the URL is
fetched before the stream ends", "text is released before its citation is checked") are
forced with asyncio.Events that the farm's handlers and the event consumer set, never with
sleeps: a stream that waits on an event the guard never causes times out and fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from conftest import Farm
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from citeguard import CitationStatus, FetchPolicy, Guard, Policy, UsageError, Verdict
from citeguard.checks.entail import WordOverlapEntailer
from citeguard.stream import (
    StreamAttempt,
    StreamCitation,
    StreamEvent,
    StreamHeld,
    StreamResult,
    StreamText,
    StreamVerdict,
)
from citeguard.stream_adapters import text_chunks, text_of
from citeguard.verdict import without_timings

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
QUESTION = "Who wrote the novel Middlemarch?"
WAIT = 10.0  # seconds an ordering event may take before the test fails

ELIOT = """<html><head><title>Middlemarch</title></head><body><article>
<p>Middlemarch is a novel by the English author George Eliot, first published in eight
installments in 1871 and 1872.</p>
<p>The novel is set in the fictitious Midlands town of Middlemarch during 1829 to 1832.</p>
</article></body></html>"""

LIBRARY = """<html><head><title>George Eliot</title></head><body><main>
<p>George Eliot was the pen name of Mary Ann Evans, who wrote Middlemarch.</p>
<p>She was born in 1819 in Warwickshire and died in 1880 in London.</p>
</main></body></html>"""


def _policy() -> Policy:
    fetch = FetchPolicy(
        allow_private_addresses=True, url_timeout=5.0, answer_deadline=8.0, retries=0
    )
    return Policy(fetch=fetch)


def _guard(farm: Farm, *, entailer: Any = None, tracer_provider: Any = None) -> Guard:
    return Guard(
        _policy(),
        resolver=farm.resolver,
        entailer=entailer,
        now=lambda: NOW,
        tracer_provider=tracer_provider,
    )


def _site(farm: Farm) -> dict[str, str]:
    return {
        "good": farm.add("books.example.com", "/middlemarch", body=ELIOT),
        "also": farm.add("library.example.org", "/eliot", body=LIBRARY),
        "dead": farm.add("gone.example.net", "/middlemarch", status=404, body="nope"),
        "moved": farm.add(
            "library.example.org", "/old-eliot", status=301, headers={"Location": "/eliot"}
        ),
    }


def _pieces(text: str, size: int = 9) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def _chunks(pieces: Sequence[str]) -> AsyncIterator[str]:
    for piece in pieces:
        await asyncio.sleep(0)  # a real stream yields to the loop between chunks
        yield piece


async def _collect(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [e async for e in events]


def _verdict_of(events: Sequence[StreamEvent]) -> StreamVerdict:
    last = events[-1]
    assert isinstance(last, StreamVerdict)
    assert sum(isinstance(e, StreamVerdict) for e in events) == 1
    return last


def _same(a: Verdict, b: Verdict) -> None:
    assert without_timings(a).model_dump_json() == without_timings(b).model_dump_json()


def _released(events: Sequence[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, StreamText))


# --------------------------------------------------------------------------------------------
# Fetching while the answer streams
# --------------------------------------------------------------------------------------------


async def test_a_url_is_fetched_before_the_stream_ends_and_check_reuses_it(farm: Farm) -> None:
    urls = _site(farm)
    requested = asyncio.Event()
    order: list[str] = []

    async def eliot(request: web.Request) -> web.StreamResponse:
        order.append("fetched")
        requested.set()
        return web.Response(text=ELIOT, content_type="text/html")

    early = farm.add("early.example.com", "/middlemarch", eliot)
    head = f"Middlemarch is a novel by George Eliot ([source]({early})). "
    tail = f"George Eliot was the pen name of Mary Ann Evans ([library]({urls['also']})).\n"

    async def agent() -> AsyncIterator[str]:
        for piece in _pieces(head, 7):
            yield piece
        # the stream goes on only once the guard has asked the farm for the first URL
        await asyncio.wait_for(requested.wait(), WAIT)
        order.append("stream goes on")
        for piece in _pieces(tail, 7):
            await asyncio.sleep(0)
            yield piece
        order.append("stream ended")

    async with _guard(farm) as guard:
        events = await _collect(guard.stream(agent(), question=QUESTION, mode="annotate"))
    assert order == ["fetched", "stream goes on", "stream ended"]
    fetched = [e for e in events if isinstance(e, StreamCitation) and e.stage == "fetch"]
    assert {e.url for e in fetched} == {early, urls["also"]}
    assert all(e.status is CitationStatus.OK for e in fetched)
    verdict = _verdict_of(events)
    assert verdict.passed, verdict.verdict.model_dump_json(indent=1)
    # the final check() found both pages in the fetcher's TTL cache: each was fetched once
    assert farm.count("early.example.com", "/middlemarch") == 1
    assert farm.count("library.example.org", "/eliot") == 1


async def test_the_final_verdict_equals_check_on_the_full_text(farm: Farm) -> None:
    urls = _site(farm)
    answer = (
        "# Middlemarch\n\n"
        "Middlemarch is a novel by the English author George Eliot [1]. "
        "It was “first published in eight installments in 1871 and 1872” [1].\n"
        f"George Eliot was the pen name of Mary Ann Evans ({urls['moved']}).\n"
        "- She was born in 1819 [2].\n"
        "- A lost page says otherwise [3].\n\n"
        f"[1] {urls['good']}\n[2] [The library]({urls['also']})\n[3] {urls['dead']}\n"
    )
    for entailer in (None, WordOverlapEntailer()):
        async with _guard(farm, entailer=entailer) as guard:
            events = await _collect(
                guard.stream(_chunks(_pieces(answer, 5)), question=QUESTION, mode="hold")
            )
        async with _guard(farm, entailer=entailer) as fresh:
            expected = await fresh.check(answer, question=QUESTION)
        final = _verdict_of(events)
        assert final.text == answer
        assert final.released + final.held == answer
        _same(final.verdict, expected)
        assert not expected.passed  # the dead URL
        assert final.feedback is not None and urls["dead"] in final.feedback


async def test_streams_of_events_and_of_one_big_chunk_give_the_same_verdict(farm: Farm) -> None:
    urls = _site(farm)
    answer = (
        f"Middlemarch is a novel by George Eliot ([Eliot]({urls['good']})). "
        f'The library says "George Eliot was the pen name of Mary Ann Evans" <{urls["also"]}>.'
    )
    async with _guard(farm) as guard:
        whole = _verdict_of(await _collect(guard.stream([answer], question=QUESTION)))
    async with _guard(farm) as guard:
        one_char = _verdict_of(
            await _collect(guard.stream(_chunks(list(answer)), question=QUESTION))
        )
    assert whole.passed and one_char.passed
    _same(whole.verdict, one_char.verdict)


# --------------------------------------------------------------------------------------------
# Modes
# --------------------------------------------------------------------------------------------


async def test_hold_mode_releases_only_sentences_whose_citations_pass(farm: Farm) -> None:
    urls = _site(farm)
    first = f"Middlemarch is a novel by George Eliot ([Eliot]({urls['good']})). "
    second = f"George Eliot wrote it in a cave ([lost]({urls['dead']})). "
    third = f"George Eliot was the pen name of Mary Ann Evans ([library]({urls['also']})).\n"
    released_first = asyncio.Event()

    async def agent() -> AsyncIterator[str]:
        for piece in _pieces(first + second, 6):
            await asyncio.sleep(0)
            yield piece
        # the first sentence is verified and released while the answer is still streaming
        await asyncio.wait_for(released_first.wait(), WAIT)
        for piece in _pieces(third, 6):
            await asyncio.sleep(0)
            yield piece

    events: list[StreamEvent] = []
    async with _guard(farm) as guard:
        async for event in guard.stream(agent(), question=QUESTION, mode="hold"):
            events.append(event)
            if isinstance(event, StreamText):
                released_first.set()
    texts = [e for e in events if isinstance(e, StreamText)]
    assert [t.text for t in texts] == [first.rstrip()]  # one sentence, released once
    assert texts[0].claim_index == 0 and texts[0].held_ms >= 0
    held = [e for e in events if isinstance(e, StreamHeld)]
    assert held[0].text.strip() == second.strip()
    assert held[0].urls == [urls["dead"]] and "not_found" in held[0].reason
    assert "Mary Ann Evans" in held[-1].text  # held after the failing sentence, though it passes
    final = _verdict_of(events)
    assert not final.passed and urls["dead"] in final.verdict.offending_urls
    assert (
        final.released == first.rstrip() and final.released + final.held == first + second + third
    )
    # every citation's status arrived as its own event before the verdict
    claims = {(e.claim_index, e.url): e.status for e in events if isinstance(e, StreamCitation)}
    assert claims[(1, urls["dead"])] is CitationStatus.NOT_FOUND
    assert claims[(0, urls["good"])] is CitationStatus.OK


async def test_hold_mode_waits_for_a_numbered_reference(farm: Farm) -> None:
    urls = _site(farm)
    body = (
        "Middlemarch is a novel by George Eliot [1]. "
        f"Its author was Mary Ann Evans ([library]({urls['also']})). That is all.\n\n"
    )
    refs = f"[1] {urls['good']}\n"
    gate = asyncio.Event()  # the consumer has seen the library page's fetch land
    seen_before_refs: list[StreamEvent] = []
    events: list[StreamEvent] = []

    async def agent() -> AsyncIterator[str]:
        for piece in _pieces(body, 8):
            await asyncio.sleep(0)
            yield piece
        # the prefix that started that fetch was parsed: "[1]" had no reference in it yet
        await asyncio.wait_for(gate.wait(), WAIT)
        seen_before_refs.extend(events)
        for piece in _pieces(refs, 8):
            await asyncio.sleep(0)
            yield piece

    async with _guard(farm) as guard:
        async for event in guard.stream(agent(), question=QUESTION, mode="hold"):
            events.append(event)
            if isinstance(event, StreamCitation) and event.url == urls["also"]:
                gate.set()
    # an unresolved marker holds its sentence, and every sentence after it
    assert not [e for e in seen_before_refs if isinstance(e, StreamText)]
    final = _verdict_of(events)
    assert final.passed, final.verdict.model_dump_json(indent=1)
    assert final.released == body + refs and final.held == ""
    assert [e.claim_index for e in events if isinstance(e, StreamText)][:2] == [0, 1]


async def test_annotate_mode_releases_text_before_its_citation_is_checked(farm: Farm) -> None:
    urls = _site(farm)
    page_may_answer = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.wait_for(page_may_answer.wait(), WAIT)
        return web.Response(text=ELIOT, content_type="text/html")

    slow_url = farm.add("slow.example.com", "/middlemarch", slow)
    answer = (
        f"Middlemarch is a novel by George Eliot ([Eliot]({slow_url})). "
        f"George Eliot was the pen name of Mary Ann Evans ([library]({urls['also']})).\n"
    )
    events: list[StreamEvent] = []
    async with _guard(farm) as guard:
        async for event in guard.stream(
            _chunks(_pieces(answer, 11)), question=QUESTION, mode="annotate"
        ):
            events.append(event)
            if isinstance(event, StreamText) and event.end == len(answer):
                page_may_answer.set()  # every chunk was shown before the slow page answered
    texts = [e for e in events if isinstance(e, StreamText)]
    assert "".join(t.text for t in texts) == answer
    assert [t.text for t in texts] == _pieces(answer, 11)  # chunk by chunk, unchanged
    slow_status = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, StreamCitation) and e.url == slow_url and e.stage == "fetch"
    )
    assert max(i for i, e in enumerate(events) if isinstance(e, StreamText)) < slow_status
    final = _verdict_of(events)
    assert final.passed and final.released == answer and final.held == ""


async def test_hold_mode_holds_a_quote_until_it_closes(farm: Farm) -> None:
    urls = _site(farm)
    requested = asyncio.Event()

    async def eliot(request: web.Request) -> web.StreamResponse:
        requested.set()
        return web.Response(text=LIBRARY, content_type="text/html")

    inside = farm.add("inside.example.com", "/eliot", eliot)
    # the full stop inside the quote ends no sentence: nothing may be released before it closes
    head = f'The library writes "George Eliot wrote Middlemarch. She lived at {inside} '
    tail = f'in 1819" [1]. Middlemarch is a novel [2].\n\n[1] {urls["also"]}\n[2] {urls["good"]}\n'

    async def agent() -> AsyncIterator[str]:
        for piece in _pieces(head, 4):
            await asyncio.sleep(0)
            yield piece
        # the guard has parsed a prefix in which the quote is open and a new "sentence" began
        await asyncio.wait_for(requested.wait(), WAIT)
        for piece in _pieces(tail, 4):
            await asyncio.sleep(0)
            yield piece

    async with _guard(farm) as guard:
        events = await _collect(guard.stream(agent(), question=QUESTION))
    closing = (head + tail).index('" [1]')
    assert all(e.end > closing for e in events if isinstance(e, StreamText | StreamHeld))
    assert _verdict_of(events).text == head + tail


@pytest.mark.parametrize("late", [False, True])
async def test_late_citations_hold_an_uncited_sentence_until_the_verdict(
    farm: Farm, late: bool
) -> None:
    library = farm.add("late.example.org", "/eliot", body=LIBRARY)
    uncited = "Middlemarch is a novel by George Eliot. "
    cited = f"George Eliot was the pen name of Mary Ann Evans ([library]({library})). "
    last = "She was born in 1819 in Warwickshire.\n"
    answer = uncited + cited + last
    fetched = asyncio.Event()  # the consumer has seen the library page's fetch land
    events: list[StreamEvent] = []
    before_end: list[StreamEvent] = []

    async def agent() -> AsyncIterator[str]:
        for piece in _pieces(uncited + cited + "She ", 7):
            await asyncio.sleep(0)
            yield piece
        # the prefix with the library URL was parsed, so the uncited sentence was complete then
        await asyncio.wait_for(fetched.wait(), WAIT)
        before_end.extend(events)
        for piece in _pieces(last[4:], 7):
            await asyncio.sleep(0)
            yield piece

    async with _guard(farm) as guard:
        async for event in guard.stream(
            agent(), question=QUESTION, mode="hold", late_citations=late
        ):
            events.append(event)
            if isinstance(event, StreamCitation) and event.url == library:
                fetched.set()
    early = [e for e in before_end if isinstance(e, StreamText)]
    if not late:  # it cites nothing: released as soon as it is complete
        assert early and early[0].claim_index == 0 and early[0].text == uncited.rstrip()
    else:  # citation objects may still come for it: pending, and the sentences after it wait
        assert early == []
        assert not [e for e in before_end if isinstance(e, StreamHeld)]
    final = _verdict_of(events)
    assert final.passed, final.verdict.model_dump_json(indent=1)
    # at the end the verdict decides: it passed, so everything is released, in order
    texts = [e for e in events if isinstance(e, StreamText)]
    assert [t.claim_index for t in texts if t.claim_index is not None] == [0, 1, 2]
    assert final.released == answer and final.held == ""
    assert "".join(t.text for t in texts) == answer


async def test_late_citations_leave_annotate_mode_alone(farm: Farm) -> None:
    urls = _site(farm)
    answer = f"Middlemarch is a novel. It is by George Eliot ([Eliot]({urls['good']})).\n"
    async with _guard(farm) as guard:
        events = await _collect(
            guard.stream(_chunks(_pieces(answer, 11)), mode="annotate", late_citations=True)
        )
    texts = [e.text for e in events if isinstance(e, StreamText)]
    assert texts == _pieces(answer, 11)  # chunk by chunk, as without late citations
    assert _verdict_of(events).released == answer


# --------------------------------------------------------------------------------------------
# Spans
# --------------------------------------------------------------------------------------------


async def test_the_stream_span_shows_what_was_held_and_for_how_long(farm: Farm) -> None:
    urls = _site(farm)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    requested = asyncio.Event()

    async def eliot(request: web.Request) -> web.StreamResponse:
        requested.set()
        return web.Response(text=ELIOT, content_type="text/html")

    early = farm.add("early.example.com", "/middlemarch", eliot)
    head = f"Middlemarch is a novel by George Eliot ([Eliot]({early})). "
    tail = f"It was written in a cave ([lost]({urls['dead']})). The end.\n"

    async def agent() -> AsyncIterator[str]:
        for piece in [*_pieces(head, 6), "It "]:
            await asyncio.sleep(0)
            yield piece
        await asyncio.wait_for(requested.wait(), WAIT)  # fetched while the answer streams
        for piece in _pieces(tail[3:], 6):
            await asyncio.sleep(0)
            yield piece

    async with _guard(farm, tracer_provider=provider) as guard:
        await _collect(guard.stream(agent(), question=QUESTION))
    spans = {s.name: s for s in exporter.get_finished_spans()}
    stream, check = spans["citeguard.stream"], spans["citeguard.check"]
    assert check.parent is not None and check.parent.span_id == stream.context.span_id
    attrs = stream.attributes or {}
    assert attrs["citeguard.stream.mode"] == "hold"
    assert attrs["citeguard.stream.held_sentences"] == 1
    assert attrs["citeguard.stream.sentences_released"] == 1
    assert float(attrs["citeguard.stream.hold_ms_max"]) >= 0  # type: ignore[arg-type]
    assert attrs["citeguard.stream.urls"] == 2
    assert attrs["citeguard.stream.urls_early"] >= 1  # type: ignore[operator]
    assert attrs["citeguard.passed"] is False
    names = [e.name for e in stream.events]
    assert names.count("citeguard.stream.url") == 2
    assert {"citeguard.stream.released", "citeguard.stream.held"} <= set(names)
    held = next(e for e in stream.events if e.name == "citeguard.stream.held")
    assert "not_found" in str((held.attributes or {})["reason"])


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------


async def test_stream_run_regenerates_without_the_offending_url(farm: Farm) -> None:
    urls = _site(farm)
    calls: list[frozenset[str]] = []

    def agent(
        question: str, *, exclude_urls: frozenset[str], feedback: object = None
    ) -> AsyncIterator[str]:
        calls.append(exclude_urls)
        if urls["dead"] not in exclude_urls:
            text = f"Middlemarch was written in a cave [1].\n\n[1] {urls['dead']}\n"
        else:
            text = f"Middlemarch is a novel by George Eliot [1].\n\n[1] {urls['good']}\n"
        return _chunks(_pieces(text, 10))

    async with _guard(farm) as guard:
        events = await _collect(guard.stream_run(agent, QUESTION, mode="hold"))
    assert calls == [frozenset(), frozenset({urls["dead"]})]
    attempts = [e for e in events if isinstance(e, StreamAttempt)]
    assert [a.number for a in attempts] == [1, 2]
    assert attempts[1].exclude_urls == frozenset({urls["dead"]})
    verdicts = [e for e in events if isinstance(e, StreamVerdict)]
    assert [v.passed for v in verdicts] == [False, True]
    result = events[-1]
    assert isinstance(result, StreamResult)
    assert result.result.passed and len(result.result.attempts) == 2
    assert result.result.answer == verdicts[1].text
    _same(result.result.verdict, verdicts[1].verdict)


# --------------------------------------------------------------------------------------------
# Adapters
# --------------------------------------------------------------------------------------------


def _openai_events() -> list[tuple[Any, str]]:
    from openai.types.chat import ChatCompletionChunk
    from openai.types.chat.chat_completion_chunk import Choice, ChoiceDelta
    from openai.types.responses import ResponseTextDeltaEvent, ResponseTextDoneEvent

    def chunk(delta: ChoiceDelta, index: int = 0) -> ChatCompletionChunk:
        return ChatCompletionChunk(
            id="c1",
            created=0,
            model="gpt",
            object="chat.completion.chunk",
            choices=[Choice(index=index, delta=delta, finish_reason=None)],
        )

    return [
        (chunk(ChoiceDelta(role="assistant")), ""),
        (chunk(ChoiceDelta(content="Middle")), "Middle"),
        (chunk(ChoiceDelta(content="other choice"), index=1), ""),
        (
            ResponseTextDeltaEvent(
                type="response.output_text.delta",
                delta="march",
                item_id="m1",
                output_index=0,
                content_index=0,
                sequence_number=3,
                logprobs=[],
            ),
            "march",
        ),
        (
            ResponseTextDoneEvent(
                type="response.output_text.done",
                text="Middlemarch",
                item_id="m1",
                output_index=0,
                content_index=0,
                sequence_number=4,
                logprobs=[],
            ),
            "",
        ),
    ]


def _anthropic_events() -> list[tuple[Any, str]]:
    from anthropic.types import (
        InputJSONDelta,
        RawContentBlockDeltaEvent,
        RawContentBlockStopEvent,
        RawMessageStopEvent,
        TextDelta,
    )

    return [
        (
            RawContentBlockDeltaEvent(
                type="content_block_delta", index=0, delta=TextDelta(type="text_delta", text=" is")
            ),
            " is",
        ),
        (
            RawContentBlockDeltaEvent(
                type="content_block_delta",
                index=1,
                delta=InputJSONDelta(type="input_json_delta", partial_json='{"q"'),
            ),
            "",
        ),
        (RawContentBlockStopEvent(type="content_block_stop", index=0), ""),
        (RawMessageStopEvent(type="message_stop"), ""),
    ]


def _langchain_events() -> list[tuple[Any, str]]:
    from langchain_core.messages import AIMessageChunk

    return [
        (AIMessageChunk(content=" a novel"), " a novel"),
        (AIMessageChunk(content=[{"type": "text", "text": " by", "index": 0}]), " by"),
        (AIMessageChunk(content=[{"type": "tool_use", "id": "t", "name": "n", "input": {}}]), ""),
        (
            {"event": "on_chat_model_stream", "data": {"chunk": AIMessageChunk(content=" Eliot")}},
            " Eliot",
        ),
        ({"event": "on_chain_start", "data": {}}, ""),
    ]


def _sdk_events() -> list[tuple[Any, str]]:
    return [*_openai_events(), *_anthropic_events(), *_langchain_events()]


def test_adapters_read_real_sdk_events_and_their_dict_forms() -> None:
    for event, text in _sdk_events():
        assert text_of(event) == text, event
        dumped = event.model_dump() if hasattr(event, "model_dump") else event
        assert text_of(dumped) == text, dumped


def test_adapters_skip_helper_events_that_repeat_the_text() -> None:
    from anthropic.lib.streaming import TextEvent
    from openai.lib.streaming.chat import ContentDeltaEvent

    # the SDKs' stream helpers yield the raw delta and a convenience event with the same text
    assert text_of(TextEvent(type="text", text=" is", snapshot="Middlemarch is")) == ""
    assert text_of(ContentDeltaEvent(type="content.delta", delta="x", snapshot="x")) == "x"
    assert text_of({"type": "chunk", "chunk": {}, "snapshot": {}}) == ""


def test_adapters_refuse_what_they_cannot_read() -> None:
    with pytest.raises(UsageError):
        text_of(42)
    with pytest.raises(UsageError):
        text_of({"something": "else"})


async def test_text_chunks_reads_async_sync_and_list_streams() -> None:
    events = [e for e, _ in _sdk_events()]
    expected = [t for _, t in _sdk_events() if t]

    async def agen() -> AsyncIterator[Any]:
        for e in events:
            yield e

    def gen() -> Any:
        yield from events

    assert [c async for c in text_chunks(agen())] == expected
    assert [c async for c in text_chunks(gen())] == expected
    assert [c async for c in text_chunks(events)] == expected
    assert "".join(expected) == "Middlemarch is a novel by Eliot"


async def test_guard_stream_takes_provider_events(farm: Farm) -> None:
    from openai.types.chat import ChatCompletionChunk
    from openai.types.chat.chat_completion_chunk import Choice, ChoiceDelta

    urls = _site(farm)
    answer = f"Middlemarch is a novel by George Eliot [1].\n\n[1] {urls['good']}\n"
    chunks = [
        ChatCompletionChunk(
            id="c1",
            created=0,
            model="gpt",
            object="chat.completion.chunk",
            choices=[Choice(index=0, delta=ChoiceDelta(content=piece), finish_reason=None)],
        )
        for piece in _pieces(answer, 6)
    ]
    async with _guard(farm) as guard:
        final = _verdict_of(await _collect(guard.stream(chunks, question=QUESTION)))
        dicts = _verdict_of(await _collect(guard.stream([c.model_dump() for c in chunks])))
    assert final.text == answer == dicts.text
    assert final.passed and dicts.passed


async def test_usage_errors(farm: Farm) -> None:
    async with _guard(farm) as guard:
        with pytest.raises(UsageError):
            guard.stream(["x"], mode="stream")  # type: ignore[arg-type]
        with pytest.raises(UsageError):
            guard.stream("one string")
        with pytest.raises(UsageError):
            await _collect(guard.stream([object()]))


async def test_an_error_in_the_stream_propagates(farm: Farm) -> None:
    class Broken(Exception):
        pass

    async def agent() -> AsyncIterator[str]:
        yield "Middlemarch is a novel "
        raise Broken

    async with _guard(farm) as guard:
        with pytest.raises(Broken):
            await _collect(guard.stream(agent()))


async def test_closing_the_stream_early_stops_its_work(farm: Farm) -> None:
    urls = _site(farm)
    answer = (
        f"Middlemarch is a novel by George Eliot ([Eliot]({urls['good']})). "
        f"George Eliot was the pen name of Mary Ann Evans ([library]({urls['also']})).\n"
    )
    async with _guard(farm) as guard:
        events = guard.stream(_chunks(_pieces(answer, 5)), question=QUESTION, mode="annotate")
        first = await anext(events)
        assert isinstance(first, StreamText)
        await events.aclose()  # type: ignore[attr-defined]
        # the Guard is unharmed: the next stream runs to its verdict
        again = _verdict_of(await _collect(guard.stream([answer], question=QUESTION)))
    assert again.passed


# --------------------------------------------------------------------------------------------
# When a sentence of a prefix is complete
# --------------------------------------------------------------------------------------------


def test_complete_prefix_ends_at_whitespace_a_paren_or_an_angle_bracket() -> None:
    from citeguard.stream import _complete_prefix

    assert _complete_prefix("see http://a.example.com/pa") == len("see ")
    assert _complete_prefix("[t](http://a.example.com/x)") == len("[t](http://a.example.com/x)")
    assert _complete_prefix("<http://a.example.com/x>.") == len("<http://a.example.com/x>")
    assert _complete_prefix("[1] http://a.example.com/x\n[2] htt") == len(
        "[1] http://a.example.com/x\n[2] "
    )
    assert _complete_prefix("nospace") == 0


@pytest.mark.parametrize(
    ("prefix", "complete"),
    [
        # the last claim may still grow
        ("Eliot wrote it [1]. Next", [False, False]),
        ("Eliot wrote it [1].\n\n[1] http://a.example.com/x\nNext ", [True, False]),
        # a marker without its reference yet
        ("Eliot wrote it [2]. Next one. ", [False, False]),
        # a [word] that a definition later may turn into a citation
        ("Eliot wrote it [Reuters]. Next one. ", [False, False]),
        # a quote still open on the last line swallows the full stops after it
        ('He said "Rates rose. Jobs ', [False, False]),
        (
            'Eliot wrote it (http://a.example.com/x). He said "Rates rose. Jobs ',
            [True, False, False],
        ),
        ("Eliot wrote it (http://a.example.com/x). Next one. ", [True, False]),
    ],
)
def test_when_a_sentence_is_complete(prefix: str, complete: list[bool]) -> None:
    from citeguard.parse import parse_answer
    from citeguard.stream import _units

    assert [c for _k, _claim, c in _units(parse_answer(prefix))] == complete

"""The guarded proxy: an upstream call checked (repaired or regenerated through the upstream)
before the client sees it, or a stream verified while it streams.

Non-streaming: ``Guard.run`` drives the loop; its answer function is one upstream call (on a
retry, the request with the guard's feedback and the rejected URLs added as a user message).
The client gets the upstream's answer in the upstream's shape, plus a ``citeguard`` object.

Streaming: the upstream's events are read once. Their text goes through ``Guard.stream``; the
events themselves go to the client in the upstream's own format: in ``annotate`` mode each as it
arrives, in ``hold`` mode the text events only as far as the guard released the text (a text
event cut at the release point is re-sent as a copy carrying only the released part), so no
sentence whose citation failed is ever sent. Citation objects (annotations, ``citations_delta``)
are checked at the end with the whole answer (``guard.check`` on it finds every page already
fetched); in hold mode a stream whose citation objects come before their text (Anthropic) holds
that text until then. One whose citation objects come after their text (OpenAI annotations)
streams with ``late_citations``: a sentence that cites nothing inline is held until the stream
ends, and what the guard releases after the upstream's last event waits for the whole answer's
check; if that fails, the text sent stops at the first claim with an offending citation. Under
``on_fail="strip"`` a failed answer whose failing citations are in its text ends as it would not
streamed: stripped (``_strip_rest``), what was not sent of the stripped text sent after what was,
with the same verdict word and ending. The event that ends the stream carries the verdict. In
hold mode an attempt nothing of which was sent is regenerated when it fails, and kept back
while the upstream is asked once for fresher sources when it passes citing a source stale under
an uncertain regime (``guarded_stream``).
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from citeguard.checks.freshness_ask import FresherAsk, fresher_ask
from citeguard.errors import CitationRejected
from citeguard.exclusions import Failures, excluded_for, exclusion_run
from citeguard.feedback import Feedback, render_feedback
from citeguard.guard import Guard
from citeguard.integrations.gateway import block_message
from citeguard.loop import ON_FAIL
from citeguard.models import Attempt, GuardResult, Verdict
from citeguard.parse import AnswerLimits, parse_answer
from citeguard.policy import Policy
from citeguard.providers.dispatch import read_provider
from citeguard.serve.dialects import Dialect
from citeguard.serve.errors import ApiError
from citeguard.serve.upstream import SseEvent, Upstream, UpstreamError, UpstreamStream, sse
from citeguard.serve.verdicts import Outcome, ending_of, outcome_of, summary
from citeguard.stream import StreamHeld, StreamText, StreamVerdict, stream_answer
from citeguard.web.urls import normalize_all

__all__ = ["Record", "guarded_call", "guarded_stream", "open_stream"]


@dataclass
class Record:
    """What one request did, for its log line and the metrics."""

    outcome: str | None = None
    attempts: int = 0
    verdict: Verdict | None = None
    upstream_s: float = 0.0
    upstream_calls: int = 0
    mode: str | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _feedback_message(feedback: Feedback | str | None, exclude: frozenset[str]) -> str:
    text = feedback.message if isinstance(feedback, Feedback) else feedback
    text = text or "Your answer was rejected."
    if exclude and not all(u in text for u in exclude):
        text += "\nDo not cite these URLs again: " + ", ".join(sorted(exclude))
    return text


async def guarded_call(
    guard: Guard,
    upstream: Upstream,
    dialect: Dialect,
    body: dict[str, Any],
    incoming: Mapping[str, str],
    record: Record,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """(status, body, headers) of a guarded, non-streaming call."""
    calls: list[tuple[str, dict[str, Any]]] = []

    async def answer(
        question: str,
        *,
        exclude_urls: frozenset[str] = frozenset(),
        feedback: Feedback | None = None,
    ) -> dict[str, Any]:
        request = body
        if calls:
            request = dialect.with_feedback(body, _feedback_message(feedback, exclude_urls))
        t0 = time.perf_counter()
        try:
            data = await upstream.post_json(dialect.path, request, incoming)
        finally:
            record.upstream_s += time.perf_counter() - t0
            record.upstream_calls += 1
        read = read_provider(data)
        calls.append((read.text if read is not None else "", data))
        return data

    rejected = False
    try:
        result: GuardResult = await guard.run(answer, dialect.question(body))
    except CitationRejected as e:
        result, rejected = e.result, True
    outcome: Outcome = outcome_of(result)
    # a stripped answer's own verdict is its re-check, which no longer holds what failed: the
    # verdict shown (and counted) is the attempt's it was cut from
    cut = result.outcome == "stripped" and bool(result.removed_claims or result.removed_urls)
    checked = result.attempts[-1].verdict if cut and result.attempts else result.verdict
    record.outcome, record.attempts, record.verdict = outcome, len(calls), checked
    ending = ending_of(guard.policy, outcome, cut=cut)
    shown = summary(
        checked,
        outcome,
        attempts=len(calls),
        message=result.message,
        result=result,
        extra={"ending": ending},
    )
    headers = {"x-citeguard-verdict": outcome, "x-citeguard-attempts": str(len(calls))}
    if rejected:
        raise ApiError(
            422,
            "citation_rejected",
            result.message or "every answer failed the citation guard",
            type="citation_rejected",
            headers=headers,
            extra={"citeguard": shown},
        )
    drop = frozenset(result.removed_urls) | frozenset(r.before for r in result.repairs)
    chosen = next((d for text, d in reversed(calls) if text == result.answer), None)
    if chosen is None:  # repaired or stripped: the text changed
        chosen = dialect.rewrite(calls[-1][1], result.answer, drop)
    if ending == "content_filter":
        chosen = await _filtered(guard.policy, dialect, chosen, result, drop)
    out = dict(chosen)
    out["citeguard"] = shown
    return 200, out, headers


async def _filtered(
    policy: Policy,
    dialect: Dialect,
    response: dict[str, Any],
    result: GuardResult,
    drop: frozenset[str],
) -> dict[str, Any]:
    """The answer as the client gets it when it fails closed: its text up to the first claim
    with a failing citation (what ``strip`` could not remove: a provider's citation objects),
    no failing citation object, and marked the way the API marks what its own content filter
    cut (``Dialect.filtered``)."""
    text = result.answer
    if not result.passed:
        text = text[: await _first_failing(policy, response, result.verdict, text)].rstrip()
    drop = drop | frozenset(result.verdict.offending_urls)
    return dialect.filtered(dialect.rewrite(response, text, drop))


async def open_stream(
    upstream: Upstream,
    dialect: Dialect,
    body: dict[str, Any],
    incoming: Mapping[str, str],
    record: Record,
) -> UpstreamStream:
    t0 = time.perf_counter()
    try:
        return await upstream.open_stream(dialect.path, body, incoming)
    finally:
        record.upstream_s += time.perf_counter() - t0
        record.upstream_calls += 1


@dataclass
class _Frame:
    event: str | None
    data: Any
    raw: str
    kind: str  # text | cite | terminal | other
    text: str = ""
    pos: int = 0  # answer characters before this event's text
    key: Any = None


class _Relay:
    """Which upstream events may go to the client, and when (see the module docstring)."""

    def __init__(self, dialect: Dialect, mode: str) -> None:
        self.dialect = dialect
        self.mode = mode
        self.frames: list[_Frame] = []
        self.length = 0
        self.next = 0
        self.partial = 0  # of frames[next], characters already sent
        self.released = 0  # answer characters the guard released
        self.pause_at: int | None = None
        self.sent: dict[Any, str] = {}  # text sent per answer part
        self.sent_any = False  # whether any event went to the client
        self.edited = False  # text the upstream did not send was added (``append``)

    def add(self, ev: SseEvent) -> _Frame:
        raw = ev.data
        data: Any = raw if raw.strip() == "[DONE]" else ev.json()
        split = self.dialect.split_end(data)
        if split is not None:  # text and the answer's ending in one event: the ending held
            frame = self._add(ev.event, split[0], "")
            self._add(ev.event, split[1], "")
            return frame
        return self._add(ev.event, data, raw)

    def _add(self, event: str | None, data: Any, raw: str) -> _Frame:
        d = self.dialect
        if d.is_terminal(event, data, raw):
            frame = _Frame(event, data, raw, "terminal", pos=self.length)
        elif d.citation_urls(data):
            frame = _Frame(event, data, raw, "cite", pos=self.length)
            if self.mode == "hold" and d.cite_before_text and self.pause_at is None:
                self.pause_at = self.length
        else:
            text = d.event_text(data)
            kind = "text" if text else "other"
            key = d.text_key(data) if text and isinstance(data, Mapping) else None
            frame = _Frame(event, data, raw, kind, text=text, pos=self.length, key=key)
            self.length += len(text)
        self.frames.append(frame)
        return frame

    def _out(self, frame: _Frame, data: Any) -> bytes:
        if data is frame.data and frame.raw:
            return SseEvent(frame.event, frame.raw).encode()  # unchanged: as the upstream sent it
        if isinstance(data, str):
            return SseEvent(frame.event, data).encode()
        return sse(data, frame.event)

    def _send_text(self, frame: _Frame, start: int, end: int) -> bytes:
        part = frame.text[start - frame.pos : end - frame.pos]
        self.sent[frame.key] = self.sent.get(frame.key, "") + part
        if start == frame.pos and end == frame.pos + len(frame.text):
            return self._out(frame, frame.data)
        return self._out(frame, self.dialect.with_text(frame.data, part))

    def pump(self, *, final: bool = False) -> list[bytes]:
        """The events that may go now (annotate: all but the terminal; hold: as released)."""
        out: list[bytes] = []
        limit = self.released
        if self.pause_at is not None and not final:
            limit = min(limit, self.pause_at)
        if self.mode == "hold" and not final and not self.sent_any and limit <= 0:
            # nothing goes before the first verified text: until then a failing attempt can
            # still be replaced by a regenerated one, unseen
            return out
        while self.next < len(self.frames):
            f = self.frames[self.next]
            if f.kind == "terminal":
                break
            if self.mode == "annotate":
                out.append(self._out(f, f.data))
                if f.kind == "text":
                    self.sent[f.key] = self.sent.get(f.key, "") + f.text
            elif f.kind == "text":
                start = f.pos + self.partial
                end = f.pos + len(f.text)
                stop = min(end, limit)
                if stop > start:
                    out.append(self._send_text(f, start, stop))
                if stop < end and not final:
                    self.partial = stop - f.pos
                    break
            elif f.kind == "added":
                out.append(self._out(f, f.data))
                self.sent[f.key] = self.sent.get(f.key, "") + f.text
            elif f.kind == "cite":
                # a citation object goes with the text it cites
                before = self.dialect.cite_before_text
                if (before and limit <= f.pos) or (not before and limit < f.pos):
                    if not final:
                        break
                    self.next += 1
                    self.partial = 0
                    continue
                out.append(self._out(f, f.data))
            else:
                data = f.data
                if self._rewrites():
                    data = self.dialect.rewrite_done(f.event, data, self.sent)
                out.append(self._out(f, data))
            self.next += 1
            self.partial = 0
        self.sent_any = self.sent_any or bool(out)
        return out

    def _rewrites(self) -> bool:
        """Whether the events that repeat the answer's text say only what was sent."""
        return self.mode == "hold" and (self.released < self.length or self.edited)

    def sent_text(self) -> str | None:
        """The answer's text sent so far, when it is one part (None: several parts)."""
        keys = {f.key for f in self.frames if f.kind == "text"}
        return self.sent.get(next(iter(keys)), "") if len(keys) == 1 else None

    def append(self, text: str) -> None:
        """Send ``text`` after what was sent of the answer, instead of the rest of the
        upstream's text (a stripped answer's remainder: text the upstream did not send)."""
        self.released = len(self.sent_text() or "")  # nothing more of the upstream's text
        self.edited = True
        last = max((i for i, f in enumerate(self.frames) if f.kind == "text"), default=None)
        if last is None or not text:
            return
        like = self.frames[last]
        data = self.dialect.with_text(like.data, text)
        added = _Frame(like.event, data, "", "added", text=text, key=like.key)
        self.frames.insert(max(last + 1, self.next), added)

    def finish(self, verdict: Mapping[str, Any]) -> list[bytes]:
        out = self.pump(final=True)
        for f in self.frames[self.next :]:
            data = f.data
            if self._rewrites():
                data = self.dialect.rewrite_done(f.event, data, self.sent)
            for event, payload in self.dialect.verdict_events(f.event, data, f.raw, verdict):
                out.append(self._out(_Frame(event, payload, "", "terminal"), payload))
        self.next = len(self.frames)
        return out


_INLINE_PARSE_CHARS = 4_000  # as Guard._parse: longer answers are parsed off the event loop


async def _first_failing(
    policy: Policy, whole: Mapping[str, Any] | str, verdict: Verdict, text: str
) -> int:
    """Where, in the streamed ``text``, the first claim of the whole answer's failed ``verdict``
    that has a failing citation (an offending URL, or its own pair's failure) begins (a
    citation no claim holds: where it stands); 0 when
    the answer's text is not the streamed text; ``len(text)`` when nothing is placed."""
    parse = functools.partial(
        parse_answer,
        whole,
        allowed_schemes=policy.fetch.allowed_schemes,
        limits=AnswerLimits.of(policy),
    )
    # off the loop whatever its text's length: a response's annotations are not bounded by it
    # (8,000 over a short text take the parser ~0.3 s), and this runs only for a failed verdict
    parsed = await asyncio.get_running_loop().run_in_executor(None, parse)
    if parsed.text != text:
        return 0  # its offsets are not the stream's: nothing more is released
    bad = normalize_all(verdict.offending_urls)
    starts = {c.index: c.start for c in parsed.claims}
    cut = len(text)
    for report in verdict.claims:  # the per-claim view: a claim any of whose citations fails
        if any(ch.failure for ch in report.checks) or any(
            u in bad for u in normalize_all(ch.url for ch in report.checks)
        ):
            cut = min(cut, starts.get(report.index, 0))
    claimed = {i for c in parsed.claims for i in c.citation_indices}
    for i, cit in enumerate(parsed.citations):
        if i not in claimed and cit.normalized_url in bad:
            cut = min(cut, max(cit.start, 0))
    return cut


_BOUNDARY = re.compile(r"""[.!?:;)\]>"'”’»]\s+$|\n\s*$""")
_MAX_PENDING = 512


def _at_boundary(text: str) -> bool:
    """Whether ``text`` ends where a sentence or a bracketed URL may have ended."""
    return len(text) >= _MAX_PENDING or _BOUNDARY.search(text[-8:]) is not None


def _stream_error(dialect: Dialect, err: UpstreamError) -> bytes:
    return _error_event(dialect, err.code, str(err), "upstream_error")


def _error_event(
    dialect: Dialect, code: str, message: str, kind: str, extra: Mapping[str, Any] | None = None
) -> bytes:
    """An error event in the dialect's stream format: each SDK raises it (openai: ``APIError``;
    anthropic: ``APIStatusError``)."""
    more = dict(extra or {})
    if dialect.flavor == "anthropic":
        error = {"type": "api_error" if kind == "upstream_error" else kind, "message": message}
        return sse({"type": "error", "error": {**error, "code": code}, **more}, "error")
    body = {"error": {"type": kind, "code": code, "message": message, "param": None}, **more}
    if dialect.name == "responses":
        return sse({"type": "error", "code": code, "message": message, **body}, "error")
    return sse(body)


@dataclass
class _Asked:
    """A passing attempt kept back, unseen, while the upstream is asked once for fresher
    sources (issue 45): released, with its warning, if no newer passing answer comes back."""

    relay: _Relay
    verdict: Verdict
    ask: FresherAsk
    attempt: int


@dataclass
class _Ending:
    """How one streamed attempt ended: sent to the client (``done``), or to be regenerated
    (``asked``: for fresher sources); ``fallback``: the fresher attempt lost, the kept answer
    goes instead."""

    done: bool
    feedback: str = ""
    exclude: frozenset[str] = frozenset()
    asked: _Asked | None = None
    fallback: str = ""


async def guarded_stream(
    guard: Guard,
    dialect: Dialect,
    stream: UpstreamStream,
    *,
    question: str,
    mode: str,
    record: Record,
    meta: Mapping[str, Any],
    reopen: Callable[[str], Awaitable[UpstreamStream]] | None = None,
) -> AsyncIterator[bytes]:
    """The client's event stream (bytes), the upstream's events relayed as the guard allows.

    Hold mode regenerates: an attempt that fails before any of it went to the client (its first
    sentence held, or the whole answer's verdict failed while everything was still held) is
    dropped unseen, and ``reopen(feedback)`` opens the next attempt through the upstream, with
    the failing URLs excluded, within ``Policy.max_attempts`` and ``Policy.time_budget``. Once
    text has gone out, the attempt is the answer.

    It asks for fresher sources the same way (:mod:`citeguard.checks.freshness_ask`): an
    attempt that passes, nothing of it sent, citing a source stale under an uncertain faster
    regime (its sentence held back until the verdict) is kept back and the upstream asked once
    more, the stale URLs not excluded. That attempt is held whole: it goes if it passes with
    newer sources, else the kept answer does, passing, with ``freshness.fresher_asked``.
    ``Policy.freshness.ask_fresher=0`` turns it off; once text is out it is the warning only."""
    record.mode = mode
    policy = guard.policy
    regenerate = mode == "hold" and reopen is not None
    may_ask = regenerate and policy.freshness.ask_fresher > 0
    max_attempts = policy.max_attempts if regenerate else 1
    deadline = time.monotonic() + policy.time_budget if policy.time_budget else None
    exclude: frozenset[str] = frozenset()
    # why each URL was excluded, across this stream's attempts (citeguard.exclusions): each
    # attempt runs in its own steps of the guard loop, so the record is handed over, not inherited
    failures: Failures = {}
    attempt = 0
    asked: _Asked | None = None  # the passing answer kept back while asking for fresher
    while True:
        attempt += 1
        can_retry = (
            asked is None
            and attempt < max_attempts
            and (deadline is None or time.monotonic() < deadline)
        )
        ending = _Ending(done=True)
        async for chunk in _attempt(
            guard,
            dialect,
            stream,
            question=question,
            mode=mode,
            record=record,
            meta=meta,
            attempt=attempt,
            exclude=exclude,
            can_retry=can_retry,
            ending=ending,
            failures=failures,
            fresher=may_ask and can_retry,
            asked=asked,
        ):
            yield chunk
        if asked is not None and ending.fallback:
            yield _release_asked(guard, asked, attempt, ending.fallback, record, meta)
            return
        if ending.done or reopen is None:
            return
        exclude = exclude | ending.exclude
        asked = ending.asked
        try:
            stream = await reopen(_feedback_message(ending.feedback, exclude))
        except UpstreamError as e:
            record.error = e.code
            if asked is not None:  # no fresher answer: the kept one stands (2 calls made)
                yield _release_asked(guard, asked, attempt + 1, "failed", record, meta)
                return
            yield _stream_error(dialect, e)
            return


def _release_asked(
    guard: Guard,
    asked: _Asked,
    attempts: int,
    why: str,
    record: Record,
    meta: Mapping[str, Any],
) -> bytes:
    """The kept answer, whole and passing, with its stale sources as a warning: the fresher
    attempt ``why`` (did not pass, cited nothing newer, failed)."""
    asked.relay.released = asked.relay.length
    stale = ", ".join(f"{s.url} dated {s.date[:10]}" for s in asked.ask.stale)
    message = (
        f"passed on attempt {asked.attempt}; asked once for fresher sources (attempt "
        f"{attempts}), which {why}: the stale sources stand ({stale})"
    )
    return _close(
        guard, asked.relay, asked.ask.warned(asked.verdict), attempts, record, meta, message
    )


def _close(
    guard: Guard,
    relay: _Relay,
    verdict: Verdict,
    attempts: int,
    record: Record,
    meta: Mapping[str, Any],
    message: str,
    stripped: GuardResult | None = None,
) -> bytes:
    """What is left to send of the answer ``relay`` holds, as far as it was released, and the
    events that end the stream with ``verdict`` (``stripped``: what ``on_fail="strip"`` made
    of it, whose rest the relay sends, :func:`_strip_rest`; its word and ending, as for the
    same answer not streamed)."""
    dialect, mode = relay.dialect, relay.mode
    # the one vocabulary: a regenerated answer that passes is "passed", with its attempts
    outcome: Outcome = verdict.verdict_word if stripped is None else stripped.verdict_word
    cut = stripped is not None and bool(stripped.removed_claims or stripped.removed_urls)
    if stripped is not None and not cut:
        verdict = stripped.verdict  # as guarded_call: the verdict shown is of what was cut
    record.outcome, record.attempts, record.verdict = outcome, attempts, verdict
    held = relay.length - (relay.released if mode == "hold" else relay.length)
    ends = ending_of(guard.policy, outcome, cut=cut)
    if stripped is not None:
        message = stripped.message
    elif not verdict.passed:
        message = "the answer failed the citation guard"
    shown = summary(
        verdict,
        outcome,
        attempts=attempts,
        message=message,
        result=stripped,
        extra={"mode": mode, "held_chars": max(held, 0), "ending": ends},
    )
    if ends == "error":
        # on_fail="raise": the stream ends with an error event the SDKs raise
        text = block_message(verdict, head="every answer failed the citation guard")
        error = _error_event(
            dialect, "citation_rejected", text, "citation_rejected", {"citeguard": shown}
        )
        return b"".join([*relay.pump(final=True), error])
    filtered = {"_filtered": ends == "content_filter"}
    return b"".join(relay.finish({**shown, **{f"_{k}": v for k, v in meta.items()}, **filtered}))


async def _attempt(
    guard: Guard,
    dialect: Dialect,
    stream: UpstreamStream,
    *,
    question: str,
    mode: str,
    record: Record,
    meta: Mapping[str, Any],
    attempt: int,
    exclude: frozenset[str],
    can_retry: bool,
    ending: _Ending,
    failures: Failures,
    fresher: bool = False,
    asked: _Asked | None = None,
) -> AsyncIterator[bytes]:
    """One upstream stream relayed; ``ending`` says whether it was the answer. ``fresher``:
    this attempt may still ask for fresher sources (its stale-cited sentence is held until the
    verdict); ``asked``: this attempt is the fresher one, held whole until its verdict."""
    relay = _Relay(dialect, mode)
    # citation objects after their text: a sentence that cites nothing inline may still be cited
    late = mode == "hold" and dialect.cite_after_text
    upstream_done = False
    guard_released = 0  # what Guard.stream released (late: more than the relay may send yet)

    async def chunks() -> AsyncIterator[str]:
        nonlocal upstream_done
        pending = ""
        try:
            async for ev in stream:
                frame = relay.add(ev)
                pending += frame.text
                # hold mode releases whole sentences: hand the guard text where a URL or a
                # sentence can end rather than every token (each chunk re-parses the answer so
                # far; measured on a 10-citation answer: 11.3 ms of loop CPU by tokens, 10.3 by
                # sentences)
                last = dialect.is_last(ev.event, frame.data, ev.data)
                if pending and (last or mode == "annotate" or _at_boundary(pending)):
                    yield pending
                    pending = ""
                if last:
                    return
        finally:
            upstream_done = True

    final: StreamVerdict | None = None
    with exclusion_run(failures):  # the stream takes the record when it is made
        events = stream_answer(
            guard,
            chunks(),
            question=question,
            mode=mode,  # type: ignore[arg-type]
            late_citations=late,
            exclude_urls=exclude,
            fresher=fresher,
        )
    try:
        async for event in events:
            if isinstance(event, StreamText):
                guard_released = max(guard_released, event.end)
                # late: what the guard releases once every citation object is in (the verdict's
                # settling) waits for the check of the whole answer, citation objects included
                if not (late and upstream_done) and asked is None:
                    relay.released = guard_released
            elif isinstance(event, StreamHeld):
                if asked is not None:  # the fresher attempt failed: the kept answer goes
                    ending.fallback = "did not pass"
                    return
                if can_retry and not relay.sent_any:
                    # failed before anything went out: drop this attempt unseen, regenerate
                    ending.done = False
                    claim = " ".join(event.text.split())[:200]
                    ending.feedback = f"Your answer was rejected: “{claim}”: {event.reason}."
                    # a page that failed for this claim only stays citable (issue 43)
                    ending.exclude = excluded_for(event.urls, failures)
                    return
            elif isinstance(event, StreamVerdict):
                final = event
            out = relay.pump()
            if out:  # one write for the events that may go now
                yield b"".join(out)
    except UpstreamError as e:
        record.error = e.code
        if asked is not None:
            ending.fallback = "failed"
            return
        yield b"".join([*relay.pump(), _stream_error(dialect, e)])
        return
    finally:
        close = getattr(events, "aclose", None)  # a dropped attempt: its checks stop too
        if close is not None:
            await close()
        await stream.aclose()
    if final is None:  # pragma: no cover - guard.stream always ends with its verdict
        return
    verdict = final.verdict
    await guard.turns.turn()  # the answer assembled and its ending written: a turn with time
    whole = dialect.assemble([(f.event, f.data) for f in relay.frames])
    if whole is not None:
        # the citation objects: checked on the whole answer (its pages are already fetched)
        with exclusion_run(failures):
            verdict = await guard.check(whole, question=question, exclude_urls=exclude)
    passed = verdict.passed
    message = ""
    if asked is not None:
        if not asked.ask.newer(verdict):
            ending.fallback = "cited nothing newer" if passed else "did not pass"
            return
        message = (
            f"passed on attempt {asked.attempt}; fresher sources on attempt {attempt} "
            "replaced its stale ones"
        )
    elif passed and fresher and not relay.sent_any:
        ask = fresher_ask(verdict, guard.policy.freshness)
        if ask is not None:  # kept back, unseen, while the upstream is asked once more
            ending.done = False
            ending.feedback = ask.message(attempt)
            ending.asked = _Asked(relay, verdict, ask, attempt)
            return
    if not passed and can_retry and not relay.sent_any:
        ending.done = False
        ending.feedback = render_feedback(
            verdict, attempt=attempt, exclude_urls=exclude | verdict.offending_urls
        ).message
        ending.exclude = frozenset(verdict.offending_urls)
        return
    stripped = await _strip_rest(guard, relay, verdict, attempt, failures, whole is not None)
    if stripped is not None:
        yield _close(guard, relay, verdict, attempt, record, meta, "", stripped)
        return
    if mode == "hold":
        if passed:
            relay.released = relay.length
        elif relay.pause_at is not None:
            # the guard released text its citation objects then failed: keep it back
            relay.released = min(relay.released, relay.pause_at)
        elif late:
            # no further than the guard released, nor past the first claim the whole answer's
            # verdict failed; never less than was already sent
            allowed = guard_released
            if whole is not None:
                text = "".join(f.text for f in relay.frames)
                cut = await _first_failing(guard.policy, whole, verdict, text)
                allowed = min(allowed, cut)
            relay.released = max(relay.released, allowed)
    yield _close(guard, relay, verdict, attempt, record, meta, message)


async def _strip_rest(
    guard: Guard,
    relay: _Relay,
    verdict: Verdict,
    attempt: int,
    failures: Failures,
    cited: bool,
) -> GuardResult | None:
    """A failed answer part of which was sent (or, on the last attempt, none), as the same
    answer not streamed ends under ``on_fail="strip"`` (:class:`citeguard.loop.Strip`): its
    failing claims and sources cut, the reference list's other entries kept, the removal
    note added; if what is left still fails, up to its first failing claim (``_filtered``).
    What the relay sent is that text's beginning (it sent only verified sentences, in order),
    so the relay sends the rest of it (:meth:`_Relay.append`); None (the text stops where the
    guard held it, as before) when it passed, in ``annotate`` mode, under another ``on_fail``,
    for an answer with citation objects (``cited``: checked on the whole answer, as not
    streamed), in several parts, or when the stripped text does not begin with what was sent."""
    if relay.mode != "hold" or verdict.passed or cited or guard.policy.on_fail != "strip":
        return None
    sent = relay.sent_text()
    if sent is None:
        return None
    text = "".join(f.text for f in relay.frames)

    async def recheck(
        answer: object, q: str, searches: list[Any] | None, exclude: frozenset[str]
    ) -> Verdict:
        return await guard.check(answer, question=q, searches=searches, exclude_urls=exclude)

    why = f"attempt {attempt} failed once part of it was sent"
    with exclusion_run(failures):
        result = await ON_FAIL["strip"].finish(
            [Attempt(number=attempt, answer=text, verdict=verdict)], why, recheck
        )
    if result.outcome != "stripped":
        return None  # the failing citations are not in the text: nothing to strip
    answer = result.answer
    if not result.passed:
        cut = await _first_failing(guard.policy, answer, result.verdict, answer)
        answer = answer[:cut].rstrip()
    if not answer.startswith(sent):
        return None
    relay.append(answer[len(sent) :])
    return result

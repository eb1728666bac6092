"""The reject-and-regenerate loop, and what happens when it runs out.

Attempt → verdict → on failure, call the answer function again with the offending URLs
excluded and the findings as feedback, within ``max_attempts``, the time budget and the cost
budget. Before each new call, the Guard's ``repair`` hook (:mod:`citeguard.repair`,
``Policy.repair``) may mend the failing answer from pages the run already holds; a repaired
answer that passes is the result (outcome ``"repaired"``), with no call made. When no attempt
passes, the ``Policy.on_fail`` strategy decides what the user gets:

* ``return`` (:class:`ReturnBest`): the best attempt (fewest failing gating axes, then fewest
  offenders, then the latest), marked failed;
* ``raise`` (:class:`RaiseBest`): the same, and the Guard raises ``CitationRejected`` with it;
* ``strip`` (:class:`Strip`): the last answer without the failing citations and the claims
  that relied only on them, re-checked;
* ``report`` (:class:`Report`): one attempt, its findings reported, nothing regenerated.

Exceptions raised by the answer function propagate unchanged: citeguard never hides the
caller's own errors.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from citeguard.checks.freshness_ask import FresherAsk, fresher_ask
from citeguard.feedback import Feedback, render_feedback, strip_answer, strip_structured
from citeguard.models import Attempt, GuardResult, SearchRecord, Synthesis, Verdict
from citeguard.parse import parse_answer
from citeguard.policy import Policy
from citeguard.providers.dispatch import read_provider
from citeguard.repair import RepairFn
from citeguard.trace import Tracing
from citeguard.verdict import failing_claims

# an answer function returns text, a Synthesis, structured items, or a provider response (an
# OpenAI, Anthropic, Gemini or Perplexity SDK object or its dict: citeguard.providers)
AnswerFn = Callable[..., Awaitable[str | Synthesis | Any] | str | Synthesis | Any]
# re-run the gate on an answer: (answer, question, searches, exclude_urls) -> Verdict;
# searches None: the run's recorded searches
Recheck = Callable[
    [str | Sequence[Mapping[str, Any]] | object, str, list[SearchRecord] | None, frozenset[str]],
    Awaitable[Verdict],
]


class OnFail(Protocol):
    """What a guarded run returns when no attempt passed."""

    #: ``GuardResult`` raised as ``CitationRejected`` after the run is recorded
    raises: bool

    def max_attempts(self, policy: Policy) -> int:
        """How many attempts the loop may make under this strategy."""
        ...

    async def finish(self, attempts: list[Attempt], why: str, recheck: Recheck) -> GuardResult:
        """The result of a run whose attempts all failed (``why``: what stopped the loop)."""
        ...


class ReturnBest:
    raises = False

    def max_attempts(self, policy: Policy) -> int:
        return policy.max_attempts

    async def finish(self, attempts: list[Attempt], why: str, recheck: Recheck) -> GuardResult:
        best = min(
            attempts,
            key=lambda a: (
                sum(1 for ax in a.verdict.axes.values() if ax.gating and not ax.passed),
                len(a.verdict.offending_urls),
                -a.number,
            ),
        )
        return GuardResult(
            answer=best.answer,
            passed=False,
            verdict=best.verdict,
            attempts=attempts,
            outcome="failed",
            message=why,
            structured=best.structured,
            repairs=best.repairs,
        )


class RaiseBest(ReturnBest):
    raises = True


class Strip:
    """The last answer without its failing citations and the claims that relied only on them,
    re-checked. An answer with no claim left is not a pass, whatever its re-check says."""

    raises = False

    def max_attempts(self, policy: Policy) -> int:
        return policy.max_attempts

    async def finish(self, attempts: list[Attempt], why: str, recheck: Recheck) -> GuardResult:
        last = attempts[-1]
        offenders = frozenset(last.verdict.offending_urls)
        structured: list[dict[str, Any]] | None = None
        if last.structured is not None:
            structured, stripped = strip_structured(last.structured, offenders)
            verdict = await recheck(structured, "", None, frozenset())
            text = stripped.text
        else:
            parsed = parse_answer(last.answer)
            in_text = {c.url for c in parsed.citations} | {f.url for f in parsed.findings}
            in_text |= {c.normalized_url for c in parsed.citations}
            if not offenders <= in_text:
                # the failing citations are a provider response's citation objects, not part
                # of its text: nothing can be cut from the text, so the best attempt stands
                best = await ReturnBest().finish(attempts, why, recheck)
                return best.model_copy(
                    update={
                        "message": f"{why}; the failing citations are not in the answer's text "
                        "(a provider response), so nothing was stripped"
                    }
                )
            stripped = strip_answer(parsed, offenders, failing_claims(last.verdict))
            note = (
                f"[citeguard removed {len(stripped.claims)} claim(s) and "
                f"{len(stripped.urls)} source(s) that failed verification]"
            )
            text = f"{stripped.text}\n\n{note}" if stripped.text else note
            verdict = await recheck(text, "", None, frozenset())
        nothing_left = stripped.claims_left == 0
        removed = f"stripped {len(stripped.claims)} claim(s) and {len(stripped.urls)} source(s)"
        if nothing_left:
            removed += "; nothing is left of the answer"
        return GuardResult(
            answer=text,
            passed=verdict.passed and not nothing_left,
            verdict=verdict,
            attempts=attempts,
            outcome="stripped",
            message=f"{why}; {removed}"
            + ("; nothing is left of the answer" if nothing_left else ""),
            structured=structured,
            removed_claims=stripped.claims,
            removed_urls=stripped.urls,
            repairs=last.repairs,
        )


class Report:
    raises = False

    def max_attempts(self, policy: Policy) -> int:
        return 1

    async def finish(self, attempts: list[Attempt], why: str, recheck: Recheck) -> GuardResult:
        last = attempts[-1]
        return GuardResult(
            answer=last.answer,
            passed=False,
            verdict=last.verdict,
            structured=last.structured,
            attempts=attempts,
            outcome="reported",
            message="the answer failed the gate; findings are reported, nothing regenerated",
        )


#: ``Policy.on_fail`` → its strategy
ON_FAIL: Mapping[str, OnFail] = {
    "return": ReturnBest(),
    "raise": RaiseBest(),
    "strip": Strip(),
    "report": Report(),
}


async def regenerate(
    answer_fn: AnswerFn,
    question: str,
    kwargs: dict[str, Any],
    *,
    policy: Policy,
    recheck: Recheck,
    tracing: Tracing,
    searches: list[SearchRecord],
    replay: bool,
    repair: RepairFn | None = None,
) -> GuardResult:
    """Run the loop for one question; ``searches`` is the run's live list of recorded searches."""
    strategy = ON_FAIL[policy.on_fail]
    start = time.perf_counter()
    accepts_feedback = _accepts(answer_fn, "feedback")
    excluded: set[str] = set(kwargs.pop("exclude_urls", ()) or ())
    feedback: Feedback | None = None
    attempts: list[Attempt] = []
    total_cost = 0.0
    max_attempts = strategy.max_attempts(policy)
    stop_reason = f"no passing answer after {max_attempts} attempt(s)"
    # a passing answer with sources stale under an uncertain regime, and what was asked
    asked: tuple[GuardResult, FresherAsk] | None = None
    for number in range(1, max_attempts + 1):
        t0 = time.perf_counter()
        call_kwargs = dict(kwargs)
        call_kwargs["exclude_urls"] = frozenset(excluded)
        if accepts_feedback:
            call_kwargs["feedback"] = feedback
        searches_before = len(searches)
        with tracing.span(
            "citeguard.synthesize",
            kind="LLM",
            input=question,
            attributes={
                "citeguard.attempt": number,
                "citeguard.excluded_urls": sorted(excluded),
                "citeguard.feedback": feedback.message if feedback else None,
            },
        ) as llm_span:
            out = await _call(answer_fn, question, call_kwargs)
            synth, answer, structured = _answer_of(out)
            tracing.record_llm(llm_span, synth)
        verdict = await recheck(answer, question, searches[:], frozenset(excluded))
        attempts.append(
            Attempt(
                number=number,
                answer=synth.text,
                verdict=verdict,
                excluded_urls=frozenset(excluded),
                feedback=feedback.message if feedback else None,
                searches=searches[searches_before:],
                elapsed_ms=0.0 if replay else (time.perf_counter() - t0) * 1000.0,
                cost=synth.cost,
                structured=structured,
            )
        )
        total_cost += synth.cost or 0.0
        if asked is not None:
            # the one freshness-only attempt: its answer wins only if it passes with newer
            # sources; otherwise the earlier passing answer stands, with its stale sources
            return _fresher_or_first(asked, attempts[-1], structured)
        if verdict.passed:
            passed = GuardResult(
                answer=synth.text,
                passed=True,
                verdict=verdict,
                attempts=attempts,
                outcome="passed",
                message=f"passed on attempt {number}",
                structured=structured,
            )
            elapsed = time.perf_counter() - start
            ask = (
                fresher_ask(verdict, policy.freshness)
                # an answer function that cannot be told what to look for would repeat itself
                if policy.freshness.ask_fresher > 0
                and accepts_feedback
                and number < max_attempts
                and (policy.time_budget is None or elapsed < policy.time_budget)
                and (policy.cost_budget is None or total_cost < policy.cost_budget)
                and not _text_sent(answer_fn)
                else None
            )
            if ask is None:
                return passed
            asked = (passed, ask)
            # the stale sources are not excluded: they may be the best there is
            feedback = Feedback(
                attempt=number,
                exclude_urls=frozenset(excluded),
                message=ask.message(number),
                kind="fresher",
            )
            continue
        excluded |= set(verdict.offending_urls)
        feedback = render_feedback(verdict, attempt=number, exclude_urls=frozenset(excluded))
        if repair is not None:
            # mend what the run already holds the fix for; regenerate only for what remains
            left = (
                None
                if policy.time_budget is None
                else policy.time_budget - (time.perf_counter() - start)
            )
            fixed = await repair(attempts, question, searches[:], left)
            if fixed.attempt is not None:
                attempts.append(fixed.attempt)
                if fixed.passed:
                    return fixed.result(attempts)
            feedback = fixed.feedback(feedback, exclude_urls=frozenset(excluded))
        elapsed = time.perf_counter() - start
        if policy.time_budget is not None and elapsed >= policy.time_budget:
            stop_reason = f"time budget of {policy.time_budget:g}s spent after {number} attempt(s)"
            break
        if policy.cost_budget is not None and total_cost >= policy.cost_budget:
            stop_reason = f"cost budget of {policy.cost_budget:g} spent after {number} attempt(s)"
            break
    return await strategy.finish(attempts, stop_reason, recheck)


def _fresher_or_first(
    asked: tuple[GuardResult, FresherAsk], fresher: Attempt, structured: Any
) -> GuardResult:
    """The fresher attempt's answer when it passes with newer sources, else the first passing
    answer with a ``freshness.fresher_asked`` warning naming its stale sources."""
    first, ask = asked
    attempts = [*first.attempts, fresher]
    first_number = first.attempts[-1].number
    if ask.newer(fresher.verdict):
        return GuardResult(
            answer=fresher.answer,
            passed=True,
            verdict=fresher.verdict,
            attempts=attempts,
            outcome="passed",
            message=f"passed on attempt {first_number}; fresher sources on attempt "
            f"{fresher.number} replaced its stale ones",
            structured=structured,
        )
    why = "did not pass" if not fresher.verdict.passed else "cited nothing newer"
    verdict = ask.warned(first.verdict)
    # the passing attempt holds the verdict the result returns (to_case finds it by identity)
    checked = first.attempts[-1].model_copy(update={"verdict": verdict})
    attempts = [*first.attempts[:-1], checked, fresher]
    return first.model_copy(
        update={
            "verdict": verdict,
            "attempts": attempts,
            "message": f"passed on attempt {first_number}; asked once for fresher sources "
            f"(attempt {fresher.number}), which {why}: the stale sources stand ("
            + ", ".join(f"{s.url} dated {s.date[:10]}" for s in ask.stale)
            + ")",
        }
    )


class SendsText(Protocol):
    """An answer function that may already have shown its answer to the user (a stream in
    ``annotate`` mode, or a held stream that released text): once text is out, a passing
    answer is not regenerated for freshness, only warned about."""

    def text_sent(self) -> bool:
        """Whether the latest attempt's text has reached the user."""
        ...


def _text_sent(fn: object) -> bool:
    """Whether ``fn`` (or the object a bound method belongs to) says its text is out."""
    for owner in (fn, getattr(fn, "__self__", None)):
        sent = getattr(owner, "text_sent", None)
        if callable(sent):
            return bool(sent())
    return False


def _answer_of(out: object) -> tuple[Synthesis, object, Any]:
    """(its synthesis, the answer to check, the structured items or None) of what an answer
    function returned: a ``Synthesis``, text, a structured list of {claim, url, quote}
    items, which is checked as structure (never as its ``str()``), or a provider response,
    checked with its citation objects (its text and usage are the synthesis)."""
    if isinstance(out, Synthesis):
        return out, out.text, None
    provider = read_provider(out)
    if provider is not None:
        return provider.synthesis(), provider, None
    if isinstance(out, str):
        return Synthesis(text=out), out, None
    if isinstance(out, Sequence) and not isinstance(out, bytes | bytearray):
        items = [dict(i) if isinstance(i, Mapping) else i for i in out]
        text = parse_answer(items).text
        return Synthesis(text=text), items, items
    return Synthesis(text=str(out)), str(out), None


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return name in sig.parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()
    )


async def _call(fn: AnswerFn, question: str, kwargs: dict[str, Any]) -> str | Synthesis:
    if inspect.iscoroutinefunction(fn):
        return await fn(question, **kwargs)  # type: ignore[no-any-return]
    # a sync answer function (an LLM SDK call) blocks: run it in a thread (to_thread carries
    # the contextvars, so searches it makes are still recorded for this run)
    out = await asyncio.to_thread(fn, question, **kwargs)
    if inspect.isawaitable(out):
        return await out
    return out


__all__ = ["ON_FAIL", "AnswerFn", "OnFail", "Recheck", "SendsText", "regenerate"]

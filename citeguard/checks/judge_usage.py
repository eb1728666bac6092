"""What the LLM judges of one guarded run used, and the run's hooks for them.

A run (one ``Guard.check``, or one ``Guard.run`` with all its attempts) opens a :class:`JudgeRun`
with :func:`judge_run`. Every :class:`~citeguard.checks.judge.ChatJudge` request made inside it
(the entailment, freshness and query judges) finds it through a :class:`contextvars.ContextVar`,
not global state, so concurrent runs each see their own, and tasks a run spawns share it:

* its :class:`JudgeMeter` adds up requests, the tokens each reply's ``usage`` reports, and their
  cost at the judge's prices; once the cost reaches the run's budget (``Policy.cost_budget``)
  no further judge request is sent (the judge fails with ``"cost budget spent"``);
* its snapshot store and mode record each judge question's outcome, or replay it without the
  judge (the ``judge`` layer of :mod:`citeguard.snapshot`);
* its ``span`` factory (``Tracing.span``: passed in, so this package never imports the tracer)
  opens an LLM span around each request, carrying the model name and the token counts.

A run nested in another (``Guard.check`` inside ``Guard.run``) shares the outer run's meter and
budget and brings its own store, mode and span factory.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from citeguard.errors import JudgeError
from citeguard.models import JudgeUsage
from citeguard.snapshot import SnapshotMode, SnapshotStore

__all__ = [
    "BUDGET_SPENT",
    "LLM_COST_TOTAL",
    "LLM_MODEL_NAME",
    "LLM_TOKEN_COUNT_COMPLETION",
    "LLM_TOKEN_COUNT_PROMPT",
    "LLM_TOKEN_COUNT_TOTAL",
    "JudgeMeter",
    "JudgeRun",
    "SpanFactory",
    "current_judge_run",
    "judge_run",
]

# OpenInference attribute names of an LLM span (the same strings as citeguard.trace's; written
# out here so the checks never import the tracer; pinned by tests/checks/test_judge_entailer.py)
LLM_MODEL_NAME = "llm.model_name"
LLM_TOKEN_COUNT_PROMPT = "llm.token_count.prompt"
LLM_TOKEN_COUNT_COMPLETION = "llm.token_count.completion"
LLM_TOKEN_COUNT_TOTAL = "llm.token_count.total"
LLM_COST_TOTAL = "llm.cost.total"

#: The ``JudgeError.detail`` of a request that was not sent because the run's budget is spent.
BUDGET_SPENT = "cost budget spent"

# ``Tracing.span``: (name, *, kind, input=None, attributes=None) -> a context manager yielding
# the span (or None when tracing is off).
SpanFactory = Callable[..., AbstractContextManager[Any]]

Prices = tuple[float, float]  # per million prompt tokens, per million completion tokens


@dataclass(eq=False)
class JudgeMeter:
    """The judge requests of one run: counts, tokens, cost, and the budget they may spend.

    Tokens are summed per price pair and priced at the end (``math.fsum``), so the cost does not
    depend on the order the requests finished in: a replayed run reports exactly the recorded
    cost. Requests already in flight when the budget runs out still finish (and are counted).
    """

    budget: float | None = None
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    skipped: int = 0
    _tokens: dict[Prices, list[int]] = field(default_factory=dict, repr=False)

    @property
    def cost(self) -> float:
        """The cost so far, at each judge's prices."""
        return math.fsum(
            (p * inp + c * out) / 1_000_000 for (inp, out), (p, c) in self._tokens.items()
        )

    @property
    def spent(self) -> bool:
        """Whether the budget is set and the cost has reached it."""
        return self.budget is not None and self.cost >= self.budget

    def add(
        self, requests: int, prompt_tokens: int, completion_tokens: int, prices: Prices
    ) -> None:
        """Count ``requests`` sent and the tokens their replies reported."""
        self.requests += requests
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        tally = self._tokens.setdefault(prices, [0, 0])
        tally[0] += prompt_tokens
        tally[1] += completion_tokens

    def admit(self) -> None:
        """Before a request: raise :class:`JudgeError` (``detail`` :data:`BUDGET_SPENT`, not
        retryable) and count it as skipped when the budget is spent."""
        if self.spent:
            self.skipped += 1
            raise JudgeError(
                f"judge not asked: the run's cost budget of {self.budget:g} is spent",
                detail=BUDGET_SPENT,
            )

    def usage(self) -> JudgeUsage | None:
        """The run's usage so far; ``None`` when no judge was asked (nor refused)."""
        if not (self.requests or self.skipped):
            return None
        return JudgeUsage(
            requests=self.requests,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cost=self.cost,
            skipped=self.skipped,
        )


@dataclass(frozen=True, eq=False)
class JudgeRun:
    """The hooks the judges of the run in progress read: see the module docstring."""

    meter: JudgeMeter
    store: SnapshotStore | None = None
    mode: SnapshotMode = SnapshotMode.LIVE
    span: SpanFactory | None = None


_RUN: contextvars.ContextVar[JudgeRun | None] = contextvars.ContextVar(
    "citeguard_judge_run", default=None
)


def current_judge_run() -> JudgeRun | None:
    """The judge hooks of the run in progress (``None`` outside a run)."""
    return _RUN.get()


@contextmanager
def judge_run(
    *,
    budget: float | None = None,
    store: SnapshotStore | None = None,
    mode: SnapshotMode | str = SnapshotMode.LIVE,
    span: SpanFactory | None = None,
) -> Iterator[JudgeMeter]:
    """Meter (and snapshot, and trace) the judge requests made inside this block; yields the
    meter. Inside another run, the outer run's meter and budget are kept (``budget`` is then
    ignored)."""
    outer = _RUN.get()
    meter = outer.meter if outer is not None else JudgeMeter(budget=budget)
    mode = SnapshotMode(mode)
    token = _RUN.set(JudgeRun(meter, store if mode is not SnapshotMode.LIVE else None, mode, span))
    try:
        yield meter
    finally:
        _RUN.reset(token)

"""What one repair produced (:class:`RepairOutcome`), the loop's hook type, and the
repairs as records, findings and span attributes."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from citeguard.feedback import Feedback
from citeguard.models import (
    Attempt,
    Finding,
    GuardResult,
    Repair,
    SearchRecord,
    Severity,
)
from citeguard.repair.records import (
    _Decision,
    _short,
)

RepairMode = Literal["off", "citations", "full"]


# --------------------------------------------------------------------------------------------
# What came out
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RepairOutcome:
    """What one repair produced.

    ``attempt``: the repaired answer and its verdict (``None`` when no repair could address
    every failure, so none was verified). ``found``: the repairs made (those of ``attempt``)
    or, without an attempt, those that were possible. ``unfixed``: what repair could not fix,
    in words, for the feedback. ``skipped``: why repair did not run (the time budget, ...).
    """

    attempt: Attempt | None = None
    found: tuple[Repair, ...] = ()
    unfixed: tuple[str, ...] = ()
    skipped: str | None = None
    fetched: int = 0  # candidate pages fetched (cache hits included)

    @property
    def passed(self) -> bool:
        return self.attempt is not None and self.attempt.verdict.passed

    def summary(self) -> str:
        """``2 swap(s), 1 drop(s)``."""
        counts = Counter(r.kind for r in self.found)
        return ", ".join(f"{n} {k}(s)" for k, n in sorted(counts.items())) or "nothing"

    def result(self, attempts: list[Attempt]) -> GuardResult:
        """The guarded run's result when the repaired attempt passed."""
        assert self.attempt is not None
        a = self.attempt
        return GuardResult(
            answer=a.answer,
            passed=a.verdict.passed,
            verdict=a.verdict,
            attempts=attempts,
            outcome="repaired",
            message=f"attempt {a.number} repaired ({self.summary()}) without regenerating",
            structured=a.structured,
            repairs=list(a.repairs),
        )

    def feedback(self, base: Feedback | None, *, exclude_urls: frozenset[str]) -> Feedback | None:
        """The next attempt's feedback: ``base`` plus what repair found and what remains."""
        if base is None or (not self.found and not self.unfixed and self.attempt is None):
            return base
        lines: list[str] = []
        swaps = [r for r in self.found if r.kind == "swap"]
        for r in swaps[:8]:
            lines.append(f"  * supported by {r.after}: {_short(r.claim)!r}")
        if swaps:
            lines.insert(0, "citeguard found sources that support these claims; cite them:")
        findings = list(base.findings)
        if self.attempt is not None and not self.attempt.verdict.passed:
            v = self.attempt.verdict
            failed = [n for n, ax in v.axes.items() if ax.gating and not ax.passed]
            lines.append(f"The repaired answer still failed ({', '.join(failed)}):")
            errors = [
                f
                for ax in v.axes.values()
                if ax.gating
                for f in ax.findings
                if f.severity is Severity.ERROR
            ]
            lines.extend(f"  * {f.message}" for f in errors[:6])
            findings.extend(errors)
        if self.unfixed:
            lines.append("Still to fix (repair could not):")
            lines.extend(f"  * {u}" for u in self.unfixed[:8])
        return Feedback(
            attempt=base.attempt,
            exclude_urls=exclude_urls,
            findings=findings,
            message="\n".join([base.message, *lines]),
        )


# the loop's hook: (attempts so far, question, the run's searches, seconds left or None)
RepairFn = Callable[
    [Sequence[Attempt], str, list[SearchRecord], float | None], Awaitable[RepairOutcome]
]


def _as_repair(d: _Decision, attempt: int) -> Repair:
    f = d.failure
    claim = f.claim.text if f.claim is not None else ""
    index = f.claim.index if f.claim is not None else None
    why = f"{f.status.value}: {f.reason}"
    if d.kind == "swap":
        assert d.target is not None
        return Repair(
            kind="swap",
            attempt=attempt,
            claim_index=index,
            claim=claim,
            before=f.raw_url,
            after=d.target.raw,
            status=f.status,
            evidence_url=d.target.raw,
            passage=d.passage,
            reason=f"{why}; {d.target.raw} supports the claim",
        )
    if d.kind == "dedup":
        return Repair(
            kind="swap",
            attempt=attempt,
            claim_index=index,
            claim=claim,
            before=f.raw_url,
            after=d.evidence_url or "",
            status=f.status,
            evidence_url=d.evidence_url,
            reason=f"{why}; the claim's other citation supports it, so this one is removed",
        )
    if d.kind == "correct_quote":
        return Repair(
            kind="correct_quote",
            attempt=attempt,
            claim_index=index,
            claim=claim,
            before=f.quote or "",
            after=d.quote or "",
            status=f.status,
            evidence_url=d.evidence_url,
            passage=d.passage,
            reason=f"{why}; the page's own words support the claim",
        )
    if d.kind == "drop_url":
        return Repair(
            kind="drop",
            attempt=attempt,
            claim_index=None,
            claim="",
            before=f.raw_url,
            status=f.status,
            reason=f"{why}; listed but cited by no claim, so the entry is removed",
        )
    return Repair(
        kind="drop",
        attempt=attempt,
        claim_index=index,
        claim=claim,
        before=claim,
        status=f.status,
        reason=f"{why}; no page fetched in this run or returned by its searches supports it",
    )


def _as_finding(r: Repair) -> Finding:
    what = {
        "swap": f"re-cited {r.before} → {r.after}",
        "correct_quote": f"quote corrected to the page's words: {r.after!r}",
        "drop": f"removed {_short(r.before)!r}",
    }[r.kind]
    return Finding(
        code=f"repaired_{r.kind}",
        message=f"citeguard repaired attempt {r.attempt}: {what}",
        severity=Severity.INFO,
        axis="validity",
        url=(r.evidence_url or r.before) if r.kind != "drop" else None,
        claim_index=r.claim_index,
        details={"before": r.before, "after": r.after, "reason": r.reason},
    )


def _record_span(span: Any, out: RepairOutcome) -> None:
    if span is None:
        return
    counts = Counter(r.kind for r in out.found)
    attrs: dict[str, Any] = {
        "citeguard.repair.applied": out.attempt is not None,
        "citeguard.repair.passed": out.passed,
        "citeguard.repair.swaps": counts.get("swap", 0),
        "citeguard.repair.corrections": counts.get("correct_quote", 0),
        "citeguard.repair.drops": counts.get("drop", 0),
        "citeguard.repair.candidates_fetched": out.fetched,
        "citeguard.repair.unfixed": list(out.unfixed[:20]),
        "citeguard.repairs": json.dumps(
            [r.model_dump(mode="json") for r in out.found], ensure_ascii=False
        )[:8000],
    }
    if out.skipped:
        attrs["citeguard.repair.skipped"] = out.skipped
    try:
        for k, v in attrs.items():
            span.set_attribute(k, v)
    except Exception:  # tracing never fails a repair
        return


# --------------------------------------------------------------------------------------------
# Writing the repairs into the answer
# --------------------------------------------------------------------------------------------

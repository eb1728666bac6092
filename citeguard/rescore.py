"""``citeguard rescore``: run the gate again over logged cases, and say what moved.

Each case (a ``GuardResult.to_case()`` line, as ``Guard(log_to=path)`` writes it) is checked
again with a new :class:`~citeguard.policy.Policy`: ``Guard.check`` on its answer (the
structured items when it had them), its prompt, its searches and the URLs its checked attempt
excluded. A case that points to a snapshot (``"snapshot": {"store", "namespace", "version"}``)
is replayed from it, with the freshness clock set to the case's own timestamp, so only the
policy can move its verdict; a case without one is checked live only when asked
(``live=True``), else it is not rescored and says why. A line logged before cases held their
searches is checked with its queries alone (no search results: retrieval is not known), and
its diff says so.

The output is a JSONL of new cases (the input lines with their ``verdict`` replaced and a
``rescore`` key added; ``citeguard report`` reads it) and a :class:`RescoreSummary`: per case,
which axes moved (passed flag and score, before and after) and which citations changed status.

:func:`rescore_case` is the one core, engine-agnostic: the in-process runner
(:func:`iter_rescore`, asyncio with bounded concurrency, one Guard per snapshot) and the Ray
Data runner (:func:`rescore_on_ray`, ``map_batches`` with one :class:`GuardPool` per worker)
both call it, and both hand back outcomes in input order, so their output is the same.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import json
import logging
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from citeguard.errors import CiteguardError, InputError, MissingExtraError, PolicyError
from citeguard.exclusions import exclusion_run, logged_failures
from citeguard.guard import Guard
from citeguard.models import SearchRecord, SnapshotRef
from citeguard.policy import Policy
from citeguard.render import Column, table, trim
from citeguard.report import (
    MAX_LINE_BYTES,
    _isatty,
    _open_log,
    _Progress,
    _timestamp_of,
    _verdict_of,
    read_cases,
)
from citeguard.snapshot import AxisMove, SnapshotMode, SnapshotStore, SQLiteSnapshotStore
from citeguard.snapshot.base import AxisSummary, _axis_moves, _first_error
from citeguard.web.fetch import Resolver

__all__ = [
    "AxisTally",
    "CaseDiff",
    "CaseOutcome",
    "CitationMove",
    "GuardPool",
    "LoggedCase",
    "RescoreSummary",
    "iter_rescore",
    "render_summary",
    "rescore_case",
    "rescore_file",
    "rescore_on_ray",
    "summarize",
]

Engine = Literal["inprocess", "ray"]
# (line number, the parsed JSON or None, why the line cannot be read or None)
Item = tuple[int, Any, str | None]

MAX_SNAPSHOTS = 16  # distinct (store, version) pairs one rescore opens, at most
MAX_CHANGES = 10_000  # moved cases kept whole in the summary
_MAX_SKIPPED = 100
_PROMPT_CHARS = 200

# the freshness clock of the case being checked: its timestamp when replayed, now when live
_CASE_NOW: contextvars.ContextVar[datetime | None] = contextvars.ContextVar(
    "citeguard_rescore_now", default=None
)


def _case_clock() -> datetime:
    return _CASE_NOW.get() or datetime.now(UTC)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------------------------
# A logged case
# --------------------------------------------------------------------------------------------


class LoggedCase(BaseModel):
    """The parts of a logged case a re-check uses (other keys are kept in the output, unread)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    prompt: str = ""
    answer: str
    queries: list[str] = Field(default_factory=list)
    searches: list[SearchRecord] | None = None  # None: a line logged before cases held them
    structured: list[dict[str, Any]] | None = None
    excluded_urls: list[str] = Field(default_factory=list)
    snapshot: SnapshotRef | None = None


class _LoggedAxis(BaseModel):
    model_config = ConfigDict(extra="ignore")

    passed: bool = True
    score: float | None = None
    evaluated: bool = True


def _read(raw: Any) -> tuple[LoggedCase, Mapping[str, Any], datetime | None]:
    """The case, its logged verdict (a mapping) and its timestamp; InputError when unreadable."""
    if not isinstance(raw, Mapping):
        raise InputError("not an object")
    try:
        verdict = _verdict_of(raw)
        case = LoggedCase.model_validate(raw)
    except ValidationError as e:
        raise InputError(f"not a case ({_first_error(e)})") from None
    except (ValueError, TypeError, RecursionError) as e:  # the verdict: report's reader
        raise InputError(str(e) or type(e).__name__) from None
    return case, verdict, _timestamp_of(raw)


# --------------------------------------------------------------------------------------------
# What moved
# --------------------------------------------------------------------------------------------


class CitationMove(_Model):
    """A cited URL whose status changed (``None``: not cited on that side)."""

    url: str
    status_before: str | None = None
    status_after: str | None = None


class CaseDiff(_Model):
    """One re-checked case against its logged verdict."""

    line: int
    prompt: str = ""  # cut to 200 characters
    mode: Literal["replay", "live"]
    passed_before: bool | None = None  # None: the logged verdict does not say
    passed_after: bool
    axes: list[AxisMove] = Field(default_factory=list)  # the axes whose pass or score moved
    citations: list[CitationMove] = Field(default_factory=list)
    queries_only: bool = False  # logged without searches: checked with its queries alone

    @property
    def moved(self) -> bool:
        return bool(self.axes or self.citations or self.passed_before != self.passed_after)


class CaseOutcome(_Model):
    """One input line: the new case and its diff, or why it was not rescored."""

    line: int
    case: dict[str, Any] | None = None
    diff: CaseDiff | None = None
    skipped: str | None = None


def _axes_of(verdict: Mapping[str, Any]) -> dict[str, AxisSummary]:
    out: dict[str, AxisSummary] = {}
    axes = verdict.get("axes")
    for name, axis in axes.items() if isinstance(axes, Mapping) else ():
        if isinstance(axis, Mapping):
            try:
                a = _LoggedAxis.model_validate(axis)
            except ValidationError:
                continue
            out[str(name)] = AxisSummary(passed=a.passed, score=a.score, evaluated=a.evaluated)
    return out


def _statuses(verdict: Mapping[str, Any]) -> dict[str, str]:
    cited = verdict.get("citations")
    return {
        str(c.get("url")): str(c.get("status"))
        for c in (cited if isinstance(cited, list) else ())
        if isinstance(c, Mapping)
    }


def _diff(
    line: int,
    case: LoggedCase,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    mode: Literal["replay", "live"],
) -> CaseDiff:
    old, new = _statuses(before), _statuses(after)
    moves = [
        CitationMove(url=url, status_before=old.get(url), status_after=new.get(url))
        for url in sorted(old.keys() | new.keys())
        if old.get(url) != new.get(url)
    ]
    passed = before.get("passed")
    return CaseDiff(
        line=line,
        prompt=trim(" ".join(case.prompt[: _PROMPT_CHARS * 4].split()), _PROMPT_CHARS),
        mode=mode,
        passed_before=passed if isinstance(passed, bool) else None,
        passed_after=bool(after.get("passed")),
        axes=list(_axis_moves(_axes_of(before), _axes_of(after))),
        citations=moves,
        queries_only=case.searches is None,
    )


# --------------------------------------------------------------------------------------------
# The Guards
# --------------------------------------------------------------------------------------------

_Key = tuple[str, str | None, int | None]  # (store, namespace, version); ("", None, None): live


def _open_store(ref: SnapshotRef) -> SnapshotStore:
    if ref.store.startswith(("redis://", "rediss://", "unix://")):
        from citeguard import snapshot

        redis_store = snapshot.RedisSnapshotStore  # MissingExtraError without the extra
        return redis_store(ref.store, namespace=ref.namespace or "citeguard", version=ref.version)
    return SQLiteSnapshotStore(ref.store, create=False, version=ref.version)


class GuardPool:
    """The Guards of one rescore worker, all on ``policy``: one replaying each snapshot (store
    and version) the cases point to, at most :data:`MAX_SNAPSHOTS`, and one live Guard when
    ``live``. ``store``: a store location used instead of the one each case names (the store
    moved, or a Redis URL needs its password), and for cases that name none. ``resolver``: for
    the live Guard (tests). Close it with :meth:`aclose`."""

    def __init__(
        self,
        policy: Policy,
        *,
        live: bool = False,
        store: str | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        if not isinstance(policy, Policy):
            raise PolicyError("policy must be a citeguard.Policy")
        self.policy = policy
        self.live = live
        self.store = store
        self._resolver = resolver
        self._guards: dict[_Key, Guard] = {}
        self._stores: list[SnapshotStore] = []

    def pick(self, case: LoggedCase) -> tuple[Guard, Literal["replay", "live"]] | str:
        """The Guard that re-checks ``case`` and how, or why it cannot be rescored."""
        ref = case.snapshot
        if self.store is not None:
            ref = SnapshotRef(
                store=self.store,
                namespace=ref.namespace if ref else None,
                version=ref.version if ref else None,
            )
        if ref is None:
            if not self.live:
                return "no snapshot to replay (--live checks it live)"
            key: _Key = ("", None, None)
            if key not in self._guards:
                self._guards[key] = Guard(self.policy, resolver=self._resolver, now=_case_clock)
            return self._guards[key], "live"
        key = (ref.store, ref.namespace, ref.version)
        guard = self._guards.get(key)
        if guard is None:
            if sum(1 for k in self._guards if k[0]) >= MAX_SNAPSHOTS:
                return f"more than {MAX_SNAPSHOTS} snapshots in one rescore (split the log)"
            store = _open_store(ref)
            self._stores.append(store)
            guard = Guard(
                self.policy, cache=store, snapshot_mode=SnapshotMode.REPLAY, now=_case_clock
            )
            self._guards[key] = guard
        return guard, "replay"

    async def aclose(self) -> None:
        guards, self._guards = list(self._guards.values()), {}
        stores, self._stores = self._stores, []
        for guard in guards:
            await guard.aclose()
        for store in stores:
            await store.close()


async def rescore_case(raw: Any, line: int, guards: GuardPool) -> CaseOutcome:
    """Re-check one logged case (``raw``: the line's JSON) with ``guards``; never raises for a
    bad case or a snapshot that lacks what the new policy asks for: it comes back skipped."""
    try:
        case, logged, when = _read(raw)
        picked = guards.pick(case)
        if isinstance(picked, str):
            return CaseOutcome(line=line, skipped=picked)
        guard, mode = picked
        searches = case.searches
        if searches is None:
            searches = [SearchRecord(query=q) for q in case.queries if q.strip()]
        answer: Any = case.structured if case.structured is not None else case.answer
        token = _CASE_NOW.set(when if mode == "replay" else None)
        # a URL the logged attempt excluded after an earlier attempt's failure keeps it
        failures = logged_failures(logged.get("citations"), case.excluded_urls)
        try:
            with exclusion_run(failures):
                verdict = await guard.check(
                    answer,
                    question=case.prompt,
                    searches=searches,
                    exclude_urls=frozenset(case.excluded_urls),
                )
        finally:
            _CASE_NOW.reset(token)
    except CiteguardError as e:  # a bad line, a snapshot miss, a store that cannot be read
        return CaseOutcome(line=line, skipped=" ".join(str(e).split()) or type(e).__name__)
    after = verdict.model_dump(mode="json")
    new = {**raw, "verdict": after, "rescore": {"line": line, "mode": mode}}
    return CaseOutcome(line=line, case=new, diff=_diff(line, case, logged, after, mode))


# --------------------------------------------------------------------------------------------
# In process
# --------------------------------------------------------------------------------------------


async def iter_rescore(
    items: Iterable[Item], guards: GuardPool, *, concurrency: int = 8
) -> AsyncIterator[CaseOutcome]:
    """Each item's outcome, in input order, ``concurrency`` cases checked at once. ``items``
    is read on a worker thread (a file-backed iterator never blocks the event loop) and at
    most ``2 * concurrency`` outcomes wait their turn, so a log of any length runs in bounded
    memory."""
    if concurrency < 1:
        raise PolicyError("concurrency must be at least 1")
    source: Iterator[Item] = iter(items)
    gate = asyncio.Semaphore(concurrency)

    async def one(line: int, raw: Any, why: str | None) -> CaseOutcome:
        if why is not None:
            return CaseOutcome(line=line, skipped=why)
        async with gate:
            return await rescore_case(raw, line, guards)

    pending: deque[asyncio.Task[CaseOutcome]] = deque()
    try:
        done = False
        while not done or pending:
            while not done and len(pending) < 2 * concurrency:
                item = await asyncio.to_thread(next, source, None)
                if item is None:
                    done = True
                else:
                    pending.append(asyncio.ensure_future(one(*item)))
            if pending:
                yield await pending.popleft()
    finally:  # the consumer stopped early, or a case raised: the rest are cancelled
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


# --------------------------------------------------------------------------------------------
# On Ray Data
# --------------------------------------------------------------------------------------------


def _ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise MissingExtraError("ray", "ray") from None


class RayRescorer:
    """The Ray Data UDF: one :class:`GuardPool` and one event loop per worker, kept across
    batches; each batch's cases are checked ``concurrency`` at a time by :func:`rescore_case`."""

    def __init__(self, policy_json: str, live: bool, store: str | None, concurrency: int) -> None:
        self._loop = asyncio.new_event_loop()
        self._pool = GuardPool(Policy.model_validate_json(policy_json), live=live, store=store)
        self._concurrency = concurrency

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, list[Any]]:
        items = [
            (int(line), json.loads(str(case)), None)
            for line, case in zip(batch["line"], batch["case"], strict=True)
        ]

        async def run() -> list[CaseOutcome]:
            return [o async for o in iter_rescore(items, self._pool, concurrency=self._concurrency)]

        outcomes = self._loop.run_until_complete(run())
        return {
            "line": [o.line for o in outcomes],
            "outcome": [o.model_dump_json() for o in outcomes],
        }


def rescore_on_ray(
    items: Iterable[Item],
    policy: Policy,
    *,
    live: bool = False,
    store: str | None = None,
    workers: int = 2,
    concurrency: int = 8,
    batch_size: int = 16,
    quiet: bool = False,
    on_outcome: Callable[[CaseOutcome], None] | None = None,
) -> list[CaseOutcome]:
    """The outcomes of ``items`` computed on Ray Data (the ``ray`` extra), sorted by line, as
    :func:`iter_rescore` gives them. ``workers``: Ray actors, each with its own Guards. Uses the
    Ray the process is connected to, else ``ray.init()``, which joins the cluster
    ``RAY_ADDRESS`` names or starts a local one (shut down again at the end). ``quiet``: no Ray
    progress bars or worker logs (the CLI). ``on_outcome``: told of each outcome as it lands."""
    if workers < 1 or concurrency < 1 or batch_size < 1:
        raise PolicyError("workers, concurrency and batch_size must be at least 1")
    ray = _ray()
    outcomes: list[CaseOutcome] = []
    rows: list[dict[str, Any]] = []
    for line, raw, why in items:
        if why is not None:
            outcomes.append(CaseOutcome(line=line, skipped=why))
        else:
            rows.append({"line": line, "case": json.dumps(raw)})
    started = not ray.is_initialized()
    if started:
        quiet_init: dict[str, Any] = {}
        if quiet:
            quiet_init = {"log_to_driver": False, "logging_level": logging.ERROR}
        ray.init(include_dashboard=False, **quiet_init)
    try:
        if quiet:
            ctx = ray.data.DataContext.get_current()
            ctx.enable_progress_bars = False
            ctx.print_on_execution_start = False
            logging.getLogger("ray.data").setLevel(logging.ERROR)
        if rows:
            ds = ray.data.from_items(rows, override_num_blocks=min(len(rows), workers * 4))
            mapped = ds.map_batches(
                RayRescorer,
                fn_constructor_kwargs={
                    "policy_json": policy.model_dump_json(),
                    "live": live,
                    "store": store,
                    "concurrency": concurrency,
                },
                batch_size=batch_size,
                compute=ray.data.ActorPoolStrategy(size=workers),
                num_cpus=1,
            )
            for row in mapped.iter_rows():
                outcome = CaseOutcome.model_validate_json(row["outcome"])
                outcomes.append(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
    finally:
        if started:
            ray.shutdown()
    return sorted(outcomes, key=lambda o: o.line)


# --------------------------------------------------------------------------------------------
# The summary
# --------------------------------------------------------------------------------------------


class AxisTally(_Model):
    axis: str
    moved: int = 0  # cases whose pass or score of this axis moved
    newly_failed: int = 0
    newly_passed: int = 0


class RescoreSummary(_Model):
    """What a rescore did and what moved. ``changes``: every moved case (the first
    :data:`MAX_CHANGES`), in input order."""

    engine: Engine = "inprocess"
    workers: int = 1
    lines: int = 0  # lines read (blank lines aside)
    rescored: int = 0
    replayed: int = 0
    live: int = 0
    moved: int = 0  # rescored cases with any axis, citation or pass/fail moved
    newly_failed: int = 0  # passed before, fails now
    newly_passed: int = 0
    queries_only: int = 0  # logged without searches: checked with their queries alone
    axes: list[AxisTally] = Field(default_factory=list)
    changes: list[CaseDiff] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)  # "line 3: why"; the first 100
    skipped_count: int = 0
    seconds: float = 0.0
    cases_per_second: float | None = None


class _Tally:
    def __init__(self) -> None:
        self.n: dict[str, int] = dict.fromkeys(
            ("lines", "rescored", "replayed", "live", "moved", "newly_failed", "newly_passed"), 0
        )
        self.n["queries_only"] = self.n["skipped_count"] = 0
        self.axes: dict[str, dict[str, int]] = {}
        self.changes: list[CaseDiff] = []
        self.skipped: list[str] = []

    def add(self, o: CaseOutcome) -> None:
        self.n["lines"] += 1
        if o.diff is None:
            self.n["skipped_count"] += 1
            if len(self.skipped) < _MAX_SKIPPED:
                self.skipped.append(f"line {o.line}: {o.skipped}")
            return
        d = o.diff
        self.n["rescored"] += 1
        self.n["replayed" if d.mode == "replay" else "live"] += 1
        self.n["queries_only"] += d.queries_only
        if not d.moved:
            return
        self.n["moved"] += 1
        self.n["newly_failed"] += d.passed_before is True and not d.passed_after
        self.n["newly_passed"] += d.passed_before is False and d.passed_after
        for m in d.axes:
            t = self.axes.setdefault(m.axis, {"moved": 0, "newly_failed": 0, "newly_passed": 0})
            t["moved"] += 1
            t["newly_failed"] += m.passed_before is True and m.passed_after is False
            t["newly_passed"] += m.passed_before is False and m.passed_after is True
        if len(self.changes) < MAX_CHANGES:
            self.changes.append(d)

    def finish(self, engine: Engine, workers: int, seconds: float) -> RescoreSummary:
        return RescoreSummary(
            engine=engine,
            workers=workers,
            axes=[AxisTally(axis=a, **t) for a, t in sorted(self.axes.items())],
            changes=self.changes,
            skipped=self.skipped,
            seconds=round(seconds, 3),
            cases_per_second=round(self.n["rescored"] / seconds, 2) if seconds > 0 else None,
            **self.n,
        )


def summarize(
    outcomes: Iterable[CaseOutcome],
    *,
    engine: Engine = "inprocess",
    workers: int = 1,
    seconds: float = 0.0,
) -> RescoreSummary:
    """The summary of a rescore's outcomes."""
    tally = _Tally()
    for o in outcomes:
        tally.add(o)
    return tally.finish(engine, workers, seconds)


_AXIS_COLUMNS = (
    Column("axis", width=10),
    Column("moved", width=6, align="right"),
    Column("pass→fail", width=9, align="right"),
    Column("fail→pass", width=9, align="right"),
)


def _score(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def render_summary(s: RescoreSummary, *, shown: int = 10) -> str:
    """A short plain-text view: counts, an axis table, the first moved cases."""
    rate = f", {s.cases_per_second:g} cases/s" if s.cases_per_second else ""
    lines = [
        f"rescored {s.rescored} of {s.lines} cases ({s.replayed} replayed, {s.live} live) "
        f"in {s.seconds:.1f} s{rate}; engine {s.engine}"
        + (f", {s.workers} workers" if s.engine == "ray" else ""),
        f"verdicts moved: {s.moved} (pass→fail {s.newly_failed}, fail→pass {s.newly_passed})",
    ]
    if s.axes:
        rows = [[a.axis, str(a.moved), str(a.newly_failed), str(a.newly_passed)] for a in s.axes]
        lines += ["", table(_AXIS_COLUMNS, rows, sep=" ")]
    if s.changes:
        lines += ["", f"cases that moved (first {min(shown, len(s.changes))}):"]
        for d in s.changes[:shown]:
            axes = ", ".join(
                f"{m.axis} {_pass(m.passed_before)}→{_pass(m.passed_after)} "
                f"({_score(m.score_before)}→{_score(m.score_after)})"
                for m in d.axes
            )
            cited = f"; {len(d.citations)} citation(s) changed status" if d.citations else ""
            lines.append(f"  - line {d.line}: {axes or 'no axis'}{cited}")
            if d.prompt:
                lines.append(f"      {trim(d.prompt, 90)}")
    if s.queries_only:
        lines += [
            "",
            f"note: {s.queries_only} case(s) were logged without searches: checked with their "
            "queries alone (no results, so retrieval is not known)",
        ]
    if s.skipped_count:
        lines += ["", f"not rescored: {s.skipped_count}"]
        lines += [f"  - {x}" for x in s.skipped[:5]]
        if s.skipped_count > 5:
            lines.append(f"  - ... and {s.skipped_count - 5} more")
    return "\n".join(lines) + "\n"


def _pass(p: bool | None) -> str:
    return "?" if p is None else "pass" if p else "fail"


# --------------------------------------------------------------------------------------------
# A log on disk
# --------------------------------------------------------------------------------------------


class _RescoreProgress(_Progress):
    """report's meter (terminal only, after a moment, erased at the end), counting cases."""

    def _text(self, done: int, cases: int) -> str:
        return f"citeguard rescore: {done:,} of {self._total:,} lines, {cases:,} rescored"


def _items(f: Any, max_line_bytes: int) -> Iterator[Item]:
    for number, case, why, _done in read_cases(f, max_line_bytes=max_line_bytes):
        yield number, case, why


def _count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def rescore_file(
    path: str | os.PathLike[str],
    policy: Policy,
    *,
    out: str | os.PathLike[str],
    diff: str | os.PathLike[str] | None = None,
    engine: Engine = "inprocess",
    workers: int = 2,
    concurrency: int = 8,
    live: bool = False,
    store: str | None = None,
    resolver: Resolver | None = None,
    progress: TextIO | None = None,
    quiet: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> RescoreSummary:
    """Rescore a JSONL log: the new cases to ``out`` (JSONL, in input order), the summary to
    ``diff`` (JSON) when given, and the summary returned. Bad lines are skipped and counted;
    a file that is no log, or an ``out``/``diff`` that is the input, is an
    :class:`~citeguard.errors.InputError`. ``out`` is written to a temporary file beside it and
    moved into place at the end. ``progress``: a stream (stderr) for a progress line, written
    only on a terminal; ``quiet``: no Ray progress bars or worker logs. Call it outside an
    event loop (it runs its own)."""
    src, dst = Path(path), Path(out)
    targets = [dst] + ([Path(diff)] if diff is not None else [])
    for t in targets:
        if _same_file(src, t) or t == src:
            raise InputError(f"{t} is the input log; write the rescored cases elsewhere")
        if t.is_dir():
            raise InputError(f"{t} is a directory")
    if diff is not None and Path(diff) == dst:
        raise InputError(f"--out and --diff are the same file ({dst})")
    tmp = dst.with_name(dst.name + ".part")
    tally = _Tally()
    t0 = time.perf_counter()
    with _open_log(src) as f:
        total = _count_lines(src) if progress is not None and _isatty(progress) else 0
        meter = _RescoreProgress(progress, total, time.monotonic)
        try:
            w = tmp.open("w", encoding="ascii")
        except OSError as e:
            raise InputError(f"cannot write {dst}: {e.strerror or e}") from None

        def take(o: CaseOutcome) -> None:
            tally.add(o)
            if o.case is not None:
                w.write(json.dumps(o.case, default=str) + "\n")
            meter.update(tally.n["lines"], tally.n["rescored"])

        items = _items(f, max_line_bytes)
        try:
            with w:
                if engine == "ray":
                    for o in rescore_on_ray(
                        items,
                        policy,
                        live=live,
                        store=store,
                        workers=workers,
                        concurrency=concurrency,
                        quiet=quiet,
                    ):
                        take(o)
                else:
                    guards = GuardPool(policy, live=live, store=store, resolver=resolver)
                    asyncio.run(_inprocess(items, guards, take, concurrency=concurrency))
            tmp.replace(dst)
        except OSError as e:
            raise InputError(f"cannot read {src} or write {dst}: {e.strerror or e}") from None
        finally:
            meter.close()
            tmp.unlink(missing_ok=True)  # after a failure: no half-written output left
    summary = tally.finish(engine, workers if engine == "ray" else 1, time.perf_counter() - t0)
    if diff is not None:
        try:
            Path(diff).write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
        except OSError as e:
            raise InputError(f"cannot write {diff}: {e.strerror or e}") from None
    return summary


async def _inprocess(
    items: Iterable[Item],
    guards: GuardPool,
    take: Callable[[CaseOutcome], None],
    *,
    concurrency: int,
) -> None:
    try:
        batch: list[CaseOutcome] = []
        async for o in iter_rescore(items, guards, concurrency=concurrency):
            batch.append(o)
            if len(batch) >= 64:  # written on a thread, 64 lines at a time
                await asyncio.to_thread(_take_all, take, batch)
                batch = []
        await asyncio.to_thread(_take_all, take, batch)
    finally:
        await guards.aclose()


def _take_all(take: Callable[[CaseOutcome], None], outcomes: Sequence[CaseOutcome]) -> None:
    for o in outcomes:
        take(o)

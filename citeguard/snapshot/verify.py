"""Verification: every entry of every version and every body checked at once
(:func:`audit`, :class:`VerifyReport`, :class:`SnapshotDamaged`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from citeguard.errors import SnapshotCorrupt
from citeguard.snapshot.entries import (
    DamagedEntry,
    EntryRef,
    RawEntry,
    SnapshotEntryCorrupt,
    check_shape,
    open_entry,
)


class VerifyReport(int):
    """What :meth:`SnapshotStore.verify` found.

    As an ``int`` it is what ``verify`` has always returned, the number of bodies checked (so
    ``report == 3`` compares that number only); the attributes say the rest:

    * ``entries``: the stored entries checked (every layer, every version);
    * ``unchecked``: entries written before checksums existed (:data:`UNCHECKED`): readable and
      valid, but not provably unchanged (:meth:`SnapshotStore.seal` gives them checksums);
    * ``damaged``: every damaged entry (and every damaged body no readable entry refers to);
    * ``problems``: findings about the store as a whole (the file's own integrity check,
      entries under versions the store does not list, index gaps).
    """

    bodies: int
    entries: int
    unchecked: tuple[EntryRef, ...]
    damaged: tuple[DamagedEntry, ...]
    problems: tuple[str, ...]

    def __new__(
        cls,
        *,
        bodies: int,
        entries: int = 0,
        unchecked: Iterable[EntryRef] = (),
        damaged: Iterable[DamagedEntry] = (),
        problems: Iterable[str] = (),
    ) -> VerifyReport:
        self = super().__new__(cls, bodies)
        self.bodies = bodies
        self.entries = entries
        self.unchecked = tuple(unchecked)
        self.damaged = tuple(damaged)
        self.problems = tuple(problems)
        return self

    @property
    def ok(self) -> bool:
        """Nothing damaged and no store-level problem (unchecked entries are not damage)."""
        return not self.damaged and not self.problems

    @property
    def checked(self) -> int:
        """Entries whose checksum matched."""
        damaged = sum(1 for d in self.damaged if d.layer != "body")
        return self.entries - len(self.unchecked) - damaged

    def summary(self) -> str:
        return (
            f"{self.entries} entries ({self.checked} checked, {len(self.unchecked)} unchecked, "
            f"{len(self.damaged)} damaged), {self.bodies} bodies, {len(self.problems)} problem(s)"
        )

    def __repr__(self) -> str:
        return f"VerifyReport({self.summary()})"

    def __str__(self) -> str:
        return str(int(self))


class SnapshotDamaged(SnapshotCorrupt):
    """:meth:`SnapshotStore.verify` found damage; ``report`` holds everything it found and
    ``damaged`` every damaged entry (the message lists them all)."""

    def __init__(self, where: str, report: VerifyReport) -> None:
        lines = [
            f"{where} is damaged: {len(report.damaged)} damaged entr"
            f"{'y' if len(report.damaged) == 1 else 'ies'}, {len(report.problems)} problem(s)"
        ]
        for d in report.damaged:
            at = "" if d.version is None else f" (version {d.version})"
            lines.append(f"  {d.layer} {d.key}{at}: {d.problem}")
        lines += [f"  {p}" for p in report.problems]
        lines.append(
            "Restore the store from version control or a backup, or re-record the damaged cases."
        )
        super().__init__("\n".join(lines))
        self.report = report
        self.damaged = report.damaged


def audit(
    where: str,
    rows: Iterable[RawEntry],
    body_problems: Mapping[str, str | None],
    *,
    versions: Iterable[int] | None = None,
    problems: Iterable[str] = (),
    damaged: Iterable[DamagedEntry] = (),
) -> VerifyReport:
    """The shared part of ``verify``: check every stored entry and collect all the damage.

    ``rows``: every stored entry (all layers, all versions); ``body_problems``: every stored
    body's hash → what is wrong with it (None: intact); ``versions``: the versions the store
    lists (an entry under another one is a problem); ``problems``: the backend's own findings;
    ``damaged``: entries the backend found damaged before they could become rows.
    """
    known = None if versions is None else set(versions)
    damaged = list(damaged)
    count = len(damaged)
    unchecked: list[EntryRef] = []
    referenced: set[str] = set()
    strays: set[int] = set()
    for raw in rows:
        count += 1
        try:
            hit = open_entry(where, raw)
            check_shape(hit)
            if hit.body_hash is not None:
                referenced.add(hit.body_hash)
                missing = f"body {hit.body_hash[:16]} is missing"
                problem = body_problems.get(hit.body_hash, missing)
                if problem is not None:
                    raise SnapshotEntryCorrupt(*hit.ref, problem)
        except SnapshotEntryCorrupt as e:
            damaged.append(e.entry)
            continue
        if known is not None and hit.version not in known:
            strays.add(hit.version)
        if not hit.checked:
            unchecked.append(EntryRef(layer=hit.layer, key=hit.key, version=hit.version))
    for h, problem in sorted(body_problems.items()):
        if problem is not None and h not in referenced:
            damaged.append(DamagedEntry(layer="body", key=h, version=None, problem=problem))
    found = list(problems)
    if strays:
        found.append(f"entries under version(s) {sorted(strays)}, which the store does not list")
    damaged.sort(key=lambda d: (d.layer, d.key, -1 if d.version is None else d.version))
    unchecked.sort(key=lambda d: (d.layer, d.key, -1 if d.version is None else d.version))
    return VerifyReport(
        bodies=len(body_problems),
        entries=count,
        unchecked=unchecked,
        damaged=damaged,
        problems=found,
    )

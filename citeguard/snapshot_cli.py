"""``citeguard snapshot list | show [V] | diff V1 V2 | prune --keep N | verify``.

A version is a number, ``latest``, or ``latest~N`` (the N-th version before the newest, as in
git), so a CI job can run ``citeguard snapshot diff latest~1 latest`` after a re-snapshot.
The store is ``--store`` (an SQLite path or a ``redis://`` URL), else ``$CITEGUARD_SNAPSHOT_STORE``,
else ``tests/snapshots/citeguard.sqlite``. Exit status: 0 ok, 1 ``diff --exit-code`` found
changes, 2 usage error or unreadable store.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from citeguard.errors import CiteguardError, SnapshotError
from citeguard.models import AXES
from citeguard.render import Column, table
from citeguard.snapshot import (
    AxisSummary,
    SnapshotDiff,
    SnapshotStore,
    VersionDetail,
    VersionInfo,
    open_store,
)

DEFAULT_STORE = "tests/snapshots/citeguard.sqlite"
STORE_ENV = "CITEGUARD_SNAPSHOT_STORE"

EXIT_OK, EXIT_CHANGED, EXIT_USAGE = 0, 1, 2

_VERSION_SPEC = re.compile(r"^(?:(\d+)|latest(?:~(\d+))?)$")


class _UsageError(Exception):
    def __init__(self, status: int, message: str = "") -> None:
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """argparse that writes to ``out`` and raises instead of exiting the process."""

    out: TextIO  # set per call on a subclass made by _parser (subparsers share the class)

    def _print_message(self, message: str, file: Any = None) -> None:
        if message:
            self.out.write(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            self.out.write(message)
        raise _UsageError(status)

    def error(self, message: str) -> NoReturn:
        self.print_usage()
        raise _UsageError(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _parser(out: TextIO) -> _Parser:
    # argparse builds subparsers from the parser's class, so the output stream goes on a class
    # made for this call (no shared state between calls)
    parser_class: type[_Parser] = type("_OutParser", (_Parser,), {"out": out})
    # the common options work before or after the command (SUPPRESS: a later one wins)
    common = parser_class(add_help=False)
    common.add_argument(
        "--store",
        default=argparse.SUPPRESS,
        help=f"SQLite path or redis:// URL (default: ${STORE_ENV} or {DEFAULT_STORE})",
    )
    common.add_argument("--namespace", default=argparse.SUPPRESS, help="Redis key namespace")
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON, not tables"
    )
    p = parser_class(
        prog="citeguard snapshot",
        description="List, show, diff and prune snapshot versions and their baselines.",
        parents=[common],
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", parents=[common], help="every version with its counts")
    s = sub.add_parser(
        "show", parents=[common], help="one version: what it replays and its baselines"
    )
    s.add_argument("version", nargs="?", default="latest")
    d = sub.add_parser("diff", parents=[common], help="pages that changed and verdicts that moved")
    d.add_argument("v1")
    d.add_argument("v2")
    d.add_argument("--exit-code", action="store_true", help="exit 1 when anything differs")
    pr = sub.add_parser(
        "prune", parents=[common], help="drop the oldest versions and orphaned bodies"
    )
    pr.add_argument("--keep", type=int, required=True, help="how many newest versions to keep")
    sub.add_parser(
        "verify", parents=[common], help="check every body against its hash, and the file"
    )
    return p


def snapshot_main(argv: Sequence[str], *, out: TextIO, err: TextIO | None = None) -> int:
    """Run ``citeguard snapshot ARGV``, writing tables (or JSON) to ``out``."""
    err = err if err is not None else sys.stderr
    try:
        args = _parser(out).parse_args(list(argv))
    except _UsageError as e:
        if str(e):
            err.write(str(e))
        return e.status
    named = "--store" if getattr(args, "store", None) else None
    if named is None and os.environ.get(STORE_ENV):
        named = f"${STORE_ENV}"
    location = getattr(args, "store", None) or os.environ.get(STORE_ENV) or DEFAULT_STORE
    missing = _missing_store(location, named)
    if missing:
        err.write(missing)
        return EXIT_USAGE
    args.namespace = getattr(args, "namespace", "citeguard")
    args.json = getattr(args, "json", False)
    try:
        return asyncio.run(_run(args, location, out))
    except _UsageError as e:
        err.write(str(e))
        return e.status
    except CiteguardError as e:
        err.write(f"citeguard snapshot: error: {e}\n")
        return EXIT_USAGE


def _missing_store(location: str, named: str | None) -> str:
    """What to say when an SQLite store is not there: what a store is, where it was looked
    for (and why there), how to name another; empty when it is there (or is Redis)."""
    if location.startswith(("redis://", "rediss://", "unix://")) or os.path.exists(location):
        return ""
    why = (
        f"named by {named}"
        if named
        else f"the default: neither --store nor ${STORE_ENV} was given, and the default is "
        "relative to the current directory"
    )
    return (
        f"citeguard snapshot: error: no snapshot store at {location} "
        f"(looked for at {os.path.abspath(location)}; {why}).\n"
        "A snapshot store is the SQLite file (or Redis database) where a guard records, in "
        "versions, the pages, searches and judge replies of its runs so that they can be "
        'replayed offline: written by Guard(cache=..., snapshot_mode="record"), '
        "`citeguard serve --store` or pytest's --citeguard-record (docs/ci-snapshots.md).\n"
        f"Name another with --store PATH (or a redis:// URL), or the environment variable "
        f"{STORE_ENV}.\n"
    )


async def _run(args: argparse.Namespace, location: str, out: TextIO) -> int:
    store = open_store(location, namespace=args.namespace, create=False)
    try:
        return await _dispatch(store, args, out)
    finally:
        await store.close()


async def _dispatch(store: SnapshotStore, args: argparse.Namespace, out: TextIO) -> int:
    if args.cmd == "verify":  # first: a damaged store lists its damage, whatever else fails
        n = await store.verify()
        versions = await store.list_versions()
        out.write(f"ok: {len(versions)} version(s), {n} bodies verified\n")
        return EXIT_OK
    versions = await store.list_versions()
    if args.cmd == "list":
        if args.json:
            out.write("[" + ",".join(v.model_dump_json() for v in versions) + "]\n")
        else:
            out.write(render_versions(versions))
        return EXIT_OK
    if args.cmd == "show":
        detail = await store.show_version(resolve_version(args.version, versions))
        out.write(detail.model_dump_json(indent=2) + "\n" if args.json else render_detail(detail))
        return EXIT_OK
    if args.cmd == "diff":
        diff = await store.diff(
            resolve_version(args.v1, versions), resolve_version(args.v2, versions)
        )
        out.write(diff.model_dump_json(indent=2) + "\n" if args.json else render_diff(diff))
        return EXIT_CHANGED if args.exit_code and not diff.is_empty else EXIT_OK
    if args.cmd == "prune":
        if args.keep < 1:
            raise _UsageError(EXIT_USAGE, "citeguard snapshot: error: --keep must be >= 1\n")
        dropped = await store.prune(args.keep)
        out.write(f"dropped {dropped} version(s); kept {min(len(versions), args.keep)}\n")
        return EXIT_OK
    raise _UsageError(EXIT_USAGE, f"unknown command {args.cmd!r}\n")  # pragma: no cover


def resolve_version(spec: str, versions: Sequence[VersionInfo]) -> int:
    """``7`` → 7; ``latest`` → the newest; ``latest~N`` → N versions before the newest."""
    m = _VERSION_SPEC.match(spec.strip())
    if m is None:
        raise _UsageError(
            EXIT_USAGE,
            f"citeguard snapshot: error: bad version {spec!r} (a number, latest or latest~N)\n",
        )
    if not versions:
        raise SnapshotError("the snapshot store has no versions yet")
    if m.group(1) is not None:
        return int(m.group(1))
    back = int(m.group(2) or 0)
    ids = [v.version for v in versions]
    if back >= len(ids):
        raise SnapshotError(f"{spec}: the store has only {len(ids)} version(s)")
    return ids[-1 - back]


# --------------------------------------------------------------------------------------------
# Rendering: plain aligned tables
# --------------------------------------------------------------------------------------------


def _table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int] | None = None
) -> str:
    """An aligned table: every column fits its widest cell; ``right`` columns align right."""
    right = right or set()
    columns = [Column(h, align="right" if i in right else "left") for i, h in enumerate(headers)]
    return table(columns, rows) + "\n"


def _opt(x: object) -> str:
    return "–" if x is None else str(x)


def _short(h: str | None) -> str:
    return "–" if h is None else h[:12]


def _pf(passed: bool | None) -> str:
    return "–" if passed is None else ("pass" if passed else "FAIL")


def _score(s: float | None) -> str:
    return "–" if s is None else f"{s:.2f}"


def _axis(a: AxisSummary | None) -> str:
    if a is None:
        return "–"
    if not a.evaluated:
        return "n/a"
    return f"{_pf(a.passed)} {_score(a.score)}"


def render_versions(versions: Sequence[VersionInfo]) -> str:
    """The ``list`` table."""
    if not versions:
        return "no versions yet (record with: pytest --citeguard-record=new)\n"
    latest = versions[-1].version
    rows = [
        [
            f"{v.version}{' *' if v.version == latest else ''}",
            v.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            v.label or "",
            str(v.searches),
            str(v.fetches),
            str(v.pages),
            str(v.verdicts),
        ]
        for v in versions
    ]
    head = ["VERSION", "CREATED (UTC)", "LABEL", "SEARCHES", "FETCHES", "PAGES", "VERDICTS"]
    return _table(head, rows, right={3, 4, 5, 6}) + "(* latest; counts are entries written in it)\n"


def render_detail(d: VersionDetail) -> str:
    """The ``show`` report."""
    i = d.info
    vis = d.visible
    lines = [
        f"version {i.version}"
        + (f" ({i.label})" if i.label else "")
        + f", created {i.created_at.strftime('%Y-%m-%d %H:%M:%S')} UTC",
        f"replays {vis.get('fetch', 0)} fetches, {vis.get('search', 0)} searches, "
        f"{vis.get('page', 0)} pages, {vis.get('verdict', 0)} baselines "
        f"(written in this version: {i.fetches}, {i.searches}, {i.pages}, {i.verdicts})",
        "",
    ]
    out = "\n".join(lines) + "\n"
    if d.baselines:
        names = {name for b in d.baselines for name in b.axes}
        axes = [a for a in AXES if a in names] + sorted(names - set(AXES))
        rows = [
            [b.case_id, _pf(b.passed), *(_axis(b.axes.get(a)) for a in axes), str(b.version)]
            for b in d.baselines
        ]
        out += "BASELINES\n" + _table(["CASE", "PASSED", *(a.upper() for a in axes), "V"], rows)
        out += "\n"
    if d.fetches:
        rows = [
            [
                f.method,
                f.status.value,
                _opt(f.http_status),
                _short(f.body_hash),
                str(f.version),
                f.url,
            ]
            for f in d.fetches
        ]
        out += "FETCHES\n" + _table(["METHOD", "STATUS", "HTTP", "BODY", "V", "URL"], rows, {2, 4})
    return out


def _arrow(a: object, b: object) -> str:
    return f"{_opt(a)} → {_opt(b)}"


def render_diff(d: SnapshotDiff) -> str:
    """The ``diff`` report."""
    head = (
        f"diff {d.v1} → {d.v2}: {len(d.pages)} page(s) changed, "
        f"{len(d.searches)} search(es) changed, {len(d.verdicts)} verdict(s) moved\n"
    )
    if d.is_empty:
        return head
    out = head
    if d.pages:
        rows = [
            [
                p.change,
                p.method,
                p.url,
                _arrow(
                    p.status_before and p.status_before.value,
                    p.status_after and p.status_after.value,
                ),
                _arrow(p.http_status_before, p.http_status_after),
                f"{_short(p.body_hash_before)[:8]} → {_short(p.body_hash_after)[:8]}",
            ]
            for p in d.pages
        ]
        out += "\nPAGES\n" + _table(["CHANGE", "METHOD", "URL", "STATUS", "HTTP", "BODY"], rows)
    if d.searches:
        rows = []
        for s in d.searches:
            gone = [u for u in s.urls_before if u not in s.urls_after]
            new = [u for u in s.urls_after if u not in s.urls_before]
            rows.append(
                [s.change, s.provider, s.query, f"+{len(new)} -{len(gone)}", ", ".join(new[:3])]
            )
        out += "\nSEARCHES\n" + _table(["CHANGE", "PROVIDER", "QUERY", "URLS", "NEW"], rows)
    if d.verdicts:
        rows = []
        for v in d.verdicts:
            moves = "; ".join(
                f"{m.axis} {_pf(m.passed_before)}→{_pf(m.passed_after)}"
                + (
                    f" {_score(m.score_before)}→{_score(m.score_after)}"
                    if m.score_before != m.score_after
                    else ""
                )
                for m in v.axes
            )
            rows.append(
                [v.case_id, v.change, f"{_pf(v.passed_before)} → {_pf(v.passed_after)}", moves]
            )
        out += "\nVERDICTS\n" + _table(["CASE", "CHANGE", "PASSED", "AXES"], rows)
    return out

"""The embedded snapshot store: one SQLite file.

* **WAL mode** with a ``busy_timeout``: readers never block the writer, and writers from many
  tasks and several processes queue instead of failing. Every write is one ``BEGIN IMMEDIATE``
  transaction (body + entry together), so a crash never leaves an entry without its body and
  concurrent writers lose nothing.
* **Off the event loop**: sqlite3 connections belong to the thread that made them, so the store
  owns a single-thread executor and one connection living on that thread. Every call (SQL,
  zlib, sha256, JSON decoding) runs there; the loop only awaits.
* **Migrations** are named functions applied in order and recorded in ``citeguard_migrations``
  (the simonw/llm pattern); opening a store applies the missing ones in one transaction.
* **Errors** are translated where sqlite3 is called: a corrupted or truncated file raises
  :class:`~citeguard.errors.SnapshotCorrupt` naming the file, a locked or unreadable one
  :class:`~citeguard.errors.SnapshotError`; no raw ``sqlite3`` exception escapes.

Schema (migrations m001, m002)::

    versions(id, label, created_at)
    entries(layer, key, version, data, body_hash, written_at, checksum)
                                                   PRIMARY KEY (layer, key, version)
    bodies(hash, size, data)                       sha256 → zlib(body)

A read is ``... WHERE layer=? AND key=? AND version<=? ORDER BY version DESC LIMIT 1`` on the
primary key (see :mod:`citeguard.snapshot.base` for the version semantics), and checks the row's
``checksum`` (:func:`~citeguard.snapshot.base.entry_checksum` over every other column of it)
before anything of it is used. ``m002`` gives the rows of an older store the marker
:data:`~citeguard.snapshot.base.UNCHECKED` (read as before, listed by ``verify`` as unchecked,
given real checksums by ``seal``); a store opened ``read_only`` without ``m002`` reads the same
way, every entry unchecked.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from citeguard.errors import PolicyError, SnapshotCorrupt, SnapshotError
from citeguard.models import FetchResult, Page, SearchRecord, Verdict
from citeguard.snapshot.base import (
    UNCHECKED,
    Entry,
    Hit,
    JudgeRecord,
    Layer,
    RawEntry,
    SnapshotDamaged,
    SnapshotEntryCorrupt,
    SnapshotStore,
    VerifyReport,
    VersionInfo,
    View,
    audit,
    body_digest,
    body_problem,
    compress_body,
    decode_hit,
    entry_checksum,
    entry_key,
    fetch_from_hit,
    open_body,
    open_entry,
    snapshot_url_key,
    utcnow,
)

T = TypeVar("T")

DEFAULT_BUSY_TIMEOUT = 30.0

# what SQLite says when the file itself is damaged, beyond SQLITE_CORRUPT / SQLITE_NOTADB (plain
# DatabaseError): tables or columns its damaged schema no longer names
_DAMAGE_MESSAGES = ("no such table", "no such column", "malformed")


# sqlite3 raises UnicodeDecodeError instead of SQLite's error when the message is not UTF-8,
# which it is not when it quotes the damaged schema
_FAILURES = (sqlite3.DatabaseError, UnicodeDecodeError)


def _is_damage(e: sqlite3.DatabaseError | UnicodeDecodeError) -> bool:
    """Whether ``e`` says the file is damaged (rather than busy, locked, read-only, full)."""
    if not isinstance(e, sqlite3.OperationalError):
        return True
    return str(e).lower().startswith(_DAMAGE_MESSAGES) or "malformed" in str(e).lower()


def _text_or_bytes(raw: bytes) -> str | bytes:
    """sqlite3's text factory: a TEXT value that is not UTF-8 stays bytes, for the checks of
    the entry (or record) holding it to report, instead of failing the whole query."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def _names(rows: Iterable[tuple[object, ...]], *, where: str, what: str) -> set[str]:
    """The names in the first column of ``rows``: text, or the store is damaged."""
    out: set[str] = set()
    for name, *_rest in rows:
        if not isinstance(name, str):
            raise SnapshotCorrupt(f"{where} is damaged: a {what} name is not text ({name!r:.80})")
        out.add(name)
    return out


_MIGRATION_NAME = re.compile(r"m(\d{3})_[a-z0-9_]+")


def _unknown_migrations(done: set[str], *, where: str) -> list[str]:
    """The migrations ``done`` names that this citeguard lacks; a damaged record (a name no
    citeguard writes, or one numbered like a known migration) is a damaged store."""
    known = {m.__name__ for m in MIGRATIONS}
    newest = max(int(m.__name__[1:4]) for m in MIGRATIONS)
    unknown = sorted(done - known)
    for name in unknown:
        m = _MIGRATION_NAME.fullmatch(name)
        # a newer citeguard adds migrations after all of this one's
        if m is None or int(m.group(1)) <= newest or not known <= done:
            raise SnapshotCorrupt(f"{where} is damaged: its migration record {name!r} is not one")
    return unknown


# --------------------------------------------------------------------------------------------
# Migrations: named functions, applied in order, recorded in citeguard_migrations
# --------------------------------------------------------------------------------------------


def m001_initial(db: sqlite3.Connection) -> None:
    db.execute(
        "CREATE TABLE versions ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " label TEXT,"
        " created_at TEXT NOT NULL)"
    )
    db.execute(
        "CREATE TABLE entries ("
        " layer TEXT NOT NULL,"
        " key TEXT NOT NULL,"
        " version INTEGER NOT NULL,"
        " data TEXT NOT NULL,"
        " body_hash TEXT,"
        " written_at TEXT NOT NULL,"
        " PRIMARY KEY (layer, key, version))"
    )
    db.execute("CREATE INDEX entries_version ON entries (version)")
    db.execute("CREATE INDEX entries_body ON entries (body_hash) WHERE body_hash IS NOT NULL")
    db.execute(
        "CREATE TABLE bodies ( hash TEXT PRIMARY KEY, size INTEGER NOT NULL, data BLOB NOT NULL)"
    )


def m002_entry_checksums(db: sqlite3.Connection) -> None:
    # Every row gets a value: rows written before checksums get the UNCHECKED marker, so a
    # NULL checksum never occurs in a sound store (it reads as damage).
    db.execute("ALTER TABLE entries ADD COLUMN checksum TEXT")
    db.execute("UPDATE entries SET checksum = ?", (UNCHECKED,))


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    m001_initial,
    m002_entry_checksums,
)
# Migrations a read-only open may find missing: the store reads as it did before them.
_READ_OPTIONAL = frozenset({"m002_entry_checksums"})

_MIGRATIONS_TABLE = "citeguard_migrations"


def migrate(db: sqlite3.Connection, *, where: str = "snapshot store") -> list[str]:
    """Apply the migrations ``db`` lacks, in one transaction; return the names applied."""
    with _transaction(db):
        tables = _names(
            db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"),
            where=where,
            what="table",
        )
        if tables and _MIGRATIONS_TABLE not in tables:
            raise SnapshotError(
                f"{where} is an SQLite database but not a citeguard snapshot store "
                f"(it has tables {sorted(tables)[:5]} and no {_MIGRATIONS_TABLE})"
            )
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {_MIGRATIONS_TABLE} "
            "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        done = _names(
            db.execute(f"SELECT name FROM {_MIGRATIONS_TABLE}"), where=where, what="migration"
        )
        unknown = _unknown_migrations(done, where=where)
        if unknown:
            raise SnapshotError(
                f"{where} was written by a newer citeguard (unknown migrations {unknown})"
            )
        applied: list[str] = []
        for m in MIGRATIONS:
            if m.__name__ in done:
                continue
            m(db)
            db.execute(
                f"INSERT INTO {_MIGRATIONS_TABLE} (name, applied_at) VALUES (?, ?)",
                (m.__name__, utcnow().isoformat()),
            )
            applied.append(m.__name__)
        return applied


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    # IMMEDIATE takes the write lock up front: two processes that both read-then-write would
    # otherwise deadlock on the lock upgrade and one would fail with SQLITE_BUSY at once.
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


# --------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------


class SQLiteSnapshotStore(SnapshotStore):
    """A snapshot store in one SQLite file (WAL mode, bodies zlib-compressed and deduplicated).

    ``create=False`` refuses to make a new file (for tools such as the CLI).
    ``read_only=True`` opens the file immutable (no locks, no ``-wal``/``-shm`` files, so it works
    from a read-only directory such as an installed package): for snapshots nothing writes to
    while it is open, e.g. a bundled demo or a committed store replayed in CI. Writes then raise
    :class:`~citeguard.errors.SnapshotError`.
    ``version`` pins reads and writes to an existing version instead of the newest.
    The file is opened lazily, on the first call, on the store's own thread.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        read_only: bool = False,
        version: int | None = None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> None:
        if busy_timeout <= 0:
            raise PolicyError("busy_timeout must be positive")
        self.path = Path(path)
        self.read_only = read_only
        self._create = create and not read_only
        self._busy_timeout = busy_timeout
        self._requested_version = version
        # Only ever touched on the executor's single thread.
        self._conn: sqlite3.Connection | None = None
        self._active: int | None = None
        # False: a read-only store that predates the checksum column (every entry unchecked)
        self._checksums = True
        self._where = f"snapshot store {self.path}"
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="citeguard-sqlite")
        self._closed = False

    def __repr__(self) -> str:
        return f"SQLiteSnapshotStore({str(self.path)!r})"

    # ---------------------------------------------------------------- plumbing

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise SnapshotError(f"snapshot store {self.path} is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, fn)

    def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return fn(self._connection())
        except _FAILURES as e:
            if not _is_damage(e):
                # busy / locked / cannot open / read-only / disk full: the file is fine, the
                # access is not
                raise SnapshotError(f"snapshot store {self.path}: {e}") from e
            self._drop_connection()
            raise SnapshotCorrupt(
                f"snapshot store {self.path} is corrupted or truncated ({e}); restore it from "
                "version control or a backup, or delete it and re-record "
                "(pytest --citeguard-record=all)"
            ) from e
        except sqlite3.Error as e:
            raise SnapshotError(f"snapshot store {self.path}: {e}") from e

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        if not self._create and not self.path.exists():
            raise SnapshotError(f"no snapshot store at {self.path}")
        if self._create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.read_only:
            uri = f"{self.path.resolve().as_uri()}?mode=ro&immutable=1"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=True)
        else:
            conn = sqlite3.connect(
                self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=True
            )
        # a TEXT value that is not UTF-8 (a flipped bit) comes back as bytes, for the entry's
        # checks to report, instead of failing the whole query
        conn.text_factory = _text_or_bytes
        try:
            if self.read_only:
                done = _check_schema(conn, where=f"snapshot store {self.path}")
                self._checksums = "m002_entry_checksums" in done
            else:
                conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
                conn.execute("PRAGMA journal_mode = WAL")
                # NORMAL in WAL mode: durable across application crashes; only an OS crash can
                # lose the last transactions, never corrupt the file.
                conn.execute("PRAGMA synchronous = NORMAL")
                migrate(conn, where=f"snapshot store {self.path}")
            if self._requested_version is not None:
                _require_version(conn, self._requested_version)
                self._active = self._requested_version
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _writable(self) -> None:
        if self.read_only:
            raise SnapshotError(f"snapshot store {self.path} is open read-only")

    def _read_version(self, db: sqlite3.Connection) -> int | None:
        if self._active is None:
            self._active = db.execute("SELECT max(id) FROM versions").fetchone()[0]
        return self._active

    def _write_version(self, db: sqlite3.Connection) -> int:
        """The version a write goes to; call inside a write transaction."""
        if self._active is None:
            newest = db.execute("SELECT max(id) FROM versions").fetchone()[0]
            if newest is None:
                newest = _insert_version(db, None)
            self._active = int(newest)
        else:
            _require_version(db, self._active)
        return self._active

    def _ck(self, table: str = "") -> str:
        """The checksum column in SQL (the UNCHECKED marker for a store without one)."""
        return f"{table}checksum" if self._checksums else f"'{UNCHECKED}'"

    def _get(
        self, db: sqlite3.Connection, layer: Layer, key: str
    ) -> tuple[Hit, bytes | None] | None:
        """The entry of ``key`` visible at the active version, checked (checksum first), with
        its body; a damaged one raises :class:`SnapshotEntryCorrupt`."""
        v = self._read_version(db)
        if v is None:
            return None
        try:
            row = db.execute(
                f"SELECT e.version, e.data, e.body_hash, e.written_at, {self._ck('e.')}, b.data"
                " FROM entries e LEFT JOIN bodies b ON b.hash = e.body_hash"
                " WHERE e.layer = ? AND e.key = ? AND e.version <= ?"
                " ORDER BY e.version DESC LIMIT 1",
                (layer, key, v),
            ).fetchone()
        except _FAILURES as e:
            if not _is_damage(e):
                raise
            # the file is damaged where this entry lies: refuse this entry, by name
            self._drop_connection()
            raise SnapshotEntryCorrupt(
                self._where, layer, key, None, f"SQLite cannot read it ({e})"
            ) from e
        if row is None:
            return None
        version, data, body_hash, written_at, checksum, packed = row
        hit = open_entry(
            self._where, RawEntry(layer, key, version, data, body_hash, written_at, checksum)
        )
        return hit, (None if hit.body_hash is None else open_body(hit, packed))

    def _put(
        self, db: sqlite3.Connection, layer: Layer, key: str, data: str, body: bytes | None = None
    ) -> None:
        self._writable()
        body_hash = packed = None
        if body is not None:
            body_hash = body_digest(body)
            # Compress outside the write lock, and only bodies not stored yet.
            if db.execute("SELECT 1 FROM bodies WHERE hash = ?", (body_hash,)).fetchone() is None:
                packed = compress_body(body)
        with _transaction(db):
            v = self._write_version(db)
            if packed is not None:
                db.execute(
                    "INSERT OR IGNORE INTO bodies (hash, size, data) VALUES (?, ?, ?)",
                    (body_hash, len(body or b""), packed),
                )
            elif body_hash is not None:
                # Checked before the lock: make sure no prune removed it since.
                hit = db.execute("SELECT 1 FROM bodies WHERE hash = ?", (body_hash,)).fetchone()
                if hit is None:
                    db.execute(
                        "INSERT INTO bodies (hash, size, data) VALUES (?, ?, ?)",
                        (body_hash, len(body or b""), compress_body(body or b"")),
                    )
            written = utcnow().isoformat()
            checksum = entry_checksum(layer, key, v, body_hash, written, data)
            db.execute(
                "INSERT OR REPLACE INTO entries"
                " (layer, key, version, data, body_hash, written_at, checksum)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (layer, key, v, data, body_hash, written, checksum),
            )

    # ---------------------------------------------------------------- layers

    async def get_search(self, provider: str, query: str) -> SearchRecord | None:
        key = entry_key(provider, query)

        def op(db: sqlite3.Connection) -> SearchRecord | None:
            hit = self._get(db, "search", key)
            return None if hit is None else decode_hit(SearchRecord, hit[0])

        return await self._call(op)

    async def put_search(self, record: SearchRecord) -> None:
        key = entry_key(record.provider, record.query)
        data = record.model_dump_json()
        await self._call(lambda db: self._put(db, "search", key, data))

    async def get_fetch(self, method: str, url: str) -> FetchResult | None:
        key = entry_key(method.upper(), snapshot_url_key(url))

        def op(db: sqlite3.Connection) -> FetchResult | None:
            hit = self._get(db, "fetch", key)
            return None if hit is None else fetch_from_hit(*hit)

        return await self._call(op)

    async def put_fetch(self, result: FetchResult, *, method: str, url: str | None = None) -> None:
        key = entry_key(method.upper(), snapshot_url_key(url if url is not None else result.url))
        data = result.model_dump_json()  # body is excluded from JSON; stored by hash instead
        body = result.body
        await self._call(lambda db: self._put(db, "fetch", key, data, body))

    async def get_page(self, url: str, extractor_version: str) -> Page | None:
        key = entry_key(url, extractor_version)

        def op(db: sqlite3.Connection) -> Page | None:
            hit = self._get(db, "page", key)
            return None if hit is None else decode_hit(Page, hit[0])

        return await self._call(op)

    async def put_page(self, url: str, extractor_version: str, page: Page) -> None:
        key = entry_key(url, extractor_version)
        data = page.model_dump_json()
        await self._call(lambda db: self._put(db, "page", key, data))

    async def get_judge(self, key: str) -> JudgeRecord | None:
        k = entry_key(key)

        def op(db: sqlite3.Connection) -> JudgeRecord | None:
            hit = self._get(db, "judge", k)
            return None if hit is None else decode_hit(JudgeRecord, hit[0])

        return await self._call(op)

    async def put_judge(self, key: str, record: JudgeRecord) -> None:
        k = entry_key(key)
        data = record.model_dump_json()
        await self._call(lambda db: self._put(db, "judge", k, data))

    # ---------------------------------------------------------------- versions and baselines

    async def begin_version(self, label: str | None = None) -> int:
        def op(db: sqlite3.Connection) -> int:
            self._writable()
            with _transaction(db):
                self._active = _insert_version(db, label)
            return self._active

        return await self._call(op)

    async def current_version(self) -> int | None:
        return await self._call(self._read_version)

    async def use_version(self, version: int) -> None:
        def op(db: sqlite3.Connection) -> None:
            _require_version(db, version)
            self._active = version

        await self._call(op)

    async def record_verdict(self, case_id: str, verdict: Verdict) -> None:
        key = entry_key(case_id)
        data = verdict.model_dump_json()
        await self._call(lambda db: self._put(db, "verdict", key, data))

    async def get_verdict(self, case_id: str) -> Verdict | None:
        key = entry_key(case_id)

        def op(db: sqlite3.Connection) -> Verdict | None:
            hit = self._get(db, "verdict", key)
            return None if hit is None else decode_hit(Verdict, hit[0])

        return await self._call(op)

    async def mark_case(self, case_id: str) -> None:
        key = entry_key(case_id)
        await self._call(lambda db: self._put(db, "case", key, "{}"))

    async def has_case(self, case_id: str) -> bool:
        key = entry_key(case_id)
        return await self._call(lambda db: self._get(db, "case", key) is not None)

    async def list_versions(self) -> list[VersionInfo]:
        def op(db: sqlite3.Connection) -> list[VersionInfo]:
            counts: dict[int, dict[str, int]] = {}
            for version, layer, n in db.execute(
                "SELECT version, layer, count(*) FROM entries GROUP BY version, layer"
            ):
                counts.setdefault(version, {})[layer] = n
            out = []
            for vid, label, created in db.execute(
                "SELECT id, label, created_at FROM versions ORDER BY id"
            ):
                c = counts.get(vid, {})
                try:
                    info = VersionInfo(
                        version=vid,
                        label=label,
                        created_at=datetime.fromisoformat(created),
                        searches=c.get("search", 0),
                        fetches=c.get("fetch", 0),
                        pages=c.get("page", 0),
                        verdicts=c.get("verdict", 0),
                        cases=c.get("case", 0),
                        judges=c.get("judge", 0),
                    )
                except (TypeError, ValueError) as e:  # pydantic's ValidationError is a ValueError
                    raise SnapshotCorrupt(
                        f"{self._where} is damaged: the record of version {vid!r} does not "
                        f"read ({e.__class__.__name__}: {str(e)[:120]})"
                    ) from e
                out.append(info)
            return out

        return await self._call(op)

    async def _view(self, layer: Layer, version: int) -> View:
        def op(db: sqlite3.Connection) -> View:
            rows = db.execute(
                f"SELECT key, version, data, body_hash, written_at, {self._ck()} FROM ("
                "  SELECT *, row_number() OVER"
                "   (PARTITION BY key ORDER BY version DESC) AS rn"
                "  FROM entries WHERE layer = ? AND version <= ?"
                ") WHERE rn = 1",
                (layer, version),
            )
            out: View = {}
            # closed even when an entry is damaged: an unfinished SELECT would hold its read
            # transaction open, and the connection would go on seeing the damaged snapshot
            with closing(rows):
                for k, v, d, h, w, c in rows:
                    hit = open_entry(self._where, RawEntry(layer, k, v, d, h, w, c))
                    out[hit.key] = Entry(hit.key, hit.version, hit.data, hit.body_hash)
            return out

        return await self._call(op)

    async def prune(self, keep: int) -> int:
        if keep < 1:
            raise PolicyError("prune(keep=...) must keep at least one version")

        def op(db: sqlite3.Connection) -> int:
            self._writable()
            with _transaction(db):
                ids = [r[0] for r in db.execute("SELECT id FROM versions ORDER BY id DESC")]
                if len(ids) <= keep:
                    return 0
                cut = ids[keep - 1]  # the oldest version kept
                # Entries the oldest kept version still sees through inheritance move up to it,
                # checked and re-sealed for their new version (a damaged one stops the prune:
                # nothing is changed); every other entry older than it is shadowed in all kept
                # versions.
                moving = db.execute(
                    "SELECT layer, key, version, data, body_hash, written_at, checksum"
                    " FROM entries WHERE version < :cut AND version = ("
                    " SELECT max(e2.version) FROM entries e2 WHERE e2.layer = entries.layer"
                    " AND e2.key = entries.key AND e2.version <= :cut)",
                    {"cut": cut},
                ).fetchall()
                for row in moving:
                    hit = open_entry(self._where, RawEntry(*row))
                    db.execute(
                        "UPDATE entries SET version = ?, checksum = ?"
                        " WHERE layer = ? AND key = ? AND version = ?",
                        (cut, hit.resealed(cut), row[0], row[1], row[2]),
                    )
                db.execute("DELETE FROM entries WHERE version < ?", (cut,))
                dropped = db.execute("DELETE FROM versions WHERE id < ?", (cut,)).rowcount
                db.execute(
                    "DELETE FROM bodies WHERE hash NOT IN"
                    " (SELECT body_hash FROM entries WHERE body_hash IS NOT NULL)"
                )
                if self._active is not None and self._active < cut:
                    self._active = None
                return int(dropped)

        return await self._call(op)

    def _audit(self, db: sqlite3.Connection) -> VerifyReport:
        """Everything ``verify`` checks: the file, every body, every entry of every version.
        Where SQLite cannot read a part of the file, that is a problem of the report and the
        rest is still checked."""
        problems: list[str] = []
        # integrity_check, not quick_check: it also finds index entries that no longer match
        # their rows (a lookup through such an index misses an entry that is still there)
        integrity = _readable(db, "PRAGMA integrity_check", problems, "its integrity check")
        found = "\n".join(str(r[0]) for r in integrity).splitlines()
        if found != ["ok"]:
            more = f" and {len(found) - 5} more" if len(found) > 5 else ""
            problems.append(f"the file fails its integrity check: {found[:5]}{more}")
        with closing(db.execute("SELECT hash, size, data FROM bodies")) as stored:
            bodies = _body_problems(_rows(stored, problems, "bodies"))
        listed = _readable(db, "SELECT id FROM versions", problems, "versions")
        versions = [v for v, *_ in listed if isinstance(v, int)]
        # in the table's own order: a damaged index does not hide the rows (quick_check
        # reports the index)
        rows = db.execute(
            f"SELECT layer, key, version, data, body_hash, written_at, {self._ck()} FROM entries"
        )
        late: list[str] = []
        with closing(rows):  # streamed: a big store's entries need not all be in memory
            report = audit(
                self._where,
                (RawEntry(*r) for r in _rows(rows, late, "entries")),
                bodies,
                versions=versions,
                problems=problems,
            )
        if not late:
            return report
        return VerifyReport(
            bodies=report.bodies,
            entries=report.entries,
            unchecked=report.unchecked,
            damaged=report.damaged,
            problems=(*report.problems, *late),
        )

    async def verify(self, *, raise_on_damage: bool = True) -> VerifyReport:
        try:
            report = await self._call(self._audit)
        except SnapshotCorrupt as e:
            # SQLite cannot open the file, or read what the checks start from: that is the report
            report = VerifyReport(bodies=0, problems=[str(e)])
        if raise_on_damage and not report.ok:
            raise SnapshotDamaged(self._where, report)
        return report

    async def seal(self) -> int:
        def op(db: sqlite3.Connection) -> int:
            self._writable()
            with _transaction(db):  # checked and sealed under one lock: no writer in between
                report = self._audit(db)
                if not report.ok:
                    raise SnapshotDamaged(self._where, report)
                rows = db.execute(
                    "SELECT layer, key, version, data, body_hash, written_at, checksum"
                    " FROM entries WHERE checksum = ?",
                    (UNCHECKED,),
                ).fetchall()
                for row in rows:
                    hit = open_entry(self._where, RawEntry(*row))
                    db.execute(
                        "UPDATE entries SET checksum = ?"
                        " WHERE layer = ? AND key = ? AND version = ? AND checksum = ?",
                        (hit.checksum_at(hit.version), row[0], row[1], row[2], UNCHECKED),
                    )
                return len(rows)

        return await self._call(op)

    async def count_bodies(self) -> int:
        return await self._call(
            lambda db: int(db.execute("SELECT count(*) FROM bodies").fetchone()[0])
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._drop_connection)
        finally:
            self._executor.shutdown(wait=False)


def _check_schema(db: sqlite3.Connection, *, where: str) -> set[str]:
    """Read-only open: the file must be a store with every migration already applied (but the
    read-optional ones); return the migrations it has."""
    tables = _names(
        db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"), where=where, what="table"
    )
    if _MIGRATIONS_TABLE not in tables:
        raise SnapshotError(f"{where} is not a citeguard snapshot store")
    done = _names(
        db.execute(f"SELECT name FROM {_MIGRATIONS_TABLE}"), where=where, what="migration"
    )
    unknown = _unknown_migrations(done, where=where)
    missing = [m.__name__ for m in MIGRATIONS if m.__name__ not in done | _READ_OPTIONAL]
    if missing:
        raise SnapshotError(f"{where} needs migrations {missing}: open it writable once")
    if unknown:
        raise SnapshotError(f"{where} was written by a newer citeguard ({unknown})")
    return done


def _rows(
    cursor: Iterable[tuple[object, ...]], problems: list[str], what: str
) -> Iterator[tuple[object, ...]]:
    """The rows of ``cursor`` up to where SQLite cannot read the file any further (then a line
    of ``problems`` says so)."""
    try:
        yield from cursor
    except _FAILURES as e:
        if not _is_damage(e):
            raise
        problems.append(
            f"SQLite cannot read all the {what} ({e}): the ones before the damage are checked, "
            "the rest are lost"
        )


def _readable(
    db: sqlite3.Connection, sql: str, problems: list[str], what: str
) -> list[tuple[object, ...]]:
    try:
        return list(_rows(db.execute(sql), problems, what))
    except _FAILURES as e:
        if not _is_damage(e):
            raise
        problems.append(f"SQLite cannot read {what} ({e})")
        return []


def _body_problems(rows: Iterable[tuple[object, ...]]) -> dict[str, str | None]:
    """Stored bodies (hash, size, zlib data) → what is wrong with each (None: intact)."""
    out: dict[str, str | None] = {}
    for body_hash, size, packed in rows:
        if isinstance(body_hash, str):
            out[body_hash] = body_problem(packed, body_hash, size)
        else:
            out[repr(body_hash)] = f"body hash {body_hash!r} is not text"
    return out


def _insert_version(db: sqlite3.Connection, label: str | None) -> int:
    cur = db.execute(
        "INSERT INTO versions (label, created_at) VALUES (?, ?)", (label, utcnow().isoformat())
    )
    assert cur.lastrowid is not None
    return int(cur.lastrowid)


def _require_version(db: sqlite3.Connection, version: int) -> None:
    if db.execute("SELECT 1 FROM versions WHERE id = ?", (version,)).fetchone() is None:
        raise SnapshotError(f"no snapshot version {version} (see: citeguard snapshot list)")

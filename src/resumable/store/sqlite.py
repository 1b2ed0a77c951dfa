"""SQLiteStore: every run in one SQLite file, for one machine and no server.

Design note. One connection, owned by one dedicated thread: every call is a job on
that thread, so the event loop never blocks on disk and the connection is never
shared between threads. The file is in WAL mode; ``sync`` sets ``PRAGMA
synchronous`` (``fsync`` -> FULL: the WAL is fsynced at every commit, a commit
survives a power loss; ``flush`` -> NORMAL: the WAL is fsynced only at checkpoints,
a commit survives the process being killed but the last commits may roll back on a
power loss - never a corrupt file). Appends waiting at the same moment share one
transaction, so many runs pay for one fsync (group commit, :mod:`.group_commit`).

Loss. The ``-wal`` file is part of the store: a commit lives only there until a
checkpoint copies it into the main file, so a lost or damaged WAL silently takes the
last commits with it. Each run's last acknowledged seq is therefore also kept outside
the database, in ``<file>-heads/<run_id>`` (:mod:`.heads`), and a read reports it as
the high-water mark; the runs table's own ``last_seq`` covers rows deleted by hand.

Ownership is a lease row (epoch, owner, expiry) checked inside the write
transaction, plus an in-process check: a run this store holds counts as owned even
once its expiry passed, because this process is plainly alive. Several processes
may open the same file; SQLite serialises their writes (``BEGIN IMMEDIATE`` waits
up to ``busy_timeout`` seconds for the write lock).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import unquote, urlsplit

from resumable.errors import (
    ConfigError,
    ResumableError,
    SchemaVersionError,
    StoreError,
    StoreUnavailableError,
)
from resumable.store.base import (
    Lease,
    ReadResult,
    RunMeta,
    RunSummary,
    StoredRecord,
    check_seqs,
)
from resumable.store.common import (
    already_exists,
    blob_missing,
    busy,
    check_fence,
    check_keep,
    check_run_id,
    check_status,
    check_sync,
    damaged_summary,
    holder_is_dead,
    lease_lost,
    meta_from_row,
    meta_json,
    not_found,
)
from resumable.store.group_commit import GroupCommit, PendingAppend
from resumable.store.heads import read_head, store_head

SCHEMA_VERSION = 1
SYNC_PRAGMAS = {"fsync": "FULL", "flush": "NORMAL"}

_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE settings (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    meta TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    epoch INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    lease_expires_at REAL,
    last_seq INTEGER NOT NULL DEFAULT 0,
    last_write REAL
);
CREATE TABLE records (
    run_id TEXT NOT NULL REFERENCES runs ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE blobs (
    run_id TEXT NOT NULL REFERENCES runs ON DELETE CASCADE,
    digest TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, digest)
);
CREATE TABLE snapshots (
    run_id TEXT NOT NULL REFERENCES runs ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"""

_RUN_COLUMNS = (
    "run_id, meta, status, created_at, updated_at, epoch, owner, lease_expires_at, "
    "last_seq, last_write"
)


class SQLiteStore:
    """Runs in one SQLite file (WAL), written from one dedicated thread."""

    def __init__(
        self, path: str | os.PathLike[str], *, sync: str = "fsync", busy_timeout: float = 30.0
    ) -> None:
        check_sync(sync, "SQLite")
        self.path = Path(path).expanduser().absolute()
        self.url = f"sqlite://{self.path}"
        if not self.path.name:
            raise ConfigError(
                f"SQLite store {str(path)!r} names a folder, not a file; give a file such as "
                "runs.db",
                key="durability.url",
            )
        self.heads = self.path.with_name(self.path.name + "-heads")
        self.sync = sync
        self.busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._writer = GroupCommit(self._commit, name=f"resumable-sqlite:{self.path}")
        self._held: dict[str, int] = {}
        self._mac_key: bytes | None = None

    @classmethod
    def from_url(cls, url: str, *, sync: str = "fsync", **options: Any) -> Self:
        """``sqlite:///abs/path.db``, ``sqlite:relative.db`` or a plain path."""
        if url.startswith("sqlite:"):
            parts = urlsplit(url)
            path = unquote(parts.netloc + parts.path)
            if path.startswith("//"):
                path = path[1:]
        else:
            path = url
        if not path:
            raise ConfigError(f"SQLite store URL {url!r} names no file", key="durability.url")
        return cls(path, sync=sync, **options)

    # -- lifecycle ------------------------------------------------------------
    async def __aenter__(self) -> Self:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="resumable-sqlite")
        try:
            await self._call(self._open)
        except BaseException:
            await self._call(self._close)
            self._executor.shutdown(wait=False)
            self._executor = None
            raise
        self._writer.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._writer.stop()
        if self._executor is not None:
            with contextlib.suppress(StoreError):
                await self._call(self._close)
            self._executor.shutdown(wait=True)
            self._executor = None
        self._held.clear()

    def _open(self) -> None:
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.heads.mkdir(mode=0o700, exist_ok=True)
            # The file holds the MAC key: create it private before SQLite opens it.
            os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as err:
            raise StoreUnavailableError(
                f"cannot open the SQLite store {self.path}: {err}; check the path is writable",
                path=str(self.path),
            ) from err
        self._conn = conn
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreUnavailableError(
                f"the SQLite store {self.path} cannot use WAL mode (it stays in {mode!r} mode); "
                "put it on a local filesystem",
                path=str(self.path),
            )
        conn.execute(f"PRAGMA synchronous={SYNC_PRAGMAS[self.sync]}")
        conn.execute("PRAGMA foreign_keys=ON")
        with self._transaction() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"the SQLite store {self.path} has schema version {version}, written by a "
                    f"newer resumable (this one knows {SCHEMA_VERSION}); upgrade resumable",
                    path=str(self.path),
                    version=version,
                )
            if version == 0:
                # Not executescript: it would commit the open transaction first.
                for statement in filter(str.strip, _SCHEMA.split(";")):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn`` on the store's thread, turning SQLite failures into ``StoreError``."""
        if self._executor is None:
            raise StoreError(f"the SQLite store {self.path} is not open (use `async with`)")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, functools.partial(self._guarded, fn, *args)
        )

    def _guarded(self, fn: Callable[..., _T], *args: Any) -> _T:
        try:
            return fn(*args)
        except sqlite3.Error as err:
            raise StoreError(
                f"the SQLite store {self.path} failed: {err}", path=str(self.path)
            ) from err

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the file's write lock at once (no upgrade deadlock)."""
        conn = self._connection()
        if conn.in_transaction:
            yield conn
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"the SQLite store {self.path} is not open (use `async with`)")
        return self._conn

    # -- key ------------------------------------------------------------------
    async def mac_key(self) -> bytes:
        if self._mac_key is None:
            self._mac_key = await self._call(self._load_mac_key)
        return self._mac_key

    def _load_mac_key(self) -> bytes:
        with self._transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO settings (name, value) VALUES ('mac_key', ?)",
                (secrets.token_bytes(32),),
            )
            return bytes(
                db.execute("SELECT value FROM settings WHERE name='mac_key'").fetchone()[0]
            )

    # -- runs -----------------------------------------------------------------
    async def create_run(self, meta: RunMeta) -> None:
        check_run_id(meta.run_id)
        await self._call(self._create_run, meta)

    def _create_run(self, meta: RunMeta) -> None:
        check_status(meta)
        with self._transaction() as db:
            try:
                db.execute(
                    "INSERT INTO runs (run_id, meta, status, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (meta.run_id, meta_json(meta), meta.status, meta.created_at, meta.updated_at),
                )
            except sqlite3.IntegrityError:
                raise already_exists(meta.run_id, self.url) from None

    async def get_meta(self, run_id: str) -> RunMeta:
        check_run_id(run_id)
        row = await self._call(self._run_row, run_id)
        return meta_from_row(row, self.url)

    def _run_row(self, run_id: str) -> tuple[Any, ...]:
        row: tuple[Any, ...] | None = (
            self._connection()
            .execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id=?", (run_id,))
            .fetchone()
        )
        if row is None:
            raise self._not_found(run_id)
        return row

    async def put_meta(self, meta: RunMeta) -> None:
        await self._call(self._put_meta, meta)

    def _put_meta(self, meta: RunMeta) -> None:
        check_status(meta)
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE runs SET meta=?, status=?, created_at=?, updated_at=? WHERE run_id=?",
                (meta_json(meta), meta.status, meta.created_at, meta.updated_at, meta.run_id),
            )
            if cursor.rowcount == 0:
                raise self._not_found(meta.run_id)

    async def list_runs(self) -> list[RunSummary]:
        rows = await self._call(self._list_rows)
        now = time.time()
        summaries = []
        for row in rows:
            try:
                meta = meta_from_row(row, self.url)
            except StoreError as err:
                summaries.append(damaged_summary(row[0], err.message))
                continue
            live = meta.owner is not None and (
                self._held.get(meta.run_id) == meta.epoch
                or (row[7] is not None and row[7] > now and not holder_is_dead(meta.owner))
            )
            summaries.append(RunSummary(meta, last_seq=row[8], last_write=row[9], live=live))
        known = {s.meta.run_id for s in summaries}
        for lost in sorted(await asyncio.to_thread(self._orphan_heads, known)):
            summaries.append(damaged_summary(lost, self._vanished(lost).message))
        return summaries

    def _orphan_heads(self, known: set[str]) -> list[str]:
        """Runs that acknowledged records but have no row: the database lost them."""
        try:
            names = os.listdir(self.heads)
        except FileNotFoundError:
            return []
        return [n for n in names if n not in known and not n.startswith(".")]

    def _list_rows(self) -> list[tuple[Any, ...]]:
        return (
            self._connection()
            .execute(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY created_at DESC, run_id DESC")
            .fetchall()
        )

    async def delete_run(self, run_id: str) -> None:
        await self._call(self._delete_run, run_id)
        self._held.pop(run_id, None)

    def _delete_run(self, run_id: str) -> None:
        with self._transaction() as db:
            if db.execute("DELETE FROM runs WHERE run_id=?", (run_id,)).rowcount == 0:
                if (self.heads / run_id).exists():  # a run the database lost: forget it
                    (self.heads / run_id).unlink()
                    return
                raise self._not_found(run_id)
        (self.heads / run_id).unlink(missing_ok=True)

    # -- the log --------------------------------------------------------------
    async def append(self, run_id: str, records: Sequence[StoredRecord], lease: Lease) -> None:
        check_seqs(records, 0)
        if not self._writer.running:
            raise StoreError(f"the SQLite store {self.path} is not open (use `async with`)")
        await self._writer.submit(run_id, records, lease)

    async def _commit(self, batch: list[PendingAppend]) -> list[Exception | None]:
        """The whole batch in one transaction, each append in a savepoint of its own."""
        return await self._call(self._append_batch, batch)

    def _append_batch(self, batch: list[PendingAppend]) -> list[Exception | None]:
        outcomes: list[Exception | None] = []
        with self._transaction() as db:
            for item in batch:
                db.execute("SAVEPOINT item")
                try:
                    self._append_one(db, item)
                except (ResumableError, ValueError) as err:
                    db.execute("ROLLBACK TO item")
                    outcomes.append(err)
                else:
                    outcomes.append(None)
                db.execute("RELEASE item")
        for n, item in enumerate(batch):
            if outcomes[n] is None and item.records:  # committed: now it may be missed
                try:
                    store_head(self.heads / item.run_id, item.records[-1].seq)
                except OSError as err:
                    outcomes[n] = StoreError(
                        f"the SQLite store {self.path}: cannot write {self.heads}: {err}"
                    )
        return outcomes

    def _append_one(self, db: sqlite3.Connection, item: PendingAppend) -> None:
        row = db.execute("SELECT epoch FROM runs WHERE run_id=?", (item.run_id,)).fetchone()
        if row is None:
            raise self._not_found(item.run_id)
        check_fence(item.run_id, item.lease, row[0], self.url)
        # The log's own last seq (a pruned log's is its newest snapshot's), not the
        # high-water mark: after a loss accepted by the user the run goes on from there.
        check_seqs(item.records, self._last_seq(db, item.run_id))
        if not item.records:
            return
        db.executemany(
            "INSERT INTO records (run_id, seq, epoch, data) VALUES (?, ?, ?, ?)",
            [(item.run_id, r.seq, r.epoch, r.data) for r in item.records],
        )
        db.execute(
            "UPDATE runs SET last_seq=?, last_write=? WHERE run_id=?",
            (item.records[-1].seq, time.time(), item.run_id),
        )

    async def read(self, run_id: str, after_seq: int = 0) -> ReadResult:
        return await self._call(self._read, run_id, after_seq)

    def _read(self, run_id: str, after_seq: int) -> ReadResult:
        head = read_head(self.heads / run_id) or 0  # first: it is written after the commit
        db = self._connection()
        db.execute("BEGIN")
        try:
            row = db.execute("SELECT last_seq FROM runs WHERE run_id=?", (run_id,)).fetchone()
            if row is None:
                raise self._not_found(run_id)
            rows = db.execute(
                "SELECT seq, epoch, data FROM records WHERE run_id=? AND seq>? ORDER BY seq",
                (run_id, after_seq),
            ).fetchall()
        finally:
            db.execute("COMMIT")
        high_water = max(row[0], head)
        records = [StoredRecord(seq, epoch, bytes(data)) for seq, epoch, data in rows]
        return ReadResult(records, high_water=high_water)

    @staticmethod
    def _last_seq(db: sqlite3.Connection, run_id: str) -> int:
        row = db.execute(
            "SELECT max(coalesce((SELECT max(seq) FROM records WHERE run_id=?1), 0), "
            "coalesce((SELECT max(seq) FROM snapshots WHERE run_id=?1), 0))",
            (run_id,),
        ).fetchone()
        return int(row[0])

    def _not_found(self, run_id: str) -> ResumableError:
        """No such run - or one that acknowledged records the database no longer has."""
        if read_head(self.heads / run_id):
            return self._vanished(run_id)
        return not_found(run_id, self.url)

    def _vanished(self, run_id: str) -> StoreError:
        seq = read_head(self.heads / run_id) or 0
        return StoreError(
            f"run {run_id}: its records 1-{seq} are missing from the SQLite store {self.path} "
            f"(was its -wal file lost or damaged?); restore the file together with "
            f"{self.path.name}-wal from a backup",
            run_id=run_id,
        )

    # -- blobs ----------------------------------------------------------------
    async def put_blob(self, run_id: str, digest: str, data: bytes) -> None:
        await self._call(self._put_blob, run_id, digest, data)

    def _put_blob(self, run_id: str, digest: str, data: bytes) -> None:
        with self._transaction() as db:
            try:
                db.execute(
                    "INSERT OR IGNORE INTO blobs (run_id, digest, data) VALUES (?, ?, ?)",
                    (run_id, digest, data),
                )
            except sqlite3.IntegrityError:
                raise self._not_found(run_id) from None

    async def get_blob(self, run_id: str, digest: str) -> bytes:
        row = await self._call(self._blob_row, run_id, digest)
        if row is None:
            raise blob_missing(run_id, digest, self.url)
        return bytes(row[0])

    async def has_blob(self, run_id: str, digest: str) -> bool:
        return await self._call(self._blob_row, run_id, digest) is not None

    def _blob_row(self, run_id: str, digest: str) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = (
            self._connection()
            .execute("SELECT data FROM blobs WHERE run_id=? AND digest=?", (run_id, digest))
            .fetchone()
        )
        return row

    # -- snapshots --------------------------------------------------------------
    async def put_snapshot(self, run_id: str, seq: int, data: bytes, lease: Lease) -> None:
        await self._call(self._put_snapshot, run_id, seq, data, lease)

    def _put_snapshot(self, run_id: str, seq: int, data: bytes, lease: Lease) -> None:
        with self._transaction() as db:
            row = db.execute("SELECT epoch FROM runs WHERE run_id=?", (run_id,)).fetchone()
            if row is None:
                raise self._not_found(run_id)
            check_fence(run_id, lease, row[0], self.url)
            db.execute(
                "INSERT OR REPLACE INTO snapshots (run_id, seq, data) VALUES (?, ?, ?)",
                (run_id, seq, data),
            )

    async def get_snapshot(
        self, run_id: str, at_or_before: int | None = None
    ) -> tuple[int, bytes] | None:
        return await self._call(self._get_snapshot, run_id, at_or_before)

    def _get_snapshot(self, run_id: str, at_or_before: int | None) -> tuple[int, bytes] | None:
        limit = (1 << 63) - 1 if at_or_before is None else at_or_before
        row = (
            self._connection()
            .execute(
                "SELECT seq, data FROM snapshots WHERE run_id=? AND seq<=? "
                "ORDER BY seq DESC LIMIT 1",
                (run_id, limit),
            )
            .fetchone()
        )
        return None if row is None else (int(row[0]), bytes(row[1]))

    async def prune(self, run_id: str, keep: int) -> int:
        check_keep(keep)
        return await self._call(self._prune, run_id, keep)

    def _prune(self, run_id: str, keep: int) -> int:
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM runs WHERE run_id=?", (run_id,)).fetchone() is None:
                raise self._not_found(run_id)
            row = db.execute(
                "SELECT seq FROM snapshots WHERE run_id=? ORDER BY seq DESC LIMIT 1 OFFSET ?",
                (run_id, keep),
            ).fetchone()
            if row is None:
                return 0
            db.execute("DELETE FROM snapshots WHERE run_id=? AND seq<=?", (run_id, row[0]))
            return db.execute(
                "DELETE FROM records WHERE run_id=? AND seq<=?", (run_id, row[0])
            ).rowcount

    # -- ownership ------------------------------------------------------------
    async def acquire(self, run_id: str, owner: str, ttl: float = 30.0) -> Lease:
        check_run_id(run_id)
        lease = await self._call(self._acquire, run_id, owner, ttl)
        self._held[run_id] = lease.epoch
        return lease

    def _acquire(self, run_id: str, owner: str, ttl: float) -> Lease:
        now = time.time()
        with self._transaction() as db:
            row = db.execute(
                "SELECT epoch, owner, lease_expires_at FROM runs WHERE run_id=?", (run_id,)
            ).fetchone()
            if row is None:
                raise self._not_found(run_id)
            epoch, holder, expires = row
            mine = self._held.get(run_id) == epoch
            if holder is not None and (mine or (expires > now and not holder_is_dead(holder))):
                raise busy(run_id, holder, epoch)
            db.execute(
                "UPDATE runs SET epoch=?, owner=?, lease_expires_at=? WHERE run_id=?",
                (epoch + 1, owner, now + ttl, run_id),
            )
        return Lease(run_id, epoch + 1, owner, now + ttl)

    async def renew(self, lease: Lease, ttl: float = 30.0) -> Lease:
        return await self._call(self._renew, lease, ttl)

    def _renew(self, lease: Lease, ttl: float) -> Lease:
        expires = time.time() + ttl
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE runs SET lease_expires_at=? WHERE run_id=? AND epoch=? AND owner=?",
                (expires, lease.run_id, lease.epoch, lease.owner),
            )
            if cursor.rowcount == 0:
                self._held.pop(lease.run_id, None)
                raise lease_lost(lease)
        return Lease(lease.run_id, lease.epoch, lease.owner, expires)

    async def release(self, lease: Lease) -> None:
        await self._call(self._release, lease)
        if self._held.get(lease.run_id) == lease.epoch:
            del self._held[lease.run_id]

    def _release(self, lease: Lease) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE runs SET owner=NULL, lease_expires_at=NULL WHERE run_id=? AND epoch=?",
                (lease.run_id, lease.epoch),
            )

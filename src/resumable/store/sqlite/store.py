"""SQLiteStore: every run in one SQLite file, for one machine and no server.

Design note. One connection, owned by one dedicated thread: every call is a job on
that thread, so the event loop never blocks on disk and the connection is never
shared between threads. The file is in WAL mode; ``sync`` sets ``PRAGMA
synchronous`` (``fsync`` -> FULL: the WAL is fsynced at every commit, a commit
survives a power loss; ``flush`` -> NORMAL: the WAL is fsynced only at checkpoints,
a commit survives the process being killed but the last commits may roll back on a
power loss - never a corrupt file). Appends waiting at the same moment share one
transaction, so many runs pay for one fsync (group commit, :mod:`..group_commit`).

Loss. The ``-wal`` file is part of the store: a commit lives only there until a
checkpoint copies it into the main file, so a lost or damaged WAL silently takes the
last commits with it. Each run's last acknowledged seq is therefore also kept outside
the database, in ``<file>-heads/<run_id>`` (:mod:`..heads`), and a read reports it as
the high-water mark; the runs table's own ``last_seq`` covers rows deleted by hand.

Ownership is a lease row (epoch, owner, expiry) checked inside the write
transaction, plus an in-process check: a run this store holds counts as owned even
once its expiry passed, because this process is plainly alive. Several processes
may open the same file; SQLite serialises their writes (``BEGIN IMMEDIATE`` waits
up to ``busy_timeout`` seconds for the write lock).

Modules: the file, its thread and schema in :mod:`.connection`, blobs and
snapshots in :mod:`.blobs`, leases in :mod:`.leases`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self
from urllib.parse import unquote, urlsplit

from resumable.errors import (
    ConfigError,
    ResumableError,
    StoreError,
)
from resumable.store.base import Lease, ReadResult, RunMeta, RunSummary, StoredRecord, check_seqs
from resumable.store.common import (
    ClosedOnExit,
    already_exists,
    check_fence,
    check_run_id,
    check_status,
    check_sync,
    damaged_summary,
    holder_is_dead,
    meta_from_row,
    meta_json,
)
from resumable.store.group_commit import GroupCommit, PendingAppend
from resumable.store.heads import read_head, store_head
from resumable.store.holes import LogExtent
from resumable.store.sqlite.blobs import SQLiteBlobs
from resumable.store.sqlite.connection import RUN_COLUMNS
from resumable.store.sqlite.leases import SQLiteLeases


class SQLiteStore(SQLiteBlobs, SQLiteLeases, ClosedOnExit):
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

    async def aclose(self) -> None:
        await self._writer.stop()
        if self._executor is not None:
            with contextlib.suppress(StoreError):
                await self._call(self._close)
            self._executor.shutdown(wait=True)
            self._executor = None
        self._held.clear()

    # -- runs -----------------------------------------------------------------
    async def create_run(self, meta: RunMeta) -> None:
        check_run_id(meta.run_id)
        await self._call(self._create_run, meta)

    def _create_run(self, meta: RunMeta) -> None:
        check_status(meta)
        with self._transaction() as db:
            try:
                db.execute(
                    "INSERT INTO runs (run_id, meta, status, created_at, updated_at, seq_floor) "
                    "VALUES (?, ?, ?, ?, ?, 0)",
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
            .execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id=?", (run_id,))
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
            .execute(f"SELECT {RUN_COLUMNS} FROM runs ORDER BY created_at DESC, run_id DESC")
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

    def append_now(
        self,
        run_id: str,
        records: Sequence[StoredRecord],
        lease: Lease,
        blobs: Mapping[str, bytes] | None = None,
    ) -> bool:
        """``put_blob`` of ``blobs`` and ``append`` as one job on the store's thread, the
        caller blocked until it is done (before a synchronous step, which cannot await)."""
        check_seqs(records, 0)
        if self._executor is None or not self._writer.running:
            raise StoreError(f"the SQLite store {self.path} is not open (use `async with`)")
        item = PendingAppend(run_id, list(records), lease, asyncio.Future())

        def job() -> Exception | None:
            for digest, data in (blobs or {}).items():
                self._put_blob(run_id, digest, data)
            return self._append_batch([item])[0] if records else None

        outcome = self._executor.submit(self._guarded, job).result()
        if outcome is not None:
            raise outcome
        return True

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
        row = db.execute(
            "SELECT epoch, last_seq FROM runs WHERE run_id=?", (item.run_id,)
        ).fetchone()
        if row is None:
            raise self._not_found(item.run_id)
        check_fence(item.run_id, item.lease, row[0], self.url)
        # The log's own last seq (a pruned log's is its newest snapshot's), not the
        # high-water mark: after a loss accepted by the user the run goes on from there.
        last = self._last_seq(db, item.run_id)
        check_seqs(item.records, last)
        if not item.records:
            return
        if row[1] == 0 and last == 0 and item.records[0].seq > 1:
            # A log that starts later (a pruned run copied by `resumable migrate`): the
            # records before were never written here, which is not a loss.
            db.execute(
                "UPDATE runs SET seq_floor=max(coalesce(seq_floor, 0), ?) WHERE run_id=?",
                (item.records[0].seq - 1, item.run_id),
            )
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
        rows, high_water = self._of_run(
            run_id,
            "SELECT seq, epoch, data FROM records WHERE run_id=? AND seq>? ORDER BY seq",
            (run_id, after_seq),
        )
        records = [StoredRecord(seq, epoch, bytes(data)) for seq, epoch, data in rows]
        return ReadResult(records, high_water=high_water)

    def _of_run(self, run_id: str, query: str, args: tuple[object, ...]) -> tuple[list[Any], int]:
        """``query``'s rows, read in one transaction with the run's high-water mark (the
        head is read first: it is written after the commit)."""
        head = read_head(self.heads / run_id) or 0
        db = self._connection()
        db.execute("BEGIN")
        try:
            row = db.execute("SELECT last_seq FROM runs WHERE run_id=?", (run_id,)).fetchone()
            if row is None:
                raise self._not_found(run_id)
            rows = db.execute(query, args).fetchall()
        finally:
            db.execute("COMMIT")
        return rows, max(row[0], head)

    async def log_extent(self, run_id: str) -> LogExtent:
        """The run's log counted in the database (``holes.log_gap`` reads it only on a gap)."""
        return await self._call(self._log_extent, run_id)

    def _log_extent(self, run_id: str) -> LogExtent:
        floor = "seq_floor" if self._version >= 2 else "NULL"  # an old file, only read
        rows, high_water = self._of_run(
            run_id,
            f"SELECT min(seq), max(seq), count(*), (SELECT {floor} FROM runs WHERE run_id=?1) "
            "FROM records WHERE run_id=?1",
            (run_id,),
        )
        first, last, count, pruned = rows[0]
        return LogExtent(first, last, int(count), high_water, pruned)

    @staticmethod
    def _last_seq(db: sqlite3.Connection, run_id: str) -> int:
        row = db.execute(
            "SELECT max(coalesce((SELECT max(seq) FROM records WHERE run_id=?1), 0), "
            "coalesce((SELECT max(seq) FROM snapshots WHERE run_id=?1), 0))",
            (run_id,),
        ).fetchone()
        return int(row[0])

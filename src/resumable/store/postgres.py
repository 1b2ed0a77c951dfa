"""PostgresStore: runs in PostgreSQL, the store for more than one machine.

Design note. Fencing lives in the database: an append is one statement that
share-locks the run's row where ``runs.epoch`` is the lease's epoch, checks that the
first new seq follows the run's last one (read backwards off the records' primary
key) and inserts the records of exactly those runs, so the check and the write
commit together (a concurrent ``acquire`` holds or waits for the row: the append
waits for it and re-checks the new epoch). The runs row is not updated, and the
records have no foreign key to check: the fence proves the run exists. The same
statement sets the run's high-water mark in the narrow ``heads`` table, so a log that
later misses its tail or part of its middle is noticed on resume. Appends from many runs of
one process are committed together: a single writer task (:mod:`.group_commit`)
takes every append waiting when it wakes and sends them as one statement (each item
checked on its own, a stale one refused alone), then releases every waiter. Nothing
waits on a timer: an append that finds nothing else pending is one round trip of a
statement with plain parameters. The tables and their migrations are in
:mod:`.postgres_schema`.

``sync``: ``fsync`` -> ``synchronous_commit = on`` (a commit is on the server's
disk before the append returns); ``flush`` -> ``off`` (acknowledged before the WAL
is flushed: a server crash may lose the last few hundred ms of commits, never
corrupt or tear them). Both survive the writing process being killed.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, Self

import asyncpg

from resumable.errors import (
    ResumableError,
    StoreError,
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
    check_fence,
    check_run_id,
    check_status,
    damaged_summary,
    meta_from_row,
    meta_json,
    not_found,
    split_url,
    take_option,
)
from resumable.store.group_commit import GroupCommit, PendingAppend
from resumable.store.postgres_connect import DRIVER_ERRORS, SYNC_SETTINGS
from resumable.store.postgres_ownership import PostgresOwnership
from resumable.store.postgres_schema import SCHEMA_VERSION
from resumable.store.postgres_snapshots import PostgresSnapshots
from resumable.store.postgres_sql import (
    RUN_COLUMNS,
    group_columns,
)

__all__ = ["SCHEMA_VERSION", "SYNC_SETTINGS", "PostgresStore"]


class PostgresStore(PostgresSnapshots, PostgresOwnership):
    """Runs in PostgreSQL tables under one schema; appends group-committed."""

    def __init__(self, dsn: str, **options: Any) -> None:
        """``options``: those of :class:`.PostgresConnection` (sync, schema, pool size, timeout)."""
        super().__init__(dsn, **options)
        self._writer_conn: Any = None
        self._writer = GroupCommit(
            self._commit,
            name=f"resumable-pg:{self.schema}",
            one_append_per_run=True,
            queue_behind_direct=True,
        )

    @classmethod
    def from_url(cls, url: str, *, sync: str = "fsync", **options: Any) -> Self:
        """``postgresql://user:pw@host:port/db?schema=name``; ``schema`` is ours, not the driver's."""
        split_url(url, "PostgreSQL")
        return cls(take_option(url, "schema", options), sync=sync, **options)

    # -- lifecycle ------------------------------------------------------------
    async def __aenter__(self) -> Self:
        self._pool = await self._connect()
        try:
            async with self._pool.acquire() as conn:
                await self._migrate(conn)
        except BaseException:
            await self._pool.close()
            self._pool = None
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
        if self._pool is not None:
            if self._writer_conn is not None:
                await self._pool.release(self._writer_conn)
                self._writer_conn = None
            await self._pool.close()
            self._pool = None

    # -- key ------------------------------------------------------------------
    async def mac_key(self) -> bytes:
        async with self._conn("reading the MAC key") as conn:
            await conn.execute(
                f"INSERT INTO {self._s}.mac_key (key) VALUES ($1) ON CONFLICT DO NOTHING",
                secrets.token_bytes(32),
            )
            return bytes(await conn.fetchval(f"SELECT key FROM {self._s}.mac_key"))

    # -- runs -----------------------------------------------------------------
    async def create_run(self, meta: RunMeta) -> None:
        check_run_id(meta.run_id)
        check_status(meta)
        async with self._conn("creating a run") as conn, conn.transaction():
            status = await conn.execute(
                f"INSERT INTO {self._s}.runs (run_id, meta, status, created_at, updated_at) "
                "VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                meta.run_id,
                meta_json(meta),
                meta.status,
                meta.created_at,
                meta.updated_at,
            )
            if status.endswith(" 0"):
                raise already_exists(meta.run_id, self.url)
            await conn.execute(
                f"INSERT INTO {self._s}.heads (run_id, last_seq) VALUES ($1, 0) "
                "ON CONFLICT (run_id) DO UPDATE SET last_seq = 0",
                meta.run_id,
            )
            if meta.status in ("pending", "running"):
                # Sent at commit, when a worker's claim can see the run.
                await conn.execute("SELECT pg_notify($1, $2)", self.channel, meta.run_id)

    async def enqueue(self, meta: RunMeta) -> None:
        """Create the run as ``pending``, for a worker to ``claim``."""
        await self.create_run(replace(meta, status="pending"))

    async def get_meta(self, run_id: str) -> RunMeta:
        check_run_id(run_id)
        async with self._conn("reading a run") as conn:
            row = await conn.fetchrow(
                f"SELECT {RUN_COLUMNS} FROM {self._sql['runs']} WHERE r.run_id = $1", run_id
            )
        if row is None:
            raise not_found(run_id, self.url)
        return meta_from_row(row, self.url)

    async def put_meta(self, meta: RunMeta) -> None:
        check_status(meta)
        async with self._conn("updating a run") as conn:
            updated = await conn.fetchval(
                self._sql["put_meta"],
                meta.run_id,
                meta_json(meta),
                meta.status,
                meta.created_at,
                meta.updated_at,
                self.channel,
            )
        if not updated:
            raise not_found(meta.run_id, self.url)

    async def list_runs(self) -> list[RunSummary]:
        async with self._conn("listing runs") as conn:
            rows = await conn.fetch(
                f"SELECT {RUN_COLUMNS} FROM {self._sql['runs']} "
                "ORDER BY r.created_at DESC, r.run_id DESC"
            )
        summaries = []
        for r in rows:
            try:
                meta = meta_from_row(r, self.url)
            except StoreError as err:
                summaries.append(damaged_summary(r["run_id"], err.message))
                continue
            summaries.append(RunSummary(meta, r["last_seq"], r["last_write"], r["live"]))
        return summaries

    async def delete_run(self, run_id: str) -> None:
        async with self._conn("deleting a run") as conn, conn.transaction():
            # The run's row first: an append in progress is waited for, a later one refused.
            status = await conn.execute(f"DELETE FROM {self._s}.runs WHERE run_id = $1", run_id)
            if status.endswith(" 0"):
                raise not_found(run_id, self.url)
            await conn.execute(f"DELETE FROM {self._s}.records WHERE run_id = $1", run_id)
            await conn.execute(f"DELETE FROM {self._s}.heads WHERE run_id = $1", run_id)

    # -- the log --------------------------------------------------------------
    async def append(self, run_id: str, records: Sequence[StoredRecord], lease: Lease) -> None:
        check_seqs(records, 0)
        if lease.run_id != run_id or not records:
            async with self._conn("appending") as conn:
                epoch = await conn.fetchval(
                    f"SELECT epoch FROM {self._s}.runs WHERE run_id = $1", run_id
                )
            check_fence(run_id, lease, epoch, self.url)
            return
        if not self._writer.running:
            raise StoreError(f"the PostgreSQL store {self.url} is not open (use `async with`)")
        await self._writer.submit(run_id, records, lease)

    async def _commit(self, group: list[PendingAppend]) -> list[Exception | None]:
        """One statement for the whole group; why a refused item was refused comes after."""
        try:
            conn = await self._writer_connection()
            if len(group) == 1:
                (only,) = group
                columns = zip(*[(r.seq, r.epoch, r.data) for r in only.records], strict=True)
                written = await conn.fetch(
                    self._sql["append_one"],
                    only.run_id,
                    only.lease.epoch,
                    only.records[0].seq,
                    *columns,
                    only.records[-1].seq,
                )
                accepted = {0} if written else set()
            else:
                accepted = {
                    row[0]
                    for row in await conn.fetch(self._sql["append_many"], *group_columns(group))
                }
        except asyncpg.UniqueViolationError:
            # Another writer of the same epoch committed these seqs first: refused below.
            if len(group) > 1:
                return [(await self._commit([item]))[0] for item in group]
            accepted = set()
        except asyncpg.PostgresError as err:
            if len(group) > 1 and not isinstance(err, asyncpg.PostgresConnectionError):
                return [(await self._commit([item]))[0] for item in group]
            await self._drop_writer_connection()
            return [self._failure(err, "appending")] * len(group)
        except (asyncpg.InterfaceError, OSError, TimeoutError) as err:
            await self._drop_writer_connection()
            return [self._failure(err, "appending")] * len(group)
        refused = [item for n, item in enumerate(group) if n not in accepted]
        if not refused:
            return [None] * len(group)
        async with self._conn("appending") as check:
            found = await check.fetch(
                f"SELECT {RUN_COLUMNS} FROM {self._sql['runs']} WHERE r.run_id = ANY($1)",
                [item.run_id for item in refused],
            )
        state = {row["run_id"]: (row["epoch"], row["last_seq"]) for row in found}
        outcomes: list[Exception | None] = []
        for n, item in enumerate(group):
            if n in accepted:
                outcomes.append(None)
                continue
            epoch, last_seq = state.get(item.run_id, (None, 0))
            try:
                check_fence(item.run_id, item.lease, epoch, self.url)
                check_seqs(item.records, last_seq)
                outcomes.append(StoreError(f"append to run {item.run_id} was refused"))
            except (ResumableError, ValueError) as err:
                outcomes.append(err)
        return outcomes

    async def _writer_connection(self) -> Any:
        """The writer's own connection, replaced once the server or the pool dropped it."""
        try:
            usable = self._writer_conn is not None and not self._writer_conn.is_closed()
        except asyncpg.InterfaceError:  # the pool took it back after the server closed it
            usable = False
        if not usable:
            await self._drop_writer_connection()
            self._writer_conn = await self._pool.acquire()
        return self._writer_conn

    async def _drop_writer_connection(self) -> None:
        if self._writer_conn is not None:
            conn, self._writer_conn = self._writer_conn, None
            with contextlib.suppress(*DRIVER_ERRORS):
                await self._pool.release(conn)

    async def read(self, run_id: str, after_seq: int = 0) -> ReadResult:
        async with self._conn("reading the log") as conn:
            # The head first: an append commits it with its records, so the records
            # read next include at least those it counts.
            high_water = await conn.fetchval(
                f"SELECT last_seq FROM {self._s}.heads WHERE run_id = $1", run_id
            )
            rows = await conn.fetch(
                f"SELECT seq, epoch, data FROM {self._s}.records "
                "WHERE run_id = $1 AND seq > $2 ORDER BY seq",
                run_id,
                after_seq,
            )
            if not rows and not await self._exists(conn, run_id):
                raise not_found(run_id, self.url)
        records = [StoredRecord(r[0], r[1], bytes(r[2])) for r in rows]
        return ReadResult(records, high_water=high_water)

"""PostgresStore: runs in PostgreSQL, the store for more than one machine.

Design note. Fencing lives in the database. Each run has a narrow ``heads`` row: the
seq of its last acknowledged record (the high-water mark, so a log that later misses
its tail or part of its middle is noticed on resume) and the run's lease epoch, which
a trigger sets in the same transaction as every ``acquire`` or ``claim`` that bumps
``runs.epoch``. An append is one statement that updates the head only where the epoch
is the lease's and the last seq is the one before the append's first, and inserts the
records only if it did: fence, records and mark commit together, and an acquire
racing an append waits for it on the head's row lock, or makes it match nothing
(:mod:`.log`). The records have no foreign key to check, and the runs row is
neither locked nor updated. Appends from many runs of one process are committed
together: a single writer task (:mod:`..group_commit`) takes every append waiting when
it wakes and sends them as one statement (each item checked on its own, a stale one
refused alone), then releases every waiter. Nothing waits on a timer: an append that
finds nothing else pending is one round trip of a statement with plain parameters.
The tables and their migrations are in :mod:`.schema`.

``sync``: ``fsync`` -> ``synchronous_commit = on`` (a commit is on the server's
disk before the append returns); ``flush`` -> ``off`` (acknowledged before the WAL
is flushed: a server crash may lose the last few hundred ms of commits, never
corrupt or tear them). Both survive the writing process being killed.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any, Self

from resumable.errors import StoreError, UsageError
from resumable.store.base import RunMeta, RunSummary
from resumable.store.common import (
    ClosedOnExit,
    already_exists,
    check_run_id,
    check_status,
    damaged_summary,
    meta_from_row,
    meta_json,
    not_found,
    split_url,
    take_option,
)
from resumable.store.postgres.connect import SYNC_SETTINGS
from resumable.store.postgres.log import PostgresLog
from resumable.store.postgres.ownership import PostgresOwnership
from resumable.store.postgres.schema import SCHEMA_VERSION
from resumable.store.postgres.snapshots import PostgresSnapshots
from resumable.store.postgres.sql import RUN_COLUMNS

__all__ = ["SCHEMA_VERSION", "SYNC_SETTINGS", "PostgresStore"]


class PostgresStore(PostgresLog, PostgresSnapshots, PostgresOwnership, ClosedOnExit):
    """Runs in PostgreSQL tables under one schema; appends group-committed."""

    @classmethod
    def from_url(cls, url: str, *, sync: str = "fsync", **options: Any) -> Self:
        """``postgresql://user:pw@host:port/db?schema=name``; ``schema`` is ours, not the driver's."""
        split_url(url, "PostgreSQL")
        return cls(take_option(url, "schema", options), sync=sync, **options)

    # -- lifecycle ------------------------------------------------------------
    read_only = False
    """Opened only to be read: no schema made or upgraded, no key made (see ``to_read``)."""

    async def __aenter__(self) -> Self:
        self._pool = await self._connect()
        try:
            async with self._pool.acquire() as conn:
                if not self.read_only:
                    await self._migrate(conn)
                elif await conn.fetchval("SELECT to_regclass($1)", f"{self._s}.runs") is None:
                    raise UsageError(
                        f"no resumable store in schema {self.schema!r} of {self.url}; check "
                        "[durability] url",
                        url=self.url,
                    )
        except BaseException:
            await self._pool.close()
            self._pool = None
            raise
        self._writer.start()
        return self

    async def aclose(self) -> None:
        await self._close_log()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    # -- key ------------------------------------------------------------------
    async def mac_key(self) -> bytes:
        async with self._conn("reading the MAC key") as conn:
            if self.read_only:
                key = await conn.fetchval(f"SELECT key FROM {self._s}.mac_key")
                return bytes(key) if key is not None else secrets.token_bytes(32)
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
                f"INSERT INTO {self._s}.heads (run_id, last_seq, epoch) VALUES ($1, 0, 0) "
                "ON CONFLICT (run_id) DO UPDATE SET last_seq = 0, epoch = 0",
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
            # The run's row, then its head (as an acquire locks them): an append in progress
            # is waited for, a later one refused; the records last, those it wrote included.
            status = await conn.execute(f"DELETE FROM {self._s}.runs WHERE run_id = $1", run_id)
            if status.endswith(" 0"):
                raise not_found(run_id, self.url)
            await conn.execute(f"DELETE FROM {self._s}.heads WHERE run_id = $1", run_id)
            await conn.execute(f"DELETE FROM {self._s}.records WHERE run_id = $1", run_id)

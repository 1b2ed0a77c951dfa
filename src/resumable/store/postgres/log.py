"""The PostgreSQL store's log: appends fenced at the run's head, group-committed, and reads.

An append is one statement (:data:`.sql.APPEND_RECORD` and its neighbours):
the update of the run's ``heads`` row that checks the lease's epoch and that the first
new seq follows the head, and the insert of the records, which happens only if the
update matched. That is one round trip and two row writes, as close to a bare INSERT
as a fenced append gets. An append the head refused - a stale lease, a duplicate or
skipped seq, the first append after a loss the user accepted - is looked at again with
the head locked, and written then if the log's own last seq allows it, else refused
with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from resumable.errors import ResumableError, StoreError
from resumable.store.aside import LOCK_TIMEOUT_MS, AsideConnection
from resumable.store.base import Lease, ReadResult, StoredRecord, check_seqs
from resumable.store.common import check_fence, not_found
from resumable.store.group_commit import GroupCommit, PendingAppend
from resumable.store.holes import LogExtent
from resumable.store.postgres.connect import CONNECTION_LOST, DRIVER_ERRORS, PostgresConnection
from resumable.store.postgres.sql import group_columns


class PostgresLog(PostgresConnection):
    """Each run's records and head; appends of many runs share one statement."""

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
        self._aside: AsideConnection | None = None

    async def _close_log(self) -> None:
        """Commit what is waiting, then give the writer's connection back to the pool."""
        await self._writer.stop()
        if self._aside is not None:
            aside, self._aside = self._aside, None
            await asyncio.to_thread(aside.close)
        if self._pool is not None and self._writer_conn is not None:
            await self._pool.release(self._writer_conn)
            self._writer_conn = None

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

    def append_now(
        self,
        run_id: str,
        records: Sequence[StoredRecord],
        lease: Lease,
        blobs: Mapping[str, bytes] | None = None,
    ) -> bool:
        """``blobs`` and ``records`` written through a connection of their own while the caller
        blocks (a synchronous step: the run's loop cannot await meanwhile); False when the
        head refused the records or a lock held them up: they go with the next append, which
        looks again with the head locked."""
        check_seqs(records, 0)
        if self._pool is None or lease.run_id != run_id:
            return False
        if self._aside is None:
            self._aside = AsideConnection(self._connect_aside, _close_aside)

        async def write(conn: Any) -> bool:
            try:
                for digest, data in (blobs or {}).items():
                    await conn.execute(self._sql["put_blob"], run_id, digest, data)
                if not records:
                    return True
                status = await conn.execute(*self._append_statement(run_id, records, lease))
            except asyncpg.LockNotAvailableError:
                return False
            return not status.endswith(" 0")

        try:
            return self._aside.run(write)
        except DRIVER_ERRORS as err:
            raise self._failure(err, "appending") from err

    async def _connect_aside(self) -> Any:
        return await asyncpg.connect(
            self.dsn,
            timeout=self.connect_timeout,
            server_settings=self._settings(lock_timeout=f"{LOCK_TIMEOUT_MS}ms"),
        )

    def _append_statement(
        self, run_id: str, records: Sequence[StoredRecord], lease: Lease
    ) -> list[Any]:
        """One run's append fenced at its head: the statement and its arguments."""
        if len(records) == 1:
            (record,) = records
            return [
                self._sql["append_record"],
                run_id,
                lease.epoch,
                record.seq,
                record.epoch,
                record.data,
            ]
        columns = zip(*[(r.seq, r.epoch, r.data) for r in records], strict=True)
        return [
            self._sql["append_one"],
            run_id,
            lease.epoch,
            records[0].seq,
            *columns,
            records[-1].seq,
        ]

    async def _commit(self, group: list[PendingAppend]) -> list[Exception | None]:
        """The group at its heads in one statement; an append the heads refused, alone after."""
        try:
            accepted, resent = await self._at_heads(group)
        except DRIVER_ERRORS as err:
            return [self._failure(err, "appending")] * len(group)
        if accepted is None:  # e.g. one duplicate seq: the others must not fail with it
            return [(await self._commit([item]))[0] for item in group]
        return [
            None if n in accepted else await self._append_locked(item, resent=resent)
            for n, item in enumerate(group)
        ]

    async def _at_heads(self, group: list[PendingAppend]) -> tuple[set[int] | None, bool]:
        """:meth:`_append_at_heads` on the writer's connection, and whether it was sent
        again; None: the statement failed for a group, whose appends go one by one.

        A connection found dropped (the server restarted or ended the session, the network
        cut it) is replaced and the statement sent once more: the heads refuse whatever
        the first try did write, and the locked look counts it written (``_written_before``).
        """
        retried = False
        while True:
            conn = await self._writer_connection()
            try:
                return await self._append_at_heads(conn, group), retried
            except DRIVER_ERRORS as err:
                lost = isinstance(err, CONNECTION_LOST)
                if isinstance(err, asyncpg.PostgresError) and not lost:
                    return (None if len(group) > 1 else set()), retried  # the locked look says why
                await self._drop_writer_connection()
                if retried or not lost:
                    raise
                retried = True

    async def _append_at_heads(self, conn: Any, group: list[PendingAppend]) -> set[int]:
        """The positions in ``group`` of the appends written (those whose head matched)."""
        if len(group) > 1:
            rows = await conn.fetch(self._sql["append_many"], *group_columns(group))
            return {row[0] for row in rows}
        (only,) = group
        status = await conn.execute(*self._append_statement(only.run_id, only.records, only.lease))
        return set() if status.endswith(" 0") else {0}

    async def _append_locked(
        self, item: PendingAppend, *, resent: bool = False
    ) -> Exception | None:
        """Look at a refused append again with its head locked: write it, or say why not.
        ``resent``: its statement was sent again on a new connection (see ``_at_heads``)."""
        run_id, records = item.run_id, item.records
        try:
            conn = await self._writer_connection()
            async with conn.transaction():
                epoch = await conn.fetchval(self._sql["lock_head"], run_id)
                check_fence(run_id, item.lease, epoch, self.url)
                last_seq = await conn.fetchval(self._sql["log_end"], run_id)
                if last_seq is None:  # the run was deleted
                    raise not_found(run_id, self.url)
                if resent and await self._written_before(conn, item, last_seq):
                    return None
                check_seqs(records, last_seq)
                if last_seq == 0 and records[0].seq > 1:
                    await self._floor_below(conn, run_id, records[0].seq)
                columns = zip(*[(r.seq, r.epoch, r.data) for r in records], strict=True)
                await conn.execute(self._sql["append_locked"], run_id, *columns, records[-1].seq)
        except (ResumableError, ValueError) as err:
            return err
        except asyncpg.UniqueViolationError:  # a writer that does not lock the head was first
            return StoreError(f"append to run {run_id} was refused: its seqs are taken")
        except DRIVER_ERRORS as err:
            await self._drop_writer_connection()
            return self._failure(err, "appending")
        return None

    async def _written_before(self, conn: Any, item: PendingAppend, last_seq: int) -> bool:
        """Whether the log holds these very records already: an append sent again after its
        connection dropped, whose first try had committed before the reply was lost."""
        records = item.records
        if records[-1].seq > last_seq:
            return False
        rows = await conn.fetch(
            f"SELECT seq, epoch, data FROM {self._s}.records "
            "WHERE run_id = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq",
            item.run_id,
            records[0].seq,
            records[-1].seq,
        )
        stored = [(row[0], row[1], bytes(row[2])) for row in rows]
        return stored == [(r.seq, r.epoch, r.data) for r in records]

    async def _floor_below(self, conn: Any, run_id: str, first: int) -> None:
        """A log that starts later (a pruned run copied by `resumable migrate`): the records
        before ``first`` were never written here, which is not a loss (``holes.log_gap``)."""
        written = await conn.fetchval(
            f"SELECT last_seq FROM {self._s}.heads WHERE run_id = $1", run_id
        )
        if not written:
            await conn.execute(
                f"UPDATE {self._s}.runs SET seq_floor = greatest(seq_floor, $2) WHERE run_id = $1",
                run_id,
                first - 1,
            )

    async def _writer_connection(self) -> Any:
        """The writer's own connection, replaced once the server or the pool dropped it."""
        try:
            usable = self._writer_conn is not None and not self._writer_conn.is_closed()
        except asyncpg.InterfaceError:  # the pool took it back after the server closed it
            usable = False
        if not usable:
            await self._drop_writer_connection()
            conn = await self._pool.acquire()
            if conn.get_server_version() >= (12,):
                # The group statement's plan does not depend on its arrays: planning it
                # for each group's values (PostgreSQL's choice for it) costs more than it runs.
                await conn.execute("SET plan_cache_mode = force_generic_plan")
            self._writer_conn = conn
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

    async def log_extent(self, run_id: str) -> LogExtent:
        """The run's log counted in the server (``holes.log_gap`` reads it only on a gap)."""
        async with self._conn("reading the log") as conn:
            high_water = await conn.fetchval(
                f"SELECT last_seq FROM {self._s}.heads WHERE run_id = $1", run_id
            )
            row = await conn.fetchrow(
                f"SELECT min(seq), max(seq), count(*), "
                f"(SELECT seq_floor FROM {self._s}.runs WHERE run_id = $1) "
                f"FROM {self._s}.records WHERE run_id = $1",
                run_id,
            )
            if row[3] is None:
                raise not_found(run_id, self.url)
        return LogExtent(row[0], row[1], int(row[2]), high_water, int(row[3]))


async def _close_aside(conn: Any) -> None:
    try:
        await conn.close(timeout=5)
    except Exception:  # the server is gone: drop the connection
        conn.terminate()

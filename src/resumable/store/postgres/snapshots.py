"""The PostgreSQL store's blobs and snapshots, and pruning the log behind a snapshot."""

from __future__ import annotations

from collections.abc import Collection

import asyncpg

from resumable.errors import StoreError
from resumable.store.base import Lease
from resumable.store.common import blob_missing, check_fence, check_keep, not_found
from resumable.store.postgres.connect import PostgresConnection


class PostgresSnapshots(PostgresConnection):
    """Content-addressed blobs per run, snapshots at a seq, and ``prune``."""

    async def put_blob(self, run_id: str, digest: str, data: bytes) -> None:
        try:
            async with self._conn("writing a blob") as conn:
                await conn.execute(self._sql["put_blob"], run_id, digest, data)
        except StoreError as err:
            if isinstance(err.__cause__, asyncpg.ForeignKeyViolationError):
                raise not_found(run_id, self.url) from None
            raise

    async def get_blob(self, run_id: str, digest: str) -> bytes:
        async with self._conn("reading a blob") as conn:
            data = await conn.fetchval(
                f"SELECT data FROM {self._s}.blobs WHERE run_id = $1 AND digest = $2",
                run_id,
                digest,
            )
        if data is None:
            raise blob_missing(run_id, digest, self.url)
        return bytes(data)

    async def has_blob(self, run_id: str, digest: str) -> bool:
        async with self._conn("reading a blob") as conn:
            return bool(
                await conn.fetchval(
                    f"SELECT EXISTS (SELECT 1 FROM {self._s}.blobs "
                    "WHERE run_id = $1 AND digest = $2)",
                    run_id,
                    digest,
                )
            )

    async def list_blobs(self, run_id: str) -> dict[str, int]:
        async with self._conn("listing blobs") as conn, conn.transaction():
            if not await self._exists(conn, run_id):
                raise not_found(run_id, self.url)
            rows = await conn.fetch(
                f"SELECT digest, octet_length(data) FROM {self._s}.blobs WHERE run_id = $1",
                run_id,
            )
        return {row[0]: int(row[1]) for row in rows}

    async def delete_blobs(
        self, run_id: str, digests: Collection[str], lease: Lease | None = None
    ) -> int:
        async with self._conn("deleting blobs") as conn, conn.transaction():
            # FOR SHARE: an acquire (which updates the row) waits until the delete commits
            epoch = await conn.fetchval(
                f"SELECT epoch FROM {self._s}.runs WHERE run_id = $1 FOR SHARE", run_id
            )
            if epoch is None:
                raise not_found(run_id, self.url)
            if lease is not None:
                check_fence(run_id, lease, epoch, self.url)
            status = await conn.execute(
                f"DELETE FROM {self._s}.blobs WHERE run_id = $1 AND digest = ANY($2::text[])",
                run_id,
                list(digests),
            )
        return int(status.split()[-1])

    # -- snapshots --------------------------------------------------------------
    async def put_snapshot(self, run_id: str, seq: int, data: bytes, lease: Lease) -> None:
        async with self._conn("writing a snapshot") as conn:
            written = await conn.fetchval(
                f"WITH holder AS (SELECT run_id FROM {self._s}.runs "
                "WHERE run_id = $1 AND epoch = $2 FOR SHARE) "
                f"INSERT INTO {self._s}.snapshots (run_id, seq, data) "
                "SELECT run_id, $3, $4 FROM holder "
                "ON CONFLICT (run_id, seq) DO UPDATE SET data = EXCLUDED.data RETURNING 1",
                run_id,
                lease.epoch if lease.run_id == run_id else -1,
                seq,
                data,
            )
            if written is None:
                epoch = await conn.fetchval(
                    f"SELECT epoch FROM {self._s}.runs WHERE run_id = $1", run_id
                )
                check_fence(run_id, lease, epoch, self.url)

    async def get_snapshot(
        self, run_id: str, at_or_before: int | None = None
    ) -> tuple[int, bytes] | None:
        async with self._conn("reading a snapshot") as conn:
            row = await conn.fetchrow(
                f"SELECT seq, data FROM {self._s}.snapshots WHERE run_id = $1 "
                "AND ($2::bigint IS NULL OR seq <= $2) ORDER BY seq DESC LIMIT 1",
                run_id,
                at_or_before,
            )
        return None if row is None else (row[0], bytes(row[1]))

    async def prune(self, run_id: str, keep: int) -> int:
        check_keep(keep)
        async with self._conn("pruning") as conn, conn.transaction():
            if not await self._exists(conn, run_id):
                raise not_found(run_id, self.url)
            # the oldest snapshot kept, if one older goes: it stands for the records up to it
            newest = await conn.fetch(
                f"SELECT seq FROM {self._s}.snapshots WHERE run_id = $1 ORDER BY seq DESC LIMIT $2",
                run_id,
                keep + 1,
            )
            if len(newest) <= keep:
                return 0
            cut = newest[keep - 1][0]
            # The run's last seq and write time outlive its records.
            await conn.execute(
                f"UPDATE {self._s}.runs AS r SET seq_floor = x.seq, last_write = x.written_at "
                f"FROM (SELECT seq, written_at FROM {self._s}.records WHERE run_id = $1 "
                "AND seq <= $2 ORDER BY seq DESC LIMIT 1) AS x "
                "WHERE r.run_id = $1 AND x.seq > r.seq_floor",
                run_id,
                cut,
            )
            await conn.execute(
                f"DELETE FROM {self._s}.snapshots WHERE run_id = $1 AND seq < $2", run_id, cut
            )
            status = await conn.execute(
                f"DELETE FROM {self._s}.records WHERE run_id = $1 AND seq <= $2", run_id, cut
            )
        return int(status.split()[-1])

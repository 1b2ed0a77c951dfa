"""Blobs and snapshots of the SQLite store, and pruning the log behind a snapshot.

Pruning raises the run's ``seq_floor`` (the highest seq pruned away) in the transaction
that deletes the records, so a log that starts after ``seq_floor + 1`` lost its first
records to something else (``holes.log_gap``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from typing import Any

from resumable.store.base import Lease
from resumable.store.common import blob_missing, check_fence, check_keep
from resumable.store.sqlite.connection import SQLiteConnection


class SQLiteBlobs(SQLiteConnection):
    """The ``blobs`` and ``snapshots`` tables."""

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

    async def list_blobs(self, run_id: str) -> dict[str, int]:
        return await self._call(self._list_blobs, run_id)

    def _list_blobs(self, run_id: str) -> dict[str, int]:
        db = self._connection()
        if db.execute("SELECT 1 FROM runs WHERE run_id=?", (run_id,)).fetchone() is None:
            raise self._not_found(run_id)
        rows = db.execute("SELECT digest, length(data) FROM blobs WHERE run_id=?", (run_id,))
        return {str(digest): int(size) for digest, size in rows}

    async def delete_blobs(
        self, run_id: str, digests: Collection[str], lease: Lease | None = None
    ) -> int:
        return await self._call(self._delete_blobs, run_id, list(digests), lease)

    def _delete_blobs(self, run_id: str, digests: list[str], lease: Lease | None) -> int:
        with self._transaction() as db:
            row = db.execute("SELECT epoch FROM runs WHERE run_id=?", (run_id,)).fetchone()
            if row is None:
                raise self._not_found(run_id)
            if lease is not None:
                check_fence(run_id, lease, row[0], self.url)
            deleted = 0
            for digest in digests:
                deleted += db.execute(
                    "DELETE FROM blobs WHERE run_id=? AND digest=?", (run_id, digest)
                ).rowcount
            return deleted

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
            newest = db.execute(
                "SELECT seq FROM snapshots WHERE run_id=? ORDER BY seq DESC LIMIT ?",
                (run_id, keep + 1),
            ).fetchall()
            if len(newest) <= keep:
                return 0
            cut = newest[keep - 1][0]  # the oldest snapshot kept stands for the records to it
            # The floor in the same transaction as the deletion: never one without the other.
            db.execute(
                "UPDATE runs SET seq_floor=max(coalesce(seq_floor, 0), ?) WHERE run_id=?",
                (cut, run_id),
            )
            db.execute("DELETE FROM snapshots WHERE run_id=? AND seq<?", (run_id, cut))
            return db.execute(
                "DELETE FROM records WHERE run_id=? AND seq<=?", (run_id, cut)
            ).rowcount

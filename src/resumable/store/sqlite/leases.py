"""Ownership of runs in the SQLite store: a lease row (epoch, owner, expiry) per run.

A run this store holds (``_held``) counts as owned even once its expiry passed, because
this process is plainly alive; another process takes it over only once the lease
expired or its holder is dead.
"""

from __future__ import annotations

import time

from resumable.store.base import Lease
from resumable.store.common import busy, check_run_id, holder_is_dead, lease_lost
from resumable.store.sqlite.connection import SQLiteConnection


class SQLiteLeases(SQLiteConnection):
    """Acquire, renew and release the lease row of a run."""

    _held: dict[str, int]

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

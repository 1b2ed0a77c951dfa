"""The PostgreSQL store's ownership: leases with fencing epochs, and claims by workers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import replace

from resumable.errors import StoreError
from resumable.store.base import Lease
from resumable.store.common import busy, check_run_id, lease_lost, not_found
from resumable.store.postgres.connect import DRIVER_ERRORS, PostgresConnection


class PostgresOwnership(PostgresConnection):
    """Who drives a run: ``acquire`` and ``claim`` bump the epoch that fences appends."""

    async def acquire(self, run_id: str, owner: str, ttl: float = 30.0) -> Lease:
        check_run_id(run_id)
        async with self._conn("acquiring a run") as conn:
            row = await conn.fetchrow(
                f"UPDATE {self._s}.runs SET epoch = epoch + 1, owner = $2, "
                "lease_expires_at = now() + make_interval(secs => $3) "
                "WHERE run_id = $1 AND (owner IS NULL OR lease_expires_at < now()) "
                "RETURNING epoch, extract(epoch FROM lease_expires_at)::float8",
                run_id,
                owner,
                float(ttl),
            )
            if row is not None:
                return Lease(run_id, row[0], owner, row[1])
            holder = await conn.fetchrow(
                f"SELECT owner, epoch FROM {self._s}.runs WHERE run_id = $1", run_id
            )
        if holder is None:
            raise not_found(run_id, self.url)
        raise busy(run_id, holder["owner"], holder["epoch"])

    async def claim(self, owner: str, ttl: float, limit: int) -> list[Lease]:
        """Take up to ``limit`` runs that are ``pending`` or ``running`` with no live owner.

        Oldest first; rows another worker is claiming are skipped, not waited for.
        A ``waiting`` run waits for a human, not for a worker, so it is never claimed.
        """
        async with self._conn("claiming runs") as conn:
            rows = await conn.fetch(self._sql["claim"], owner, float(ttl), limit)
        rows = sorted(rows, key=lambda r: (r[3], r[0]))
        return [Lease(r[0], r[1], owner, r[2]) for r in rows]

    async def renew(self, lease: Lease, ttl: float = 30.0) -> Lease:
        async with self._conn("renewing a lease") as conn:
            expires = await conn.fetchval(
                f"UPDATE {self._s}.runs SET lease_expires_at = now() + make_interval(secs => $4) "
                "WHERE run_id = $1 AND epoch = $2 AND owner = $3 "
                "RETURNING extract(epoch FROM lease_expires_at)::float8",
                lease.run_id,
                lease.epoch,
                lease.owner,
                float(ttl),
            )
        if expires is None:
            raise lease_lost(lease)
        return replace(lease, expires_at=expires)

    async def release(self, lease: Lease) -> None:
        """Let the run go; if it still needs a worker, idle workers are woken to claim it."""
        async with self._conn("releasing a run") as conn:
            await conn.fetchval(self._sql["release"], lease.run_id, lease.epoch, self.channel)

    async def watch_runs(
        self, wake: Callable[[str | None], None], *, retry_seconds: float = 1.0
    ) -> None:
        """Call ``wake(run_id)`` whenever a run may have become claimable; end only when cancelled.

        Listens on the store's channel on a connection of its own. ``wake(None)`` is
        called on every (re)subscription, so a run announced while nobody listened is
        claimed too; after a lost connection it listens again ``retry_seconds`` later.
        A wake only prompts a ``claim``: leases and fencing are unchanged.
        """
        while True:
            with contextlib.suppress(*DRIVER_ERRORS, StoreError):
                await self._listen(wake)
            await asyncio.sleep(retry_seconds)

    async def _listen(self, wake: Callable[[str | None], None]) -> None:
        """Listen until the connection is lost (or the watch is cancelled)."""
        if self._pool is None:
            raise StoreError(f"the PostgreSQL store {self.url} is not open (use `async with`)")
        lost = asyncio.Event()
        conn = await self._pool.acquire()

        def announced(_conn: object, _pid: int, _channel: str, run_id: str) -> None:
            wake(run_id)

        def closed(_conn: object) -> None:
            lost.set()

        conn.add_termination_listener(closed)
        try:
            await conn.add_listener(self.channel, announced)
            wake(None)
            await lost.wait()
        finally:
            conn.remove_termination_listener(closed)
            with contextlib.suppress(*DRIVER_ERRORS):
                if not conn.is_closed():
                    await conn.remove_listener(self.channel, announced)
                await self._pool.release(conn)

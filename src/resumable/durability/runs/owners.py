"""Who owns a run: this process's owner name, and taking a run from an owner that died here.

A store whose leases expire (SQLite, PostgreSQL, Redis) keeps a killed owner's lease
until it lapses. An owner is named ``host:pid``; when the host is this one and no process
has that pid any more, the owner is dead for certain, so its lease is released (under its
own epoch: a live owner that took the run meanwhile is not touched) and the run acquired
at once instead of a refusal naming a process that no longer exists.
"""

from __future__ import annotations

import os
import socket
from dataclasses import replace

from resumable.errors import RunBusyError
from resumable.store.base import CheckpointStore, Lease, RunSummary

__all__ = ["acquire", "dead_here", "listed", "owner_name"]


def owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


async def acquire(
    store: CheckpointStore, run_id: str, ttl: float = 30.0, owner: str | None = None
) -> Lease:
    """Own ``run_id`` (for this process, or ``owner``), taking it from an owner that died
    on this host."""
    owner = owner or owner_name()
    try:
        return await store.acquire(run_id, owner, ttl)
    except RunBusyError as busy:
        holder, epoch = busy.fields.get("owner"), busy.fields.get("epoch")
        if not (isinstance(holder, str) and isinstance(epoch, int) and dead_here(holder)):
            raise
        await store.release(Lease(run_id, epoch, holder))
        return await store.acquire(run_id, owner, ttl)


async def listed(store: CheckpointStore) -> list[RunSummary]:
    """The store's runs, a run whose owner died on this host no longer live (crashed)."""
    return [
        replace(s, live=False) if s.live and s.meta.owner and dead_here(s.meta.owner) else s
        for s in await store.list_runs()
    ]


def dead_here(owner: str) -> bool:
    """Whether ``owner`` (``host:pid``) was a process of this host that no longer runs."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # it runs, as another user
        return False
    return False

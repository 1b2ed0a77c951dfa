"""Submitting to the worker fleet: the fleet store protocol and queueing a run.

A run is queued in PostgreSQL with its ``run`` record already written, so any worker
can claim it; the worker side is in :mod:`resumable.fleet.worker`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Protocol, runtime_checkable

from resumable.config import Config
from resumable.durability.log import hashseed
from resumable.durability.log.checkpoints import CheckpointManager
from resumable.durability.log.run_state import RunState
from resumable.durability.runs.owners import owner_name
from resumable.durability.runs.session import codec_for, new_run_id, store_for
from resumable.errors import ConfigError, UsageError
from resumable.store.base import CREATOR, CheckpointStore, Lease, RunMeta


@runtime_checkable
class FleetStore(CheckpointStore, Protocol):
    """A store workers on many machines can share: runs are claimed, not just acquired."""

    async def claim(self, owner: str, ttl: float, limit: int) -> list[Lease]: ...

    async def watch_runs(
        self, wake: Callable[[str | None], None], *, retry_seconds: float = 1.0
    ) -> None:
        """Call ``wake(run_id)`` when a run may have become claimable, until cancelled."""


def fleet_store(store: CheckpointStore, command: str) -> FleetStore:
    """The store, if workers can claim runs from it; else a ConfigError saying what to set."""
    if not isinstance(store, FleetStore):
        raise ConfigError(
            f"`resumable {command}` needs a store that workers claim runs from; "
            f'{store.url} is not one: set [durability] store = "postgres" and url '
            "(or RESUMABLE_DURABILITY_STORE=postgres, RESUMABLE_DURABILITY_URL=...)",
            key="durability.store",
        )
    return store


# -- submitting ----------------------------------------------------------------------------
def _first_record(path: Path) -> tuple[str, dict[str, object]]:
    """The run's kind and its ``run`` record, which holds the exact text that will run."""
    if path.suffix == ".pb":
        from resumable.playbooks.loading import load_program
        from resumable.playbooks.runner import first_record

        # workers run elsewhere; the record names the program where its responses sit
        return "playbook", first_record(path, load_program(path))
    if path.suffix == ".py":
        from resumable.script import read_script

        return "script", {"program": str(path), "kind": "script", "source": read_script(path)}
    raise UsageError(
        f"{path}: `resumable submit` takes a .py script or a .pb program", path=str(path)
    )


async def submit(
    path: Path, config: Config, *, env: Mapping[str, str], run_id: str | None = None
) -> str:
    """``resumable submit``: queue ``path`` as a new run for the workers; return its id."""
    store = fleet_store(store_for(config.durability, config), "submit")
    async with store:
        return await queue_run(store, path, config, env=env, run_id=run_id)


async def queue_run(
    store: FleetStore,
    path: Path,
    config: Config,
    *,
    env: Mapping[str, str],
    run_id: str | None = None,
) -> str:
    """Queue ``path`` as a new run in an open store; return its id.

    The run is created ``waiting`` (which no worker claims), given its ``run`` record
    under a lease, then made ``pending`` while that lease is still held, so a worker
    never finds it half written. It records the store's hash seed, which workers start with.
    """
    kind, first = _first_record(path)
    settings = config.durability
    codec = await codec_for(store, settings, env)
    now = time.time()
    meta = RunMeta(
        run_id or new_run_id(),
        program=str(path),
        kind=kind,
        status="waiting",
        created_at=now,
        updated_at=now,
        # the probe of the seed is asked of a fresh interpreter (once a process): not on the loop
        extra={
            **await asyncio.to_thread(hashseed.queued_fields, hashseed.store_seed(codec)),
            CREATOR: owner_name(),
        },
    )
    await store.create_run(meta)
    lease = await store.acquire(meta.run_id, owner_name(), settings.lease_seconds)
    try:
        manager = CheckpointManager(store, codec, lease, RunState())
        await manager.write("run", "main", dict(first))
        await store.put_meta(replace(meta, status="pending", updated_at=time.time()))
    finally:
        await store.release(lease)
    return meta.run_id


__all__ = ["FleetStore", "fleet_store", "queue_run", "submit"]

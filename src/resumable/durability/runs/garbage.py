"""``resumable gc``: delete old finished runs, prune the others, sweep their superseded blobs.

Each step removes only what nothing kept needs: a finished run older than the cutoff
goes whole, and so does a run left unfinished (a fork ``fork`` stopped writing, a run
killed before its first record: neither can ever run) that nothing still makes; a run
no live process owns is pruned to its ``keep`` newest snapshots, then loses the blobs no
record or snapshot still in the store refers to (:mod:`resumable.durability.runs.blob_sweep`);
a run that is running is left alone. A store that keeps freed space in its file (SQLite) is
then compacted (``reclaim``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from resumable.durability.log.records import RecordCodec
from resumable.durability.runs import owners
from resumable.durability.runs.blob_sweep import sweep_blobs
from resumable.errors import UsageError
from resumable.store.base import CREATOR, UNFINISHED, CheckpointStore, RunMeta

__all__ = ["GarbageReport", "collect_garbage"]


@dataclass(frozen=True, slots=True)
class GarbageReport:
    deleted_runs: list[str]
    pruned_records: int
    reclaimed_bytes: int | None = None
    """What the store file shrank by (SQLite's ``VACUUM``); None: a store without that step."""
    swept_blobs: int = 0
    """Blobs of the kept runs that nothing kept referred to any more, deleted."""
    swept_bytes: int = 0
    """Their stored size."""
    unswept: dict[str, str] = field(default_factory=dict)
    """Runs whose blobs were left as they were, and why (a log that does not verify...)."""
    sweep_skipped: str | None = None
    """Why no blob was swept at all (no codec to verify records with: a key not set)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


async def collect_garbage(
    store: CheckpointStore,
    *,
    older_than_days: float,
    keep: int,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
    codec: RecordCodec | None = None,
) -> GarbageReport:
    """Delete finished runs older than the cutoff; prune and sweep the others.

    Every key, row and file of a deleted run goes with it. Blobs are swept only with
    ``codec`` (it verifies the records that say which blobs are still needed).
    ``dry_run`` changes nothing and counts the blobs a sweep would delete now.
    """
    if not math.isfinite(older_than_days) or older_than_days < 0:
        raise UsageError(
            f"--older-than-days must be a number of days >= 0, not {older_than_days}",
            value=older_than_days,
        )
    cutoff = time.time() - older_than_days * 86400
    deleted: list[str] = []
    pruned = swept = swept_bytes = 0
    unswept: dict[str, str] = {}
    for summary in await owners.listed(store):
        meta = summary.meta
        if summary.damaged is not None:
            continue  # `resumable repair` it first: its metadata says nothing to go by
        old = summary.status in ("completed", "failed", "cancelled") and meta.updated_at < cutoff
        left = summary.status == UNFINISHED and _abandoned(meta)
        if old or left:
            deleted.append(meta.run_id)
            if not dry_run:
                await store.delete_run(meta.run_id)
            continue
        if summary.live:
            continue
        if not dry_run:
            pruned += await store.prune(meta.run_id, keep)
        if codec is not None:
            sweep = await sweep_blobs(store, codec, meta.run_id, dry_run=dry_run)
            swept, swept_bytes = swept + sweep.deleted, swept_bytes + sweep.reclaimed_bytes
            if sweep.skipped is not None:
                unswept[meta.run_id] = sweep.skipped
    reclaim = getattr(store, "reclaim", None)
    if reclaim is None or dry_run:
        return GarbageReport(deleted, pruned, None, swept, swept_bytes, unswept)
    reclaimed: int = await reclaim() if deleted or pruned or swept else 0
    return GarbageReport(deleted, pruned, reclaimed, swept, swept_bytes, unswept)


_STARTING_SECONDS = 600.0
"""How long a run left unfinished by a process of another host is kept: its start (or its
fork) may still be under way, between creating the run and owning it."""


def _abandoned(meta: RunMeta) -> bool:
    """Whether nothing is still writing an unfinished run: the process that made it (of
    this host) is gone, or the run is older than any start takes."""
    maker = meta.owner or meta.extra.get(CREATOR)
    if isinstance(maker, str) and owners.dead_here(maker):
        return True
    return meta.updated_at < time.time() - _STARTING_SECONDS

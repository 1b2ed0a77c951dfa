"""Whether a run's log is whole: every seq from its start to its high-water mark present.

A resume folds only the records after the newest snapshot, so a record lost from below
it (a deleted row, key or stream entry) would otherwise go unseen by ``runs``, ``show``
and ``resume``. This looks at the whole log. Stores that can count a run's records
cheaply say so with ``log_extent`` (first seq, last seq, count, high-water mark); the
others are read. The log is read only when the extent shows a gap, to name it.

A log whose start was pruned behind a snapshot starts after 1: that is whole as long
as a snapshot covers the records before its first one. Every store also keeps the
highest seq pruned (``floor``, written before or with the deletion), so a first record
deleted by hand is told from a pruned one. Runs the folder and SQLite stores wrote
before they kept it have none (None): for them any start a snapshot covers is taken as
pruned. A snapshot the log relies on that is gone is reported as the records it stood
for being missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from resumable.store.base import CheckpointStore, ReadResult


@dataclass(frozen=True, slots=True)
class LogExtent:
    """A run's log counted, not read: its first and last seq, how many, the high-water mark."""

    first: int | None
    last: int | None
    count: int
    high_water: int | None
    floor: int | None = None
    """The highest seq pruned away on purpose (0: none); None if the store does not keep it."""


async def log_extent(store: CheckpointStore, run_id: str) -> LogExtent:
    """The store's own count if it has one, else the log read and counted."""
    counted = getattr(store, "log_extent", None)
    if counted is not None:
        extent: LogExtent = await counted(run_id)
        return extent
    result = await store.read(run_id, 0)
    seqs = [r.seq for r in result.records]
    if not seqs:
        return LogExtent(None, None, 0, result.high_water)
    return LogExtent(seqs[0], seqs[-1], len(seqs), result.high_water)


async def log_gap(store: CheckpointStore, run_id: str) -> tuple[tuple[int, int], ReadResult] | None:
    """The first range of seqs missing from the run's log (and the read that found it), or None."""
    extent = await log_extent(store, run_id)
    top = max(extent.last or 0, extent.high_water or 0)
    if top == 0:
        return None
    floor = 0
    if extent.first is None or extent.first > 1:
        snapshot = await store.get_snapshot(run_id)
        covered = 0 if snapshot is None else snapshot[0]
        if extent.first is None:
            if covered >= top:
                return None  # every record pruned behind the newest snapshot
        else:
            pruned = extent.first - 1
            if extent.floor is not None:
                pruned = min(extent.floor, pruned)
            if covered >= pruned:
                floor = pruned  # pruned behind a snapshot that is still there
    whole = (
        extent.first == floor + 1
        and extent.last is not None
        and extent.count == extent.last - floor
        and top == extent.last
    )
    if whole:
        return None
    result = await store.read(run_id, floor)
    gap = result.missing(floor)
    return None if gap is None else (gap, result)

"""Pruning a file-store run's log behind a snapshot, and the floor that remembers it.

``runs/<run_id>/floor`` holds the highest seq pruned away on purpose, in the head's
12-byte format (:mod:`resumable.store.heads`); a run is created with 0. A log that
starts after ``floor + 1`` lost its first records to something else, which
``holes.log_gap`` reports as it does for PostgreSQL and Redis.

Order. A prune writes the raised floor - a temp file renamed over it, fsynced with its
folder under ``sync = "fsync"`` - before it removes a snapshot or a record. A crash in
between leaves a floor above a log that still holds those records, which is harmless
(the floor is only an upper bound: ``log_gap`` takes the smaller of it and the log's
start); it never leaves records gone with no floor saying so. Readers read the log
first and the floor after it, so a prune running meanwhile is seen as a higher floor,
never as a log that lost its start. Prunes of one run are serialised under
``meta.lock``, so a floor never goes down.

A run written before the floor was kept has no file (nor one with a bad checksum): its
floor is unknown, and a log start a snapshot covers is taken as pruned, as before.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from resumable.store.filesystem.owner import try_lock
from resumable.store.filesystem.segments import (
    drop_covered,
    fsync_dir,
    list_segments,
    list_snapshots,
    write_atomic,
)
from resumable.store.heads import encode_head, read_head

FLOOR = "floor"


def read_floor(run_dir: Path) -> int | None:
    """The highest seq pruned from the run's log; None if the run does not say."""
    return read_head(run_dir / FLOOR)


def raise_floor(run_dir: Path, seq: int, *, fsync: bool) -> None:
    """Make the floor at least ``seq``, durably (with ``fsync``) before returning."""
    if seq > (read_floor(run_dir) or 0):
        write_atomic(run_dir / FLOOR, encode_head(seq), fsync)


def prune_log(run_dir: Path, keep: int, owned_here: bool, *, fsync: bool) -> int:
    """Drop all but the newest ``keep`` snapshots and the records the oldest kept covers.

    A log another process owns keeps its newest segment (that owner writes it). Returns
    how many records were dropped.
    """
    fd = os.open(run_dir / "meta.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        snaps = list_snapshots(run_dir)
        if len(snaps) <= keep:
            return 0
        probe = None if owned_here else try_lock(run_dir / "lock")
        try:
            may_touch_newest = owned_here or probe is not None
            cut = snaps[-keep]
            segments = list_segments(run_dir)
            if segments and not may_touch_newest:
                cut = min(cut, segments[-1][0] - 1)  # nothing of the owner's segment goes
            raise_floor(run_dir, cut, fsync=fsync)  # first: see the module's docstring
            for seq in snaps[:-keep]:
                (run_dir / "snapshots" / f"{seq:020d}.snap").unlink(missing_ok=True)
            dropped = drop_covered(run_dir / "log", cut, may_touch_newest, fsync)
        finally:
            if probe is not None:
                os.close(probe)
    finally:
        os.close(fd)
    if fsync:
        fsync_dir(run_dir / "snapshots")
    return dropped

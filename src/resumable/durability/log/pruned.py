"""Where a pruned log folds from: the oldest snapshot kept at or after the log's start.

Compaction deletes old snapshots and the records they cover. The folder store cuts at the
oldest snapshot it keeps; the SQLite, PostgreSQL and Redis stores at the newest one they
drop, so their log can hold records before the oldest snapshot kept with nothing left to
fold them from. Whatever reads a pruned log in order (``steps``, the inspector's
timeline, ``fork``) starts from the snapshot found here and reads the records after it.
"""

from __future__ import annotations

import msgpack

from resumable.durability.log.records import RecordCodec
from resumable.durability.log.run_state import RunState
from resumable.durability.log.state_codec import state_from_dict
from resumable.errors import UsageError
from resumable.store.base import CheckpointStore


async def oldest_base(
    store: CheckpointStore, run_id: str, first: int, last: int
) -> tuple[int, bytes] | None:
    """The oldest snapshot (seq, sealed) at or after ``first - 1``, the seq before the
    log's first record, up to ``last``; None if none is kept (the log lost its start)."""
    oldest, at = None, last
    while at >= 0 and (found := await store.get_snapshot(run_id, at)) is not None:
        if found[0] < first - 1:
            break
        oldest, at = found, found[0] - 1
    return oldest


def open_state(codec: RecordCodec, run_id: str, snapshot: tuple[int, bytes]) -> RunState:
    """The folded state a snapshot holds, its MAC verified."""
    seq, sealed = snapshot
    record = codec.open(sealed, run_id=run_id, seq=seq)
    return state_from_dict(msgpack.unpackb(record.body["state"], raw=False))


def before_the_oldest(
    run_id: str, at: int, purpose: str, *, first: int, oldest: int, last: int
) -> UsageError:
    """``--at`` below where a pruned log can be folded from, as one line with the range."""
    return UsageError(
        f"run {run_id} has no record {at} {purpose} (its log was pruned up to record "
        f"{first - 1}, its oldest snapshot is at record {oldest}): choose --at between "
        f"{oldest} and {last}",
        run_id=run_id,
        at=at,
    )

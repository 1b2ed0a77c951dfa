"""Rebuild a run's metadata from its verified log (``resumable repair``).

A run's metadata (the file store's ``meta.json``, a row's ``meta`` column, a Redis
hash) can be damaged while its log is whole. The log is the truth: its ``run``
record names the program and kind, its ``status`` records the status, every record
its time. Repair verifies and folds the log exactly as a resume would (a bad MAC or
lost records refuse it, nothing written) and then writes metadata built from it.
What only the metadata held - a fork's parent, free-form ``extra`` - is not in the
log and comes back empty.
"""

from __future__ import annotations

from dataclasses import dataclass

from resumable.durability.log.records import RecordCodec
from resumable.durability.runs.recovery import RunLoader
from resumable.errors import StoreError, UsageError
from resumable.store.base import CheckpointStore, RunMeta, RunStatus
from resumable.store.common import check_run_id

_ENDED: dict[str, RunStatus] = {"completed": "completed", "failed": "failed", "waiting": "waiting"}


@dataclass(frozen=True, slots=True)
class Repaired:
    run_id: str
    status: str
    records: int
    reason: str
    """What was wrong with the metadata before."""


async def repair_run(store: CheckpointStore, codec: RecordCodec, run_id: str) -> Repaired:
    """Replace the run's unreadable metadata with what its log says; refuse if it is fine."""
    check_run_id(run_id)
    try:
        await store.get_meta(run_id)
    except StoreError as err:
        reason = err.message
    else:
        raise UsageError(
            f"run {run_id}: its metadata is fine; nothing to repair (see `resumable show {run_id}`)",
            run_id=run_id,
        )
    placeholder = RunMeta(run_id, "?")
    loaded = await RunLoader(store, codec).load(run_id, meta=placeholder)
    state = loaded.state
    if state.seq == 0 or not state.program:
        raise UsageError(
            f"run {run_id}: its log has no `run` record to rebuild the metadata from; "
            "there is nothing to repair (delete the run)",
            run_id=run_id,
        )
    first = (await store.read(run_id, 0)).records
    created = codec.open(first[0].data, run_id=run_id, seq=first[0].seq).time if first else 0.0
    meta = RunMeta(
        run_id,
        state.program,
        kind=state.kind,
        status=_ENDED.get(state.status, "running"),  # running + no owner = crashed: resumable
        created_at=created or state.time,
        updated_at=state.time,
    )
    await store.put_meta(meta)
    return Repaired(run_id, meta.status, loaded.records_read, reason)

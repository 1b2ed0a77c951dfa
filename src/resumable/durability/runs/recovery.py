"""RunLoader: load a run's checkpoints, verify them, fold them (resumed by the coordinator).

Resume time is bounded by snapshots: the newest snapshot is the folded state as of
its seq, so only the records after it are read and folded. Every record's MAC is
verified before anything in it is decoded, and nothing is unpickled until the
caller restores a namespace from verified bytes.

A torn or corrupted tail (a write cut short by the crash, a flipped bit) ends the
log: recovery folds what comes before it and says so. A record whose CRC is fine
but whose MAC does not verify means the log was modified or the key is wrong: that
is refused outright, nothing is resumed. So is an authentic record that cannot be
used (a newer format version, an undecodable envelope): it is not a torn tail, the
store still holds it, and a resume from before it would write over its seq.

Records the store acknowledged but no longer has (a hole in the seqs, or a log
shorter than the store's high-water mark: deleted rows or keys, a truncated file, a
lost SQLite ``-wal``) are never folded over: their effects happened, and resuming
from before them would do those effects again. A resume refuses them by default
(:class:`LostRecordsError`, nothing changed); ``loss="accept"`` continues from what is
left when only the tail is gone; ``show`` reports them as a problem. A hole below the
snapshot a resume starts from is refused and reported too (``holes.log_gap``), and a
log pruned behind a snapshot that is gone is refused, never replayed from the start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from resumable.durability.log.pruned import oldest_base, open_state
from resumable.durability.log.records import Record, RecordCodec
from resumable.durability.log.run_state import FrameState, RunState
from resumable.errors import IntegrityError, LostRecordsError, RunNotFoundError
from resumable.exec.reply_filter import executed_text
from resumable.store.base import RESUMABLE_STATUSES, CheckpointStore, ReadResult, RunMeta
from resumable.store.holes import log_extent, log_gap


@dataclass
class LoadedRun:
    """A run's folded state and what recovery had to skip to get it."""

    meta: RunMeta
    state: RunState
    problems: list[str] = field(default_factory=list)
    records_read: int = 0
    largest: Record | None = None
    """The largest record read (after the snapshot): what a resume's records are checked by."""


class RunLoader:
    """Load, verify and fold a run; :class:`~.coordinator.RecoveryCoordinator` also resumes it."""

    def __init__(self, store: CheckpointStore, codec: RecordCodec) -> None:
        self.store = store
        self.codec = codec

    def check_record_limit(self, loaded: LoadedRun) -> None:
        """Refuse a ``max_record_bytes`` below the largest record read before the run is
        owned: a resume writes records like it (RecordTooLargeError, the store untouched)."""
        if loaded.largest is not None:
            self.codec.seal(loaded.largest)

    async def can_recover(self, run_id: str) -> bool:
        """True if the run exists, is not finished and no live owner holds it."""
        for summary in await self.store.list_runs():
            if summary.meta.run_id == run_id:
                return summary.status in RESUMABLE_STATUSES
        return False

    async def load(
        self,
        run_id: str,
        *,
        at: int | None = None,
        loss: Literal["refuse", "accept", "report"] = "refuse",
        meta: RunMeta | None = None,
    ) -> LoadedRun:
        """Fold the run up to record ``at`` (all of it if None), from the newest usable snapshot.

        ``loss`` says what to do with records the store acknowledged but lost: refuse
        (:class:`LostRecordsError`), accept a lost tail (fold what is left, warn), or
        report it among the problems (``show``). ``meta`` stands in for metadata that
        cannot be read (``repair``).
        """
        if meta is None:
            meta = await self.store.get_meta(run_id)
        state = RunState()
        after = 0
        snapshot = await self.store.get_snapshot(run_id, at)
        if snapshot is not None:
            state = open_state(self.codec, run_id, snapshot)
            after = snapshot[0]
        result = await self.store.read(run_id, after)
        loaded = LoadedRun(meta, state)
        largest = 0
        gap = result.missing(after)
        below = None if gap is not None or after == 0 else await log_gap(self.store, run_id)
        if below is not None and below[0][0] <= after and (at is None or below[0][0] <= at):
            # a hole the snapshot folds over: the log is still not what was acknowledged
            fork_from = await lowest_fork(self.store, run_id)
            problem = lost_records(run_id, self.store.url, below[0], below[1], fork_from=fork_from)
            if loss != "report":
                raise problem
            loaded_problem: str | None = problem.message
        else:
            loaded_problem = None
        if gap is not None and (at is None or gap[0] <= at):
            fork_from = await lowest_fork(self.store, run_id)
            problem = lost_records(
                run_id, self.store.url, gap, result, snapshot=snapshot, fork_from=fork_from
            )
            hole = bool(result.records) and result.records[-1].seq > gap[1]
            if loss == "refuse" or (loss == "accept" and hole):
                raise problem
            if loss == "accept":
                problem = lost_records(run_id, self.store.url, gap, result, accepted=True)
            loaded.problems.append(problem.message)
        if loaded_problem is not None:
            loaded.problems.append(loaded_problem)
        for stored in result.records:
            if (at is not None and stored.seq > at) or (gap is not None and stored.seq >= gap[0]):
                break
            try:
                record = self.codec.open(stored.data, run_id=run_id, seq=stored.seq)
            except IntegrityError as exc:
                raise IntegrityError(
                    f"{exc}; nothing from it on was used: restore the MAC key the run was "
                    "written with, or its log",
                    run_id=run_id,
                    seq=stored.seq,
                ) from None
            state.apply(record)
            loaded.records_read += 1
            if len(stored.data) > largest:
                largest, loaded.largest = len(stored.data), record
        if result.problem:
            loaded.problems.append(
                f"{result.problem}; resuming from the last valid record ({state.seq})"
            )
        return loaded


def lost_records(
    run_id: str,
    url: str,
    gap: tuple[int, int],
    result: ReadResult,
    *,
    accepted: bool = False,
    snapshot: tuple[int, bytes] | None = (0, b""),
    fork_from: int | None = None,
) -> LostRecordsError:
    """The one line that says which records are gone and what the user can do.

    ``snapshot`` None: the run has no snapshot left, so a log that starts after record 1
    lost the snapshot it was pruned behind (never replayed from the start). ``fork_from``:
    the lowest ``--at`` a fork of the run takes (:func:`lowest_fork`; None: no fork), so a
    fork is suggested only where it works.
    """
    first, last = gap
    span = f"record {first} is" if first == last else f"records {first}-{last} are"
    records = result.records
    if snapshot is None and first == 1 and records and records[-1].seq > last:
        return LostRecordsError(
            f"run {run_id}: {span} not in its log in {url} and no snapshot stands for "
            f"them (the snapshot they were pruned behind is missing); nothing was run - "
            "restore the run's snapshots from a backup of the store",
            run_id=run_id,
            first=first,
            last=last,
        )
    if result.problem and not (records and records[-1].seq > last):
        # the store still has bytes where they were, but they do not verify
        why = result.problem.split("; ")[0].removeprefix(f"run {run_id}: ")
        span = f"{span} damaged ({why}) in"
    else:
        span = f"{span} missing from"
    if records and records[-1].seq > last:  # a hole: what follows it cannot be folded
        go_on = (
            f"fork the run before the gap to go on (`resumable fork {run_id} --at {first - 1}`)"
            if fork_from is not None and first - 1 >= max(fork_from, 1)
            else "no fork reaches the records before them (none are left, or they were "
            "pruned): restore them from a backup of the store, or start the program again"
        )
        return LostRecordsError(
            f"run {run_id}: {span} the middle of its log in {url}; the records "
            f"after them cannot be used - {go_on}",
            run_id=run_id,
            first=first,
            last=last,
        )
    then = (
        f"continuing from record {first - 1} (--accept-loss): their completed effects may run again"
        if accepted
        else "completed effects may run again - resume with --accept-loss to continue"
    )
    return LostRecordsError(
        f"run {run_id}: {span} {url}; {then}",
        run_id=run_id,
        first=first,
        last=last,
    )


async def log_damage(store: CheckpointStore, run_id: str) -> str | None:
    """The line saying which acknowledged records the run's log lost, or None if it is whole.

    Runs lists such a run ``damaged``; its snapshots may still fold over the gap, but
    the log is no longer what the store acknowledged (``holes.log_gap``).
    """
    try:
        found = await log_gap(store, run_id)
    except RunNotFoundError:  # deleted while listed
        return None
    if found is None:
        return None
    gap, result = found
    return lost_records(
        run_id, store.url, gap, result, fork_from=await lowest_fork(store, run_id)
    ).message


async def lowest_fork(store: CheckpointStore, run_id: str) -> int | None:
    """The lowest ``--at`` a fork of the run takes: 1 for a log from record 1, the oldest
    snapshot a pruned log folds from, None for a log that lost its start (or is empty)."""
    extent = await log_extent(store, run_id)
    if extent.first is None or extent.last is None:
        return None
    if extent.first == 1:
        return 1
    found = await oldest_base(store, run_id, extent.first, extent.last)
    return None if found is None else found[0]


def code_of(frame: FrameState) -> str:
    """The frame's current response as its executor runs it (after the reply filter)."""
    turn = frame.current_turn()
    if turn is None:
        return ""
    return executed_text(turn.text, turn.reply_filter, complete=True)


def remaining_code(frame: FrameState) -> str:
    """What of the frame's current response has not run yet (from the statement in progress)."""
    return code_of(frame)[frame.offset :]


def executed_code(frame: FrameState) -> str:
    return code_of(frame)[: frame.offset]

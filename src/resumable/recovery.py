"""RecoveryCoordinator: load a run's checkpoints, verify them, fold them, restore it.

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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgpack

from resumable.errors import IntegrityError
from resumable.records import RecordCodec
from resumable.state import FrameState, RunState
from resumable.store.base import CheckpointStore, RunMeta

if TYPE_CHECKING:
    from resumable.config import Config
    from resumable.session import RunOutcome


@dataclass
class LoadedRun:
    """A run's folded state and what recovery had to skip to get it."""

    meta: RunMeta
    state: RunState
    problems: list[str] = field(default_factory=list)
    records_read: int = 0


class RecoveryCoordinator:
    """Load, verify and fold a run; restore and resume it."""

    def __init__(self, store: CheckpointStore, codec: RecordCodec) -> None:
        self.store = store
        self.codec = codec

    async def can_recover(self, run_id: str) -> bool:
        """True if the run exists, is not finished and no live owner holds it."""
        for summary in await self.store.list_runs():
            if summary.meta.run_id == run_id:
                return summary.status in ("crashed", "waiting", "pending")
        return False

    async def load(self, run_id: str, *, at: int | None = None) -> LoadedRun:
        """Fold the run up to record ``at`` (all of it if None), from the newest usable snapshot."""
        meta = await self.store.get_meta(run_id)
        state = RunState()
        after = 0
        snapshot = await self.store.get_snapshot(run_id, at)
        if snapshot is not None:
            seq, sealed = snapshot
            record = self.codec.open(sealed, run_id=run_id, seq=seq)
            state = RunState.from_dict(msgpack.unpackb(record.body["state"], raw=False))
            after = seq
        result = await self.store.read(run_id, after)
        loaded = LoadedRun(meta, state)
        for stored in result.records:
            if at is not None and stored.seq > at:
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
        if result.problem:
            loaded.problems.append(
                f"{result.problem}; resuming from the last valid record ({state.seq})"
            )
        return loaded

    async def resume(
        self,
        run_id: str,
        config: Config,
        *,
        env: Mapping[str, str],
        **options: Any,
    ) -> RunOutcome:
        """Continue a run from its latest checkpoint until it ends or waits again."""
        from resumable.session import RunSession
        from resumable.session import resume_session as drive

        session = await RunSession.attach(self.store, config, run_id, env=env)
        try:
            return await drive(session, config, env=env, **options)
        finally:
            await session.close()


def remaining_code(frame: FrameState) -> str:
    """What of the frame's current response has not run yet (from the statement in progress)."""
    turn = frame.current_turn()
    if turn is None:
        return ""
    return turn.text[frame.offset :]


def executed_code(frame: FrameState) -> str:
    turn = frame.current_turn()
    return "" if turn is None else turn.text[: frame.offset]


def line_at(text: str, offset: int) -> int:
    """1-based line number of character ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1

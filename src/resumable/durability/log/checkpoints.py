"""CheckpointManager: every record of a run goes through here on its way to the store.

It numbers records, seals them (MAC, optional compression and encryption), appends them
under the run's lease, folds them into the live :class:`RunState` and writes snapshots
every ``snapshot_every`` records, pruned to the ``keep`` newest. The program's output is
flushed before a record is made durable; output held for a record is printed once the
record is written (a killed process leaves it there), not after its fsync: only a power
loss can take the record back, and then the resume prints that output again.

Policy: with ``every = 1`` an await is finished once its record is durable, except the
await a statement ends with (``r = await tool(x)``): its record goes with the statement's
boundary in one append, whose fsync may run on until the next barrier (:meth:`settle`).
With ``every = N`` await records are made durable N at a time (or after
``interval_seconds``): the awaits of an unflushed batch run again after a crash.
``RESUMABLE_CRASH_AFTER=N`` kills the process right after its N-th durable record.
Once ``stop_requested`` is set, the next await record is made durable and
:class:`StopRequested` raised after it. A failing store stops the run with
``StoreFailed`` (see ``store_faults``), raised again at every later write and effect.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from functools import partial
from typing import Any, NamedTuple

from resumable.durability.log.checkpoint_hooks import CheckpointHooks, CheckpointInfo, load_hook
from resumable.durability.log.marks import mark_batch
from resumable.durability.log.policy import CheckpointPolicy
from resumable.durability.log.records import Record, RecordCodec
from resumable.durability.log.run_state import RunState
from resumable.durability.log.state_codec import snapshot_record
from resumable.durability.log.stopping import (
    StopRequested,
    crash_now,
    flush_output,
    mute_program_output,
)
from resumable.durability.log.store_faults import StopsOnStoreFaults, expired
from resumable.errors import StoreError
from resumable.exec.output import release_program_output
from resumable.store.base import (
    AppendInProgress,
    AppendsNow,
    BeginsAppends,
    CheckpointStore,
    Lease,
    StoredRecord,
)

__all__ = [
    "CheckpointInfo",
    "CheckpointManager",
    "CheckpointPolicy",
    "StopRequested",
    "load_hook",
]


_now = time.time  # not the journaling wrapper a run installs: records' own timestamps


class _Syncing(NamedTuple):
    """A boundary batch written to the store, its fsync running; what settle() finishes."""

    append: AppendInProgress
    records: list[Record]
    info: CheckpointInfo | None


class CheckpointManager(StopsOnStoreFaults):
    """Writes a run's records durably, in order, under its lease."""

    def __init__(
        self,
        store: CheckpointStore,
        codec: RecordCodec,
        lease: Lease,
        state: RunState,
        *,
        policy: CheckpointPolicy | None = None,
        crash_after: int | None = None,
        replay_until: int = 0,
    ) -> None:
        self.store = store
        self.codec = codec
        self.lease = lease
        self.state = state
        self.run_id = lease.run_id
        self.policy = policy or CheckpointPolicy()
        self.crash_after = crash_after
        self.replay_until = replay_until
        """Records up to this seq were written before a crash: their replay is silent."""
        self.stop_requested = False
        """Set by the run's owner: the next await record is the last (see StopRequested)."""
        self.cancelled: str | None = None
        """The reason of a cancel, set with ``stop_requested`` when the stop cancels the run."""
        self.written = self._since_snapshot = 0
        self._seq = self._durable_seq = state.seq
        self._buffer: list[Record] = []
        self._buffer_since = 0.0
        self._blobs: dict[str, bytes] = {}
        self._hooks = CheckpointHooks(self.policy.before_checkpoint, self.policy.after_checkpoint)
        self._deferred_blobs: dict[str, bytes] = {}
        self._deferred = False
        self.appending: asyncio.Future[None] | None = None
        """The append in progress: tasks of a statement write records one append at a time,
        in seq order; whoever waits for it is woken when it lands (a stop waits for it)."""
        self.last_await = state.last_await
        """Seq of the newest await record of the run (written or still buffered)."""
        self.tasks: set[asyncio.Task[Any]] = set()
        """Tasks the program spawned that are still running, in every frame."""
        self._begin = store.begin_append if isinstance(store, BeginsAppends) else None
        self._now = store.append_now if isinstance(store, AppendsNow) else None
        self._syncing: _Syncing | None = None
        """The boundary batch whose fsync runs while the program goes on (see settle)."""
        self.lease_seconds = 30.0  # what a renewal of a lease that expires asks for

    # -- writing records --------------------------------------------------------------
    def _make(self, kind: str, frame: str, body: dict[str, Any]) -> Record:
        self._seq += 1
        return Record(self.run_id, self._seq, kind, frame, _now(), self.lease.epoch, body)

    async def write(self, kind: str, frame: str, body: dict[str, Any]) -> int:
        """Append one record durably (after any buffered ones); return its seq."""
        self._check_store()
        self._buffer.append(self._make(kind, frame, body))
        await self._flush()
        return self._seq

    async def write_together(self, records: list[tuple[str, str, dict[str, Any]]]) -> int:
        """Append several records as one batch: durable all together or not at all."""
        self._check_store()
        for kind, frame, body in records:
            self._buffer.append(self._make(kind, frame, body))
        await self._flush()
        return self._seq

    async def write_boundary(self, frame: str, body: dict[str, Any]) -> int:
        """Append a statement's boundary record; its fsync may still run when this returns,
        while the next statement starts, until the first barrier (:meth:`settle`)."""
        self._check_store()
        self._buffer.append(self._make("stmt", frame, body))
        await self._flush(background=True)
        return self._seq

    async def write_await(
        self, frame: str, body: dict[str, Any], *, ends_statement: bool = False
    ) -> None:
        """Append an await record, buffered according to ``every``/``interval_seconds``.

        ``ends_statement``: nothing of the program runs between this await and the end
        of its statement (:mod:`resumable.durability.log.tail`). With ``every = 1`` the record
        is then held and made durable together with the statement's boundary record -
        or with whatever record comes first - in one append.
        """
        self._settle()  # so that ``written`` counts every record before this one
        stored = self._make("await", frame, body)
        self._buffer.append(stored)
        self.last_await = stored.seq
        policy = self.policy
        alone = len(self._buffer) == 1
        crash_lands = self.crash_after is not None and self.written + 1 >= self.crash_after
        hold = ends_statement and alone and not crash_lands
        if hold and policy.every <= 1 and not self.stop_requested:
            self._deferred = True  # flushed before anything else the run does
            return
        if self.stop_requested or policy.every <= 1 or len(self._buffer) >= policy.every:
            await self._flush()
        elif policy.interval_seconds > 0:
            now = time.monotonic()
            if len(self._buffer) == 1:
                self._buffer_since = now
            elif now - self._buffer_since >= policy.interval_seconds:
                await self._flush()
        if self.stop_requested:
            # What the program prints while it unwinds (finally:) the resume prints again.
            mute_program_output()
            raise StopRequested(self.run_id, stored.seq, self.cancelled)

    def tasks_running(self) -> bool:
        """Whether a task the program spawned, in any frame, has not finished."""
        return any(not task.done() for task in self.tasks)

    def add_lazily(self, kind: str, frame: str, body: dict[str, Any]) -> None:
        """Buffer a record that goes out with the next append, asking for none of its own."""
        self._buffer.append(self._make(kind, frame, body))

    def defer_await(self, frame: str, body: dict[str, Any], blobs: Mapping[str, bytes]) -> None:
        """Buffer the await record of a synchronous call: durable with the next flush."""
        self._deferred_blobs.update(blobs)
        stored = self._make("await", frame, body)
        self._buffer.append(stored)
        self.last_await = stored.seq
        self._deferred = True

    @property
    def deferred(self) -> bool:
        """True while a record is not durable yet: the record of a synchronous call waits
        for the next flush, or a boundary's fsync runs. :meth:`flush` before an effect."""
        if self._deferred or self._syncing is not None or self.failure is not None:
            return True
        expires = self.lease.expires_at  # the clock is read last
        return self.halted is not None or (expires is not None and time.time() >= expires)

    async def flush(self, *, closing: bool = False) -> None:
        """Make every buffered record durable (and the boundary whose fsync runs); refused
        as an effect is (:meth:`settle`) unless ``closing``."""
        if not closing and self.halted is not None:
            raise self.halted
        if not closing and self.failure is None and expired(self.lease):
            try:  # a paused process: renewed if nobody took the run meanwhile, else fenced
                self.lease = await self.store.renew(self.lease, self.lease_seconds)
            except StoreError as exc:
                raise self._failed(exc) from exc
        self._settle()
        if self._buffer:
            await self._flush()

    def settle(self) -> None:
        """Before an effect: :meth:`_settle`; refused once the store failed, the run was
        halted (a stop signal), or its lease ran out while the store could not renew it.
        (A lease that only looks expired - a late heartbeat - is renewed by :meth:`flush`.)"""
        if self.halted is not None:
            raise self.halted
        if self.failure is None and self.renewal_failed is not None and expired(self.lease):
            raise self._failed(self.renewal_failed)
        self._settle()

    def settle_before_step(self) -> None:
        """:meth:`settle`, then what is still buffered (an earlier synchronous call's record)
        made durable without yielding where the store can (``append_now``)."""
        self.settle()
        if not (self._deferred and self._buffer) or self._now is None or self.appending:
            return
        if self.policy.every > 1:  # await records go N at a time: the user chose the window
            return
        records, batch, mark = self._take_batch()
        blobs, self._deferred_blobs = self._deferred_blobs, {}
        sealed = {d: self.codec.seal_blob(self.run_id, d, b) for d, b in blobs.items()}
        info = self._hooks.before(self.run_id, records)
        try:
            if not self._now(self.run_id, batch, self.lease, sealed):  # a run it does not own
                self._buffer[:0], self._deferred = records, True
                self._deferred_blobs.update(blobs)
                return
        except StoreError as exc:
            raise self._failed(exc) from exc
        self._blobs.update(blobs)
        self._since_snapshot += len(batch)
        self._durable(records, mark, info)

    def _settle(self) -> None:
        """The barrier: block until the boundary batch whose fsync runs is durable.

        Called before anything outside the process can see the run go on: a foreign await
        or a step starting, any other append, a snapshot, the run's end. It blocks the
        loop's thread and never yields: a yield would let other tasks run program code
        first, and interleave them otherwise than plain Python does. A failed fsync is
        raised here and at every later write: the barrier may sit in program code, whose
        ``except Exception:`` must not let the run go on with a record that is not durable.
        """
        syncing = self._syncing
        if syncing is None:
            if self.failure is not None:
                raise self.failure.again()
            return
        self._check_store()
        self._syncing = None
        try:
            syncing.append.wait()
        except StoreError as exc:
            raise self._failed(exc) from exc
        self._durable(syncing.records, None, syncing.info)

    async def _flush(self, *, background: bool = False) -> None:
        """Make the buffer durable, or wait for the append in progress that carries it.

        Group commit: records buffered while an append runs go out together in the next
        one, and every task waiting for an append is woken when it lands. A writer never
        yields to the loop before its append starts: that would let other tasks run
        program code first and interleave them otherwise than plain Python does.
        """
        want = self._seq
        while self.appending is not None:
            await asyncio.shield(self.appending)
            if self._durable_seq >= want:
                return
        if not self._buffer:
            # taken by a boundary whose fsync runs, or by an append whose writer got its error
            self._settle()
            return
        writing = self.appending = asyncio.get_running_loop().create_future()
        try:
            last = await self._append_buffer(background)
        finally:
            self.appending = None
            writing.set_result(None)
        if self._since_snapshot >= self.policy.snapshot_every and last != "await":
            # Only between statements: a snapshot inside one long statement would
            # copy its whole (growing) journal again each time.
            await self.snapshot()

    async def _append_buffer(self, background: bool) -> str:
        self._settle()  # batches become durable in order
        records, batch, mark = self._take_batch()
        if self._deferred_blobs:
            blobs, self._deferred_blobs = self._deferred_blobs, {}
            await self.put_blobs(blobs)
        info = self._hooks.before(self.run_id, records)
        held = mark is not None and mark[1] > 0
        crash_due = self.crash_after is not None and self.written + len(batch) >= self.crash_after
        if (background or held) and self._begin is not None and not crash_due:
            flush_output()
            # Once written, a killed process leaves the record for the resume, which then
            # does not print this output again: the store prints it right after its write,
            # not after the fsync (only a power loss takes the record back: durability.md).
            release = partial(release_program_output, mark[1]) if held and mark else None
            try:
                append = self._begin(self.run_id, batch, self.lease, release)
            except StoreError as exc:
                raise self._failed(exc) from exc
            if append is not None:
                self._since_snapshot += len(batch)
                self._syncing = _Syncing(append, records, info)
                if not background:
                    self._settle()
                return records[-1].kind
        try:
            await self.store.append(self.run_id, batch, self.lease)
        except StoreError as exc:
            raise self._failed(exc) from exc
        self._since_snapshot += len(batch)
        self._durable(records, mark, info)
        return records[-1].kind

    def _take_batch(self) -> tuple[list[Record], list[StoredRecord], tuple[int, int] | None]:
        """The buffer as the next batch: its records, sealed, and the output its last covers."""
        records, self._buffer, self._deferred = self._buffer, [], False
        mark = mark_batch(records)
        return records, [StoredRecord(r.seq, r.epoch, self.codec.seal(r)) for r in records], mark

    def _durable(
        self, records: list[Record], mark: tuple[int, int] | None, info: CheckpointInfo | None
    ) -> None:
        """What follows a batch becoming durable: its output printed, its records folded."""
        if mark is not None:
            release_program_output(mark[1])
        flush_output()
        state = self.state
        for record in records:
            state.apply(record)
        self.written += len(records)
        self._durable_seq = records[-1].seq
        self._hooks.after(info)
        if self.crash_after is not None and self.written >= self.crash_after:
            crash_now()

    # -- blobs ------------------------------------------------------------------------------
    async def put_blobs(self, blobs: Mapping[str, bytes]) -> None:
        self._check_store()
        for digest, data in blobs.items():
            sealed = self.codec.seal_blob(self.run_id, digest, data)
            try:
                await self.store.put_blob(self.run_id, digest, sealed)
            except StoreError as exc:
                raise self._failed(exc) from exc
            self._blobs[digest] = data

    def load_blob_sync(self, digest: str) -> bytes:
        """A blob this process wrote or preloaded (replay runs synchronously inside unpickling)."""
        try:
            return self._blobs[digest]
        except KeyError:
            raise KeyError(f"blob {digest} was not preloaded") from None

    def preload_blobs(self, blobs: Mapping[str, bytes]) -> None:
        self._blobs.update(blobs)

    # -- snapshots ----------------------------------------------------------------------------
    async def snapshot(self) -> None:
        """Write the folded state as a snapshot, then prune what it makes unnecessary."""
        await self.flush()
        self._since_snapshot = 0
        state = self.state
        data = self.codec.seal(snapshot_record(self.run_id, state, self.lease.epoch, _now()))
        try:
            await self.store.put_snapshot(self.run_id, state.seq, data, self.lease)
            await self.store.prune(self.run_id, self.policy.keep)
        except StoreError as exc:
            raise self._failed(exc) from exc

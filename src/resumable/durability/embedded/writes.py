"""What a code frame of an embedded run writes through: the run's manager, from another thread.

The code of an embedded run runs on the caller's thread (its awaits on a loop of the
executor's own); the run's store and :class:`~resumable.durability.log.checkpoints.CheckpointManager`
live on the run's loop thread. This is the manager's face the frame's
:class:`~resumable.durability.replay.journal.FrameRecorder` writes through: every write goes to the
run's manager and returns once durable (the caller's thread can wait for the store, so a step's
record is durable before the code gets its result). A statement's boundary record, and the
record of where a statement started, wait in a batch until the next write or the end of the
turn, so a turn never ends in the log without the value and output it returned.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from resumable.durability.embedded.boundary import refuse_effects_after
from resumable.durability.embedded.handle import RunHandle
from resumable.durability.log.run_state import RunState

__all__ = ["CodeFrameWrites"]

Pending = list[tuple[str, str, dict[str, Any]]]


class CodeFrameWrites:
    """The manager of one embedded run, as a frame recorder on the caller's thread sees it."""

    replay_until = 0
    deferred = False

    def __init__(self, run: RunHandle) -> None:
        self._run = run
        self.run_id = run.run_id
        self.pending: Pending = []
        """Records that go out with the next write (boundaries, statement starts, text)."""
        self._blobs: dict[str, bytes] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        """Tasks the code spawned that are still running."""

    @property
    def state(self) -> RunState:
        return self._run.state

    @property
    def last_await(self) -> int:
        return self._run.session_or_fail().manager.last_await

    def tasks_running(self) -> bool:
        return any(not task.done() for task in self.tasks)

    def push(
        self, records: Pending | None = None, blobs: Mapping[str, bytes] | None = None
    ) -> None:
        """Make what waits and ``records`` durable together; returns once they are."""
        batch = [*self.pending, *(records or ())]
        self._blobs.update(blobs or {})
        if not batch and not self._blobs:
            return
        self.pending, waiting, self._blobs = [], self._blobs, {}
        self._run.write(batch, waiting)

    # -- the manager's face ----------------------------------------------------------------
    def settle(self) -> None:
        """Before an effect: every write is durable when it returns (nothing is in flight),
        and once the store failed no step or foreign await starts (as in a script)."""
        refuse_effects_after(self._run.session_or_fail().manager)

    settle_before_step = settle  # a synchronous step's record was durable before it returned

    async def flush(self) -> None:
        self.push()

    def add_lazily(self, kind: str, frame: str, body: dict[str, Any]) -> None:
        self.pending.append((kind, frame, body))

    async def write_boundary(self, frame: str, body: dict[str, Any]) -> int:
        self.pending.append(("stmt", frame, body))
        return 0

    async def write_await(
        self, frame: str, body: dict[str, Any], *, ends_statement: bool = False
    ) -> None:
        self.push([("await", frame, body)])

    def defer_await(self, frame: str, body: dict[str, Any], blobs: Mapping[str, bytes]) -> None:
        self._blobs.update(blobs)
        self.push([("await", frame, body)])

    async def put_blobs(self, blobs: Mapping[str, bytes]) -> None:
        self._blobs.update(blobs)

    def load_blob_sync(self, digest: str) -> bytes:
        return self._run.session_or_fail().manager.load_blob_sync(digest)

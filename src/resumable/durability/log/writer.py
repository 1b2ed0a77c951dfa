"""What a frame's journal needs of the run's writer: a structural face of the checkpoint manager.

A script's and a playbook's frames write through the run's
:class:`~resumable.durability.log.checkpoints.CheckpointManager` on their own loop; an embedded
run's code frame writes from the caller's thread through
:class:`~resumable.durability.embedded.writes.CodeFrameWrites`. Both have this face.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

from resumable.durability.log.run_state import RunState

__all__ = ["RecordWriter"]


class RecordWriter(Protocol):
    """Writes a run's records for the journal of one of its frames."""

    @property
    def run_id(self) -> str: ...

    @property
    def state(self) -> RunState:
        """The run's folded state, as of the last record written."""
        ...

    @property
    def replay_until(self) -> int:
        """Records up to this seq were written before a crash (older logs: replay is muted)."""
        ...

    @property
    def last_await(self) -> int:
        """Seq of the newest await record of the run."""
        ...

    @property
    def tasks(self) -> set[asyncio.Task[Any]]:
        """Tasks the program spawned that are still running, in every frame."""
        ...

    @property
    def deferred(self) -> bool:
        """True while the record of a synchronous call waits for the next write."""
        ...

    def tasks_running(self) -> bool: ...

    def settle(self) -> None:
        """Wait until every record written so far is durable (before an effect)."""

    def settle_before_step(self) -> None:
        """:meth:`settle`, and the records still buffered made durable where the store can."""

    async def flush(self) -> None: ...

    def add_lazily(self, kind: str, frame: str, body: dict[str, Any]) -> None:
        """Buffer a record that goes out with the next write, asking for none of its own."""

    async def write_boundary(self, frame: str, body: dict[str, Any]) -> int: ...

    async def write_await(
        self, frame: str, body: dict[str, Any], *, ends_statement: bool = False
    ) -> None: ...

    def defer_await(self, frame: str, body: dict[str, Any], blobs: Mapping[str, bytes]) -> None: ...

    async def put_blobs(self, blobs: Mapping[str, bytes]) -> None: ...

    def load_blob_sync(self, digest: str) -> bytes: ...

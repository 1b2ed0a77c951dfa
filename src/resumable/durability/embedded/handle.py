"""What the parts of an embedded run use of the run they belong to, as a protocol.

:class:`~resumable.durability.embedded.run.DurableRun` is the one run handle; its journals,
the executor, its turns and its writes see it through :class:`RunHandle`, so they sit below
the module that opens runs and never import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from resumable.durability.log.run_state import FrameState, RunState
from resumable.durability.runs.session import RunSession


class RunHandle(Protocol):
    """An open embedded run: its folded state, its session, and its writes."""

    run_id: str
    state: RunState

    def session_or_fail(self) -> RunSession:
        """The run's session; raises UsageError once the run is finished."""
        ...

    def state_frame(self, frame_id: str) -> FrameState | None: ...

    def write(
        self, records: list[tuple[str, str, dict[str, Any]]], blobs: Mapping[str, bytes]
    ) -> None:
        """Make ``records`` durable together (after ``blobs``); returns once they are."""
        ...

    def load_value(self, data: bytes, ns: dict[str, Any]) -> Any: ...

    def restore(self, frame: FrameState, into: dict[str, Any]) -> None:
        """Fill ``into`` with a code frame's namespace at its last finished statement."""
        ...

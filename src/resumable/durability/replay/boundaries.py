"""The boundary record of a finished statement: where the frame stands, and its namespace.

A resume starts from the newest boundary that holds a namespace. The namespace is pickled
once per statement and written only when it changed; while a task the program spawned runs
on past its statement (or a frame further out replays from before such a task), or while a
value of the namespace holds a suspended frame (a generator, an async generator, a coroutine
not yet finished: :mod:`resumable.durability.capture.live_frames`), a boundary is ``live``: it says
where the frame stands but saves no namespace, since a resume replays from before that task
or object was made (see ``docs/durability.md``, Resume).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any

from resumable.durability.capture.live_frames import LiveFrame
from resumable.errors import CodeError
from resumable.exec.statement import Statement

if TYPE_CHECKING:
    from resumable.durability.capture.snapshot import Capture, Snapshotter
    from resumable.durability.log.writer import RecordWriter

__all__ = ["Boundaries"]


class Boundaries:
    """Writes the boundary records of one frame's statements."""

    __slots__ = (
        "_last_ns",
        "_names_recorded",
        "exclude",
        "extras",
        "frame_id",
        "manager",
        "namespace",
        "snapshotter",
    )

    def __init__(
        self,
        manager: RecordWriter,
        frame_id: str,
        namespace: dict[str, Any],
        snapshotter: Snapshotter,
        exclude: Collection[str],
        extras: Callable[[], Awaitable[dict[str, Any]]] | None,
    ) -> None:
        self.manager = manager
        self.frame_id = frame_id
        self.namespace = namespace
        self.snapshotter = snapshotter
        self.exclude = exclude
        self.extras = extras
        """Run-level state to carry in the same record (e.g. agent-wide state)."""
        self._last_ns: bytes | None = None
        self._names_recorded = 0

    def previous(self, data: bytes | None, task_names: int) -> None:
        """What the log already holds: an unchanged namespace or task count is not rewritten."""
        self._last_ns = data
        self._names_recorded = task_names

    async def write(
        self,
        turn: int,
        index: int,
        statement: Statement,
        error: CodeError | None,
        *,
        live: bool,
        tasks: int,
    ) -> None:
        """Write statement ``index``'s boundary (``tasks``: unnamed tasks spawned so far)."""
        body: dict[str, Any] = {"t": turn, "i": index, "end": statement.end, "ns": None}
        capture = None if live else self._capture()
        if capture is None:
            body["live"] = True
            self._last_ns = None  # a resume never restores this one
            await self.manager.write_boundary(self.frame_id, body)
            return
        await self.manager.put_blobs(capture.new_blobs)
        if capture.data != self._last_ns:
            body["ns"] = self._last_ns = capture.data
            body["b"] = sorted(capture.blobs)
            if capture.lost:
                body["lost"] = capture.lost
        if tasks != self._names_recorded:
            body["tn"] = self._names_recorded = tasks
        if error is not None:
            body["err"] = {
                "t": turn,
                "message": error.message,
                "line": getattr(error, "line", 0),
                "kind": getattr(error, "kind", "exception"),
                "traceback": getattr(error, "traceback", ""),
            }
        if self.extras is not None:
            body.update(await self.extras())
        await self.manager.write_boundary(self.frame_id, body)

    def _capture(self) -> Capture | None:
        """The namespace pickled; None while a value in it holds a suspended frame."""
        try:
            return self.snapshotter.capture(self.namespace, exclude=self.exclude)
        except LiveFrame:
            return None

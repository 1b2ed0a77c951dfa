"""Where the program's statements start among the results its tasks receive, kept on replay.

A task the program keeps running beside its statements receives results between them (while
a reply streams, while a store write waits) and while they run. Replay releases recorded
results in the order they arrived (:class:`~resumable.durability.replay.order.ReplayOrder`); for the
statements around them to see the same memory, each statement must also start where it
started among those results. So while tasks run, a statement's start is recorded (a ``start``
record, written with the next record: it asks for no write of its own), and replay starts the
statement again at that point of the order. An await that returned without suspending its task
is recorded as such, so its replay does not let other tasks run either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING

from resumable.durability.log.run_state import FrameState, Position
from resumable.durability.replay.divergence import never_reached
from resumable.durability.replay.recording import legacy_leaves
from resumable.durability.replay.scopes import RUN_AGAIN

if TYPE_CHECKING:
    from resumable.durability.log.writer import RecordWriter
    from resumable.durability.replay.order import ReplayOrder

__all__ = ["Interleaving", "replay_order"]


def replay_order(frames: Iterable[FrameState]) -> ReplayOrder | None:
    """One order for what replay answers in ``frames``: results as they arrived before,
    and the starts of statements that ran beside the program's tasks."""
    sites: dict[int, tuple[str, int, str]] = {}
    for frame in frames:
        for (_, index), journal in frame.replay_journals().items():
            for entry in legacy_leaves(journal).values():
                if entry.outcome not in RUN_AGAIN:
                    sites[entry.seq] = (frame.frame_id, index, entry.site)
        for (_, index), seq in frame.marks.items():
            sites[seq] = (frame.frame_id, index, f"the start of statement {index}")

    def stuck(seq: int, waiting: list[int]) -> BaseException:
        frame_id, index, site = sites[seq]
        return never_reached(frame_id, index, site, seq, waiting)

    if not sites:  # a new run: nothing to answer
        return None
    from resumable.durability.replay.order import ReplayOrder

    return ReplayOrder(sites, stuck)


class Interleaving:
    """One frame's statement starts, recorded and replayed in the run's order."""

    __slots__ = ("_ended_at", "_frame_id", "_manager", "_marks", "_order")

    def __init__(
        self,
        manager: RecordWriter,
        frame_id: str,
        order: ReplayOrder | None,
        marks: dict[Position, int] | None,
    ) -> None:
        self._manager = manager
        self._frame_id = frame_id
        self._order = order
        self._marks = dict(marks or {})
        """Recorded starts of the statements replay runs again: the seq of each."""
        self._ended_at = manager.last_await
        """The run's newest await record when this frame's last statement ended."""

    async def start(self, position: Position, *, replayed: bool) -> None:
        """Statement ``position`` starts (``replayed``: it has recorded results of its own).

        A statement with neither a recorded start nor results of its own, met while tasks
        run, never started before the crash: every result recorded arrived before it.
        """
        manager = self._manager
        mark = self._marks.pop(position, None)
        order = self._order
        if order is not None and not order.done:
            if mark is not None:
                await order.turn(mark, suspended=False)
            elif manager.tasks_running() and not replayed:
                await order.until(order.last)
        if mark is None and (manager.tasks_running() or manager.last_await > self._ended_at):
            manager.add_lazily("start", self._frame_id, {"t": position[0], "i": position[1]})

    def waits(self, position: Position, *, replayed: bool) -> bool:
        """Whether :meth:`start` will wait for results of other tasks (turns of the loop)."""
        order = self._order
        if order is None or order.done:
            return False
        mark = self._marks.get(position)
        if mark is not None:
            return not order.next_is(mark)
        return self._manager.tasks_running() and not replayed

    def ended(self) -> None:
        """The frame's statement is over: results from now on arrive between statements."""
        self._ended_at = self._manager.last_await

    def watch_turns(self) -> list[None] | None:
        """Whether an await lets the loop turn, where other tasks make that matter.

        A callback queued before the await has run by the time it returns exactly when the
        task was suspended; replay then takes a turn of the loop for it, and none for an
        await that returned at once (other tasks did not run in between).
        """
        if not self._manager.tasks:
            return None
        turned: list[None] = []
        asyncio.get_running_loop().call_soon(turned.append, None)
        return turned

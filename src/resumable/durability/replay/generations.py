"""The statements of a frame whose tasks are still running, and what replay answers them with.

Each statement a frame runs is a *generation*; every task it spawns carries it in its cursor.
A task may outlive its statement: its foreign awaits and steps are still journaled, under
the statement that spawned it, and on replay they are answered from that statement's
journal while later statements run. A generation stays *open* while a task it spawned is
running at a boundary; a boundary with an open generation opens a replay window (see
``docs/durability.md``, Resume).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from resumable.durability.log.run_state import AwaitEntry, Position

__all__ = ["Generations"]


class Generations:
    """Per generation: the statement, the results still to answer, the live tasks."""

    __slots__ = ("_positions", "_replays", "_tasks", "open")

    def __init__(self) -> None:
        self._positions: dict[int, Position] = {}
        self._replays: dict[int, dict[Any, AwaitEntry]] = {}
        self._tasks: dict[int, set[asyncio.Task[Any]]] = {}
        self.open: set[int] = set()

    def begin(self, generation: int, position: Position, replay: dict[Any, AwaitEntry]) -> None:
        self._positions[generation] = position
        self._replays[generation] = replay

    def position(self, generation: int, default: Position) -> Position:
        """The statement (turn, index) that spawned the generation's tasks."""
        return self._positions.get(generation, default)

    def replay(self, generation: int) -> dict[Any, AwaitEntry] | None:
        return self._replays.get(generation)

    def track(self, generation: int, task: asyncio.Task[Any]) -> None:
        self._tasks.setdefault(generation, set()).add(task)

    def end(self, generation: int) -> dict[Any, AwaitEntry]:
        """The statement is over: what its root task left unanswered (a divergence).

        A generation whose tasks all finished is forgotten; one with a task still running
        stays open, and keeps its journal for that task's awaits.
        """
        for gen, tasks in list(self._tasks.items()):
            tasks.difference_update([task for task in tasks if task.done()])
            if not tasks:
                del self._tasks[gen]
        self.open = set(self._tasks)
        replay = self._replays.get(generation, {})
        leftover = replay
        if generation in self.open:  # its tasks still answer from it
            leftover = {k: e for k, e in replay.items() if isinstance(k, int)}
        for gen in [g for g in self._replays if g not in self.open]:
            del self._replays[gen]
        for gen in [g for g in self._positions if g not in self.open]:
            del self._positions[gen]
        return leftover

    def pending(self) -> bool:
        """True while some recorded result has not been answered yet."""
        return any(self._replays.values())

    def entries(self) -> Iterator[AwaitEntry]:
        return (e for replay in self._replays.values() for e in replay.values())

"""``sys.exit()`` in a task the program spawned, as it ends a program under ``asyncio.run``.

The ``SystemExit`` leaves the event loop (a task re-raises it from its step), and
``asyncio.run`` then cancels every task on its way out: the program's main statement too,
and the run's driver with it, which learns here that the cancel is that exit and ends the
run with its code. The cancel may reach the driver before the exiting task's done
callbacks run, so the tasks not yet seen done are looked at as well.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["TaskExits"]


class TaskExits:
    """Watches the program's tasks for the first that ended with ``SystemExit``."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()
        self._exit: SystemExit | None = None

    def watch(self, task: asyncio.Task[Any]) -> None:
        self._running.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._running.discard(task)
        self._exit = self._exit or _exit_of(task)

    @property
    def exit(self) -> SystemExit | None:
        """The ``SystemExit`` a watched task ended with, if one did."""
        for task in self._running:
            self._exit = self._exit or _exit_of(task)
        return self._exit


def _exit_of(task: asyncio.Task[Any]) -> SystemExit | None:
    if task.done() and not task.cancelled():
        exc = task.exception()
        if isinstance(exc, SystemExit):
            return exc
    return None

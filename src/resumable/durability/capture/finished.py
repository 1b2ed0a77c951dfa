"""A task kept in the namespace, as a checkpoint saves it.

A task that had finished when its statement's boundary was written is saved as its
outcome (result, exception or cancellation) and its name, and restored as a done
future that gives them: a later ``await t``, ``t.result()``, ``gather`` over it get
what the uninterrupted run got, and nothing runs again. A task still running at a
boundary cannot be saved (its coroutine's frame cannot be pickled): a script's
boundary then saves no namespace and a resume replays from before the task's
statement (see :mod:`resumable.durability.replay.generations`); elsewhere it is left out
with a reason, as any other value that cannot be checkpointed.
"""

from __future__ import annotations

import asyncio
import pickle
from asyncio.futures import _PyFuture  # type: ignore[attr-defined]
from typing import Any


class FinishedTask(_PyFuture):  # type: ignore[misc]
    """A finished task restored from a checkpoint: a done future with the task's name.

    It belongs to no loop until something waits on it: a checkpoint may be read where no
    loop runs (to show a run), and its outcome needs none.
    """

    def __init__(self, name: str, outcome: str, value: Any) -> None:
        # Not the base __init__: it would bind the future to a loop that may not exist.
        self._callbacks: list[Any] = []
        self._name = name
        if outcome == "cancelled":
            self.cancel(value)
        elif outcome == "exception":
            self.set_exception(value)
            self.exception()  # its task's exception was retrieved or reported already
        else:
            self.set_result(value)

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def get_name(self) -> str:
        return self._name

    def __reduce__(self) -> tuple[Any, ...]:
        return reduce_task(self)


def reduce_task(task: Any) -> tuple[Any, ...]:
    """A finished task as its name and outcome; a running one refused with the reason."""
    if not task.done():
        raise pickle.PicklingError(
            f"task {task.get_name()} was still running when the statement that holds it ended; "
            "await it in the statement that creates it"
        )
    if task.cancelled():
        return (FinishedTask, (task.get_name(), "cancelled", None))
    error = task.exception()
    if error is not None:
        return (FinishedTask, (task.get_name(), "exception", error))
    return (FinishedTask, (task.get_name(), "result", task.result()))

"""Idempotency keys: the name of the effect in flight, the same in a run and its resume."""

from __future__ import annotations

import contextvars
import os
import socket
import time

from resumable.durability.effects.tasks import current_cursor
from resumable.exec.hooks import program_cursor

__all__ = ["await_key", "flight_key", "idempotency_key", "in_flight"]

in_flight: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "resumable_await", default=None
)


def idempotency_key() -> str:
    """The key of the effect in flight: the same in the run that crashed and on resume.

    Inside a step or a foreign await it names that call; in program code of a durable
    statement it names the next foreign await or step of the running task. Tools use it to
    de-duplicate the one effect a crash may repeat.

    Outside a durable run (plain Python, ``enabled = false``) nothing is ever resumed, so
    there is nothing to repeat: the key is this process's own, ``local:HOST:PID:START/N``,
    a new ``N`` for each call, so no two effects share one.
    """
    key = await_key()
    if key is not None:
        return key
    global _local_calls
    _local_calls += 1
    return f"{_PROCESS_KEY}/{_local_calls}"


_PROCESS_KEY = f"local:{socket.gethostname()}:{os.getpid()}:{int(time.time() * 1000)}"
_local_calls = 0


def flight_key() -> str | None:
    """The full key of the step (or thread) or foreign await in flight, if any: a step's
    ``in_flight``, else the running task's cursor's (set while a foreign await runs)."""
    key = in_flight.get()
    if key is not None:
        return key
    cursor = program_cursor.get()
    return None if cursor is None else cursor.flight


def await_key() -> str | None:
    """The idempotency key of the await or step in flight in a durable run; None outside one."""
    key = flight_key()
    if key is not None:
        return key
    cursor = current_cursor()
    if cursor is not None:
        return cursor.journal.full_key(cursor.peek())
    return None

"""A foreign await in flight: the scope in which a library may call the program back.

While a foreign await runs, its task runs library code under the await's own scope cursor
(``KEY^``, :mod:`resumable.durability.effects.tasks`), so program code the library calls journals
its awaits and steps under keys of its own, and marks the scope (its ``ran`` flag) when it
starts: whether any program code ran before the await ended. A step runs with no cursor: its body
is the step. So does ``asyncio.to_thread``: a function run on another thread is the
blocking work the await stands for, journaled as one (steps and awaits journal on the
event loop's thread only).

An ``__aenter__`` that returns its own manager (``AsyncExitStack``, most clients) is made
again on replay too: its result is the object the program goes on using, and a copy
unpickled from the log would not be the one whose ``__aexit__`` runs.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from resumable.durability.effects.keys import in_flight
from resumable.durability.effects.tasks import Key, TaskCursor, set_cursor
from resumable.durability.log.run_state import AwaitEntry
from resumable.exec.hooks import program_cursor

if TYPE_CHECKING:
    from resumable.durability.replay.order import ReplayOrder

__all__ = [
    "RUN_AGAIN",
    "TRANSPARENT",
    "Scope",
    "drop_scope",
    "has_scopes",
    "start_statement",
]

TRANSPARENT = "t"
"""The outcome of a foreign await during which program code ran: replay runs it again."""

RUN_AGAIN = frozenset({"x", TRANSPARENT})
"""Outcomes replay does not answer: the await runs again (not picklable, transparent)."""


_TO_THREAD: Final = asyncio.to_thread.__code__


class Scope(TaskCursor):
    """Set around the ``await`` of a foreign ``awaitable`` (None: a step's body) until closed.

    The scope is the cursor program code the library calls back journals under (``KEY^``),
    and what that code marks when it starts (one object: this sits on every foreign await).
    """

    __slots__ = ("_flight", "_key", "_manager", "_token")

    def __init__(self, cursor: TaskCursor, key: Key, full_key: str, awaitable: object) -> None:
        self.ran = False
        code = getattr(awaitable, "cr_code", None)
        entering = code is not None and code.co_name == "__aenter__"
        self._manager = _entered_manager(awaitable) if entering else None
        self._flight: contextvars.Token[str | None] | None
        if awaitable is None or code is _TO_THREAD:
            self._flight = in_flight.set(full_key)
            self._token = program_cursor.set(None)
            return
        # TaskCursor's fields, set here: one call less on the path of every foreign await;
        # its key is the cursor's flight (no context variable of its own: one set less)
        self._flight = None
        self.journal = cursor.journal
        self.statement = cursor.statement
        self._key = key
        self.count = self.spawns = 0
        self.library = True
        self.flag = self
        self.flight = full_key
        self._token = program_cursor.set(self)  # the ContextVar itself: a call less

    @property
    def path(self) -> str:  # type: ignore[override]
        """``KEY^``, made when program code inside the await needs it, not on every await."""
        return f"{self._key}^"

    def outcome(self, journaled: str, value: object) -> str:
        """The await's outcome: ``journaled`` (``v``, ``e``), or transparent if program code
        ran, or if it entered a manager that returned itself (``value``)."""
        manager = self._manager
        if self.ran or (manager is not None and value is manager):
            return TRANSPARENT
        return journaled

    def close(self) -> None:
        program_cursor.reset(self._token)
        if self._flight is not None:
            in_flight.reset(self._flight)


def start_statement(cursor: TaskCursor) -> None:
    """A statement starts in the running task under its cursor, its own flag (a playbook
    frame called from another frame's foreign await runs its own code, not that await's)."""
    set_cursor(cursor)


def _entered_manager(awaitable: object) -> object:
    """The manager whose ``async def __aenter__`` ``awaitable`` runs (not yet started)."""
    frame = awaitable.cr_frame  # type: ignore[attr-defined]
    return None if frame is None else frame.f_locals.get("self")


def has_scopes(journals: Mapping[Any, Mapping[Any, AwaitEntry]]) -> bool:
    """Whether any record of ``journals`` was made inside a foreign await."""
    return any(isinstance(key, str) and "^" in key for j in journals.values() for key in j)


def drop_scope(
    scoped: bool, replay: dict[Any, AwaitEntry] | None, key: Key, order: ReplayOrder | None
) -> None:
    """The await at ``key`` is answered from the log: records made under its scope after it
    had completed (by a task the library left behind) are not reached on replay.

    ``scoped``: whether the log holds any record made in a scope (else nothing to look for).
    """
    if not (scoped and replay):
        return
    prefix = f"{key}^"
    for inner in [k for k in replay if isinstance(k, str) and k.startswith(prefix)]:
        dropped = replay.pop(inner)
        if order is not None and dropped.outcome not in RUN_AGAIN:
            order.drop(dropped.seq)

"""Task keys: which task of a statement, and which of its foreign awaits or steps, a record is.

The statement in progress runs in a *root* task with the key ``""``. A task the program
spawns while the statement runs (``create_task``, ``gather``, ``TaskGroup``, ``as_completed``,
``ensure_future``, ``wait_for``) gets its parent's key plus the parent's spawn ordinal
(``"2"``, ``"2.1"``), so the same program spawns the same keys on replay. Within a task
the n-th foreign await or step gets n: record key ``n`` in the root task, ``"KEY:n"`` in a
spawned one. While a foreign await is in flight its task runs library code under a *scope*
cursor of its own, ``"KEY^"`` (``KEY`` the await's key): program code the library calls back
journals its awaits and steps under ``"KEY^:n"``, and the tasks the library spawns get
``"KEY^.1"`` and so on; a task running a library coroutine there is neither journaled as a
whole nor kept as the program's (it is the library's own work).

The key travels in a context variable, which a new task copies from its creator; the
loop's ``create_task`` is wrapped (once per loop) to give a task spawned from program code
its own cursor, and the deterministic ``Task-N`` name CPython would give it (counted per
run, so the name does not depend on what the runtime itself spawned). Code the runtime
runs on the program's behalf (a step, a record being written) runs with no
cursor, so whatever it spawns or awaits is invisible to the keys. A journal that can
replay a task past its statement (a script's) is told of each task it keys (``track``).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import sys
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Protocol, TypeVar

from resumable.exec.hooks import ProgramRan, is_program_code, program_cursor

__all__ = [
    "KeyedJournal",
    "TaskCursor",
    "current_cursor",
    "install_task_keys",
    "outside_keys",
    "reset_cursor",
    "set_cursor",
]

T = TypeVar("T")

Key = int | str
"""A record key inside one statement's journal."""


class KeyedJournal(Protocol):
    """What a cursor reports to: the journal of the statement that created it."""

    def live(self, cursor: TaskCursor) -> bool:
        """True while the statement the cursor belongs to is running."""
        ...

    def next_task_name(self) -> str:
        """``Task-N`` for the next unnamed task the program spawns."""
        ...

    def spawned(self, cursor: TaskCursor, coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
        """The coroutine a spawned task runs (a foreign one is journaled as one await)."""
        ...

    def full_key(self, key: Key) -> str:
        """The idempotency key of ``key``: unique in the run, the same on replay."""
        ...

    def await_foreign(
        self, cursor: TaskCursor, site: str, awaitable: Awaitable[T]
    ) -> Coroutine[Any, Any, T]:
        """Journal a foreign await under the cursor's next key."""
        ...

    def call_step(self, cursor: TaskCursor, site: str, thunk: Callable[[], T]) -> T:
        """Journal a synchronous call under the cursor's next key."""
        ...

    def await_step(
        self, cursor: TaskCursor, site: str, start: Callable[[], Awaitable[T]]
    ) -> Coroutine[Any, Any, T]:
        """Journal an awaited call under the cursor's next key."""
        ...


class TaskCursor:
    """One task's position in its statement's journal."""

    __slots__ = (
        "count",
        "flag",
        "flight",
        "journal",
        "library",
        "path",
        "ran",
        "spawns",
        "statement",
    )

    def __init__(
        self,
        journal: KeyedJournal,
        statement: int,
        path: str = "",
        library: bool = False,
        flag: ProgramRan | None = None,
        flight: str | None = None,
    ) -> None:
        self.journal = journal
        self.statement = statement
        self.path = path
        self.count = 0
        self.spawns = 0
        self.library = library
        """Inside a foreign await: library code runs here, program code only as its callback."""
        self.ran = False
        self.flag: ProgramRan = self if flag is None else flag
        """What program code running in this task marks (exec.hooks.HookBase.entered): the
        foreign await in flight it runs inside of, else the cursor itself (never read)."""
        self.flight = flight
        """The full key of the foreign await this task runs inside of (its idempotency key)."""

    def key(self, n: int) -> Key:
        return n if not self.path else f"{self.path}:{n}"

    def take(self) -> Key:
        """The key of the task's next foreign await or step, now taken."""
        n = self.count
        self.count = n + 1
        return n if not self.path else f"{self.path}:{n}"

    def peek(self) -> Key:
        return self.key(self.count)

    def child(self) -> TaskCursor:
        self.spawns += 1
        path = f"{self.path}.{self.spawns}" if self.path else str(self.spawns)
        return TaskCursor(self.journal, self.statement, path, self.library, self.flag, self.flight)


_cursor: contextvars.ContextVar[TaskCursor | None] = program_cursor  # type: ignore[assignment]


def current_cursor() -> TaskCursor | None:
    """The running task's cursor, if program code of a live durable statement is running."""
    cursor = _cursor.get()
    if cursor is None or not cursor.journal.live(cursor):
        return None
    return cursor


def set_cursor(cursor: TaskCursor | None) -> contextvars.Token[TaskCursor | None]:
    return _cursor.set(cursor)


def reset_cursor(token: contextvars.Token[TaskCursor | None]) -> None:
    _cursor.reset(token)


class outside_keys:
    """Runtime work inside a task's await: it spawns nothing that gets a key."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _cursor.set(None)

    def __exit__(self, *exc: object) -> None:
        _cursor.reset(self._token)


def _in_argument_order(as_completed: Callable[..., Any]) -> Callable[..., Any]:
    """``asyncio.as_completed`` spawning the tasks of bare coroutines in argument order.

    CPython spawns them while iterating a set of the coroutines, an order that changes
    from one process to the next; program code gets them spawned in the order it passed
    them, so each keeps its key on replay.
    """

    def stable(fs: Any, **kwargs: Any) -> Any:
        if current_cursor() is not None and not (asyncio.isfuture(fs) or asyncio.iscoroutine(fs)):
            fs = [asyncio.ensure_future(f) for f in dict.fromkeys(fs)]
        return as_completed(fs, **kwargs)

    stable._resumable_keys = True  # type: ignore[attr-defined]
    return stable


_ASYNCIO_DIR = os.path.dirname(asyncio.__file__) + os.sep


def _program_spawns() -> bool:
    """Whether the code asking asyncio for a task (inside a foreign await) is the program's."""
    frame = sys._getframe(2)  # the caller of the loop's create_task
    while frame is not None and frame.f_code.co_filename.startswith(_ASYNCIO_DIR):
        frame = frame.f_back  # type: ignore[assignment]
    return frame is not None and is_program_code(frame.f_code)


def install_task_keys(loop: asyncio.AbstractEventLoop) -> None:
    """Wrap ``loop.create_task`` so tasks spawned by program code get keys (idempotent)."""
    if not getattr(asyncio.as_completed, "_resumable_keys", False):
        asyncio.as_completed = asyncio.tasks.as_completed = _in_argument_order(asyncio.as_completed)
    create = loop.create_task
    if getattr(create, "_resumable_keys", False):
        return

    def create_task(
        coro: Generator[Any, None, T] | Coroutine[Any, Any, T],
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[T]:
        cursor = context.get(_cursor) if context is not None else _cursor.get()
        if (
            cursor is None
            or not cursor.journal.live(cursor)
            or not isinstance(coro, types.CoroutineType)
        ):
            return create(coro, name=name, context=context)
        child = cursor.child()
        journal = cursor.journal
        if child.library and not is_program_code(coro.cr_code) and not _program_spawns():
            # a library's own task inside its await: keyed for the program code it calls
            task_context = context if context is not None else contextvars.copy_context()
            task_context.run(_cursor.set, child)
            return create(coro, name=name, context=task_context)
        child.library = False  # the program's own task, as outside a foreign await
        if name is None:
            name = journal.next_task_name()
        task_context = context if context is not None else contextvars.copy_context()
        task_context.run(_cursor.set, child)
        task = create(journal.spawned(child, coro), name=name, context=task_context)
        track = getattr(journal, "track", None)
        if track is not None:
            track(child, task)
        return task

    create_task._resumable_keys = True  # type: ignore[attr-defined]
    loop.create_task = create_task  # type: ignore[method-assign]

"""``@resumable.step``: a program function whose call is an effect, done once.

A step's result (or the exception it raised) is journaled under the calling task's next
key, like a foreign await; on replay the call is answered from the journal without running
the body. Outside a durable run a step is the plain function, so the same file runs under
``python``. Inside a step nothing is journaled again (its own awaits and nested steps are
part of the one effect), and :func:`resumable.idempotency_key` names the call: the same in
the run that died and in the resume that repeats it.

A synchronous step cannot wait for the store: its record is buffered, made durable before
the next foreign await, step or statement boundary of the run (a synchronous step starting
writes it, blocking: ``CheckpointManager.settle_before_step``). A process killed inside
that window runs the step again on resume, with the same idempotency key. A result that cannot be
pickled is journaled as "not replayable": the step then runs again on resume, and a
warning says so when it is recorded.

:func:`journaled` is the same mechanism for the runtime's own use (the clock, randomness):
``journaled("time.time", time.time)``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar, overload

from resumable.durability.effects.foreign import mark_transparent
from resumable.durability.effects.tasks import current_cursor

__all__ = ["journaled", "step"]

P = ParamSpec("P")
T = TypeVar("T")


def journaled(name: str, thunk: Callable[[], T]) -> T:
    """``thunk()``, journaled under the current task's next key (site ``name``) in a run.

    On replay the recorded value is returned without calling ``thunk``; outside a durable
    statement (or inside a step or foreign await, which is journaled as a whole) it is just
    ``thunk()``.
    """
    cursor = current_cursor()
    if cursor is None:
        return thunk()
    return cursor.journal.call_step(cursor, name, thunk)


@overload
def step(fn: Callable[P, Awaitable[T]], /) -> Callable[P, Awaitable[T]]: ...


@overload
def step(fn: Callable[P, T], /) -> Callable[P, T]: ...


def step(fn: Callable[P, Any], /) -> Callable[P, Any]:
    """Mark ``fn`` (sync or ``async def``) as an effect: journaled, never repeated on replay."""
    if not callable(fn):
        raise TypeError(
            f"@resumable.step decorates a function, got {type(fn).__name__} {fn!r}; "
            "put it directly above a def or async def"
        )
    site = f"step:{getattr(fn, '__qualname__', None) or type(fn).__qualname__}"
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def call_async(*args: P.args, **kwargs: P.kwargs) -> Any:
            cursor = current_cursor()
            if cursor is None:
                return await fn(*args, **kwargs)
            return await cursor.journal.await_step(cursor, site, lambda: fn(*args, **kwargs))

        call_async.__resumable_step__ = site  # type: ignore[attr-defined]
        return call_async

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> Any:
        cursor = current_cursor()
        if cursor is None:
            return fn(*args, **kwargs)
        return cursor.journal.call_step(cursor, site, lambda: fn(*args, **kwargs))

    call.__resumable_step__ = site  # type: ignore[attr-defined]
    return call


def _wrapper_code() -> Any:
    @step
    async def probe() -> None:
        return None

    return probe.__code__


mark_transparent(_wrapper_code())

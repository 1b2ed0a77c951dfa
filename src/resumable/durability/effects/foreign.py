"""Which awaits are the program's own (run again on replay) and which are foreign (journaled).

Replay re-executes program code, so anything whose effects live in the process's memory
must run for real on replay too; only what reaches outside is answered from the journal.

The rule is decided when an await runs: a foreign await is journaled as a *leaf*, answered
from the log on replay, only if no program code ran while it was in flight (every function
the program defines says when it starts, see :mod:`resumable.exec.rewrite`). One during
which program code ran - ``AsyncExitStack.__aexit__`` running the program's ``__aexit__``,
a library retry helper calling the program's coroutine, a library calling back a program
function - is recorded as *transparent*: replay runs it again for real, and the program
code inside journals its own foreign awaits and steps (:mod:`resumable.durability.replay.journal`).

This module is the fast path: awaits it knows are the program's own run for real without
being journaled at all:

- a coroutine the program defined (its code object was compiled from a program file), or
  an awaitable object whose ``__await__`` the program defined;
- ``anext()``, ``asend()``, ``athrow()`` and ``aclose()`` of an async generator the program
  defined (its body goes on where it stood, which no flag at its start would tell);
- asyncio's in-memory coordination: awaiting a task or future (the work behind it is
  journaled where it runs, in its own task), queues, locks, events, conditions, semaphores,
  ``gather``/``wait``/``wait_for``/``as_completed``/``shield``, task groups and timeouts;
- ``contextlib``'s async context managers around a program-defined async generator, and
  ``@resumable.step`` wrappers (which journal themselves).

Everything else awaited from program code is foreign: library I/O, ``asyncio.sleep``,
``asyncio.to_thread``, LLM and playbook calls, a coroutine of any other module. One
consequence to know: work started by a plain future (``loop.run_in_executor``) is not
journaled; wrap such a call in a step.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import types
from typing import Any, Final

from resumable.exec.hooks import is_program_code, is_program_generator

__all__ = ["is_foreign", "mark_transparent"]

_ASYNCIO_DIR: Final = os.path.dirname(asyncio.__file__) + os.sep
_COORDINATION: Final = frozenset(
    os.path.join(_ASYNCIO_DIR, name + ".py")
    for name in ("queues", "locks", "tasks", "taskgroups", "timeouts", "futures", "mixins")
)
_FOREIGN_IN_COORDINATION: Final = frozenset({"sleep", "to_thread"})
_CONTEXTLIB: Final = contextlib.__file__


_GENERATOR_AWAITABLES: Final = frozenset(
    {"async_generator_asend", "async_generator_athrow", "anext_awaitable"}
)
"""What ``anext(agen)``, ``asend()``, ``athrow()``, ``aclose()``, ``anext(agen, d)`` return
(builtin types with no public name; made here, an async generator would be finalized by
the running loop with a task of its own)."""

_transparent: set[types.CodeType] = set()


def mark_transparent(code: types.CodeType) -> None:
    """Coroutines of ``code`` run for real (they journal what they need themselves)."""
    _transparent.add(code)


def is_foreign(awaitable: Any) -> bool:
    """True if awaiting ``awaitable`` from program code is journaled."""
    if isinstance(awaitable, types.CoroutineType):
        return _foreign_code(awaitable)
    if asyncio.isfuture(awaitable):
        return False
    if _generator_awaitable(awaitable):
        return not _of_program_generator(awaitable)
    method = getattr(type(awaitable), "__await__", None)
    code = getattr(method, "__code__", None)
    return not (code is not None and is_program_code(code))


def _foreign_code(coro: types.CoroutineType[Any, Any, Any]) -> bool:
    code = coro.cr_code
    if code in _transparent or is_program_code(code):
        return False
    filename = code.co_filename
    if filename in _COORDINATION:
        return code.co_name in _FOREIGN_IN_COORDINATION
    if filename == _CONTEXTLIB:
        frame = coro.cr_frame
        manager = frame.f_locals.get("self") if frame is not None else None
        generator = getattr(manager, "gen", None)
        return not (generator is not None and is_program_code(generator.ag_code))
    return True


def _of_program_generator(awaitable: Any) -> bool:
    """Whether an async generator's ``asend``/``athrow`` (or ``anext`` with a default around
    one) drives a generator the program defined: found as what the awaitable refers to."""
    for _ in range(2):
        referents = gc.get_referents(awaitable)
        if not referents:
            return False
        awaitable = referents[0]
        if is_program_generator(awaitable):
            return True
        if not _generator_awaitable(awaitable):
            return False
    return False


def _generator_awaitable(awaitable: Any) -> bool:
    kind = type(awaitable)
    return kind.__name__ in _GENERATOR_AWAITABLES and kind.__module__ == "builtins"

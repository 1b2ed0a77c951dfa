"""Which awaits are the program's own (run again on replay) and which are foreign (journaled).

Replay re-executes program code, so anything whose effects live in the process's memory
must run for real on replay too; only what reaches outside is answered from the journal.

Run for real, never journaled:

- a coroutine the program defined (its code object was compiled from a program file), or
  an awaitable object whose ``__await__`` the program defined;
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
import os
import types
from typing import Any, Final

from resumable.exec.hooks import is_program_code

__all__ = ["is_foreign", "mark_transparent"]

_ASYNCIO_DIR: Final = os.path.dirname(asyncio.__file__) + os.sep
_COORDINATION: Final = frozenset(
    os.path.join(_ASYNCIO_DIR, name + ".py")
    for name in ("queues", "locks", "tasks", "taskgroups", "timeouts", "futures", "mixins")
)
_FOREIGN_IN_COORDINATION: Final = frozenset({"sleep", "to_thread"})
_CONTEXTLIB: Final = contextlib.__file__

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

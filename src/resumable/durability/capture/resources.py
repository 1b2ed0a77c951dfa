"""How process resources held in variables are checkpointed: files, locks, queues, context vars.

Design note. These reducers come before cloudpickle's own and after the user's
(:mod:`resumable.durability.capture.reducers`). Each turns a resource into what it takes to make it
again in a new process:

- an open file becomes its absolute path, mode, text settings and position. A file the program
  created or appends to (``w``, ``x``, ``a``) is reopened without truncation and cut back to its
  size at the checkpoint, so the statement that runs again writes its bytes once; ``r+`` files
  are reopened as they are. Writable files are flushed at every checkpoint. A file that no longer
  exists comes back as a :class:`LostVariable` naming it. Limits: the ``newline`` argument of a
  text file is not visible, so it is reopened with the default; a text file being iterated with
  ``next()`` has no position and is lost; a file opened from a descriptor cannot be reopened.
- ``sys.stdout``/``sys.stderr`` (the run's routers or the real streams) are saved by name.
- ``threading`` locks come back held as they were (an ``RLock`` with its count, if the saving
  thread held it); ``threading`` events, conditions, semaphores and ``queue.Queue`` follow.
- ``asyncio`` locks, events, conditions, semaphores and queues (with their items) are saved
  without their event loop and without waiters (the waiting tasks are not in the checkpoint).
- a ``contextvars.ContextVar`` is made again with its name and default, and its value in the
  saving context is set in the restoring one. A ``contextvars.Token`` is made again in the
  restoring context from its variable and old value, so ``var.reset(token)`` after a resume
  gives the variable back the value it had before ``set``; a token already used comes back
  used (limit: a token made in another task's context comes back usable here).
- a ``threading.Thread`` is refused: a thread does not survive a restart.

The ``_make_*`` helpers are named in pickles: renaming one breaks old checkpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copyreg
import io
import os
import pickle
import queue
import re
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Final

from resumable.durability.capture.finished import reduce_task
from resumable.durability.capture.lost import LostVariable
from resumable.durability.effects.written_files import track, tracking
from resumable.exec.output import standard_stream

__all__ = ["RESOURCE_REDUCERS", "reduce_resource_subclass", "reopening_files"]

_LOCK: Final = type(threading.Lock())
_RLOCK: Final = type(threading.RLock())
_LOOP_BOUND: Final = asyncio.mixins._LoopBoundMixin
_STDIO: Final = {"<stdout>": "stdout", "<stderr>": "stderr", "<stdin>": "stdin"}
_RLOCK_COUNT: Final = re.compile(r"count=(\d+)")
_REOPEN: Final = contextvars.ContextVar("resumable_reopen_files", default=True)
_FIRST_SET: dict[contextvars.ContextVar[Any], contextvars.Token[Any]] = {}
"""The token of the value a restored variable was made with: a token restored with no old
value undoes it, so that its own ``reset`` leaves the variable without a value again."""


@contextlib.contextmanager
def reopening_files(reopen: bool) -> Iterator[None]:
    """Whether files unpickled in this block are opened (a resume) or only described (``show``,
    which must never open, let alone cut back, a file a live run may be writing)."""
    token = _REOPEN.set(reopen)
    try:
        yield
    finally:
        _REOPEN.reset(token)


# -- helpers named in pickles ------------------------------------------------------------------
def _make_lock(locked: bool) -> Any:
    lock = threading.Lock()
    if locked:
        lock.acquire()
    return lock


def _make_rlock(count: int) -> Any:
    lock = threading.RLock()
    for _ in range(count):
        lock.acquire()
    return lock


def _make_simple_queue(items: list[Any]) -> queue.SimpleQueue[Any]:
    made: queue.SimpleQueue[Any] = queue.SimpleQueue()
    for item in items:
        made.put(item)
    return made


def _make_context_var(
    name: str, default: tuple[Any, ...], value: tuple[Any, ...]
) -> contextvars.ContextVar[Any]:
    """``default``/``value`` are ``()`` for none, else a 1-tuple holding it."""
    var: contextvars.ContextVar[Any]
    var = (
        contextvars.ContextVar(name, default=default[0])
        if default
        else contextvars.ContextVar(name)
    )
    if value:
        _FIRST_SET[var] = var.set(value[0])
    return var


def _make_context_token(
    var: contextvars.ContextVar[Any], old: tuple[Any, ...], used: bool = False
) -> contextvars.Token[Any]:
    """A token of ``var`` whose ``reset`` gives ``var`` back ``old`` (``()``: no value), or,
    ``used``, raises as a token reset already does.

    Made in the restoring context, leaving ``var``'s value as it was restored.
    """
    context = contextvars.copy_context()
    current = (context[var],) if var in context else ()
    if used or not (old or current):  # the second: no unused token can be in that state
        before = var.set(old[0]) if old else None
        token = var.set(None)
        var.reset(token)
        if before is not None:
            var.reset(before)
        return token
    first = None if old else _FIRST_SET.pop(var, None)
    if first is not None:
        var.reset(first)  # without a value, as when the token was made
    before = var.set(old[0]) if old else None
    token = var.set(None)
    if current:
        var.set(current[0])
    elif before is not None:
        var.reset(before)
    return token


def _make_file(
    path: str, mode: str, text: tuple[str, str, bool, bool] | None, position: Any, size: int
) -> Any:
    """Open ``path`` again as it was; a file the program created is cut back to ``size``."""
    if not _REOPEN.get():
        return LostVariable(path, f"a file open with mode {mode!r}, reopened when the run resumes")
    reading = "r" in mode or "+" in mode
    writing = mode[0] in "wxa" or "+" in mode
    flags = (os.O_RDWR if reading else os.O_WRONLY) if writing else os.O_RDONLY
    if mode[0] == "a":
        flags |= os.O_APPEND
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        reason = f"the file {path!r} it had open cannot be opened again: {exc.strerror}"
        return LostVariable(path, reason)
    try:
        if mode[0] in "wxa" and not tracking() and os.fstat(fd).st_size > size:
            os.ftruncate(fd, size)  # what the statement in progress wrote: it runs again
        raw_mode = {"r": "r", "w": "w", "x": "w", "a": "a"}[mode[0]] + ("+" if "+" in mode else "")
        if text is None:
            made: Any = open(fd, raw_mode + "b")  # noqa: SIM115 - the program closes it
            made.raw.name = path
        else:
            encoding, errors, line_buffering, write_through = text
            made = open(  # noqa: SIM115
                fd, raw_mode, encoding=encoding, errors=errors, closefd=True
            )
            made.reconfigure(line_buffering=line_buffering, write_through=write_through)
            made.buffer.raw.name = path  # opened from a descriptor: it would say the number
            made.mode = mode
    except BaseException:
        os.close(fd)
        raise
    if mode[0] != "a" and made.seekable():
        made.seek(position)
    elif mode[0] == "a" and tracking():
        track(made, path)  # the replay does not append again what the last record counts
    return made


def _make_closed_file(path: str, text: bool) -> Any:
    made: Any = io.StringIO() if text else io.BytesIO()
    made.close()
    return made


# -- reducers ----------------------------------------------------------------------------------
def _reduce_file(obj: Any) -> tuple[Any, ...]:
    text = isinstance(obj, io.TextIOWrapper)
    raw = obj.buffer if text else obj
    raw = getattr(raw, "raw", raw)
    name = getattr(raw, "name", None)
    stdio = _STDIO.get(name) if isinstance(name, str) else None
    if stdio is not None and obj is getattr(sys, f"__{stdio}__", None):
        return (standard_stream, (stdio,))
    if obj.closed:
        return (_make_closed_file, (os.fsdecode(name) if name else "", text))
    if not isinstance(raw, io.FileIO) or not isinstance(name, str | bytes):
        raise pickle.PicklingError(
            "a file opened from a file descriptor cannot be opened again after a restart; "
            "open it by its path"
        )
    path = os.path.abspath(os.fsdecode(name))
    mode = (obj.mode if text else raw.mode).replace("b", "").replace("t", "")
    if obj.writable():
        obj.flush()
    position = obj.tell()
    size = os.fstat(raw.fileno()).st_size
    settings = None
    if text:
        settings = (obj.encoding, obj.errors, obj.line_buffering, obj.write_through)
    return (_make_file, (path, mode, settings, position, size))


def _reduce_lock(lock: Any) -> tuple[Any, ...]:
    return (_make_lock, (lock.locked(),))


def _reduce_rlock(lock: Any) -> tuple[Any, ...]:
    count = 0
    if lock._is_owned():
        match = _RLOCK_COUNT.search(repr(lock))
        count = int(match.group(1)) if match else 1
    return (_make_rlock, (count,))


def _reduce_simple_queue(made: queue.SimpleQueue[Any]) -> tuple[Any, ...]:
    items = []
    while True:
        try:
            items.append(made.get_nowait())
        except queue.Empty:
            break
    for item in items:
        made.put(item)
    return (_make_simple_queue, (items,))


def _reduce_context_var(var: contextvars.ContextVar[Any]) -> tuple[Any, ...]:
    try:
        default: tuple[Any, ...] = (contextvars.Context().run(var.get),)
    except LookupError:
        default = ()
    context = contextvars.copy_context()
    value = (context[var],) if var in context else ()
    return (_make_context_var, (var.name, default, value))


def _reduce_context_token(token: contextvars.Token[Any]) -> tuple[Any, ...]:
    old = token.old_value
    old_value = () if old is contextvars.Token.MISSING else (old,)
    used = repr(token).startswith("<Token used")  # CPython shows it nowhere else
    return (_make_context_token, (token.var, old_value, used))


def _reduce_loop_bound(obj: Any) -> tuple[Any, ...]:
    """An asyncio primitive without its loop and its waiters (futures of a dead loop)."""
    state = dict(obj.__dict__)
    state.pop("_loop", None)
    for key, value in state.items():
        if isinstance(value, deque) and key in ("_waiters", "_getters", "_putters"):
            state[key] = deque()
    return (copyreg.__newobj__, (type(obj),), state)  # type: ignore[attr-defined]


def _refuse_thread(obj: Any) -> tuple[Any, ...]:
    raise pickle.PicklingError("a thread does not survive a restart; start it again")


RESOURCE_REDUCERS: Final[dict[type, Callable[[Any], tuple[Any, ...]]]] = {
    io.TextIOWrapper: _reduce_file,
    io.BufferedReader: _reduce_file,
    io.BufferedWriter: _reduce_file,
    io.BufferedRandom: _reduce_file,
    io.FileIO: _reduce_file,
    _LOCK: _reduce_lock,
    _RLOCK: _reduce_rlock,
    queue.SimpleQueue: _reduce_simple_queue,
    contextvars.ContextVar: _reduce_context_var,
    contextvars.Token: _reduce_context_token,
    threading.Thread: _refuse_thread,
    asyncio.Task: reduce_task,
    **dict.fromkeys(
        (
            *(asyncio.Lock, asyncio.Event, asyncio.Condition, asyncio.Semaphore),
            *(asyncio.BoundedSemaphore, asyncio.Queue, asyncio.PriorityQueue),
            asyncio.LifoQueue,
        ),
        _reduce_loop_bound,
    ),
}
"""Reducers for exact types; :func:`reduce_resource_subclass` covers the program's subclasses."""


def reduce_resource_subclass(obj: Any) -> tuple[Any, ...] | None:
    """A reducer for a subclass of a handled type (``class Jobs(asyncio.Queue)``), or None."""
    if isinstance(obj, _LOOP_BOUND):
        return _reduce_loop_bound(obj)
    if isinstance(obj, threading.Thread):
        return _refuse_thread(obj)
    return None

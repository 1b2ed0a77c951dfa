"""Files the program appends to: each write made once across crashes, like its output.

Design note. While a script run is driven, ``builtins.open`` and ``pathlib.Path.open`` are
wrappers: a file that program code opens in append mode (``a``, ``ab``, ``a+``), and an append-mode file kept
open across statements and restored at a resume, is *tracked*: its ``write`` (which
``writelines`` and ``print(file=...)`` call too) goes through the run's
:class:`WrittenFiles`. That counts, per path, what the program has written to the file
(characters for a text file, bytes for a binary one) since the run started, as
:class:`resumable.exec.output.ProgramOutput` counts what it prints. Each record batch
carries the counts that changed since the previous batch (tracked files are flushed
first, so what a record counts has reached the operating system); on resume the replay
of the statement in progress counts its writes again from the statement's boundary and
does not make those the last durable record covers: writing resumes where the crashed
run stopped. Nothing is ever truncated, so another process may append to the same file.

Writes made inside a step or a foreign await are not counted: they are part of that
call, which the resume answers from the journal without running it. A write made after
the last record before the kill may be made again, as the await in flight. Files opened
with ``w``, ``x`` or ``r+`` are not tracked: the replay writes the same bytes at the same
places again (an ``x`` open the crashed run had made, counted like a write, is made with
``w`` on replay instead of raising ``FileExistsError``). Not covered: ``os.write`` on a descriptor, files opened by library code
(use a step).
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import io
import os
import pathlib
import sys
import weakref
from collections.abc import Iterator, Mapping
from typing import Any, Final

from resumable.durability.effects.tasks import current_cursor
from resumable.exec.hooks import is_program_code

__all__ = ["WrittenFiles", "files_mark", "track", "tracking"]

_current: contextvars.ContextVar[WrittenFiles | None] = contextvars.ContextVar(
    "resumable_written_files", default=None
)
_original_open: Final = builtins.open
_original_path_open: Final = pathlib.Path.open
_installs = 0


class WrittenFiles:
    """One run's count of what the program wrote to each tracked file (see the module).

    ``counts``: per absolute path, what the program had written when the statement being
    run (or replayed) started. ``done``: what the last durable record covers, written by
    the process that died.
    """

    def __init__(
        self, counts: Mapping[str, int] | None = None, done: Mapping[str, int] | None = None
    ) -> None:
        self.counts: dict[str, int] = dict(counts or {})
        self.done: dict[str, int] = dict(done or {})
        self._changed: set[str] = set()
        self._dirty: dict[int, weakref.ref[Any]] = {}

    def write(self, path: str, handle: Any, data: Any, size: int, text: bool) -> int:
        start = self.counts.get(path, 0)
        end = self.counts[path] = start + size
        self._changed.add(path)
        done = self.done.get(path, 0)
        if end <= done:
            return size  # written by the process that died
        if start < done:
            data = data[done - start :] if text else memoryview(data).cast("B")[done - start :]
        type(handle).write(handle, data)
        self._dirty[id(handle)] = weakref.ref(handle)  # a dropped file flushes as it closes
        return size

    def created(self, path: str) -> bool:
        """Count an ``open(path, "x")``; True if the process that died had made it already
        (replay opens the file it created with ``w`` instead of failing)."""
        key = "x " + path  # paths are absolute: no path starts so
        count = self.counts[key] = self.counts.get(key, 0) + 1
        self._changed.add(key)
        return count <= self.done.get(key, 0)

    def mark(self) -> dict[str, int] | None:
        """Flush what tracked files hold; the counts changed since the last mark."""
        if not self._dirty and not self._changed:  # nothing written since: every record
            return None
        dirty, self._dirty = self._dirty, {}
        for ref in dirty.values():
            handle = ref()
            if handle is not None and not handle.closed:
                handle.flush()
        if not self._changed:
            return None
        counts = self.counts
        changed = {path: counts[path] for path in self._changed}
        self._changed = set()
        return changed

    @contextlib.contextmanager
    def installed(self) -> Iterator[WrittenFiles]:
        """Track the files the program opens, and count their writes, in this block."""
        global _installs
        token = _current.set(self)
        _installs += 1
        if _installs == 1:
            builtins.open = _open
            pathlib.Path.open = _path_open  # type: ignore[method-assign]
        try:
            yield self
        finally:
            _installs -= 1
            if _installs == 0:
                if builtins.open is _open:  # leave alone what someone patched over ours
                    builtins.open = _original_open
                if pathlib.Path.open is _path_open:
                    pathlib.Path.open = _original_path_open  # type: ignore[method-assign]
            _current.reset(token)


def files_mark() -> dict[str, int] | None:
    """The current run's :meth:`WrittenFiles.mark`, if its files are counted."""
    files = _current.get()
    if files is None or not (files._dirty or files._changed):  # every record: no call
        return None
    return files.mark()


def tracking() -> bool:
    """Whether a run counts its files here (a restored append-mode file is then tracked,
    not cut back to its size at the checkpoint)."""
    return _current.get() is not None


def track(handle: Any, path: str) -> None:
    """Send ``handle.write`` through the current run's :class:`WrittenFiles`."""
    ref = weakref.ref(handle)  # no cycle: the file still closes when the program drops it
    text = isinstance(handle, io.TextIOBase)

    def write(data: Any) -> Any:
        file = ref()
        if file is None:
            raise ValueError("I/O operation on closed file.")
        files = _current.get()
        if files is None or current_cursor() is None:
            return type(file).write(file, data)
        if text:
            if not isinstance(data, str):
                return type(file).write(file, data)  # raises the usual TypeError
            return files.write(path, file, data, len(data), True)
        return files.write(path, file, data, memoryview(data).nbytes, False)

    with contextlib.suppress(AttributeError):  # a file type without a __dict__: untracked
        handle.write = write


def _open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
    """``open`` as program code sees it during a run (see :func:`_opened`)."""
    if ("a" in mode or "x" in mode) and isinstance(file, str | bytes | os.PathLike):
        return _opened(_original_open, file, mode, args, kwargs)
    return _original_open(file, mode, *args, **kwargs)


def _path_open(self: pathlib.Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
    """``Path.open`` as program code sees it during a run (see :func:`_opened`)."""
    if "a" in mode or "x" in mode:
        return _opened(_original_path_open, self, mode, args, kwargs)
    return _original_path_open(self, mode, *args, **kwargs)


def _opened(opener: Any, file: Any, mode: str, args: Any, kwargs: Any) -> Any:
    """Open for program code: an append-mode file is tracked, and an ``x`` open the crashed
    run had made opens the file it created with ``w`` (see the module)."""
    if not _program_caller():
        return opener(file, mode, *args, **kwargs)
    path = os.path.abspath(os.fsdecode(file))
    if "x" in mode:
        files = _current.get()
        if files is not None and current_cursor() is not None and files.created(path):
            mode = mode.replace("x", "w")
        return opener(file, mode, *args, **kwargs)
    handle = opener(file, mode, *args, **kwargs)
    track(handle, path)
    return handle


def _program_caller() -> bool:
    """Whether the caller of ``open``/``Path.open`` (two frames up from here) is program code."""
    try:
        return is_program_code(sys._getframe(3).f_code)
    except ValueError:
        return False

"""What the program prints, kept apart from what the runtime says.

During a run, ``sys.stdout``/``sys.stderr`` are routers in front of the real streams:
what a run's code prints goes through that run's :class:`ProgramOutput` (found in a
context variable, so concurrent runs in one worker do not share it). On resume the
statement that was in progress runs again up to the point of the last durable
record; everything it prints on the way was already printed by the process that
died, so the run's output stays muted until replay passes that point. The runtime's
own messages go to the real stderr, so ``resumable exec x.py > out`` captures exactly
the program's output.
"""

from __future__ import annotations

import contextvars
import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import groupby
from operator import itemgetter
from typing import Any, TextIO

from resumable.exec.wrapped_stream import StandIn, WrappedStream

_current: contextvars.ContextVar[ProgramOutput | None] = contextvars.ContextVar(
    "resumable_output", default=None
)


class _Router(WrappedStream):
    """Sends writes to the current run's output, or to the real stream outside a run."""

    def __init__(self, real: TextIO) -> None:
        super().__init__(real)
        self.dirty = False
        """Written to since the last flush (so a checkpoint flushes only when needed)."""
        self._buffer: _BufferRouter | None = None

    def write(self, text: str) -> int:
        output = _current.get()
        if output is None:
            self.real.write(text)
            self.dirty = True
        else:
            output.write(self, text)
        return len(text)

    def flush(self) -> None:
        self.dirty = False
        self.real.flush()

    @property
    def buffer(self) -> _BufferRouter:
        """The binary layer: bytes go where text goes (muted alike), after pending text."""
        if self._buffer is None:
            self._buffer = _BufferRouter(self)
        return self._buffer

    def __reduce__(self) -> tuple[Any, ...]:
        """A variable holding ``sys.stdout`` holds this process's stdout after a resume."""
        for name in ("stdout", "stderr"):
            if getattr(sys, name) is self:
                return (standard_stream, (name,))
        raise TypeError("this output stream is no longer sys.stdout or sys.stderr")


class _BufferRouter(StandIn, io.BufferedIOBase):
    """``sys.stdout.buffer`` as the program sees it: bytes go through the text layer."""

    def __init__(self, text: _Router) -> None:
        super().__init__()
        self.text = text
        self.real = text.real

    def write(self, data: Any) -> int:
        view = memoryview(data)
        try:
            text = str(view, self.text.encoding)
        except (UnicodeDecodeError, LookupError):
            # Not text in the stream's encoding: written as it is, after what was printed,
            # outside the once-only accounting of text (a replay may write it again).
            self.text.flush()
            self.real.buffer.write(view)
            self.text.dirty = True
        else:
            self.text.write(text)  # counted, held and muted like printed text
        return view.nbytes

    def flush(self) -> None:
        self.text.flush()
        buffer = getattr(self.real, "buffer", None)
        if buffer is not None:
            buffer.flush()

    @property
    def raw(self) -> Any:
        return getattr(self.real.buffer, "raw", None)


def standard_stream(name: str) -> Any:
    """``sys.stdin``/``sys.stdout``/``sys.stderr`` of this process (routed), for a restore."""
    if name != "stdin":
        _install_routers()
    return getattr(sys, name)


def _install_routers() -> None:
    if not isinstance(sys.stdout, _Router):
        sys.stdout = _Router(sys.stdout)
    if not isinstance(sys.stderr, _Router):
        sys.stderr = _Router(sys.stderr)


class ProgramOutput:
    """One run's view of stdout/stderr: each character printed once across crashes.

    ``position`` counts the characters the run's program has produced so far (the same
    count in the run that died and in its replay). Each durable record batch carries the
    position it covers; on resume ``printed`` is that position in the last durable record,
    and what replay produces up to it is not printed again. With ``hold=True`` output is
    held back until :meth:`release`, which the checkpoint manager calls once the record
    covering it is written (safe from a process kill, its fsync may still run): a process
    killed before that record never printed it, so the resume prints it once. ``muted`` silences the rest of a run that is being stopped.
    """

    def __init__(
        self, *, muted: bool = False, hold: bool = False, position: int = 0, printed: int = 0
    ) -> None:
        self.muted = muted
        self.held: list[tuple[_Router, str]] | None = [] if hold else None
        self.position = position
        self.printed = printed

    def go_live(self) -> None:
        self.muted = False

    def seek(self, position: int) -> None:
        """Replay restarts at a boundary whose record says this much had been produced."""
        self.position = position

    def write(self, router: _Router, text: str) -> None:
        if self.muted:
            return
        start = self.position
        self.position = end = start + len(text)
        if end <= self.printed:
            return  # printed by the process that died
        if start < self.printed:
            text = text[self.printed - start :]
        if self.held is None:
            router.real.write(text)
            router.dirty = True
        else:
            self.held.append((router, text))

    def mark(self) -> tuple[int, int]:
        """(position covered, items held) as a record batch starts to be written."""
        return max(self.position, self.printed), len(self.held or ())

    def release(self, count: int | None = None) -> None:
        """Print what was held back (the first ``count`` items: a record covering them is
        durable)."""
        held = self.held
        if not held:
            return
        if count is None or count >= len(held):
            out, self.held = held, []
        else:
            out, self.held = held[:count], held[count:]
        # One write per stream in turn, not one per item: ``print("a", n)`` holds four
        # items, and with PYTHONUNBUFFERED (write-through) each would be its own write
        # call, so a kill between two of them would cut a line the record says was printed.
        streams: dict[int, _Router] = {}
        for router, items in groupby(out, key=itemgetter(0)):
            router.real.write("".join(text for _, text in items))
            streams[id(router)] = router
        for router in streams.values():
            router.flush()

    @contextmanager
    def installed(self) -> Iterator[ProgramOutput]:
        """Route what the current task (and tasks it spawns) prints through this output.

        Output still held when the block ends normally is printed; after a failure it is
        dropped, since no record says it was printed and a resume prints it again.
        """
        _install_routers()
        token = _current.set(self)
        try:
            yield self
        except BaseException:
            if self.held:
                self.held = []
            raise
        else:
            self.release()
        finally:
            _current.reset(token)


def output_mark() -> tuple[int, int] | None:
    """The current run's :meth:`ProgramOutput.mark`, if a run's output is installed."""
    output = _current.get()
    return None if output is None else output.mark()


def program_output_position() -> int | None:
    """How much the current run's program has printed so far, if its output is installed."""
    output = _current.get()
    return None if output is None else output.position


def seek_program_output(position: int) -> None:
    """Replay answered something whose output is not produced again: count from there."""
    output = _current.get()
    if output is not None:
        output.seek(position)


def release_program_output(count: int) -> None:
    """Print the current run's first ``count`` held items: their record is durable."""
    output = _current.get()
    if output is not None:
        output.release(count)

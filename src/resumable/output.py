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
from typing import TextIO

_current: contextvars.ContextVar[ProgramOutput | None] = contextvars.ContextVar(
    "resumable_output", default=None
)


class _Router(io.TextIOBase):
    """Sends writes to the current run's output, or to the real stream outside a run."""

    def __init__(self, real: TextIO) -> None:
        super().__init__()
        self.real = real
        self.dirty = False
        """Written to since the last flush (so a checkpoint flushes only when needed)."""

    def write(self, text: str) -> int:
        output = _current.get()
        if output is None or not output.muted:
            self.real.write(text)
            self.dirty = True
        return len(text)

    def flush(self) -> None:
        self.dirty = False
        self.real.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.real.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.real, "encoding", "utf-8")

    def fileno(self) -> int:
        return self.real.fileno()


def _install_routers() -> None:
    if not isinstance(sys.stdout, _Router):
        sys.stdout = _Router(sys.stdout)
    if not isinstance(sys.stderr, _Router):
        sys.stderr = _Router(sys.stderr)


class ProgramOutput:
    """One run's view of stdout/stderr: muted while replay re-does printed work."""

    def __init__(self, *, muted: bool = False) -> None:
        self.muted = muted

    def go_live(self) -> None:
        self.muted = False

    @contextmanager
    def installed(self) -> Iterator[ProgramOutput]:
        """Route what the current task (and tasks it spawns) prints through this output."""
        _install_routers()
        token = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(token)

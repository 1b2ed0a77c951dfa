"""What the program prints, kept apart from what the runtime says.

During a run ``sys.stdout``/``sys.stderr`` are taps in front of the real streams.
On resume the statement that was in progress runs again up to the point of the
last durable record; everything it prints on the way was already printed by the
process that died, so the taps stay muted until replay passes that point. The
runtime's own messages (progress, warnings) go to the real stderr, never through
the taps, so ``resumable exec x.py > out`` captures exactly the program's output.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO


class OutputTap(io.TextIOBase):
    """A text stream that forwards to ``target`` unless muted."""

    def __init__(self, target: TextIO, *, muted: bool = False) -> None:
        super().__init__()
        self.target = target
        self.muted = muted

    def write(self, text: str) -> int:
        if not self.muted:
            self.target.write(text)
        return len(text)

    def flush(self) -> None:
        self.target.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.target.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.target, "encoding", "utf-8")

    def fileno(self) -> int:
        return self.target.fileno()


class ProgramOutput:
    """The pair of taps for one run; ``go_live()`` unmutes both."""

    def __init__(self, *, muted: bool = False) -> None:
        self.stdout = OutputTap(sys.stdout, muted=muted)
        self.stderr = OutputTap(sys.stderr, muted=muted)

    @property
    def muted(self) -> bool:
        return self.stdout.muted

    def go_live(self) -> None:
        self.stdout.muted = False
        self.stderr.muted = False

    @contextmanager
    def installed(self) -> Iterator[ProgramOutput]:
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self.stdout, self.stderr
        try:
            yield self
        finally:
            sys.stdout, sys.stderr = saved

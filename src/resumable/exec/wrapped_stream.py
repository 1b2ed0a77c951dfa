"""A text stream in front of another one: the program sees the real stream's API.

``sys.stdout``/``sys.stderr`` are wrapped during a run (to route the program's output,
and on a terminal to keep the status line off the program's lines). A program may ask
its streams anything a text stream answers, so every wrapper answers it as the stream
behind it would; each wrapper only changes what it is there for.
"""

from __future__ import annotations

import io
from typing import Any, TextIO


class StandIn:
    """A stream in front of ``real``, text or binary: it answers what it is as ``real`` would."""

    real: TextIO

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.real.isatty()

    def fileno(self) -> int:
        return self.real.fileno()


class WrappedStream(StandIn, io.TextIOBase):
    """The text-stream API of ``real``; a subclass says how writes go there (``write``)."""

    def __init__(self, real: TextIO) -> None:
        super().__init__()
        self.real = real

    def flush(self) -> None:
        self.real.flush()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.real, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.real, "errors", "strict")

    @property
    def newlines(self) -> Any:  # type: ignore[override]
        return getattr(self.real, "newlines", None)

    @property
    def line_buffering(self) -> bool:
        return bool(getattr(self.real, "line_buffering", False))

    @property
    def write_through(self) -> bool:
        return bool(getattr(self.real, "write_through", False))

    @property
    def name(self) -> Any:
        return getattr(self.real, "name", None)

    @property
    def mode(self) -> str:
        return getattr(self.real, "mode", "w")

    def reconfigure(self, **settings: Any) -> None:
        """``sys.stdout.reconfigure(encoding=..., line_buffering=...)`` changes the real stream."""
        reconfigure = getattr(self.real, "reconfigure", None)
        if reconfigure is None:
            raise io.UnsupportedOperation(f"{type(self.real).__name__} cannot be reconfigured")
        reconfigure(**settings)

"""What a turn of code gives back to the embedding program, and what it captured."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any


class CapturedOutput:
    """What ``print`` wrote during the current turn (``str()`` gives it)."""

    def __init__(self) -> None:
        self.value = ""

    def append(self, text: str) -> CapturedOutput:
        self.value += text
        return self

    def __iadd__(self, other: object) -> CapturedOutput:
        self.value += str(other)
        return self

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"CapturedOutput({self.value!r})"

    def __len__(self) -> int:
        return len(self.value)


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a turn stopped: the exception's type and text, and where in the code."""

    exc_type: str
    message: str
    statement: str
    line: int
    traceback: str = ""
    syntax: bool = False
    offset: int = 0
    text: str = ""

    @property
    def line_for_llm(self) -> str:
        """One line to show the model: ``NameError: name 'x' is not defined (line 3)``."""
        where = f" (line {self.line})" if self.line else ""
        return f"{self.exc_type}: {self.message}{where}"

    @classmethod
    def from_exception(
        cls, exc: BaseException, statement: str, line: int, filename: str
    ) -> Failure:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
        where = frames[-1].lineno if frames and frames[-1].lineno else line
        text = "".join(traceback.format_list(frames)) + "".join(
            traceback.format_exception_only(type(exc), exc)
        )
        return cls(type(exc).__name__, str(exc), statement, where or 0, text)

    @classmethod
    def from_syntax(cls, exc: SyntaxError) -> Failure:
        return cls(
            type(exc).__name__,
            str(exc),
            "",
            exc.lineno or 0,
            syntax=True,
            offset=exc.offset or 0,
            text=exc.text or "",
        )


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a turn ended: ``value`` of its last statement, captured ``output``, ``error``.

    ``final`` is True when the code gave its final answer (``value`` holds it).
    """

    value: Any
    output: str
    error: Failure | None
    final: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

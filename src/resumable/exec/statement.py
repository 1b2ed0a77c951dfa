"""The unit of a stream: one complete top-level statement, with where it stands in the stream."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

__all__ = ["Statement", "line_at"]


@dataclass(frozen=True, slots=True)
class Statement:
    """One complete top-level statement: ``stream[start:end] == source``.

    ``tree`` is the parsed body of ``source`` (line numbers start at 1 in
    ``source``), so the executor need not parse it again; it is not compared.
    """

    source: str
    start: int
    end: int
    line: int
    col: int = 0
    tree: list[ast.stmt] | None = field(default=None, compare=False, repr=False)


def line_at(text: str, offset: int) -> int:
    """1-based line number of character ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1

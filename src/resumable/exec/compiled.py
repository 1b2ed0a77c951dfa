"""Statements a run has compiled before, moved into place instead of compiled again.

Programs repeat statements (``counter = await tick(counter)``, the same tool call in every
turn). Two compiles of one source differ only where the statement stands: its hook sites
(``"S:L:C"``, see :mod:`resumable.exec.rewrite`: the statement's index and its lines) and
its lines (each code object's first line, and its line table). So the second time a
source comes, it is compiled as always and once more as a *template*: at line
:data:`TEMPLATE_LINE`, statement index -1. The template moved to that second place must
equal the compiler's own code there (``==`` on code objects compares the bytecode,
constants - nested code objects with them -, names, lines and columns); if it does not,
that source is always compiled. From the third time on, the statement is the template
moved: its sites renamed, its first lines moved, and the line-table entries whose line
delta changes written again the way CPython writes them (``Objects/locations.md``); the
other entries are copied.

A statement's lines are those at or after :data:`TEMPLATE_LINE` in the template: what the
compiler puts before them (the module's own first line, line 0 of its start) stays. A
source the compiler warns about (``SyntaxWarning``) is always compiled: the warning is
given again at each place, as before.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable
from types import CodeType
from typing import NamedTuple

__all__ = ["TEMPLATE_INDEX", "TEMPLATE_LINE", "CompiledStatements"]

TEMPLATE_INDEX = -1
TEMPLATE_LINE = 1 << 20
"""A template is compiled as if its statement started at this line (``line_offset`` one
less): the statement's lines are then told apart from those the compiler adds."""

_NO_LOCATION, _LONG, _NO_COLUMNS, _ONE_LINE = 15, 14, 13, 10

_UNSEEN, _SEEN_ONCE, _ALWAYS_COMPILED = 0, 1, 2


class CompiledStatements:
    """What one executor compiled, by source: at most ``limit`` sources, the oldest dropped."""

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        self._sources: OrderedDict[tuple[str, str], int | _Template] = OrderedDict()

    def take(self, source: str, filename: str, index: int, line_offset: int) -> CodeType | None:
        """The statement's code moved from its template; None: compile it (then :meth:`note`)."""
        template = self._sources.get((source, filename))
        if not isinstance(template, _Template):
            return None
        self._sources.move_to_end((source, filename))
        return template.at(index, line_offset)

    def note(
        self,
        source: str,
        filename: str,
        index: int,
        line_offset: int,
        code: CodeType,
        compile_template: Callable[[], CodeType],
    ) -> None:
        """``code`` was compiled for ``source`` at ``index`` and ``line_offset``; the second
        time, ``compile_template()`` compiles it at :data:`TEMPLATE_LINE` and index -1."""
        key = (source, filename)
        seen = self._sources.get(key, _UNSEEN)
        if seen == _UNSEEN:
            self._sources[key] = _SEEN_ONCE
            if len(self._sources) > self.limit:
                self._sources.popitem(last=False)
            return
        if seen != _SEEN_ONCE:
            return
        self._sources[key] = _ALWAYS_COMPILED
        try:
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                template = _Template(compile_template())
        except Exception:  # a source the template cannot follow is always compiled
            return
        # A warning the compiler gives (``"is" with a literal``) is given at each place.
        if not warned and template.at(index, line_offset) == code:
            self._sources[key] = template


class _Entry(NamedTuple):
    """A line-table entry whose line delta changes when the statement moves."""

    length: int
    line: int
    end_line: int
    column: int
    end_column: int
    previous: int
    """The line the entry's delta is counted from."""


class _Template:
    """One code object of a template, with what moving it changes."""

    def __init__(self, code: CodeType) -> None:
        self.code = code
        self.table = _moving_table(code)
        self.sites: list[tuple[int, int, str]] = []
        """(const position, line, rest) of each hook site ``-1:line:rest``."""
        self.nested: list[tuple[int, _Template]] = []
        for position, const in enumerate(code.co_consts):
            if isinstance(const, CodeType):
                self.nested.append((position, _Template(const)))
            elif isinstance(const, str) and const.startswith(f"{TEMPLATE_INDEX}:"):
                line, _, rest = const[len(f"{TEMPLATE_INDEX}:") :].partition(":")
                if line.isdigit() and int(line) >= TEMPLATE_LINE:
                    self.sites.append((position, int(line), rest))

    def at(self, index: int, line_offset: int) -> CodeType:
        return self._moved(index, line_offset + 1 - TEMPLATE_LINE)

    def _moved(self, index: int, shift: int) -> CodeType:
        code = self.code
        consts = list(code.co_consts)
        for position, line, rest in self.sites:
            consts[position] = f"{index}:{line + shift}:{rest}"
        for position, nested in self.nested:
            consts[position] = nested._moved(index, shift)
        table = b"".join(
            part if isinstance(part, bytes) else _entry_moved(part, shift) for part in self.table
        )
        first = code.co_firstlineno
        return code.replace(
            co_firstlineno=first + shift if first >= TEMPLATE_LINE else first,
            co_linetable=table,
            co_consts=tuple(consts),
        )


def _moving_table(code: CodeType) -> list[bytes | _Entry]:
    """``code``'s line table as the bytes a move leaves alone and the entries it changes:
    those whose line and the line before it are not both the statement's, or both not."""
    table, parts = code.co_linetable, list[bytes | _Entry]()
    line = previous = code.co_firstlineno
    start = at = 0
    while at < len(table):
        entry_start, head = at, table[at]
        kind, length = (head >> 3) & 15, (head & 7) + 1
        at += 1
        if kind == _NO_LOCATION:
            continue
        if kind == _LONG:
            delta, at = _signed_varint(table, at)
            end_delta, at = _varint(table, at)
            column, at = _varint(table, at)
            end_column, at = _varint(table, at)
            line += delta
            location = (line, line + end_delta, column - 1, end_column - 1)
        elif kind == _NO_COLUMNS:
            delta, at = _signed_varint(table, at)
            line += delta
            location = (line, line, -1, -1)
        elif kind >= _ONE_LINE:
            line += kind - _ONE_LINE
            location = (line, line, table[at], table[at + 1])
            at += 2
        else:  # the short form: same line
            low = table[at]
            column = kind * 8 + ((low >> 4) & 7)
            location = (line, line, column, column + (low & 15))
            at += 1
        if (line >= TEMPLATE_LINE) != (previous >= TEMPLATE_LINE):
            parts.append(table[start:entry_start])
            parts.append(_Entry(length, *location, previous))
            start = at
        previous = line
    parts.append(table[start:])
    return [part for part in parts if not isinstance(part, bytes) or part]


def _entry_moved(entry: _Entry, shift: int) -> bytes:
    """The entry as CPython writes it once the statement's lines moved by ``shift``."""

    def moved(line: int) -> int:
        return line + shift if line >= TEMPLATE_LINE else line

    line, end_line, previous = moved(entry.line), moved(entry.end_line), moved(entry.previous)
    column, end_column, delta = entry.column, entry.end_column, line - previous
    head = 0x80 | (entry.length - 1)
    if column < 0 or end_column < 0:
        if end_line == line:
            return bytes([head | _NO_COLUMNS << 3]) + _write_signed_varint(delta)
    elif end_line == line:
        if delta == 0 and column < 80 and 0 <= end_column - column < 16:
            return bytes([head | (column >> 3) << 3, (column & 7) << 4 | (end_column - column)])
        if 0 <= delta < 3 and column < 128 and end_column < 128:
            return bytes([head | (_ONE_LINE + delta) << 3, column, end_column])
    return b"".join(
        (
            bytes([head | _LONG << 3]),
            _write_signed_varint(delta),
            _write_varint(end_line - line),
            _write_varint(column + 1),
            _write_varint(end_column + 1),
        )
    )


def _varint(table: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = table[at]
        at += 1
        value |= (byte & 63) << shift
        if not byte & 64:
            return value, at
        shift += 6


def _signed_varint(table: bytes, at: int) -> tuple[int, int]:
    value, at = _varint(table, at)
    return (-(value >> 1) if value & 1 else value >> 1), at


def _write_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 64:
        out.append(64 | (value & 63))
        value >>= 6
    out.append(value)
    return bytes(out)


def _write_signed_varint(value: int) -> bytes:
    return _write_varint((-value) << 1 | 1 if value < 0 else value << 1)

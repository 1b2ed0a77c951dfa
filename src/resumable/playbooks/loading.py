"""A ``.pb`` file read into a :class:`~resumable.playbooks.program.Program`: the way in.

Reading the file and its failures are here; the Markdown reading is
:mod:`resumable.playbooks.markdown`, the records it builds :mod:`resumable.playbooks.program`.
"""

from __future__ import annotations

from pathlib import Path

from resumable.playbooks.markdown import read_program
from resumable.playbooks.program import Program, program_error


def load_program(path: Path) -> Program:
    """Read and parse a ``.pb`` file, turning every way of failing to read it into one error."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise program_error(path, None, "no such file; check the program path") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        message = f"cannot be read ({reason}); check the path and its permissions"
        raise program_error(path, None, message) from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        message = "not UTF-8 text (a bad byte on this line); save the file as UTF-8"
        raise program_error(path, line, message) from None
    return parse_program(text, Path(path))


def parse_program(text: str, path: Path) -> Program:
    """Parse the text of a ``.pb`` file into a :class:`Program` without executing any of it."""
    return read_program(text, path)

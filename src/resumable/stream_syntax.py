"""Syntax errors where they are in the stream: parse a piece, report failures in stream lines.

The splitter parses each statement alone (and each compound header inside a tiny
template); a ``SyntaxError`` from that parse names lines of the piece, so it is moved
to the line and column of the whole stream, the place a user can find.
"""

from __future__ import annotations

import ast
import re
import warnings

FILENAME = "<stream>"
"""The file name every error of the stream carries."""

_LINE_REF = re.compile(r"\b(on line|at line) (\d+)")

# Header line templates: (prefix, suffixes); the header is valid if one candidate parses.
_BLOCK = ("", (" pass\n", ""))
_TEMPLATES: dict[str, tuple[str, tuple[str, ...]]] = {
    **dict.fromkeys(("if", "for", "while", "with", "def", "class", "async"), _BLOCK),
    "try": ("", (" pass\nfinally: pass\n", "finally: pass\n")),
    "elif": ("if 1: pass\n", (" pass\n", "")),
    "else": ("if 1: pass\n", (" pass\n", "")),
    "except": ("try: pass\n", (" pass\n", "")),
    "finally": ("try: pass\n", (" pass\n", "")),
    "@": ("", ("def _(): pass\n",)),
    "match": ("", (" case _:\n  pass\n",)),
}


def syntax_error(
    kind: type[SyntaxError], message: str, line: int, col: int, text: str | None
) -> SyntaxError:
    """An error at ``line``/``col`` (0-based) of the stream, as Python would report it."""
    return kind(message, (FILENAME, line, col + 1, text, line, col + 2))


def parse_piece(source: str, line: int, col: int) -> list[ast.stmt]:
    """Parse a statement; a failure is re-raised with its place in the whole stream."""
    try:
        return ast.parse(source, FILENAME).body
    except SyntaxError as exc:
        raise _relocate(exc, line, col, 0) from None
    except ValueError as exc:  # null bytes, before 3.12
        raise syntax_error(SyntaxError, str(exc), line, col, None) from None


def try_parse(source: str) -> SyntaxError | None:
    """Parse a probe without its warnings (the real parse of the statement reports them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(source, FILENAME)
        except SyntaxError as exc:
            return exc
        except ValueError as exc:
            return SyntaxError(str(exc), (FILENAME, 1, 1, None, 1, 2))
    return None


def _relocate(exc: SyntaxError, line: int, col: int, skipped: int) -> SyntaxError:
    """The same error, with lines and columns of the whole stream instead of the piece parsed."""
    first = skipped + 1  # the piece's first line inside what was parsed

    def move(lineno: int | None, offset: int | None) -> tuple[int | None, int | None]:
        if lineno is None:
            return None, offset
        if lineno == first and offset is not None and offset > 0:
            offset += col
        return lineno + line - 1, offset

    lineno, offset = move(exc.lineno or first, exc.offset)
    end_lineno, end_offset = move(exc.end_lineno, exc.end_offset)
    message = _LINE_REF.sub(lambda m: f"{m.group(1)} {int(m.group(2)) + line - 1}", exc.msg)
    moved = type(exc)(message, (FILENAME, lineno, offset, exc.text, end_lineno, end_offset))
    return moved


def check_header(text: str, word: str, line: int, col: int) -> None:
    """Fail on a bad compound header (at ``line``, ``col``) now, not when its block has arrived."""
    prefix, suffixes = _TEMPLATES[word]
    body = text if text.endswith("\n") else text + "\n"
    errors = []
    for suffix in suffixes:
        if (error := try_parse(prefix + body + suffix)) is None:
            return
        errors.append(error)
    skipped = prefix.count("\n")
    inside = range(skipped + 1, skipped + body.count("\n") + 1)
    error = next((e for e in errors if e.lineno in inside), errors[0])
    if error.lineno not in inside:  # reported in the template: point at the header
        error.lineno, error.offset, error.end_lineno, error.end_offset = (
            skipped + 1,
            1,
            None,
            None,
        )
    raise _relocate(error, line - skipped, col, skipped)

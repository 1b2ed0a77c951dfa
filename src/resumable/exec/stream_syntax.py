"""The syntax the splitter relies on: its lexicon, parsing pieces, errors in stream lines.

The splitter (:mod:`resumable.exec.streaming`) jumps between the characters that change
the lexical state with the tables here, and splits a simple line at its top-level ``;``
with :func:`split_simple`. It parses each statement alone (and each compound header inside
a tiny template); a ``SyntaxError`` from that parse names lines of the piece, so it is
moved to the line and column of the whole stream, the place a user can find.
"""

from __future__ import annotations

import ast
import functools
import re
import warnings

from resumable.exec.depth import room_to_parse
from resumable.exec.statement import Statement

FILENAME = "<stream>"

TOO_DEEP = (
    "the statement is nested too deeply for Python to compile (RecursionError); "
    "split it into smaller statements"
)
"""The error of a statement whose tree is deeper than Python's parser or compiler goes."""


def too_deep(line: int) -> SyntaxError:
    """A statement at ``line`` too deep to parse or compile, as a syntax error naming it."""
    return SyntaxError(TOO_DEEP, (FILENAME, line, 1, None, line, 2))


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
        with room_to_parse(source):
            return ast.parse(source, FILENAME).body
    except SyntaxError as exc:
        raise _relocate(exc, line, col, 0) from None
    except ValueError as exc:  # null bytes, before 3.12
        raise syntax_error(SyntaxError, str(exc), line, col, None) from None
    except RecursionError:
        raise too_deep(line) from None


def unterminated(line: int, at_line: int, at_col: int) -> SyntaxError:
    """A string opened at ``at_line``/``at_col`` (0-based) and still open when ``line`` ended."""
    message = f"unterminated string literal (detected at line {line})"
    return syntax_error(SyntaxError, message, at_line, at_col, None)


def try_parse(source: str) -> SyntaxError | None:
    """Parse a probe without its warnings (the real parse of the statement reports them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with room_to_parse(source):
                ast.parse(source, FILENAME)
        except SyntaxError as exc:
            return exc
        except ValueError as exc:
            return SyntaxError(str(exc), (FILENAME, 1, 1, None, 1, 2))
        except RecursionError:
            return too_deep(1)
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


# -- the lexicon of the splitter (resumable.exec.streaming) ---------------------------
# Continuation keyword -> first keywords of the compound statements it may continue.
FOLLOWS: dict[str, frozenset[str]] = {
    "elif": frozenset({"if"}),
    "else": frozenset({"if", "for", "while", "try", "async"}),
    "except": frozenset({"try"}),
    "finally": frozenset({"try"}),
}
SPACE = re.compile(r"(?:[ \t\f]|\\\r?\n)*")
TRAILING_SPACE = re.compile(r"(?:[ \t\f]|\\\r?\n)*\Z")
NOTHING = re.compile(r"[ \t\f]*(?:#[^\n]*)?(?:\r?\n)?\Z")
WORD = re.compile(r"\w*")
TOKEN = re.compile(r"'''|\"\"\"|['\"#()\[\]{};\\]")
# String bodies up to (not including) the closing quote, or to the end of the text.
BODY = {
    "'": re.compile(r"[^'\\\n]*(?:\\(?:\r\n|[\s\S])[^'\\\n]*)*"),
    '"': re.compile(r'[^"\\\n]*(?:\\(?:\r\n|[\s\S])[^"\\\n]*)*'),
    "'''": re.compile(r"[^'\\]*(?:(?:\\[\s\S]|'(?!''))[^'\\]*)*"),
    '"""': re.compile(r'[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*'),
}
OPEN, CLOSE, QUOTE, COMMENT, SEMI, BACKSLASH = range(6)
KIND = {
    **dict.fromkeys("([{", OPEN),
    **dict.fromkeys(")]}", CLOSE),
    **dict.fromkeys(("'", '"', "'''", '"""'), QUOTE),
    "#": COMMENT,
    ";": SEMI,
    "\\": BACKSLASH,
}
PAIR = {")": "(", "]": "[", "}": "{"}


def _nested(depth: int) -> str:
    """What may stand inside brackets ``depth`` deep on one line: code without quotes,
    brackets, comments or backslashes, single-line strings without a triple quote, and
    brackets (of the matching kind) that close on the line."""
    plain = r"[^'\"#()\[\]{}\\\n]++"
    strings = r"'(?!'')(?:[^'\\\n]|\\[^\n\r])*+'|\"(?!\"\")(?:[^\"\\\n]|\\[^\n\r])*+\""
    if depth == 0:
        return f"{plain}|{strings}"
    inner = _nested(depth - 1)
    pairs = rf"\((?:{inner})*+\)|\[(?:{inner})*+\]|\{{(?:{inner})*+\}}"
    return f"{plain}|{strings}|{pairs}"


@functools.cache
def body_lines() -> re.Pattern[str]:
    """Indented lines of code that each leave the lexical state as they found it: every
    bracket and string closes on its line, no backslash; lines a compound statement's block
    takes whole, many at a time. Possessive throughout, so a line that does not fit fails
    in time linear in its length. Anything else (blank and comment lines, brackets or strings
    across lines, brackets more than three deep) is left to the splitter's line-by-line scan.

    Compiled when a program's first block arrives, not when the splitter is imported: the
    pattern spells out every nesting of three kinds of bracket three deep (4,000 characters),
    and compiling it costs more than a bare interpreter's start, which a program without a
    compound statement never needs."""
    return re.compile(rf"(?:[ \t]++(?=[^\s#])(?:{_nested(3)})*+(?:#[^\n]*+)?\n)*+")


def starts_statement(text: str) -> bool | None:
    """Does this start of a line begin a new top-level statement? None: not known yet."""
    word = WORD.match(text).end()  # type: ignore[union-attr]
    if word == 0:
        return text[:1] not in ("", " ", "\t", "\f", "\r", "#", "\\")
    if word == len(text):
        return not any(keyword.startswith(text) for keyword in FOLLOWS)
    return text[:word] not in FOLLOWS


def split_simple(text: str, semis: list[int], start: int, line: int, col: int) -> list[Statement]:
    """A simple logical line as statements, one per top-level ``;`` (``semis``: their offsets).

    ``start``, ``line`` and ``col`` place ``text`` in the stream.
    """
    if not semis:
        return [Statement(text, start, start + len(text), line, col, parse_piece(text, line, col))]
    parse_piece(text, line, col)  # the whole line first: Python's own message for `a; if x: b`
    out: list[Statement] = []
    begin = 0
    for semi in [*semis, start + len(text)]:
        stop = semi - start
        piece = text[begin:stop]
        if stop < len(text):
            piece = piece[: TRAILING_SPACE.search(piece).start()]  # type: ignore[union-attr]
        elif NOTHING.match(piece):
            break
        if piece:
            before = text.rfind("\n", 0, begin)
            at_line = line + text.count("\n", 0, begin)
            at_col = col + begin if before < 0 else begin - before - 1
            tree = parse_piece(piece, at_line, at_col)
            out.append(
                Statement(piece, start + begin, start + begin + len(piece), at_line, at_col, tree)
            )
        begin = SPACE.match(text, stop + 1).end()  # type: ignore[union-attr]
    return out

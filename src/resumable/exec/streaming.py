"""Split a stream of Python source into complete top-level statements.

Design note.

Algorithm: text is consumed one physical line at a time, once the line's newline
has arrived (a partial last line waits). A small lexer keeps the lexical state
across lines - the stack of open brackets, the quote of a string still open, a
backslash continuation - and jumps between the characters that can change it
(quotes, brackets, ``#``, ``;``, backslash) with one compiled regex, so plain
code costs no Python-level work. A line that ends outside all three completes a
logical line; its first word decides. An indented line, or ``elif``/``else``/
``except``/``finally``, continues the pending compound statement; ``@`` lines and
the ``def``/``class`` they decorate form one statement; any other line at
column 0 completes the pending compound statement (decided from the first
characters of the line, before its newline) and starts the next one; a simple
statement is complete with its logical line and is split at its top-level
``;``. Blank and comment lines decide nothing. Every statement is parsed once,
when emitted, with ``ast.parse``: that is the validity check, and the tree is
handed on so the executor need not parse again. The header of each compound
statement is also parsed alone, inside a tiny template, so ``if x`` without a
colon fails when its line ends rather than when its block does (both parses, and
the placing of their errors in the stream, are in :mod:`resumable.exec.stream_syntax`).
Lines that leave the lexical state as it is (a block's plain lines, ``body_lines``,
and lines inside an open triple-quoted string) are taken many at a time, by one match.
Work per chunk is thus proportional to the new text plus the statement being emitted.

Limits: strings are lexed by the rules of Python 3.11, where an f-string is one
token; a 3.12 f-string that nests its own quotes across lines is beyond the
lexer. A lone ``\\r`` is not a line break here (CPython treats it as one), so two
statements it separates arrive as one ``Statement`` whose tree has two nodes.
``match`` is a soft keyword: its first logical line is classified by parsing it.
A compound statement is known complete only when the next statement starts,
which is the price of streaming it.

Rejected: re-parsing the pending text at every chunk, as ``codeop`` does for a
prompt (quadratic in a long class or function); the ``tokenize`` module (pure
Python, many times slower than ``ast.parse``, and it raises on the incomplete
input this splitter must wait on); parsing the whole text received so far
(quadratic in the stream).
"""

from __future__ import annotations

import re

from resumable.exec.statement import Statement
from resumable.exec.stream_syntax import (
    BODY,
    CLOSE,
    COMMENT,
    FOLLOWS,
    KIND,
    OPEN,
    PAIR,
    QUOTE,
    SEMI,
    TOKEN,
    WORD,
    body_lines,
    check_header,
    parse_piece,
    split_simple,
    starts_statement,
    syntax_error,
    try_parse,
    unterminated,
)

__all__ = ["Statement", "StatementSplitter"]


# What is pending: nothing, a compound statement, or decorators awaiting their def/class.
_NONE, _COMPOUND, _DECORATOR = 0, 1, 2

_STARTS = frozenset({"if", "for", "while", "try", "with", "def", "class", "async"})
_DEFINES = frozenset({"def", "class", "async"})
_HEAD = re.compile(r"([ \t\f]*)(\w*)")
_SKIP = re.compile(r"[ \t\f;]*")


class StatementSplitter:
    """Chunks of source in, complete top-level statements out, in stream order.

    The text fed starts at character ``offset``, line ``line`` (column ``col``)
    of the whole stream: the start of a statement, or what follows a completed
    statement on the same line (``"; b = 2"``), whose leading blanks and ``;``
    are skipped when resuming (``offset`` or ``col`` not 0).
    """

    def __init__(self, offset: int = 0, line: int = 1, *, col: int = 0) -> None:
        self._pos = offset  # stream offset of the next physical line to scan
        self._line = line  # its line number
        self._col0 = col  # its starting column (non-zero only when resuming mid-line)
        self._skip = offset > 0 or col > 0
        self._partial: list[str] = []  # the physical line still missing its newline
        self._error: SyntaxError | None = None
        # The pending statement (compound or decorators) and comment lines after it.
        self._kind = _NONE
        self._head = ""
        self._parts: list[str] = []
        self._gap: list[str] = []
        self._start = self._sline = self._scol = 0
        self._probe = False  # decide from a partial line whether it ends the compound
        # Lines holding only a backslash continuation, before a logical line's first token.
        self._lead: list[str] = []
        self._lead_indent = False
        # The logical line being scanned.
        self._lparts: list[str] | None = None
        self._lstart = self._lline = self._lcol = self._lcut = 0
        self._lword = ""
        self._lindent = False
        self._semis: list[int] = []
        self._stack: list[str] = []
        self._quote: str | None = None
        self._qline = self._qcol = 0

    @property
    def pending(self) -> str:
        """Text received that may still become part of a statement (for diagnostics)."""
        parts = [*self._parts, *self._gap, *self._lead] if self._kind else [*self._lead]
        if self._lparts is not None:
            text = "".join(self._lparts)
            parts.append(text if self._lindent else text[self._lcut :])
        parts.extend(self._partial)
        return "".join(parts)

    def feed(self, chunk: str) -> list[Statement]:
        """Take the next chunk; return the statements it completes.

        Raises ``SyntaxError`` (stream line and column) once the pending text is
        certainly invalid. Statements completed before the error in the same
        chunk are returned first, and the error is raised by the next call.
        """
        if not self._probe and "\n" not in chunk and self._error is None:
            self._partial.append(chunk)  # most chunks: part of a line (the fast path)
            return []
        if self._error is not None:
            raise self._error
        if not chunk:
            return []
        newline = chunk.rfind("\n")
        out: list[Statement] = []
        try:
            if newline < 0:
                self._partial.append(chunk)
            else:
                self._partial.append(chunk[: newline + 1])
                text = "".join(self._partial)
                rest = chunk[newline + 1 :]
                self._partial = [rest] if rest else []
                self._scan(text, out)
            if self._probe and self._partial:  # does the next line end the compound?
                decided = starts_statement("".join(self._partial))
                if decided is not None:
                    self._probe = False
                    if decided:
                        self._finish(out)
        except SyntaxError as exc:
            self._error = exc
            if not out:
                raise
        return out

    def close(self) -> list[Statement]:
        """End of stream: return what is left; raise ``SyntaxError`` if it is not valid."""
        if self._error is not None:
            raise self._error
        out: list[Statement] = []
        try:
            text = "".join(self._partial)
            self._partial = []
            if text:
                self._physical(text, out)
            if self._lead:  # a backslash continuation with nothing after it
                parse_piece("".join(self._lead), self._line - len(self._lead), 0)
            if self._lparts is not None:
                self._logical(out)  # unclosed bracket or string: the parse says what is wrong
            self._finish(out)
        except SyntaxError as exc:
            self._error = exc
            raise
        return out

    # -- lines ----------------------------------------------------------------
    def _scan(self, text: str, out: list[Statement]) -> None:
        start = 0
        while True:
            end = self._unchanging(text, start)
            if end > start:  # lines that change no lexical state: all at once
                block = text[start:end]
                if self._lparts is None:
                    self._extend(block)
                else:
                    self._lparts.append(block)
                self._pos += len(block)
                self._line += block.count("\n")
                self._col0 = 0
                self._probe = self._lparts is None
                start = end
            end = text.find("\n", start) + 1
            if not end:
                return
            self._physical(text[start:end], out)
            start = end

    def _unchanging(self, text: str, start: int) -> int:
        """The end of the lines from ``start`` that leave the lexical state as it is (a
        block's plain lines, or those of an open triple-quoted string before its last)."""
        if self._kind == _COMPOUND and self._lparts is None and not self._lead:
            return body_lines().match(text, start).end()  # type: ignore[union-attr]
        if self._quote is not None and len(self._quote) == 3:
            close = BODY[self._quote].match(text, start).end()  # type: ignore[union-attr]
            return text.rfind("\n", start, close) + 1
        return start

    def _physical(self, line: str, out: list[Statement]) -> None:
        """Scan one physical line (with its newline, except at the end of the stream)."""
        if self._lparts is None:
            if self._skip:
                self._skip = False
                cut = _SKIP.match(line).end()  # type: ignore[union-attr]
                match = WORD.match(line, cut)
                word = match.group()  # type: ignore[union-attr]
                indent = False
            else:
                match = _HEAD.match(line)
                cut = match.end(1)  # type: ignore[union-attr]
                word = match.group(2)  # type: ignore[union-attr]
                indent = cut > 0 and bool(line[:cut].rpartition("\f")[2])
            first = line[cut : cut + 1]
            if not word and first == "\\" and line[cut + 1 :] in ("\n", "\r\n"):
                # As CPython: the first such backslash after blanks fixes the indentation.
                self._lead.append(line)
                self._lead_indent = self._lead_indent or indent
                self._advance(line)
                return
            if self._lead:
                indent = indent or self._lead_indent
                if self._kind:  # kept if the block goes on, dropped if a statement starts here
                    self._gap += self._lead
                self._lead = []
                self._lead_indent = False
            if not word and (first in ("", "\n", "#") or line.startswith("\r\n", cut)):
                if self._kind:
                    self._gap.append(line)
                self._advance(line)
                return
            self._enter(line, cut, word or first, indent, out)
            pos = match.end()  # type: ignore[union-attr]
        else:
            self._lparts.append(line)
            pos = 0
        if self._lex(line, pos):
            self._logical(out)
        self._advance(line)

    def _advance(self, line: str) -> None:
        self._pos += len(line)
        self._line += 1
        self._col0 = 0
        self._probe = self._kind == _COMPOUND and self._lparts is None and not self._lead

    def _enter(self, line: str, cut: int, word: str, indent: bool, out: list[Statement]) -> None:
        """A logical line starts: reject what cannot follow, complete what it ends."""
        col = self._col0 + cut
        if indent:
            if self._kind != _COMPOUND:
                raise syntax_error(IndentationError, "unexpected indent", self._line, col, line)
        elif word in FOLLOWS:
            if self._kind != _COMPOUND or self._head not in FOLLOWS[word]:
                raise syntax_error(SyntaxError, "invalid syntax", self._line, col, line)
        elif self._kind == _DECORATOR:
            if word != "@" and word not in _DEFINES:
                raise syntax_error(SyntaxError, "invalid syntax", self._line, col, line)
        elif self._kind == _COMPOUND:
            self._finish(out)
        self._lparts = [line]
        self._lcut = cut
        self._lstart = self._pos + cut
        self._lline = self._line
        self._lcol = col
        self._lword = word
        self._lindent = indent
        self._semis = []

    # -- lexing ---------------------------------------------------------------
    def _lex(self, line: str, pos: int) -> bool:
        """Advance the lexical state over ``line``; True when a logical line ends with it."""
        quote = self._quote
        if quote is not None:
            end = BODY[quote].match(line).end()  # type: ignore[union-attr]
            if not line.startswith(quote, end):
                if len(quote) == 3 or (end == len(line) and line.endswith("\n")):
                    return False
                raise unterminated(self._line, self._qline, self._qcol)
            self._quote = None
            pos = end + len(quote)
        stack = self._stack
        search = TOKEN.search
        while match := search(line, pos):
            token = match.group()
            pos = match.end()
            kind = KIND[token]
            if kind == OPEN:
                stack.append(token)
            elif kind == CLOSE:
                if not stack:
                    raise syntax_error(
                        SyntaxError, f"unmatched '{token}'", self._line, pos - 1, line
                    )
                opener = stack.pop()
                if opener != PAIR[token]:
                    message = f"closing parenthesis '{token}' does not match opening parenthesis '{opener}'"
                    raise syntax_error(SyntaxError, message, self._line, pos - 1, line)
            elif kind == QUOTE:
                end = BODY[token].match(line, pos).end()  # type: ignore[union-attr]
                if line.startswith(token, end):
                    pos = end + len(token)
                    continue
                self._quote = token
                self._qline = self._line
                self._qcol = self._col0 + pos - len(token)
                if len(token) == 3 or (end == len(line) and line.endswith("\n")):
                    return False
                raise unterminated(self._line, self._qline, self._qcol)
            elif kind == COMMENT:
                break
            elif kind == SEMI:
                if not stack:
                    self._semis.append(self._pos + pos - 1)
            else:
                if line[pos:] in ("\n", "\r\n", ""):
                    return False
                message = "unexpected character after line continuation character"
                raise syntax_error(SyntaxError, message, self._line, pos - 1, line)
        return not stack

    # -- statements -----------------------------------------------------------
    def _logical(self, out: list[Statement]) -> None:
        """A logical line is complete: add it to the pending statement or emit it."""
        parts = self._lparts
        assert parts is not None
        self._lparts = None
        text = parts[0] if len(parts) == 1 else "".join(parts)
        if self._lindent:
            self._extend(text)
            return
        if self._lcut:
            text = text[self._lcut :]
        word = self._lword
        if word in FOLLOWS:
            check_header(text, word, self._lline, self._lcol)
            self._extend(text)
        elif word == "@" or (word in _DEFINES and self._kind == _DECORATOR):
            check_header(text, word, self._lline, self._lcol)
            if self._kind == _DECORATOR:
                self._extend(text)
                if word != "@":
                    self._kind = _COMPOUND
                    self._head = word
            else:
                self._begin(text, _DECORATOR, word)
        elif word in _STARTS or (word == "match" and try_parse(text) is not None):
            check_header(text, word, self._lline, self._lcol)
            self._begin(text, _COMPOUND, word)
        else:
            out.extend(split_simple(text, self._semis, self._lstart, self._lline, self._lcol))

    def _begin(self, text: str, kind: int, head: str) -> None:
        self._kind = kind
        self._head = head
        self._parts = [text]
        self._gap = []
        self._start = self._lstart
        self._sline = self._lline
        self._scol = self._lcol

    def _extend(self, text: str) -> None:
        if self._gap:
            self._parts.extend(self._gap)
            self._gap = []
        self._parts.append(text)

    def _finish(self, out: list[Statement]) -> None:
        """The pending compound statement is complete: parse and emit it."""
        if not self._kind:
            return
        source = "".join(self._parts)
        tree = parse_piece(source, self._sline, self._scol)
        out.append(
            Statement(source, self._start, self._start + len(source), self._sline, self._scol, tree)
        )
        self._kind = _NONE
        self._parts = []
        self._gap = []
        self._probe = False

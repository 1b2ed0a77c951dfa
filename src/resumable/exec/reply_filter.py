"""Reply hygiene: the Python to run out of an LLM reply as real models write it, streamed.

Models wrap code in Markdown fences, open with a sentence of prose, or think aloud
in ``<think>`` blocks. :class:`ReplyFilter` sits between the stream of a reply and
the executor and passes on only the code, incrementally: it decides line by line,
holding back at most the line being received, so a fence or tag split across
chunks at any character is recognised and chunking never changes the result.

Design note. The output keeps every line of the reply: a line that is not code
becomes an empty line, so line N of the executed text is line N of the reply and
errors point at the line the model wrote. The rules, per line:

- A line starting (after indentation) with an opening ``<think>``, ``<thinking>``,
  ``<reasoning>`` or ``<reflection>`` tag starts a reasoning block, dropped up to
  its closing tag; text after the closing tag on that line is judged like a line.
- A line starting with three backticks opens a fence (or closes the open one).
  A fence with no language or a Python one (``python``, ``py``, ``python3``) is
  code; any other language (``json``, ``bash``, ``text``) is shown, not run.
- Once the reply used a fence, text outside fences is prose.
- Before any fence and any code, a line is prose when it is not Python (the
  compiler says *invalid*, not *incomplete*), or when it is a lone expression that
  calls nothing (``Done``, ``- item``): code the model meant to run calls something.
  The first other line is code, and so is every unfenced line after it.

Limits: prose *after* unfenced code is passed on (it fails as a SyntaxError that
goes back to the model); a Python line starting with three backticks (only
possible inside a string literal) is taken for a fence. Rejected: deciding on the
whole reply (waits for the end: no streaming) and guessing prose with a language
model of English (not deterministic across versions).

Deterministic and versioned (:data:`VERSION`): a turn records which version read
it, and a resume filters the recorded raw reply again to find the same offsets.
"""

from __future__ import annotations

import ast
import codeop
import re
import warnings

from resumable.errors import RecordVersionError

VERSION = 1
"""Recorded with every turn whose reply went through this filter; 0 means none did."""

PYTHON_LANGUAGES = frozenset({"", "python", "py", "python3", "py3"})

_OPEN = re.compile(r"\s*<(think|thinking|reasoning|reflection)>", re.IGNORECASE)
_FENCE = re.compile(r"\s*```+\s*([\w+.-]*)")


class ReplyFilter:
    """``feed`` raw chunks, get the code to run; ``close`` at the end of the reply."""

    def __init__(self) -> None:
        self._partial = ""
        self._reasoning: str | None = None  # the closing tag while inside a block
        self._fence: str | None = None  # the language of the open fence
        self._fenced = False  # the reply used a fence: unfenced text is prose
        self._code_seen = False

    def feed(self, chunk: str) -> str:
        """The code completed by this chunk: whole lines only (the last one is held back)."""
        text = self._partial + chunk
        end = text.rfind("\n") + 1
        self._partial = text[end:]
        return (
            "".join(self._line(line + "\n") for line in text[: end - 1].split("\n")) if end else ""
        )

    def close(self) -> str:
        """The last line, which had no line break."""
        rest, self._partial = self._partial, ""
        return self._line(rest) if rest else ""

    def _line(self, line: str) -> str:
        body = line.rstrip("\r\n")
        eol = line[len(body) :]
        if self._reasoning is not None:
            closing = re.search(re.escape(self._reasoning), body, re.IGNORECASE)
            if closing is None:
                return eol
            self._reasoning, body = None, body[closing.end() :]
            if not body.strip():
                return eol
        opening = _OPEN.match(body)
        if opening is not None:
            self._reasoning = f"</{opening.group(1).lower()}>"
            return self._line(body[opening.end() :] + eol)
        fence = _FENCE.match(body)
        if fence is not None:
            if self._fence is None:
                self._fence, self._fenced = fence.group(1).lower(), True
            else:
                self._fence = None
            return eol
        if self._fence is not None:
            return body + eol if self._fence in PYTHON_LANGUAGES else eol
        if self._fenced:
            return eol
        if not self._code_seen and body.strip():
            if is_prose(body):
                return eol
            self._code_seen = True
        return body + eol


def filter_reply(text: str) -> str:
    """The code of a whole reply (what streaming it through a filter gives)."""
    reply = ReplyFilter()
    return reply.feed(text) + reply.close()


def reply_filter_for(version: int) -> ReplyFilter | None:
    """A fresh filter of the recorded ``version``; None for 0 (replies run as received)."""
    if version == 0:
        return None
    if version != VERSION:
        raise RecordVersionError(
            f"a response of this run was read by reply filter version {version}, which this "
            f"version of resumable does not know (it knows {VERSION}): upgrade resumable",
            version=version,
        )
    return ReplyFilter()


def executed_text(raw: str, version: int, *, complete: bool) -> str:
    """The text the executor saw for a recorded reply read by filter ``version``."""
    reply = reply_filter_for(version)
    if reply is None:
        return raw
    code = reply.feed(raw)
    return code + reply.close() if complete else code


def has_code(reply: str) -> bool:
    """True if the whole reply holds code to run: not only prose, reasoning or comments."""
    return any(
        line.strip() and not line.lstrip().startswith("#")
        for line in filter_reply(reply).splitlines()
    )


def is_prose(line: str) -> bool:
    """True for a line, seen before any code, that is not Python meant to run."""
    source = line.strip()
    if source.startswith("#"):
        return False
    compiler = codeop.CommandCompiler()
    compiler.compiler.flags |= ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            complete = compiler(source, "<reply>", "exec")
        except (SyntaxError, ValueError, OverflowError):
            return True
    if complete is None:
        return False  # the start of a longer statement
    statements = ast.parse(source).body
    return len(statements) == 1 and _calls_nothing(statements[0])


def _calls_nothing(statement: ast.stmt) -> bool:
    if not isinstance(statement, ast.Expr):
        return False
    value = statement.value
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return False  # a docstring-like string is harmless code
    return not any(
        isinstance(node, ast.Call | ast.Await | ast.Yield | ast.YieldFrom | ast.NamedExpr)
        for node in ast.walk(value)
    )

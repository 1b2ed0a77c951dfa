"""One turn of a :class:`~resumable.durability.embedded.executor.DurableExecutor`.

A turn records its text before any of it runs and runs its statements (skipping those a
crashed process finished, replaying the one it was in) through the frame's recorder, whose
boundary records wait until the next statement starts or the turn ends - so the boundary of
the last statement and the turn's outcome are durable together, and a resume never finds a
turn run to its end without the value and output it gave. A turn that finished before the
crash returns its recorded outcome; inside a replay window (a task the code spawned ran on
past its statement) its statements run again first, as program code against the journal.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from collections.abc import Callable
from typing import Any, Protocol

from resumable.durability.embedded.handle import RunHandle
from resumable.durability.embedded.journal import JournaledRun
from resumable.durability.embedded.outcome import CapturedOutput, Failure, Outcome
from resumable.durability.embedded.steps import StepHook
from resumable.durability.embedded.writes import CodeFrameWrites
from resumable.durability.replay.divergence import ReplayDiverged
from resumable.durability.replay.journal import FrameRecorder
from resumable.errors import NonDeterminismError
from resumable.exec.depth import room_to_walk
from resumable.exec.hooks import register_program_file
from resumable.exec.rewrite import rewrite_statement
from resumable.exec.stream_syntax import too_deep
from resumable.exec.streaming import Statement, StatementSplitter

OUTPUT = "_print_outputs"
"""The namespace name of the captured output (smolagents' name for it)."""

_VALUE = "__resumable_value__"
_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


class TurnHost(Protocol):
    """What a turn uses of the executor it runs in (a ``DurableExecutor``)."""

    run: JournaledRun | None
    frame_id: str
    namespace: dict[str, Any]
    writes: CodeFrameWrites | None
    recorder: FrameRecorder | None
    hook: StepHook
    check: Callable[[ast.Module], None] | None
    assignment_values: bool
    stop_signal: type[BaseException] | None

    @property
    def output(self) -> CapturedOutput: ...

    def enter(self, statement: Statement, index: int) -> None: ...

    def leave(self, statement: Statement, index: int) -> None: ...


class Turn:
    """One turn: its text and its statements."""

    def __init__(
        self,
        executor: TurnHost,
        index: int,
        *,
        recorded: Any,
        done: bool = False,
        replays: bool = False,
        skip: int = 0,
    ) -> None:
        self.ex = executor
        self.index = index
        self.recorded: str | None = None if recorded is None else recorded.text
        self.done = done
        """Its outcome is in the log: it is what the turn returns."""
        self.runs = not done or replays
        """Its statements run (again, when it is done: they are in a replay window)."""
        self.text = ""
        self.written = len(self.recorded) if self.recorded is not None else -1
        self.splitter = StatementSplitter()
        self.statement = 0
        self.skip = skip
        self.value: Any = None
        self.failure: Failure | None = None
        self.final = False

    # -- text --------------------------------------------------------------------------
    def feed(self, chunk: str) -> None:
        self.text += chunk
        self._check_recorded()
        if not self.runs or self.failure is not None or self.final:
            return
        try:
            statements = self.splitter.feed(chunk)
        except SyntaxError as exc:
            self.failure = Failure.from_syntax(exc)
            return
        self._run_all(statements)

    def finish(self) -> Outcome:
        self._check_recorded(final=True)
        run = self.ex.run
        if self.runs and self.failure is None and not self.final:
            try:
                statements = self.splitter.close()
            except SyntaxError as exc:
                self.failure = Failure.from_syntax(exc)
            else:
                self._run_all(statements)
        if self.done and run is not None:
            outcome: Outcome = run.journal(f"exec:{self.ex.frame_id}").call("exec", _unreachable)
            self.ex.namespace[OUTPUT] = CapturedOutput().append(outcome.output)
            return outcome
        outcome = Outcome(self.value, self.ex.output.value, self.failure, final=self.final)
        writes = self.ex.writes
        if run is not None and writes is not None:
            self._record_text()
            writes.pending.append(("turn_end", self.ex.frame_id, {"t": self.index}))
            journal = run.journal(f"exec:{self.ex.frame_id}")
            body, blobs = journal.body("exec", _recordable(outcome, run), self.ex.namespace)
            writes.add_lazily("await", journal.frame_id, body)
            writes.push(blobs=blobs)
        return outcome

    def _check_recorded(self, *, final: bool = False) -> None:
        recorded = self.recorded
        if recorded is None:
            return
        same = recorded.startswith(self.text) or self.text.startswith(recorded)
        if final and self.done:
            same = recorded == self.text
        if not same:
            run_id = self.ex.run.run_id if self.ex.run is not None else ""
            raise NonDeterminismError(
                f"turn {self.index + 1} of {self.ex.frame_id} in run {run_id} was recorded "
                "with other code than the code fed now; feed the same code (is this the "
                "program that started the run?)",
                frame=self.ex.frame_id,
            )

    def _record_text(self) -> None:
        """Queue the turn record and the text not yet recorded (before statements run)."""
        writes = self.ex.writes
        if writes is None or self.done:
            return
        frame_id = self.ex.frame_id
        if self.written < 0:
            writes.add_lazily("turn", frame_id, {"t": self.index, "prompt": None})
            self.written = 0
        if len(self.text) > self.written:
            writes.add_lazily(
                "chunk", frame_id, {"t": self.index, "text": self.text[self.written :]}
            )
            self.written = len(self.text)

    # -- statements ----------------------------------------------------------------------
    def _run_all(self, statements: list[Statement]) -> None:
        for statement in statements:
            if self.failure is not None or self.final:
                return
            index = self.statement
            self.statement += 1
            if index < self.skip:
                continue
            self._run(statement, index)

    def _run(self, statement: Statement, index: int) -> None:
        ex = self.ex
        nodes = statement.tree if statement.tree is not None else ast.parse(statement.source).body
        segment = source_segment(statement.source, nodes[0]) or statement.source.strip()
        tree = ast.Module(body=nodes, type_ignores=[])
        last = tree.body[-1]
        value_name = _value_target(last, ex.assignment_values)
        if isinstance(last, ast.Expr):
            tree.body[-1] = ast.copy_location(
                ast.Assign(targets=[ast.Name(_VALUE, ast.Store())], value=last.value), last
            )
            value_name = _VALUE
        elif ex.assignment_values and isinstance(last, _BLOCKS):
            _mark_trailing(last)
            value_name = _VALUE
        filename = f"<{ex.frame_id} code {self.index + 1}>"
        if ex.check is not None:
            try:
                ex.check(tree)
            except Exception as exc:
                self.failure = Failure.from_exception(exc, segment, statement.line, filename)
                return
        register_program_file(filename)
        try:
            with room_to_walk(statement.source):  # the rewrite and compile recurse per level
                rewrite_statement(tree, index, line_offset=statement.line - 1)
                code = compile(tree, filename, "exec", flags=_FLAGS, dont_inherit=True)
        except SyntaxError as exc:
            self.failure = Failure.from_syntax(exc)
            return
        except RecursionError:  # deeper than the rewriter or the compiler go
            self.failure = Failure.from_syntax(too_deep(statement.line))
            return
        if ex.writes is not None:
            self._record_text()
            ex.writes.push()  # the text, and the boundary before it, before any of it runs
        recorder = ex.recorder
        if recorder is not None:
            recorder.turn = self.index
            ex.enter(statement, index)
        try:
            self._execute(code, segment, statement.line, filename)
        except BaseException:
            if recorder is not None:
                recorder.statement_aborted(statement, index)  # nothing of it to check
            raise
        if recorder is not None:
            try:
                recorder.end(statement, index)
            except ReplayDiverged as diverged:
                raise diverged.error from None
        if not self.final:
            self.value = (
                ex.namespace.pop(_VALUE, None)
                if value_name == _VALUE
                else (ex.namespace.get(value_name) if value_name else None)
            )
        ex.namespace.pop(_VALUE, None)
        if recorder is not None:
            ex.leave(statement, index)

    def _execute(self, code: Any, segment: str, line: int, filename: str) -> None:
        """Run the statement; its error or final answer is noted, control signals pass."""
        ex = self.ex
        try:
            if code.co_flags & inspect.CO_COROUTINE:
                ex.hook.run(eval(code, ex.namespace))
            else:
                exec(code, ex.namespace)
        except ReplayDiverged as diverged:
            raise diverged.error from None
        except Exception as exc:
            self.failure = Failure.from_exception(exc, segment, line, filename)
        except BaseException as exc:
            if ex.stop_signal is None or not isinstance(exc, ex.stop_signal):
                raise
            self.final = True
            self.value = getattr(exc, "value", None)


_NEWLINE = re.compile(r"\r\n|\r|\n")


def source_segment(source: str, node: ast.AST) -> str | None:
    """The text of ``node`` in ``source``, as ``ast.get_source_segment`` gives it, in time
    linear in the text (that one builds each line a character at a time: a 2 MB literal
    took over a minute). None when the node has no position or lies past the end."""
    lineno = getattr(node, "lineno", None)
    end_lineno = getattr(node, "end_lineno", None)
    col = getattr(node, "col_offset", None)
    end_col = getattr(node, "end_col_offset", None)
    if lineno is None or end_lineno is None or col is None or end_col is None:
        return None
    starts = [0]  # where each line starts, up to the node's last line
    for newline in _NEWLINE.finditer(source):
        if len(starts) >= end_lineno:
            break
        starts.append(newline.end())
    if len(starts) < end_lineno or starts[end_lineno - 1] >= len(source) or lineno < 1:
        return None
    begin = _column(source, starts[lineno - 1], col)
    return source[begin : _column(source, starts[end_lineno - 1], end_col)]


def _column(source: str, line_start: int, offset: int) -> int:
    """Where in ``source`` the UTF-8 byte ``offset`` of the line at ``line_start`` falls."""
    found = _NEWLINE.search(source, line_start)
    line = source[line_start : found.start() if found else len(source)]
    if line.isascii():
        return line_start + min(offset, len(line))
    return line_start + len(line.encode()[:offset].decode(errors="ignore"))


def _value_target(node: ast.stmt, assignments: bool) -> str | None:
    """The name whose value is the statement's value (smolagents' rule for assignments)."""
    if not assignments:
        return None
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    if isinstance(node, ast.AugAssign | ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    return None


_BLOCKS = (ast.If, ast.For, ast.While, ast.With, ast.Try)


def _mark_trailing(node: ast.stmt) -> None:
    """Let the last statement run in each branch of a block give the block's value.

    smolagents' rule for a block that ends the code: its value is that of the last
    statement it ran (an expression, or an assignment to a name).
    """
    bodies: list[list[ast.stmt]] = [getattr(node, "body", []), getattr(node, "orelse", [])]
    if isinstance(node, ast.Try):
        bodies += [h.body for h in node.handlers]
    for body in bodies:
        if not body:
            continue
        last = body[-1]
        if isinstance(last, ast.Expr):
            body[-1] = ast.copy_location(
                ast.Assign(targets=[ast.Name(_VALUE, ast.Store())], value=last.value), last
            )
        elif isinstance(last, _BLOCKS):
            _mark_trailing(last)
        elif (name := _value_target(last, True)) is not None:
            body.append(
                ast.copy_location(
                    ast.Assign(
                        targets=[ast.Name(_VALUE, ast.Store())], value=ast.Name(name, ast.Load())
                    ),
                    last,
                )
            )


def _recordable(outcome: Outcome, run: RunHandle) -> Outcome:
    """The outcome as the log can hold it: a value that cannot be pickled becomes its repr."""
    try:
        run.session_or_fail().snapshotter.dumps_value(outcome.value, {})
    except Exception:
        shown = f"<not checkpointed: {_repr(outcome.value)}>"
        return dataclasses.replace(outcome, value=shown)
    return outcome


def _repr(value: Any) -> str:
    try:
        return repr(value)[:200]
    except Exception as exc:  # a user's __repr__ may raise
        return f"{type(value).__name__} ({type(exc).__name__} in repr)"


def _unreachable() -> Outcome:
    raise AssertionError("a recorded turn outcome was not found in the log")

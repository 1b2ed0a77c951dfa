"""One turn of a :class:`~resumable.durability.embedded.executor.DurableExecutor`.

A turn records its text before any of it runs, runs its statements (skipping those a
crashed process finished, replaying the one it was in), and queues each statement's
boundary record until the next statement starts or the turn ends - so the boundary of
the last statement and the turn's outcome are durable together, and a resume never
finds a turn run to its end without the value and output it gave.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from typing import TYPE_CHECKING, Any

from resumable.durability.embedded.journal import Diverged
from resumable.durability.embedded.outcome import CapturedOutput, Failure, Outcome
from resumable.errors import NonDeterminismError
from resumable.exec.hooks import register_program_file
from resumable.exec.rewrite import rewrite_statement
from resumable.exec.streaming import Statement, StatementSplitter

if TYPE_CHECKING:
    from resumable.durability.embedded.executor import DurableExecutor
    from resumable.durability.embedded.run import DurableRun
    from resumable.durability.state import FrameState

OUTPUT = "_print_outputs"
"""The namespace name of the captured output (smolagents' name for it)."""

_VALUE = "__resumable_value__"
_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


class Turn:
    """One turn: its text, its statements, its pending boundary record."""

    def __init__(
        self,
        executor: DurableExecutor,
        index: int,
        frame: FrameState | None,
        *,
        recorded: Any,
        done: bool = False,
    ) -> None:
        self.ex = executor
        self.index = index
        self.frame = frame
        self.recorded: str | None = None if recorded is None else recorded.text
        self.done = done
        self.text = ""
        self.written = len(self.recorded) if self.recorded is not None else -1
        self.splitter = StatementSplitter()
        self.statement = 0
        self.skip = 0
        self.replay_index: int | None = None
        if recorded is not None and not done and frame is not None and frame.turn == index:
            self.skip = frame.next_index
            self.replay_index = frame.journal_stmt
        self.pending: list[tuple[str, str, dict[str, Any]]] = []
        self.blobs: dict[str, bytes] = {}
        self.value: Any = None
        self.failure: Failure | None = None
        self.final = False

    # -- text --------------------------------------------------------------------------
    def feed(self, chunk: str) -> None:
        self.text += chunk
        self._check_recorded()
        if self.done or self.failure is not None or self.final:
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
        if self.done and run is not None:
            outcome: Outcome = run.journal(f"exec:{self.ex.frame_id}").call("exec", _unreachable)
            self.ex.namespace[OUTPUT] = CapturedOutput().append(outcome.output)
            return outcome
        if self.failure is None and not self.final:
            try:
                statements = self.splitter.close()
            except SyntaxError as exc:
                self.failure = Failure.from_syntax(exc)
            else:
                self._run_all(statements)
        outcome = Outcome(self.value, self.ex.output.value, self.failure, final=self.final)
        if run is not None:
            self._record_text()
            self.pending.append(("turn_end", self.ex.frame_id, {"t": self.index}))
            journal = run.journal(f"exec:{self.ex.frame_id}")
            body, blobs = journal.body("exec", _recordable(outcome, run), self.ex.namespace)
            self.blobs.update(blobs)
            self.pending.append(("await", journal.frame_id, body))
            self._write_pending()
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
        frame_id = self.ex.frame_id
        if self.written < 0:
            self.pending.append(("turn", frame_id, {"t": self.index, "prompt": None}))
            self.written = 0
        if len(self.text) > self.written:
            self.pending.append(
                ("chunk", frame_id, {"t": self.index, "text": self.text[self.written :]})
            )
            self.written = len(self.text)

    def _write_pending(self) -> None:
        run = self.ex.run
        if run is not None and self.pending:
            records, blobs = self.pending, self.blobs
            self.pending, self.blobs = [], {}
            run.write(records, blobs)

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
        segment = ast.get_source_segment(statement.source, nodes[0]) or statement.source.strip()
        tree = ast.Module(body=nodes, type_ignores=[])
        last = tree.body[-1]
        value_name = _value_target(last, ex._assignment_values)
        if isinstance(last, ast.Expr):
            tree.body[-1] = ast.copy_location(
                ast.Assign(targets=[ast.Name(_VALUE, ast.Store())], value=last.value), last
            )
            value_name = _VALUE
        if statement.line > 1:
            ast.increment_lineno(tree, statement.line - 1)
        filename = f"<{ex.frame_id} code {self.index + 1}>"
        rewrite_statement(tree, index)
        register_program_file(filename)
        try:
            code = compile(
                ast.fix_missing_locations(tree), filename, "exec", flags=_FLAGS, dont_inherit=True
            )
        except SyntaxError as exc:
            self.failure = Failure.from_syntax(exc)
            return
        if ex.run is not None:
            self._record_text()
            self._write_pending()
        journal = ex.journal
        if journal is not None:
            replay = self.frame.journal if (self.frame and index == self.replay_index) else None
            journal.begin(self.index, index, replay)
        try:
            self._execute(code, segment, statement.line, filename)
        except BaseException:
            if journal is not None:
                journal.abandon()  # the statement did not finish: nothing to check
            raise
        if journal is not None:
            try:
                journal.end(statement.line)
            except Diverged as diverged:
                raise diverged.error from None
        if not self.final:
            self.value = (
                ex.namespace.pop(_VALUE, None)
                if value_name == _VALUE
                else (ex.namespace.get(value_name) if value_name else None)
            )
        ex.namespace.pop(_VALUE, None)
        if ex.run is not None:
            self._boundary(statement, index)

    def _execute(self, code: Any, segment: str, line: int, filename: str) -> None:
        """Run the statement; its error or final answer is noted, control signals pass."""
        ex = self.ex
        try:
            if code.co_flags & inspect.CO_COROUTINE:
                ex.hook.run(eval(code, ex.namespace))
            else:
                exec(code, ex.namespace)
        except Diverged as diverged:
            raise diverged.error from None
        except Exception as exc:
            self.failure = Failure.from_exception(exc, segment, line, filename)
        except BaseException as exc:
            if ex._stop is None or not isinstance(exc, ex._stop):
                raise
            self.final = True
            self.value = getattr(exc, "value", None)

    def _boundary(self, statement: Statement, index: int) -> None:
        """Queue the statement's boundary record (written before the next one runs)."""
        run = self.ex.run
        assert run is not None
        session = run.session_or_fail()
        capture = session.snapshotter.capture(self.ex.namespace, exclude=self.ex.exclude())
        self.blobs.update(capture.new_blobs)
        body: dict[str, Any] = {
            "t": self.index,
            "i": index,
            "end": statement.end,
            "ns": capture.data,
        }
        body["b"] = sorted(capture.blobs)
        if capture.lost:
            body["lost"] = capture.lost
        self.pending.append(("stmt", self.ex.frame_id, body))


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


def _recordable(outcome: Outcome, run: DurableRun) -> Outcome:
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

"""StreamingPythonExecutor: run LLM-written Python statement by statement as it streams in.

The loop is the asyncio REPL recipe: each complete top-level statement is compiled
alone as ``ast.Module([stmt])`` with ``PyCF_ALLOW_TOP_LEVEL_AWAIT``, its awaits
rewritten to go through the namespace's hook, and run with ``await eval(code, ns)``
when the compiler marked it a coroutine.

One *response* is one stream (one LLM answer, or one script). A syntax error or an
exception stops the response the way it stops a script - later statements of that
response do not run - and is reported as a :class:`CodeError` carrying the line in
the response. The executor stays usable: the next response starts afresh with the
same namespace. Control signals (``BaseException`` subclasses that are not
``Exception``) pass through untouched.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import traceback
from collections.abc import Awaitable
from dataclasses import dataclass
from types import CodeType
from typing import Any, Protocol

from resumable.errors import CodeError
from resumable.exec.compiled import TEMPLATE_INDEX, TEMPLATE_LINE, CompiledStatements
from resumable.exec.depth import room_to_walk
from resumable.exec.hooks import HOOK_NAME, AwaitHook, DirectHook, register_program_file
from resumable.exec.loop_run import await_loop_runs
from resumable.exec.rewrite import rewrite_statement
from resumable.exec.stream_syntax import TOO_DEEP, too_deep
from resumable.exec.streaming import Statement, StatementSplitter

_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


class ExecutionObserver(Protocol):
    """Told when each statement starts and finishes; the durability layer is one."""

    async def statement_started(self, statement: Statement, index: int) -> None: ...

    async def statement_finished(
        self, statement: Statement, index: int, error: CodeError | None
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class ResponseResult:
    """How a response ended: statements run, and the error that stopped it, if any."""

    statements: int
    error: CodeError | None


class StreamingPythonExecutor:
    """A persistent namespace fed by streamed chunks of Python.

    ``filename`` names the response in tracebacks (``<response>`` by default);
    ``hook`` receives every await (the passthrough :class:`DirectHook` if None);
    ``loop_runs``: the names under which the code calls ``asyncio.run``, whose top-level
    calls become awaits (:mod:`resumable.exec.loop_run`; a script's, see ``loop_run_names``).
    """

    def __init__(
        self,
        namespace: dict[str, Any] | None = None,
        *,
        hook: AwaitHook | None = None,
        observer: ExecutionObserver | None = None,
        filename: str = "<response>",
        loop_runs: frozenset[str] = frozenset(),
    ) -> None:
        self.namespace: dict[str, Any] = {} if namespace is None else namespace
        self.namespace.setdefault("__builtins__", __builtins__)
        self.namespace.setdefault("__name__", "__main__")
        self.namespace[HOOK_NAME] = hook if hook is not None else DirectHook()
        self._mark_entries = callable(getattr(self.namespace[HOOK_NAME], "entered", None))
        """Functions the program defines say when they start (a hook without ``entered``
        gets the plain rewrite)."""
        self.observer = observer
        self.filename = filename
        self.loop_runs = loop_runs
        self._stream: list[str] = []
        self._splitter = StatementSplitter()
        self._index = 0
        self._ran = 0
        self._error: CodeError | None = None
        self._closed = False
        self._compiled = CompiledStatements()

    # -- the response being streamed ------------------------------------------
    def start_response(
        self, *, filename: str | None = None, offset: int = 0, line: int = 1, index: int = 0
    ) -> None:
        """Begin a new response; ``offset``/``line``/``index`` resume one mid-way."""
        if filename is not None:
            self.filename = filename
        self._stream = []
        self._start_line = line
        self._splitter = StatementSplitter(offset=offset, line=line)
        self._index = index
        self._ran = 0
        self._error = None
        self._closed = False

    _start_line = 1

    @property
    def failed(self) -> bool:
        """True once a statement of the current response raised or did not parse."""
        return self._error is not None

    @property
    def next_index(self) -> int:
        return self._index

    async def add_chunk(self, text: str) -> None:
        """Take the next chunk; run every statement it completes (nothing, after an error)."""
        if self._closed:
            raise RuntimeError("add_chunk() after finalize(): call start_response() first")
        self._stream.append(text)
        if self._error is not None:
            return
        try:
            statements = self._splitter.feed(text)
        except SyntaxError as exc:
            self._fail_syntax(exc)
            return
        await self._run_all(statements)

    async def finalize(self) -> ResponseResult:
        """End the response: run what is left and say how it went."""
        if not self._closed:
            self._closed = True
            if self._error is None:
                try:
                    statements = self._splitter.close()
                except SyntaxError as exc:
                    self._fail_syntax(exc)
                else:
                    await self._run_all(statements)
        return ResponseResult(self._ran, self._error)

    async def run(self, source: str) -> ResponseResult:
        """Run a whole source as one response (convenience for tests and scripts)."""
        self.start_response()
        await self.add_chunk(source)
        return await self.finalize()

    # -- running statements -----------------------------------------------------
    async def _run_all(self, statements: list[Statement]) -> None:
        for statement in statements:
            if self._error is not None:
                return
            await self.run_statement(statement)

    async def run_statement(self, statement: Statement) -> None:
        """Run one complete statement; errors are recorded, control signals propagate."""
        index = self._index
        self._index += 1
        try:
            code = self._compile(statement, index)
        except SyntaxError as exc:
            self._fail_syntax(exc)
            return
        if self.observer is not None:
            await self.observer.statement_started(statement, index)
        error: CodeError | None = None
        try:
            if code.co_flags & inspect.CO_COROUTINE:
                await _evaluate_async(code, self.namespace)
            else:
                eval(code, self.namespace)
        except Exception as exc:
            error = self._code_error(exc)
        except BaseException:
            # a control signal ends the statement: an observer that keeps per-statement
            # state (the durable journal) is told, if it wants to know
            aborted = getattr(self.observer, "statement_aborted", None)
            if aborted is not None:
                aborted(statement, index)
            raise
        self._ran += 1
        if error is not None:
            self._error = error
        if self.observer is not None:
            await self.observer.statement_finished(statement, index, error)

    def _compile(self, statement: Statement, index: int) -> Any:
        try:
            with room_to_walk(statement.source):  # the rewrite and compile recurse per level
                return self._compile_deep(statement, index)
        except RecursionError:  # a tree deeper than the parser, rewriter or compiler go
            raise too_deep(statement.line) from None

    def _compile_deep(self, statement: Statement, index: int) -> Any:
        source, offset = statement.source, statement.line - 1
        register_program_file(self.filename)
        if any(name.rpartition(".")[2] in source for name in self.loop_runs):
            tree = self._tree(statement)
            tree = await_loop_runs(tree, self.loop_runs)  # asyncio.run(main()) -> await main()
            return self._compile_tree(tree, index, offset)
        code = self._compiled.take(source, self.filename, index, offset)
        if code is None:
            code = self._compile_tree(self._tree(statement), index, offset)
            self._compiled.note(
                source,
                self.filename,
                index,
                offset,
                code,
                lambda: self._compile_tree(
                    ast.parse(source, self.filename, "exec"), TEMPLATE_INDEX, TEMPLATE_LINE - 1
                ),
            )
        return code

    def _tree(self, statement: Statement) -> ast.Module:
        if statement.tree is not None:  # the splitter parsed it already (a fresh tree each)
            return ast.Module(body=statement.tree, type_ignores=[])
        return ast.parse(statement.source, self.filename, "exec")

    def _compile_tree(self, tree: ast.Module, index: int, line_offset: int) -> CodeType:
        tree = rewrite_statement(
            tree, index, line_offset=line_offset, mark_entries=self._mark_entries
        )
        code: CodeType = compile(tree, self.filename, "exec", flags=_FLAGS, dont_inherit=True)
        return code

    # -- errors -------------------------------------------------------------------
    def _register_source(self) -> None:
        """Make the response's text visible to tracebacks and ``linecache``."""
        text = "\n" * (self._start_line - 1) + self.text
        lines = text.splitlines(keepends=True)
        linecache.cache[self.filename] = (len(text), None, lines, self.filename)

    @property
    def text(self) -> str:
        """What was received of the current response (from its resume offset on)."""
        return "".join(self._stream)

    @property
    def _source_name(self) -> str:
        """``the script`` for code read from a file, ``the response`` for an LLM's."""
        return "the response" if self.filename.startswith("<") else "the script"

    def _fail_syntax(self, exc: SyntaxError) -> None:
        line = exc.lineno or 0
        detail = exc.msg or "invalid syntax"
        self._error = CodeError(
            f"SyntaxError: {detail} (line {line} of {self._source_name})",
            line=line,
            kind="syntax",
            exc_type="SyntaxError",
            traceback=f'  File "{self.filename}", line {line}\n    {(exc.text or "").strip()}\n'
            f"SyntaxError: {detail}\n",
        )

    def _code_error(self, exc: Exception) -> CodeError:
        self._register_source()
        line = 0
        for frame, lineno in traceback.walk_tb(exc.__traceback__):
            if frame.f_code.co_filename == self.filename:
                line = lineno
        frames = traceback.extract_tb(exc.__traceback__)
        # Drop the executor's own frames: the user's code starts at the response.
        user = [f for f in frames if f.filename == self.filename or "resumable" not in f.filename]
        text = "".join(traceback.format_list(user)) + "".join(
            traceback.format_exception_only(type(exc), exc)
        )
        where = f" (line {line} of {self._source_name})" if line else ""
        return CodeError(
            f"{type(exc).__name__}: {exc}{where}",
            line=line,
            kind="exception",
            exc_type=type(exc).__name__,
            traceback=text,
        )


async def _evaluate_async(code: Any, namespace: dict[str, Any]) -> None:
    result: Awaitable[Any] = eval(code, namespace)
    await result


def too_deep_line(source: str) -> int:
    """The line of the first statement of ``source`` too deep for Python to parse (0: the
    first statement that fails does so for another reason, or none fails)."""
    splitter = StatementSplitter()
    try:
        splitter.feed(source)
        splitter.close()
    except SyntaxError as exc:
        return (exc.lineno or 0) if exc.msg == TOO_DEEP else 0
    return 0

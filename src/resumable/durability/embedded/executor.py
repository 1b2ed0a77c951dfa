"""DurableExecutor: code fed by an embedding program, run statement by statement, durably.

Each :meth:`~DurableExecutor.run` (or the chunks of one :meth:`~DurableExecutor.feed` ...
:meth:`~DurableExecutor.finish`) is one *turn* of the run's code frame. The code is
recorded before it runs; each top-level statement runs in real CPython on the
executor's namespace, from the caller's thread; host tools are bound into the
namespace as steps: a call's result is durable before the code gets it, and on
replay it is answered from the log. A statement's boundary record (namespace,
offset) is written when the next statement starts or with the turn's outcome, so
the last value and the captured output of a turn are never lost between the two.

On a resumed run the n-th turn of this process is the run's n-th: a turn whose
outcome is recorded returns it without running anything; the turn in progress picks
up at its statement in progress (its steps answered from the log); later turns run
for real. Feeding a turn different code from the one recorded is refused.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import keyword
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from resumable.durability.effects.tasks import install_task_keys
from resumable.durability.embedded.boundary import host_facing
from resumable.durability.embedded.journal import JournaledRun
from resumable.durability.embedded.outcome import CapturedOutput, Failure, Outcome
from resumable.durability.embedded.steps import StepHook, bind_tool
from resumable.durability.embedded.turn import OUTPUT, Turn
from resumable.durability.embedded.writes import CodeFrameWrites
from resumable.durability.log.run_state import FrameState
from resumable.durability.replay.interleaving import replay_order
from resumable.durability.replay.journal import FrameRecorder
from resumable.errors import UsageError
from resumable.exec.executor import too_deep_line
from resumable.exec.hooks import HOOK_NAME
from resumable.exec.stream_syntax import too_deep
from resumable.exec.streaming import Statement


def check_tool_name(name: object) -> None:
    """Refuse a tool name the code could not call by it (not an identifier, or a keyword)."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        shown = repr(name) if len(repr(name)) <= 60 else repr(name)[:57] + "..."
        raise UsageError(
            f"invalid tool name {shown}: the code calls a tool by its name, so it must be a "
            "Python identifier that is not a keyword (letters, digits and '_', not first a "
            "digit); rename it",
            value=str(name)[:200],
        )


class DurableExecutor:
    """A persistent namespace that runs code durably (plainly, when ``run`` is None)."""

    def __init__(
        self,
        run: JournaledRun | None = None,
        *,
        tools: Mapping[str, Callable[..., Any]] | None = None,
        frame: str = "main",
        check_import: Callable[[str, bool], None] | None = None,
        stop_signal: type[BaseException] | None = None,
        final_tool: str | None = None,
        assignment_values: bool = False,
        check: Callable[[ast.Module], None] | None = None,
    ) -> None:
        self.run = run
        self.frame_id = frame
        self.namespace: dict[str, Any] = {"__name__": "__main__"}
        self._builtins = dict(vars(builtins))
        self._builtins["print"] = self._print
        if check_import is not None:
            self._builtins["__import__"] = _checked_import(check_import)
        self.namespace["__builtins__"] = self._builtins
        self.hook = StepHook(self)
        self.namespace[HOOK_NAME] = self.hook
        self.namespace[OUTPUT] = CapturedOutput()
        self.writes: CodeFrameWrites | None = None
        self.recorder: FrameRecorder | None = None
        """The frame's journal, made when the first turn that runs starts (see _open)."""
        self.tools: dict[str, Callable[..., Any]] = {}
        self.hidden: dict[str, Any] = {}
        """Namespace entries of the embedding program (never checkpointed, set again on resume)."""
        self.check = check
        """Called with each statement's tree before it runs: may change it, or raise to refuse it."""
        self.stop_signal = stop_signal
        self._final_tool = final_tool
        self.assignment_values = assignment_values
        self._turns = 0
        self._restored = False
        self._program_loop: asyncio.AbstractEventLoop | None = None
        self._turn: Turn | None = None
        if tools:
            self.bind_tools(tools)

    # -- the namespace ----------------------------------------------------------------------
    def bind_tools(self, tools: Mapping[str, Callable[..., Any]]) -> None:
        """Bind host callables as steps; they are never checkpointed, and rebound on resume.

        Each name must be one the code can call: a Python identifier that is not a keyword
        (anything else raises UsageError, before any tool is bound).
        """
        for name in tools:
            check_tool_name(name)
        for name, tool in tools.items():
            self.tools[name] = tool
            self.namespace[name] = self._bound(name, tool)

    def hide(self, name: str, value: Any) -> None:
        """Put ``value`` in the namespace as ``name``, outside the checkpointed state."""
        self.hidden[name] = value
        self.namespace[name] = value

    @property
    def builtins(self) -> dict[str, Any]:
        """The builtins the code sees (a copy of Python's, changed for this executor only)."""
        return self._builtins

    def _bound(self, name: str, tool: Callable[..., Any]) -> Callable[..., Any]:
        step = bind_tool(name, tool)
        stop = self.stop_signal
        if name != self._final_tool or stop is None:
            return step

        def final(*args: Any, **kwargs: Any) -> Any:
            raise stop(step(*args, **kwargs))

        final.__name__ = name
        final.__doc__ = step.__doc__
        return final

    def attach(self, run: JournaledRun | None) -> None:
        """Make the executor durable in ``run`` (or plain again with None), from its next turn."""
        self.run = run
        self.writes = self.recorder = None
        self._turns = 0
        self._restored = False
        self._turn = None

    def exclude(self) -> set[str]:
        return {"__builtins__", HOOK_NAME, *self.tools, *self.hidden}

    @property
    def output(self) -> CapturedOutput:
        captured: CapturedOutput = self.namespace[OUTPUT]
        return captured

    def _print(self, *args: Any, sep: str | None = " ", end: str | None = "\n", **kw: Any) -> None:
        file = kw.get("file")
        if file is not None and file is not sys.stdout:
            print(*args, sep=sep, end=end, **kw)
            return
        text = (" " if sep is None else sep).join(map(str, args)) + ("\n" if end is None else end)
        self.namespace[OUTPUT].value += text

    # -- turns ------------------------------------------------------------------------------
    @host_facing
    def run_code(self, code: str) -> Outcome:
        """Run ``code`` as one turn (it is parsed whole first: a syntax error runs nothing)."""
        try:
            ast.parse(code)
        except SyntaxError as exc:
            return Outcome(None, "", Failure.from_syntax(exc), final=False)
        except RecursionError:  # too deep to parse: the statement it is in is named
            return Outcome(None, "", Failure.from_syntax(too_deep(too_deep_line(code))))
        self.feed(code)
        return self.finish()

    @host_facing
    def feed(self, chunk: str) -> None:
        """Take the next chunk of the turn; statements it completes run now."""
        turn = self._turn
        if turn is None:
            turn = self._turn = self._start_turn()
        turn.feed(chunk)

    @host_facing
    def finish(self) -> Outcome:
        """End the turn: run what is left and return how it went."""
        turn = self._turn if self._turn is not None else self._start_turn()
        self._turn = None
        return turn.finish()

    def _start_turn(self) -> Turn:
        index = self._turns
        self._turns += 1
        run = self.run
        if run is None:
            self.namespace[OUTPUT] = CapturedOutput()
            return Turn(self, index, recorded=None)
        done = run.journal(f"exec:{self.frame_id}").recorded(index) is not None
        frame = run.state_frame(self.frame_id)
        recorded = frame.turns[index] if frame is not None and index < len(frame.turns) else None
        start = (0, 0, 0) if frame is None or not frame.turns else frame.resume_point()
        # Inside a replay window finished turns run again; else a finished turn only
        # returns its outcome, and the first that did not finish starts where it stood.
        replays = frame is not None and frame.window is not None and index >= start[0]
        if done and not replays:
            return Turn(self, index, recorded=recorded, done=True)
        if self.recorder is None:
            self._open(run, frame, start[0])
        skip = start[1] if index == start[0] else 0
        if skip == 0:
            self.namespace[OUTPUT] = CapturedOutput()
        return Turn(self, index, recorded=recorded, done=done, replays=replays, skip=skip)

    def _open(self, run: JournaledRun, frame: FrameState | None, turn: int) -> None:
        """The namespace as of the frame's resume point, and the journal of its statements."""
        if frame is not None and frame.ns is not None:
            run.restore(frame, self.namespace)
            for name, tool in self.tools.items():
                self.namespace[name] = self._bound(name, tool)
            self.namespace.update(self.hidden)
        self.writes = CodeFrameWrites(run)
        self.recorder = FrameRecorder(
            self.writes,
            self.frame_id,
            self.namespace,
            run.session_or_fail().snapshotter,
            turn=turn,
            replay=None if frame is None else frame.replay_journals(),
            order=None if frame is None else replay_order([frame]),
            marks=None if frame is None else frame.marks,
            exclude=self.exclude(),
            task_names=0 if frame is None else frame.task_names,
            namespace_pickle=None if frame is None else frame.ns,
        )

    # -- statements (what a turn asks of the frame's journal) -------------------------------
    def enter(self, statement: Statement, index: int) -> None:
        """Statement ``index`` starts: at its place among recorded results, when replayed."""
        recorder = self.recorder
        assert recorder is not None
        if recorder.waits(index):  # results of the code's tasks arrived before it started
            loop = self.program_loop()
            install_task_keys(loop)
            loop.run_until_complete(recorder.take_place(index))
        else:
            _at_once(recorder.take_place(index))
        recorder.begin(statement, index)

    def leave(self, statement: Statement, index: int) -> None:
        """Statement ``index`` finished: its boundary record waits for the next write."""
        assert self.recorder is not None
        _at_once(self.recorder.write_boundary(statement, index))

    def program_loop(self) -> asyncio.AbstractEventLoop:
        """The loop that runs statements with top-level awaits (on the caller's thread)."""
        if self._program_loop is None:
            self._program_loop = asyncio.new_event_loop()
        return self._program_loop

    def close(self) -> None:
        if self._program_loop is not None:
            self._program_loop.close()
            self._program_loop = None


def _at_once(step: Coroutine[Any, Any, None]) -> None:
    """Run a journal step that never waits (its writes return once durable), here and now."""
    try:
        step.send(None)
    except StopIteration:
        return
    step.close()
    raise RuntimeError("a journal step of an embedded run waited on a loop it does not have")


def _checked_import(check: Callable[[str, bool], None]) -> Callable[..., Any]:
    real = builtins.__import__

    def import_(
        name: str,
        globals: Any = None,
        locals: Any = None,
        fromlist: Sequence[str] = (),
        level: int = 0,
    ) -> Any:
        if level == 0:
            check(name, bool(fromlist))
        return real(name, globals, locals, fromlist, level)

    return import_

"""The agent loop, durably: frames, LLM turns streamed into the executor, human input.

Every call of an LLM playbook runs in a frame whose id is the caller's frame plus
the await key of the call, so the same call after a resume finds the same frame.
A frame's turns are LLM calls: the prompt is recorded, the response's chunks are
recorded (batched, and always before a statement they complete starts running)
and streamed into the frame's executor. On resume a frame picks up its namespace
at its last finished statement, replays the statement in progress from its
journal, feeds the rest of the recorded response, and only asks the LLM for what
was never received - continuing a cut-off response from its recorded prefix.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import inspect
import time
from collections.abc import Mapping
from typing import Any

from resumable.config import Config
from resumable.errors import CodeError, ResumableError
from resumable.executor import StreamingPythonExecutor
from resumable.hooks import HOOK_NAME, HookBase
from resumable.journal import FrameRecorder, _in_flight
from resumable.llm.base import LLMProvider, LLMRequest
from resumable.output import ProgramOutput
from resumable.playbooks.human import HumanDesk
from resumable.playbooks.primitives import (
    AgentState,
    FrameData,
    PlaybookReturn,
    ProgramEnd,
    WaitForInput,
    make_primitives,
)
from resumable.playbooks.program import PlaybookSpec, Program
from resumable.playbooks.prompt import first_prompt, from_wire, next_prompt, to_wire
from resumable.recovery import line_at
from resumable.rewrite import rewrite_statement
from resumable.session import RunOutcome, RunSession
from resumable.snapshot import Snapshotter
from resumable.state import FrameState
from resumable.streaming import Statement

CHUNK_BATCH = 2048
"""Streamed text is recorded at least every this many characters."""

_PYTHON_INDEX = 1_000_000
"""Statement indices of .pb python blocks, apart from any response's."""


def playbook(fn: Any = None, **options: Any) -> Any:
    """Mark an ``async def`` in a .pb python block as a Python playbook."""

    def mark(func: Any) -> Any:
        func.__playbook__ = options
        return func

    return mark(fn) if fn is not None else mark


class _Halt(BaseException):
    """A runtime error of a called playbook's frame (LLM unreachable, store, replay).

    It stops the run instead of reaching the calling response as its exception: the
    caller's code did nothing wrong, and its LLM must not be told that it did.
    """

    def __init__(self, error: ResumableError) -> None:
        super().__init__(error.message)
        self.error = error


class _LimitReached(BaseException):
    """A frame made ``max_llm_calls`` calls without Return() or End(): the run fails."""

    def __init__(self, message: str, frame: str) -> None:
        super().__init__(message)
        self.message = message
        self.frame = frame


class _FrameDispatch(HookBase):
    """The hook of Python playbooks: their awaits belong to the frame that calls them."""

    def __init__(self, current: contextvars.ContextVar[FrameRecorder | None]) -> None:
        self._current = current

    async def await_(self, site: str, awaitable: Any) -> Any:
        recorder = self._current.get()
        if recorder is None:
            return await awaitable
        return await recorder.await_(site, awaitable)


class _TurnObserver:
    """Records pending response text before each statement runs, then delegates."""

    def __init__(self, runtime: PlaybookRuntime, recorder: FrameRecorder, frame_id: str) -> None:
        self.runtime = runtime
        self.recorder = recorder
        self.frame_id = frame_id
        self.turn = 0
        self.pending: list[str] = []
        self.pending_chars = 0

    def take_pending(self) -> list[tuple[str, str, dict[str, Any]]]:
        """The chunk record for text not yet recorded (none if there is none)."""
        if not self.pending:
            return []
        text = "".join(self.pending)
        self.pending, self.pending_chars = [], 0
        return [("chunk", self.frame_id, {"t": self.turn, "text": text})]

    async def flush(self) -> None:
        for kind, frame, body in self.take_pending():
            await self.runtime.session.manager.write(kind, frame, body)

    async def statement_started(self, statement: Statement, index: int) -> None:
        await self.flush()
        await self.recorder.statement_started(statement, index)

    async def statement_finished(
        self, statement: Statement, index: int, error: CodeError | None
    ) -> None:
        await self.recorder.statement_finished(statement, index, error)


class PlaybookRuntime:
    """Runs one program's frames inside a :class:`RunSession`."""

    def __init__(
        self,
        session: RunSession,
        config: Config,
        program: Program,
        provider: LLMProvider,
        *,
        interactive: bool,
    ) -> None:
        self.session = session
        self.config = config
        self.program = program
        self.provider = provider
        self.human = HumanDesk(session, interactive=interactive)
        state = session.state
        # agent state is small and pickled whole: no blobs to fetch before it is loaded
        self._agent_pickler = Snapshotter(blob_threshold=1 << 62)
        self._agent_pickle = state.agent
        self.agent = AgentState(
            {}
            if state.agent is None
            else self._agent_pickler.loads_value(state.agent, load_blob=_no_blob, ns={})
        )
        self.output = ProgramOutput(muted=session.resumed)
        self._current: contextvars.ContextVar[FrameRecorder | None] = contextvars.ContextVar(
            "resumable_frame", default=None
        )
        self._python = self._load_python_playbooks()
        self._spawned: dict[str, int] = {}

    # -- the program ---------------------------------------------------------------
    def _load_python_playbooks(self) -> dict[str, Any]:
        namespace: dict[str, Any] = {
            "__name__": "resumable_playbooks",
            HOOK_NAME: _FrameDispatch(self._current),
            "playbook": playbook,
        }
        for number, block in enumerate(self.program.python_blocks):
            tree = ast.parse(block.source, str(self.program.path))
            ast.increment_lineno(tree, block.line - 1)
            tree = rewrite_statement(tree, _PYTHON_INDEX + number)
            exec(compile(tree, str(self.program.path), "exec"), namespace)
        return {
            name: value
            for name, value in namespace.items()
            if inspect.iscoroutinefunction(value) and hasattr(value, "__playbook__")
        }

    def go_live(self) -> None:
        self.output.go_live()

    async def run(self) -> RunOutcome:
        entry = self.session.state.entry or self.program.entry
        with self.output.installed(), self.agent.current():
            try:
                value = await self.run_frame("main", entry, {}, None)
            except ProgramEnd:
                value = None
            except WaitForInput as wait:
                await self.session.set_status("waiting", wait.question)
                return RunOutcome(self.session.run_id, "waiting", 3, wait.question["prompt"])
            except _Halt as halt:
                raise halt.error from None
            except _LimitReached as limit:
                await self.session.set_status(
                    "failed", {"error": limit.message, "frame": limit.frame}
                )
                return RunOutcome(self.session.run_id, "failed", 1, limit.message)
        await self.session.set_status("completed", {"result": repr(value)})
        return RunOutcome(self.session.run_id, "completed", 0, result=value)

    # -- frames -------------------------------------------------------------------------
    def _child_id(self, parent: str, name: str) -> str:
        key = _in_flight.get()
        prefix = f"{self.session.run_id}/"
        if key is not None and key.startswith(prefix + parent + "/"):
            base = key[len(prefix) :]
        else:
            base = f"{parent}/{name}"
        count = self._spawned.get(base, 0)
        self._spawned[base] = count + 1
        return base if count == 0 else f"{base}#{count}"

    def _callable(self, spec: PlaybookSpec, parent: str) -> Any:
        if spec.kind == "python":
            return self._python[spec.name]
        signature = inspect.Signature(
            [
                inspect.Parameter(
                    p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=_default(p.default)
                )
                for p in spec.params
            ]
        )

        async def call(*args: Any, **kwargs: Any) -> Any:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{spec.signature()}: {exc}") from None
            bound.apply_defaults()
            child = self._child_id(parent, spec.name)
            try:
                return await self.run_frame(child, spec.name, dict(bound.arguments), parent)
            except ResumableError as error:
                raise _Halt(error) from error

        call.__name__ = spec.name
        call.__doc__ = spec.description
        return call

    def _namespace(
        self, spec: PlaybookSpec, frame_id: str, args: Mapping[str, Any]
    ) -> tuple[dict[str, Any], set[str]]:
        data = FrameData(spec.name)
        namespace: dict[str, Any] = {"__frame__": data}
        fixed = make_primitives(self.program.agent, lambda: namespace["__frame__"], self.human)
        fixed["agent"] = self.agent
        for name, other in self.program.playbooks.items():
            fixed[name] = self._callable(other, frame_id)
        namespace.update(fixed)
        namespace.update(args)
        return namespace, {*fixed, "__builtins__", HOOK_NAME}

    async def run_frame(
        self, frame_id: str, name: str, args: dict[str, Any], parent: str | None
    ) -> Any:
        """Run (or resume) the frame of one LLM playbook call and return its result."""
        session = self.session
        manager = session.manager
        spec = self.program.playbook(name)
        frame = session.state.frames.get(frame_id)
        if frame is None or frame.playbook is None:
            pickled = session.snapshotter.dumps_value(args, {})
            await manager.write(
                "frame", frame_id, {"playbook": name, "parent": parent, "args": pickled.data}
            )
            frame = session.state.frame(frame_id)
        elif frame.returned:
            self._maybe_live(frame, replaying=False)
            return self._load(frame.result)
        namespace, exclude = self._namespace(spec, frame_id, args)
        await session.restore_frame(frame, namespace)
        recorder = FrameRecorder(
            manager,
            frame_id,
            namespace,
            session.snapshotter,
            turn=max(frame.turn, 0),
            replay_index=frame.journal_stmt,
            replay=frame.journal,
            on_live=self.go_live,
            exclude=exclude,
            extras=self._agent_changes,
        )
        recorder.set_previous_namespace(frame.ns)
        self._maybe_live(frame, replaying=bool(frame.journal))
        token = self._current.set(recorder)
        try:
            return await self._turns(spec, frame, namespace, recorder, args)
        except PlaybookReturn as done:
            pickled = session.snapshotter.dumps_value(done.value, namespace)
            await manager.write("return", frame_id, {"v": pickled.data})
            return done.value
        finally:
            self._current.reset(token)

    async def _agent_changes(self) -> dict[str, Any]:
        """The agent state for a boundary record, if the statement changed it."""
        pickled = self._agent_pickler.dumps_value(dict(self.agent), {})
        if pickled.data == self._agent_pickle:
            return {}
        self._agent_pickle = pickled.data
        return {"agent": pickled.data}

    def _maybe_live(self, frame: FrameState, *, replaying: bool) -> None:
        if not replaying and frame.last_seq >= self.session.manager.replay_until:
            self.go_live()

    def _load(self, data: bytes | None) -> Any:
        if data is None:
            return None
        return self.session.snapshotter.loads_value(
            data, load_blob=self.session.manager.load_blob_sync, ns={}
        )

    async def _turns(
        self,
        spec: PlaybookSpec,
        frame: FrameState,
        namespace: dict[str, Any],
        recorder: FrameRecorder,
        args: Mapping[str, Any],
    ) -> Any:
        manager = self.session.manager
        observer = _TurnObserver(self, recorder, frame.frame_id)
        executor = StreamingPythonExecutor(namespace, hook=recorder, observer=observer)
        limit = self.config.runtime.max_llm_calls
        resuming = frame.current_turn() is not None
        while True:
            turn = frame.current_turn()
            data: FrameData = namespace["__frame__"]
            if not resuming:
                if len(frame.turns) >= limit:
                    raise _LimitReached(
                        f"playbook {spec.name} (frame {frame.frame_id}) made {limit} LLM calls "
                        "without Return() or End(), so the run failed; fix the playbook or "
                        "raise [runtime] max_llm_calls",
                        frame.frame_id,
                    )
                if turn is None:
                    messages = first_prompt(self.program, spec, dict(args))
                else:
                    messages = next_prompt(from_wire(turn.prompt), turn.text, data.observations)
                index = len(frame.turns)
                await manager.write(
                    "turn", frame.frame_id, {"t": index, "prompt": to_wire(messages)}
                )
                turn = frame.current_turn()
            resuming = False
            assert turn is not None
            if data.turn != turn.index:
                data.observations = []
                data.turn = turn.index
            recorder.turn = observer.turn = turn.index
            text = turn.text
            executor.start_response(
                filename=f"<{spec.name} response {turn.index + 1}>",
                offset=frame.offset,
                line=line_at(text, frame.offset),
                index=frame.next_index,
            )
            failure = self._turn_failure(frame, turn.index)
            if failure is None:
                if frame.offset < len(text):
                    await executor.add_chunk(text[frame.offset :])
                if not turn.complete and not executor.failed:
                    await self._stream(spec, frame, turn.index, executor, observer)
                result = await executor.finalize()
                await observer.flush()
                if result.error is not None:
                    failure = {
                        "message": result.error.message,
                        "traceback": getattr(result.error, "traceback", ""),
                    }
            if failure is not None:
                data.observations.append(f"Error: {failure['message']}\n{failure['traceback']}")

    @staticmethod
    def _turn_failure(frame: FrameState, turn: int) -> dict[str, Any] | None:
        """The error that already stopped this turn's response, if one did."""
        for error in frame.errors:
            if error.get("t") == turn:
                return error
        return None

    async def _stream(
        self,
        spec: PlaybookSpec,
        frame: FrameState,
        index: int,
        executor: StreamingPythonExecutor,
        observer: _TurnObserver,
    ) -> None:
        turn = frame.turns[index]
        request = LLMRequest(
            tuple(from_wire(turn.prompt)), spec.name, index + 1, frame.frame_id, prefix=turn.text
        )
        started = time.monotonic()

        async def end_turn() -> None:
            usage = self.provider.last_usage
            end = {
                "t": index,
                "usage": None if usage is None else [usage.prompt_tokens, usage.completion_tokens],
                "ms": round((time.monotonic() - started) * 1000, 1),
            }
            # The last text and "complete" in one batch: no crash can land between them.
            await self.session.manager.write_together(
                [*observer.take_pending(), ("turn_end", frame.frame_id, end)]
            )

        # One chunk of look-ahead: the last chunk is known to be the last before the
        # statements it completes run, so the log says "complete" first and a response
        # received whole is never asked to go on after a crash.
        async with contextlib.aclosing(self.provider.stream(request)) as stream:
            chunk = await anext(stream, None)
            while chunk is not None:
                following = await anext(stream, None)
                observer.pending.append(chunk)
                observer.pending_chars += len(chunk)
                if following is None:
                    await end_turn()
                    await executor.add_chunk(chunk)
                    return
                if observer.pending_chars >= CHUNK_BATCH:
                    await observer.flush()
                await executor.add_chunk(chunk)
                if executor.failed:
                    break  # the rest of this response will not run: stop paying for it
                chunk = following
        await end_turn()


def _no_blob(digest: str) -> bytes:
    raise KeyError(f"agent state refers to blob {digest}, which it never writes")


def _default(text: str | None) -> Any:
    """A playbook parameter's default: a Python literal, else the text itself."""
    if text is None:
        return inspect.Parameter.empty
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text

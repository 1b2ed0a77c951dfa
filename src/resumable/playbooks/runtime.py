"""The agent loop, durably: frames, LLM turns streamed into the executor, human input.

Every call of an LLM playbook runs in a frame whose id is the caller's frame plus
the await key of the call, so the same call after a resume finds the same frame.
A frame's turns are LLM calls: the prompt is recorded, the response's chunks are
recorded (batched, and always before a statement they complete starts running)
and streamed into the frame's executor. On resume a frame picks up its namespace
at its last finished statement, replays the statement in progress from its
journal, feeds the rest of the recorded response, and only asks the LLM for what
was never received - continuing a cut-off response from its recorded prefix. The
turns of a frame (prompt, reply filter, errors back to the model) are in
:mod:`resumable.playbooks.turns`.
"""

from __future__ import annotations

import ast
import contextvars
import inspect
from collections.abc import Mapping
from typing import Any

from resumable.config import Config
from resumable.durability.capture.snapshot import (
    Pickled,
    ReducerRegistry,
    Snapshotter,
    default_registry,
)
from resumable.durability.effects.keys import flight_key
from resumable.durability.log.run_state import FrameState
from resumable.durability.replay.interleaving import replay_order
from resumable.durability.replay.journal import FrameRecorder
from resumable.durability.runs.progress import RunProgress
from resumable.durability.runs.session import RunOutcome, RunSession
from resumable.errors import ResumableError
from resumable.exec.hooks import HOOK_NAME, HookBase
from resumable.exec.output import ProgramOutput
from resumable.exec.rewrite import rewrite_statement
from resumable.llm.base import LLMProvider
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
from resumable.playbooks.turns import FrameFailed, FrameTurns

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


class _FrameDispatch(HookBase):
    """The hook of Python playbooks: their awaits belong to the frame that calls them."""

    def __init__(self, current: contextvars.ContextVar[FrameRecorder | None]) -> None:
        self._current = current

    def await_(self, site: str, awaitable: Any) -> Any:
        recorder = self._current.get()
        if recorder is None:
            return awaitable
        return recorder.await_(site, awaitable)


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
        progress: RunProgress | None = None,
    ) -> None:
        self.session = session
        self.config = config
        self.program = program
        self.provider = provider
        self.progress = progress
        self.turns = FrameTurns(self)
        self.human = HumanDesk(
            session, interactive=interactive, on_ask=None if progress is None else progress.asking
        )
        state = session.state
        # agent state is small and pickled whole: no blobs to fetch before it is loaded
        self._agent_pickler = Snapshotter(blob_threshold=1 << 62, reducers=_agent_registry())
        self._agent_pickle = state.agent
        self.agent = AgentState(
            {}
            if state.agent is None
            else self._agent_pickler.loads_value(state.agent, load_blob=_no_blob, ns={})
        )
        # Output counted from the run's start: replay prints only what goes past what the
        # last durable record covers (older runs: muted until replay catches up).
        self._counted = state.counted_output
        self.output = ProgramOutput(
            muted=session.resumed and not self._counted, hold=True, printed=state.output
        )
        self._order = (
            replay_order(f for f in state.frames.values() if f.window is not None or not f.returned)
            if session.resumed
            else None
        )
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
            # a Python playbook is a tool, journaled as one foreign await: its code does
            # not make the await that calls it transparent
            tree = rewrite_statement(tree, _PYTHON_INDEX + number, mark_entries=False)
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
            except FrameFailed as limit:
                await self.session.set_status(
                    "failed", {"error": limit.message, "frame": limit.frame}
                )
                return RunOutcome(self.session.run_id, "failed", 1, limit.message)
        await self.session.set_status("completed", {"result": repr(value)})
        return RunOutcome(self.session.run_id, "completed", 0, result=value)

    # -- frames -------------------------------------------------------------------------
    def _child_id(self, parent: str, name: str) -> str:
        key = flight_key()
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
            body = {"playbook": name, "parent": parent, "args": pickled.data}
            await self._write_valued("frame", frame_id, body, pickled)
            frame = session.state.frame(frame_id)
        else:
            if parent is None or frame.ns is not None or frame.window is None:
                # Not replayed from its very start: the statements before its resume
                # point leave agent state as its log says (else replay rebuilds it).
                self._restore_agent(frame)
            if self._counted:
                self.output.seek(frame.output)  # where the frame stood (or returned)
            if frame.returned and frame.window is None:
                self._maybe_live(frame, replaying=False)
                await session.preload_blobs(frame.result_blobs)
                return self._load(frame.result)
        namespace, exclude = self._namespace(spec, frame_id, args)
        await session.restore_frame(frame, namespace)
        replay = frame.replay_journals()
        recorder = FrameRecorder(
            manager,
            frame_id,
            namespace,
            session.snapshotter,
            turn=frame.resume_point()[0],
            replay=replay,
            order=self._order,
            marks=frame.marks,
            on_live=None if self._counted else self.go_live,
            exclude=exclude,
            extras=self._agent_changes,
            on_answer=self._call_answered,
            rerun=self._runs_again,
            task_names=frame.task_names,
            namespace_pickle=frame.ns,
        )
        self._maybe_live(frame, replaying=bool(replay))
        token = self._current.set(recorder)
        try:
            if self.progress is not None:
                self.progress.frame_entered(spec.name, frame_id)
            await self.turns.run(spec, frame, namespace, recorder, args)
        except PlaybookReturn as done:
            if not frame.returned:  # else replay ran it again, beside the program's tasks
                pickled = session.snapshotter.dumps_value(done.value, namespace)
                await self._write_valued("return", frame_id, {"v": pickled.data}, pickled)
            return done.value
        finally:
            self._current.reset(token)

    async def _write_valued(
        self, kind: str, frame_id: str, body: dict[str, Any], pickled: Pickled
    ) -> None:
        """Write a record holding a pickled value: the blobs it refers to are stored
        first and listed in it (``b``), so a resume or a fork can fetch them."""
        await self.session.manager.put_blobs(pickled.new_blobs)
        if pickled.blobs:
            body["b"] = sorted(pickled.blobs)
        await self.session.manager.write(kind, frame_id, body | await self._agent_changes())

    async def _agent_changes(self) -> dict[str, Any]:
        """The agent state for a boundary record, if the statement changed it."""
        pickled = self._agent_pickler.dumps_value(dict(self.agent), {})
        if pickled.data == self._agent_pickle:
            return {}
        self._agent_pickle = pickled.data
        return {"agent": pickled.data}

    def _runs_again(self, key: str) -> bool:
        """A playbook call the log answers, but whose frame ran beside the program's tasks:
        its code runs again (its replies come from the log), so they interleave as before."""
        frame = self.session.state.frames.get(key.removeprefix(f"{self.session.run_id}/"))
        return frame is not None and frame.returned and frame.window is not None

    def _call_answered(self, key: str) -> None:
        """A playbook call replay answers from the log leaves agent state as it returned."""
        frame = self.session.state.frames.get(key.removeprefix(f"{self.session.run_id}/"))
        if frame is not None and frame.returned:
            self._restore_agent(frame)

    def _restore_agent(self, frame: FrameState) -> None:
        """Agent state as the log last saw it in ``frame``, entering it again on resume.

        Replay of a statement re-executes its changes to ``agent``; a frame it calls
        again continues from its own last boundary, whose state already holds them and
        the frame's completed statements' own, so each change is applied once.
        """
        if frame.agent is None:
            return
        self._agent_pickle = frame.agent or None
        self.agent.clear()
        if frame.agent:
            self.agent.update(
                self._agent_pickler.loads_value(frame.agent, load_blob=_no_blob, ns={})
            )

    def _maybe_live(self, frame: FrameState, *, replaying: bool) -> None:
        """Older runs: output stays muted until replay passes the last durable record."""
        if self._counted:
            return
        if not replaying and frame.last_seq >= self.session.manager.replay_until:
            self.go_live()

    def _load(self, data: bytes | None) -> Any:
        if data is None:
            return None
        return self.session.snapshotter.loads_value(
            data, load_blob=self.session.manager.load_blob_sync, ns={}
        )


def _agent_registry() -> ReducerRegistry:
    """The reducers of the default registry without its external codecs: agent state is
    pickled whole into the records, so a registered external type is pickled there by value
    (its reducer, or pickle's own way), never as a blob the records would have to carry."""
    registry = ReducerRegistry()
    registry.reducers = default_registry.reducers  # the same dict: later registrations count
    return registry


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

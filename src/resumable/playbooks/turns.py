"""One frame's LLM turns: prompt, reply streamed through the reply filter, errors back.

A turn records its prompt, then the raw reply in chunks (batched, and always before
a statement they complete starts running), while the reply filter passes only its
code on to the executor. The filter is deterministic and the turn records its
version, so a resume filters the recorded raw reply again and finds the executed
text, offsets and line numbers exactly as they were; the raw reply, prose and
reasoning included, stays the transcript the model sees in its next prompt.

A reply whose code fails (a SyntaxError, an exception) or that holds no code
is followed by a turn whose observation says so, with the line of the reply and a
short traceback; after ``max_fix_attempts`` such replies in a row the run fails.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

from resumable.config import Config
from resumable.durability.log.run_state import FrameState, TurnState
from resumable.durability.replay.journal import FrameRecorder
from resumable.durability.runs.progress import RunProgress
from resumable.durability.runs.session import RunSession
from resumable.errors import CodeError
from resumable.exec.executor import StreamingPythonExecutor
from resumable.exec.reply_filter import VERSION, ReplyFilter, has_code, reply_filter_for
from resumable.exec.statement import Statement, line_at
from resumable.llm.base import LLMProvider, LLMRequest, RetryNotice
from resumable.playbooks.primitives import FrameData
from resumable.playbooks.program import PlaybookSpec, Program
from resumable.playbooks.prompt import (
    NO_CODE_OBSERVATION,
    error_observation,
    first_prompt,
    from_wire,
    next_prompt,
    quote,
    to_wire,
)

CHUNK_BATCH = 2048
"""Streamed text is recorded at least every this many characters."""


class FrameFailed(BaseException):
    """A frame cannot go on (too many LLM calls, too many failed replies): the run fails."""

    def __init__(self, message: str, frame: str) -> None:
        super().__init__(message)
        self.message = message
        self.frame = frame


@dataclass
class TurnObserver:
    """Records pending reply text before each statement runs, then delegates."""

    session: RunSession
    recorder: FrameRecorder
    frame_id: str
    progress: RunProgress | None
    turn: int = 0
    pending: list[str] = field(default_factory=list)
    pending_chars: int = 0

    def take_pending(self) -> list[tuple[str, str, dict[str, Any]]]:
        """The chunk record for text not yet recorded (none if there is none)."""
        if not self.pending:
            return []
        text = "".join(self.pending)
        self.pending, self.pending_chars = [], 0
        return [("chunk", self.frame_id, {"t": self.turn, "text": text})]

    async def flush(self) -> None:
        for kind, frame, body in self.take_pending():
            await self.session.manager.write(kind, frame, body)

    async def statement_started(self, statement: Statement, index: int) -> None:
        await self.flush()
        await self.recorder.statement_started(statement, index)

    def statement_aborted(self, statement: Statement, index: int) -> None:
        self.recorder.statement_aborted(statement, index)

    async def statement_finished(
        self, statement: Statement, index: int, error: CodeError | None
    ) -> None:
        await self.recorder.statement_finished(statement, index, error)
        if self.progress is not None:
            self.progress.statement_done(self.session.manager.written)


class TurnsHost(Protocol):
    """What the turns read of the runtime that drives the frames (``PlaybookRuntime``)."""

    @property
    def session(self) -> RunSession: ...
    @property
    def config(self) -> Config: ...
    @property
    def program(self) -> Program: ...
    @property
    def provider(self) -> LLMProvider: ...
    @property
    def progress(self) -> RunProgress | None: ...


class FrameTurns:
    """Runs the turns of one frame until its code returns, ends, waits or fails."""

    def __init__(self, runtime: TurnsHost) -> None:
        """The turns of ``runtime``'s frames: its session, program, model and watcher."""
        self.session: RunSession = runtime.session
        self.config: Config = runtime.config
        self.program: Program = runtime.program
        self.provider: LLMProvider = runtime.provider
        self.progress: RunProgress | None = runtime.progress

    async def run(
        self,
        spec: PlaybookSpec,
        frame: FrameState,
        namespace: dict[str, Any],
        recorder: FrameRecorder,
        args: Mapping[str, Any],
    ) -> NoReturn:
        """Returns never: Return(), End() and waiting for input leave by their signals."""
        manager = self.session.manager
        observer = TurnObserver(self.session, recorder, frame.frame_id, self.progress)
        executor = StreamingPythonExecutor(namespace, hook=recorder, observer=observer)
        limits = self.config.runtime
        # A resume runs the frame's recorded turns again from where its namespace is from
        # (the statement in progress, or the start of a replay window), then goes on.
        start: tuple[int, int, int] | None = None
        if frame.current_turn() is not None:
            start = frame.resume_point()
        index = -1 if start is None else start[0]
        fix = 0
        while True:
            data: FrameData = namespace["__frame__"]
            if 0 <= index < len(frame.turns):
                turn = frame.turns[index]
            else:
                if len(frame.turns) >= limits.max_llm_calls:
                    raise FrameFailed(
                        f"playbook {spec.name} (frame {frame.frame_id}) made "
                        f"{limits.max_llm_calls} LLM calls without Return() or End(), so the "
                        "run failed; fix the playbook or raise [runtime] max_llm_calls",
                        frame.frame_id,
                    )
                if not frame.turns:
                    messages = first_prompt(self.program, spec, dict(args))
                else:
                    last = frame.turns[-1]
                    messages = next_prompt(from_wire(last.prompt), last.text, data.observations)
                body = {"t": len(frame.turns), "prompt": to_wire(messages), "rf": VERSION}
                await manager.write("turn", frame.frame_id, body | ({"fix": fix} if fix else {}))
                turn = frame.turns[-1]
            if data.turn != turn.index:
                data.observations = []
                data.turn = turn.index
            recorder.turn = observer.turn = turn.index
            if self.progress is not None:
                self.progress.turn_started(turn.index)
            at = (0, 0) if start is None or start[0] != turn.index else (start[1], start[2])
            failure = await self._run_turn(spec, frame, turn, executor, observer, *at)
            fix = self._judge(spec, frame, turn, data, failure)
            index = turn.index + 1
            start = None

    async def _run_turn(
        self,
        spec: PlaybookSpec,
        frame: FrameState,
        turn: TurnState,
        executor: StreamingPythonExecutor,
        observer: TurnObserver,
        index: int,
        offset: int,
    ) -> dict[str, Any] | None:
        """Feed what was recorded from statement ``index`` (at ``offset``) on, stream the
        rest; the error that stopped the reply, if any."""
        reply = reply_filter_for(turn.reply_filter)
        code = turn.text if reply is None else reply.feed(turn.text)
        if reply is not None and turn.complete:
            code += reply.close()
        executor.start_response(
            filename=f"<{spec.name} response {turn.index + 1}>",
            offset=offset,
            line=line_at(code, offset),
            index=index,
        )
        failure = _turn_failure(frame, turn.index)
        if failure is not None:
            return failure
        if offset < len(code):
            await executor.add_chunk(code[offset:])
        if not turn.complete and not executor.failed:
            await self._stream(spec, frame, turn.index, executor, observer, reply)
        result = await executor.finalize()
        await observer.flush()
        if result.error is None:
            return None
        return {
            "message": result.error.message,
            "traceback": getattr(result.error, "traceback", ""),
            "line": getattr(result.error, "line", 0),
        }

    def _judge(
        self,
        spec: PlaybookSpec,
        frame: FrameState,
        turn: TurnState,
        data: FrameData,
        failure: dict[str, Any] | None,
    ) -> int:
        """Tell the model what went wrong; the count of failed replies in a row so far."""
        reply = turn.text
        if failure is not None:
            data.observations.append(error_observation(failure, reply))
            problem = failure["message"]
        elif turn.reply_filter and not has_code(reply):
            data.observations.append(NO_CODE_OBSERVATION)
            problem = "the reply held no Python code to run"
        else:
            return 0
        allowed = self.config.runtime.max_fix_attempts
        if turn.fix + 1 > allowed:
            raise FrameFailed(
                f"playbook {spec.name} (frame {frame.frame_id}): {turn.fix + 1} replies in a "
                f"row failed ([runtime] max_fix_attempts = {allowed}), so the run failed; "
                f"last problem: {problem}; last reply: {quote(reply)}",
                frame.frame_id,
            )
        return turn.fix + 1

    async def _stream(
        self,
        spec: PlaybookSpec,
        frame: FrameState,
        index: int,
        executor: StreamingPythonExecutor,
        observer: TurnObserver,
        reply: ReplyFilter | None,
    ) -> None:
        turn = frame.turns[index]
        request = LLMRequest(
            tuple(from_wire(turn.prompt)),
            spec.name,
            index + 1,
            frame.frame_id,
            prefix=turn.text,
            on_retry=lambda notice: self._retried(frame.frame_id, index, notice),
        )
        started = time.monotonic()
        progress = self.progress

        def code(text: str, *, last: bool) -> str:
            if reply is None:
                return text
            return reply.feed(text) + reply.close() if last else reply.feed(text)

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
            if progress is not None:
                progress.turn_ended(None if usage is None else usage.completion_tokens)

        # One chunk of look-ahead: the last chunk is known to be the last before the
        # statements it completes run, so the log says "complete" first and a response
        # received whole is never asked to go on after a crash.
        async with contextlib.aclosing(self.provider.stream(request)) as stream:
            chunk = await anext(stream, None)
            while chunk is not None:
                following = await anext(stream, None)
                observer.pending.append(chunk)
                observer.pending_chars += len(chunk)
                if progress is not None:
                    progress.streamed(chunk)
                if following is None:
                    await end_turn()
                    await executor.add_chunk(code(chunk, last=True))
                    return
                if observer.pending_chars >= CHUNK_BATCH:
                    await observer.flush()
                await executor.add_chunk(code(chunk, last=False))
                if executor.failed:
                    break  # the rest of this response will not run: stop paying for it
                chunk = following
        await end_turn()
        if not executor.failed:
            await executor.add_chunk(code("", last=True))

    async def _retried(self, frame_id: str, turn: int, notice: RetryNotice) -> None:
        """Record a retry in the run and tell the people watching."""
        body = {
            "t": turn,
            "n": notice.attempt,
            "delay": round(notice.delay, 3),
            "reason": notice.reason,
            "status": notice.status,
        }
        await self.session.manager.write("retry", frame_id, body)
        if self.progress is not None:
            self.progress.retried(notice.line(), notice.attempt, notice.delay)


def _turn_failure(frame: FrameState, turn: int) -> dict[str, Any] | None:
    """The error that already stopped this turn's response, if one did."""
    for error in frame.errors:
        if error.get("t") == turn:
            return error
    return None

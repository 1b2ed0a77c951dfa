"""Run a plain async Python script durably: ``resumable exec SCRIPT.py``.

The script is one response of one frame (``main``): its source is recorded in the
run's first record, so a resume runs exactly that text, never a file that may have
changed since, and it is fed to the executor in chunks as a stream would be.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from resumable.config import Config
from resumable.durability.effects.written_files import WrittenFiles
from resumable.durability.log.run_state import FrameState, RunState
from resumable.durability.replay.interleaving import replay_order
from resumable.durability.replay.journal import FrameRecorder
from resumable.durability.runs.kinds import register_driver
from resumable.durability.runs.progress import RunProgress
from resumable.durability.runs.session import RunOutcome, RunSession, new_run_id, store_for
from resumable.errors import CodeError, ProgramError
from resumable.exec.depth import room_to_parse, room_to_walk
from resumable.exec.executor import StreamingPythonExecutor, too_deep_line
from resumable.exec.loop_run import loop_run_names, refused_loop_run
from resumable.exec.output import ProgramOutput
from resumable.exec.statement import line_at
from resumable.exec.stream_syntax import TOO_DEEP
from resumable.store.base import RunMeta, RunStatus

CHUNK = 4096


def read_script(path: Path) -> str:
    """The script's text, refused with a clear line if it is missing or does not parse."""
    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProgramError(f"{path}: no such file; check the path", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProgramError(f"{path}: cannot be read ({exc})", path=str(path)) from None
    try:
        with room_to_parse(source):  # as deep as `python` parses a script
            tree = ast.parse(source, str(path))
    except SyntaxError as exc:
        raise ProgramError(
            f"{path}:{exc.lineno}: the script does not parse: {exc.msg}; fix it and run again",
            path=str(path),
            line=exc.lineno,
        ) from None
    except RecursionError:
        line = too_deep_line(source)
        raise ProgramError(
            f"{path}:{line}: {TOO_DEEP}", path=str(path), line=line or None
        ) from None
    global _last_read
    with room_to_walk(source):  # its walk recurses per level
        names = loop_run_names(tree)
        _refuse_loop_start(tree, names, path, source)
    _last_read = (source, names)  # what the run about to start asks for next
    return source


def _refuse_loop_start(tree: ast.Module, names: frozenset[str], path: Path, source: str) -> None:
    """An ``asyncio.run`` call that cannot run as an await of its coroutine is refused."""
    refused = refused_loop_run(tree, names, source)
    if refused is not None:
        line, reason = refused
        raise ProgramError(f"{path}:{line}: {reason}", path=str(path), line=line)


_last_read: tuple[str, frozenset[str]] = ("", frozenset())
"""The script :func:`read_script` read last and its ``asyncio.run`` names: not parsed again."""


def _loop_runs(source: str) -> frozenset[str]:
    """The names the script calls ``asyncio.run`` by (its calls run as awaits)."""
    read, names = _last_read
    if read == source:
        return names
    try:
        with room_to_parse(source):
            return loop_run_names(ast.parse(source))
    except SyntaxError:  # the executor reports it, at its statement
        return frozenset()


async def exec_script(
    path: Path,
    config: Config,
    *,
    env: Mapping[str, str],
    run_id: str | None = None,
    on_start: Callable[[str], None] | None = None,
    watch: RunProgress | None = None,
) -> RunOutcome:
    """Run a script from its start; durably unless ``[durability] enabled = false``.

    ``watch`` is told of each statement the script runs.
    """
    source = read_script(path)
    if not config.durability.enabled:
        executor = StreamingPythonExecutor(
            {"__file__": str(path)}, filename=str(path), loop_runs=_loop_runs(source)
        )
        result = await _feed(executor, source)
        return _outcome("", result.error)
    store = store_for(config.durability, config)
    async with store:
        meta = RunMeta(new_run_id() if run_id is None else run_id, program=str(path), kind="script")
        first = {"program": str(path), "kind": "script", "source": source}
        session = await RunSession.create(store, config, meta, first, env=env)
        if on_start is not None:
            on_start(session.run_id)
        try:
            return await drive_script(session, config, env=env, watch=watch)
        finally:
            await session.close()


async def drive_script(
    session: RunSession,
    config: Config,
    *,
    env: Mapping[str, str],
    watch: RunProgress | None = None,
    **_: Any,
) -> RunOutcome:
    """Run the script from where the session's state stands to its end."""
    state = session.state
    frame = state.frame("main")
    source = state.source
    if state.status in ("completed", "failed", "cancelled"):  # only the meta missed it
        await session.set_status(state.status, state.detail)  # type: ignore[arg-type]
        return _finished(session)
    if frame.errors:  # the script already failed; only its status record was lost
        error = frame.errors[-1]
        await session.set_status("failed", {"error": error["message"]})
        return RunOutcome(session.run_id, "failed", 1, error.get("traceback") or error["message"])
    namespace: dict[str, Any] = {}
    files = WrittenFiles(frame.files, done=state.files)  # appended once across crashes
    with files.installed():  # restored append-mode files are tracked, not cut back
        await session.restore_frame(frame, namespace)
    namespace.setdefault("__file__", state.program)  # as `python SCRIPT` sets it
    # Logs written before records said how much output they cover: replay is muted
    # until it passes the last record, as it was then.
    legacy = session.resumed and not state.output and _replay_pending(frame, state)
    output = ProgramOutput(muted=legacy, hold=True, position=frame.output, printed=state.output)
    recorder = FrameRecorder(
        session.manager,
        "main",
        namespace,
        session.snapshotter,
        replay=frame.replay_journals(),
        order=replay_order([frame]),
        marks=frame.marks,
        task_names=frame.task_names,
        namespace_pickle=frame.ns,
        on_live=output.go_live if legacy else None,
    )
    observer: Any = recorder
    if watch is not None:
        observer = _Progress(recorder, session, watch)
    executor = StreamingPythonExecutor(
        namespace,
        hook=recorder,
        observer=observer,
        filename=state.program,
        loop_runs=_loop_runs(source),
    )
    start, offset = frame.resume_point()[1:]
    executor.start_response(offset=offset, line=line_at(source, offset), index=start)
    if session.meta.status != "running":
        await session.set_status("running")
    with output.installed(), files.installed(), _program_argv(state.program):
        try:
            result = await _feed(executor, source[offset:])
        except SystemExit as exit_:
            return await _exited(session, exit_)
        except asyncio.CancelledError:
            if recorder.exits.exit is None:
                raise
            # A task's sys.exit() left the event loop, which cancels every task on its way
            # out (this one's statement too, as it would the program's under `python`): the
            # run ends with that exit, its output printed, as a script's does.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return await _exited(session, recorder.exits.exit)
    await session.manager.flush()
    outcome = _outcome(session.run_id, result.error)
    detail = {"error": result.error.message} if result.error else {}
    await session.set_status("failed" if result.error else "completed", detail)
    return outcome


@contextlib.contextmanager
def _program_argv(program: str) -> Iterator[None]:
    """``sys.argv`` is ``[SCRIPT]`` while the script runs, as under ``python SCRIPT``."""
    saved = sys.argv
    sys.argv = [program]
    try:
        yield
    finally:
        sys.argv = saved


def _replay_pending(frame: FrameState, state: RunState) -> bool:
    journal = frame.journal
    return bool(journal) and max(e.seq for e in journal.values()) >= state.last_event_seq


async def _feed(executor: StreamingPythonExecutor, text: str) -> Any:
    for start in range(0, len(text), CHUNK):
        await executor.add_chunk(text[start : start + CHUNK])
        if executor.failed:
            break
    return await executor.finalize()


def _outcome(run_id: str, error: CodeError | None) -> RunOutcome:
    if error is None:
        return RunOutcome(run_id, "completed", 0)
    return RunOutcome(run_id, "failed", 1, getattr(error, "traceback", "") or error.message)


async def _exited(session: RunSession, exit_: SystemExit) -> RunOutcome:
    """``sys.exit()`` ends the run as it ends a script: the status record covers what the
    program printed up to it (printed now), and the exit code is the program's."""
    code, message = exit_.code, ""
    if code is None:
        code = 0
    elif not isinstance(code, int):
        code, message = 1, str(code)
    status: RunStatus = "completed" if code == 0 else "failed"
    detail = {} if code == 0 else {"error": f"SystemExit: {exit_.code}", "exit_code": code}
    await session.set_status(status, detail)
    return RunOutcome(session.run_id, status, code, message)


def _finished(session: RunSession) -> RunOutcome:
    status = session.state.status
    code = session.state.detail.get("exit_code") if session.state.detail else None
    if not isinstance(code, int):
        code = 0 if status == "completed" else 1
    return RunOutcome(session.run_id, status, code, "")


class _Progress:
    """Observer wrapper that reports progress after each statement."""

    def __init__(self, inner: FrameRecorder, session: RunSession, watch: RunProgress) -> None:
        self.inner = inner
        self.session = session
        self.watch = watch
        self.count = 0

    async def statement_started(self, statement: Any, index: int) -> None:
        await self.inner.statement_started(statement, index)

    def statement_aborted(self, statement: Any, index: int) -> None:
        self.inner.statement_aborted(statement, index)

    async def statement_finished(self, statement: Any, index: int, error: Any) -> None:
        await self.inner.statement_finished(statement, index, error)
        self.count += 1
        self.watch.statement_done(self.session.manager.written, statements=self.count)


__all__ = ["drive_script", "exec_script", "read_script"]

register_driver("script", drive_script)

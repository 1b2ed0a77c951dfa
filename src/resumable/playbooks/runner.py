"""Start or resume a playbook run: the program, its LLM provider, its session.

The recorded program text is what a resume runs, never the file as it is now.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from resumable.config import Config
from resumable.durability.runs.kinds import register_driver
from resumable.durability.runs.progress import RunProgress
from resumable.durability.runs.session import RunOutcome, RunSession, new_run_id, store_for
from resumable.errors import ProgramError
from resumable.llm.base import LLMProvider
from resumable.playbooks.loading import parse_program
from resumable.playbooks.program import Program
from resumable.playbooks.runtime import PlaybookRuntime
from resumable.store.base import RunMeta


def _absolute(path: Path) -> str:
    """Where the program lives, so a resume from another folder still finds its responses."""
    return os.path.abspath(path)


def first_record(path: Path, program: Program) -> dict[str, Any]:
    """The ``run`` record of a playbook run: the exact program text that will run."""
    return {
        "program": _absolute(path),
        "kind": "playbook",
        "source": program.source,
        "entry": program.entry,
        "out": 1,  # program output is counted across resumes (see RunState.counted_output)
    }


def _interactive(config: Config, no_input: bool) -> bool:
    return not (no_input or config.runtime.no_input) and sys.stdin.isatty()


def _provider(config: Config, program_path: Path, env: Mapping[str, str]) -> LLMProvider:
    from resumable.llm import make_provider

    llm = config.llm
    responses = str(config.resolve_path(llm.responses)) if llm.responses else ""
    return make_provider(
        provider=llm.provider,
        responses=responses or None,
        base_url=llm.base_url,
        model=llm.model,
        api_key_env=llm.api_key_env,
        timeout_seconds=llm.timeout_seconds,
        request_timeout_seconds=llm.request_timeout_seconds,
        turn_timeout_seconds=llm.turn_timeout_seconds,
        max_retries=llm.max_retries,
        max_continuations=llm.max_continuations,
        temperature=llm.temperature,
        chunk_delay_seconds=llm.chunk_delay_seconds,
        seed=llm.seed,
        program_path=program_path,
        env=env,
    )


async def run_program(
    path: Path,
    config: Config,
    *,
    env: Mapping[str, str],
    run_id: str | None = None,
    no_input: bool = False,
    on_start: Any = None,
    watch: RunProgress | None = None,
    plain: bool = False,
) -> RunOutcome:
    """Run a .pb program from its start; ``watch`` is told what it is doing.

    ``plain`` (``enabled = false``): its records go to a folder thrown away after.
    """
    from resumable.playbooks.loading import load_program

    program = load_program(path)
    if not config.durability.enabled:
        return await _run_plainly(path, config, env=env, watch=watch)
    provider = _provider(config, path, env)
    store = store_for(config.durability, config)
    async with store:
        meta = RunMeta(
            new_run_id() if run_id is None else run_id, program=str(path), kind="playbook"
        )
        session = await RunSession.create(store, config, meta, first_record(path, program), env=env)
        if on_start is not None:
            on_start(session.run_id)
        try:
            interactive = plain or _interactive(config, no_input)
            return await _drive(session, config, program, provider, interactive, watch)
        finally:
            await session.close()


async def _run_plainly(
    path: Path, config: Config, *, env: Mapping[str, str], watch: RunProgress | None
) -> RunOutcome:
    """``enabled = false``: the program runs with its records in a folder deleted at the end.

    Nothing is kept, so nothing can be resumed, and a question for a human is asked on
    standard input (a terminal or a pipe): a run cannot wait for `resumable answer`.
    """
    with tempfile.TemporaryDirectory(prefix="resumable-plain-") as folder:
        settings = replace(config.durability, store="file", path=folder, sync="flush")
        plain = replace(config, durability=replace(settings, encrypt=False, enabled=True))
        outcome = await run_program(path, plain, env=env, watch=watch, plain=True)
    if outcome.status == "waiting":
        raise ProgramError(
            f"{path}: the program asks a human ({' '.join(outcome.message.split())}) and "
            "standard input gave no answer; with [durability] enabled = false nothing is kept to answer later, so "
            "pipe the answers in or set enabled = true",
            path=str(path),
        )
    return outcome._replace(run_id="")


async def drive_playbook(
    session: RunSession,
    config: Config,
    *,
    env: Mapping[str, str],
    no_input: bool = False,
    watch: RunProgress | None = None,
    **_: Any,
) -> RunOutcome:
    """Resume a playbook run attached in ``session``: the recorded program text runs."""
    state = session.state
    try:
        if state.status in ("completed", "failed", "cancelled"):  # only the meta missed it
            await session.set_status(state.status, state.detail)  # type: ignore[arg-type]
            return RunOutcome(session.run_id, state.status, 0 if state.status == "completed" else 1)
        path = Path(state.program)
        program = parse_program(state.source, path)
        provider = _provider(config, path, env)
        return await _drive(
            session, config, program, provider, _interactive(config, no_input), watch
        )
    finally:
        await session.close()


async def _drive(
    session: RunSession,
    config: Config,
    program: Program,
    provider: LLMProvider,
    interactive: bool,
    watch: RunProgress | None,
) -> RunOutcome:
    """The agent loop in ``session`` until the run ends or waits; the provider is closed after."""
    try:
        runtime = PlaybookRuntime(
            session, config, program, provider, interactive=interactive, progress=watch
        )
        return await runtime.run()
    finally:
        await provider.aclose()


register_driver("playbook", drive_playbook)

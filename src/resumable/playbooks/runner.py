"""Start or resume a playbook run: the program, its LLM provider, its session.

The recorded program text is what a resume runs, never the file as it is now.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from resumable.config import Config
from resumable.errors import ProgramError
from resumable.llm.base import LLMProvider
from resumable.playbooks.program import parse_program
from resumable.playbooks.runtime import PlaybookRuntime
from resumable.session import RunOutcome, RunSession, new_run_id, store_for
from resumable.store.base import RunMeta


def _absolute(path: Path) -> str:
    """Where the program lives, so a resume from another folder still finds its responses."""
    return os.path.abspath(path)


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
        max_retries=llm.max_retries,
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
) -> RunOutcome:
    """Run a .pb program from its start."""
    from resumable.playbooks.program import load_program

    program = load_program(path)
    provider = _provider(config, path, env)
    if not config.durability.enabled:
        raise ProgramError(
            "[durability] enabled = false is supported by `resumable exec` only; "
            "playbooks always run durably",
            path=str(path),
        )
    store = store_for(config.durability, config)
    async with store:
        meta = RunMeta(run_id or new_run_id(), program=str(path), kind="playbook")
        first = {
            "program": _absolute(path),
            "kind": "playbook",
            "source": program.source,
            "entry": program.entry,
        }
        session = await RunSession.create(store, config, meta, first, env=env)
        if on_start is not None:
            on_start(session.run_id)
        try:
            runtime = PlaybookRuntime(
                session, config, program, provider, interactive=_interactive(config, no_input)
            )
            return await runtime.run()
        finally:
            await provider.aclose()
            await session.close()


async def drive_playbook(
    session: RunSession,
    config: Config,
    *,
    env: Mapping[str, str],
    no_input: bool = False,
    **_: Any,
) -> RunOutcome:
    """Resume a playbook run attached in ``session``: the recorded program text runs."""
    state = session.state
    try:
        if state.status in ("completed", "failed"):  # only the store's meta missed it
            await session.set_status(state.status, state.detail)  # type: ignore[arg-type]
            return RunOutcome(session.run_id, state.status, 0 if state.status == "completed" else 1)
        path = Path(state.program)
        program = parse_program(state.source, path)
        provider = _provider(config, path, env)
        try:
            runtime = PlaybookRuntime(
                session, config, program, provider, interactive=_interactive(config, no_input)
            )
            return await runtime.run()
        finally:
            await provider.aclose()
    finally:
        await session.close()

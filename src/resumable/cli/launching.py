"""``run`` and ``exec``: the start of a new run and its end, as the two share them.

Like :mod:`resumable.cli.runtime`, this loads neither typer nor rich (the status line loads
rich when it is drawn on a terminal): a plain ``exec`` starts with these two modules.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Coroutine, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from resumable.cli.example_files import resolve_program
from resumable.cli.progress import StatusDisplay
from resumable.cli.runtime import _config, _fail, _finish, _run, pin_hash_seed, say, shown_path
from resumable.config import Config
from resumable.durability.runs.progress import RunProgress
from resumable.durability.runs.session import RunOutcome
from resumable.errors import UsageError

_COMMAND_FOR = {".pb": ("run", "a playbook program"), ".py": ("exec", "a Python script")}
"""The command that runs a file of each kind, and what the file is."""


class Launch(Protocol):
    """What `run` and `exec` each start: their driver, from the program's first statement."""

    def __call__(
        self,
        path: Path,
        config: Config,
        *,
        env: Mapping[str, str],
        run_id: str | None,
        on_start: Callable[[str], None],
        watch: RunProgress,
    ) -> Coroutine[Any, Any, RunOutcome]: ...


def exec_program(
    script: Path,
    run_id: str | None = None,
    quiet: bool = False,
    events: str | None = None,
    json_out: bool = False,
    config_path: Path | None = None,
) -> None:
    """``resumable exec``: run a Python script durably (the command's options, by name)."""
    from resumable.script import exec_script

    start(script, ".py", exec_script, run_id, config_path, quiet, events, json_out)


def run_playbook(
    program: Path,
    run_id: str | None = None,
    no_input: bool = False,
    quiet: bool = False,
    events: str | None = None,
    json_out: bool = False,
    config_path: Path | None = None,
) -> None:
    """``resumable run``: run a playbook program durably (the command's options, by name)."""
    from resumable.playbooks.runner import run_program

    launch = partial(run_program, no_input=no_input)  # and the keywords `exec` gives its driver
    start(program, ".pb", launch, run_id, config_path, quiet, events, json_out)


def start(
    program: Path,
    suffix: str,
    launch: Launch,
    run_id: str | None,
    config_path: Path | None,
    quiet: bool,
    events: str | None,
    json_out: bool,
) -> None:
    """The start-up `run` and `exec` share, around the driver ``launch``.

    The program must have the command's ``suffix``; the hash seed is pinned before
    anything else (the process may start again with it); the run's id is announced on
    stderr before the status display takes it over.
    """
    if run_id is not None:  # an empty --run-id (an unset variable) is an error, not "new id"
        from resumable.store.common import check_run_id

        try:
            check_run_id(run_id)
        except UsageError as error:
            _fail(error)
    try:
        program = resolve_program(program)
    except OSError as exc:  # a name longer than the file system allows (ENAMETOOLONG)
        _fail(UsageError(f"cannot open the program {shown_path(program)}: {exc.strerror or exc}"))
    _check_suffix(program, suffix)
    config = _config(config_path)
    pin_hash_seed(config)
    status = status_display(config, quiet, events)

    def started(run: str) -> None:
        say(f"run: {run}")
        status.started(run)

    def go() -> Coroutine[Any, Any, RunOutcome]:
        return launch(
            program, config, env=os.environ, run_id=run_id, on_start=started, watch=status.progress
        )

    _finish(watched(status, go), json_out=json_out)


def _check_suffix(path: Path, wanted: str) -> None:
    """`run` takes .pb programs and `exec` .py scripts: point at the other command."""
    if path.suffix != wanted and path.suffix in _COMMAND_FOR:
        other, what = _COMMAND_FOR[path.suffix]
        _fail(
            UsageError(f"{path} is {what}: run it with `resumable {other} {path}`", path=str(path))
        )


def status_display(config: Config, quiet: bool, events: str | None) -> StatusDisplay:
    try:
        return StatusDisplay.choose(config, quiet=quiet, events=events)
    except UsageError as error:
        _fail(error)


def watched(status: StatusDisplay, go: Callable[[], Coroutine[Any, Any, RunOutcome]]) -> RunOutcome:
    """Run ``go`` with the status display up; its summary line once the run stops."""
    with status.installed():
        outcome = _run(go)
    status.finish(outcome.status)
    return outcome

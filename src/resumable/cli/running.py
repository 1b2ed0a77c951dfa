"""Start, continue and answer runs: ``run``, ``exec``, ``resume``, ``answer``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from resumable.cli.app import (
    ConfigOption,
    EventsOption,
    JsonOption,
    QuietOption,
    _records,
    app,
    err,
)
from resumable.cli.launching import exec_program, run_playbook
from resumable.cli.resuming import resume_run
from resumable.cli.runtime import _config, _run


@app.command("run")
def run_command(
    program: Annotated[Path, typer.Argument(help="A .pb playbook program, or an example's name.")],
    run_id: Annotated[str | None, typer.Option("--run-id", help="Id for the new run.")] = None,
    no_input: Annotated[
        bool, typer.Option("--no-input", help="Never ask on the terminal: wait (exit 3) instead.")
    ] = False,
    quiet: QuietOption = False,
    events: EventsOption = None,
    json_out: JsonOption = False,
    config_path: ConfigOption = None,
) -> None:
    """Run a playbook program durably; the first line on stderr is `run: RUN_ID`.

    Example: resumable run examples/scenario/main.pb --no-input --json
    """
    run_playbook(program, run_id, no_input, quiet, events, json_out, config_path)


@app.command("exec")
def exec_command(
    script: Annotated[
        Path, typer.Argument(help="An async Python script to run durably, or an example's name.")
    ],
    run_id: Annotated[str | None, typer.Option("--run-id", help="Id for the new run.")] = None,
    quiet: QuietOption = False,
    events: EventsOption = None,
    json_out: JsonOption = False,
    config_path: ConfigOption = None,
) -> None:
    """Run a Python script durably, statement by statement; stderr starts with `run: RUN_ID`.

    Example: resumable exec examples/ledger.py --run-id ledger-1
    """
    exec_program(script, run_id, quiet, events, json_out, config_path)


@app.command("resume")
def resume_command(
    run_id: Annotated[str | None, typer.Argument(help="The run to continue.")] = None,
    latest: Annotated[
        bool,
        typer.Option("--latest", help="Resume the newest crashed, interrupted or waiting run."),
    ] = False,
    no_input: Annotated[
        bool, typer.Option("--no-input", help="Never ask on the terminal.")
    ] = False,
    accept_loss: Annotated[
        bool,
        typer.Option(
            "--accept-loss",
            help="Continue although records at the end of the log are missing from the store "
            "(their completed effects may run again).",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Try once more a run that gave up: [durability] max_attempts attempts in a "
            "row died without writing a new record.",
        ),
    ] = False,
    quiet: QuietOption = False,
    events: EventsOption = None,
    config_path: ConfigOption = None,
) -> None:
    """Continue a crashed, interrupted or waiting run from its last checkpoint.

    A run gives up (ends failed) only when [durability] max_attempts attempts in a row died
    without writing a record past the one they started from; an attempt that got further
    starts the count again, so a run killed again and again as it moves on always finishes.

    Example: resumable resume --latest
    """
    resume_run(run_id, latest, no_input, accept_loss, force, quiet, events, config_path)


@app.command("answer")
def answer_command(
    run_id: Annotated[str, typer.Argument(help="A run that is waiting for input.")],
    text: Annotated[str, typer.Argument(help="The answer.")],
    config_path: ConfigOption = None,
) -> None:
    """Answer the question a waiting run asked; then `resumable resume RUN_ID`.

    Example: resumable answer 20260501-120000-ab12cd "yes"
    """
    from resumable.durability.runs.stored import answer_run
    from resumable.playbooks.primitives import answer_problem

    config = _config(config_path)

    async def go() -> str:
        async with _records(config) as (store, codec):
            return await answer_run(store, codec, run_id, text, check=answer_problem)

    question = _run(go)
    err.print(
        f"resumable: answered {question!r}; continue with `resumable resume {run_id}`", markup=False
    )

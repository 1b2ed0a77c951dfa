"""Operate runs: ``cancel`` one, list the ``steps`` one took."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from resumable.cli.app import ConfigOption, JsonOption, _records, _since, app, err
from resumable.cli.runtime import _config, _run
from resumable.durability.runs.history import StepEntry
from resumable.durability.runs.progress import plural


@app.command("cancel")
def cancel_command(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to cancel.")],
    reason: Annotated[
        str, typer.Option("--reason", help="Why; recorded in the run and shown by `show`.")
    ] = "",
    config_path: ConfigOption = None,
) -> None:
    """Cancel a run for good: a running one stops at its next await, a waiting or crashed one now.

    Example: resumable cancel 20260501-120000-ab12cd --reason "wrong customer"
    """
    from resumable.durability.runs.control import cancel_run
    from resumable.durability.runs.owners import owner_name

    config = _config(config_path)

    async def go() -> str:
        async with _records(config) as (store, codec):
            return await cancel_run(store, codec, run_id, reason, owner=owner_name())

    done = _run(go)
    why = f": {reason}" if reason else ""
    if done == "cancelled":
        err.print(f"resumable: run {run_id} cancelled{why}", markup=False)
    else:
        err.print(
            f"resumable: asked run {run_id} to cancel{why}; the process driving it stops at its "
            "next await and marks it cancelled (see `resumable runs`)",
            markup=False,
        )


@app.command("steps")
def steps_command(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to list.")],
    frame: Annotated[
        list[str] | None,
        typer.Option("--frame", help="Only this frame, e.g. main or main/1.1.0 (repeatable)."),
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind", help="Only this record kind: stmt, await, turn, ask, ... (repeatable)."
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only records since: a duration (10m, 2h) or an ISO time."),
    ] = None,
    json_out: JsonOption = False,
    config_path: ConfigOption = None,
) -> None:
    """The run's history: one line per statement, await, LLM call, question and answer.

    Each line has the record's number, time, how long it took (since the frame's
    previous record), frame, kind, key, site and a short value.

    Example: resumable steps 20260501-120000-ab12cd --kind await --since 1h
    """
    from resumable.durability.runs.history import format_entries, run_steps

    config = _config(config_path)
    since_time = _since(since)

    async def go() -> tuple[list[StepEntry], list[str], int]:
        async with _records(config, read_only=True) as (store, codec):
            return await run_steps(store, codec, run_id, frames=frame, kinds=kind, since=since_time)

    entries, problems, folded = _run(go)
    for problem in problems:
        err.print(f"resumable: warning: {problem}", markup=False)
    if folded:
        err.print(
            f"resumable: {plural(folded, 'chunk record')} of streamed LLM text not listed (the "
            "record numbers skip them; their text is in the LLM call's entry): --kind chunk "
            "lists them",
            markup=False,
        )
    if json_out:
        print(json.dumps([e.to_json() for e in entries], indent=2))
        return
    for line in format_entries(entries):
        print(line)

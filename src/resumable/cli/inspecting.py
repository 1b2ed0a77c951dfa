"""Look at and tidy runs: ``runs``, ``show``, ``fork``, ``gc``."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from resumable.cli.app import ConfigOption, JsonOption, _records, _since, app, err
from resumable.cli.runtime import _config, _fail, _run
from resumable.cli.story import story
from resumable.durability.effects.call_sites import describe_call
from resumable.durability.runs.progress import plural
from resumable.durability.runs.session import codec_for, store_for
from resumable.errors import ConfigError, RunNotFoundError, UsageError
from resumable.store import to_read
from resumable.store.base import CheckpointStore
from resumable.store.common import check_run_id

if TYPE_CHECKING:
    from resumable.durability.runs.garbage import GarbageReport


def where_in_code(statement: int, status: str) -> str:
    """Statements count from 0, as the keys ``FRAME/RESPONSE.STATEMENT`` of ``steps`` do."""
    if status == "completed":
        return f"all {plural(statement, 'statement')} done"
    return f"statement {statement}"


async def _newest(store: CheckpointStore) -> str:
    runs = await store.list_runs()
    if not runs:
        raise RunNotFoundError("there are no runs in this store yet; see `resumable runs`")
    return max(runs, key=lambda s: (s.meta.created_at, s.meta.run_id)).meta.run_id


@app.command("runs")
def runs_command(
    status: Annotated[
        list[str] | None,
        typer.Option(
            "--status",
            help="Only runs in this status: running, crashed, interrupted, waiting, pending, "
            "completed, failed, cancelled, unfinished (a fork not written whole, a run killed "
            "before its first record) (repeatable).",
        ),
    ] = None,
    program: Annotated[
        str | None, typer.Option("--program", help="Only runs whose program path contains this.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only runs created since: a duration (10m, 2h) or ISO time."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="At most this many runs.")
    ] = None,
    sort: Annotated[
        str,
        typer.Option("--sort", help="created, updated (newest first), records, status or program."),
    ] = "created",
    json_out: JsonOption = False,
    config_path: ConfigOption = None,
) -> None:
    """List runs: id, program, status, records, last checkpoint.

    Example: resumable runs --status crashed --status waiting --since 1d --limit 20
    """
    from resumable.durability.runs.stored import list_runs

    config = _config(config_path)
    since_time = _since(since)

    async def go() -> list[Any]:
        async with to_read(store_for(config.durability, config)) as store:
            return await list_runs(
                store,
                statuses=status or (),
                program=program,
                since=since_time,
                limit=limit,
                sort=sort,
            )

    rows = _run(go)
    if json_out:
        print(json.dumps([r.to_json() for r in rows], indent=2))
        return
    from rich.table import Table

    table = Table(box=None)
    for column in ("RUN", "PROGRAM", "STATUS", "RECORDS", "LAST CHECKPOINT"):
        table.add_column(column)
    for row in rows:
        when = (
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row.last_checkpoint))
            if row.last_checkpoint
            else "-"
        )
        table.add_row(row.run_id, row.program, row.status, str(row.records), when)
        if row.problem:
            err.print(f"resumable: warning: {row.problem}", markup=False)
    # piped: full ids and paths on one line each, not cut to 80 columns
    Console(highlight=False, width=None if sys.stdout.isatty() else 1000).print(table)


@app.command("show")
def show_command(
    run_id: Annotated[
        str | None, typer.Argument(metavar="[RUN_ID]", help="The run to show.")
    ] = None,
    latest: Annotated[bool, typer.Option("--latest", help="Show the newest run.")] = False,
    at: Annotated[int | None, typer.Option("--at", help="Show the run as of record N.")] = None,
    json_out: JsonOption = False,
    config_path: ConfigOption = None,
) -> None:
    """Show a run: what it waits for or died of, its call stack, variables and code.

    A run tried more than once shows its attempts and how many in a row died without
    progress (no record past the one they started from): [durability] max_attempts limits
    those, not the attempts.

    Example: resumable show --latest --json
    """
    from resumable.durability.runs.stored import RunView, show_run

    config = _config(config_path)
    if (run_id is None) == (not latest):
        _fail(UsageError("give a RUN_ID or --latest (not both); list runs with `resumable runs`"))

    async def go() -> RunView:
        async with _records(config, read_only=True) as (store, codec):
            target = await _newest(store) if run_id is None else run_id
            check_run_id(target)  # an empty id (an unset variable) is an error, never --latest
            return await show_run(store, codec, target, at=at)

    view = _run(go)
    for problem in view.problems:
        err.print(f"resumable: warning: {problem}", markup=False)
    if json_out:
        print(json.dumps(view.to_json(), indent=2, default=str))
        return
    out = Console(highlight=False, soft_wrap=True)
    out.print(
        f"[bold]run[/] {view.run_id}  [bold]program[/] {view.program}  "
        f"[bold]status[/] {view.status}  [bold]record[/] {view.seq}"
    )
    for line in story(view):
        out.print(line, markup=False)
    out.print("[bold]call stack[/] (innermost last)")
    for depth, frame in enumerate(view.frames):
        label = frame.playbook or "script"
        step = f" at step {frame.step}" if frame.step else ""
        response = f", response {frame.turn + 1}" if view.kind != "script" else ""
        out.print(
            f"  {'  ' * depth}{frame.frame_id}: {label}{step}{response}, "
            f"{where_in_code(frame.statement, view.status)}",
            markup=False,
        )
    for frame in view.frames:
        out.print(f"\n[bold]frame {frame.frame_id}[/]")
        if frame.variables or frame.lost:
            out.print("  variables:")
            for name, value in frame.variables.items():
                out.print(f"    {name} = {value}", markup=False)
            for name, reason in frame.lost.items():
                out.print(f"    {name} = <lost: {reason}>", markup=False)
        if frame.completed_awaits:
            out.print("  completed calls of the statement in progress:", markup=False)
            for site in frame.completed_awaits:
                out.print(f"    {describe_call(site)}", markup=False)
        out.print("  executed:", markup=False)
        for line in frame.executed.splitlines():
            out.print(f"    {line}", markup=False)
        if view.status != "completed":
            out.print(f"  ──▶ stopped here (line {frame.marker_line})", markup=False)
            if frame.remaining.strip():
                out.print("  remaining:", markup=False)
                for line in frame.remaining.splitlines():
                    out.print(f"    {line}", markup=False)
            else:
                out.print("  remaining: none", markup=False)
        for call in frame.llm_calls:
            state = "complete" if call["complete"] else "not complete"
            usage = call["usage"]
            tokens = f", {usage[0]}+{usage[1]} tokens" if usage else ""
            took = f", {call['ms']} ms" if call["ms"] is not None else ""
            retried = f", {call['retries']} retries" if call.get("retries") else ""
            out.print(
                f"  llm call {call['turn'] + 1}: {call['chars']} chars, {state}{tokens}{took}"
                f"{retried}",
                markup=False,
            )


@app.command("fork")
def fork_command(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to copy.")],
    at: Annotated[int, typer.Option("--at", help="Copy the run up to record N (see `steps`).")],
    assignments: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="NAME=PYTHON_LITERAL",
            help="Bind a variable of the frame to a Python literal (repeatable).",
        ),
    ] = None,
    edit_code: Annotated[
        Path | None,
        typer.Option("--edit-code", help="Run this code instead of what the frame had left."),
    ] = None,
    frame: Annotated[
        str | None,
        typer.Option("--frame", help="The frame to edit (default: the innermost running one)."),
    ] = None,
    config_path: ConfigOption = None,
) -> None:
    """Start a new run from record N of an existing one, optionally with edits; prints its id.

    With --set or --edit-code, record N must end a statement (see `resumable steps`).
    The parent run is not changed; `show` of the fork names it.

    Example: resumable fork RUN_ID --at 12 --set limit=10 --edit-code rest.py
    """
    from resumable.durability.runs.fork import ForkEdits, fork_run, parse_assignment, read_code

    config = _config(config_path)
    try:
        values = dict(parse_assignment(text) for text in assignments or ())
        code = read_code(edit_code) if edit_code is not None else None
    except UsageError as error:
        _fail(error)
    edits = ForkEdits(values, code, str(edit_code) if edit_code is not None else None, frame=frame)

    async def go() -> str:
        async with _records(config) as (store, codec):
            return await fork_run(store, codec, run_id, at=at, edits=edits)

    fork_id = _run(go)
    print(fork_id)
    err.print(
        f"resumable: forked {run_id} at record {at}; continue with `resumable resume {fork_id}`",
        markup=False,
    )


@app.command("gc")
def gc_command(
    older_than_days: Annotated[
        float, typer.Option("--older-than-days", help="Delete finished runs older than this.")
    ] = 7.0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be deleted.")] = False,
    json_out: JsonOption = False,
    config_path: ConfigOption = None,
) -> None:
    """Delete finished runs (completed, failed, cancelled) and prune old snapshots of the others.

    Runs listed unfinished (a fork `fork` did not finish writing, a run killed before its
    first record) are deleted too, whatever their age. Every file, row or key of a deleted run goes; the runs kept lose the blobs that no
    record or snapshot still stored refers to (a run whose log does not verify keeps
    all of its blobs); a SQLite file is compacted (VACUUM).

    Example: resumable gc --older-than-days 30 --dry-run
    """
    from resumable.durability.runs.garbage import collect_garbage

    config = _config(config_path)

    async def go() -> GarbageReport:
        async with store_for(config.durability, config) as store:
            try:
                codec = await codec_for(store, config.durability, os.environ)
            except ConfigError as error:  # runs and snapshots still go; blobs are not swept
                codec, why = None, error.message
            report = await collect_garbage(
                store,
                older_than_days=older_than_days,
                keep=config.durability.keep,
                dry_run=dry_run,
                codec=codec,
            )
            return report if codec is not None else replace(report, sweep_skipped=why)

    report = _run(go)
    if json_out:
        print(json.dumps(report.to_json()))
        return
    err.print(_gc_summary(report, dry_run), markup=False)
    if report.sweep_skipped is not None:
        err.print(f"resumable: no blob was swept: {report.sweep_skipped}", markup=False)
    for run_id, why in report.unswept.items():
        err.print(f"resumable: run {run_id}: {why}", markup=False)


def _gc_summary(report: GarbageReport, dry_run: bool) -> str:
    verb, sweep = ("would delete", "would sweep") if dry_run else ("deleted", "swept")
    reclaimed = ""
    if report.reclaimed_bytes is not None:
        reclaimed = f", the store file shrank by {report.reclaimed_bytes / 2**20:.1f} MB"
    return (
        f"resumable: {verb} {plural(len(report.deleted_runs), 'finished run')}, pruned "
        f"{plural(report.pruned_records, 'record')}, {sweep} "
        f"{plural(report.swept_blobs, 'superseded blob')} "
        f"({report.swept_bytes / 2**20:.1f} MB){reclaimed}"
    )

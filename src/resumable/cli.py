"""The ``resumable`` command: parses arguments and calls library functions.

stdout carries only what the program prints (or ``--json``); everything the runtime
says goes to stderr. Exit codes: 0 done, 1 program error, 2 usage/config error,
3 waiting for human input.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn, TextIO, TypeVar

import typer
from rich.console import Console

from resumable.config import Config, load_config
from resumable.errors import ResumableError, UsageError
from resumable.records import RecordCodec
from resumable.session import RunOutcome, codec_for, store_for
from resumable.store.base import CheckpointStore

T = TypeVar("T")

app = typer.Typer(
    name="resumable",
    help="Durable execution for LLM-written Python: a checkpoint at every await.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, highlight=False, soft_wrap=True)

ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="playbooks.toml to use (default: ./playbooks.toml)")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def main() -> None:
    """Console-script entry point."""
    _route_warnings()
    app()


def _route_warnings() -> None:
    real_stderr = sys.stderr

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        print(f"resumable: warning: {message}", file=real_stderr, flush=True)

    warnings.showwarning = show


def _fail(error: ResumableError) -> NoReturn:
    err.print(f"resumable: error: {error.message}", markup=False)
    raise typer.Exit(error.exit_code)


def _run(coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    try:
        return asyncio.run(coro_fn())
    except ResumableError as error:
        _fail(error)
    except KeyboardInterrupt:
        err.print("resumable: interrupted; resume with `resumable resume --latest`")
        raise typer.Exit(130) from None


def _config(path: Path | None) -> Config:
    try:
        return load_config(path, env=os.environ)
    except ResumableError as error:
        _fail(error)


@asynccontextmanager
async def _records(config: Config) -> AsyncIterator[tuple[CheckpointStore, RecordCodec]]:
    """The configured store, open, with the codec that reads and seals its records."""
    async with store_for(config.durability, config) as store:
        yield store, await codec_for(store, config.durability, os.environ)


def _finish(outcome: RunOutcome) -> NoReturn:
    if outcome.exit_code == 1 and outcome.message:
        sys.stderr.write(
            outcome.message if outcome.message.endswith("\n") else outcome.message + "\n"
        )
    if outcome.run_id:
        note = {
            "completed": "completed",
            "failed": "failed",
            "waiting": "is waiting for input; answer with `resumable answer "
            f"{outcome.run_id} TEXT`, then `resumable resume {outcome.run_id}`",
        }.get(outcome.status, outcome.status)
        err.print(f"resumable: run {outcome.run_id} {note}", markup=False)
    raise typer.Exit(outcome.exit_code)


class _ProgressLine:
    """A live line on a terminal: statements run, checkpoints written."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.run_id = ""
        self._last = 0.0

    def started(self, run_id: str) -> None:
        self.run_id = run_id
        err.print(f"resumable: run {run_id}", markup=False)

    def update(self, statements: int, records: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1:
            return
        self._last = now
        sys.__stderr__.write(
            f"\r\x1b[2K{self.run_id}: {statements} statements, {records} checkpoints"
        ) if sys.__stderr__ else None

    def done(self) -> None:
        if self.enabled and self._last and sys.__stderr__:
            sys.__stderr__.write("\r\x1b[2K")


def _progress(config: Config) -> _ProgressLine:
    mode = config.runtime.progress
    enabled = mode == "on" or (mode == "auto" and sys.stderr.isatty())
    return _ProgressLine(enabled)


@app.command("exec")
def exec_command(
    script: Annotated[Path, typer.Argument(help="An async Python script to run durably.")],
    run_id: Annotated[str | None, typer.Option("--run-id", help="Id for the new run.")] = None,
    config_path: ConfigOption = None,
) -> None:
    """Run a Python script durably, streamed statement by statement."""
    from resumable.script import exec_script

    config = _config(config_path)
    line = _progress(config)

    async def go() -> RunOutcome:
        return await exec_script(
            script,
            config,
            env=os.environ,
            run_id=run_id,
            progress=line.update,
            on_start=line.started,
        )

    outcome = _run(go)
    line.done()
    _finish(outcome)


@app.command("resume")
def resume_command(
    run_id: Annotated[str | None, typer.Argument(help="The run to continue.")] = None,
    latest: Annotated[
        bool, typer.Option("--latest", help="Resume the newest crashed or waiting run.")
    ] = False,
    no_input: Annotated[
        bool, typer.Option("--no-input", help="Never ask on the terminal.")
    ] = False,
    config_path: ConfigOption = None,
) -> None:
    """Continue a run from its last checkpoint."""
    from resumable.recovery import RecoveryCoordinator
    from resumable.runs import latest_resumable

    config = _config(config_path)
    if (run_id is None) == (not latest):
        _fail(UsageError("give a RUN_ID or --latest (not both); list runs with `resumable runs`"))

    async def go() -> RunOutcome:
        store = store_for(config.durability, config)
        async with store:
            target = run_id or await latest_resumable(store)
            codec = await codec_for(store, config.durability, os.environ)
            coordinator = RecoveryCoordinator(store, codec)
            loaded_meta = await store.get_meta(target)
            if loaded_meta.status in ("completed", "failed"):
                raise UsageError(
                    f"run {target} already {loaded_meta.status}; nothing to resume "
                    f"(fork it with `resumable fork {target} --at N` to run part of it again)",
                    run_id=target,
                )
            err.print(f"resumable: resuming run {target}", markup=False)
            return await coordinator.resume(target, config, env=os.environ, no_input=no_input)

    _finish(_run(go))


@app.command("runs")
def runs_command(json_out: JsonOption = False, config_path: ConfigOption = None) -> None:
    """List runs: id, program, status, records, last checkpoint."""
    from resumable.runs import list_runs

    config = _config(config_path)

    async def go() -> list[Any]:
        async with store_for(config.durability, config) as store:
            return await list_runs(store)

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
    # piped: full ids and paths on one line each, not cut to 80 columns
    Console(highlight=False, width=None if sys.stdout.isatty() else 1000).print(table)


@app.command("show")
def show_command(
    run_id: Annotated[str, typer.Argument(help="The run to show.")],
    at: Annotated[int | None, typer.Option("--at", help="Show the run as of record N.")] = None,
    json_out: JsonOption = False,
    config_path: ConfigOption = None,
) -> None:
    """Show a run: call stack, variables, executed code with a marker, remaining code."""
    from resumable.runs import RunView, show_run

    config = _config(config_path)

    async def go() -> RunView:
        async with _records(config) as (store, codec):
            return await show_run(store, codec, run_id, at=at)

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
    out.print("[bold]call stack[/] (innermost last)")
    for depth, frame in enumerate(view.frames):
        label = frame.playbook or "script"
        step = f" at step {frame.step}" if frame.step else ""
        out.print(
            f"  {'  ' * depth}{frame.frame_id}: {label}{step}, response {frame.turn + 1}, "
            f"statement {frame.statement}",
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
        if frame.in_flight:
            out.print(
                f"  completed awaits of the statement in progress: {', '.join(frame.in_flight)}",
                markup=False,
            )
        out.print("  executed:", markup=False)
        for line in frame.executed.splitlines():
            out.print(f"    {line}", markup=False)
        out.print(f"  ──▶ stopped here (line {frame.marker_line})", markup=False)
        out.print("  remaining:", markup=False)
        for line in frame.remaining.splitlines():
            out.print(f"    {line}", markup=False)
        for call in frame.llm_calls:
            state = "complete" if call["complete"] else "not complete"
            usage = call["usage"]
            tokens = f", {usage[0]}+{usage[1]} tokens" if usage else ""
            took = f", {call['ms']} ms" if call["ms"] is not None else ""
            out.print(
                f"  llm call {call['turn'] + 1}: {call['chars']} chars, {state}{tokens}{took}",
                markup=False,
            )


@app.command("fork")
def fork_command(
    run_id: Annotated[str, typer.Argument(help="The run to copy.")],
    at: Annotated[int, typer.Option("--at", help="Copy records 1..N.")],
    config_path: ConfigOption = None,
) -> None:
    """Start a new run from record N of an existing one."""
    from resumable.runs import fork_run

    config = _config(config_path)

    async def go() -> str:
        async with _records(config) as (store, codec):
            return await fork_run(store, codec, run_id, at=at)

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
    """Delete finished runs and prune old snapshots of the others."""
    from resumable.runs import GarbageReport, collect_garbage

    config = _config(config_path)

    async def go() -> GarbageReport:
        async with store_for(config.durability, config) as store:
            return await collect_garbage(
                store, older_than_days=older_than_days, keep=config.durability.keep, dry_run=dry_run
            )

    report = _run(go)
    if json_out:
        print(json.dumps(report.to_json()))
        return
    verb = "would delete" if dry_run else "deleted"
    err.print(
        f"resumable: {verb} {len(report.deleted_runs)} finished runs, pruned "
        f"{report.pruned_records} records",
        markup=False,
    )


@app.command("run")
def run_command(
    program: Annotated[Path, typer.Argument(help="A .pb playbook program.")],
    run_id: Annotated[str | None, typer.Option("--run-id", help="Id for the new run.")] = None,
    no_input: Annotated[
        bool, typer.Option("--no-input", help="Never ask on the terminal: wait (exit 3) instead.")
    ] = False,
    config_path: ConfigOption = None,
) -> None:
    """Run a playbook program durably."""
    from resumable.playbooks.runner import run_program

    config = _config(config_path)
    line = _progress(config)

    async def go() -> RunOutcome:
        return await run_program(
            program,
            config,
            env=os.environ,
            run_id=run_id,
            no_input=no_input,
            on_start=line.started,
        )

    _finish(_run(go))


@app.command("answer")
def answer_command(
    run_id: Annotated[str, typer.Argument(help="A run that is waiting for input.")],
    text: Annotated[str, typer.Argument(help="The answer.")],
    config_path: ConfigOption = None,
) -> None:
    """Answer the question a waiting run asked; then `resumable resume RUN_ID`."""
    from resumable.runs import answer_run

    config = _config(config_path)

    async def go() -> str:
        async with _records(config) as (store, codec):
            return await answer_run(store, codec, run_id, text)

    question = _run(go)
    err.print(
        f"resumable: answered {question!r}; continue with `resumable resume {run_id}`", markup=False
    )


@app.command("init")
def init_command(
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    path: Annotated[Path, typer.Option("--path", help="Where to write it.")] = Path(
        "playbooks.toml"
    ),
) -> None:
    """Write a commented playbooks.toml with every setting and its default."""
    from resumable.config import render_example

    if path.exists() and not force:
        _fail(UsageError(f"{path} already exists; pass --force to overwrite it"))
    from resumable.crypto import generate_key

    path.write_text(render_example(), encoding="utf-8")
    err.print(f"resumable: wrote {path}", markup=False)
    err.print(
        "resumable: to encrypt checkpoints at rest, set encrypt = true and keep this key "
        f"secret: export RESUMABLE_ENCRYPTION_KEY={generate_key()}",
        markup=False,
    )


@app.command("worker")
def worker_command(
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Runs driven at once by this worker.")
    ] = 4,
    poll: Annotated[
        float, typer.Option("--poll", min=0.01, help="Seconds between looks for work when idle.")
    ] = 0.25,
    config_path: ConfigOption = None,
) -> None:
    """Claim and drive queued and orphaned runs from PostgreSQL until SIGTERM."""
    from resumable.fleet import serve

    config = _config(config_path)
    _run(lambda: serve(config, env=os.environ, concurrency=concurrency, poll_seconds=poll))


@app.command("submit")
def submit_command(
    program: Annotated[Path, typer.Argument(help="A .py script or a .pb program.")],
    run_id: Annotated[str | None, typer.Option("--run-id", help="Id for the new run.")] = None,
    config_path: ConfigOption = None,
) -> None:
    """Queue a run for the workers; print its id."""
    from resumable.fleet import submit

    config = _config(config_path)
    new_id = _run(lambda: submit(program, config, env=os.environ, run_id=run_id))
    print(new_id)
    err.print(f"resumable: queued run {new_id} for the workers", markup=False)


@app.command("migrate")
def migrate_command(
    source: Annotated[str, typer.Option("--from", help="Store URL or folder to copy from.")],
    target: Annotated[str, typer.Option("--to", help="Store URL or folder to copy into.")],
    runs: Annotated[
        list[str] | None, typer.Option("--run", help="Copy only this run (repeatable).")
    ] = None,
    json_out: JsonOption = False,
    config_path: ConfigOption = None,
) -> None:
    """Copy runs between stores, verified record by record (e.g. a folder into PostgreSQL)."""
    from resumable.migrate import MigrationReport, migrate, parse_store_url
    from resumable.store import open_store

    config = _config(config_path)
    settings = config.durability

    def progress(run_id: str, copied: int, total: int) -> None:
        err.print(f"resumable: {run_id}: {copied}/{total} records copied", markup=False)

    async def go() -> MigrationReport:
        from_kind, from_options = parse_store_url(source)
        to_kind, to_options = parse_store_url(target)
        async with (
            open_store(from_kind, sync=settings.sync, **from_options) as src,
            open_store(to_kind, sync=settings.sync, **to_options) as dst,
        ):
            return await migrate(
                src,
                dst,
                source_codec=await codec_for(src, settings, os.environ),
                target_codec=await codec_for(dst, settings, os.environ),
                run_ids=runs or None,
                progress=progress,
            )

    report = _run(go)
    if json_out:
        print(
            json.dumps(
                {
                    "runs": report.runs,
                    "records": report.records,
                    "blobs": report.blobs,
                    "snapshots": report.snapshots,
                    "skipped": [{"run_id": r, "reason": why} for r, why in report.skipped],
                    "problems": report.problems,
                }
            )
        )
    for problem in report.problems:
        err.print(f"resumable: warning: {problem}", markup=False)
    for run_id, why in report.skipped:
        err.print(f"resumable: skipped {run_id}: {why}", markup=False)
    err.print(
        f"resumable: copied {len(report.runs)} runs ({report.records} records, "
        f"{report.blobs} blobs, {report.snapshots} snapshots), skipped {len(report.skipped)}",
        markup=False,
    )

"""Many machines: ``worker``, ``submit``, ``migrate``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from resumable.cli.app import ConfigOption, JsonOption, app, err
from resumable.cli.runtime import _config, _fail, _run, pin_store_seed
from resumable.durability.runs.progress import plural
from resumable.durability.runs.session import codec_for, store_for
from resumable.errors import ResumableError


@app.command("worker")
def worker_command(
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Runs driven at once by this worker.")
    ] = 4,
    poll: Annotated[
        float,
        typer.Option(
            "--poll",
            min=0.01,
            help="Seconds between looks for work when idle (a fallback: submitted and released runs wake the worker at once).",
        ),
    ] = 0.25,
    config_path: ConfigOption = None,
) -> None:
    """Claim and drive queued and orphaned runs from PostgreSQL until SIGTERM.

    The worker first starts itself again with the store's string hash seed, the one
    submitted runs record; a run recorded with another seed is driven in a child process
    started with that seed.

    Example: resumable worker --concurrency 8
    """
    from resumable.fleet.worker import fleet_store, serve

    config = _config(config_path)
    try:
        store = fleet_store(store_for(config.durability, config), "worker")
    except ResumableError as error:  # not a fleet store, a missing extra, a bad URL
        _fail(error)
    pin_store_seed(store, config)
    _run(lambda: serve(config, env=os.environ, concurrency=concurrency, poll_seconds=poll))


@app.command("submit")
def submit_command(
    program: Annotated[Path, typer.Argument(help="A .py script or a .pb program.")],
    run_id: Annotated[str | None, typer.Option("--run-id", help="Id for the new run.")] = None,
    config_path: ConfigOption = None,
) -> None:
    """Queue a run for the workers; print its id.

    Example: resumable submit examples/scenario/main.pb
    """
    from resumable.fleet.worker import submit

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
    """Copy runs between stores, verified record by record (e.g. a folder into PostgreSQL).

    Example: resumable migrate --from .resumable --to postgresql://db-host/app
    """
    from resumable.fleet.migrate import MigrationReport, migrate
    from resumable.store import open_store
    from resumable.store.urls import parse_store_url

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
        f"resumable: copied {plural(len(report.runs), 'run')} ({plural(report.records, 'record')}, "
        f"{plural(report.blobs, 'blob')}, {plural(report.snapshots, 'snapshot')}), "
        f"skipped {len(report.skipped)}",
        markup=False,
    )

"""Mend what damage left behind: ``repair``."""

from __future__ import annotations

from typing import Annotated

import typer

from resumable.cli.app import ConfigOption, _records, app, err
from resumable.cli.runtime import _config, _run


@app.command("repair")
def repair_command(
    run_id: Annotated[str, typer.Argument(help="A run listed as damaged by `resumable runs`.")],
    config_path: ConfigOption = None,
) -> None:
    """Rebuild a run's damaged metadata from its verified log.

    Example: resumable repair 20260501-120000-ab12cd
    """
    from resumable.durability.runs.repair import Repaired, repair_run

    config = _config(config_path)

    async def go() -> Repaired:
        async with _records(config) as (store, codec):
            return await repair_run(store, codec, run_id)

    done = _run(go)
    status = "crashed" if done.status == "running" else done.status
    then = f"; continue it with `resumable resume {done.run_id}`" if status == "crashed" else ""
    err.print(
        f"resumable: run {done.run_id}: metadata rebuilt from its {done.records} verified "
        f"records; it is {status}{then}",
        markup=False,
    )

"""``resume``: continue a crashed, interrupted or waiting run.

Shared by the command line and the direct path (:mod:`resumable.cli.direct`), so, like
:mod:`resumable.cli.launching`, it loads neither typer nor rich; and only the driver of the
run's kind is loaded, when the run is attached (:mod:`resumable.drivers`).
"""

from __future__ import annotations

import os
from pathlib import Path

from resumable import drivers  # noqa: F401  (names the driver of every kind of run)
from resumable.cli.launching import status_display
from resumable.cli.runtime import (
    _config,
    _fail,
    _finish,
    _run,
    restart_with_hash_seed,
    say,
    standalone,
)
from resumable.durability.log import hashseed
from resumable.durability.runs import control
from resumable.durability.runs.coordinator import RecoveryCoordinator
from resumable.durability.runs.recovery import log_damage
from resumable.durability.runs.session import RunOutcome, codec_for, store_for
from resumable.durability.runs.stored import latest_resumable
from resumable.errors import LostRecordsError, UsageError
from resumable.store.common import check_run_id


def resume_run(
    run_id: str | None = None,
    latest: bool = False,
    no_input: bool = False,
    accept_loss: bool = False,
    force: bool = False,
    quiet: bool = False,
    events: str | None = None,
    config_path: Path | None = None,
) -> None:
    """``resumable resume`` (the command's options, by name)."""
    if (run_id is None) == (not latest):
        _fail(UsageError("give a RUN_ID or --latest (not both); list runs with `resumable runs`"))
    if run_id is not None:
        try:
            check_run_id(run_id)  # an empty id (an unset variable) is an error, never --latest
        except UsageError as error:
            _fail(error)
    config = _config(config_path)
    status = status_display(config, quiet, events)

    async def go() -> RunOutcome | int:
        store = store_for(config.durability, config)
        async with store:
            target = await latest_resumable(store) if run_id is None else run_id
            codec = await codec_for(store, config.durability, os.environ)
            coordinator = RecoveryCoordinator(store, codec)
            loaded_meta = await store.get_meta(target)
            control.refuse_cancelled(loaded_meta)
            gave_up = control.gave_up(loaded_meta)
            if gave_up or loaded_meta.status in ("completed", "failed"):
                lost = await log_damage(store, target)  # named before "nothing to resume"
                if lost is not None:
                    raise LostRecordsError(lost, run_id=target)
            if gave_up and force:
                say(
                    f"resumable: run {target} {gave_up}; --force: trying once more "
                    f"(attempt {control.attempts(loaded_meta) + 1})"
                )
            elif gave_up:
                raise UsageError(
                    f"run {target} {gave_up}; `resumable resume {target} --force` tries once more",
                    run_id=target,
                )
            elif loaded_meta.status in ("completed", "failed"):
                raise UsageError(
                    f"run {target} already {loaded_meta.status}; nothing to resume "
                    f"(fork it with `resumable fork {target} --at N` to run part of it again)",
                    run_id=target,
                )
            seed = hashseed.seed_to_apply(loaded_meta.extra, os.environ)
            if seed is not None and standalone():
                return seed  # set order depends on it: start again with the run's seed
            say(f"resumable: resuming run {target}")
            status.started(target)
            return await coordinator.resume(
                target,
                config,
                env=os.environ,
                no_input=no_input,
                accept_loss=accept_loss,
                force=force,
                watch=status.progress,
            )

    with status.installed():
        outcome = _run(go)
    if isinstance(outcome, int):  # the run's hash seed: start again with it
        restart_with_hash_seed(outcome)
        raise AssertionError("unreachable: the command started again")  # pragma: no cover
    status.finish(outcome.status)
    _finish(outcome)

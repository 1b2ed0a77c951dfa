"""What every command does around its work, without the command line's libraries.

A command's error line and exit code, its coroutine run with SIGINT and SIGTERM handled, the
hash seed a new run starts with, and the line a run ends with. Neither typer nor rich is
imported here: a plain ``resumable exec`` (:mod:`resumable.cli.direct`) runs with this module
and :mod:`resumable.cli.launching` alone, which keeps its start-up short. Errors leave by
``SystemExit``, which typer passes on unchanged.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
import sys
import warnings
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, NoReturn, TextIO, TypeVar

from resumable.config import Config, load_config
from resumable.durability.log import hashseed
from resumable.durability.log.stopping import StopRequested
from resumable.durability.log.store_faults import EXIT_STORE_FAILED, StoreFailed
from resumable.durability.runs import interrupts
from resumable.durability.runs.session import RunOutcome, codec_for, store_for
from resumable.errors import ResumableError
from resumable.store.base import CheckpointStore

T = TypeVar("T")

_standalone = False
"""Set by :func:`guarded`: this process is the command's own and may start itself again."""


def say(line: str) -> None:
    """One line of the runtime's on stderr (stdout is the program's)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def guarded(command: Callable[[], object]) -> None:
    """Run ``command`` as this process's own (the console script's entry point does): warnings
    on one line of stderr, a path too long for the file system told in one line (exit 2)."""
    global _standalone
    _standalone = True
    _route_warnings()
    try:
        command()
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        name = shown_path(str(exc.filename)) if exc.filename else "a path"
        say(f"resumable: error: {name}: {exc.strerror}; use a shorter one")
        sys.exit(2)


def standalone() -> bool:
    return _standalone


def shown_path(path: object, limit: int = 80) -> str:
    """A path for a one-line message: its start and end when it is too long to read."""
    text = str(path)
    return text if len(text) <= limit else f"{text[: limit // 2]}...{text[-limit // 2 :]}"


def restart_with_hash_seed(seed: int) -> None:
    """Run this very command again, in this process, with ``PYTHONHASHSEED=seed``.

    Only a process started as ``resumable`` does; invoked in-process (tests, embedding) this
    returns and the session warns that set order may differ.
    """
    if not _standalone:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    argv = [sys.executable, "-m", "resumable", *sys.argv[1:]]  # also from a forked interpreter
    os.execve(sys.executable, argv, {**os.environ, hashseed.ENV: str(seed)})


def pin_hash_seed(config: Config) -> None:
    """A new run hashes with its store's seed, unless ``PYTHONHASHSEED`` already pins one (or
    durability is off: then nothing is recorded, and no store is opened)."""
    if config.durability.enabled and hashseed.seed_from_env(os.environ) is None:
        try:
            store = store_for(config.durability, config)
        except ResumableError as error:  # a store whose extra is missing, a bad URL
            _fail(error)
        pin_store_seed(store, config)


def pin_store_seed(store: CheckpointStore, config: Config) -> None:
    """Start again with the seed all processes of ``store`` (not open yet) share, unless this
    one already hashes with it (see ``hashseed``)."""
    if not standalone():
        return

    async def go() -> int:
        async with store:
            return hashseed.store_seed(await codec_for(store, config.durability, os.environ))

    seed = _run(go)
    if hashseed.seed_from_env(os.environ) != seed:
        restart_with_hash_seed(seed)


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
    say(f"resumable: error: {error.message}")
    sys.exit(error.exit_code)


def _run(coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    try:
        return asyncio.run(_stoppable(coro_fn))
    except ResumableError as error:
        _fail(error)
    except StoreFailed as failed:
        say(f"resumable: {failed.reason}")
        sys.exit(EXIT_STORE_FAILED)
    except StopRequested as stop:  # only a cancel stops a run this process drives
        why = f": {stop.cancelled}" if stop.cancelled else ""
        say(f"resumable: run {stop.run_id} cancelled{why}")
        sys.exit(1)
    except (KeyboardInterrupt, interrupts.Interrupted, asyncio.CancelledError):
        signum = interrupts.received() or signal.SIGINT
        name = signal.Signals(signum).name
        runs = interrupts.stopped_runs()
        if runs:
            say(
                f"resumable: run {', '.join(runs)} interrupted by {name}; continue it with "
                f"`resumable resume {runs[0]}`"
            )
        else:
            say(f"resumable: interrupted by {name}")
        sys.exit(interrupts.exit_code(signum))


async def _stoppable(coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """The command's work, stopped in order by SIGINT or SIGTERM (see ``interrupts``)."""
    task = asyncio.current_task()
    assert task is not None
    with interrupts.stop_on_signals(task):
        return await coro_fn()


def _config(path: Path | None) -> Config:
    try:
        return load_config(path, env=os.environ)
    except ResumableError as error:
        _fail(error)


def _finish(outcome: RunOutcome, *, json_out: bool = False) -> NoReturn:
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
        say(f"resumable: run {outcome.run_id} {note}")
    if json_out:
        print(
            json.dumps(
                {
                    "run_id": outcome.run_id or None,
                    "status": outcome.status,
                    "exit_code": outcome.exit_code,
                    "message": outcome.message,
                }
            ),
            flush=True,
        )
    sys.exit(outcome.exit_code)

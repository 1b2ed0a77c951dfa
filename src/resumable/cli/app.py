"""The ``resumable`` command: parses arguments and calls library functions.

stdout carries only what the program prints (or ``--json``); everything the runtime
says goes to stderr. Exit codes: 0 done, 1 program error (or gave up, or cancelled),
2 usage/config error, 3 waiting for human input, 75 the store failed under the run
(interrupted: fix the store, then resume), 130/143 stopped by SIGINT/SIGTERM (interrupted).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn, TextIO, TypeVar

import typer
from rich.console import Console

from resumable.cli.dash_ids import DashIdGroup
from resumable.config import Config, load_config
from resumable.durability.log import hashseed
from resumable.durability.log.records import RecordCodec
from resumable.durability.log.stopping import StopRequested
from resumable.durability.log.store_faults import EXIT_STORE_FAILED, StoreFailed
from resumable.durability.runs import interrupts
from resumable.durability.runs.session import RunOutcome, codec_for, store_for
from resumable.errors import ResumableError, UsageError
from resumable.extras import DISTRIBUTION
from resumable.store import to_read
from resumable.store.base import CheckpointStore

T = TypeVar("T")

app = typer.Typer(
    name="resumable",
    cls=DashIdGroup,
    help="Durable execution for LLM-written Python: a checkpoint at every await.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, highlight=False, soft_wrap=True)

ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="playbooks.toml to use (default: ./playbooks.toml)")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


_standalone = False
"""Set by :func:`main`: this process is the command's own and may start itself again."""


def main(command: Callable[[], object] | None = None) -> None:
    """Console-script entry point: the command line (or ``command``, one of its commands
    called directly: :mod:`resumable.cli.direct`)."""
    global _standalone
    _standalone = True
    _route_warnings()
    try:
        (command or app)()
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        name = shown_path(str(exc.filename)) if exc.filename else "a path"
        err.print(f"resumable: error: {name}: {exc.strerror}; use a shorter one", markup=False)
        sys.exit(2)


def shown_path(path: object, limit: int = 80) -> str:
    """A path for a one-line message: its start and end when it is too long to read."""
    text = str(path)
    return text if len(text) <= limit else f"{text[: limit // 2]}...{text[-limit // 2 :]}"


def standalone() -> bool:
    return _standalone


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


def _version(value: bool) -> None:
    """The version on the first line (scripts read it), then where the project lives."""
    if value:
        from importlib.metadata import PackageNotFoundError, metadata

        try:
            about = metadata(DISTRIBUTION)
        except PackageNotFoundError:  # a source tree that was never installed
            print("resumable (version unknown: not installed; `pip install .` records it)")
            raise typer.Exit(0) from None
        print(f"resumable {about['Version']}")
        for entry in about.get_all("Project-URL") or ():
            label, _, url = entry.partition(", ")
            print(f"{label}: {url}")
        raise typer.Exit(0)


@app.callback()
def _options(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Durable execution for LLM-written Python: a checkpoint at every await.

    Example: resumable exec script.py, then after a crash: resumable resume --latest
    """


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
        return asyncio.run(_stoppable(coro_fn))
    except ResumableError as error:
        _fail(error)
    except StoreFailed as failed:
        err.print(f"resumable: {failed.reason}", markup=False)
        raise typer.Exit(EXIT_STORE_FAILED) from None
    except StopRequested as stop:  # only a cancel stops a run this process drives
        why = f": {stop.cancelled}" if stop.cancelled else ""
        err.print(f"resumable: run {stop.run_id} cancelled{why}", markup=False)
        raise typer.Exit(1) from None
    except (KeyboardInterrupt, interrupts.Interrupted, asyncio.CancelledError):
        signum = interrupts.received() or signal.SIGINT
        name = signal.Signals(signum).name
        runs = interrupts.stopped_runs()
        if runs:
            err.print(
                f"resumable: run {', '.join(runs)} interrupted by {name}; continue it with "
                f"`resumable resume {runs[0]}`",
                markup=False,
            )
        else:
            err.print(f"resumable: interrupted by {name}", markup=False)
        raise typer.Exit(interrupts.exit_code(signum)) from None


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


def _since(text: str | None) -> float | None:
    """``--since`` as a time (None when not given); a text that is neither fails the command."""
    from resumable.durability.runs.history import parse_since

    try:
        return parse_since(text) if text else None
    except UsageError as error:
        _fail(error)


@asynccontextmanager
async def _records(
    config: Config, *, read_only: bool = False
) -> AsyncIterator[tuple[CheckpointStore, RecordCodec]]:
    """The configured store, open, with the codec that reads and seals its records;
    ``read_only`` for commands that only read (nothing written, nothing created)."""
    store = store_for(config.durability, config)
    async with to_read(store) if read_only else store:
        yield store, await codec_for(store, config.durability, os.environ)


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
        err.print(f"resumable: run {outcome.run_id} {note}", markup=False)
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
    raise typer.Exit(outcome.exit_code)

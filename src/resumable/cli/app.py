"""The ``resumable`` command: parses arguments and calls library functions.

stdout carries only what the program prints (or ``--json``); everything the runtime
says goes to stderr. Exit codes: 0 done, 1 program error (or gave up, or cancelled),
2 usage/config error, 3 waiting for human input, 75 the store failed under the run
(interrupted: fix the store, then resume), 130/143 stopped by SIGINT/SIGTERM (interrupted).
What every command does around its work (errors, exits, signals, the hash seed) is in
:mod:`resumable.cli.runtime`, which loads neither typer nor rich.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from resumable.cli.dash_ids import DashIdGroup
from resumable.cli.runtime import _fail, guarded
from resumable.config import Config
from resumable.durability.log.records import RecordCodec
from resumable.durability.runs.session import codec_for, store_for
from resumable.errors import UsageError
from resumable.extras import DISTRIBUTION
from resumable.store import to_read
from resumable.store.base import CheckpointStore

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
QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="No status line and no retry notes: the summary only.")
]
EventsOption = Annotated[
    str | None,
    typer.Option("--events", help="json: one JSON event per line on stderr, for tools."),
]


def main(command: Callable[[], object] | None = None) -> None:
    """Console-script entry point: the command line, or ``command`` (see ``runtime.guarded``)."""
    guarded(command or app)


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

"""``exec`` with plain arguments, run without the command line: neither typer nor rich nor
the other commands are loaded (about a fifth of ``exec``'s start)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

from resumable.cli.launching import exec_program
from resumable.cli.runtime import guarded

_VALUED_OPTIONS = {"--run-id": "run_id", "--events": "events", "--config": "config_path"}


def plain_exec(args: list[str]) -> dict[str, object] | None:
    """``exec``'s arguments as its command function takes them, when they are plain: one
    script and the options typer would parse the same way (None: leave them to typer, which
    also says what is wrong with them)."""
    if args[:1] != ["exec"]:
        return None
    options: dict[str, object] = {"quiet": False, "events": None, "json_out": False}
    scripts: list[str] = []
    rest = iter(args[1:])
    for arg in rest:
        name, eq, given = arg.partition("=")
        if name in _VALUED_OPTIONS:
            given = given if eq else next(rest, "")
            if not given or given.startswith("-"):
                return None
            key = _VALUED_OPTIONS[name]
            options[key] = Path(given) if key == "config_path" else given
        elif arg in ("--quiet", "-q"):
            options["quiet"] = True
        elif arg == "--json":
            options["json_out"] = True
        elif arg.startswith("-"):
            return None  # --no-input is run's, --help and the rest are typer's
        else:
            scripts.append(arg)
    if len(scripts) != 1:
        return None
    return {"script": Path(scripts[0]), **options}


def exec_directly(arguments: dict[str, object]) -> None:
    """Run ``exec`` with ``arguments`` (from :func:`plain_exec`) as the command line would."""
    guarded(lambda: _call(arguments))


def _call(arguments: dict[str, object]) -> NoReturn:
    """The command, and its exits as typer's standalone mode makes them."""
    try:
        exec_program(**arguments)  # type: ignore[arg-type]
    except (KeyboardInterrupt, EOFError):
        sys.stderr.write("\nAborted!\n")  # as click says it
        sys.exit(1)
    sys.exit(0)

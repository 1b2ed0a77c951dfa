"""``exec``, ``run`` and ``resume`` with plain arguments, run without the command line: neither
typer nor rich nor the other commands are loaded (about a fifth of ``exec``'s start, and half
of ``resume``'s).

Plain arguments are those typer would parse the same way: the command's options as it spells
them and its positional arguments; anything else (``--help``, ``--``, an option of another
command, a value that looks like an option) is left to typer, which also says what is wrong.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

_TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the launcher loads this)
if _TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn


class _Command:
    """What one command takes, and the function (``module:name``) that runs it."""

    __slots__ = ("defaults", "flags", "function", "positional", "required", "valued")

    def __init__(
        self,
        function: str,
        *,
        valued: dict[str, str],
        flags: dict[str, str],
        defaults: dict[str, object],
        positional: str,
        required: bool,
    ) -> None:
        self.function = function
        self.valued = valued
        """Options that take a value, and the keyword each gives the command."""
        self.flags = flags
        self.defaults = defaults
        self.positional = positional
        """The keyword of the command's one positional argument."""
        self.required = required
        """Whether the positional argument must be given (else at most one)."""


_COMMON_VALUED = {"--events": "events", "--config": "config_path"}
_QUIET = {"--quiet": "quiet", "-q": "quiet"}
_COMMANDS = {
    "exec": _Command(
        "resumable.cli.launching:exec_program",
        valued={"--run-id": "run_id", **_COMMON_VALUED},
        flags={**_QUIET, "--json": "json_out"},
        defaults={"quiet": False, "events": None, "json_out": False},
        positional="script",
        required=True,
    ),
    "run": _Command(
        "resumable.cli.launching:run_playbook",
        valued={"--run-id": "run_id", **_COMMON_VALUED},
        flags={**_QUIET, "--json": "json_out", "--no-input": "no_input"},
        defaults={},
        positional="program",
        required=True,
    ),
    "resume": _Command(
        "resumable.cli.resuming:resume_run",
        valued=_COMMON_VALUED,
        flags={
            **_QUIET,
            "--latest": "latest",
            "--no-input": "no_input",
            "--accept-loss": "accept_loss",
            "--force": "force",
        },
        defaults={"run_id": None},
        positional="run_id",
        required=False,
    ),
}


def plain_arguments(args: list[str]) -> tuple[str, dict[str, object]] | None:
    """The command and its arguments as its function takes them, when they are plain (None:
    leave them to typer)."""
    command = _COMMANDS.get(args[0]) if args else None
    if command is None:
        return None
    options: dict[str, object] = dict(command.defaults)
    positional: list[str] = []
    rest = iter(args[1:])
    for arg in rest:
        name, eq, given = arg.partition("=")
        if name in command.valued:
            given = given if eq else next(rest, "")
            if not given or given.startswith("-"):
                return None
            key = command.valued[name]
            options[key] = Path(given) if key == "config_path" else given
        elif arg in command.flags:
            options[command.flags[arg]] = True
        elif arg.startswith("-"):
            return None  # --help, --, another command's option: typer's
        else:
            positional.append(arg)
    if len(positional) > 1 or (command.required and not positional):
        return None
    if positional:
        value = positional[0]
        options[command.positional] = value if command.positional == "run_id" else Path(value)
    return args[0], options


def plain_exec(args: list[str]) -> dict[str, object] | None:
    """``exec``'s arguments as :func:`plain_arguments` finds them, or None."""
    found = plain_arguments(args)
    return found[1] if found is not None and found[0] == "exec" else None


def run_directly(command: str, arguments: dict[str, object]) -> None:
    """Run ``command`` with ``arguments`` (from :func:`plain_arguments`) as the command line
    would."""
    from resumable.cli.runtime import guarded

    module, _, name = _COMMANDS[command].function.partition(":")
    function = getattr(importlib.import_module(module), name)
    guarded(lambda: _call(function, arguments))


def _call(function: Callable[..., object], arguments: dict[str, object]) -> NoReturn:
    """The command, and its exits as typer's standalone mode makes them."""
    try:
        function(**arguments)
    except (KeyboardInterrupt, EOFError):
        sys.stderr.write("\nAborted!\n")  # as click says it
        sys.exit(1)
    sys.exit(0)

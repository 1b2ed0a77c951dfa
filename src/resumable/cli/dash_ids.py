"""An id that starts with ``-`` is read as an option: say how to pass it (after ``--``)."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from resumable.store.common import RUN_ID


def _command_line(ctx: Any) -> str:
    """``resumable`` and the sub-command names that led to ``ctx`` (however it was started)."""
    names: list[str] = []
    while ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(["resumable", *reversed(names)])


class DashIdGroup(TyperGroup):
    """The ``resumable`` group: an unknown short option given to a command that takes an id
    (``resumable show -x``) is one line naming ``--`` (``resumable show -- -x``), exit 2."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as error:  # click's NoSuchOption (typer vendors click in new releases)
            if type(error).__name__ != "NoSuchOption":
                raise
            name = str(getattr(error, "option_name", ""))
            failing = getattr(error, "ctx", None)
            takes_id = failing is not None and any(
                param.param_type_name == "argument" and param.name == "run_id"
                for param in failing.command.params
            )
            if not takes_id or name.startswith("--") or not RUN_ID.fullmatch(name):
                raise
            line = _command_line(failing)
            Console(stderr=True, highlight=False, soft_wrap=True).print(
                f"resumable: error: no option {name} for `{line}`; an id that starts with "
                f"'-' goes after `--`: `{line} -- {name}`",
                markup=False,
            )
            raise typer.Exit(2) from None

"""The examples that come with the package: ``resumable examples``, and running one by name."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from resumable.cli.app import JsonOption, app, err
from resumable.extras import DISTRIBUTION


def examples_folder() -> Path | None:
    """Where the examples are: inside the installed package, or beside it in a source checkout."""
    here = Path(__file__).resolve().parent.parent  # the resumable package
    for candidate in (here / "examples", here.parent.parent / "examples"):
        if candidate.is_dir():
            return candidate
    return None


def list_examples() -> dict[str, Path]:
    """Example name (``scenario``, ``ledger``) -> its program for ``run``/``exec`` by name.

    A ``.pb`` file (alone or in its folder) or a top-level ``.py`` script; a folder with a
    Python program of its own (an integration's agent) is run with ``python``, not by name.
    """
    folder = examples_folder()
    if folder is None:
        return {}
    found: dict[str, Path] = {}
    for path in sorted(folder.rglob("*")):
        if "__pycache__" in path.parts:
            continue
        relative = path.relative_to(folder)
        if path.suffix == ".pb" or (path.suffix == ".py" and len(relative.parts) == 1):
            found.setdefault(relative.parts[0] if len(relative.parts) > 1 else path.stem, path)
    return found


PYTHON_EXAMPLES = {
    "pydantic_ai": ("main.py", "trip-1", "pydantic-ai"),
    "smolagents": ("run_agent.py", "shop-1", "smolagents"),
}
"""Folder examples that are Python programs: their entry point, a run id, their extra."""


def example_commands() -> dict[str, dict[str, str | None]]:
    """Every example that ships -> the command that runs it, and the install it needs."""
    folder = examples_folder()
    if folder is None:
        return {}
    commands: dict[str, dict[str, str | None]] = {
        name: {
            "command": f"resumable {'run' if path.suffix == '.pb' else 'exec'} {name}",
            "needs": None,
        }
        for name, path in list_examples().items()
    }
    for name, (entry, run_id, extra) in PYTHON_EXAMPLES.items():
        program = folder / name / entry
        if program.is_file():
            commands[name] = {
                "command": f"python {shlex.quote(str(program))} {run_id}",
                "needs": f"pip install '{DISTRIBUTION}[{extra}]'",
            }
    return dict(sorted(commands.items()))


def resolve_program(program: Path) -> Path:
    """``program`` itself if it exists; else the example of that name, if there is one."""
    if program.exists():
        return program
    example = list_examples().get(str(program))
    return example if example is not None else program


@app.command("examples")
def examples_command(json_out: JsonOption = False) -> None:
    """List the examples that come with resumable; run one by name.

    Example: resumable examples && resumable run scenario
    """
    found = example_commands()
    if json_out:
        print(json.dumps(found, indent=2))
        return
    if not found:
        err.print("resumable: no examples are installed with this copy of resumable", markup=False)
        return
    for name, about in found.items():
        needs = f"    # needs {about['needs']}" if about.get("needs") else ""
        print(f"{name:12} {about['command']}{needs}")

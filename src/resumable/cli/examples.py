"""The examples that come with the package: ``resumable examples``, and running one by name."""

from __future__ import annotations

import json
import shlex

from resumable.cli.app import JsonOption, app, err
from resumable.cli.example_files import examples_folder, list_examples
from resumable.extras import DISTRIBUTION

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

"""The examples that come with the package: ``resumable examples``, and running one by name."""

from __future__ import annotations

import json
from pathlib import Path

from resumable.cli.app import JsonOption, app, err


def examples_folder() -> Path | None:
    """Where the examples are: inside the installed package, or beside it in a source checkout."""
    here = Path(__file__).resolve().parent.parent  # the resumable package
    for candidate in (here / "examples", here.parent.parent / "examples"):
        if candidate.is_dir():
            return candidate
    return None


def list_examples() -> dict[str, Path]:
    """Example name (``scenario``, ``ledger``) -> its program (a .pb or .py file)."""
    folder = examples_folder()
    if folder is None:
        return {}
    found: dict[str, Path] = {}
    for path in sorted(folder.rglob("*")):
        if path.suffix not in (".pb", ".py") or "__pycache__" in path.parts:
            continue
        relative = path.relative_to(folder)
        name = relative.parts[0] if len(relative.parts) > 1 else path.stem
        if path.suffix == ".py" and len(relative.parts) > 1 and path.stem != "main":
            continue  # a helper module of a folder example, not something to run
        found.setdefault(name, path)
    return found


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
    found = list_examples()
    if json_out:
        print(json.dumps({name: str(path) for name, path in found.items()}, indent=2))
        return
    if not found:
        err.print("resumable: no examples are installed with this copy of resumable", markup=False)
        return
    for name, path in found.items():
        command = "run" if path.suffix == ".pb" else "exec"
        print(f"{name:12} resumable {command} {name}    ({path})")

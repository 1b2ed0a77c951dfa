"""Where the examples that come with the package are, and a program named by its example.

Typer-free: ``exec`` resolves its program with it before the command line is loaded.
"""

from __future__ import annotations

from pathlib import Path


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


def resolve_program(program: Path) -> Path:
    """``program`` itself if it exists; else the example of that name, if there is one."""
    if program.exists():
        return program
    example = list_examples().get(str(program))
    return example if example is not None else program

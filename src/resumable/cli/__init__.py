"""The ``resumable`` command line: the typer app and one module per command group.

Importing this package registers every command on :data:`resumable.cli.app.app`.
"""

from resumable.cli import (
    examples,
    fleet,
    inspecting,
    operating,
    repairing,
    running,
    setup,
    ui,
)
from resumable.cli.app import app, main

__all__ = [
    "app",
    "examples",
    "fleet",
    "inspecting",
    "main",
    "operating",
    "repairing",
    "running",
    "setup",
    "ui",
]

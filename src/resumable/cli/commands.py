"""The whole command line: the typer app with every command group registered on it."""

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

"""Runs opened with resumable.open_run; what the tests here share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_program(
    program: Path, folder: Path, crash_after: int | None = None
) -> subprocess.CompletedProcess[str]:
    """``python PROGRAM STORE LEDGER`` with this tree's package, killed after record N if set."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "RESUMABLE_DURABILITY_SYNC": "flush"}
    env.pop("RESUMABLE_CRASH_AFTER", None)
    if crash_after is not None:
        env["RESUMABLE_CRASH_AFTER"] = str(crash_after)
    return subprocess.run(
        [sys.executable, str(program), str(folder / "store"), str(folder / "ledger")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

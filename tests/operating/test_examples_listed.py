"""`resumable examples` lists exactly the examples that ship, each with a command that runs."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from tests.crash.harness import EXAMPLES, resumable

SHIPPED = sorted(
    path.stem if path.is_file() else path.name
    for path in EXAMPLES.iterdir()
    if (path.is_dir() and path.name != "__pycache__") or path.suffix == ".py"
)


def listed(cwd: Path) -> dict[str, dict[str, str | None]]:
    shown = resumable(["examples", "--json"], cwd)
    assert shown.code == 0, shown.stderr
    found: dict[str, dict[str, str | None]] = json.loads(shown.stdout)
    return found


def test_exactly_the_shipped_examples_are_listed(tmp_path: Path) -> None:
    assert sorted(listed(tmp_path)) == SHIPPED
    text = resumable(["examples"], tmp_path).stdout.splitlines()
    assert [line.split()[0] for line in text] == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_each_listed_command_runs_as_shown(tmp_path: Path, name: str) -> None:
    program, *args = shlex.split(str(listed(tmp_path)[name]["command"]))
    assert program in ("resumable", "python")
    executable = [sys.executable, "-m", "resumable"] if program == "resumable" else [sys.executable]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    ran = subprocess.run(
        [*executable, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
        stdin=subprocess.DEVNULL,
    )
    waiting = ran.returncode == 3 and "is waiting for input" in ran.stderr
    assert ran.returncode == 0 or waiting, ran.stderr
    assert "Traceback" not in ran.stderr

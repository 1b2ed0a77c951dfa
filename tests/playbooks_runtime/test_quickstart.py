"""The README's first commands work on a fresh clone: offline, from the clone's folder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.crash.harness import EXAMPLES
from tests.playbooks_runtime import SCENARIO_TRANSCRIPT


def _console_script() -> list[str]:
    """The ``resumable`` command that ``pip install -e .`` put beside this Python."""
    script = Path(sys.executable).with_name("resumable")
    return [str(script)] if script.exists() else [sys.executable, "-m", "resumable"]


def _user_shell(args: list[str], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """As a user types it: default settings, no RESUMABLE_* from the test run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env.pop("SCENARIO_LEDGER", None)
    env.update(extra)
    return subprocess.run(
        [*_console_script(), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """The parts of a fresh clone the README's commands read."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    return tmp_path


def test_first_command_runs_the_scenario_offline(clone: Path) -> None:
    done = _user_shell(["run", "examples/scenario/main.pb"], clone)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == SCENARIO_TRANSCRIPT
    assert done.stderr.splitlines()[-1].endswith(" completed")
    # FetchData's effect, once, keyed by the run
    (booked,) = (clone / "scenario-ledger.txt").read_text().splitlines()
    (row,) = json.loads(_user_shell(["runs", "--json"], clone).stdout)
    assert row["status"] == "completed"
    assert booked == f"FetchData {row['run_id']}/main/2.1.0"


def test_readme_demo_crash_then_resume_latest(clone: Path) -> None:
    crashed = _user_shell(["run", "examples/scenario/main.pb"], clone, RESUMABLE_CRASH_AFTER="20")
    assert crashed.returncode == -signal.SIGKILL
    runs = _user_shell(["runs", "--json"], clone)
    (row,) = json.loads(runs.stdout)
    assert row["status"] == "crashed"
    assert row["records"] == 20
    resumed = _user_shell(["resume", "--latest"], clone)
    assert resumed.returncode == 0, resumed.stderr
    assert (crashed.stdout + resumed.stdout).splitlines() == SCENARIO_TRANSCRIPT
    assert len((clone / "scenario-ledger.txt").read_text().splitlines()) == 1

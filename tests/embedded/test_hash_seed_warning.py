"""A resumed embedded run warns about the hash seed only when its state holds a set of strings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.embedded import ROOT

PROGRAM = """
import sys
import resumable

with resumable.open_run("r", store=sys.argv[1], program="seed") as run:
    code = run.executor()
    for turn in sys.argv[2:]:
        code.run_code(turn)
"""


def _start(store: Path, seed: str, *turns: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONHASHSEED": seed}
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, str(store), *turns],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("first", "warns"),
    [
        ("tags = {'red', 'blue'}", True),
        ("pairs = [frozenset({('a', 1)})]", True),
        ("order = {'b': 1, 'a': 2}\nnumbers = {3, 1, 2}", False),
    ],
)
def test_a_resume_with_another_seed_warns_only_for_sets_of_strings(
    first: str, warns: bool, tmp_path: Path
) -> None:
    started = _start(tmp_path, "1", first)
    assert started.returncode == 0, started.stderr
    assert started.stderr == ""
    resumed = _start(tmp_path, "2", first, "y = 1")  # the next turn starts from the state
    assert resumed.returncode == 0, resumed.stderr
    if not warns:
        assert resumed.stderr == ""
        return
    assert resumed.stderr == (
        "resumable: run r: this run hashes strings with PYTHONHASHSEED=1 and this process "
        "does not: iterating a set may give another order; start the process with "
        "PYTHONHASHSEED=1\n"
    )

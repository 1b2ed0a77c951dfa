"""Two processes opening one new run id at once: one opens it, the other is told it is busy.

Real processes released together: the one that does not win gets RunBusyError, never
"already exists" or "has no records" about a run another process is starting.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

OPENER = """\
import os, sys, time
import resumable

while not os.path.exists("go"):
    time.sleep(0.001)
try:
    with resumable.open_run(sys.argv[1], store="store", program="race"):
        time.sleep(0.2)
    print("opened")
except resumable.RunBusyError:
    print("busy")
except Exception as exc:
    print("other", type(exc).__name__, exc)
"""


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_the_loser_of_an_open_race_gets_run_busy(tmp_path: Path, store: str) -> None:
    (tmp_path / "opener.py").write_text(OPENER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    if store == "sqlite":
        env.update(RESUMABLE_DURABILITY_STORE="sqlite")
    outcomes = []
    for trial in range(8):
        (tmp_path / "go").unlink(missing_ok=True)
        openers = [
            subprocess.Popen(
                [sys.executable, "opener.py", f"race-{trial}"],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        (tmp_path / "go").write_text("")
        said = sorted(p.communicate(timeout=120)[0].strip() for p in openers)
        assert all(p.returncode == 0 for p in openers), said
        outcomes.append(said)
    for said in outcomes:
        assert said in (["busy", "opened"], ["opened", "opened"]), outcomes

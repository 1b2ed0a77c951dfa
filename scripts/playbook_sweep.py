"""Kill the playbook crash tests' runs after every record instead of a spread sample.

    python scripts/playbook_sweep.py [PYTEST ARGS ...]

The suite kills each of these runs after 16 records spread over it (first and last
included), to stay within its time; this runs the same tests with
``RESUMABLE_TEST_CRASH_POINTS=all``: every record, each resumed and compared with the
uninterrupted run. Exits with pytest's code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ["tests/crash/test_playbook_window.py", "tests/crash/test_agent_state_crash.py"]


def main() -> int:
    env = {**os.environ, "RESUMABLE_TEST_CRASH_POINTS": "all"}
    command = [sys.executable, "-m", "pytest", *TESTS, "--durations=0", *sys.argv[1:]]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())

"""One kill -9 per store kind at a sampled record, then a resume: the quick lane's crash test.

The script books six effects; it is killed right after a record picked at random (the
seed is printed on failure, ``RESUMABLE_TEST_SEED`` repeats it) and resumed: its output
and its ledger equal an uninterrupted run's. The exhaustive sweeps are elsewhere
(tests/crash/test_script_crash.py, scripts/crash_sweep.py).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

from tests.crash.damage import FULL_STDOUT, LEDGER, Site
from tests.crash.harness import resumable


def test_kill_at_a_sampled_record_then_resume_matches_an_uninterrupted_run(
    site: Site, tmp_path: Path
) -> None:
    seed = int(os.environ.get("RESUMABLE_TEST_SEED") or random.randrange(1 << 30))
    site.prepare(tmp_path)
    whole = resumable(["exec", "s.py", "--run-id", "whole"], tmp_path)
    assert whole.code == 0, whole.stderr
    assert whole.stdout == FULL_STDOUT
    (row,) = json.loads(resumable(["runs", "--json"], tmp_path).stdout)
    point = random.Random(seed).randrange(1, row["records"])  # the last one would finish it
    (tmp_path / "effects.log").unlink()
    crash = {"RESUMABLE_CRASH_AFTER": str(point)}
    killed = resumable(["exec", "s.py", "--run-id", "r"], tmp_path, env=crash)
    assert killed.code == -signal.SIGKILL, (seed, point, killed.stderr)
    time.sleep(site.lease_seconds)  # a server store: the killed owner's lease runs out
    resumed = resumable(["resume", "r"], tmp_path)
    assert resumed.code == 0, (seed, point, resumed.stderr)
    assert killed.stdout + resumed.stdout == FULL_STDOUT, (seed, point)
    booked = (tmp_path / "effects.log").read_text().splitlines()
    assert booked == LEDGER, (seed, point)

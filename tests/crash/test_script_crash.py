"""kill -9 at records of a script run, resume, and compare with a run that never crashed.

The suite kills at 12 records spread over the run, first and last included;
``RESUMABLE_TEST_CRASH_POINTS=N`` kills at N instead, ``all`` at every record.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from tests.crash.harness import EXAMPLES, resumable, start, strip_run, wait_for_file
from tests.playbooks_runtime import CRASH_POINTS
from tests.replay.state_harness import spread

SCRIPT = EXAMPLES / "ledger.py"


def _setup(tmp_path: Path, name: str) -> Path:
    work = tmp_path / name
    work.mkdir()
    shutil.copy(SCRIPT, work / "ledger.py")
    return work


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str], int]:
    """stdout, ledger and record count of an uninterrupted run."""
    work = _setup(tmp_path_factory.mktemp("reference"), "ref")
    done = resumable(["exec", "ledger.py", "--run-id", "ref"], work, env={"LEDGER": "ledger.txt"})
    assert done.code == 0, done.stderr
    runs = resumable(["runs", "--json"], work)
    import json

    (row,) = json.loads(runs.stdout)
    assert row["status"] == "completed"
    ledger = strip_run((work / "ledger.txt").read_text().splitlines(), "ref")
    return done.stdout, ledger, row["records"]


def test_reference_run_books_every_effect_once(reference: tuple[str, list[str], int]) -> None:
    stdout, ledger, records = reference
    assert "closing balances:" in stdout
    assert len(ledger) == len(set(ledger)) == 10
    assert records > 20


def _crash_and_resume(tmp_path: Path, point: int) -> tuple[str, list[str]]:
    work = _setup(tmp_path, f"crash{point}")
    env = {"LEDGER": "ledger.txt"}
    crashed = resumable(
        ["exec", "ledger.py", "--run-id", "r"],
        work,
        env={**env, "RESUMABLE_CRASH_AFTER": str(point)},
    )
    assert crashed.code == -signal.SIGKILL, crashed.stderr
    resumed = resumable(["resume", "r"], work, env=env)
    assert resumed.code == 0, resumed.stderr
    return crashed.stdout + resumed.stdout, strip_run(
        (work / "ledger.txt").read_text().splitlines() if (work / "ledger.txt").exists() else [],
        "r",
    )


def test_kill_at_every_record_then_resume_matches_uninterrupted_run(
    tmp_path: Path, reference: tuple[str, list[str], int]
) -> None:
    stdout, ledger, records = reference
    wanted = os.environ.get(CRASH_POINTS, "12")
    for point in spread(records, records if wanted == "all" else int(wanted)):
        output, booked = _crash_and_resume(tmp_path, point)
        assert output == stdout, f"killed after record {point}"
        # The crash comes right after a record is durable, so no await is in flight:
        # every effect is booked exactly once, in the same order.
        assert booked == ledger, f"killed after record {point}"


@pytest.mark.parametrize("seed", range(6))
def test_sigkill_at_a_random_moment_then_resume(
    tmp_path: Path, reference: tuple[str, list[str], int], seed: int
) -> None:
    stdout, ledger, _ = reference
    work = _setup(tmp_path, f"random{seed}")
    env = {"LEDGER": "ledger.txt", "BOOK_DELAY": "0.02"}
    delay = random.Random(seed).uniform(0.0, 0.5)
    process = start(["exec", "ledger.py", "--run-id", "r"], work, env=env)
    wait_for_file(work / "ledger.txt", timeout=30)
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    resumed = resumable(["resume", "r"], work, env=env)
    if "already completed" in resumed.stderr:  # it finished before the kill landed
        assert resumed.code == 2
        assert (work / "ledger.txt").read_text().count("\n") == len(ledger)
        return
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout.splitlines()[-1] == stdout.splitlines()[-1]
    booked = strip_run((work / "ledger.txt").read_text().splitlines(), "r")
    # Every effect at least once; only the await in flight at the kill may repeat,
    # and then under the same idempotency key.
    assert set(booked) == set(ledger)
    repeats = [line for line, n in Counter(booked).items() if n > 1]
    assert len(repeats) <= 1
    assert all(n <= 2 for n in Counter(booked).values())

"""SIGINT and SIGTERM stop a run in order; kill -9 leaves it crashed. Real processes.

A stopped run is listed ``interrupted``, exits 130 (SIGINT) or 143 (SIGTERM) with the
resume hint, and a resume finishes it with every effect booked once and the output of
a run that was never stopped.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from tests.crash.harness import EXAMPLES, resumable, start

ENV = {"LEDGER": "ledger.txt", "BOOK_DELAY": "0.4"}


def _started(tmp_path: Path, run_id: str) -> tuple[Path, subprocess.Popen[str]]:
    work = tmp_path / run_id
    work.mkdir()
    shutil.copy(EXAMPLES / "ledger.py", work / "ledger.py")
    process = start(["exec", "ledger.py", "--run-id", run_id], work, env=ENV)
    ledger = work / "ledger.txt"
    deadline = time.monotonic() + 60
    while not ledger.exists() or len(ledger.read_text().splitlines()) < 2:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run never booked 2 effects"
        time.sleep(0.02)
    return work, process


def _status(work: Path, run_id: str) -> str:
    listed = resumable(["runs", "--json"], work)
    (row,) = [r for r in json.loads(listed.stdout) if r["run_id"] == run_id]
    return str(row["status"])


def _finish(work: Path, run_id: str, first_stdout: str) -> None:
    done = resumable(["resume", run_id], work, env=ENV)
    assert done.code == 0, done.stderr
    reference = resumable(
        ["exec", "ledger.py", "--run-id", "ref"], work, env={**ENV, "LEDGER": "ref.txt"}
    )
    assert reference.code == 0, reference.stderr
    assert first_stdout + done.stdout == reference.stdout
    booked = [line.split(" ", 1)[1] for line in (work / "ledger.txt").read_text().splitlines()]
    expected = [line.split(" ", 1)[1] for line in (work / "ref.txt").read_text().splitlines()]
    assert sorted(booked) == sorted(expected)  # each effect once


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stop_signal_leaves_the_run_interrupted_and_resumable(
    tmp_path: Path, signum: int, code: int
) -> None:
    work, process = _started(tmp_path, "stopped")
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)
    name = signal.Signals(signum).name
    assert process.returncode == code, stderr
    assert f"run stopped interrupted by {name}; continue it with `resumable resume stopped`" in (
        stderr
    )
    assert _status(work, "stopped") == "interrupted"
    _finish(work, "stopped", stdout)


def test_a_second_signal_during_the_stop_does_not_kill_the_process(tmp_path: Path) -> None:
    work, process = _started(tmp_path, "twice")
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    # the exit of whichever signal the process took first (signals pending together are
    # taken in number order), never a death by the second one (-2, -15)
    assert process.returncode in (130, 143), stderr
    assert "already stopping" in stderr
    assert _status(work, "twice") == "interrupted"
    _finish(work, "twice", stdout)


def test_kill_9_leaves_the_run_crashed(tmp_path: Path) -> None:
    work, process = _started(tmp_path, "killed")
    process.kill()
    process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL
    assert _status(work, "killed") == "crashed"
    done = resumable(["resume", "killed"], work, env=ENV)
    assert done.code == 0, done.stderr

"""Attempt limits: a program that kills its own process on every attempt ends `failed` after
`max_attempts` with the reason, is not picked up again, and `resume --force` tries it once more;
a run killed again and again while it progresses never gives up."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from tests.crash.harness import resumable, start
from tests.fleet.harness import LEASE_SECONDS, Process, env_for, wait_until

from .conftest import Place, look

KILLS_ITSELF = """\
import asyncio
import os
import signal

await asyncio.sleep(0)
print("attempt", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
print("never reached")
"""
MAX = 2


def row_of(place: Place, run_id: str) -> dict[str, object]:
    listed = look(["runs", "--json"], place.work, env=place.env)
    assert listed.code == 0, listed.stderr
    return {row["run_id"]: row for row in json.loads(listed.stdout)}[run_id]


def test_a_run_that_kills_itself_gives_up_after_max_attempts(place: Place) -> None:
    (place.work / "dies.py").write_text(KILLS_ITSELF)
    env = {**place.env, "RESUMABLE_DURABILITY_MAX_ATTEMPTS": str(MAX)}
    if place.schema is not None:  # a dead owner's lease lapses sooner
        env["RESUMABLE_DURABILITY_LEASE_SECONDS"] = "1"
    first = resumable(["exec", "dies.py", "--run-id", "d"], place.work, env=env)
    assert first.code == -signal.SIGKILL
    for _ in range(MAX):  # the first attempt progressed (it wrote records): MAX more fail
        if place.schema is not None:  # PostgreSQL: the dead owner's lease must lapse first
            wait_until(
                lambda: row_of(place, "d")["status"] == "crashed",
                timeout=LEASE_SECONDS * 5,
                what="the lease to lapse",
            )
        again = resumable(["resume", "d"], place.work, env=env)
        assert again.code == -signal.SIGKILL, again.stderr
        assert again.stdout == ""  # the print before the kill ran in the first attempt only
    if place.schema is not None:
        wait_until(
            lambda: row_of(place, "d")["status"] == "crashed",
            timeout=LEASE_SECONDS * 5,
            what="the lease to lapse",
        )
    gave_up = resumable(["resume", "d"], place.work, env=env)
    assert gave_up.code == 1
    message = gave_up.stderr.splitlines()[-1]
    assert message.startswith(
        f"resumable: error: run d gave up after {MAX} attempts in a row that ended at record "
    )
    assert f"without getting further: attempt {MAX + 1} ended without a word" in message
    assert "killed or crashed" in message
    assert "--force" in message
    assert row_of(place, "d")["status"] == "failed"
    shown = look(["show", "d"], place.work, env=env)
    assert f"failed: gave up after {MAX} attempts" in shown.stdout

    refused = resumable(["resume", "d"], place.work, env=env)
    assert refused.code == 2
    assert "--force" in refused.stderr
    forced = resumable(["resume", "d", "--force"], place.work, env=env)
    assert forced.code == -signal.SIGKILL
    assert f"--force: trying once more (attempt {MAX + 2})" in forced.stderr
    if place.schema is not None:
        wait_until(
            lambda: row_of(place, "d")["status"] == "crashed",
            timeout=LEASE_SECONDS * 5,
            what="the lease to lapse",
        )
    once_more = resumable(["resume", "d"], place.work, env=env)
    assert once_more.code == 1
    assert f"gave up after {MAX + 1} attempts in a row" in once_more.stderr


def test_workers_give_up_on_a_run_that_kills_them_and_never_claim_it_again(
    place: Place, tmp_path: Path
) -> None:
    if place.schema is None:
        pytest.skip("workers claim runs from PostgreSQL only")
    schema = place.schema
    (place.work / "dies.py").write_text(KILLS_ITSELF)
    env = env_for(schema, RESUMABLE_DURABILITY_MAX_ATTEMPTS=str(MAX))
    queued = resumable(["submit", "dies.py", "--run-id", "d"], place.work, env=env)
    assert queued.code == 0, queued.stderr
    for attempt in range(1, MAX + 2):  # the first progressed, MAX more did not
        cwd = tmp_path / f"worker{attempt}"
        cwd.mkdir()
        worker = Process(["worker", "--poll", "0.05"], cwd, env)
        try:
            assert worker.finish(timeout=LEASE_SECONDS * 10) == -signal.SIGKILL
        finally:
            worker.kill()
        assert worker.matches(r"(started|resumed) run d")
    cwd = tmp_path / "last"
    cwd.mkdir()
    last = Process(["worker", "--poll", "0.05"], cwd, env)
    try:
        last.wait_for(
            rf"failed run d: run d gave up after {MAX} attempts in a row",
            timeout=LEASE_SECONDS * 10,
        )
        row = schema.runs()["d"]
        assert row["status"] == "failed"
        epoch = row["epoch"]
        time.sleep(LEASE_SECONDS * 1.5)  # long enough for a claim to happen, if one could
        assert schema.runs()["d"]["epoch"] == epoch
        assert len(last.matches("claimed run d")) == 1
        assert last.stop() == 0
    finally:
        last.kill()


PROGRESSES = """\
import asyncio
import os
import signal

import resumable

STUCK_AT = int(os.environ.get("STUCK_AT", "-1"))


@resumable.step
async def book(i):
    await asyncio.sleep(0.03)
    with open("ledger.txt", "a") as ledger:
        ledger.write(f"{i}\\n")
    return i


total = 0
for i in range(60):
    if i == STUCK_AT:
        os.kill(os.getpid(), signal.SIGKILL)  # dies here on every attempt, as a bug would
    total += await book(i)
print("total", total)
"""


def _lines(work: Path) -> int:
    ledger = work / "ledger.txt"
    return len(ledger.read_text().splitlines()) if ledger.exists() else 0


def _kill_after_progress(args: list[str], work: Path, env: dict[str, str]) -> None:
    """Run `resumable ARGS`, SIGKILL it from outside once it booked two new steps: the step
    record of the first was written before the second started, so the attempt progressed."""
    before = _lines(work)
    process = start(args, work, env=env)
    deadline = time.monotonic() + 60
    while _lines(work) < before + 2:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run booked nothing new"
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL


def test_a_run_killed_more_often_than_max_attempts_while_it_progresses_finishes(
    tmp_path: Path,
) -> None:
    (tmp_path / "work.py").write_text(PROGRESSES)
    env = {"RESUMABLE_DURABILITY_MAX_ATTEMPTS": "3"}
    _kill_after_progress(["exec", "work.py", "--run-id", "p"], tmp_path, env)
    for _ in range(4):
        _kill_after_progress(["resume", "p"], tmp_path, env)
    shown = look(["show", "p"], tmp_path, env=env)
    assert "attempts: 5; failed in a row without progress: 0 (max_attempts counts these" in (
        shown.stdout
    )
    done = resumable(["resume", "p"], tmp_path, env=env)
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"total {sum(range(60))}"
    booked = (tmp_path / "ledger.txt").read_text().splitlines()
    # each step at least once; only one in flight at a kill may repeat
    assert sorted(set(booked), key=int) == [str(i) for i in range(60)]
    assert len(booked) - 60 <= 5


def test_a_run_that_dies_at_the_same_place_gives_up_however_far_it_got_before(
    tmp_path: Path,
) -> None:
    (tmp_path / "work.py").write_text(PROGRESSES)
    env = {"RESUMABLE_DURABILITY_MAX_ATTEMPTS": "3", "STUCK_AT": "30"}
    _kill_after_progress(["exec", "work.py", "--run-id", "s"], tmp_path, env)
    _kill_after_progress(["resume", "s"], tmp_path, env)  # progress: these two do not count
    reaches = resumable(["resume", "s"], tmp_path, env=env)  # books up to 30, then dies
    assert reaches.code == -signal.SIGKILL
    assert _lines(tmp_path) >= 30
    for failed in range(3):  # each dies at 30 again without a new record
        shown = look(["show", "s"], tmp_path, env=env)
        assert f"failed in a row without progress: {failed} " in shown.stdout
        again = resumable(["resume", "s"], tmp_path, env=env)
        assert again.code == -signal.SIGKILL, again.stderr
    gave_up = resumable(["resume", "s"], tmp_path, env=env)
    assert gave_up.code == 1
    (message,) = [line for line in gave_up.stderr.splitlines() if "gave up" in line]
    assert message.startswith("resumable: error: run s gave up after 3 attempts in a row that ")
    assert "attempt 6 ended without a word" in message
    assert message.endswith("`resumable resume s --force` tries once more")

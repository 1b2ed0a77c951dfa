"""`resumable cancel` on the file store and on PostgreSQL: a run driven by a live process
or a worker stops at its next await and is marked cancelled; a waiting or crashed run is
marked at once; a cancelled run is never resumed or claimed again."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from tests.crash.harness import EXAMPLES, resumable, start, wait_for_file
from tests.fleet.harness import LEASE_SECONDS, Process, env_for, wait_until

from .conftest import Place, look

TICKS = """\
import asyncio

open("started", "w").close()
for tick in range(600):
    await asyncio.sleep(0.05)
    print("tick", tick, flush=True)
print("never reached")
"""


def status_of(place: Place, run_id: str) -> dict[str, object]:
    listed = look(["runs", "--json"], place.work, env=place.env)
    assert listed.code == 0, listed.stderr
    return {row["run_id"]: row for row in json.loads(listed.stdout)}[run_id]


def test_cancel_a_running_local_run_stops_it_at_its_next_await(place: Place) -> None:
    (place.work / "ticks.py").write_text(TICKS)
    running = start(["exec", "ticks.py", "--run-id", "r"], place.work, env=place.env)
    try:
        wait_for_file(place.work / "started", timeout=30)
        asked = look(["cancel", "r", "--reason", "wrong input"], place.work, env=place.env)
        assert asked.code == 0, asked.stderr
        assert "stops at its next await" in asked.stderr
        out, err = running.communicate(timeout=30)
    finally:
        running.kill()
    assert running.returncode == 1, err
    assert "never reached" not in out
    assert "run r cancelled: wrong input" in err
    row = status_of(place, "r")
    assert row["status"] == "cancelled"
    shown = look(["show", "r"], place.work, env=place.env)
    assert "cancelled: wrong input" in shown.stdout
    again = resumable(["resume", "r"], place.work, env=place.env)
    assert again.code == 2
    assert again.stderr.splitlines() == [
        "resumable: error: run r was cancelled (wrong input); it is never resumed "
        "(fork it with `resumable fork r --at N` to run part of it again)"
    ]


def test_cancel_a_waiting_run_marks_it_at_once(place: Place) -> None:
    program = EXAMPLES / "approval" / "approval.pb"
    waiting = resumable(
        ["run", str(program), "--run-id", "w", "--no-input"], place.work, env=place.env
    )
    assert waiting.code == 3, waiting.stderr
    cancelled = look(["cancel", "w"], place.work, env=place.env)
    assert cancelled.code == 0, cancelled.stderr
    assert "run w cancelled" in cancelled.stderr
    assert status_of(place, "w")["status"] == "cancelled"
    answered = look(["answer", "w", "socks"], place.work, env=place.env)
    assert answered.code == 2
    assert "cancelled" in answered.stderr


def test_cancel_a_crashed_run_marks_it_at_once(place: Place) -> None:
    (place.work / "ticks.py").write_text(TICKS)
    crashed = resumable(
        ["exec", "ticks.py", "--run-id", "c"],
        place.work,
        env={**place.env, "RESUMABLE_CRASH_AFTER": "5"},
    )
    assert crashed.code == -9
    # PostgreSQL knows the owner is gone once its lease lapsed
    wait_until(
        lambda: status_of(place, "c")["status"] == "crashed",
        timeout=LEASE_SECONDS * 5,
        what="the run to show as crashed",
    )
    cancelled = look(["cancel", "c", "--reason", "not needed"], place.work, env=place.env)
    assert cancelled.code == 0, cancelled.stderr
    row = status_of(place, "c")
    assert row["status"] == "cancelled"
    steps = look(["steps", "c", "--kind", "status", "--json"], place.work, env=place.env)
    assert [e["value"] for e in json.loads(steps.stdout)] == ["cancelled: not needed"]


@pytest.mark.parametrize(
    ("run", "words"),
    [("nope", ["nope"]), ("done", ["done", "completed"])],
    ids=["unknown run", "finished run"],
)
def test_cancel_of_an_unknown_or_finished_run_is_one_line_exit_2(
    place: Place, run: str, words: list[str]
) -> None:
    (place.work / "quick.py").write_text('print("quick")\n')
    assert resumable(["exec", "quick.py", "--run-id", "done"], place.work, env=place.env).code == 0
    before = look(["steps", "done", "--json"], place.work, env=place.env).stdout
    cancelled = look(["cancel", run], place.work, env=place.env)
    assert cancelled.code == 2
    lines = cancelled.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("resumable: error: ")
    assert all(word in lines[0] for word in words)
    assert look(["steps", "done", "--json"], place.work, env=place.env).stdout == before
    assert status_of(place, "done")["status"] == "completed"


def test_cancel_a_run_held_by_a_worker_releases_it_within_one_lease(
    place: Place, tmp_path: Path
) -> None:
    if place.schema is None:
        pytest.skip("workers claim runs from PostgreSQL only")
    (place.work / "ticks.py").write_text(TICKS)
    queued = resumable(["submit", "ticks.py", "--run-id", "held"], place.work, env=place.env)
    assert queued.code == 0, queued.stderr
    cwd = tmp_path / "worker"
    cwd.mkdir()
    worker = Process(["worker", "--poll", "0.05"], cwd, env_for(place.schema))
    try:
        worker.wait_for(r"started run held", timeout=30)
        wait_for_file(cwd / "started", timeout=30)
        asked_at = time.monotonic()
        asked = look(["cancel", "held", "--reason", "operator"], place.work, env=place.env)
        assert asked.code == 0, asked.stderr
        worker.wait_for(r"cancelled run held: operator", timeout=LEASE_SECONDS * 5)
        assert time.monotonic() - asked_at < LEASE_SECONDS + 2
        row = wait_until(
            lambda: place.schema.runs()["held"] if place.schema else None,
            timeout=10,
            what="the run's row",
        )
        assert row["status"] == "cancelled"
        assert row["owner"] is None
        epoch = row["epoch"]
        time.sleep(LEASE_SECONDS * 1.5)  # long enough for a claim to happen, if one could
        assert place.schema.runs()["held"]["epoch"] == epoch
        assert len(worker.matches(r"claimed run held")) == 1
        assert worker.stop() == 0
    finally:
        worker.kill()
    assert not any("never reached" in line for line in worker.out)

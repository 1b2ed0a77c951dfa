"""Attempt limits: a program that kills its own process on every attempt ends `failed` after
`max_attempts` with the reason, is not picked up again, and `resume --force` tries it once more."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from tests.crash.harness import resumable
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
    for _ in range(MAX - 1):
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
        f"resumable: error: run d gave up after {MAX} attempts: attempt {MAX}"
    )
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
    assert f"--force: trying once more (attempt {MAX + 1})" in forced.stderr
    if place.schema is not None:
        wait_until(
            lambda: row_of(place, "d")["status"] == "crashed",
            timeout=LEASE_SECONDS * 5,
            what="the lease to lapse",
        )
    once_more = resumable(["resume", "d"], place.work, env=env)
    assert once_more.code == 1
    assert f"gave up after {MAX + 1} attempts" in once_more.stderr


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
    for attempt in range(1, MAX + 1):
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
            rf"failed run d: run d gave up after {MAX} attempts", timeout=LEASE_SECONDS * 10
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

"""On stores whose leases expire, a stopped or killed owner does not hold its run up.

Real processes with a 600 s lease: SIGTERM releases the lease at once, and after kill -9
a resume on the same host sees that the owner's pid is gone and takes the run without
waiting the lease out; either way it finishes the run with every effect booked once.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import time
from pathlib import Path

import pytest
from tests.crash.damage import SITES, Site
from tests.crash.harness import EXAMPLES, resumable, start

KINDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]
ENV = {"LEDGER": "ledger.txt", "BOOK_DELAY": "0.4"}


def _site(kind: str, work: Path) -> Site:
    site = SITES[kind]()
    config = site.config()
    if "lease_seconds" in config:
        site.lease_seconds = 600  # type: ignore[misc]
        config = site.config()
    else:
        config += "lease_seconds = 600\n"
    (work / "playbooks.toml").write_text(config)
    shutil.copy(EXAMPLES / "ledger.py", work / "ledger.py")
    return site


def _stop(work: Path, run_id: str, how: signal.Signals) -> int:
    process = start(["exec", "ledger.py", "--run-id", run_id], work, env=ENV)
    ledger = work / "ledger.txt"
    deadline = time.monotonic() + 60
    while not ledger.exists() or len(ledger.read_text().splitlines()) < 2:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run never booked 2 effects"
        time.sleep(0.02)
    process.send_signal(how)
    process.communicate(timeout=60)
    return process.returncode


def _finish(work: Path, run_id: str, status: str) -> None:
    listed = json.loads(resumable(["runs", "--json"], work).stdout)
    assert [row["status"] for row in listed if row["run_id"] == run_id] == [status]
    done = resumable(["resume", run_id], work, env=ENV, timeout=120)
    assert done.code == 0, done.stderr  # not "owned by HOST:PID ... wait for its lease"
    assert "closing balances: {'alice': 9, 'bob': 9}" in done.stdout
    booked = [line.split(" ", 1)[1] for line in (work / "ledger.txt").read_text().splitlines()]
    assert len(set(booked)) == 10
    assert len(booked) - len(set(booked)) <= (1 if status == "crashed" else 0)


@pytest.mark.parametrize("kind", KINDS)
def test_sigterm_releases_the_lease_at_once(tmp_path: Path, kind: str) -> None:
    site = _site(kind, tmp_path)
    try:
        assert _stop(tmp_path, "term", signal.SIGTERM) == 143
        _finish(tmp_path, "term", "interrupted")
    finally:
        asyncio.run(site.cleanup())


@pytest.mark.parametrize("kind", KINDS)
def test_a_resume_takes_the_run_of_an_owner_killed_on_this_host(tmp_path: Path, kind: str) -> None:
    site = _site(kind, tmp_path)
    try:
        assert _stop(tmp_path, "dead", signal.SIGKILL) == -signal.SIGKILL
        # its lease has 600 s to run, but its process is gone: not live, so crashed
        _finish(tmp_path, "dead", "crashed")
    finally:
        asyncio.run(site.cleanup())

"""Synchronous steps called one after another, with no await between them: a kill inside
the last runs only that one again (docs/durability.md, Steps), on every store.

A synchronous step cannot wait for the store, so its record is buffered; the next step
starting is an effect, and these stores write (and with fsync, sync) what is buffered
before it, blocking (PostgreSQL and Redis through a connection of their own). Before, the records went out together at the next await, and a kill
in between ran every one of those steps again.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from tests.crash.damage import SITES
from tests.crash.harness import resumable

PROGRAM = """\
import os
import signal

import resumable


@resumable.step
def book(what):
    with open("ledger.txt", "a") as ledger:
        ledger.write(f"{what} {resumable.idempotency_key()}\\n")
    if what == "c" and not os.path.exists("died"):
        open("died", "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return what


async def three():
    return book("a") + book("b") + book("c")  # program code between them, no await


print("booked", await three())
"""


CASES = [
    ("file", "flush"),
    ("file", "fsync"),
    ("sqlite", "flush"),
    ("sqlite", "fsync"),
    pytest.param("postgres", "flush", marks=pytest.mark.postgres),
    pytest.param("postgres", "fsync", marks=pytest.mark.postgres),
    pytest.param("redis", "flush", marks=pytest.mark.redis),
    pytest.param("redis", "fsync", marks=pytest.mark.redis),
]


@pytest.mark.parametrize(("store", "sync"), CASES)
def test_a_kill_inside_a_synchronous_step_runs_only_that_step_again(
    tmp_path: Path, store: str, sync: str
) -> None:
    (tmp_path / "steps.py").write_text(PROGRAM)
    site = SITES[store]()
    (tmp_path / "playbooks.toml").write_text(site.config())
    try:
        _crash_and_resume(tmp_path, sync)
    finally:
        if store in ("postgres", "redis"):
            asyncio.run(site.cleanup())  # type: ignore[attr-defined]


def _crash_and_resume(tmp_path: Path, sync: str) -> None:
    env = {"RESUMABLE_DURABILITY_SYNC": sync}
    crashed = resumable(["exec", "steps.py", "--run-id", "r"], tmp_path, env=env)
    assert crashed.code == -signal.SIGKILL, crashed.stderr
    resumed = resumable(["resume", "r"], tmp_path, env=env)
    assert resumed.code == 0, resumed.stderr
    assert crashed.stdout + resumed.stdout == "booked abc\n"
    booked = (tmp_path / "ledger.txt").read_text().splitlines()
    a, b, c = booked[:3]
    assert booked == [a, b, c, c]  # only the step in flight again, under its key

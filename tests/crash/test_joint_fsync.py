"""A statement of one await writes its await and boundary records in one append; a kill
before that append runs only that await again, under the same idempotency key."""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

from tests.crash.harness import resumable

TOOLS = '''\
import os
import signal

import resumable


async def book(n):
    with open("ledger.txt", "a") as ledger:
        ledger.write(f"{n} {resumable.idempotency_key()}\\n")
    return n * 10


def kill_before_joint(info):
    """Die right before the first append that carries an await with its statement."""
    if info.kind == "stmt" and info.records == 2 and not os.path.exists("killed"):
        open("killed", "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
'''

SCRIPT = """\
from tools import book
print("start")
a = await book(1)
print("a", a)
b = await book(2)
print("b", b, a + b)
"""


def _work(tmp_path: Path, name: str) -> tuple[Path, dict[str, str]]:
    work = tmp_path / name
    work.mkdir()
    (work / "tools.py").write_text(TOOLS)
    (work / "shape.py").write_text(SCRIPT)
    path = os.pathsep.join(filter(None, [str(work), os.environ.get("PYTHONPATH", "")]))
    return work, {"PYTHONPATH": path, "RESUMABLE_DURABILITY_SYNC": "fsync"}


def _ledger(work: Path) -> list[str]:
    return (work / "ledger.txt").read_text().splitlines()


def test_kill_before_the_joint_append_repeats_only_the_await_in_flight(tmp_path: Path) -> None:
    ref, env = _work(tmp_path, "ref")
    reference = resumable(["exec", "shape.py", "--run-id", "r"], ref, env=env)
    assert reference.code == 0, reference.stderr
    assert reference.stdout == "start\na 10\nb 20 30\n"

    work, env = _work(tmp_path, "crash")
    hooked = {**env, "RESUMABLE_DURABILITY_BEFORE_CHECKPOINT": "tools:kill_before_joint"}
    crashed = resumable(["exec", "shape.py", "--run-id", "r"], work, env=hooked)
    assert crashed.code == -signal.SIGKILL, crashed.stderr  # a joint append was about to run
    assert _ledger(work) == _ledger(ref)[:1]  # book(1) ran, its record was not durable yet

    resumed = resumable(["resume", "r"], work, env=hooked)
    assert resumed.code == 0, resumed.stderr
    assert crashed.stdout + resumed.stdout == reference.stdout
    booked = _ledger(work)
    assert set(booked) == set(_ledger(ref))
    assert Counter(booked)[booked[0]] == 2  # book(1) again, with the same key
    assert len(booked) == 3

"""A crash in the middle of a gather of five tasks: completed branches are not run again."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path

from tests.replay import harness

GATHER = """\
import asyncio

import resumable


@resumable.step
async def branch_effect(i):
    await asyncio.sleep(0.002 * (5 - i))
    with open("ledger.txt", "a") as ledger:
        ledger.write(f"branch {i}\\t{resumable.idempotency_key()}\\n")
    return i * i


finished = []


async def branch(i):
    value = await branch_effect(i)
    finished.append(i)
    return value


results = await asyncio.gather(*(branch(i) for i in range(5)))
print("results", results, "finished", len(finished))
"""


def test_branches_completed_before_the_crash_are_not_run_again(tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "prog.py").write_text(GATHER)
    done = harness.run_cli(["exec", "prog.py", "--run-id", "r"], clean, name="exec")
    assert done.code == 0, done.stderr
    records = harness.records_of(clean)
    # the run record, 5 boundaries, then the five branch records: kill after the third
    work = tmp_path / "crash"
    work.mkdir()
    (work / "prog.py").write_text(GATHER)
    point = 1 + 5 + 3
    assert point < records
    killed = harness.run_cli(
        ["exec", "prog.py", "--run-id", "r"],
        work,
        env={"RESUMABLE_CRASH_AFTER": str(point)},
        name="exec",
    )
    assert killed.code == -signal.SIGKILL
    before = (work / "ledger.txt").read_text().splitlines()
    assert len(before) == 3
    resumed = harness.run_cli(["resume", "r"], work, name="resume")
    assert resumed.code == 0, resumed.stderr
    assert killed.stdout + resumed.stdout == done.stdout
    lines = (work / "ledger.txt").read_text().splitlines()
    assert lines[:3] == before
    # each branch booked once, under one key: the three completed ones were not re-run
    assert Counter(line.split("\t")[0] for line in lines) == Counter(
        f"branch {i}" for i in range(5)
    )
    assert len({line.split("\t")[1] for line in lines}) == 5
    # replay discards nothing asyncio would complain about (issue 17, item 7)
    assert "never retrieved" not in resumed.stderr
    assert "CancelledError" not in resumed.stderr

"""@resumable.step and journaled(): passthrough outside a run, answered on replay inside one."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from tests.replay import harness

import resumable
from resumable.durability.effects.steps import journaled


def test_a_step_outside_a_durable_run_is_the_plain_function() -> None:
    calls: list[int] = []

    @resumable.step
    def add(a: int, b: int) -> int:
        calls.append(a)
        return a + b

    @resumable.step
    async def mul(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a * b

    assert add(2, 3) == 5
    assert asyncio.run(mul(2, 3)) == 6
    assert calls == [2]
    assert add.__name__ == "add"
    assert journaled("clock", lambda: 42) == 42


def test_step_on_something_not_callable_says_what_to_do() -> None:
    with pytest.raises(TypeError, match=r"@resumable.step decorates a function, got int 3"):
        resumable.step(3)  # type: ignore[call-overload]


UNPICKLABLE = """\
import asyncio

import resumable


@resumable.step
def open_channel(name):
    with open("ledger.txt", "a") as ledger:
        ledger.write(f"open {name}\\n")
    return (n for n in range(3))  # a generator: it cannot be pickled


async def main():
    channel = open_channel("a")
    await asyncio.sleep(0)
    print("first", next(channel))


await main()
"""


def test_a_step_result_that_cannot_be_pickled_is_named_and_runs_again(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    (work / "prog.py").write_text(UNPICKLABLE)
    done = harness.run_cli(["exec", "prog.py", "--run-id", "r"], work, name="exec")
    assert done.code == 0, done.stderr
    assert "open_channel returned a generator that cannot be pickled" in done.stderr
    assert "will run again" in done.stderr
    # killed right after the record of the foreign await that follows the step
    records = harness.records_of(work)
    again = tmp_path / "again"
    again.mkdir()
    (again / "prog.py").write_text(UNPICKLABLE)
    killed = harness.run_cli(
        ["exec", "prog.py", "--run-id", "r"],
        again,
        env={"RESUMABLE_CRASH_AFTER": str(records - 2)},
        name="exec",
    )
    assert killed.code == -signal.SIGKILL
    resumed = harness.run_cli(["resume", "r"], again, name="resume")
    assert resumed.code == 0, resumed.stderr
    assert killed.stdout + resumed.stdout == done.stdout
    assert (again / "ledger.txt").read_text() == "open a\nopen a\n"

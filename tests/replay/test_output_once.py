"""Output exactly once across killed resumes (issue 17, item 6).

A resume killed between printing and its next durable record used to print the line
again. Here a run is killed after a record, its resume is killed too (right after its
own first or second record), and a last resume finishes it: stdout is the program's,
each line once.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from tests.replay import harness

PROGRAM = "multi_statement.py"


@pytest.mark.parametrize(("first", "second"), [(9, 1), (12, 2)])
def test_a_killed_resume_prints_no_line_twice(tmp_path: Path, first: int, second: int) -> None:
    expected = harness.reference(tmp_path, PROGRAM)
    work = harness.workdir(tmp_path, PROGRAM, f"twice{first}")
    killed = harness.run_cli(
        ["exec", PROGRAM, "--run-id", "r"],
        work,
        env={"RESUMABLE_CRASH_AFTER": str(first)},
        name="exec",
    )
    assert killed.code == -signal.SIGKILL
    resume_killed = harness.run_cli(
        ["resume", "r"], work, env={"RESUMABLE_CRASH_AFTER": str(second)}, name="resume1"
    )
    assert resume_killed.code == -signal.SIGKILL
    done = harness.run_cli(["resume", "r"], work, name="resume2")
    assert done.code == 0, done.stderr
    assert killed.stdout + resume_killed.stdout + done.stdout == expected.stdout
    assert harness.ledger(work) == expected.ledger


def test_a_statement_ending_in_sys_exit_prints_its_output(tmp_path: Path) -> None:
    """An ``if`` that prints to stdout and stderr, then calls ``sys.exit(3)``: both lines
    come out once, as under plain CPython, killed before the exit or not."""
    program = "exit_in_if.py"
    expected = harness.reference(tmp_path, program)
    assert expected.code == 3
    assert expected.stderr.count("giving up with 6") == 1
    got, records = harness.clean(tmp_path, program)
    assert (got.code, got.stdout) == (expected.code, expected.stdout)
    assert got.stderr.count("giving up with 6") == 1, got.stderr
    for point in (records - 2, records - 1):
        crashed = harness.crashed(tmp_path, program, point)
        assert (crashed.code, crashed.stdout) == (expected.code, expected.stdout)
        assert crashed.stderr.count("giving up with 6") == 1, crashed.stderr

"""A task (or generator) the code keeps across turns survives a kill at any record of the run.

The code of an embedded run starts a task in one turn and lets it run on in the next ones
(it moves while later statements await); the task's effects are calls of a tool. Killed
after any record and opened again, the run gives each turn the outcome an uninterrupted
run gave and books every effect once: the replay window restores the namespace from
before the task's statement and runs those statements again, across turns, answering the
task's awaits and tool calls from the log in the order they arrived.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.embedded import run_program

HERE = Path(__file__).parent


@pytest.mark.parametrize(
    ("program", "last", "effects"),
    [
        pytest.param("tasks_program.py", "(6, 6) '[0, 10, 20, 30, 40, 50]\\n' None", 6, id="task"),
        pytest.param(
            "generators_program.py",
            "(1, [2, 3, 4]) '[0, 10, 20, 30, 40]\\n' None",
            5,
            id="generator",
        ),
    ],
)
def test_a_task_or_generator_kept_across_turns_resumes_exactly_after_a_kill_at_any_record(
    tmp_path: Path, program: str, last: str, effects: int
) -> None:
    path = HERE / program
    (tmp_path / "clean").mkdir()
    clean = run_program(path, tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr
    assert clean.stdout.splitlines()[-2] == last
    ledger = (tmp_path / "clean" / "ledger").read_text()
    assert ledger == "".join(f"book {n}\n" for n in range(effects))
    wrong = []
    n = 1
    while True:
        folder = tmp_path / f"crash-{n}"
        folder.mkdir()
        crashed = run_program(path, folder, crash_after=n)
        resumed = run_program(path, folder)
        assert resumed.returncode == 0, (n, resumed.stderr)
        said = resumed.stdout
        if said.count("\n") == 1:  # killed after its last record: only reported
            expected = clean.stdout.splitlines(keepends=True)[-1]
        else:
            expected = clean.stdout
        booked = (folder / "ledger").read_text() if (folder / "ledger").exists() else ""
        if said != expected or booked != ledger:
            wrong.append((n, said.splitlines(), booked.splitlines()))
        if crashed.returncode == 0:
            break
        assert crashed.returncode == -9, crashed.stderr
        n += 1
    assert n >= 20
    assert not wrong, f"killed after these records the run went otherwise: {wrong}"

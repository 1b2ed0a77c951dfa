"""The program's own appends happen once across a kill, and the file is never cut back.

A run is killed right after a record of a statement that appends to files (opened inside
``main()``'s methods, or kept open from an earlier statement); another process appends a
line of its own to the same file before the resume. After the resume each of the
program's lines is there once, in its order, and the other process's line is kept.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from tests.replay import harness

OTHER = "a line from another process\n"


@pytest.mark.parametrize(
    ("program", "name", "point"),
    [("notes_in_method.py", "notes.log", 14), ("file_kept_open.py", "journal.txt", 9)],
)
def test_a_resume_appends_once_and_keeps_what_another_process_appended(
    tmp_path: Path, program: str, name: str, point: int
) -> None:
    expected = harness.reference(tmp_path, program)
    work = harness.workdir(tmp_path, program, f"other{point}")
    killed = harness.run_cli(
        ["exec", program, "--run-id", "r"],
        work,
        env={"RESUMABLE_CRASH_AFTER": str(point)},
        name="exec",
    )
    assert killed.code == -signal.SIGKILL
    before = (work / name).read_text()
    assert before  # the kill came in the middle of the appends
    with open(work / name, "a") as other:
        other.write(OTHER)
    done = harness.run_cli(["resume", "r"], work, name="resume")
    assert done.code == expected.code, done.stderr
    text = (work / name).read_text()
    assert text.startswith(before + OTHER)
    assert text.replace(OTHER, "", 1) == expected.files[name].decode()

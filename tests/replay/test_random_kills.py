"""kill -9 from outside at random moments, of ``exec`` and of ``resume`` alike.

Not at record boundaries: only the foreign await or step in flight may run again, under
the same idempotency key, and no line of stdout is ever printed twice. A kill between a
record's write and the write of the output it covers (one ``write`` call right after) loses
that batch's lines: the window durability.md names, which a loaded machine hits now and
then (the kernel preempts a process as a system call returns, and a process killed while
preempted dies there). So each kill may lose the lines of one batch, never more.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import signal
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.replay import harness

from resumable.store.filesystem.segments import scan_frames

SAMPLE = ("agent_class.py", "gather_five.py", "sync_steps.py")


def kill_and_resume(
    root: Path, program: str, kills: list[float], name: str
) -> tuple[harness.Observed, int]:
    """Run ``program``, killing exec and then each resume after the given delays, then
    resume to the end. Returns what was observed and how many kills landed."""
    work = harness.workdir(root, program, name)
    stdout, stderr = "", ""
    args = ["exec", program, "--run-id", "r"]
    for landed, delay in enumerate([*kills, None]):
        done = harness.run_cli(args, work, kill_after=delay, name=f"part{landed}")
        stdout += done.stdout
        stderr += done.stderr
        if args[0] == "resume" and done.code == 2 and "already " in done.stderr:
            # the kill landed after the run's last record, while the process was exiting:
            # the run had ended, with the exit code its program gave (a failed run's is in
            # its error, `SystemExit: N`)
            code = 0 if "already completed" in done.stderr else _exit_code(work)
            return harness.Observed(code, stdout, harness.ledger(work), stderr), landed - 1
        if done.code != -signal.SIGKILL:
            return harness.Observed(done.code, stdout, harness.ledger(work), stderr), landed
        # killed before the run's first record: nothing ran, nothing to resume
        log = work / ".resumable" / "runs" / "r" / "log"
        if any(scan_frames(segment.read_bytes()).records for segment in log.glob("*.seg")):
            args = ["resume", "r"]
        else:
            shutil.rmtree(work / ".resumable", ignore_errors=True)
            args = ["exec", program, "--run-id", "r"]
    raise AssertionError("unreachable")


def _exit_code(work: Path) -> int:
    shown = harness.run_cli(["show", "r", "--json"], work, name="show")
    message = (json.loads(shown.stdout).get("error") or {}).get("message", "")
    exited = re.fullmatch(r"SystemExit: (\d+)", message)
    return int(exited[1]) if exited else 1


def check_output(got: str, want: str, landed: int) -> None:
    """``got`` is ``want`` with at most ``landed`` runs of consecutive lines missing (one
    batch per kill, see the module's docstring), in order, and no line added or repeated."""
    have, full = got.splitlines(keepends=True), want.splitlines(keepends=True)
    lost, i = 0, 0
    for line in have:
        if i < len(full) and line == full[i]:
            i += 1
            continue
        skipped = i
        while i < len(full) and full[i] != line:
            i += 1
        assert i < len(full), f"printed but not in the uninterrupted output: {line!r}"
        lost += i > skipped
        i += 1
    lost += i < len(full)
    assert lost <= landed, f"{lost} runs of lines lost in {landed} kills:\n{got}"


def check_effects(keyed: list[str], landed: int, expected: list[str]) -> None:
    """Every effect of ``expected`` happened; an extra one is a call in flight at a kill,
    repeated under the same idempotency key (at most one per kill)."""
    want = Counter(expected)
    got = Counter(line.split("\t")[0] for line in keyed)
    assert not want - got, f"effects lost: {want - got}"
    extra = got - want
    assert sum(extra.values()) <= landed, f"more repeats than kills: {extra}"
    same_key = Counter(keyed)
    for effect, count in extra.items():
        repeated = sum(n - 1 for line, n in same_key.items() if line.split("\t")[0] == effect)
        assert repeated >= count, f"{effect} repeated under another key"


@pytest.mark.parametrize("program", SAMPLE)
def test_random_kills_repeat_only_the_call_in_flight(tmp_path: Path, program: str) -> None:
    expected = harness.reference(tmp_path, program)
    rng = random.Random(program)
    for trial in range(2):
        kills = [rng.uniform(0.05, 0.6)]
        got, landed = kill_and_resume(tmp_path, program, kills, f"kill{trial}")
        assert got.code == expected.code, got.stderr
        check_output(got.stdout, expected.stdout, landed)
        work = tmp_path / f"{Path(program).stem}-kill{trial}"
        check_effects(harness.ledger(work, keys=True), landed, expected.ledger)


@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(kills=st.lists(st.floats(min_value=0.0, max_value=0.8), min_size=1, max_size=3))
def test_killing_exec_and_resume_never_duplicates_a_line(
    tmp_path_factory: pytest.TempPathFactory, kills: list[float]
) -> None:
    root = tmp_path_factory.mktemp("kills")
    program = "agent_class.py"
    expected = harness.reference(root, program)
    got, landed = kill_and_resume(root, program, kills, "k")
    check_output(got.stdout, expected.stdout, landed)
    assert got.code == expected.code


def test_random_kills_on_fsync_repeat_no_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default ``sync = "fsync"``: a line is printed as soon as its record is written,
    so a kill during the record's fsync loses nothing (and repeats nothing); one between the
    write and the print loses that batch. A sample of 25 kills; ``scripts/replay_sweep.py
    printing_agent.py --random-kills 200 --sync fsync`` runs the long version."""
    monkeypatch.setenv("RESUMABLE_TEST_SYNC", "fsync")
    program = "printing_agent.py"
    expected = harness.reference(tmp_path, program)
    rng = random.Random(program)
    landed_total = trial = 0
    while landed_total < 25:
        kills = [rng.uniform(0.02, 0.6) for _ in range(rng.choice((1, 2)))]
        got, landed = kill_and_resume(tmp_path, program, kills, f"fsync{trial}")
        assert got.code == expected.code, got.stderr
        check_output(got.stdout, expected.stdout, landed)
        work = tmp_path / f"{Path(program).stem}-fsync{trial}"
        check_effects(harness.ledger(work, keys=True), landed, expected.ledger)
        landed_total += landed
        trial += 1

"""Process state in the corpus: files, locks, queues, context variables, random, logging, sets.

Each program: ``resumable exec`` equals plain CPython (stdout, exit code, files), and so does a
run killed after record N and resumed - in a process started with another hash seed, which the
command replaces with the run's. CI samples N; ``python scripts/state_sweep.py`` tries every N.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from tests.crash.harness import resumable
from tests.replay.state_harness import (
    PROGRAMS,
    SEED,
    clean,
    crashed_and_resumed,
    plain,
    record_count,
    spread,
)

STATE_PROGRAMS = sorted(PROGRAMS.glob("state_*.py"))


@pytest.mark.parametrize("program", STATE_PROGRAMS, ids=lambda p: p.stem)
def test_a_state_program_resumes_exactly(program: Path, tmp_path: Path) -> None:
    reference = plain(program, tmp_path)
    assert reference.code == 0
    done, kinds = clean(program, tmp_path)
    assert done == reference
    for after in spread(len(kinds), 3):
        assert crashed_and_resumed(program, tmp_path, after, resume_seed="7") == reference, after


@pytest.mark.parametrize("program", STATE_PROGRAMS, ids=lambda p: p.stem)
def test_state_restored_at_a_statement_boundary_is_exact(program: Path, tmp_path: Path) -> None:
    """Killed right after a statement's record: nothing replays, the restored state goes on."""
    reference = plain(program, tmp_path)
    _, kinds = clean(program, tmp_path)
    boundaries = [seq for seq, kind in enumerate(kinds, 1) if kind == "stmt"]
    for after in boundaries[1 :: max(1, len(boundaries) // 3)]:
        assert crashed_and_resumed(program, tmp_path, after, resume_seed="7") == reference, after


def test_a_run_started_without_a_hash_seed_gets_one_and_keeps_it(tmp_path: Path) -> None:
    program = PROGRAMS / "state_set_order.py"
    work = tmp_path / "unpinned"
    work.mkdir()
    (work / "program.py").write_text(program.read_text())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    probe = ["exec", "program.py", "--run-id", "probe"]
    counted = resumable(probe, work, env={"PYTHONHASHSEED": "1"})
    assert counted.code == 0, counted.stderr
    middle = record_count(work, "probe") // 2
    os.environ.pop("PYTHONHASHSEED", None)
    try:
        crashed = resumable(
            ["exec", "program.py", "--run-id", "r"],
            work,
            env={"RESUMABLE_CRASH_AFTER": str(middle)},
        )
        resumed = resumable(["resume", "r"], work)
    finally:
        if "PYTHONHASHSEED" in env:
            os.environ["PYTHONHASHSEED"] = env["PYTHONHASHSEED"]
    assert resumed.code == 0, resumed.stderr
    meta = json.loads((work / ".resumable" / "runs" / "r" / "meta.json").read_text())
    seed = meta["extra"]["hash_seed"]
    assert isinstance(seed, int)
    reference = plain(program, tmp_path, seed=str(seed))
    assert crashed.stdout + resumed.stdout == reference.stdout


def _meta(work: Path, run_id: str) -> dict[str, Any]:
    return dict(json.loads((work / ".resumable" / "runs" / run_id / "meta.json").read_text()))


def test_runs_of_one_store_share_its_seed_and_another_store_has_its_own(tmp_path: Path) -> None:
    program = PROGRAMS / "state_set_order.py"
    outputs: dict[str, str] = {}
    for store, run_id in (("a", "one"), ("a", "two"), ("b", "three")):
        work = tmp_path / store
        work.mkdir(exist_ok=True)
        (work / "program.py").write_text(program.read_text())
        # an empty PYTHONHASHSEED is unset to Python too
        done = resumable(
            ["exec", "program.py", "--run-id", run_id], work, env={"PYTHONHASHSEED": ""}
        )
        assert done.code == 0, done.stderr
        outputs[run_id] = done.stdout
    seeds = {
        r: _meta(tmp_path / s, r)["extra"]["hash_seed"]
        for s, r in (("a", "one"), ("a", "two"), ("b", "three"))
    }
    assert seeds["one"] == seeds["two"] != seeds["three"]
    for run_id, seed in seeds.items():
        (tmp_path / run_id).mkdir()
        assert outputs[run_id] == plain(program, tmp_path / run_id, seed=str(seed)).stdout


def test_a_run_recorded_by_a_python_that_hashes_otherwise_resumes_with_a_warning(
    tmp_path: Path,
) -> None:
    """Started again with the run's seed, this process still hashes otherwise: it says so and
    goes on, instead of starting itself again and again."""
    program = PROGRAMS / "state_set_order.py"
    work = tmp_path / "work"
    work.mkdir()
    (work / "program.py").write_text(program.read_text())
    env = {"PYTHONHASHSEED": SEED}
    crashed = resumable(
        ["exec", "program.py", "--run-id", "r"], work, env={**env, "RESUMABLE_CRASH_AFTER": "4"}
    )
    assert crashed.code == -signal.SIGKILL, crashed.stderr
    meta_path = work / ".resumable" / "runs" / "r" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["extra"]["hash_probe"] += 1  # what another Python's hash of the probe would look like
    meta_path.write_text(json.dumps(meta))

    resumed = resumable(["resume", "r"], work, env={"PYTHONHASHSEED": "1"}, timeout=30)
    assert resumed.code == 0, resumed.stderr
    assert (
        f"recorded by a Python that hashes strings otherwise, even with PYTHONHASHSEED={SEED}"
        in resumed.stderr
    )
    assert crashed.stdout + resumed.stdout == plain(program, tmp_path).stdout


RESTORED_SET = """\
import asyncio
words = {f"word{i}" for i in range(12)}
await asyncio.sleep(0)
print(list(words))
"""


def test_a_set_restored_from_a_checkpoint_iterates_in_its_old_order(tmp_path: Path) -> None:
    program = tmp_path / "restored_set.py"
    program.write_text(RESTORED_SET)
    reference = plain(program, tmp_path)
    _, kinds = clean(program, tmp_path)
    after = kinds.index("stmt") + 2  # the set's statement is done: it is restored, then printed
    assert crashed_and_resumed(program, tmp_path, after, resume_seed="7") == reference


SET_WITH_DELETIONS = """\
import asyncio
words = {f"word{i}" for i in range(40)}
for i in range(0, 40, 3):
    words.discard(f"word{i}")
first = words.pop()
frozen = frozenset(w.upper() for w in words)
await asyncio.sleep(0)
print(first, list(words), list(frozen))
words.update(f"more{i}" for i in range(25))
await asyncio.sleep(0)
print(words.pop(), list(words))
"""


def test_a_set_with_deletions_iterates_pops_and_grows_after_a_resume_as_before(
    tmp_path: Path,
) -> None:
    """Deleted items leave dummies and ``pop`` moves its finger: set(items) would lose both."""
    program = tmp_path / "set_with_deletions.py"
    program.write_text(SET_WITH_DELETIONS)
    reference = plain(program, tmp_path)
    assert reference.code == 0
    _, kinds = clean(program, tmp_path)
    boundaries = [seq for seq, kind in enumerate(kinds, 1) if kind == "stmt"]
    for after in boundaries[4:]:  # the sets are made: each later boundary restores them
        assert crashed_and_resumed(program, tmp_path, after, resume_seed="7") == reference, after


def test_clock_and_random_values_are_the_recorded_ones_after_a_resume(tmp_path: Path) -> None:
    """Values differ from run to run, so what is compared is what follows from them: every
    value the program holds after the resume is the one its ledger line recorded, each line
    written once, and stdout is a plain run's."""
    program = PROGRAMS / "nondeterminism_clock_random.py"
    reference = plain(program, tmp_path)
    assert reference.stdout == "4 True\nTrue 3\n"
    done, kinds = clean(program, tmp_path)
    assert (done.code, done.stdout) == (0, reference.stdout)
    awaits = [seq for seq, kind in enumerate(kinds, 1) if kind == "await"]
    for after in [awaits[i - 1] for i in spread(len(awaits) + 1, 3)]:  # mid-statement: replayed
        resumed = crashed_and_resumed(program, tmp_path, after, resume_seed="7")
        assert (resumed.code, resumed.stdout) == (0, reference.stdout), after
        assert len(resumed.files["ledger.txt"].splitlines()) == 4, after

"""The string hash seed across a fleet: one per store, so a run resumed by any worker hashes alike.

A program builds a set of strings, books effects (steps), then prints the set: a crash among
the effects replays the statement that built it, so the set is built again in the resuming
process, and only the same hash seed gives the order an uninterrupted run printed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .harness import Process, Schema, env_for, read_lines, resumable, wait_until

pytestmark = pytest.mark.postgres

Spawn = Callable[..., Process]
DELAY = "0.3"
CRASH_AFTER = "8"
"""The exec'd program's log: run, five statements, then one record per effect: two booked."""

SETS = """\
import asyncio
import os

import resumable


@resumable.step
async def book(n):
    await asyncio.sleep(float(os.environ.get("BOOK_DELAY", "0")))
    with open(os.environ["LEDGER"], "a") as ledger:
        ledger.write(f"{resumable.idempotency_key()} {n}\\n")


async def main():
    words = {f"word{i}" for i in range(40)}  # built before the crash, iterated after it
    for n in range(6):
        await book(n)
    print(list(words))
    print(list({f"late{i}" for i in range(40)}))
    print(os.environ["PYTHONHASHSEED"])


await main()
"""

PLAIN = """\
import ast, asyncio, sys
code = compile(open(sys.argv[1]).read(), sys.argv[1], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
asyncio.run(eval(code, {"__name__": "__main__"}))
"""


def _program(tmp_path: Path) -> Path:
    program = tmp_path / "sets.py"
    program.write_text(SETS, encoding="utf-8")
    return program


def _plain(program: Path, seed: int, ledger: Path) -> list[str]:
    """What CPython itself prints, started with ``seed``."""
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "LEDGER": str(ledger)}
    done = subprocess.run(
        [sys.executable, "-c", PLAIN, str(program)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


def _extra(schema: Schema, run_id: str) -> dict[str, Any]:
    (row,) = schema.query("SELECT meta FROM {s}.runs WHERE run_id = $1", run_id)
    meta = row["meta"]
    return dict((json.loads(meta) if isinstance(meta, str) else meta)["extra"])


def _submit(schema: Schema, tmp_path: Path, program: Path) -> str:
    done = resumable(["submit", str(program)], tmp_path, env_for(schema))
    assert done.code == 0, done.stderr
    return done.stdout.strip()


def _effects(ledger: Path, run_id: str) -> list[str]:
    """The run's effects, each once (a repeat only of the one in flight, under its key)."""
    lines = [line for line in read_lines(ledger) if line.startswith(f"{run_id}/")]
    assert len(lines) - len(set(lines)) <= 1, lines
    return [line.removeprefix(f"{run_id}/") for line in dict.fromkeys(lines)]


BOOKED = [f"main/0.5.{n} {n}" for n in range(6)]
"""Every effect of the program, in order: the keys of the statement ``await main()``."""


def _gone(pid: int) -> bool:
    """The process has ended (a zombie has too: it runs nothing)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def test_a_run_killed_on_one_worker_prints_its_sets_on_another_as_if_uninterrupted(
    schema: Schema, spawn: Spawn, tmp_path: Path
) -> None:
    program = _program(tmp_path)
    ledger = tmp_path / "ledger.txt"
    # neither worker is started with the store's seed: each starts itself again with it
    workers = (
        spawn("worker", LEDGER=str(ledger), BOOK_DELAY=DELAY, PYTHONHASHSEED="random"),
        spawn("worker", LEDGER=str(ledger), BOOK_DELAY=DELAY, PYTHONHASHSEED="1"),
    )
    for worker in workers:
        worker.wait_for(r"ready \(concurrency", timeout=20)
    run_id = _submit(schema, tmp_path, program)
    first = wait_until(
        lambda: next((w for w in workers if w.matches(f"started run {run_id}")), None),
        timeout=20,
        what=f"a worker to start {run_id}",
    )
    (second,) = [w for w in workers if w is not first]
    wait_until(lambda: len(read_lines(ledger)) >= 3, timeout=20, what="three effects")

    first.signal(signal.SIGKILL)
    assert first.finish() == -signal.SIGKILL
    second.wait_for(f"resumed run {run_id} from record", timeout=20)
    second.wait_for(f"completed run {run_id}", timeout=30)
    uninterrupted = _submit(schema, tmp_path, program)
    second.wait_for(f"completed run {uninterrupted}", timeout=30)
    assert second.stop() == 0

    seed = _extra(schema, run_id)["hash_seed"]
    assert _extra(schema, uninterrupted)["hash_seed"] == seed
    assert not second.matches("child process")  # both hash with the store's seed already
    assert first.out == []
    assert second.out[:3] == second.out[3:]  # the resumed run printed what the other one did
    assert second.out[:3] == _plain(program, seed, tmp_path / "plain.txt")
    assert second.out[2] == str(seed)
    assert _effects(ledger, run_id) == BOOKED
    assert _effects(ledger, uninterrupted) == BOOKED


def test_exec_submit_and_worker_share_the_store_seed_unless_exec_is_given_one(
    schema: Schema, spawn: Spawn, tmp_path: Path
) -> None:
    program = _program(tmp_path)
    env = env_for(schema, LEDGER=str(tmp_path / "ledger.txt"))
    unset = {k: v for k, v in env.items() if k != "PYTHONHASHSEED"}
    for run_id in ("one", "two"):
        done = resumable(["exec", str(program), "--run-id", run_id], tmp_path, unset)
        assert done.code == 0, done.stderr
    given = resumable(
        ["exec", str(program), "--run-id", "given"], tmp_path, {**unset, "PYTHONHASHSEED": "7"}
    )
    assert given.code == 0, given.stderr
    queued = _submit(schema, tmp_path, program)
    worker = spawn("worker", LEDGER=str(tmp_path / "ledger.txt"), PYTHONHASHSEED="7")
    worker.wait_for(f"completed run {queued}", timeout=30)
    assert worker.stop() == 0

    seed = _extra(schema, "one")["hash_seed"]
    assert isinstance(seed, int)
    assert {_extra(schema, r)["hash_seed"] for r in ("one", "two", queued)} == {seed}
    assert worker.out[2] == str(seed)  # the worker replaced its PYTHONHASHSEED=7 with it
    assert _extra(schema, "given")["hash_seed"] == 7
    assert given.stdout.splitlines()[2] == "7"
    assert seed != 7  # (a store whose seed is 7: one in four billion)


def _crashed_with_seed_7(schema: Schema, tmp_path: Path, ledger: Path) -> list[str]:
    """A run exec'd with PYTHONHASHSEED=7 and killed after two effects; and what it prints
    uninterrupted (another run of the same store, with the same seed)."""
    program = _program(tmp_path)
    env = env_for(schema, PYTHONHASHSEED="7", BOOK_DELAY=DELAY)
    alone = resumable(
        ["exec", str(program), "--run-id", "alone"],
        tmp_path,
        {**env, "LEDGER": str(tmp_path / "alone.txt"), "BOOK_DELAY": "0"},
    )
    assert alone.code == 0, alone.stderr
    crashed = resumable(
        ["exec", str(program), "--run-id", "trip"],
        tmp_path,
        {**env, "LEDGER": str(ledger), "RESUMABLE_CRASH_AFTER": CRASH_AFTER},
    )
    assert crashed.code == -signal.SIGKILL, crashed.stderr
    assert crashed.stdout == ""
    assert _extra(schema, "trip")["hash_seed"] == 7
    return alone.stdout.splitlines()


def _child_of(worker: Process, *, timeout: float = 20) -> int:
    found = worker.wait_for(
        r"run trip hashes strings with PYTHONHASHSEED=7: driving it in child process (\d+)",
        timeout=timeout,
    )
    return int(found[1])


def _handed_off_midway(
    schema: Schema, spawn: Spawn, tmp_path: Path
) -> tuple[list[str], Process, int]:
    """The run crashed with seed 7 and what it prints uninterrupted; a worker, once its child
    drives the run (its lease lapsed) and booked more; the child's pid."""
    ledger = tmp_path / "ledger.txt"
    reference = _crashed_with_seed_7(schema, tmp_path, ledger)
    worker = spawn("worker", LEDGER=str(ledger), BOOK_DELAY=DELAY)
    child = _child_of(worker)
    worker.wait_for("resumed run trip from record 8", timeout=20)
    wait_until(lambda: len(read_lines(ledger)) >= 4, timeout=20, what="four effects")
    return reference, worker, child


def test_a_run_recorded_with_another_seed_dies_with_its_worker_and_is_finished_by_the_next(
    schema: Schema, spawn: Spawn, tmp_path: Path
) -> None:
    reference, first, child = _handed_off_midway(schema, spawn, tmp_path)
    ledger = tmp_path / "ledger.txt"
    first.signal(signal.SIGKILL)
    assert first.finish() == -signal.SIGKILL
    wait_until(lambda: _gone(child), timeout=10, what="the child to die with its worker")

    second = spawn("worker", LEDGER=str(ledger), BOOK_DELAY=DELAY)
    assert _child_of(second) != child
    second.wait_for("resumed run trip from record", timeout=20)
    second.wait_for("completed run trip", timeout=30)
    assert second.stop() == 0

    assert first.out == []
    assert second.out == reference
    assert reference[2] == "7"
    assert _effects(ledger, "trip") == BOOKED
    assert second.matches(r"stopped: 1 claimed, 1 completed")
    assert not second.matches("warning")


def test_a_stopping_worker_passes_the_stop_to_its_child_and_the_next_worker_takes_over(
    schema: Schema, spawn: Spawn, tmp_path: Path
) -> None:
    reference, first, child = _handed_off_midway(schema, spawn, tmp_path)
    ledger = tmp_path / "ledger.txt"
    assert first.stop() == 0  # SIGTERM: the child finishes its current effect and lets go
    assert _gone(child)
    stopped = first.wait_for(r"stopped run trip: after record (\d+); released", timeout=1)
    assert first.matches(r"stopped: 1 claimed, 1 stopped")
    row = schema.runs()["trip"]
    assert (row["status"], row["owner"]) == ("running", None)  # claimable at once

    second = spawn("worker", LEDGER=str(ledger))
    second.wait_for(f"resumed run trip from record {stopped[1]} ", timeout=10)
    second.wait_for("completed run trip", timeout=30)
    assert second.stop() == 0

    assert first.out == []
    assert second.out == reference
    assert read_lines(ledger) == [f"trip/{line}" for line in BOOKED]  # nothing booked twice

"""`fork` killed while it writes the new run leaves a fork marked unfinished (real processes).

A fork is written in several store calls: the run is created, its blobs, its records, the
snapshot a pruned parent's fork starts from, then its metadata says it can run. A fork
killed (SIGKILL) after any of them but the last may lack records, its edits or its
snapshot: resumed, it would run something nobody asked for, or fail as damaged. It is
listed ``unfinished`` with what to do, ``resume`` refuses it (exit 2), ``gc`` deletes it,
the parent is untouched, and forking again works.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.crash.damage import (
    FULL_STDOUT,
    LEDGER,
    PRUNED,
    SNAPSHOTS,
    Site,
    across_stores,
    booked,
    log_seqs,
    printed,
    resumes_to_the_end,
    run_script,
)
from tests.crash.harness import _env, resumable

WRITES = ("create_run", "put_blob", "append", "put_snapshot", "put_meta")

KILLER = f"""\
import os, signal, sys
from resumable.durability.runs import session

kill_after = int(os.environ["KILL_AFTER_WRITES"])
writes = []


def killing(name, write):
    async def wrapper(self, *args, **kwargs):
        done = await write(self, *args, **kwargs)
        writes.append(name)
        print("wrote", name, file=sys.stderr, flush=True)
        if len(writes) == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        return done

    return wrapper


real_store_for = session.store_for


def store_for(settings, config):
    store = real_store_for(settings, config)
    kind = type(store)
    if not getattr(kind, "killing", False):
        kind.killing = True
        for name in {WRITES!r}:
            setattr(kind, name, killing(name, getattr(kind, name)))
    return store


session.store_for = store_for  # before the command line imports it
sys.argv = ["resumable", *sys.argv[1:]]
from resumable.launcher import main

main()
"""


def _killed(work: Path, env: dict[str, str], kill_after: int, *args: str) -> list[str]:
    """Run ``resumable ARGS``, killed right after its ``kill_after``-th store write; the
    writes it made (all of them, with exit 0, if it made fewer)."""
    done = subprocess.run(
        [sys.executable, "-c", KILLER, *args],
        cwd=work,
        # a seed of its own: the command must not start again, without the patch
        env={**_env(env), "KILL_AFTER_WRITES": str(kill_after), "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    writes = [line.split()[1] for line in done.stderr.splitlines() if line.startswith("wrote ")]
    expected = -signal.SIGKILL if len(writes) == kill_after else 0
    assert done.returncode == expected, done.stderr
    return writes


def _statuses(work: Path) -> dict[str, tuple[str, str | None]]:
    listed = resumable(["runs", "--json"], work)
    assert listed.code == 0, listed.stderr
    return {r["run_id"]: (r["status"], r["problem"]) for r in json.loads(listed.stdout)}


@pytest.mark.parametrize(
    ("site", "pruned"),
    # the pruned fork makes every kind of write (its snapshot too): the folder store's
    across_stores([pytest.param(True, id="pruned"), pytest.param(False, id="whole-log")]),
    indirect=["site"],
)
async def test_a_fork_killed_after_any_write_is_unfinished_never_resumed_and_collected(
    site: Site, tmp_path: Path, pruned: bool
) -> None:
    env = PRUNED if pruned else SNAPSHOTS
    parent = run_script(site, tmp_path, env, 14)
    seqs = await log_seqs(tmp_path, parent)
    assert (seqs[0] > 1) == pruned
    at = seqs[-1]
    fork_args = [parent, "--at", str(at)]
    kill_after, seen = 1, []
    listed = _statuses(tmp_path)
    while True:
        before = set(listed)
        writes = _killed(tmp_path, env, kill_after, "fork", *fork_args)
        listed = _statuses(tmp_path)
        (fork,) = set(listed) - before
        status, problem = listed[fork]
        if len(writes) < kill_after:  # the fork ran to its end: nothing left to kill
            assert writes[-1] == "put_meta"
            assert status == "crashed"
            assert problem is None
            break
        seen.append(writes[-1])
        if writes[-1] == "put_meta":
            assert status == "crashed", writes  # whole: the last write said so
        else:
            assert status == "unfinished", writes
            assert problem is not None
            assert f"resumable fork {parent} --at {at}" in problem
            resumed = resumable(["resume", fork], tmp_path, env=env)
            assert resumed.code == 2, (writes, resumed.stderr)
            assert "is an unfinished fork" in resumed.stderr
            assert resumed.stdout == ""
        kill_after += 1
    assert seen[0] == "create_run"
    assert seen[-1] == "put_meta"
    assert ("put_snapshot" in seen) == pruned
    assert await log_seqs(tmp_path, parent) == seqs  # the parent is only read
    unfinished = {r for r, (s, _) in listed.items() if s == "unfinished"}
    assert len(unfinished) == len(seen) - 1
    collected = resumable(["gc", "--json"], tmp_path, env=env)
    assert collected.code == 0, collected.stderr
    assert set(json.loads(collected.stdout)["deleted_runs"]) == unfinished
    assert parent in _statuses(tmp_path)
    # A fork whose writes all happened (killed after the last, or not at all) resumes the
    # parent's run to its end, booking nothing the parent booked.
    crashed_out = printed(tmp_path)
    resumes_to_the_end(tmp_path, fork, env, crashed_out)


async def test_a_run_killed_before_its_first_record_never_started_and_is_collected(
    site: Site, tmp_path: Path
) -> None:
    """A new run is created, owned, then its first record written: killed before that
    record, it is listed ``unfinished`` (it never started), ``resume`` says to start the
    program again, and ``gc`` deletes it; killed right after it, it resumes as usual."""
    first = run_script(site, tmp_path, SNAPSHOTS, None)  # a run that completes makes the store
    booked_first = booked(tmp_path)
    kill_after, never = 1, set()
    listed = _statuses(tmp_path)
    while True:
        before = set(listed)
        writes = _killed(tmp_path, SNAPSHOTS, kill_after, "exec", "s.py")
        listed = _statuses(tmp_path)
        (run,) = set(listed) - before
        status, problem = listed[run]
        if writes[-1] == "append":
            assert status == "crashed", writes
            break
        assert status == "unfinished", writes
        assert problem == f"run {run} never started: its process died before its first " + (
            "record, so nothing of it ran; start the program again, and `resumable gc` "
            "deletes this one"
        )
        resumed = resumable(["resume", run], tmp_path, env=SNAPSHOTS)
        assert resumed.code == 2, resumed.stderr
        assert "never started" in resumed.stderr
        never.add(run)
        kill_after += 1
    assert len(never) >= 1
    time.sleep(site.lease_seconds)
    collected = resumable(["gc", "--json"], tmp_path, env=SNAPSHOTS)
    assert collected.code == 0, collected.stderr
    assert set(json.loads(collected.stdout)["deleted_runs"]) == never
    assert set(_statuses(tmp_path)) == {first, run}
    resumed = resumable(["resume", run], tmp_path, env=SNAPSHOTS)
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout == FULL_STDOUT
    assert booked(tmp_path) == booked_first + LEDGER

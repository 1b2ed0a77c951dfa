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
from pathlib import Path

import pytest
from tests.crash.damage import FULL_STDOUT, LEDGER, Site
from tests.crash.harness import _env, resumable
from tests.crash.test_damage_holes import PRUNED, SNAPSHOTS, _ledger, _run, _seqs

WRITES = ("create_run", "put_blob", "append", "put_snapshot", "put_meta")

KILLER = f"""\
import os, signal, sys
from resumable.durability.runs import fork

kill_after = int(os.environ["KILL_AFTER_WRITES"])
writes = []


class Killing:
    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        found = getattr(self._store, name)
        if name not in {WRITES!r}:
            return found

        async def write(*args, **kwargs):
            done = await found(*args, **kwargs)
            writes.append(name)
            print("wrote", name, file=sys.stderr, flush=True)
            if len(writes) == kill_after:
                os.kill(os.getpid(), signal.SIGKILL)
            return done

        return write


real = fork._write_fork


async def killed_while_writing(store, *args, **kwargs):
    return await real(Killing(store), *args, **kwargs)


fork._write_fork = killed_while_writing
sys.argv = ["resumable", *sys.argv[1:]]
from resumable.launcher import main

main()
"""


def _killed_fork(work: Path, env: dict[str, str], kill_after: int, *args: str) -> list[str]:
    """Run ``resumable fork ARGS``, killed right after its ``kill_after``-th store write;
    the writes it made (all of them, with exit 0, if it made fewer)."""
    done = subprocess.run(
        [sys.executable, "-c", KILLER, "fork", *args],
        cwd=work,
        env={**_env(env), "KILL_AFTER_WRITES": str(kill_after)},
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


@pytest.mark.parametrize("pruned", [False, True], ids=["whole-log", "pruned"])
async def test_a_fork_killed_after_any_write_is_unfinished_never_resumed_and_collected(
    site: Site, tmp_path: Path, pruned: bool
) -> None:
    env = PRUNED if pruned else SNAPSHOTS
    parent = _run(site, tmp_path, env, 14)
    seqs = await _seqs(tmp_path, parent)
    assert (seqs[0] > 1) == pruned
    at = seqs[-1]
    fork_args = [parent, "--at", str(at)]
    kill_after, seen = 1, []
    while True:
        before = set(_statuses(tmp_path))
        writes = _killed_fork(tmp_path, env, kill_after, *fork_args)
        (fork,) = set(_statuses(tmp_path)) - before
        status, problem = _statuses(tmp_path)[fork]
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
    assert await _seqs(tmp_path, parent) == seqs  # the parent is only read
    unfinished = {r for r, (s, _) in _statuses(tmp_path).items() if s == "unfinished"}
    assert len(unfinished) == len(seen) - 1
    collected = resumable(["gc", "--json"], tmp_path, env=env)
    assert collected.code == 0, collected.stderr
    assert set(json.loads(collected.stdout)["deleted_runs"]) == unfinished
    assert parent in _statuses(tmp_path)
    # A fork whose writes all happened (killed after the last, or not at all) resumes the
    # parent's run to its end, booking nothing the parent booked.
    crashed_out = "".join(f"did {n}\n" for n in range(len(_ledger(tmp_path))))
    resumed = resumable(["resume", fork], tmp_path, env=env)
    assert resumed.code == 0, resumed.stderr
    assert crashed_out + resumed.stdout == FULL_STDOUT
    assert _ledger(tmp_path) == LEDGER

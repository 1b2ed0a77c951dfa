"""A folder-store prune killed anywhere never leaves records gone with no floor saying so.

A real process writes a run (records 1-9, snapshots at 3 and 6, a segment each) and
prunes it, and is killed with SIGKILL at one point of the prune: before its floor is
written, after it, or between two segments being dropped. The store is then opened
afresh: the log is whole (``holes.log_gap`` finds nothing), the floor is never below
a record that is gone, and the next prune finishes the work.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from resumable.store.base import StoredRecord
from resumable.store.filesystem import FileStore
from resumable.store.filesystem.pruning import read_floor
from resumable.store.holes import log_gap

CHILD = """
import asyncio, os, signal, sys
from pathlib import Path
from resumable.store.base import RunMeta, StoredRecord
from resumable.store.filesystem import FileStore, pruning

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

async def main(root, point):
    async with FileStore(root, sync="fsync") as store:
        await store.create_run(RunMeta("run-1", "p.py"))
        lease = await store.acquire("run-1", "writer")
        for first in (1, 4, 7):
            batch = [StoredRecord(s, lease.epoch, b"r%d" % s) for s in range(first, first + 3)]
            await store.append("run-1", batch, lease)
            if first < 7:
                await store.put_snapshot("run-1", first + 2, b"state", lease)
        if point == "before-floor":
            pruning.write_atomic = die
        elif point == "after-floor":
            pruning.drop_covered = die
        else:  # between the first segment dropped and the second
            unlink, dropped = Path.unlink, []
            def unlink_then_die(path, *args, **kwargs):
                if path.suffix == ".seg":
                    if dropped:
                        die()
                    dropped.append(path)
                return unlink(path, *args, **kwargs)
            Path.unlink = unlink_then_die
        await store.prune("run-1", keep=1)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


async def _state(root: Path) -> tuple[list[int], int | None, object]:
    async with FileStore(root) as store:
        seqs = [r.seq for r in (await store.read("run-1")).records]
        return seqs, read_floor(root / "runs" / "run-1"), await log_gap(store, "run-1")


@pytest.mark.parametrize(
    ("point", "left", "floor"),
    [
        ("before-floor", list(range(1, 10)), 0),
        ("after-floor", list(range(1, 10)), 6),
        ("between-segments", list(range(4, 10)), 6),
    ],
)
def test_a_prune_killed_anywhere_leaves_a_whole_log(
    tmp_path: Path, point: str, left: list[int], floor: int
) -> None:
    root = tmp_path / "store"
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), point],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=60,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    seqs, found_floor, gap = asyncio.run(_state(root))
    assert (seqs, found_floor, gap) == (left, floor, None)

    async def finish() -> list[int]:
        async with FileStore(root) as store:
            lease = await store.acquire("run-1", "next")
            await store.append("run-1", [StoredRecord(10, lease.epoch, b"r10")], lease)
            await store.put_snapshot("run-1", 9, b"state", lease)
            await store.prune("run-1", keep=1)
            assert await log_gap(store, "run-1") is None
            return [r.seq for r in (await store.read("run-1")).records]

    assert asyncio.run(finish()) == [10]
    assert read_floor(root / "runs" / "run-1") == 9

"""Concurrent appends of many runs share commits, not only the first wave of them."""

from __future__ import annotations

import asyncio

from resumable.store.base import Lease, StoredRecord
from resumable.store.group_commit import GroupCommit, PendingAppend

RUNS = 16
APPENDS = 5


def test_many_runs_appending_at_once_keep_sharing_commits() -> None:
    groups: list[int] = []

    async def commit(group: list[PendingAppend]) -> list[Exception | None]:
        groups.append(len(group))
        await asyncio.sleep(0.001)  # a round trip: the other runs append meanwhile
        return [None] * len(group)

    async def main() -> None:
        writer = GroupCommit(commit, name="test", queue_behind_direct=True)
        writer.start()

        async def run(n: int) -> None:
            lease = Lease(f"run-{n}", 1, "test", 0.0)
            for seq in range(1, APPENDS + 1):
                await writer.submit(lease.run_id, [StoredRecord(seq, 1, b"x")], lease)

        await asyncio.gather(*(run(n) for n in range(RUNS)))
        await writer.stop()

    asyncio.run(main())
    assert sum(groups) == RUNS * APPENDS  # every append committed once
    # The first append alone, the other runs' first appends together, then every run's
    # next append in one commit: an append released by a commit never goes alone.
    assert groups == [1, RUNS - 1] + [RUNS] * (APPENDS - 1)

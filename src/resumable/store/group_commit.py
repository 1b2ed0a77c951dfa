"""GroupCommit: one writer task that commits every append waiting when it wakes, together.

The database stores pay one commit (one fsync, one round trip) for all the appends
that arrived while the previous commit ran, so many runs share its cost. Nothing
waits on a timer: an append that finds nothing else pending is committed at once, by
its own task.
Each append still succeeds or fails on its own: the store's ``commit`` returns one
outcome per append, and a stale lease refuses only its own append.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from resumable.errors import StoreError
from resumable.store.base import Lease, StoredRecord


@dataclass(frozen=True, slots=True)
class PendingAppend:
    """One append waiting for the next group commit."""

    run_id: str
    records: Sequence[StoredRecord]
    lease: Lease
    done: asyncio.Future[None]


Commit = Callable[[list[PendingAppend]], Awaitable[list[Exception | None]]]
"""Writes a group; returns, per append, None (written) or the error that refused it."""


class GroupCommit:
    """The queue of waiting appends and the task that commits them.

    ``one_append_per_run``: a commit holds at most one append of each run and a run's
    later appends go in the following commits, in order - for a store whose commit is
    one statement that cannot apply two appends of one run.

    ``queue_behind_direct``: an append that finds another one already on the direct
    path (committing, or waiting for the writer) is queued, not sent alone behind it -
    without it, once a group commit ends, every append it released takes the direct
    path in turn and many concurrent runs pay one round trip each.
    """

    def __init__(
        self,
        commit: Commit,
        *,
        name: str,
        one_append_per_run: bool = False,
        queue_behind_direct: bool = False,
    ) -> None:
        self._commit = commit
        self._name = name
        self._one_per_run = one_append_per_run
        self._queue_behind_direct = queue_behind_direct
        self._direct = 0
        """Appends on the direct path: committing, or waiting for the writer lock."""
        self._queue: asyncio.Queue[PendingAppend | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._writing = asyncio.Lock()
        """Held by whoever commits: the writer task, or an append committed directly."""
        self._batch_waiting = False
        """The writer task took a batch and waits for the lock: a direct append would wait too."""

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._loop(), name=self._name)

    async def stop(self) -> None:
        """Commit what is already waiting, then end the task."""
        if self._task is not None:
            self._queue.put_nowait(None)
            await self._task
            self._task = None

    async def submit(self, run_id: str, records: Sequence[StoredRecord], lease: Lease) -> None:
        """Wait until the append is committed; raise what refused it.

        Alone (no commit running, nothing queued) the append is committed right here,
        without the hop to the writer task: a single run pays one round trip, no more.
        """
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        alone = not (self._queue_behind_direct and self._direct)
        busy = self._writing.locked() or self._batch_waiting or not self._queue.empty()
        if self._task is None or busy or not alone:
            self._queue.put_nowait(PendingAppend(run_id, list(records), lease, done))
            await done
            return
        item = PendingAppend(run_id, records, lease, done)  # committed before the caller goes on
        self._direct += 1
        try:
            async with self._writing:
                (outcome,) = await self._commit([item])
        finally:
            self._direct -= 1
        if outcome is not None:
            raise outcome

    async def _loop(self) -> None:
        while True:
            first = await self._queue.get()
            if first is None:
                return
            batch, stopping = [first], False
            while not self._queue.empty():
                item = self._queue.get_nowait()
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            self._batch_waiting = True
            async with self._writing:
                self._batch_waiting = False
                for group in _rounds(batch) if self._one_per_run else [batch]:
                    await self._commit_group(group)
                # One turn of the loop still holding the writer: the appends just released
                # append again into the queue, instead of the first taking the direct path
                # and the others waiting behind its round trip.
                await asyncio.sleep(0)
            if stopping:
                return

    async def _commit_group(self, group: list[PendingAppend]) -> None:
        try:
            outcomes = await self._commit(group)
        except Exception as err:
            outcomes = [err] * len(group)
        except BaseException as err:
            for item in group:
                if not item.done.done():
                    item.done.set_exception(StoreError(f"append interrupted: {err!r}"))
            raise
        for item, outcome in zip(group, outcomes, strict=True):
            if item.done.done():
                continue
            if outcome is None:
                item.done.set_result(None)
            else:
                item.done.set_exception(outcome)


def _rounds(batch: list[PendingAppend]) -> list[list[PendingAppend]]:
    """Split ``batch`` so each group has at most one append per run, keeping their order."""
    rounds: list[list[PendingAppend]] = []
    seen: dict[str, int] = {}
    for item in batch:
        index = seen[item.run_id] = seen.get(item.run_id, -1) + 1
        if index == len(rounds):
            rounds.append([])
        rounds[index].append(item)
    return rounds

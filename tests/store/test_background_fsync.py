"""``FileStore.begin_append``: a batch written at once, made durable on the syncer thread."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.store.test_filesystem import new_run, rec, run_dir

from resumable.errors import StoreError
from resumable.store.base import Lease, RunMeta
from resumable.store.filesystem import FileStore
from resumable.store.filesystem.background_fsync import FsyncInProgress
from resumable.store.heads import read_head


class Disk:
    """``os.fsync`` (and ``os.fdatasync``) held until the test lets it answer (or fail)."""

    def __init__(self) -> None:
        self.answer = threading.Event()
        self.error: OSError | None = None
        self.ended: list[int] = []
        self.fd_was_open: list[bool] = []
        self._real = os.fsync

    def fsync(self, fd: int) -> None:
        self.answer.wait(10)
        try:
            os.fstat(fd)
        except OSError:
            self.fd_was_open.append(False)
            raise
        self.fd_was_open.append(True)
        if self.error is not None:
            raise self.error
        self._real(fd)
        self.ended.append(fd)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Disk:
    held = Disk()
    monkeypatch.setattr(os, "fsync", held.fsync)
    monkeypatch.setattr(os, "fdatasync", held.fsync)  # a preallocated segment's flush
    return held


def begin(owned: tuple[FileStore, Lease], *seqs: int) -> FsyncInProgress:
    """Begin an append of records ``seqs`` to ``run-1``, which can go in the background."""
    store, lease = owned
    pending = store.begin_append("run-1", [rec(seq) for seq in seqs], lease)
    assert pending is not None
    return pending


def head(store: FileStore) -> int | None:
    return read_head(run_dir(store) / "head")


@pytest.fixture
async def owned(tmp_path: Path, disk: Disk) -> AsyncIterator[tuple[FileStore, Lease]]:
    """A fsync store whose run ``run-1`` holds record 1 (its segment and folder synced)."""
    disk.answer.set()  # creating the run and its first append fsync at once
    async with FileStore(tmp_path / "store", sync="fsync") as store:
        lease = await new_run(store)
        await store.append("run-1", [rec(1)], lease)
        disk.answer.clear()
        yield store, lease


async def test_the_batch_is_written_at_once_and_counted_only_once_durable(
    owned: tuple[FileStore, Lease], disk: Disk
) -> None:
    store, lease = owned
    pending = begin(owned, 2, 3)
    assert [r.seq for r in (await store.read("run-1")).records] == [1, 2, 3]
    assert head(store) == 1  # not acknowledged while its fsync waits for the disk
    disk.answer.set()
    pending.wait()
    assert head(store) == 3
    await store.append("run-1", [rec(4)], lease)
    assert head(store) == 4


async def test_a_failed_background_fsync_is_raised_by_wait_and_by_the_next_append(
    owned: tuple[FileStore, Lease], disk: Disk
) -> None:
    disk.error = OSError(errno.EIO, "Input/output error")
    disk.answer.set()
    pending = begin(owned, 2)
    with pytest.raises(StoreError, match="Input/output error"):
        pending.wait()
    with pytest.raises(StoreError, match="Input/output error"):
        pending.wait()  # never "durable" after all
    store, lease = owned
    with pytest.raises(StoreError, match="Input/output error"):
        await store.append("run-1", [rec(3)], lease)
    assert head(store) == 1


async def test_giving_the_run_up_waits_for_its_fsync_before_closing_the_segment(
    owned: tuple[FileStore, Lease], disk: Disk
) -> None:
    begin(owned, 2)
    store, lease = owned
    threading.Timer(0.05, disk.answer.set).start()
    await store.release(lease)
    assert disk.answer.is_set()  # release waited for the disk
    assert all(disk.fd_was_open)  # and kept the segment open until its fsync ended
    assert len(disk.ended) == len(disk.fd_was_open)
    assert head(store) == 2


async def test_appends_that_cannot_wait_in_the_background_say_so(tmp_path: Path) -> None:
    async with FileStore(tmp_path / "flush", sync="flush") as store:
        lease = await new_run(store)
        assert store.begin_append("run-1", [rec(1)], lease) is None  # nothing to wait for
    async with FileStore(tmp_path / "fsync", sync="fsync") as store:
        first = await new_run(store)
        stale = Lease("run-1", first.epoch + 1, "someone else")
        assert store.begin_append("run-1", [rec(1)], stale) is None  # append says why not
        await store.create_run(RunMeta("run-2", "prog.py"))
        assert store.begin_append("run-2", [rec(1)], first) is None  # not owned here
        second = await store.acquire("run-2", "owner-a")
        # two runs: a barrier would stall the other one; each fsyncs in its own thread
        assert store.begin_append("run-1", [rec(1)], first) is None
        assert store.begin_append("run-2", [rec(1)], second) is None
        assert (await store.read("run-1")).records == []

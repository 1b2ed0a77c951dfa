"""``FileStore.begin_append``: a batch written at once, made durable in the fsync helper."""

from __future__ import annotations

import errno
import os
import signal
import threading
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from tests.fsync_helper import in_flight, own_helper
from tests.store.test_filesystem import new_run, rec, run_dir

from resumable.errors import StoreError
from resumable.store.base import Lease, RunMeta
from resumable.store.filesystem import FileStore, background_fsync
from resumable.store.filesystem import store as file_store
from resumable.store.filesystem.background_fsync import FsyncInProgress, _Helper
from resumable.store.heads import read_head


class AlwaysBackground:
    def background(self) -> bool:
        return True


def begin(owned: tuple[FileStore, Lease], *seqs: int) -> FsyncInProgress:
    """Begin an append of records ``seqs`` to ``run-1``, which can go in the background."""
    store, lease = owned
    pending = store.begin_append("run-1", [rec(seq) for seq in seqs], lease)
    assert pending is not None
    return pending


def head(store: FileStore) -> int | None:
    return read_head(run_dir(store) / "head")


@pytest.fixture
def helper(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Helper]:
    with own_helper(monkeypatch) as started:
        yield started


@pytest.fixture
async def owned(
    tmp_path: Path, helper: _Helper, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[FileStore, Lease]]:
    """A fsync store whose run ``run-1`` holds record 1; its boundaries go to ``helper``."""
    monkeypatch.setattr(file_store, "SyncChoice", AlwaysBackground)
    async with FileStore(tmp_path / "store", sync="fsync") as store:
        lease = await new_run(store)
        await store.append("run-1", [rec(1)], lease)
        yield store, lease


async def test_the_batch_is_written_at_once_and_counted_only_once_durable(
    owned: tuple[FileStore, Lease], helper: _Helper
) -> None:
    store, lease = owned
    os.kill(helper.pid, signal.SIGSTOP)  # the helper cannot answer
    pending = begin(owned, 2, 3)
    assert in_flight(helper) == 1
    assert [r.seq for r in (await store.read("run-1")).records] == [1, 2, 3]
    assert head(store) == 1  # not acknowledged while its fsync has not run
    os.kill(helper.pid, signal.SIGCONT)
    pending.wait()
    assert head(store) == 3
    await store.append("run-1", [rec(4)], lease)
    assert head(store) == 4
    assert helper.sent == 1


async def test_a_failed_fsync_in_the_helper_is_raised_by_wait_and_by_the_next_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_store, "SyncChoice", AlwaysBackground)
    with own_helper(monkeypatch, fail_first=True):
        async with FileStore(tmp_path / "store", sync="fsync") as store:
            lease = await new_run(store)
            await store.append("run-1", [rec(1)], lease)  # inline: a new segment's folder
            pending = begin((store, lease), 2)
            with pytest.raises(StoreError, match="Input/output error"):
                pending.wait()
            with pytest.raises(StoreError, match="Input/output error"):
                pending.wait()  # never "durable" after all
            with pytest.raises(StoreError, match="Input/output error"):
                await store.append("run-1", [rec(3)], lease)
            assert head(store) == 1


async def test_a_failed_inline_fsync_is_raised_by_wait_and_by_the_next_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FileStore(tmp_path / "store", sync="fsync") as store:
        lease = await new_run(store)
        await store.append("run-1", [rec(1)], lease)

        def failing(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fsync", failing)
        monkeypatch.setattr(os, "fdatasync", failing)
        pending = begin((store, lease), 2)  # no helper: inline, its error kept for wait()
        with pytest.raises(StoreError, match="Input/output error"):
            pending.wait()
        with pytest.raises(StoreError, match="Input/output error"):
            await store.append("run-1", [rec(3)], lease)
        assert head(store) == 1


async def test_giving_the_run_up_waits_for_its_fsync(
    owned: tuple[FileStore, Lease], helper: _Helper
) -> None:
    store, lease = owned
    os.kill(helper.pid, signal.SIGSTOP)
    begin(owned, 2)
    threading.Timer(0.05, os.kill, (helper.pid, signal.SIGCONT)).start()
    began = time.monotonic()
    await store.release(lease)
    assert time.monotonic() - began >= 0.04  # release waited for the helper's answer
    assert in_flight(helper) == 0
    assert head(store) == 2


async def test_a_helper_that_dies_leaves_its_fsyncs_to_the_waiter(
    owned: tuple[FileStore, Lease], helper: _Helper
) -> None:
    store, _ = owned
    os.kill(helper.pid, signal.SIGSTOP)
    pending = begin(owned, 2, 3)
    os.kill(helper.pid, signal.SIGKILL)
    pending.wait()  # its socket ended: the fsync and the head update ran here
    assert head(store) == 3
    assert helper.gone
    assert not helper.up
    later = begin(owned, 4)  # and every later one runs here too, at once
    assert later._finished
    later.wait()
    assert head(store) == 4
    assert helper.sent == 1


def test_a_helper_that_cannot_start_leaves_the_fsyncs_inline(tmp_path: Path) -> None:
    helper = _Helper()
    helper.start(wait=True, argv=[str(tmp_path / "no-such-python")])
    assert helper.gone
    assert not helper.ready()


def test_the_helper_starts_after_enough_boundaries_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(background_fsync, "START_AFTER", 3)
    helper = _Helper()
    try:
        assert not helper.ready()
        assert not helper.ready()
        assert helper.pid == 0
        helper.ready()  # the third asks: started, in the background
        assert helper.pid
        deadline = time.monotonic() + 30
        while not helper.ready() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert helper.up
    finally:
        helper.stop(wait=True)
    assert helper.pid == 0  # reaped


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


def test_a_forked_child_starts_its_own_helper(helper: _Helper, tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:  # the child: the parent's helper is not its to use
        mine = background_fsync._helper
        os._exit(0 if mine is not helper and mine.pid == 0 and not mine.up else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # the parent's helper still serves it
    segment = os.open(tmp_path / "segment", os.O_RDWR | os.O_CREAT, 0o600)
    head_fd = os.open(tmp_path / "head", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        job = background_fsync.start_fsync(
            segment, None, (head_fd, tmp_path / "head"), 7, lambda exc, path: exc
        )
        assert helper.sent == 1
        job.wait()
    finally:
        os.close(segment)
        os.close(head_fd)
    assert read_head(tmp_path / "head") == 7

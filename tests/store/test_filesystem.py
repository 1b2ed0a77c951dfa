"""What only the file store promises: its layout, torn and corrupt tails, flock, pruning by segment.

The behaviour every store shares is in ``test_contract.py``.
"""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from resumable.errors import (
    ConfigError,
    RunBusyError,
    RunNotFoundError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)
from resumable.store import open_store
from resumable.store.base import Lease, RunMeta, StoredRecord
from resumable.store.filesystem import FileStore
from resumable.store.filesystem.segments import encode_frames, scan_frames


def rec(seq: int, epoch: int = 1, size: int = 40) -> StoredRecord:
    return StoredRecord(seq, epoch, bytes((seq + i) % 256 for i in range(size)))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[FileStore]:
    async with FileStore(tmp_path / "store", sync="flush") as opened:
        yield opened


async def new_run(store: FileStore, run_id: str = "run-1") -> Lease:
    await store.create_run(RunMeta(run_id, "prog.py", created_at=1.0))
    return await store.acquire(run_id, "owner-a")


def run_dir(store: FileStore, run_id: str = "run-1") -> Path:
    return store.root / "runs" / run_id


def segments(store: FileStore, run_id: str = "run-1") -> list[Path]:
    return sorted((run_dir(store, run_id) / "log").glob("*.seg"))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- torn and corrupt tails --------------------------------------------------------


async def test_a_tail_torn_at_every_byte_returns_the_records_before_it(store: FileStore) -> None:
    lease = await new_run(store)
    for seq in (1, 2, 3):
        await store.append("run-1", [rec(seq)], lease)
    await store.release(lease)
    [segment] = segments(store)
    intact = segment.read_bytes()
    last = encode_frames([rec(4)])

    for cut in range(len(last)):
        segment.write_bytes(intact + last[:cut])
        result = await store.read("run-1")
        assert [r.seq for r in result.records] == [1, 2, 3], cut
        if cut == 0:
            assert result.problem is None
        else:
            assert result.problem is not None
            assert f"run-1: log segment {segment.name} is torn or corrupt" in result.problem
            assert f"at byte {len(intact)}" in result.problem
            assert f"{cut} bytes skipped" in result.problem

    segment.write_bytes(intact + last)
    assert [r.seq for r in (await store.read("run-1")).records] == [1, 2, 3, 4]


async def test_a_batch_cut_short_anywhere_is_dropped_whole(store: FileStore) -> None:
    lease = await new_run(store)
    await store.append("run-1", [rec(1)], lease)
    await store.release(lease)
    [segment] = segments(store)
    intact = segment.read_bytes()
    batch = encode_frames([rec(2), rec(3), rec(4)])

    for cut in range(1, len(batch)):
        segment.write_bytes(intact + batch[:cut])
        result = await store.read("run-1")
        assert [r.seq for r in result.records] == [1], cut
        assert result.problem is not None


async def test_a_flipped_bit_stops_the_read_at_that_record(store: FileStore) -> None:
    lease = await new_run(store)
    for seq in range(1, 6):
        await store.append("run-1", [rec(seq)], lease)
    await store.release(lease)
    [segment] = segments(store)
    intact = segment.read_bytes()
    frame = len(encode_frames([rec(1)]))

    for index in range(2 * frame, 3 * frame):  # every byte of record 3
        damaged = bytearray(intact)
        damaged[index] ^= 0x10
        segment.write_bytes(bytes(damaged))
        result = await store.read("run-1")
        assert [r.seq for r in result.records] == [1, 2], index
        assert result.problem is not None
        assert f"at byte {2 * frame}" in result.problem
        assert f"{3 * frame} bytes skipped" in result.problem


async def test_the_next_owner_quarantines_a_torn_tail_and_appends_after_it(
    store: FileStore,
) -> None:
    lease = await new_run(store)
    await store.append("run-1", [rec(1), rec(2)], lease)
    await store.release(lease)
    [segment] = segments(store)
    good = segment.stat().st_size
    torn = encode_frames([rec(3)])[:25]
    with segment.open("ab") as log:
        log.write(torn)

    lease = await store.acquire("run-1", "owner-b")

    assert segment.stat().st_size == good
    bad = run_dir(store) / "quarantine" / f"{segment.name}.{good}.bad"
    assert bad.read_bytes() == torn
    await store.append("run-1", [rec(3, lease.epoch)], lease)
    result = await store.read("run-1")
    assert [r.seq for r in result.records] == [1, 2, 3]
    assert result.problem is None


async def test_corruption_mid_log_quarantines_everything_after_it(store: FileStore) -> None:
    lease = await new_run(store)
    await store.append("run-1", [rec(1)], lease)
    await store.append("run-1", [rec(2)], lease)
    await store.release(lease)
    lease = await store.acquire("run-1", "owner-b")  # a new owner starts a new segment
    await store.append("run-1", [rec(3, lease.epoch), rec(4, lease.epoch)], lease)
    await store.release(lease)
    first, second = segments(store)
    second_bytes = second.read_bytes()
    damaged = bytearray(first.read_bytes())
    damaged[-1] ^= 1  # the last byte of record 2
    first.write_bytes(bytes(damaged))
    frame = len(encode_frames([rec(1)]))

    lease = await store.acquire("run-1", "owner-c")

    quarantine = run_dir(store) / "quarantine"
    assert (quarantine / f"{first.name}.{frame}.bad").read_bytes() == bytes(damaged[frame:])
    assert (quarantine / f"{second.name}.0.bad").read_bytes() == second_bytes
    await store.append("run-1", [rec(2, lease.epoch)], lease)
    result = await store.read("run-1")
    assert [(r.seq, r.epoch) for r in result.records] == [(1, 1), (2, lease.epoch)]
    assert result.problem is None


# -- layout and permissions --------------------------------------------------------


async def test_folders_are_private_and_files_owner_only(store: FileStore) -> None:
    lease = await new_run(store)
    await store.append("run-1", [rec(1)], lease)
    await store.put_blob("run-1", "ab12", b"blob")
    await store.put_snapshot("run-1", 1, b"state", lease)
    key = await store.mac_key()

    assert len(key) == 32
    root = store.root
    for folder in (root, root / "runs", run_dir(store), *run_dir(store).iterdir()):
        if folder.is_dir():
            assert mode(folder) == 0o700, folder
    files = [root / "key", *(p for p in run_dir(store).rglob("*") if p.is_file())]
    assert {p.name for p in files} >= {"key", "meta.json", "lock", "ab12", f"{1:020d}.snap"}
    for path in files:
        assert mode(path) == 0o600, path


async def test_the_mac_key_is_created_once_even_by_racing_stores(tmp_path: Path) -> None:
    stores = [FileStore(tmp_path / "store") for _ in range(6)]
    keys = await asyncio.gather(*(s.mac_key() for s in stores))
    assert len(set(keys)) == 1
    assert (tmp_path / "store" / "key").read_bytes() == keys[0]
    assert not [p for p in (tmp_path / "store").iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("bad", ["../escape", "a/b", ".hidden", "", "x" * 201, "run id", "é"])
async def test_run_ids_that_could_escape_the_folder_are_refused(
    store: FileStore, bad: str, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match="invalid run id"):
        await store.create_run(RunMeta(bad, "prog.py"))
    with pytest.raises(UsageError, match="invalid run id"):
        await store.get_meta(bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
    assert list((store.root / "runs").iterdir()) == []


async def test_an_unwritable_root_is_unavailable_with_the_fix(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreUnavailableError, match="check permissions or set") as caught:
        async with FileStore(blocker / "store"):
            pass
    assert str(blocker / "store") in str(caught.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permissions")
async def test_a_read_only_root_is_unavailable(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir(mode=0o500)
    try:
        with pytest.raises(StoreUnavailableError, match=str(root)):
            async with FileStore(root):
                pass
    finally:
        root.chmod(0o700)


async def test_an_unknown_run_suggests_listing_runs(store: FileStore) -> None:
    with pytest.raises(RunNotFoundError, match="resumable runs") as caught:
        await store.get_blob("ghost", "ab12")
    assert caught.value.fields["run_id"] == "ghost"


def test_urls_and_open_store(tmp_path: Path) -> None:
    assert FileStore.from_url(f"file://{tmp_path}/s").root == tmp_path / "s"
    assert FileStore.from_url(str(tmp_path / "s")).root == tmp_path / "s"
    store = open_store("file", path=str(tmp_path / "s"), url="", sync="flush")
    assert isinstance(store, FileStore)
    assert (store.root, store.sync, store.url) == (tmp_path / "s", "flush", f"file://{tmp_path}/s")
    with pytest.raises(ConfigError, match="sync"):
        open_store("file", path=str(tmp_path), url="", sync="sometimes")
    with pytest.raises(ConfigError, match="mongo"):
        open_store("mongo", path="", url="", sync="fsync")


# -- meta.json ---------------------------------------------------------------------


async def test_meta_is_replaced_whole_or_not_at_all(
    store: FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.create_run(RunMeta("run-1", "prog.py", extra={"v": 1}))

    def fail(*args: object) -> None:
        raise OSError(errno.EIO, "disk went away")

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", fail)
        with pytest.raises(StoreError, match="disk went away"):
            await store.put_meta(RunMeta("run-1", "prog.py", extra={"v": 2}))

    assert (await store.get_meta("run-1")).extra == {"v": 1}
    assert sorted(p.name for p in run_dir(store).iterdir() if p.is_file()) == [
        "floor",
        "lock",
        "meta.json",
        "meta.lock",
    ]


async def test_readers_never_see_a_half_written_meta(store: FileStore) -> None:
    base = RunMeta("run-1", "prog.py")
    await store.create_run(base)
    written = [replace(base, extra={"n": n, "pad": "x" * (n * 5000)}) for n in range(12)]

    results = await asyncio.gather(
        *(store.put_meta(m) for m in written), *(store.get_meta("run-1") for _ in range(24))
    )

    seen = [r for r in results if isinstance(r, RunMeta)]
    assert len(seen) == 24
    assert all(m.extra in [base.extra, *(w.extra for w in written)] for m in seen)


# -- segments and pruning ------------------------------------------------------------


async def test_each_snapshot_starts_a_segment_and_prune_drops_whole_ones(
    store: FileStore,
) -> None:
    lease = await new_run(store)
    await store.append("run-1", [rec(s) for s in range(1, 6)], lease)
    await store.put_snapshot("run-1", 5, b"@5", lease)
    await store.append("run-1", [rec(s) for s in range(6, 11)], lease)
    await store.put_snapshot("run-1", 10, b"@10", lease)
    await store.append("run-1", [rec(11), rec(12)], lease)
    assert [p.name for p in segments(store)] == [f"{s:020d}.seg" for s in (1, 6, 11)]
    last = segments(store)[-1].read_bytes()
    last = last[: scan_frames(last).written]  # without its preallocated zeros

    assert await store.prune("run-1", keep=1) == 10

    assert [p.name for p in segments(store)] == [f"{11:020d}.seg"]
    assert segments(store)[0].read_bytes() == last
    assert [r.seq for r in (await store.read("run-1")).records] == [11, 12]
    await store.append("run-1", [rec(13)], lease)
    assert [r.seq for r in (await store.read("run-1", after_seq=11)).records] == [12, 13]


async def test_prune_by_another_store_leaves_a_live_owners_segment_alone(
    store: FileStore,
) -> None:
    lease = await new_run(store)
    await store.append("run-1", [rec(s) for s in range(1, 9)], lease)
    for seq in (2, 4, 6):
        await store.put_snapshot("run-1", seq, f"@{seq}".encode(), lease)

    async with FileStore(store.root) as other:
        assert await other.prune("run-1", keep=2) == 0
    assert await store.get_snapshot("run-1", at_or_before=3) is None
    assert [r.seq for r in (await store.read("run-1")).records] == list(range(1, 9))

    assert await store.prune("run-1", keep=1) == 6  # the owner may rewrite its segment
    assert [p.name for p in segments(store)] == [f"{7:020d}.seg"]
    await store.append("run-1", [rec(9)], lease)
    assert [r.seq for r in (await store.read("run-1")).records] == [7, 8, 9]


async def test_copies_left_by_an_interrupted_prune_are_read_once(store: FileStore) -> None:
    lease = await new_run(store)
    await store.append("run-1", [rec(s) for s in range(1, 7)], lease)
    await store.release(lease)
    [segment] = segments(store)
    frames = scan_frames(segment.read_bytes()).records
    copy = segment.with_name(f"{4:020d}.seg")
    copy.write_bytes(encode_frames(frames[3:]))  # written, but the old segment not yet removed

    result = await store.read("run-1")
    assert [r.seq for r in result.records] == [1, 2, 3, 4, 5, 6]
    assert result.problem is None


# -- ownership across processes ------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from resumable.store.filesystem import FileStore

    async def main():
        async with FileStore(sys.argv[1], sync="flush") as store:
            await store.acquire("run-1", "child")
            print("owned", flush=True)
            sys.stdin.readline()

    asyncio.run(main())
    """
)


async def test_a_run_owned_by_another_process_is_busy_until_it_dies(store: FileStore) -> None:
    # running since its metadata was last written (not just created: that never started)
    await store.create_run(RunMeta("run-1", "prog.py", status="running", updated_at=1.0))
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "owned"

        with pytest.raises(RunBusyError, match="run-1 is owned by a live process"):
            await store.acquire("run-1", "parent")
        with pytest.raises(RunBusyError):
            await store.delete_run("run-1")
        [summary] = await store.list_runs()
        assert summary.live
        assert summary.status == "running"
        epoch = (await store.get_meta("run-1")).epoch
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()  # type: ignore[union-attr]
        child.stdin.close()  # type: ignore[union-attr]

    [summary] = await store.list_runs()
    assert summary.status == "crashed"
    lease = await store.acquire("run-1", "parent")
    assert lease.epoch == epoch + 1


# -- the hot path --------------------------------------------------------------------


async def test_flush_appends_stay_on_the_event_loop_thread(
    store: FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = await new_run(store)

    def no_threads(*args: object, **kwargs: object) -> None:
        raise AssertionError("append with sync='flush' hopped to a thread")

    with monkeypatch.context() as patch:
        patch.setattr(asyncio, "to_thread", no_threads)
        patch.setattr(os, "fsync", no_threads)
        patch.setattr(os, "fdatasync", no_threads)
        for seq in range(1, 50):
            await store.append("run-1", [rec(seq)], lease)
    assert len((await store.read("run-1")).records) == 49


async def test_fsync_appends_sync_the_segment_and_its_new_directory_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    async with FileStore(tmp_path / "store", sync="fsync") as store:
        lease = await new_run(store)
        monkeypatch.setattr(os, "fsync", spy)
        monkeypatch.setattr(os, "fdatasync", spy)
        await store.append("run-1", [rec(1)], lease)
        first = len(synced)
        await store.append("run-1", [rec(2)], lease)
        second = len(synced) - first

    assert (first, second) == (2, 1)  # new segment: file and folder; then the file only


async def test_a_cancelled_acquire_does_not_keep_the_lock(store: FileStore) -> None:
    await store.create_run(RunMeta("run-1", "prog.py"))
    attempt = asyncio.create_task(store.acquire("run-1", "impatient"))
    await asyncio.sleep(0)  # the acquiring thread has started
    attempt.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    for _ in range(100):
        if not (await store.list_runs())[0].live:
            break
        await asyncio.sleep(0.01)

    async with FileStore(store.root) as other:
        lease = await other.acquire("run-1", "patient")
    assert lease.owner == "patient"

"""Preallocated segments of the file store: zeros read as the end, never as a record.

A power loss leaves a preallocated segment cut anywhere after its last acknowledged
batch, with zeros (or, where the disk wrote pages out of order, zeros then data) in
place of what was being written. Reading it back gives exactly the acknowledged
batches before the cut, and the next owner continues after them.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
from pathlib import Path

import pytest
from tests.store.test_filesystem import new_run, rec, run_dir, segments

from resumable.store.base import StoredRecord
from resumable.store.filesystem import FileStore, preallocate
from resumable.store.filesystem.segments import HEADER_BYTES, scan_frames


async def _written_run(root: Path, batches: list[list[StoredRecord]]) -> tuple[bytes, list[int]]:
    """A run whose owner appended ``batches`` and then died: its segment's bytes, and the
    offset where each acknowledged batch ends."""
    ends, offset = [], 0
    async with FileStore(root, sync="fsync") as store:
        lease = await new_run(store)
        for batch in batches:
            await store.append("run-1", batch, lease)
            offset += sum(HEADER_BYTES + len(r.data) for r in batch)
            ends.append(offset)
        [segment] = segments(store)
        data = segment.read_bytes()  # before release: the owner died holding it
    return data, ends


def _batches(rng: random.Random, count: int) -> list[list[StoredRecord]]:
    out: list[list[StoredRecord]] = []
    seq = 1
    for _ in range(count):
        size = rng.randint(1, 3)
        out.append([rec(s, size=rng.randint(0, 300)) for s in range(seq, seq + size)])
        seq += size
    return out


async def _read_copy(root: Path, segment_bytes: bytes) -> tuple[list[StoredRecord], str | None]:
    [segment] = sorted((root / "runs" / "run-1" / "log").glob("*.seg"))
    segment.write_bytes(segment_bytes)
    async with FileStore(root, sync="flush") as store:
        result = await store.read("run-1")
    return result.records, result.problem


async def test_a_new_segment_is_preallocated_and_gives_its_zeros_back_when_closed(
    tmp_path: Path,
) -> None:
    async with FileStore(tmp_path / "store", sync="flush") as store:
        await _preallocated_then_released(store)


async def _preallocated_then_released(store: FileStore) -> None:
    lease = await new_run(store)
    await store.append("run-1", [rec(1), rec(2)], lease)
    [segment] = segments(store)
    assert segment.stat().st_size == preallocate.SEGMENT_BYTES
    assert [r.seq for r in (await store.read("run-1")).records] == [1, 2]
    await store.release(lease)
    assert segment.stat().st_size == 2 * (HEADER_BYTES + 40)


async def test_power_loss_cuts_and_zero_tails_read_back_the_acknowledged_prefix(
    tmp_path: Path,
) -> None:
    rng = random.Random(25)
    batches = _batches(rng, 12)
    data, ends = await _written_run(tmp_path / "store", batches)
    assert len(data) == preallocate.SEGMENT_BYTES
    assert not any(data[ends[-1] :])
    records = [r for batch in batches for r in batch]
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "store", copy)
    cuts = sorted({*rng.sample(range(ends[-1] + 1), 150), *ends, 0})
    for cut in cuts:
        kept = sum(len(batch) for batch, end in zip(batches, ends, strict=True) if end <= cut)
        at_boundary = cut in (0, *ends)
        for shape, tail in (("cut", b""), ("zeroed", bytes(len(data) - cut))):
            read, problem = await _read_copy(copy, data[:cut] + tail)
            assert read == records[:kept], (shape, cut)  # nothing unverified, nothing lost
            if at_boundary:
                assert problem is None, (shape, cut)


async def test_zeros_then_data_is_a_torn_batch_not_the_end(tmp_path: Path) -> None:
    batches = [[rec(s, size=2000)] for s in range(1, 6)]
    data, ends = await _written_run(tmp_path / "store", batches)
    # the last batch's first page never reached the disk; a later one did
    hole = bytearray(data)
    hole[ends[3] : ends[3] + 1000] = bytes(1000)
    read, problem = await _read_copy(tmp_path / "store", bytes(hole))
    assert [r.seq for r in read] == [1, 2, 3, 4]
    assert problem is not None
    assert f"at byte {ends[3]}" in problem
    assert "zeros followed by data" in problem


async def test_a_torn_record_in_the_middle_of_the_preallocated_region_ends_the_read(
    tmp_path: Path,
) -> None:
    batches = [[rec(s, size=100)] for s in range(1, 9)]
    data, ends = await _written_run(tmp_path / "store", batches)
    torn = bytearray(data)
    torn[ends[3] + HEADER_BYTES + 10] ^= 0x01  # record 5's body
    read, problem = await _read_copy(tmp_path / "store", bytes(torn))
    assert [r.seq for r in read] == [1, 2, 3, 4]
    assert problem is not None
    assert "CRC mismatch" in problem
    assert f"at byte {ends[3]}" in problem


async def test_the_next_owner_continues_after_a_power_loss_cut(tmp_path: Path) -> None:
    batches = [[rec(s, size=100)] for s in range(1, 9)]
    data, ends = await _written_run(tmp_path / "store", batches)
    cut = ends[4] + 50  # record 6 half written, zeros after it
    [segment] = sorted((tmp_path / "store" / "runs" / "run-1" / "log").glob("*.seg"))
    segment.write_bytes(data[:cut] + bytes(len(data) - cut))
    async with FileStore(tmp_path / "store", sync="fsync") as store:
        lease = await store.acquire("run-1", "owner-b")
        assert segment.stat().st_size == ends[4]  # the torn bytes moved aside, zeros gone
        await store.append("run-1", [rec(6, lease.epoch), rec(7, lease.epoch)], lease)
        result = await store.read("run-1")
    assert [r.seq for r in result.records] == [1, 2, 3, 4, 5, 6, 7]
    assert result.records[5].epoch == lease.epoch


async def test_a_segment_that_fills_up_rolls_over_to_a_new_preallocated_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(preallocate, "SEGMENT_BYTES", 4096)
    frame = HEADER_BYTES + 1000
    async with FileStore(tmp_path / "store", sync="fsync") as store:
        lease = await new_run(store)
        for seq in range(1, 11):
            await store.append("run-1", [rec(seq, size=1000)], lease)
        await store.append("run-1", [rec(11, size=9000)], lease)  # larger than a segment
        names = [p.name for p in segments(store)]
        assert names == [f"{s:020d}.seg" for s in (1, 5, 9, 11)]
        sizes = [p.stat().st_size for p in segments(store)]
        assert sizes[:3] == [4 * frame, 4 * frame, 2 * frame]  # full ones gave zeros back
        assert sizes[3] == HEADER_BYTES + 9000
        assert [r.seq for r in (await store.read("run-1")).records] == list(range(1, 12))
        await store.release(lease)
        lease = await store.acquire("run-1", "owner-b")
        await store.append("run-1", [rec(12, lease.epoch)], lease)
        assert [r.seq for r in (await store.read("run-1", 10)).records] == [11, 12]


@pytest.mark.parametrize("how", ["unsupported", "missing"])
async def test_without_preallocation_appends_and_fsyncs_and_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    def refuse(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    if how == "missing":
        monkeypatch.delattr(os, "posix_fallocate")
    else:
        monkeypatch.setattr(os, "posix_fallocate", refuse)
    monkeypatch.setattr(preallocate, "_warned", False)
    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "fdatasync", lambda fd: synced.append("fdatasync"))
    async with FileStore(tmp_path / "store", sync="fsync") as store:
        for run_id in ("run-1", "run-2"):
            lease = await new_run(store, run_id)
            await store.append(run_id, [rec(1), rec(2)], lease)
            await store.append(run_id, [rec(3)], lease)
            [segment] = segments(store, run_id)
            assert segment.stat().st_size == 3 * (HEADER_BYTES + 40)  # appended, no zeros
            assert [r.seq for r in (await store.read(run_id)).records] == [1, 2, 3]
            await store.release(lease)
    assert "fdatasync" not in synced
    err = capsys.readouterr().err
    assert err.count("cannot preallocate log segments") == 1


async def test_old_segments_without_zeros_still_read_and_resume(tmp_path: Path) -> None:
    """A log written before preallocation: segments exactly as long as their frames."""
    async with FileStore(tmp_path / "store", sync="flush") as store:
        lease = await new_run(store)
        await store.append("run-1", [rec(1), rec(2)], lease)
        await store.release(lease)
        [segment] = segments(store)
        assert scan_frames(segment.read_bytes()).written == segment.stat().st_size
        lease = await store.acquire("run-1", "owner-b")
        await store.append("run-1", [rec(3, lease.epoch)], lease)
        assert [r.seq for r in (await store.read("run-1")).records] == [1, 2, 3]
    assert (run_dir(store) / "quarantine").exists() is False


async def test_a_disk_without_room_for_a_segment_still_takes_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def full(fd: int, offset: int, length: int) -> None:
        os.ftruncate(fd, 4096)  # a partial allocation, as some file systems leave it
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    async with FileStore(tmp_path / "store", sync="fsync") as store:
        lease = await new_run(store)
        await store.append("run-1", [rec(1), rec(2)], lease)
        [segment] = segments(store)
        assert segment.stat().st_size == 2 * (HEADER_BYTES + 40)
        assert [r.seq for r in (await store.read("run-1")).records] == [1, 2]
    assert "preallocate" not in capsys.readouterr().err

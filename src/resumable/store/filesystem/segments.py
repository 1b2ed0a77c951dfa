"""The segment log of a file-store run: framing, scanning, repair and the prune rewrite.

A run's log is a folder of segments named by their first seq. Frames in a segment:
``[u32 length][u32 crc32 of the rest][u64 seq][u32 epoch]`` then the sealed record. The
top bit of ``length`` marks "more frames of this batch follow", so a batch cut short by a
crash is dropped whole. A segment may be preallocated (:mod:`resumable.store.filesystem.preallocate`):
its frames are followed by zeros, and a frame header of zeros where everything after it
is zero too is the segment's end, never a record (seq 0 never follows anything). Reading
stops at the first short or bad frame - or at zeros followed by data, the tail of a batch
cut by a power loss - and says where. The durable-write helpers (temp file, fsync,
rename) live here too because repair and prune need them; the store uses them for its
other files.
"""

from __future__ import annotations

import os
import re
import secrets
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from resumable.store.base import ReadResult, StoredRecord

_HEAD = struct.Struct("<IIQI")
_TAIL = struct.Struct("<QI")
HEADER_BYTES = _HEAD.size
_MORE = 0x8000_0000
_ZEROS = bytes(HEADER_BYTES)
_SEGMENT = re.compile(r"(\d{20})\.seg")
_SNAPSHOT = re.compile(r"(\d{20})\.snap")


def encode_frames(records: Sequence[StoredRecord]) -> bytes:
    """Frame a batch; every frame but the last carries the "more follow" bit."""
    parts: list[bytes] = []
    last = len(records) - 1
    for i, record in enumerate(records):
        data = record.data
        tail = _TAIL.pack(record.seq, record.epoch)
        length = len(data) | (_MORE if i < last else 0)
        parts += (
            _HEAD.pack(length, zlib.crc32(data, zlib.crc32(tail)), record.seq, record.epoch),
            data,
        )
    return b"".join(parts)


class _Scan(NamedTuple):
    records: list[StoredRecord]
    end: int
    """Offset just past the last complete batch."""
    reason: str | None
    """Why scanning stopped before the end of the buffer (None: it did not)."""
    written: int
    """Offset where the zero tail of a preallocated segment starts (or the buffer's end)."""


def scan_frames(buf: bytes, after_seq: int = 0) -> _Scan:
    """The complete batches at the start of ``buf``; stop at a short, bad or unordered frame."""
    view = memoryview(buf)
    records: list[StoredRecord] = []
    size, pos, last = len(buf), 0, after_seq
    batch_pos, batch_len, reason = 0, 0, None
    while pos < size:
        if view[pos : pos + HEADER_BYTES] == _ZEROS[: size - pos]:
            if buf.count(0, pos) < size - pos:  # zeros, then data: a batch torn by a power loss
                reason = "zeros followed by data (a batch torn by a power loss)"
            else:
                size = pos  # the zero tail of a preallocated segment: the end
            break
        if size - pos < HEADER_BYTES:
            reason = f"frame header cut short at {size - pos} bytes"
            break
        length, crc, seq, epoch = _HEAD.unpack_from(buf, pos)
        more, length = length & _MORE, length & ~_MORE
        end = pos + HEADER_BYTES + length
        if end > size:
            reason = f"frame of {length} bytes cut short at {size - pos - HEADER_BYTES}"
            break
        if zlib.crc32(view[pos + 8 : end]) != crc:
            reason = "CRC mismatch"
            break
        if seq <= last:
            reason = f"seq {seq} does not follow seq {last}"
            break
        records.append(StoredRecord(seq, epoch, bytes(view[pos + HEADER_BYTES : end])))
        last, pos = seq, end
        if not more:
            batch_pos, batch_len = pos, len(records)
    if batch_pos < pos and reason is None:
        reason = "batch cut short"
    del records[batch_len:]
    return _Scan(records, batch_pos, reason, size if reason is None else len(buf))


def read_log(run_dir: Path, after_seq: int = 0) -> ReadResult:
    """The records after ``after_seq``; a torn or corrupt tail ends the read and is reported."""
    segments = list_segments(run_dir)
    start = first_needed(segments, after_seq)
    out: list[StoredRecord] = []
    last = 0
    for i in range(start, len(segments)):
        path = segments[i][1]
        limit = segments[i + 1][0] if i + 1 < len(segments) else None
        buf = path.read_bytes()
        scan = scan_frames(buf, last)
        copies = False
        for record in scan.records:
            if limit is not None and record.seq >= limit:
                copies = True  # left by an interrupted prune; the next segment has them
                break
            if record.seq > after_seq:
                out.append(record)
            last = record.seq
        if scan.reason is not None and not copies:
            later = segments[i + 1 :]
            skipped = len(buf) - scan.end + sum(_size(p) for _, p in later)
            also = f" and {len(later)} later segment(s)" if later else ""
            problem = (
                f"run {run_dir.name}: log segment {path.name} is torn or corrupt at byte "
                f"{scan.end} ({scan.reason}); {skipped} bytes skipped{also}"
            )
            return ReadResult(out, problem)
    return ReadResult(out)


def list_segments(run_dir: Path) -> list[tuple[int, Path]]:
    log = run_dir / "log"
    found = [(int(m[1]), log / m[0]) for n in os.listdir(log) if (m := _SEGMENT.fullmatch(n))]
    return sorted(found)


def list_snapshots(run_dir: Path) -> list[int]:
    names = os.listdir(run_dir / "snapshots")
    return sorted(int(m[1]) for n in names if (m := _SNAPSHOT.fullmatch(n)))


def first_needed(segments: list[tuple[int, Path]], after_seq: int) -> int:
    """Index of the first segment that can hold a seq after ``after_seq``."""
    start = 0
    for i, (first, _) in enumerate(segments):
        if first <= after_seq + 1:
            start = i
    return start


def newest_seq(run_dir: Path) -> int:
    """The newest seq in the log (or the newest snapshot's, if the log is pruned away)."""
    snaps = list_snapshots(run_dir)
    floor = snaps[-1] if snaps else 0
    for _, path in reversed(list_segments(run_dir)):
        records = scan_frames(_read_or_empty(path)).records
        if records:
            return max(records[-1].seq, floor)
    return floor


def repair(run_dir: Path, *, fsync: bool) -> int:
    """Quarantine a torn/corrupt tail of the log a resume would read; return the last seq."""
    snaps = list_snapshots(run_dir)
    last = snaps[-1] if snaps else 0
    segments = list_segments(run_dir)
    for i in range(first_needed(segments, last), len(segments)):
        path = segments[i][1]
        buf = path.read_bytes()
        scan = scan_frames(buf)
        if not scan.records and scan.reason is None:
            path.unlink()  # created by a writer that died before its first write
            continue
        if scan.records:
            last = max(last, scan.records[-1].seq)
        if scan.reason is None:
            if scan.written < len(buf):  # a crashed writer's preallocated zeros
                os.truncate(path, scan.written)
            continue
        quarantine = run_dir / "quarantine"
        quarantine.mkdir(mode=0o700, exist_ok=True)
        write_atomic(_aside(quarantine, f"{path.name}.{scan.end}.bad"), buf[scan.end :], fsync)
        for _, later in segments[i + 1 :]:
            os.replace(later, _aside(quarantine, f"{later.name}.0.bad"))
        if scan.end == 0:
            path.unlink()
        else:
            with path.open("r+b") as segment:
                segment.truncate(scan.end)
                os.fsync(segment.fileno())
        break
    fsync_dir(run_dir / "log")
    return last


def _aside(folder: Path, name: str) -> Path:
    """A path in ``folder`` named ``name`` that does not overwrite an earlier quarantine."""
    path = folder / name
    while path.exists():
        path = folder / f"{name}.{secrets.token_hex(2)}"
    return path


def drop_covered(log_dir: Path, covered: int, may_touch_newest: bool, fsync: bool) -> int:
    """Remove log records with seq <= ``covered``: whole segments, or by rewriting one."""
    segments = list_segments(log_dir.parent)
    dropped = 0
    for i, (first, path) in enumerate(segments):
        if first > covered:
            break
        limit = segments[i + 1][0] if i + 1 < len(segments) else None
        if limit is None and not may_touch_newest:
            break
        buf = path.read_bytes()
        scan = scan_frames(buf)
        gone = [r for r in scan.records if r.seq <= covered]
        kept = [r for r in scan.records if r.seq > covered and (limit is None or r.seq < limit)]
        dropped += len(gone)
        if limit is not None and limit <= covered + 1:
            path.unlink()  # every record in it is covered
            continue
        if gone and (kept or (limit is None and scan.end < scan.written)):
            cut = sum(HEADER_BYTES + len(r.data) for r in gone)
            first_kept = kept[0].seq if kept else covered + 1
            write_atomic(log_dir / f"{first_kept:020d}.seg", buf[cut : scan.written], fsync)
            path.unlink()
        elif gone:
            path.unlink()  # nothing left but copies of the next segment's records
        break
    if fsync:
        fsync_dir(log_dir)
    return dropped


# -- durable file writes ---------------------------------------------------------------
def write_new(path: Path, data: bytes, *, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, fsync: bool) -> None:
    """Replace ``path`` all or nothing: a temp file, renamed over it."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        write_new(tmp, data, fsync=fsync)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        fsync_dir(path.parent)


def fsync_file(fd: int, directory: Path | None, data_only: bool = False) -> None:
    """Make ``fd`` durable (only its data and size with ``data_only``: ``fdatasync``)."""
    if data_only and hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:
        os.fsync(fd)
    if directory is not None:
        fsync_dir(directory)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_or_empty(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def last_write_time(run_dir: Path) -> float | None:
    """When the newest segment (or, with the log pruned away, snapshot) was written."""
    segments = list_segments(run_dir)
    snaps = list_snapshots(run_dir)
    paths = [segments[-1][1]] if segments else []
    paths += [run_dir / "snapshots" / f"{snaps[-1]:020d}.snap"] if snaps else []
    for path in paths:
        try:
            return path.stat().st_mtime
        except FileNotFoundError:
            continue
    return None

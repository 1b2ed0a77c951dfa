"""Head files: a run's high-water mark kept beside its log, where losing the log leaves it.

The file and SQLite stores keep, per run, the seq of the last record an append
acknowledged in a 12-byte file (``<seq u64><crc32 u32>``), overwritten in place after
every append. A log that later holds less - a truncated segment, a deleted one, a lost
SQLite ``-wal`` - is then detected on resume instead of replaying completed effects.

The head is written after the log and not fsynced on its own: it never runs ahead of
what an append made durable, so it cannot claim records the crash of a writer took
back; a power loss may leave it behind the log, which only makes it a lower bound.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

_HEAD = struct.Struct("<QI")


def encode_head(seq: int) -> bytes:
    packed = struct.pack("<Q", seq)
    return packed + struct.pack("<I", zlib.crc32(packed))


def write_head(fd: int, seq: int) -> None:
    """Overwrite the head held open as ``fd`` with ``seq`` (one ``pwrite``, no fsync)."""
    os.pwrite(fd, encode_head(seq), 0)


def open_head(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def store_head(path: Path, seq: int) -> None:
    fd = open_head(path)
    try:
        write_head(fd, seq)
    finally:
        os.close(fd)


def read_head(path: Path) -> int | None:
    """The seq the head holds; None if there is none or it is damaged (nothing to compare)."""
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if len(raw) != _HEAD.size:
        return None
    seq, crc = _HEAD.unpack(raw)
    if zlib.crc32(raw[:8]) != crc:
        return None
    return int(seq)

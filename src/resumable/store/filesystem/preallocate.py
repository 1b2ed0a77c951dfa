"""Preallocated log segments: a file store segment's space taken ahead of its records.

A segment the owner opens is allocated at once to :data:`SEGMENT_BYTES` with
``posix_fallocate``; its frames are then written in place at the current offset and
made durable with ``fdatasync``. The file's size does not change on an append, so the
flush carries no metadata journal commit (an append that grows the file needs one).
The space past the last frame reads as zeros, which :func:`~resumable.store.filesystem.segments.scan_frames`
takes for the segment's end. A segment that fills up is closed and the next batch opens
a new one; a closed segment gives its unused zeros back (``ftruncate``, not synced: if a
power loss undoes it, the zeros are back, which reads the same).

Where the file system cannot preallocate (``posix_fallocate`` missing, or failing with
``EOPNOTSUPP``/``EINVAL``), a segment is appended to and fsynced as before; a warning
says so once per process. A segment the disk has no room for is appended to as well
(silently): a nearly full disk still takes records until it is full.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from pathlib import Path

from resumable.store.filesystem.segments import scan_frames

SEGMENT_BYTES = 1 << 20
"""The space a new segment is allocated with (a larger batch gets a segment its size)."""

_UNSUPPORTED = (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS)
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)
_warned = False


def open_segment_file(path: Path, room: int) -> tuple[int, int, int]:
    """Open (or create) the segment ``path`` for writing: ``(fd, end, capacity)``.

    ``end`` is where its next frame goes: 0 for a new file; past the last complete batch
    of an existing one, whose unverified rest is cut off first. ``capacity`` is the size
    it is preallocated to (at least ``end + room``), or 0 where it cannot be: then it is
    appended to.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        end = 0
        if os.fstat(fd).st_size:  # never for a new segment: repair removed empty ones
            with open(fd, "rb", closefd=False) as existing:
                end = scan_frames(existing.read()).end
            os.ftruncate(fd, end)
        capacity = max(SEGMENT_BYTES, end + room)
        if not _preallocate(fd, end, capacity):
            capacity = 0
    except BaseException:
        os.close(fd)
        raise
    return fd, end, capacity


def _preallocate(fd: int, end: int, size: int) -> bool:
    """Allocate ``fd`` to ``size`` bytes; False if it is to be appended to instead.

    A disk without room for a whole segment is not yet full: the segment is appended
    to, and an append fails only when its own bytes do not fit (as without preallocation).
    """
    allocate = getattr(os, "posix_fallocate", None)
    try:
        if allocate is None:
            raise OSError(errno.ENOSYS, "posix_fallocate is not available")
        allocate(fd, 0, size)
    except OSError as exc:
        if exc.errno in _NO_ROOM:
            os.ftruncate(fd, end)  # what a failed allocation may have left
            return False
        if exc.errno not in _UNSUPPORTED:
            raise
        _warn_once(exc)
        return False
    return True


def _warn_once(exc: OSError) -> None:
    global _warned
    if _warned:
        return
    _warned = True
    print(
        "resumable: warning: the checkpoint store's file system cannot preallocate log "
        f"segments ({exc.strerror or exc}); appending with fsync instead (slower per record)",
        file=sys.stderr,
        flush=True,
    )


def release_tail(fd: int, end: int) -> None:
    """Give a closed segment's unused zeros back; not synced (the zeros read the same)."""
    with contextlib.suppress(OSError):  # only space is lost: the zeros read as the end
        os.ftruncate(fd, end)

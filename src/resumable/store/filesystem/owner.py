"""The ownership side of a FileStore run: its ``flock`` and the segment its owner appends to.

A run is owned by the process holding ``runs/<run_id>/lock`` with ``flock``; the lock
goes with the fd, so a crashed owner releases it without any clean-up. ``OwnedRun`` is
what the owning store object keeps open between appends: the segment it writes in place
(:mod:`resumable.store.filesystem.preallocate`), a new one when it fills up.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from resumable.errors import RunBusyError
from resumable.store.filesystem.background_fsync import FsyncInProgress
from resumable.store.filesystem.preallocate import open_segment_file, release_tail


class OwnedRun:
    """A run this store object owns: its lock, epoch, and the segment being appended to."""

    __slots__ = (
        "capacity",
        "epoch",
        "fd",
        "head_fd",
        "head_path",
        "last_seq",
        "lock_fd",
        "log_dir",
        "segment",
        "size",
        "syncing",
    )

    def __init__(
        self, lock_fd: int, head_fd: int, epoch: int, last_seq: int, log_dir: Path
    ) -> None:
        self.lock_fd = lock_fd
        self.head_fd = head_fd
        self.head_path = log_dir.parent / "head"
        """The head file's path (named in the errors of its updates)."""
        self.epoch = epoch
        self.last_seq = last_seq
        self.log_dir = log_dir
        self.fd = -1
        self.segment: Path | None = None
        self.size = 0
        """Where the segment's next frame goes (the end of its last complete batch)."""
        self.capacity = 0
        """The size the segment is preallocated to; 0 when it is appended to and fsynced."""
        self.syncing: FsyncInProgress | None = None
        """The last batch's fsync, while it runs in the helper (``FileStore.begin_append``)."""

    def write(self, frames: bytes, first_seq: int) -> bool:
        """Write a framed batch at the segment's end; True if it opened a new segment.

        A batch that does not fit in a preallocated segment's room starts a new one.
        """
        created = self.fd < 0
        if not created and self.capacity and self.size + len(frames) > self.capacity:
            self.close_segment()
            created = True
        if created:
            self.open_segment(first_seq, len(frames))
        written = os.pwrite(self.fd, frames, self.size)
        if written != len(frames):
            raise OSError(errno.ENOSPC, f"short write ({written} of {len(frames)} bytes)")
        self.size += written
        return created

    def open_segment(self, first_seq: int, room: int = 0) -> None:
        self.segment = self.log_dir / f"{first_seq:020d}.seg"
        self.fd, self.size, self.capacity = open_segment_file(self.segment, room)

    def finish_sync(self) -> None:
        """Wait for the background fsync of the last batch, if any; its waiter sees its error."""
        syncing, self.syncing = self.syncing, None
        if syncing is not None:
            syncing.join()

    def close_segment(self) -> None:
        self.finish_sync()  # its head update must land before the segment is given back
        if self.fd >= 0:
            if self.capacity:
                release_tail(self.fd, self.size)
            os.close(self.fd)
            self.fd = -1

    def undo_write(self) -> None:
        """Cut a partial write back off and close the segment: the next batch starts a new one."""
        if self.fd < 0:
            return
        release_tail(self.fd, self.size)
        self.capacity = 0  # cut already: nothing for close_segment to give back
        self.close_segment()


def try_lock(path: Path) -> int | None:
    """An fd holding the run's lock, or None if a live owner holds it."""
    fd, _ = _flock(path, os.O_RDWR, fcntl.LOCK_EX)
    return fd


def is_locked(path: Path) -> bool:
    """Whether a live owner holds the run (probed without keeping the lock)."""
    fd, held = _flock(path, os.O_RDONLY, fcntl.LOCK_SH)
    if fd is not None:
        os.close(fd)
    return held


def _flock(path: Path, mode: int, lock: int) -> tuple[int | None, bool]:
    """Take ``lock`` on the run's lock file without waiting.

    Returns the fd holding it (None if there is no file or another process holds it)
    and whether another process holds it.
    """
    try:
        fd = os.open(path, mode | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, False
    try:
        fcntl.flock(fd, lock | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None, True
    return fd, False


def busy_error(run_id: str) -> RunBusyError:
    return RunBusyError(
        f"run {run_id} is owned by a live process; wait for it to finish or stop it "
        "(`resumable runs` shows it as running)",
        run_id=run_id,
    )

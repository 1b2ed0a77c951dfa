"""The ownership side of a FileStore run: its ``flock`` and the segment its owner appends to.

A run is owned by the process holding ``runs/<run_id>/lock`` with ``flock``; the lock
goes with the fd, so a crashed owner releases it without any clean-up. ``OwnedRun`` is
what the owning store object keeps open between appends.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from resumable.errors import RunBusyError
from resumable.store.filesystem.background_fsync import FsyncInProgress


@dataclass(slots=True)
class OwnedRun:
    """A run this store object owns: its lock, epoch, and the segment being appended to."""

    lock_fd: int
    head_fd: int
    epoch: int
    last_seq: int
    log_dir: Path
    fd: int = -1
    segment: Path | None = None
    size: int = 0
    syncing: FsyncInProgress | None = None
    """The last batch's fsync, while it runs on the syncer thread (``FileStore.begin_append``)."""

    def open_segment(self, first_seq: int) -> None:
        self.segment = self.log_dir / f"{first_seq:020d}.seg"
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        self.fd = os.open(self.segment, flags, 0o600)
        self.size = os.fstat(self.fd).st_size

    def finish_sync(self) -> None:
        """Wait for the background fsync of the last batch, if any; its waiter sees its error."""
        syncing, self.syncing = self.syncing, None
        if syncing is not None:
            syncing.join()

    def close_segment(self) -> None:
        self.finish_sync()  # the syncer thread may still be using the fd
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def undo_write(self) -> None:
        """Cut a partial write back off, so the next batch follows the last good frame."""
        if self.fd < 0:
            return
        try:
            os.ftruncate(self.fd, self.size)
        except OSError:
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

"""The file store's background fsync: a batch written now, made durable while the program goes on.

``fsync`` releases the GIL, so one thread can wait for the disk while the event loop's
thread goes on with Python work (compiling the next statement, running it up to its next
barrier). One syncer thread serves the process, started on first use and again in a forked
child. Whoever claims the records durable calls :meth:`FsyncInProgress.wait` first.

The handshake: a woken thread must take the GIL before it can call ``fsync``, and the
loop's thread, busy with Python code, would keep the GIL until it next blocks (CPython
asks for it back only after its 5 ms switch interval) - the fsync would start at the
barrier and nothing would overlap. So :func:`start_fsync` returns once the syncer thread
has taken the job, right before it calls ``fsync``.
"""

from __future__ import annotations

import _thread
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from resumable.store.filesystem.segments import fsync_file
from resumable.store.heads import write_head

__all__ = ["FsyncInProgress", "start_fsync"]

Failure = Callable[[OSError, Any], Exception]
"""Turns the OSError of a failed fsync or head update (its ``filename``: None for the
segment, the head's path) into the error to raise."""


def _held_lock() -> _thread.LockType:
    """Taken at once; released when the fsync has ended, so joining it is acquiring it."""
    lock = _thread.allocate_lock()
    lock.acquire()
    return lock


class FsyncInProgress:
    """A segment's fsync, then its head update, running on the syncer thread."""

    __slots__ = (
        "_done",
        "_error",
        "_finished",
        "data_only",
        "directory",
        "failure",
        "fd",
        "head",
        "seq",
    )

    def __init__(
        self,
        fd: int,
        directory: Path | None,
        head: tuple[int, Path],
        seq: int,
        failure: Failure,
        data_only: bool = False,
    ) -> None:
        self.fd = fd
        self.directory = directory
        """The segment's folder, fsynced too when the segment is new."""
        self.head = head
        """The head file (fd, path), written with ``seq`` once the segment is durable."""
        self.seq = seq
        self.failure = failure
        self.data_only = data_only
        """``fdatasync`` (a preallocated segment written in place) rather than ``fsync``."""
        self._error: BaseException | None = None
        self._finished = False
        self._done = _held_lock()

    def run(self) -> None:
        """On the syncer thread: make the segment durable, then move the head up to it."""
        try:
            fsync_file(self.fd, self.directory, self.data_only)
            try:
                write_head(self.head[0], self.seq)
            except OSError as exc:
                exc.filename = self.head[1]
                raise
        except BaseException as exc:  # the waiter raises it; the thread serves the next job
            self._error = exc
        finally:
            self._finished = True
            self._done.release()

    def join(self) -> None:
        """Block until the fsync has ended, however it ended."""
        if not self._finished:
            self._done.acquire()
            self._done.release()

    def wait(self) -> None:
        """Block until the records are durable; raise the error ``append`` would have raised."""
        self.join()
        exc = self._error
        if isinstance(exc, OSError):
            raise self.failure(exc, exc.filename) from exc
        if exc is not None:
            raise exc


class _Syncer:
    """The thread that runs every :class:`FsyncInProgress` of the process, one at a time."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[FsyncInProgress, _thread.LockType]] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None

    def start(self, job: FsyncInProgress) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="resumable fsync", daemon=True)
            self._thread.start()
        taken = _thread.allocate_lock()
        taken.acquire()
        self._jobs.put((job, taken))
        taken.acquire()  # the handshake (see the module's docstring)

    def _serve(self) -> None:
        jobs = self._jobs
        while True:
            job, taken = jobs.get()
            taken.release()
            job.run()


_syncer = _Syncer()


def _forget_thread_after_fork() -> None:
    """A forked child has no syncer thread: the next start makes its own."""
    global _syncer
    _syncer = _Syncer()


os.register_at_fork(after_in_child=_forget_thread_after_fork)


def start_fsync(
    fd: int,
    directory: Path | None,
    head: tuple[int, Path],
    seq: int,
    failure: Failure,
    *,
    data_only: bool = False,
    inline: bool = False,
) -> FsyncInProgress:
    """Fsync ``fd`` (and ``directory``) on the syncer thread, then write ``seq`` to the head;
    ``inline``: do it now, on this thread (finished when this returns; its error raised by
    ``wait()``: see :mod:`.sync_choice`)."""
    job = FsyncInProgress(fd, directory, head, seq, failure, data_only)
    if inline:
        job.run()
    else:
        _syncer.start(job)
    return job

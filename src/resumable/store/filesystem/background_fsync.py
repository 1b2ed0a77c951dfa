"""The file store's background fsync: a batch written now, made durable by a helper process
while the program goes on.

Why a process and not a thread: a thread must hold the GIL to call ``fsync``, and the loop's
thread, busy with Python code, keeps it until it next blocks (CPython asks for it back only
after its 5 ms switch interval); handing a thread the job and taking the result back costs
two thread wake-ups on the loop's path, 50 to 100 us each on a small VM, about what the
overlap saves. The helper (:mod:`.fsync_helper`) has an interpreter of its own: one
``sendmsg`` hands it the segment's descriptor and the head's new bytes, and the loop's
thread goes on at once. The waiter reads the answer, polling for up to :data:`SPIN_NS`
before it blocks: by then the fsync has usually ended, and waking a blocked thread is the
dear part. An fsync makes the file's data durable whichever process wrote it (they are
the inode's pages), and the helper gets the very file description the store wrote through.

One helper serves the process. It is started once :data:`START_AFTER` fsynced boundaries
asked for it (a short run never pays for it), in the background: until it says it is up,
and for good if it cannot start, boundaries fsync inline. A helper that dies leaves its
unanswered jobs to their waiter, which runs them inline; a forked child starts its own.
Whoever claims the records durable calls :meth:`FsyncInProgress.wait` first.
"""

from __future__ import annotations

import _thread
import atexit
import collections
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from resumable.store.filesystem import fsync_helper
from resumable.store.filesystem.fsync_helper import (
    ANSWER,
    DATA_ONLY,
    DONE,
    FDS,
    HEAD_FAILED,
    READY,
)
from resumable.store.filesystem.segments import fsync_file
from resumable.store.heads import encode_head, write_head

__all__ = ["FsyncInProgress", "helper_ready", "start_fsync"]

START_AFTER = 16
"""Fsynced boundaries before the helper is started (it costs a process)."""
SPIN_NS = 300_000
"""How long a waiter polls for the helper's answer before it blocks."""

_HELPER_PATH = os.path.abspath(fsync_helper.__file__)  # before the program changes directory

Failure = Callable[[OSError, Any], Exception]
"""Turns the OSError of a failed fsync or head update (its ``filename``: None for the
segment, the head's path) into the error to raise."""


class FsyncInProgress:
    """A segment's fsync, then its head update: in the helper, or inline."""

    __slots__ = (
        "_error",
        "_finished",
        "_via",
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
        self._via: _Helper | None = None
        """The helper it was handed to, until it answered."""

    def run(self) -> None:
        """Here and now: make the segment durable, then move the head up to it."""
        try:
            fsync_file(self.fd, self.directory, self.data_only)
            try:
                write_head(self.head[0], self.seq)
            except OSError as exc:
                exc.filename = self.head[1]
                raise
        except BaseException as exc:  # the waiter raises it
            self._error = exc
        finally:
            self._finished = True

    def answered(self, stage: int, code: int) -> None:
        """The helper's answer: done, or which stage failed with which errno."""
        if stage != DONE:
            exc = OSError(code, os.strerror(code) if code else "the fsync helper refused it")
            exc.filename = self.head[1] if stage == HEAD_FAILED else None
            self._error = exc
        self._finished = True
        self._via = None

    def join(self) -> None:
        """Block until the fsync has ended, however it ended."""
        if not self._finished and self._via is not None:
            self._via.answer(self)

    def wait(self) -> None:
        """Block until the records are durable; raise the error ``append`` would have raised."""
        self.join()
        exc = self._error
        if isinstance(exc, OSError):
            raise self.failure(exc, exc.filename) from exc
        if exc is not None:
            raise exc


class _Helper:
    """The process's fsync helper: started, up, or gone; its jobs answered in order."""

    def __init__(self) -> None:
        self.asked = 0
        self.up = False
        self.gone = False
        self.pid = 0
        self.sent = 0
        """Jobs handed over (``bench.py stmt-shape`` counts them with the fsyncs)."""
        self._sock: socket.socket | None = None
        self._pending: collections.deque[FsyncInProgress] = collections.deque()
        self._lock = _thread.allocate_lock()

    def ready(self) -> bool:
        if self.up or self.gone:
            return self.up
        if self._sock is None:
            self.asked += 1
            if self.asked >= START_AFTER:
                self.start()
            return False
        with self._lock:
            try:
                said = self._sock.recv(ANSWER.size, socket.MSG_DONTWAIT | socket.MSG_PEEK)
            except BlockingIOError:
                return False
            except OSError:
                said = b""
            if said and len(said) < ANSWER.size:
                return False  # the rest of its first answer is on its way
            if said and ANSWER.unpack(self._sock.recv(ANSWER.size))[0] == READY:
                self.up = True
            else:
                self._lost()
        return self.up

    def start(self, wait: bool = False, argv: list[str] | None = None) -> None:
        """Spawn the helper (``argv``: another command serving the same socket, for tests);
        ``wait``: until it is up or gone."""
        ours, theirs = socket.socketpair()
        command = argv or [sys.executable, "-I", "-S", _HELPER_PATH]
        null = os.devnull
        try:
            self.pid = os.posix_spawn(
                command[0],
                command,
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, theirs.fileno(), 0),
                    (os.POSIX_SPAWN_OPEN, 1, null, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, null, os.O_WRONLY, 0),
                ],
            )
        except (OSError, AttributeError, ValueError):  # no interpreter to start, no posix_spawn
            ours.close()
            self.gone = True
            return
        finally:
            theirs.close()
        self._sock = ours
        atexit.register(self.stop)
        if wait:
            ours.settimeout(30)
            try:
                said = ours.recv(ANSWER.size)
            except OSError:
                said = b""
            ours.settimeout(None)
            self.up = len(said) == ANSWER.size and ANSWER.unpack(said)[0] == READY
            if not self.up:
                self._lost()

    def send(self, job: FsyncInProgress) -> bool:
        """Hand ``job`` over; False if the helper is gone (the caller runs it inline)."""
        request = bytes((DATA_ONLY if job.data_only else 0,)) + encode_head(job.seq)
        fds = FDS.pack(job.fd, job.head[0])
        with self._lock:
            if not self.up or self._sock is None:
                return False
            try:
                self._sock.sendmsg(
                    [request],
                    [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)],
                    getattr(socket, "MSG_NOSIGNAL", 0),
                )
            except OSError:
                self._lost()
                return False
            job._via = self
            self._pending.append(job)
            self.sent += 1
        return True

    def answer(self, job: FsyncInProgress) -> None:
        """Read answers, in order, until ``job``'s; if the helper is gone, run what it left."""
        with self._lock:
            while not job._finished:
                said = self._receive()
                if said is None:
                    self._lost()
                else:
                    self._pending.popleft().answered(*ANSWER.unpack(said))

    def _receive(self) -> bytes | None:
        """One answer, polled for up to :data:`SPIN_NS`, then waited for; None: gone."""
        sock = self._sock
        if sock is None:
            return None
        said, deadline = b"", 0
        while len(said) < ANSWER.size:
            try:
                if deadline and time.perf_counter_ns() > deadline:
                    part = sock.recv(ANSWER.size - len(said))
                else:
                    part = sock.recv(ANSWER.size - len(said), socket.MSG_DONTWAIT)
            except BlockingIOError:
                deadline = deadline or time.perf_counter_ns() + SPIN_NS
                continue
            except OSError:
                return None
            if not part:
                return None
            said += part
        return said

    def _lost(self, wait: bool = True) -> None:
        """The helper is gone: its unanswered jobs run here, and every later one too."""
        self.up, self.gone = False, True
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        pending, self._pending = self._pending, collections.deque()
        for job in pending:
            job._via = None
            job.run()
        self._reap(wait)

    def stop(self, wait: bool = False) -> None:
        """Let the helper go (it ends with its socket); ``wait``: and collect it. At the
        process's end nothing waits for it: a helper still starting would hold the exit up."""
        with self._lock:
            while self._pending:  # nothing unanswered is left behind
                said = self._receive()
                if said is None:
                    break
                self._pending.popleft().answered(*ANSWER.unpack(said))
            self._lost(wait)

    def _reap(self, wait: bool) -> None:
        """Collect the ended helper (``wait``: for up to 0.1 s, it ends once it reads the end)."""
        if not self.pid:
            return
        pid, self.pid = self.pid, 0
        for _ in range(100 if wait else 1):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    return
            except ChildProcessError:  # reaped by someone else's wait()
                return
            if wait:
                time.sleep(0.001)

    def forget(self) -> None:
        """In a forked child: the parent's helper is not ours to use."""
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self.pid = 0


_helper = _Helper()


def _forget_helper_after_fork() -> None:
    """A forked child has no helper: it starts its own when it needs one."""
    global _helper
    _helper.forget()
    _helper = _Helper()


os.register_at_fork(after_in_child=_forget_helper_after_fork)


def helper_ready() -> bool:
    """Whether boundaries can fsync in the helper now (counts towards starting it)."""
    return _helper.ready()


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
    """Fsync ``fd`` (and ``directory``) in the helper, then write ``seq`` to the head;
    ``inline`` (or a new segment, whose folder is fsynced too, or no helper up): do it now,
    on this thread (finished when this returns; its error raised by ``wait()``: see
    :mod:`.sync_choice`)."""
    job = FsyncInProgress(fd, directory, head, seq, failure, data_only)
    if inline or directory is not None or not _helper.send(job):
        job.run()
    return job

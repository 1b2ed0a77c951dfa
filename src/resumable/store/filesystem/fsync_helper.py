"""The fsync helper: a process of its own that makes a run's segment durable while it goes on.

Started by :mod:`.background_fsync` as ``python -I -S fsync_helper.py`` with one end of a
socket pair as its stdin, and imports nothing of resumable (nor ``site``): it starts in a
few milliseconds on the other core, beside the run. It says once that it is up, then
serves requests in order until the socket ends - the run's process closed it or died,
whatever it was doing.

A request is :data:`REQUEST_SIZE` bytes, a flags byte (:data:`DATA_ONLY`: ``fdatasync``,
the segment being preallocated and written in place) and the head's new 12 bytes,
sent with two file descriptors (``SCM_RIGHTS``): the segment's and the head file's, the
very descriptions the store writes through. The helper fsyncs the segment, then writes
the head (never before: the head must not claim what is not durable), closes both and
answers with an :data:`ANSWER`: the stage that failed (:data:`DONE` if none) and its
errno. After an answer it polls for the next request for up to :data:`SPIN_NS` before it
blocks: in a run of short statements the next one comes a few dozen microseconds later,
and waking a sleeping process would add more than that to its fsync.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from collections.abc import Callable

REQUEST_SIZE = 13
DATA_ONLY = 1
ANSWER = struct.Struct("<Bi")
READY, DONE, SEGMENT_FAILED, HEAD_FAILED, BAD_REQUEST = range(5)
SPIN_NS = 300_000
FDS = struct.Struct("2i")

Sync = Callable[[int], None]


def serve(sock: socket.socket, fsync: Sync = os.fsync, fdatasync: Sync | None = None) -> None:
    """Answer the requests arriving on ``sock`` until it ends."""
    data_sync: Sync = fdatasync or getattr(os, "fdatasync", None) or fsync
    sock.sendall(ANSWER.pack(READY, 0))
    while True:
        data, ancillary = _next_request(sock)
        if not data:
            return
        fds = [
            fd
            for level, kind, raw in ancillary
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
            for fd in struct.unpack(f"{len(raw) // 4}i", raw[: len(raw) // 4 * 4])
        ]
        while len(data) < REQUEST_SIZE:  # a stream: the rest of the request follows
            more = sock.recv(REQUEST_SIZE - len(data))
            if not more:
                return
            data += more
        sock.sendall(_do(data, fds, fsync, data_sync))


def _next_request(sock: socket.socket) -> tuple[bytes, list[tuple[int, int, bytes]]]:
    """The next request (empty: the socket ended), polled for before blocking."""
    room = socket.CMSG_SPACE(FDS.size)
    deadline = time.perf_counter_ns() + SPIN_NS
    while time.perf_counter_ns() < deadline:
        try:
            data, ancillary, _, _ = sock.recvmsg(REQUEST_SIZE, room, socket.MSG_DONTWAIT)
        except BlockingIOError:
            continue
        return data, ancillary
    data, ancillary, _, _ = sock.recvmsg(REQUEST_SIZE, room)
    return data, ancillary


def _do(request: bytes, fds: list[int], fsync: Sync, fdatasync: Sync) -> bytes:
    try:
        if len(fds) != 2:
            return ANSWER.pack(BAD_REQUEST, 0)
        segment, head = fds
        try:
            (fdatasync if request[0] & DATA_ONLY else fsync)(segment)
        except OSError as exc:
            return ANSWER.pack(SEGMENT_FAILED, exc.errno or 0)
        try:
            os.pwrite(head, request[1:REQUEST_SIZE], 0)
        except OSError as exc:
            return ANSWER.pack(HEAD_FAILED, exc.errno or 0)
        return ANSWER.pack(DONE, 0)
    finally:
        for fd in fds:
            os.close(fd)


def main() -> None:
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # what the run's process left inheritable
    with contextlib.suppress(OSError):  # the run's process is gone: nobody to answer
        serve(socket.socket(fileno=0))


if __name__ == "__main__":
    main()

"""The child side of a hand-off: drive, under the worker's lease, the run it sends over a socket.

Started as ``python -m resumable.fleet.handoff_child`` by :class:`.handoff.ChildRun`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pickle
import signal
import socket
import sys
import threading
from collections.abc import Callable

from resumable.config import Config
from resumable.durability.runs.session import store_for
from resumable.fleet.handoff import ATTACHED, LENGTH, REPORT, STOP
from resumable.fleet.queue import fleet_store
from resumable.fleet.worker import Worker
from resumable.store.base import Lease


def main() -> None:
    """``python -m resumable.fleet.handoff_child FD``: drive the run the worker sends over FD."""
    link = socket.socket(fileno=int(sys.argv[1]))
    (size,) = LENGTH.unpack(_receive(link, LENGTH.size))
    lease, config = pickle.loads(_receive(link, size))  # from the worker that started us
    sys.exit(asyncio.run(_drive_here(link, lease, config)))


async def _drive_here(link: socket.socket, lease: Lease, config: Config) -> int:
    store = fleet_store(store_for(config.durability, config), "worker")
    async with store:
        worker = Worker(
            store,
            config,
            env=os.environ,
            concurrency=1,
            owner=lease.owner,
            hand_off=False,
            on_attached=lambda _run_id: link.sendall(ATTACHED),
        )
        done = threading.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, worker.request_stop)
        threading.Thread(
            target=_follow, args=(link, loop, worker.request_stop, done), daemon=True
        ).start()
        await worker.drive_claimed(lease)
        sys.stdout.flush()
        done.set()
        link.sendall(REPORT + json.dumps(worker.report().counts).encode() + b"\n")
    return 0


def _follow(
    link: socket.socket,
    loop: asyncio.AbstractEventLoop,
    stop: Callable[[], None],
    done: threading.Event,
) -> None:
    """Pass the worker's stop requests on; if the worker is gone, die as it did (SIGKILL)."""
    with contextlib.suppress(OSError):
        for line in link.makefile("rb"):
            if line == STOP:
                loop.call_soon_threadsafe(stop)
    if not done.is_set():
        os.kill(os.getpid(), signal.SIGKILL)


def _receive(link: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = link.recv(size - len(data))
        if not chunk:
            sys.exit(1)  # the worker went away before it said what to drive
        data += chunk
    return bytes(data)


if __name__ == "__main__":
    main()

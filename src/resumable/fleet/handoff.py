"""A claimed run that hashes strings with another seed, driven by a child process started with it.

Design note. ``PYTHONHASHSEED`` takes effect only when an interpreter starts, and a worker
drives its runs in one process started with its store's seed (``durability/log/hashseed.py``). A
run recorded with another seed (started before stores had one, with an explicit seed, or
copied from another store) would iterate its sets in another order there, so the worker hands
it to a child, ``python -m resumable.fleet.handoff``, started with the run's seed and given the
worker's lease over a socket pair. The child attaches under that lease and drives the run with
the worker's own code (handing nothing off again); fencing is unchanged, since it writes with
the lease's epoch and owner. The worker renews the lease only until the child has attached and
renews it itself, so a child that stalls loses the run as a stalled worker would.

The socket ties the two together: a stop the worker is asked for is passed on (the first: stop
after the current await; the second: at once); a worker that dies closes it, and the child then
kills itself, so the run is left as a crash of the worker leaves it. The child writes to the
worker's stdout and stderr, and reports what it did (the worker's events) before it exits.
Rejected: a child that claims the run itself (another worker may take it between the release
and the claim) and ``fork()`` (the interpreter's seed is already set).

This module is the worker's side and the messages on the socket; the child's side, which
drives the run with a :class:`~resumable.fleet.worker.Worker`, is :mod:`.handoff_child`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import pickle
import socket
import struct
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from resumable.config import Config
from resumable.durability.log import hashseed
from resumable.durability.runs import control
from resumable.errors import FencedError, ResumableError, StoreError
from resumable.fleet.queue import FleetStore
from resumable.store.base import Lease

# the socket's messages: a length-prefixed pickle of (lease, config), then lines
LENGTH = struct.Struct(">I")
STOP = b"stop\n"
ATTACHED = b"attached\n"
REPORT = b"report "


@dataclass
class ChildRun:
    """The worker's side: start the child, keep the lease until it attached, relay stops."""

    lease: Lease
    seed: int
    store: FleetStore
    config: Config
    env: Mapping[str, str]
    log: Callable[[str], None]
    _writer: asyncio.StreamWriter | None = field(default=None, init=False)
    _stops: int = field(default=0, init=False)

    def stop(self) -> None:
        """Pass a stop request on (sent once the child is there to read it)."""
        self._stops += 1
        if self._writer is not None:
            self._writer.write(STOP)

    async def drive(self) -> dict[str, int]:
        """Run the child to its end; the events it noted (``ResumableError`` if it never said)."""
        ours, theirs = socket.socketpair()
        with ours:
            try:
                process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "resumable.fleet.handoff_child",
                    str(theirs.fileno()),
                    env={**self.env, hashseed.ENV: str(self.seed)},
                    pass_fds=(theirs.fileno(),),
                    stdin=asyncio.subprocess.DEVNULL,
                    start_new_session=True,  # a Ctrl-C reaches the worker, which passes it on
                )
            finally:
                theirs.close()
            self.log(
                f"run {self.lease.run_id} hashes strings with PYTHONHASHSEED={self.seed}: "
                f"driving it in child process {process.pid}, started with that seed"
            )
            reader, self._writer = await asyncio.open_connection(sock=ours)
            payload = pickle.dumps((self.lease, self.config))
            self._writer.write(LENGTH.pack(len(payload)) + payload + STOP * self._stops)
            attached = asyncio.Event()
            renewing = asyncio.create_task(self._renew_until(attached))
            try:
                report = await _listen(reader, attached)
                code = await process.wait()
            finally:  # cancelled: closing the socket ends the child as the worker's death would
                renewing.cancel()
                self._writer.close()
        if report is None:
            raise ResumableError(
                f"its child process {process.pid} ended (exit code {code}) before it reported"
            )
        return report

    async def _renew_until(self, attached: asyncio.Event) -> None:
        lease, ttl = self.lease, self.config.durability.lease_seconds
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(attached.wait(), ttl / 3)
                return
            try:
                lease = await self.store.renew(lease, ttl)
            except FencedError:
                return  # taken over: the child's first write is refused
            except StoreError:
                control.raise_if_cancelled()
                continue
            control.raise_if_cancelled()


async def _listen(reader: asyncio.StreamReader, attached: asyncio.Event) -> dict[str, int] | None:
    """Read the child's messages until it closes the socket: its report, if it sent one."""
    report = None
    while line := await reader.readline():
        if line == ATTACHED:
            attached.set()
        elif line.startswith(REPORT):
            report = {str(k): int(v) for k, v in json.loads(line[len(REPORT) :]).items()}
    return report

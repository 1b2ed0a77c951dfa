"""SIGINT and SIGTERM: the run stops at a safe point, is released at once, and is resumable.

What ``docker stop``, systemd, Kubernetes and Ctrl-C send is a request to stop, not a
crash. The first signal halts every run this process drives: no effect, step or foreign
await starts any more (each raises :class:`Interrupted`, which ``except Exception:`` in the
program lets through), and once no record is being appended the command's task is
cancelled, which ends the foreign await in flight (it runs again on resume, with the same
idempotency key, as after a kill). The session then writes what it holds, marks the run
``interrupted`` with the signal's name, and releases its lease on every store, so a resume
need not wait for it to lapse. A second signal during that stop is only acknowledged:
the stop goes on and ends the same way (exit 130 for SIGINT, 143 for SIGTERM).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Iterator
from typing import Any

__all__ = [
    "Interrupted",
    "exit_code",
    "received",
    "stop_on_signals",
    "stopped_runs",
    "track",
    "untrack",
]

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_live: dict[int, Any] = {}
"""The sessions this process drives (``RunSession``; tracked while their lease is held)."""
_received: list[int] = []
_stopped: list[str] = []
_stopping: set[asyncio.Future[None]] = set()


class Interrupted(BaseException):
    """Raised where the program would start an effect once a stop signal arrived."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


def track(session: Any) -> None:
    _live[id(session)] = session
    if _received:  # started while stopping: halted from the start
        _halt(session, _received[0])


def untrack(session: Any) -> None:
    _live.pop(id(session), None)


def received() -> int | None:
    """The first stop signal this process received, if any."""
    return _received[0] if _received else None


def stopped_runs() -> list[str]:
    """The runs a stop signal halted in this process."""
    return list(_stopped)


def exit_code(signum: int) -> int:
    return 128 + signum


@contextlib.contextmanager
def stop_on_signals(task: asyncio.Task[Any]) -> Iterator[None]:
    """While ``task`` (a command's whole work) runs, SIGINT and SIGTERM stop it in order."""
    loop = task.get_loop()
    installed = []
    for signum in SIGNALS:
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            loop.add_signal_handler(signum, _on_signal, signum, task)
            installed.append(signum)
    try:
        yield
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
            if _received:  # a later signal while the process exits does not kill it
                signal.signal(signum, signal.SIG_IGN)


def _on_signal(signum: int, task: asyncio.Task[Any]) -> None:
    name = signal.Signals(signum).name
    if _received:
        _say(f"{name} again: already stopping; the run is released in a moment")
        return
    _received.append(signum)
    for session in list(_live.values()):
        _halt(session, signum)
    if _live:
        runs = ", ".join(s.run_id for s in _live.values())
        _say(f"{name}: stopping run {runs} at the next safe point")
    _stopping.add(asyncio.ensure_future(_cancel_when_idle(task)))


def _halt(session: Any, signum: int) -> None:
    if session.run_id not in _stopped:
        _stopped.append(session.run_id)
    session.interrupted = f"stopped by {signal.Signals(signum).name}"
    session.manager.halted = Interrupted(signum)


async def _cancel_when_idle(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` where it waits, unless it is appending records or closing its run."""
    while not task.done():
        writing = [w for s in _live.values() if (w := s.manager.appending) is not None]
        if not writing:
            if not any(s.closed for s in _live.values()):
                task.cancel()
            return
        await asyncio.wait(writing)


def _say(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"resumable: {text}", file=sys.stderr, flush=True)

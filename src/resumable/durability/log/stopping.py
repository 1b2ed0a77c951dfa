"""How a run's process stops on purpose: asked to (a stop or a cancel), or killed by
``RESUMABLE_CRASH_AFTER=N`` right after its N-th record is durable (tests and demos)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping
from typing import Any

from resumable.errors import ConfigError

__all__ = [
    "StopRequested",
    "crash_after_from_env",
    "crash_now",
    "flush_output",
    "mute_program_output",
]


class StopRequested(BaseException):
    """Raised right after an await record is durable once the run was asked to stop.

    A ``BaseException`` so that ``except Exception:`` in generated code lets it through.
    """

    def __init__(self, run_id: str, seq: int, cancelled: str | None = None) -> None:
        super().__init__(f"run {run_id} stopped after record {seq}")
        self.run_id = run_id
        self.seq = seq
        self.cancelled = cancelled
        """The reason, when the stop is a cancel (``resumable cancel``)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (StopRequested, (self.run_id, self.seq, self.cancelled))


def crash_after_from_env(env: Mapping[str, str]) -> int | None:
    raw = env.get("RESUMABLE_CRASH_AFTER", "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(
            f"RESUMABLE_CRASH_AFTER must be a whole number of records, got {raw!r}",
            key="RESUMABLE_CRASH_AFTER",
        ) from None
    return value if value > 0 else None


def flush_output() -> None:
    """What the program printed reaches the OS before a record says it was printed."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "dirty", True):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()


def mute_program_output() -> None:
    """Silence the current run's program output for the rest of this process."""
    from resumable.exec.output import _current

    output = _current.get()
    if output is not None:
        output.muted = True


def crash_now() -> None:
    """RESUMABLE_CRASH_AFTER: die exactly as kill -9 would, right after a durable record."""
    flush_output()
    os.kill(os.getpid(), signal.SIGKILL)
    asyncio.get_event_loop().stop()  # pragma: no cover - unreachable after SIGKILL

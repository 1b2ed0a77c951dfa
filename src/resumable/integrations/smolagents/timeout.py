"""timeout_seconds: the code action in progress is interrupted when its time is up.

A timer thread raises ``ExecutionTimeoutError`` in the thread that runs the code (CPython's
asynchronous exception, delivered between two bytecodes: a call blocked in C, such as
``time.sleep``, is interrupted when it returns). It is raised only while the innermost
Python frame of that thread is the model's code: never inside resumable's journal (a
record half made) or inside a tool (whose call the journal holds whole or not at all);
until the code is back in its own frames, the timer waits. The statement in progress fails with it;
the turn's outcome is recorded like any failure, so the run stays resumable and a resume
returns the same error without running the code again. smolagents instead leaves the code
running in a thread of its own; here nothing of it goes on after the error.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from types import TracebackType

from smolagents.local_python_executor import ExecutionTimeoutError

from resumable.exec.hooks import is_program_code


class Deadline:
    """Interrupts the code run inside ``with Deadline(seconds):`` after ``seconds``."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._done = False
        self._thread = threading.get_ident()
        self._timer: threading.Timer | None = None

    def message(self) -> str:
        return f"Code execution exceeded the maximum execution time of {self.seconds} seconds"

    def _expire(self) -> None:
        while True:
            with self._lock:
                if self._done:
                    return
                frame = sys._current_frames().get(self._thread)
                if frame is not None and is_program_code(frame.f_code):
                    self.expired = True
                    _raise_in(self._thread, ExecutionTimeoutError)
                    return
            time.sleep(0.005)

    def __enter__(self) -> Deadline:
        if self.seconds is not None:
            self._timer = threading.Timer(self.seconds, self._expire)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._lock:
            self._done = True
            if self.expired:
                _drop_undelivered(self._thread)
        if self._timer is not None:
            self._timer.cancel()


class _Drained(BaseException):
    """Replaces a timeout not delivered yet, and is caught at once (see below)."""


def _drop_undelivered(thread: int) -> None:
    """Drop a timeout raised in ``thread`` and not delivered yet.

    Clearing it with ``PyThreadState_SetAsyncExc(thread, NULL)`` would leave CPython 3.11's
    eval breaker armed for good (the interpreter then checks for pending work at every
    instruction, and a traced coroutine can spin on it). So the current thread replaces it
    with an exception of its own and takes delivery of that one in a loop: delivering it
    disarms the breaker.
    """
    if thread != threading.get_ident():  # pragma: no cover - a deadline exits where it ran
        _raise_in(thread, None)
        return
    try:
        _raise_in(thread, _Drained)
        for _ in range(1_000_000):  # delivered at once, at the latest at the first jump back
            pass
    except _Drained:
        return
    _raise_in(thread, None)  # pragma: no cover - never delivered: cleared after all


def _raise_in(thread: int, kind: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread), ctypes.py_object(kind) if kind is not None else None
    )

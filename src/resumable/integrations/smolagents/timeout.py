"""timeout_seconds: the code action in progress is interrupted when its time is up.

A timer thread raises ``ExecutionTimeoutError`` in the thread that runs the code (CPython's
asynchronous exception, delivered between two bytecodes: a call blocked in C, such as
``time.sleep``, is interrupted when it returns). The statement in progress fails with it;
the turn's outcome is recorded like any failure, so the run stays resumable and a resume
returns the same error without running the code again. smolagents instead leaves the code
running in a thread of its own; here nothing of it goes on after the error.
"""

from __future__ import annotations

import ctypes
import threading
from types import TracebackType

from smolagents.local_python_executor import ExecutionTimeoutError


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
        with self._lock:
            if self._done:
                return
            self.expired = True
            _raise_in(self._thread, ExecutionTimeoutError)

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
                _raise_in(self._thread, None)  # one not delivered yet is dropped
        if self._timer is not None:
            self._timer.cancel()


def _raise_in(thread: int, kind: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread), ctypes.py_object(kind) if kind is not None else None
    )

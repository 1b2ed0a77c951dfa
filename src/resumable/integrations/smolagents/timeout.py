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
                _raise_in(self._thread, None)  # one not delivered yet is dropped
        if self._timer is not None:
            self._timer.cancel()


def _raise_in(thread: int, kind: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread), ctypes.py_object(kind) if kind is not None else None
    )

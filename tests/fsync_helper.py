"""An fsync helper process of a test's own: slow, failing, stopped or killed on purpose.

The helper is the real one (``store/filesystem/fsync_helper.py``, loaded from its file
as the store starts it, without importing resumable), serving with an ``os.fsync`` the
test chose. While a test holds it, every fsync the store leaves to the background goes
to it.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from resumable.store.filesystem import background_fsync, fsync_helper

_SERVE = """
import errno, importlib.util, os, socket, sys, time
sys.dont_write_bytecode = True  # -I ignores the environment's say: no cache in the source tree
spec = importlib.util.spec_from_file_location("fsync_helper", {path!r})
helper = importlib.util.module_from_spec(spec)
spec.loader.exec_module(helper)
failures = [{fail_first}]

def fsync(fd):
    time.sleep({delay})
    if failures[0]:
        failures[0] = False
        raise OSError(errno.EIO, "Input/output error")
    os.fsync(fd)

try:
    helper.serve(socket.socket(fileno=0), fsync=fsync, fdatasync=fsync)
except OSError:
    pass
"""


@contextmanager
def own_helper(
    monkeypatch: pytest.MonkeyPatch, *, delay: float = 0.0, fail_first: bool = False
) -> Iterator[background_fsync._Helper]:
    """A helper up for the block (``delay``: seconds each fsync takes; ``fail_first``: the
    first fails with EIO), in place of the process's; stopped and reaped afterwards."""
    code = _SERVE.format(path=fsync_helper.__file__, delay=delay, fail_first=fail_first)
    helper = background_fsync._Helper()
    helper.start(wait=True, argv=[sys.executable, "-I", "-S", "-c", code])
    assert helper.up, "the fsync helper did not start"
    monkeypatch.setattr(background_fsync, "_helper", helper)
    try:
        yield helper
    finally:
        if helper.pid:
            os.kill(helper.pid, signal.SIGCONT)  # a test may have stopped it
        helper.stop(wait=True)


def in_flight(helper: background_fsync._Helper) -> int:
    """Fsyncs handed to ``helper`` whose answer was not read yet."""
    return len(helper._pending)

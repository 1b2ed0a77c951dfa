"""A store that fails under a live run: the run stops, the program never sees the error.

A failed append, snapshot or blob write (a full disk, a read-only store, a lost server, a
write fenced because another owner took the run, a lease that ran out) is an
infrastructure fault, not a program error. It becomes :class:`StoreFailed`, a
``BaseException``, so that the ``try: ... except Exception:`` generated code often wraps
around its awaits lets it through; and the run's :class:`CheckpointManager` keeps it, so
that every later record, and every effect, step or foreign await about to start, raises it
again (a program that catches ``BaseException`` cannot go on either). The statement in
progress is suspended where it stood, the run is left ``interrupted`` with the reason, and
``resumable resume RUN`` continues it once the store works again.
"""

from __future__ import annotations

import errno
import time
from typing import Any

from resumable.durability.log.stopping import mute_program_output
from resumable.errors import FencedError, StoreError, StoreUnavailableError
from resumable.store.base import Lease

__all__ = [
    "EXIT_STORE_FAILED",
    "StopsOnStoreFaults",
    "StoreFailed",
    "expired",
    "store_failed",
]

EXIT_STORE_FAILED = 75
"""The exit code of a run stopped by its store (``EX_TEMPFAIL``: try again later)."""

_FULL = (errno.ENOSPC, errno.EDQUOT)
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


class StoreFailed(BaseException):
    """The run's store failed under it: the run stops (``interrupted``) and is resumed later.

    ``kind``: ``full``, ``read-only``, ``unreachable``, ``fenced`` (another owner has the
    run: nothing is written for it here) or ``failed``. ``reason`` is the one line a user
    reads, naming the store and the fix.
    """

    def __init__(self, run_id: str, kind: str, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.run_id = run_id
        self.kind = kind
        self.reason = reason
        self.detail = detail

    def again(self) -> StoreFailed:
        """A fresh signal carrying the same fault (raised at every later hook call)."""
        return StoreFailed(self.run_id, self.kind, self.reason, self.detail)

    def __reduce__(self) -> tuple[Any, ...]:
        return (StoreFailed, (self.run_id, self.kind, self.reason, self.detail))

    def __str__(self) -> str:
        return self.reason


class StopsOnStoreFaults:
    """What the run's writer keeps of why the run may not go on in this process."""

    run_id: str
    failure: StoreFailed | None = None
    """The store's fault that stopped the run: raised again at every later write."""
    halted: BaseException | None = None
    """Set by a stop signal (``interrupts``): no effect, step or foreign await starts."""

    renewal_failed: StoreError | None = None
    """Why the last renewal of a lease that expires failed (None: it did not)."""

    def _check_store(self) -> None:
        if self.failure is not None:
            raise self.failure.again()

    def _failed(self, error: StoreError) -> StoreFailed:
        return self._fail(store_failed(self.run_id, error))

    def _fail(self, failure: StoreFailed) -> StoreFailed:
        """Stop for good in this process; what the program prints unwinding is muted (the
        resume prints it)."""
        if self.failure is None:
            self.failure = failure
            mute_program_output()
        return self.failure.again()


def store_failed(run_id: str, error: StoreError) -> StoreFailed:
    """The stop signal of a store error: what failed, in the user's terms, and the fix."""
    detail = error.message.split(";")[0].strip()
    resume = f"`resumable resume {run_id}`"
    if isinstance(error, FencedError):
        return StoreFailed(
            run_id,
            "fenced",
            f"run {run_id} stopped here: another process owns it now (this one lost its "
            f"lease: {detail}); nothing more of it runs in this process",
            detail,
        )
    kind = _kind(error)
    fix = {
        "full": f"the store's disk is full: {detail}; free space and {resume}",
        "read-only": f"the store cannot be written: {detail}; make it writable and {resume}",
        "unreachable": f"the store cannot be reached: {detail}; bring it back and {resume}",
        "failed": f"the store failed: {detail}; fix it and {resume}",
    }[kind]
    return StoreFailed(run_id, kind, f"run {run_id} interrupted: {fix}", detail)


def expired(lease: Lease) -> bool:
    """Whether a lease that expires ran out (by this host's clock) without being renewed."""
    return lease.expires_at is not None and time.time() >= lease.expires_at


def _kind(error: StoreError) -> str:
    codes = {e.errno for e in _causes(error) if isinstance(e, OSError) and e.errno}
    text = " ".join(str(e) for e in _causes(error)).lower()
    if codes & set(_FULL) or "disk is full" in text or "no space" in text:
        return "full"
    if codes & set(_READ_ONLY) or "readonly" in text or "read-only" in text:
        return "read-only"
    if isinstance(error, StoreUnavailableError) or _lost_connection(text):
        return "unreachable"
    return "failed"


def _lost_connection(text: str) -> bool:
    words = ("connection", "unreachable", "not reachable", "lost", "timed out", "closed")
    return any(word in text for word in words)


def _causes(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen

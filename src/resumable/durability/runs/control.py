"""Operating a run from outside: cancelling it, and the limit on how often it is tried.

Cancel. A run nobody is driving (waiting, pending, crashed) is cancelled at once: a
``status`` record ``cancelled`` with the reason is appended under a fresh lease and the
metadata follows. A run a live process or worker drives cannot be written by anyone
else, so the request goes into its metadata (``extra["cancel"]``); the owner looks at
its metadata about once a second (a task beside the run, never on the per-await path),
then stops the run at its next await through the graceful-stop flag of its
:class:`CheckpointManager`, and writes ``cancelled`` itself before it lets the run go.
A cancelled run is never resumed or claimed again.

Attempts. Every start, resume or claim of a run is an attempt, counted in its metadata
(``extra["attempts"]``). An attempt that ends without a word (the process was killed)
leaves the run ``running`` with no owner; the next attempt notes that as the last
error. What is limited is failure, not work: an attempt that wrote a record past the
one it started from made progress, and sets the count of failed attempts back to 0;
one that ended without a word and without progress adds 1. Once
``[durability] max_attempts`` attempts in a row failed that way, the next one marks
the run ``failed`` with "gave up after N attempts ..." instead of running it, so a
program that dies at the same place every time is not picked up forever, while one
killed again and again as it moves on (spot machines, OOM kills) always finishes.
``resume --force`` allows one more attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace
from typing import Any, Protocol

from resumable.durability.log.checkpoints import CheckpointManager
from resumable.durability.log.records import Record, RecordCodec
from resumable.durability.log.store_faults import StoreFailed
from resumable.durability.runs import owners
from resumable.errors import ResumableError, RunBusyError, UsageError
from resumable.store.base import (
    INTERRUPTED,
    UNFINISHED_FORK,
    CheckpointStore,
    Lease,
    RunMeta,
    StoredRecord,
)

FINISHED = ("completed", "failed", "cancelled")
CANCEL = "cancel"
ATTEMPTS = "attempts"
CRASHES = "crashed_attempts"
OPEN = "attempt_open"
START = "attempt_from"  # the last record of the log when the current attempt began
LAST_ERROR = "last_error"
LAST_ERROR_OF = "last_error_attempt"
GAVE_UP = "gave_up"
WATCH_SECONDS = 1.0


class RunCancelled(ResumableError):
    """The run was cancelled (``resumable cancel``); it stopped and is never resumed."""

    exit_code = 1


class AttemptsExhausted(ResumableError):
    """The run used its ``max_attempts``; it is marked failed instead of run again."""

    exit_code = 1


# -- cancel -------------------------------------------------------------------------------
async def cancel_run(
    store: CheckpointStore, codec: RecordCodec, run_id: str, reason: str, *, owner: str
) -> str:
    """Cancel a run; returns ``"cancelled"`` (done now) or ``"requested"`` (a live owner stops it)."""
    meta = await store.get_meta(run_id)
    if meta.status in FINISHED:
        raise UsageError(
            f"run {run_id} already {meta.status}; only a running, waiting or crashed run "
            "can be cancelled",
            run_id=run_id,
        )
    try:
        lease = await owners.acquire(store, run_id, owner=owner)  # a dead owner's run too
    except RunBusyError:
        request = {"reason": reason, "at": time.time()}
        await store.put_meta(replace(meta, extra={**meta.extra, CANCEL: request}))
        return "requested"
    try:
        await mark_cancelled(store, codec, lease, reason)
    finally:
        await store.release(lease)
    return "cancelled"


async def mark_cancelled(
    store: CheckpointStore, codec: RecordCodec, lease: Lease, reason: str
) -> None:
    """Append ``status cancelled`` under ``lease`` and make the metadata say so."""
    run_id = lease.run_id
    result = await store.read(run_id, 0)
    last = result.records[-1].seq if result.records else 0
    record = Record(
        run_id,
        last + 1,
        "status",
        "main",
        time.time(),
        lease.epoch,
        {"status": "cancelled", "detail": {"reason": reason}},
    )
    await store.append(run_id, [StoredRecord(record.seq, lease.epoch, codec.seal(record))], lease)
    meta = await store.get_meta(run_id)
    extra = {k: v for k, v in meta.extra.items() if k != CANCEL}
    extra[CANCEL] = {"reason": reason, "at": time.time(), "done": True}
    await store.put_meta(
        replace(meta, status="cancelled", updated_at=time.time(), owner=None, extra=extra)
    )


class HeldRun(Protocol):
    """What control uses of a run this process drives (a :class:`~.session.RunSession`)."""

    store: CheckpointStore
    manager: CheckpointManager
    meta: RunMeta
    lease: Lease
    cancel_reason: str | None
    interrupted: str | None

    @property
    def run_id(self) -> str: ...


def cancel_requested(meta: RunMeta) -> str | None:
    """The reason of a cancel request the run's owner has not acted on yet, if any."""
    request = meta.extra.get(CANCEL)
    if isinstance(request, dict) and not request.get("done"):
        return str(request.get("reason") or "")
    return None


def cancel_reason(meta: RunMeta) -> str:
    request = meta.extra.get(CANCEL)
    return str(request.get("reason") or "") if isinstance(request, dict) else ""


def raise_if_cancelled() -> None:
    """Re-raise a cancellation a store's driver turned into an error of its own, or lost.

    redis-py, cancelled inside a command, can drop the connection and raise a connection
    error instead; and it sends every command through ``asyncio.wait_for``, which on
    Python 3.11 drops a cancellation that arrives as the send ends (the command then
    returns as usual). A loop that calls the store would sleep on with its cancellation
    spent, and whoever awaits it (``RunSession.close``) would wait forever: such loops
    call this after every store call, whatever it returned.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def watch_for_cancel(session: HeldRun, every: float = WATCH_SECONDS) -> None:
    """Beside a live run: once its metadata carries a cancel request, stop it at the next await."""
    while True:
        await asyncio.sleep(every)
        try:
            meta = await session.store.get_meta(session.run_id)
        except ResumableError:
            raise_if_cancelled()
            continue  # a passing outage; the request is still there next time
        raise_if_cancelled()
        reason = cancel_requested(meta)
        if reason is not None:
            session.cancel_reason = session.manager.cancelled = reason
            session.manager.stop_requested = True
            return


# -- attempts -----------------------------------------------------------------------------
def attempts(meta: RunMeta) -> int:
    """Attempts made at the run so far (its start, resumes and claims)."""
    value = meta.extra.get(ATTEMPTS, 0)
    return value if isinstance(value, int) else 0


def failures(meta: RunMeta, seq: int) -> int:
    """Attempts in a row that ended without a word and without progress, the log ending
    at ``seq``: the open attempt counts if it wrote nothing past the record it began at."""
    extra = meta.extra
    crashes = extra.get(CRASHES)
    crashes = crashes if isinstance(crashes, int) else 0
    start = extra.get(START)
    if isinstance(start, int) and seq > start:
        return 0
    return crashes + (1 if extra.get(OPEN) else 0)


def begin_attempt(extra: dict[str, Any], *, seq: int) -> dict[str, Any]:
    """The metadata extras of a run starting a new attempt, its log ending at record ``seq``.

    An attempt still open when the next one begins did not close its run: its process
    was killed or crashed, or its worker parked it after an error. It failed if the log
    still ends where it began; an attempt that wrote records sets the failures back to 0.
    """
    extra = dict(extra)
    made = extra.get(ATTEMPTS) if isinstance(extra.get(ATTEMPTS), int) else 0
    start = extra.get(START)
    if isinstance(start, int) and seq > start:
        extra[CRASHES] = 0
    if extra.pop(OPEN, False):
        if not (isinstance(start, int) and seq > start):
            extra[CRASHES] = int(extra.get(CRASHES) or 0) + 1
        if extra.get(LAST_ERROR_OF) != made:
            extra[LAST_ERROR] = (
                f"attempt {made} ended without a word after record {seq} "
                "(its process was killed or crashed)"
            )
    extra[ATTEMPTS] = int(made or 0) + 1
    extra[OPEN] = True
    extra[START] = seq
    extra.pop(INTERRUPTED, None)
    extra.pop(GAVE_UP, None)
    return extra


def note_error(meta: RunMeta, message: str) -> RunMeta:
    """``meta`` with ``message`` as the last error, that of its current attempt."""
    return replace(meta, extra={**meta.extra, LAST_ERROR: message, LAST_ERROR_OF: attempts(meta)})


def refuse_cancelled(meta: RunMeta) -> None:
    """A cancelled run is never resumed: a UsageError saying so."""
    if meta.status == "cancelled":
        why = cancel_reason(meta)
        raise UsageError(
            f"run {meta.run_id} was cancelled{f' ({why})' if why else ''}; it is never resumed "
            f"(fork it with `resumable fork {meta.run_id} --at N` to run part of it again)",
            run_id=meta.run_id,
        )


def unfinished_fork(meta: RunMeta) -> str | None:
    """Why a fork cannot run: ``fork`` stopped before all of it was written (None: it was)."""
    if not meta.extra.get(UNFINISHED_FORK):
        return None
    again = f"resumable fork {meta.parent} --at {meta.extra.get('forked_at')}"
    return (
        f"run {meta.run_id} is an unfinished fork: `resumable fork` stopped before all of it "
        f"was written, so it may lack records of run {meta.parent}; fork again (`{again}`, "
        "with the same edits), and `resumable gc` deletes this one"
    )


def never_started(run_id: str) -> str:
    """What to do with a run killed before its first record."""
    return (
        f"run {run_id} never started: its process died before its first record, so nothing "
        "of it ran; start the program again, and `resumable gc` deletes this one"
    )


def refuse_unfinished_fork(meta: RunMeta) -> None:
    """A fork not written whole is never resumed: a UsageError saying what to do instead."""
    problem = unfinished_fork(meta)
    if problem is not None:
        raise UsageError(problem, run_id=meta.run_id)


async def admit(
    store: CheckpointStore,
    codec: RecordCodec,
    lease: Lease,
    max_attempts: int,
    *,
    force: bool,
    seq: int | None = None,
) -> RunMeta:
    """The run's metadata if it may have another attempt (under ``lease``); else mark it.

    A cancel request left by a process that died before it saw it is carried out
    (:class:`RunCancelled`); a run whose last ``max_attempts`` attempts failed without
    progress (the log ending at ``seq``, read if not given) is marked failed
    (:class:`AttemptsExhausted`) unless ``force``.
    """
    meta = await store.get_meta(lease.run_id)
    refuse_cancelled(meta)
    reason = cancel_requested(meta)
    if reason is not None:
        await mark_cancelled(store, codec, lease, reason)
        raise RunCancelled(f"run {meta.run_id} cancelled: {reason or 'no reason given'}")
    if force:
        return meta
    if seq is None:
        seq = await _last_seq(store, lease.run_id)
    failed = failures(meta, seq)
    if failed < max_attempts:
        return meta
    extra = begin_attempt(meta.extra, seq=seq)
    extra.pop(OPEN)
    extra.pop(START)
    extra[ATTEMPTS] = extra[ATTEMPTS] - 1
    message = (
        f"gave up after {failed} attempts in a row that ended at record {seq} without getting "
        f"further: {extra.get(LAST_ERROR) or 'no error was recorded'}"
    )
    extra[GAVE_UP] = message
    await store.put_meta(replace(meta, status="failed", updated_at=time.time(), extra=extra))
    raise AttemptsExhausted(
        f"run {meta.run_id} {message}; `resumable resume {meta.run_id} --force` tries once more",
        run_id=meta.run_id,
    )


def gave_up(meta: RunMeta) -> str | None:
    """The message of a run marked failed for having used its attempts, if it was."""
    message = meta.extra.get(GAVE_UP)
    return str(message) if message else None


async def settle(session: HeldRun) -> None:
    """At the end of an attempt that ended in order (not a crash): close it in the metadata.

    A run cancelled while this process drove it gets its ``cancelled`` status record here;
    one stopped by a signal or its store is left ``running`` (resumable) with the reason.
    """
    reason = session.cancel_reason
    cancelled = reason is not None and session.meta.status == "running"
    if cancelled:
        detail = {"reason": reason}
        await session.manager.write("status", "main", {"status": "cancelled", "detail": detail})
        session.meta = replace(session.meta, status="cancelled")
    meta = await session.store.get_meta(session.run_id)
    if meta.owner not in (None, session.lease.owner):
        return  # another owner took the run over meanwhile: its metadata is not ours to write
    extra = {k: v for k, v in meta.extra.items() if k != OPEN}
    if cancelled:
        extra[CANCEL] = {"reason": reason, "at": time.time(), "done": True}
    elif session.interrupted is not None and session.meta.status == "running":
        extra[INTERRUPTED] = session.interrupted
    session.meta = replace(session.meta, extra=extra)
    await session.store.put_meta(
        replace(meta, status=session.meta.status, updated_at=time.time(), extra=extra)
    )


async def let_go(session: HeldRun) -> None:
    """Write what the session holds, close the attempt and release the lease.

    A run whose store failed is let go as well as the store allows (left ``interrupted``,
    with the reason), and one fenced by another owner is not written at all.
    """
    manager = session.manager
    try:
        with contextlib.suppress(StoreFailed):  # kept in manager.failure
            await manager.flush(closing=True)
        failure = manager.failure
        if failure is None:
            await settle(session)
        elif failure.kind != "fenced":
            session.interrupted = failure.reason
            with contextlib.suppress(ResumableError):  # the store may take this note
                await settle(session)
    finally:
        if manager.failure is None:
            await session.store.release(session.lease)
        else:
            with contextlib.suppress(ResumableError):
                await session.store.release(session.lease)


async def _last_seq(store: CheckpointStore, run_id: str) -> int:
    records = (await store.read(run_id, 0)).records
    return records[-1].seq if records else 0

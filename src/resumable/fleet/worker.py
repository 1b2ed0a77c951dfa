"""The worker fleet: runs queued in PostgreSQL, claimed and driven by ``resumable worker``.

Design note. PostgreSQL is the coordinator; a worker keeps no state of its own. It
is woken by the store's notifications (LISTEN/NOTIFY: a run submitted, a run released
by a stopping worker) and polls only as the fallback (a lapsed lease, a lost
notification connection). Each wake calls ``claim`` (``FOR UPDATE SKIP LOCKED``: runs
``pending``, or ``running`` with no live owner - orphaned by a dead worker or a killed ``resumable exec``), attaches to
each claimed run under the lease it got, and drives the run in its own task while the
session renews the lease. Fencing does the rest: a worker that was paused past its
lease finds its next append refused and drops the run without releasing it. A worker
hashes strings with its store's seed (the command starts itself again with it); a run
recorded with another seed is driven in a child process started with that one
(:mod:`resumable.fleet.handoff`), under the same lease.

What ends a run's task, and what the worker does with the run:

- it completed, failed or waits for a human: the status is in the store; released;
- the worker is stopping (SIGTERM): the current await finishes and is made durable,
  then :class:`StopRequested` unwinds the run; released, still ``running``, so another
  worker claims it at once;
- fenced (or its lease ran out while the worker was paused): another worker owns the run
  now; left alone, and nothing more of it runs here;
- the program cannot go on (non-determinism): marked ``failed``;
- anything else (store outage, wrong keys, a bug): the run is parked - its lease renewed
  once, never let go (a claim would take it at once), then left to lapse - so any worker
  retries it once per ``lease_seconds``, not in a loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from resumable import drivers  # noqa: F401  (registers every kind of run a worker drives)
from resumable.config import Config
from resumable.durability.log import hashseed
from resumable.durability.log.stopping import StopRequested
from resumable.durability.log.store_faults import StoreFailed
from resumable.durability.runs import control, interrupts
from resumable.durability.runs.kinds import resume_session
from resumable.durability.runs.owners import owner_name
from resumable.durability.runs.session import RunOutcome, RunSession, store_for
from resumable.errors import FencedError, ResumableError, StoreError, UsageError
from resumable.fleet.handoff import ChildRun
from resumable.fleet.migrate import MIGRATING
from resumable.fleet.queue import FleetStore, fleet_store, queue_run, submit
from resumable.store.base import Lease, RunStatus

Log = Callable[[str], None]
"""Where the worker's one-line messages go (stderr in the CLI)."""

_ENDED: dict[str, RunStatus] = {"completed": "completed", "failed": "failed", "waiting": "waiting"}
"""Outcomes that end a run's stay with a worker, as stored statuses."""

EVENTS = ("claimed", "completed", "failed", "waiting", "stopped", "cancelled", "fenced", "parked")


# -- the worker --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class WorkerReport:
    """What a worker did before it stopped: runs per outcome."""

    owner: str
    counts: dict[str, int]

    def summary(self) -> str:
        done = ", ".join(f"{self.counts.get(e, 0)} {e}" for e in EVENTS if self.counts.get(e))
        return done or "no runs"


def _stderr_line(text: str) -> None:
    stream = sys.__stderr__ or sys.stderr
    stream.write(text + "\n")
    stream.flush()


class Worker:
    """Claims runs from a fleet store and drives up to ``concurrency`` of them at once."""

    def __init__(
        self,
        store: FleetStore,
        config: Config,
        *,
        env: Mapping[str, str],
        concurrency: int = 4,
        poll_seconds: float = 0.25,
        owner: str | None = None,
        log: Log = _stderr_line,
        hand_off: bool = True,
        on_attached: Callable[[str], None] | None = None,
    ) -> None:
        """``hand_off``: drive a run recorded with another hash seed in a child process started
        with it (``handoff.py``), which passes False; ``on_attached(run_id)``: a run is owned."""
        if concurrency < 1:
            raise UsageError(f"--concurrency must be at least 1, not {concurrency}")
        self.store = store
        self.config = config
        self.env = env
        self.concurrency = concurrency
        self.poll_seconds = poll_seconds
        self.owner = owner or owner_name()
        self.ttl = config.durability.lease_seconds
        self._log_line = log
        self.hand_off = hand_off
        self.on_attached = on_attached
        self._children: dict[str, ChildRun] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._sessions: dict[str, RunSession] = {}
        self._counts: Counter[str] = Counter()
        self._stopping = False
        self._wake = asyncio.Event()
        self._outage = False

    # -- control --------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Graceful: no new claims; each run stops after its current await and is released.

        Asked a second time, stop at once: the runs are cancelled mid-await (as a crash
        would leave them) and released. Child processes are passed each request.
        """
        for child in self._children.values():
            child.stop()
        if self._stopping:
            self._log("stopping now: cancelling the runs' current awaits")
            for run_id, task in self._tasks.items():
                if run_id not in self._children:
                    task.cancel()
            return
        self._stopping = True
        if self._tasks:
            self._log(f"stopping: {len(self._tasks)} runs finish their current await")
        for session in self._sessions.values():
            session.manager.stop_requested = True
        self._wake.set()

    async def run(self) -> WorkerReport:
        """Claim and drive runs until :meth:`request_stop`; then wait for the runs to let go."""
        self._log(
            f"{self.owner} ready (concurrency {self.concurrency}, lease {self.ttl:g}s, "
            f"store {self.store.url})"
        )
        watcher = asyncio.create_task(self.store.watch_runs(self._announced), name="run watch")
        try:
            await self._claim_until_stopped()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        if self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        report = self.report()
        self._log(f"{self.owner} stopped: {report.summary()}")
        return report

    def report(self) -> WorkerReport:
        """What this worker did so far (a child process sends its own to the worker)."""
        return WorkerReport(self.owner, dict(self._counts))

    def _announced(self, run_id: str | None) -> None:
        """Wake for a run the store announced - unless it is one of ours, let go of by us
        on the way to being parked or stopped: claiming it back would defeat that."""
        if run_id not in self._tasks:
            self._wake.set()

    async def _claim_until_stopped(self) -> None:
        """Claim when woken (a run announced, a slot freed, a stop); poll as the fallback.

        The wake is cleared before each claim, so a run announced while a claim is in
        flight is claimed by the next turn, not left to the poll.
        """
        while not self._stopping:
            self._wake.clear()
            free = self.concurrency - len(self._tasks)
            leases = await self._claim(free) if free > 0 else []
            for lease in leases:
                self._start(lease)
            if leases and len(leases) == free:
                continue  # every slot taken: the next turn waits for one to free up
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_seconds)

    async def _claim(self, limit: int) -> list[Lease]:
        try:
            leases = await self.store.claim(self.owner, self.ttl, limit)
        except StoreError as err:
            if not self._outage:
                self._log(f"cannot claim runs: {err.message}; retrying")
                self._outage = True
            return []
        if self._outage:
            self._log("claiming runs again")
            self._outage = False
        return leases

    def _start(self, lease: Lease) -> None:
        task = asyncio.create_task(self._drive(lease), name=f"run {lease.run_id}")
        self._tasks[lease.run_id] = task
        task.add_done_callback(lambda done: self._finished(lease.run_id, done))

    def _finished(self, run_id: str, task: asyncio.Task[None]) -> None:
        # A run whose lease lapsed (a stalled loop) may be claimed here again meanwhile.
        if self._tasks.get(run_id) is task:
            del self._tasks[run_id]
        self._wake.set()

    # -- one run -----------------------------------------------------------------------------
    async def _drive(self, lease: Lease) -> None:
        self._note("claimed", lease.run_id, f"lease epoch {lease.epoch}")
        await self.drive_claimed(lease)

    async def drive_claimed(self, lease: Lease) -> None:
        """Own one claimed run until it ends here, one way or another (never raises)."""
        run_id = lease.run_id
        session: RunSession | None = None
        try:
            meta = await self.store.get_meta(run_id)
            if MIGRATING in meta.extra:  # a copy still being written by `resumable migrate`
                await self.store.release(lease)
                self._log(f"skipped run {run_id}: it is still being copied into this store")
                return
            if self._stopping:
                await self.store.release(lease)
                return
            seed = hashseed.seed_to_apply(meta.extra, self.env) if self.hand_off else None
            if seed is not None:  # its sets iterate in another order in this process
                await self._drive_in_child(lease, seed)
                return
            session = await RunSession.attach(
                self.store, self.config, run_id, env=self.env, lease=lease
            )
            self._sessions[run_id] = session
            if self.on_attached is not None:
                self.on_attached(run_id)
            session.manager.stop_requested = self._stopping
            if meta.status == "pending":
                self._log(f"started run {run_id} ({meta.program})")
            else:
                self._log(f"resumed run {run_id} from record {session.state.seq} ({meta.program})")
            outcome = await resume_session(session, self.config, env=self.env, no_input=True)
            await self._settle(session, outcome)
        except StopRequested as stop:
            await self._close(session)
            why = f"after record {stop.seq}; released for another worker"
            if stop.cancelled is not None:
                why = stop.cancelled or "no reason given"
            self._note("stopped" if stop.cancelled is None else "cancelled", run_id, why)
        except control.RunCancelled as cancelled:  # asked while no process was driving it
            self._note("cancelled", run_id, cancelled.message)
        except control.AttemptsExhausted as exhausted:
            self._note("failed", run_id, exhausted.message)
        except FencedError as err:
            await self._drop(session)
            self._note("fenced", run_id, f"{err.message}; dropped it")
        except StoreFailed as failed:  # the program never saw it (see store_faults)
            if failed.kind == "fenced":
                await self._drop(session)
                self._note("fenced", run_id, f"{failed.reason}; dropped it")
            else:
                await self._park(lease, failed.reason, session)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._close(session))
            self._note("stopped", run_id, "interrupted mid-await; released for another worker")
            raise
        except ResumableError as err:
            if err.exit_code == 1 and session is not None:
                await self._fail(session, err)
            else:
                await self._park(lease, err.message, session)
        except Exception as err:
            await self._park(lease, f"{type(err).__name__}: {err}", session)
        finally:
            if session is not None and self._sessions.get(run_id) is session:
                del self._sessions[run_id]

    async def _drive_in_child(self, lease: Lease, seed: int) -> None:
        """Drive the run in a child process started with its seed; count what the child did."""
        child = ChildRun(lease, seed, self.store, self.config, self.env, self._log)
        self._children[lease.run_id] = child
        try:
            self._counts.update(await child.drive())
        finally:
            del self._children[lease.run_id]

    async def _settle(self, session: RunSession, outcome: RunOutcome) -> None:
        """Record how the run ended in its metadata (if the runner did not), then let it go."""
        try:
            status = _ENDED.get(outcome.status)
            if status is not None and session.meta.status != status:
                session.meta = replace(session.meta, status=status, updated_at=time.time())
                await self.store.put_meta(session.meta)
        finally:
            await self._close(session)
        detail = ""
        if outcome.status == "failed":
            detail = (outcome.message.strip().splitlines() or ["the program raised"])[-1]
        elif outcome.status == "waiting":
            detail = f"for input ({outcome.message}); answer with `resumable answer`"
        self._note(outcome.status, session.run_id, detail)

    async def _fail(self, session: RunSession, err: ResumableError) -> None:
        """The program cannot go on (e.g. it is not deterministic): the run failed."""
        try:
            await session.set_status("failed", {"error": err.message})
        except FencedError as fenced:
            await self._drop(session)
            self._note("fenced", session.run_id, f"{fenced.message}; dropped it")
            return
        except StoreError as store_err:
            await self._park(session.lease, store_err.message, session)
            return
        await self._close(session)
        self._note("failed", session.run_id, err.message)

    async def _close(self, session: RunSession | None) -> None:
        if session is None:
            return
        try:
            await session.close()  # idempotent: playbook runners close their session too
        except StoreError as err:
            self._log(f"run {session.run_id}: could not release it ({err.message})")

    async def _drop(self, session: RunSession | None) -> None:
        """Stop renewing a lease that is no longer ours; write nothing, release nothing."""
        if session is not None:
            interrupts.untrack(session)
        if session is not None and session.heartbeat is not None:
            session.heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await session.heartbeat

    async def _park(self, lease: Lease, why: str, session: RunSession | None = None) -> None:
        """Hold the run, idle, for a lease from now: a retry, not a loop (see the module's doc)."""
        await self._drop(session)
        run_id, held = lease.run_id, session.lease if session is not None else lease
        with contextlib.suppress(ResumableError):  # taken by another owner, or the store is away
            try:
                await self.store.renew(held, self.ttl)
            except FencedError:  # lost meanwhile: taken again if it is free
                await self.store.acquire(run_id, self.owner, self.ttl)
        with contextlib.suppress(ResumableError):  # the last error of this attempt, if we can
            meta = await self.store.get_meta(run_id)
            await self.store.put_meta(control.note_error(meta, why))
        self._note("parked", run_id, f"{why}; it is retried when its lease lapses ({self.ttl:g}s)")

    # -- messages ----------------------------------------------------------------------------
    def _note(self, event: str, run_id: str, detail: str = "") -> None:
        self._counts[event] += 1
        self._log(f"{event} run {run_id}" + (f": {detail}" if detail else ""))

    def _log(self, text: str) -> None:
        self._log_line(f"resumable worker: {text}")


async def serve(
    config: Config,
    *,
    env: Mapping[str, str],
    concurrency: int = 4,
    poll_seconds: float = 0.25,
    log: Log = _stderr_line,
) -> WorkerReport:
    """``resumable worker``: run a worker until SIGTERM or SIGINT (twice: stop at once)."""
    store = fleet_store(store_for(config.durability, config), "worker")
    async with store:
        worker = Worker(
            store, config, env=env, concurrency=concurrency, poll_seconds=poll_seconds, log=log
        )
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT)
        for signum in signals:
            loop.add_signal_handler(signum, worker.request_stop)
        try:
            return await worker.run()
        finally:
            for signum in signals:
                loop.remove_signal_handler(signum)


__all__ = [
    "FleetStore",
    "Worker",
    "WorkerReport",
    "fleet_store",
    "queue_run",
    "serve",
    "submit",
]

"""RunSession: a run opened for writing - its store, codec, lease, manager and state.

Creating a run and attaching to one share everything but the first record, so both live
here; what runs inside a session (a script, a playbook) lives in its own module.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from resumable.config import Config, DurabilitySettings
from resumable.durability.capture.snapshot import Snapshotter
from resumable.durability.effects import nondeterminism
from resumable.durability.log import hashseed
from resumable.durability.log.checkpoints import CheckpointManager, CheckpointPolicy, load_hook
from resumable.durability.log.records import Record, RecordCodec
from resumable.durability.log.run_state import FrameState, RunState
from resumable.durability.log.stopping import crash_after_from_env
from resumable.durability.log.store_faults import store_failed
from resumable.durability.runs import control, interrupts, owners
from resumable.errors import (
    ConfigError,
    DecryptionError,
    FencedError,
    IntegrityError,
    RecordError,
    ResumableError,
    StoreError,
    UsageError,
)
from resumable.store import open_store
from resumable.store.base import CREATOR, CheckpointStore, Lease, RunMeta, RunStatus
from resumable.store.common import check_run_id

if TYPE_CHECKING:
    from resumable.durability.runs.recovery import LoadedRun


def new_run_id() -> str:
    """Sortable by creation time, unique enough for many machines."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def store_for(settings: DurabilitySettings, config: Config) -> CheckpointStore:
    embedded = settings.store == "file" or (settings.store == "sqlite" and not settings.url)
    # an empty path stays empty (refused by open_store), never "the working folder"
    path = str(config.resolve_path(settings.path)) if embedded and settings.path else ""
    return open_store(settings.store, path=path, url=settings.url, sync=settings.sync)


async def codec_for(
    store: CheckpointStore, settings: DurabilitySettings, env: Mapping[str, str]
) -> RecordCodec:
    """The MAC key from the environment if set, else the store's own; cipher if encrypting."""
    raw = env.get(settings.mac_key_env, "")
    key = raw.encode() if raw else await store.mac_key()
    cipher = None
    if settings.encrypt:
        secret = env.get(settings.encryption_key_env, "")
        if not secret:
            raise ConfigError(
                f"[durability] encrypt = true but {settings.encryption_key_env} is not set; "
                "export the key (resumable init prints a new one) or set encrypt = false",
                key="durability.encryption_key_env",
            )
        from resumable.durability.log.crypto import Cipher  # only an encrypted run needs it

        cipher = Cipher.from_key(secret, source=settings.encryption_key_env)
    return RecordCodec(
        key,
        compress=settings.compression,
        max_record_bytes=settings.max_record_bytes,
        cipher=cipher,
    )


def policy_for(settings: DurabilitySettings) -> CheckpointPolicy:
    return CheckpointPolicy(
        every=settings.every,
        interval_seconds=settings.interval_seconds,
        snapshot_every=settings.snapshot_every,
        keep=settings.keep,
        before_checkpoint=settings.before_checkpoint,
        after_checkpoint=settings.after_checkpoint,
    )


class RunSession:
    """Everything needed to write a run; use :meth:`create` or :meth:`attach`."""

    def __init__(
        self,
        store: CheckpointStore,
        codec: RecordCodec,
        lease: Lease,
        manager: CheckpointManager,
        snapshotter: Snapshotter,
        meta: RunMeta,
        problems: list[str],
        resumed: bool,
    ) -> None:
        self.store = store
        self.codec = codec
        self.lease = lease
        self.manager = manager
        self.snapshotter = snapshotter
        self.meta = meta
        self.problems = problems
        self.resumed = resumed
        self.heartbeat: asyncio.Task[None] | None = None
        self.closed = False
        self.cancel_reason: str | None = None
        """Set once the run was cancelled while this process drove it (see ``control.py``)."""
        self.watcher: asyncio.Task[None] | None = None
        self.hash_mismatch: str | None = None
        """Why set order may differ from the run's, kept by ``attach(hash_warning=False)``."""
        self.interrupted: str | None = None
        """Why this process stopped the run in order (a signal, its store): listed so."""

    @property
    def run_id(self) -> str:
        return self.lease.run_id

    @property
    def state(self) -> RunState:
        return self.manager.state

    @classmethod
    async def create(
        cls,
        store: CheckpointStore,
        config: Config,
        meta: RunMeta,
        first: dict[str, Any],
        *,
        env: Mapping[str, str],
    ) -> RunSession:
        """Create the run, own it, and write its ``run`` record.

        Everything that can be refused (settings, environment, hooks, the first record's
        size) is checked before the run exists; a run whose first record still cannot
        be written is removed again, so no run that never started is left behind.
        """
        settings = config.durability
        check_run_id(meta.run_id)
        codec = await codec_for(store, settings, env)
        crash_after = crash_after_from_env(env)
        policy = policy_for(settings)
        load_hook(policy.before_checkpoint, "before_checkpoint")
        load_hook(policy.after_checkpoint, "after_checkpoint")
        now = time.time()
        codec.seal(Record(meta.run_id, 1, "run", "main", now, 1, first))  # too large: say so now
        # Created "waiting" (which no worker claims), running once it is ours.
        meta = replace(
            meta,
            status="waiting",
            created_at=now,
            updated_at=now,
            owner=owners.owner_name(),
            extra={**meta.extra, **hashseed.run_fields(env), CREATOR: owners.owner_name()},
        )
        await store.create_run(meta)
        lease: Lease | None = None
        try:
            lease = await store.acquire(meta.run_id, owners.owner_name(), settings.lease_seconds)
            meta = replace(meta, status="running", extra=control.begin_attempt(meta.extra, seq=0))
            await store.put_meta(meta)
            manager = CheckpointManager(
                store, codec, lease, RunState(), policy=policy, crash_after=crash_after
            )
            manager.lease_seconds = settings.lease_seconds
            session = cls(store, codec, lease, manager, _snapshotter(settings), meta, [], False)
            await manager.write("run", "main", first)
        except Exception:
            await _forget(store, meta.run_id, lease)
            raise
        session.start_heartbeat(settings.lease_seconds)
        nondeterminism.install()  # until close(): program calls of the clock etc. journaled
        return session

    @classmethod
    async def attach(
        cls,
        store: CheckpointStore,
        config: Config,
        run_id: str,
        *,
        env: Mapping[str, str],
        lease: Lease | None = None,
        accept_loss: bool = False,
        force: bool = False,
        hash_warning: bool = True,
    ) -> RunSession:
        """Own an existing run and fold its log (the run must not be live elsewhere).

        Records the store acknowledged but lost are refused (``LostRecordsError``, the
        run untouched) unless ``accept_loss``; a run with no record at all never ran
        and is refused too, never reported ``completed``. A run with a cancel request is
        marked cancelled instead (:class:`RunCancelled`), and one that used its
        ``max_attempts`` is marked failed (:class:`AttemptsExhausted`) unless ``force``;
        either way the lease is given back. A log that does not open, or a store that fails
        meanwhile, gives back only a lease this call took: a worker parks the run under its
        own ``lease``.
        """
        settings = config.durability
        check_run_id(run_id)
        codec = await codec_for(store, settings, env)
        crash_after = crash_after_from_env(env)
        policy = policy_for(settings)
        load_hook(policy.before_checkpoint, "before_checkpoint")  # refused before owning it
        load_hook(policy.after_checkpoint, "after_checkpoint")
        meta = await store.get_meta(run_id)
        control.refuse_cancelled(meta)
        control.refuse_unfinished_fork(meta)
        from resumable.durability.runs.recovery import RunLoader  # a new run reads no log

        coordinator = RunLoader(store, codec)
        loss: Literal["refuse", "accept"] = "accept" if accept_loss else "refuse"
        skipped: list[str] | None = None
        took = lease is None
        try:
            if lease is None:
                # Owning a run moves a torn tail of its log aside, so look before: the user
                # is told what was skipped, and a log that fails authentication or lost
                # records is refused untouched.
                first = await coordinator.load(run_id, loss=loss)
                _check_started(run_id, first)
                coordinator.check_record_limit(first)
                skipped = first.problems
                lease = await owners.acquire(store, run_id, settings.lease_seconds)
            loaded = await coordinator.load(run_id, loss=loss)
            _check_started(run_id, loaded)
        except (RecordError, IntegrityError, DecryptionError, UsageError):
            if took and lease is not None:
                await store.release(lease)
            raise
        try:
            meta = await control.admit(
                store, codec, lease, settings.max_attempts, force=force, seq=loaded.state.seq
            )
        except Exception as exc:
            marked = isinstance(exc, (control.RunCancelled, control.AttemptsExhausted))
            if took or marked:  # else the caller parks the run under its lease
                await store.release(lease)
            raise
        except BaseException:
            await store.release(lease)
            raise
        if skipped is not None:  # what was found before owning the run changed anything
            loaded.problems = skipped
        for problem in loaded.problems:
            warnings.warn(problem, RuntimeWarning, stacklevel=2)
        different_hashes = hashseed.mismatch(meta.extra, env)
        if different_hashes is not None and hash_warning:
            warnings.warn(different_hashes, RuntimeWarning, stacklevel=2)
        manager = CheckpointManager(
            store,
            codec,
            lease,
            loaded.state,
            policy=policy,
            crash_after=crash_after,
            replay_until=loaded.state.last_event_seq,
        )
        manager.lease_seconds = settings.lease_seconds
        meta = replace(
            meta,
            status="running",
            updated_at=time.time(),
            owner=lease.owner,
            extra=control.begin_attempt(meta.extra, seq=loaded.state.seq),
        )
        try:
            await store.put_meta(meta)
        except StoreError as error:  # a store still full or read-only: nothing ran
            if took:  # else the caller's: a worker parks the run under it
                with contextlib.suppress(ResumableError):
                    await store.release(lease)
            raise store_failed(run_id, error) from error
        snapshotter = _snapshotter(settings)
        session = cls(
            store, codec, lease, manager, snapshotter, meta, loaded.problems, resumed=True
        )
        session.hash_mismatch = different_hashes
        session.start_heartbeat(settings.lease_seconds)
        nondeterminism.install()  # until close(): program calls of the clock etc. journaled
        return session

    def start_heartbeat(self, ttl: float) -> None:
        """Keep a lease that expires renewed (stores with OS locks need none); watch for cancel."""
        interrupts.track(self)
        self.watcher = asyncio.create_task(
            control.watch_for_cancel(self), name=f"cancel watch {self.run_id}"
        )
        if self.lease.expires_at is not None:
            self.heartbeat = asyncio.create_task(self._renew(ttl), name=f"lease {self.run_id}")

    async def _renew(self, ttl: float) -> None:
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                lease = await self.store.renew(self.lease, ttl)
            except FencedError:
                return  # the next append is refused with the same error
            except StoreError as exc:  # a passing outage: try again; the lease has some time
                control.raise_if_cancelled()
                self.manager.renewal_failed = exc  # left (if not, the run stops: see settle)
                continue
            control.raise_if_cancelled()
            self.manager.renewal_failed = None
            self.lease = self.manager.lease = lease

    async def restore_frame(self, frame: FrameState, into: dict[str, Any]) -> None:
        """Fill ``into`` with the frame's namespace at its last finished statement, once the
        blobs it and the journal of its statement in progress refer to are preloaded."""
        await self.preload_blobs((*frame.ns_blobs, *frame.journal_blobs()))
        if frame.ns is not None:
            self.snapshotter.restore(frame.ns, load_blob=self.manager.load_blob_sync, into=into)

    async def preload_blobs(self, digests: Iterable[str]) -> None:
        """Fetch and open blobs a pickle about to be loaded refers to (unpickling is sync)."""
        for digest in dict.fromkeys(d for d in digests if d):
            sealed = await self.store.get_blob(self.run_id, digest)
            self.manager.preload_blobs({digest: self.codec.open_blob(self.run_id, digest, sealed)})

    async def set_status(self, status: RunStatus, detail: dict[str, Any] | None = None) -> None:
        await self.manager.write("status", "main", {"status": status, "detail": detail or {}})
        self.meta = replace(self.meta, status=status, updated_at=time.time())
        await self.store.put_meta(self.meta)

    async def close(self) -> None:
        """Flush what is buffered and give the run up (once; later calls do nothing)."""
        if self.closed:
            return
        self.closed = True
        nondeterminism.uninstall()
        for task in (self.heartbeat, self.watcher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        try:
            await control.let_go(self)
        finally:
            interrupts.untrack(self)


def _check_started(run_id: str, loaded: LoadedRun) -> None:
    """A run without its first record never ran: there is nothing to resume."""
    if loaded.state.seq == 0:
        raise UsageError(control.never_started(run_id), run_id=run_id)


async def _forget(store: CheckpointStore, run_id: str, lease: Lease | None) -> None:
    """Remove a run whose first record could not be written (it never started)."""
    with contextlib.suppress(ResumableError):
        if lease is not None:
            await store.release(lease)
        await store.delete_run(run_id)


def _snapshotter(settings: DurabilitySettings) -> Snapshotter:
    return Snapshotter(blob_threshold=settings.blob_threshold_bytes, process_state=True)


class RunOutcome(NamedTuple):
    """How a run (or one process's part of it) ended."""

    run_id: str
    status: str
    exit_code: int
    message: str = ""
    result: Any = None

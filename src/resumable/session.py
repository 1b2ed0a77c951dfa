"""RunSession: a run opened for writing - its store, codec, lease, manager and state.

Creating a run and attaching to an existing one share everything but the first
record, so both live here; what runs inside a session (a script, a playbook) lives
in its own module.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from resumable.checkpoints import CheckpointManager, CheckpointPolicy, crash_after_from_env
from resumable.config import Config, DurabilitySettings
from resumable.crypto import Cipher
from resumable.errors import (
    ConfigError,
    DecryptionError,
    FencedError,
    IntegrityError,
    RecordError,
    StoreError,
)
from resumable.records import RecordCodec
from resumable.recovery import RecoveryCoordinator
from resumable.snapshot import Snapshotter
from resumable.state import FrameState, RunState
from resumable.store import open_store
from resumable.store.base import CheckpointStore, Lease, RunMeta, RunStatus


def new_run_id() -> str:
    """Sortable by creation time, unique enough for many machines."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def store_for(settings: DurabilitySettings, config: Config) -> CheckpointStore:
    path = str(config.resolve_path(settings.path)) if settings.store in ("file", "sqlite") else ""
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


@dataclass
class RunSession:
    """Everything needed to write a run; use :meth:`create` or :meth:`attach`."""

    store: CheckpointStore
    codec: RecordCodec
    lease: Lease
    manager: CheckpointManager
    snapshotter: Snapshotter
    meta: RunMeta
    problems: list[str]
    resumed: bool
    heartbeat: asyncio.Task[None] | None = None
    closed: bool = False

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
        """Create the run, own it, and write its ``run`` record."""
        settings = config.durability
        codec = await codec_for(store, settings, env)
        now = time.time()
        # Created "waiting" (which no worker claims), running once it is ours.
        meta = replace(meta, status="waiting", created_at=now, updated_at=now, owner=owner_name())
        await store.create_run(meta)
        lease = await store.acquire(meta.run_id, owner_name(), settings.lease_seconds)
        meta = replace(meta, status="running")
        await store.put_meta(meta)
        manager = CheckpointManager(
            store,
            codec,
            lease,
            RunState(),
            policy=policy_for(settings),
            crash_after=crash_after_from_env(env),
        )
        session = cls(store, codec, lease, manager, _snapshotter(settings), meta, [], resumed=False)
        await manager.write("run", "main", first)
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
    ) -> RunSession:
        """Own an existing run and fold its log (the run must not be live elsewhere)."""
        settings = config.durability
        codec = await codec_for(store, settings, env)
        meta = await store.get_meta(run_id)
        coordinator = RecoveryCoordinator(store, codec)
        skipped: list[str] = []
        if lease is None:
            # Owning a run moves a torn tail of its log aside, so look before: the user is
            # told what was skipped, and a log that fails authentication is refused untouched.
            skipped = (await coordinator.load(run_id)).problems
            lease = await store.acquire(run_id, owner_name(), settings.lease_seconds)
        try:
            loaded = await coordinator.load(run_id)
        except (RecordError, IntegrityError, DecryptionError):
            await store.release(lease)
            raise
        loaded.problems[:0] = [p for p in skipped if p not in loaded.problems]
        for problem in loaded.problems:
            warnings.warn(problem, RuntimeWarning, stacklevel=2)
        manager = CheckpointManager(
            store,
            codec,
            lease,
            loaded.state,
            policy=policy_for(settings),
            crash_after=crash_after_from_env(env),
            replay_until=loaded.state.last_event_seq,
        )
        meta = replace(meta, status="running", updated_at=time.time(), owner=lease.owner)
        await store.put_meta(meta)
        session = cls(
            store,
            codec,
            lease,
            manager,
            _snapshotter(settings),
            meta,
            loaded.problems,
            resumed=True,
        )
        session.start_heartbeat(settings.lease_seconds)
        return session

    def start_heartbeat(self, ttl: float) -> None:
        """Keep a lease that expires renewed (stores with OS locks need none)."""
        if self.lease.expires_at is not None:
            self.heartbeat = asyncio.create_task(self._renew(ttl), name=f"lease {self.run_id}")

    async def _renew(self, ttl: float) -> None:
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                lease = await self.store.renew(self.lease, ttl)
            except FencedError:
                return  # the next append is refused with the same error
            except StoreError:
                continue  # a passing outage: try again; the lease has some time left
            self.lease = self.manager.lease = lease

    async def restore_frame(self, frame: FrameState, into: dict[str, Any]) -> None:
        """Fill ``into`` with the frame's namespace at its last finished statement.

        The blobs it and the journal of its statement in progress refer to are fetched
        and verified first, since unpickling (which is synchronous) reads them.
        """
        wanted = {d: None for d in (*frame.ns_blobs, *frame.journal_blobs()) if d}
        found: dict[str, bytes] = {}
        for digest in wanted:
            sealed = await self.store.get_blob(self.run_id, digest)
            found[digest] = self.codec.open_blob(self.run_id, digest, sealed)
        self.manager.preload_blobs(found)
        if frame.ns is not None:
            self.snapshotter.restore(frame.ns, load_blob=self.manager.load_blob_sync, into=into)

    async def set_status(self, status: RunStatus, detail: dict[str, Any] | None = None) -> None:
        await self.manager.write("status", "main", {"status": status, "detail": detail or {}})
        self.meta = replace(self.meta, status=status, updated_at=time.time())
        await self.store.put_meta(self.meta)

    async def close(self) -> None:
        """Flush what is buffered and give the run up (once; later calls do nothing)."""
        if self.closed:
            return
        self.closed = True
        if self.heartbeat is not None:
            self.heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.heartbeat
        try:
            await self.manager.flush()
        finally:
            await self.store.release(self.lease)


def _snapshotter(settings: DurabilitySettings) -> Snapshotter:
    return Snapshotter(blob_threshold=settings.blob_threshold_bytes)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run (or one process's part of it) ended."""

    run_id: str
    status: str
    exit_code: int
    message: str = ""
    result: Any = None


async def resume_session(
    session: RunSession, config: Config, *, env: Mapping[str, str], **options: Any
) -> RunOutcome:
    """Drive an attached run with the runner of its kind.

    A replay that leaves the recorded path fails the run: going on would act on a
    history the log never saw.
    """
    from resumable.journal import ReplayDiverged

    try:
        if session.state.kind == "script":
            from resumable.script import drive_script

            return await drive_script(session, config, env=env, **options)
        from resumable.playbooks.runner import drive_playbook

        return await drive_playbook(session, config, env=env, **options)
    except ReplayDiverged as diverged:
        await session.set_status("failed", {"error": diverged.error.message})
        raise diverged.error from None

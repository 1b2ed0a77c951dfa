"""FileStore: the default checkpoint store, one folder per run with an append-only log.

Layout under ``root`` (folders 0700, files 0600)::

    key                                  random MAC key, created on first use
    runs/<run_id>/meta.json              replaced atomically (temp, fsync, rename, fsync dir)
    runs/<run_id>/head                   the last acknowledged seq (:mod:`resumable.store.heads`)
    runs/<run_id>/floor                  the highest seq pruned (:mod:`resumable.store.filesystem.pruning`)
    runs/<run_id>/log/<first_seq>.seg    preallocated segments; a new one per snapshot, owner, 1 MiB
    runs/<run_id>/snapshots/<seq>.snap
    runs/<run_id>/blobs/<digest>         written once (temp + rename); deleted by ``gc`` once
                                         nothing kept refers to them (:mod:`.blobs`)
    runs/<run_id>/quarantine/            torn or corrupt log tails, moved aside, never deleted
    runs/<run_id>/lock                   flock held by the owner; meta.lock serialises meta updates and prunes

The log's framing, scanning and repair are in :mod:`resumable.store.filesystem.segments`, the
blocking work on run folders in :mod:`resumable.store.filesystem.folders` and the
owner's lock and open segment in :mod:`resumable.store.filesystem.owner`. Because a
segment is never reopened for writing once its writer closed it, dropping or rewriting
old segments (``prune``) never races an append.

Hot path: ``append`` keeps the segment's fd open and writes a batch with one ``pwrite``
in place, into space the segment was preallocated with (:mod:`resumable.store.filesystem.preallocate`);
with ``sync="fsync"`` it then makes it durable with ``fdatasync`` (``fsync`` where the
file system cannot preallocate and the segment is appended to) - inline when the store writes one run
(a thread hop costs as much as a fast fsync), in a thread when it writes several, so
concurrent runs keep going. ``begin_append`` writes the batch the same way and leaves its
fsync to the fsync helper process (:mod:`resumable.store.filesystem.background_fsync`): a
statement's boundary is made durable while the next statement starts - or runs it inline,
where the statements were faster so (:mod:`resumable.store.filesystem.sync_choice`). Group commit is one level up: a run's ``CheckpointManager``
sends every record its tasks buffered while the previous append ran as one batch (one
write, one fsync of the run's segment per wake), and each run of the process fsyncs its
own segment, in parallel threads that the filesystem's journal commits together.
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar

from resumable.errors import ConfigError, StoreError, StoreUnavailableError, UsageError
from resumable.store.base import Lease, ReadResult, RunMeta, RunSummary, StoredRecord, check_seqs
from resumable.store.common import ClosedOnExit, fenced_for
from resumable.store.filesystem.background_fsync import (
    FsyncInProgress,
    helper_ready,
    start_fsync,
)
from resumable.store.filesystem.blobs import delete_blob_files, list_blob_files
from resumable.store.filesystem.folders import RunFolders
from resumable.store.filesystem.owner import OwnedRun, busy_error
from resumable.store.filesystem.pruning import FLOOR, raise_floor, read_floor
from resumable.store.filesystem.segments import (
    HEADER_BYTES,
    encode_frames,
    fsync_file,
    scan_frames,
    write_atomic,
)
from resumable.store.filesystem.sync_choice import SyncChoice
from resumable.store.heads import write_head

if TYPE_CHECKING:
    from resumable.store.holes import LogExtent

__all__ = ["HEADER_BYTES", "FileStore", "encode_frames", "scan_frames"]

_T = TypeVar("_T")


class FileStore(RunFolders, ClosedOnExit):
    """Runs as folders on a local filesystem; ownership through ``flock``."""

    read_only = False
    """Opened only to be read: nothing is created or written (see ``open_store``)."""

    def __init__(self, root: Path | str, *, sync: Literal["fsync", "flush"] = "fsync") -> None:
        if sync not in ("fsync", "flush"):
            raise ConfigError(
                f"[durability] sync must be 'fsync' or 'flush', not {sync!r}", key="durability.sync"
            )
        self.root = Path(root).expanduser().absolute()
        self.sync = sync
        self.url = f"file://{self.root}"
        self._runs = self.root / "runs"
        self._ready = False
        self._key: bytes | None = None
        self._owned: dict[str, OwnedRun] = {}
        self._sync_choice = SyncChoice()
        """Whether a boundary's fsync goes to the helper process or runs inline."""

    @classmethod
    def from_url(cls, url: str, *, sync: Literal["fsync", "flush"] = "fsync") -> FileStore:
        """``file:///abs/path``, ``file://rel/path`` or a plain path."""
        path = url.removeprefix("file://") if url.startswith("file://") else url
        if not path:
            raise ConfigError(f"store url {url!r} names no folder", key="durability.url")
        return cls(Path(path), sync=sync)

    async def __aenter__(self) -> Self:
        if not self.read_only:
            await self._io(self._ensure_root)
        elif not self._runs.is_dir():
            raise UsageError(
                f"no checkpoint store at {self.root} (no runs/ folder in it); check "
                "[durability] path or --config",
                path=str(self.root),
            )
        else:
            self._ready = True  # it exists; nothing is created or probed
        return self

    async def aclose(self) -> None:
        owned, self._owned = list(self._owned.values()), {}
        for handle in owned:
            self._drop(handle)

    async def mac_key(self) -> bytes:
        if self._key is None:
            self._key = await self._io(self._load_key)
        return self._key

    # -- runs -----------------------------------------------------------------------
    async def create_run(self, meta: RunMeta) -> None:
        self._check_name(meta.run_id)
        await self._io(self._create_run, meta)

    async def get_meta(self, run_id: str) -> RunMeta:
        return await self._io(self._read_meta, self._run_dir(run_id))

    async def put_meta(self, meta: RunMeta) -> None:
        """Replace the metadata; a damaged ``meta.json`` is replaced too (``repair``)."""

        def update(current: RunMeta) -> RunMeta:
            return replace(meta, epoch=max(meta.epoch, current.epoch))

        await self._io(self._update_meta, self._run_dir(meta.run_id), update, True)

    async def list_runs(self) -> list[RunSummary]:
        return await self._io(self._list_runs)

    async def delete_run(self, run_id: str) -> None:
        run_dir = self._run_dir(run_id)
        owned = self._owned.pop(run_id, None)
        if owned is not None:
            self._drop(owned)
        await self._io(self._delete_run, run_dir)

    # -- the log --------------------------------------------------------------------
    async def append(self, run_id: str, records: Sequence[StoredRecord], lease: Lease) -> None:
        owned = self._owned.get(run_id)
        if owned is None or owned.epoch != lease.epoch:
            await self._io(self._append_unowned, run_id, records, lease)
            return
        if not records:
            return
        created = self._write(owned, records)
        if self.sync == "fsync" and len(self._owned) > 1:
            # other runs of this process append too: do not stall them behind us
            directory = owned.log_dir if created else None
            await self._io(fsync_file, owned.fd, directory, owned.capacity > 0)
        else:  # the only run: a thread hop would cost as much as a fast fsync itself
            self._sync_now(owned, created)
        self._move_head(owned)

    def append_now(
        self,
        run_id: str,
        records: Sequence[StoredRecord],
        lease: Lease,
        blobs: Mapping[str, bytes] | None = None,
    ) -> bool:
        """``put_blob`` of ``blobs``, then ``append``, without yielding (durable, or written with
        ``flush``, when this returns); False, doing nothing, for a run it does not own."""
        owned = self._owned.get(run_id)
        if owned is None or owned.epoch != lease.epoch:
            return False
        for digest, data in (blobs or {}).items():
            path = self._blob_path(run_id, digest)
            try:
                self._put_blob(path, data)
            except OSError as exc:
                raise self._error(exc, path) from exc
        if records:
            self._sync_now(owned, self._write(owned, records))
            self._move_head(owned)
        return True

    def _sync_now(self, owned: OwnedRun, created: bool) -> None:
        """With ``fsync``: the batch just written made durable here (``created``: in a new
        segment, whose folder is synced too)."""
        if self.sync == "fsync":
            try:
                fsync_file(owned.fd, owned.log_dir if created else None, owned.capacity > 0)
            except OSError as exc:
                raise self._error(exc, owned.segment) from exc

    def _move_head(self, owned: OwnedRun) -> None:
        try:
            write_head(owned.head_fd, owned.last_seq)  # only once the records are durable
        except OSError as exc:
            raise self._error(exc, owned.head_path) from exc

    def begin_append(
        self,
        run_id: str,
        records: Sequence[StoredRecord],
        lease: Lease,
        written: Callable[[], None] | None = None,
    ) -> FsyncInProgress | None:
        """Write ``records`` now; their fsync runs in the helper process until ``wait()``, or
        right away on this thread where that keeps it waiting less (:mod:`.sync_choice`).

        None when an append cannot go that way - ``sync = "flush"`` (nothing to wait for),
        a run this store object does not own, several runs owned at once (a barrier blocks
        the event loop: they fsync in threads instead) - and ``append`` is the way.
        """
        owned = self._owned.get(run_id)
        if self.sync != "fsync" or owned is None or owned.epoch != lease.epoch:
            return None
        if len(self._owned) > 1 or not records:
            return None
        created = self._write(owned, records)
        head = (owned.head_fd, owned.head_path)
        directory, segment = (owned.log_dir if created else None), owned.segment

        def failure(exc: OSError, path: Any) -> Exception:
            return self._error(exc, path or segment)

        try:
            if written is not None:
                written()  # before the helper wakes: waking it may preempt us
        finally:
            owned.syncing = start_fsync(
                owned.fd,
                directory,
                head,
                owned.last_seq,
                failure,
                data_only=owned.capacity > 0,
                inline=not (helper_ready() and self._sync_choice.background()),
            )
        return owned.syncing

    def _write(self, owned: OwnedRun, records: Sequence[StoredRecord]) -> bool:
        """One write of the framed batch at the segment's end (after the previous batch is
        durable); True if it opened a new segment."""
        syncing, owned.syncing = owned.syncing, None
        if syncing is not None:
            syncing.wait()
        check_seqs(records, owned.last_seq)
        if owned.last_seq == 0 and records[0].seq > 1:  # a log that starts later (migrated)
            try:
                raise_floor(owned.log_dir.parent, records[0].seq - 1, fsync=self.sync == "fsync")
            except OSError as exc:
                raise self._error(exc, owned.log_dir.parent / FLOOR) from exc
        frames = encode_frames(records)
        try:
            created = owned.write(frames, records[0].seq)
        except OSError as exc:
            owned.undo_write()
            raise self._error(exc, owned.segment) from exc
        owned.last_seq = records[-1].seq
        return created

    async def read(self, run_id: str, after_seq: int = 0) -> ReadResult:
        return await self._io(self._read, self._run_dir(run_id), after_seq)

    async def log_extent(self, run_id: str) -> LogExtent:
        """The log read and counted, with its floor (``holes.log_gap``)."""
        return await self._io(self._log_extent, self._run_dir(run_id))

    def _log_extent(self, run_dir: Path) -> LogExtent:
        from resumable.store.holes import LogExtent  # only resume and inspection count the log

        result = self._read(run_dir, 0)
        floor = read_floor(run_dir)  # after the log: a prune raises it before dropping
        seqs = [r.seq for r in result.records]
        if not seqs:
            return LogExtent(None, None, 0, result.high_water, floor)
        return LogExtent(seqs[0], seqs[-1], len(seqs), result.high_water, floor)

    # -- blobs ----------------------------------------------------------------------
    async def put_blob(self, run_id: str, digest: str, data: bytes) -> None:
        path = self._blob_path(run_id, digest)
        await self._io(self._put_blob, path, data)

    async def get_blob(self, run_id: str, digest: str) -> bytes:
        return await self._io(self._get_blob, self._blob_path(run_id, digest))

    async def has_blob(self, run_id: str, digest: str) -> bool:
        return self._blob_path(run_id, digest).exists()

    async def list_blobs(self, run_id: str) -> dict[str, int]:
        run_dir = self._run_dir(run_id)
        await self._io(self._require, run_dir)
        return await self._io(list_blob_files, run_dir / "blobs")

    async def delete_blobs(
        self, run_id: str, digests: Collection[str], lease: Lease | None = None
    ) -> int:
        run_dir = self._run_dir(run_id)
        for digest in digests:
            self._check_name(digest, "blob digest")
        await self._io(self._require, run_dir)
        owned = self._owned.get(run_id)
        if lease is not None:
            lease = fenced_for(run_id, lease)
            if owned is None or owned.epoch != lease.epoch:
                await self._io(self._check_epoch, run_dir, lease)
        return await self._io(delete_blob_files, run_dir / "blobs", digests, self.sync == "fsync")

    # -- snapshots ------------------------------------------------------------------
    async def put_snapshot(self, run_id: str, seq: int, data: bytes, lease: Lease) -> None:
        run_dir = self._run_dir(run_id)
        owned = self._owned.get(run_id)
        if owned is not None and owned.epoch == lease.epoch:
            owned.close_segment()  # the next append starts a segment after this snapshot
        else:
            await self._io(self._check_epoch, run_dir, lease)
        path = run_dir / "snapshots" / f"{seq:020d}.snap"
        await self._io(write_atomic, path, data, self.sync == "fsync")

    async def get_snapshot(
        self, run_id: str, at_or_before: int | None = None
    ) -> tuple[int, bytes] | None:
        return await self._io(self._get_snapshot, self._run_dir(run_id), at_or_before)

    async def prune(self, run_id: str, keep: int) -> int:
        if keep < 1:
            raise UsageError(f"keep must be at least 1 snapshot, not {keep}", keep=keep)
        run_dir = self._run_dir(run_id)
        owned = self._owned.get(run_id)
        if owned is not None:
            owned.close_segment()
        return await self._io(self._prune, run_dir, keep, owned is not None)

    # -- ownership ------------------------------------------------------------------
    async def acquire(self, run_id: str, owner: str, ttl: float = 30.0) -> Lease:
        run_dir = self._run_dir(run_id)
        if run_id in self._owned:
            raise busy_error(run_id)
        work = asyncio.ensure_future(self._io(self._acquire, run_dir, run_id, owner))
        try:
            owned = await asyncio.shield(work)
        except asyncio.CancelledError:  # the thread goes on: give up the lock it may take
            work.add_done_callback(self._drop_if_acquired)
            raise
        self._owned[run_id] = owned
        return Lease(run_id, owned.epoch, owner, None)

    async def renew(self, lease: Lease, ttl: float = 30.0) -> Lease:
        owned = self._owned.get(lease.run_id)
        if owned is None or owned.epoch != lease.epoch:
            await self._io(self._check_epoch, self._run_dir(lease.run_id), lease)
        return lease

    async def release(self, lease: Lease) -> None:
        owned = self._owned.get(lease.run_id)
        if owned is not None and owned.epoch == lease.epoch:
            del self._owned[lease.run_id]
            self._drop(owned)

    # -- plumbing -------------------------------------------------------------------
    async def _io(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run blocking file work in a thread; unexpected OS errors become store errors."""
        try:
            return await asyncio.to_thread(fn, *args)
        except OSError as exc:
            raise self._error(exc, exc.filename) from exc

    def _error(self, exc: OSError, path: Any) -> StoreError:
        where = path or self.root
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT):
            return StoreUnavailableError(
                f"checkpoint store {self.root} cannot be written ({where}: {exc.strerror}); "
                "check permissions and free space, or set [durability] path",
                path=str(where),
            )
        return StoreError(
            f"checkpoint store {self.root}: {where}: {exc.strerror or exc}", path=str(where)
        )

    def _blob_path(self, run_id: str, digest: str) -> Path:
        self._check_name(digest, "blob digest")
        return self._run_dir(run_id) / "blobs" / digest

    def _drop_if_acquired(self, work: asyncio.Future[OwnedRun]) -> None:
        if not work.cancelled() and work.exception() is None:
            self._drop(work.result())

    def _drop(self, owned: OwnedRun) -> None:
        owned.close_segment()
        os.close(owned.head_fd)
        os.close(owned.lock_fd)  # closing the only fd on the lock releases the flock

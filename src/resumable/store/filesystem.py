"""FileStore: the default checkpoint store, one folder per run with an append-only log.

Layout under ``root`` (folders 0700, files 0600)::

    key                                  random MAC key, created on first use
    runs/<run_id>/meta.json              replaced atomically (temp, fsync, rename, fsync dir)
    runs/<run_id>/head                   the last acknowledged seq (:mod:`resumable.store.heads`)
    runs/<run_id>/log/<first_seq>.seg    append-only segments; a new one per snapshot and owner
    runs/<run_id>/snapshots/<seq>.snap
    runs/<run_id>/blobs/<digest>         written once (temp + rename)
    runs/<run_id>/quarantine/            torn or corrupt log tails, moved aside, never deleted
    runs/<run_id>/lock                   flock held by the owner; meta.lock serialises meta updates

The log's framing, scanning and repair are in :mod:`resumable.store.segments`. Because a
segment is never reopened for writing once its writer closed it, dropping or rewriting
old segments (``prune``) never races an append.

Hot path: ``append`` keeps the segment's fd open (O_APPEND) and writes a batch with one
``os.write``; with ``sync="fsync"`` it then fsyncs - inline when the store writes one run
(a thread hop costs as much as a fast fsync), in a thread when it writes several, so
concurrent runs keep going.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from resumable.errors import (
    ConfigError,
    FencedError,
    RunBusyError,
    RunNotFoundError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)
from resumable.store.base import (
    Lease,
    ReadResult,
    RunMeta,
    RunSummary,
    StoredRecord,
    check_seqs,
)
from resumable.store.common import RUN_ID, check_run_id
from resumable.store.heads import open_head, read_head, store_head, write_head
from resumable.store.segments import (
    HEADER_BYTES,
    drop_covered,
    encode_frames,
    fsync_dir,
    fsync_file,
    last_write_time,
    list_snapshots,
    newest_seq,
    read_log,
    repair,
    scan_frames,
    write_atomic,
    write_new,
)

__all__ = ["HEADER_BYTES", "FileStore", "encode_frames", "scan_frames"]

_DIGEST = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,199}")
_LOCK_TRIES = 10
_T = TypeVar("_T")


class FileStore:
    """Runs as folders on a local filesystem; ownership through ``flock``."""

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
        self._owned: dict[str, _Owned] = {}

    @classmethod
    def from_url(cls, url: str, *, sync: Literal["fsync", "flush"] = "fsync") -> FileStore:
        """``file:///abs/path``, ``file://rel/path`` or a plain path."""
        path = url.removeprefix("file://") if url.startswith("file://") else url
        if not path:
            raise ConfigError(f"store url {url!r} names no folder", key="durability.url")
        return cls(Path(path), sync=sync)

    async def __aenter__(self) -> Self:
        await self._io(self._ensure_root)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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
        check_seqs(records, owned.last_seq)
        frames = encode_frames(records)
        created = owned.fd < 0
        try:
            if created:
                owned.open_segment(records[0].seq)
            written = os.write(owned.fd, frames)
            if written != len(frames):
                raise OSError(errno.ENOSPC, f"short write ({written} of {len(frames)} bytes)")
        except OSError as exc:
            owned.undo_write()
            raise self._error(exc, owned.segment) from exc
        owned.size += written
        owned.last_seq = records[-1].seq
        if self.sync == "fsync":
            directory = owned.log_dir if created else None
            if len(self._owned) > 1:
                # other runs of this process append too: do not stall them behind us
                await self._io(fsync_file, owned.fd, directory)
            else:
                # the only run: a thread hop would cost as much as a fast fsync itself
                try:
                    fsync_file(owned.fd, directory)
                except OSError as exc:
                    raise self._error(exc, owned.segment) from exc
        try:
            write_head(owned.head_fd, owned.last_seq)  # only once the records are durable
        except OSError as exc:
            raise self._error(exc, owned.log_dir.parent / "head") from exc

    async def read(self, run_id: str, after_seq: int = 0) -> ReadResult:
        return await self._io(self._read, self._run_dir(run_id), after_seq)

    # -- blobs ----------------------------------------------------------------------
    async def put_blob(self, run_id: str, digest: str, data: bytes) -> None:
        path = self._blob_path(run_id, digest)
        await self._io(self._put_blob, path, data)

    async def get_blob(self, run_id: str, digest: str) -> bytes:
        return await self._io(self._get_blob, self._blob_path(run_id, digest))

    async def has_blob(self, run_id: str, digest: str) -> bool:
        return self._blob_path(run_id, digest).exists()

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
            raise _busy(run_id)
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

    def _ensure_root(self) -> None:
        if self._ready:
            return
        try:
            for folder in (self.root, self._runs):
                if not folder.is_dir():
                    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                    folder.chmod(0o700)
            probe = self._runs / f".probe-{secrets.token_hex(4)}"
            probe.mkdir(mode=0o700)
            probe.rmdir()
        except OSError as exc:
            raise StoreUnavailableError(
                f"checkpoint store {self.root} cannot be created or written "
                f"({exc.strerror or exc}); check permissions or set [durability] path",
                path=str(self.root),
            ) from None
        self._ready = True

    def _check_name(self, name: str, what: str = "run id") -> None:
        if what == "run id" or not _DIGEST.fullmatch(name):
            check_run_id(name, what)

    def _run_dir(self, run_id: str) -> Path:
        self._check_name(run_id)
        return self._runs / run_id

    def _require(self, run_dir: Path) -> None:
        if not run_dir.is_dir():  # a run whose meta.json is damaged still exists
            raise self._not_found(run_dir.name)

    def _not_found(self, run_id: str) -> RunNotFoundError:
        return RunNotFoundError(
            f"no run {run_id} in {self.url}; `resumable runs` lists the runs", run_id=run_id
        )

    def _blob_path(self, run_id: str, digest: str) -> Path:
        self._check_name(digest, "blob digest")
        return self._run_dir(run_id) / "blobs" / digest

    def _drop_if_acquired(self, work: asyncio.Future[_Owned]) -> None:
        if not work.cancelled() and work.exception() is None:
            self._drop(work.result())

    def _drop(self, owned: _Owned) -> None:
        owned.close_segment()
        os.close(owned.head_fd)
        os.close(owned.lock_fd)  # closing the only fd on the lock releases the flock

    # -- blocking work, run in a thread ----------------------------------------------
    def _load_key(self) -> bytes:
        self._ensure_root()
        path = self.root / "key"
        if not path.exists():
            tmp = self.root / f".key-{secrets.token_hex(4)}"
            write_new(tmp, os.urandom(32), fsync=True)
            try:
                os.link(tmp, path)  # fails if another process created the key first
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
            fsync_dir(self.root)
        key = path.read_bytes()
        if len(key) != 32:
            raise StoreError(
                f"MAC key {path} is damaged ({len(key)} bytes, expected 32); restore it from a "
                "backup: records written with the old key cannot be verified without it",
                path=str(path),
            )
        return key

    def _create_run(self, meta: RunMeta) -> None:
        self._ensure_root()
        target = self._runs / meta.run_id
        if target.exists():
            raise _exists(meta.run_id, self.url)
        tmp = self._runs / f".new-{meta.run_id}-{secrets.token_hex(4)}"
        tmp.mkdir(mode=0o700)
        try:
            for sub in ("log", "snapshots", "blobs"):
                (tmp / sub).mkdir(mode=0o700)
            write_new(tmp / "lock", b"", fsync=False)
            write_new(tmp / "meta.json", _meta_bytes(meta), fsync=True)
            fsync_dir(tmp)
            os.rename(tmp, target)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise _exists(meta.run_id, self.url) from None
            raise
        fsync_dir(self._runs)

    def _read_meta(self, run_dir: Path) -> RunMeta:
        try:
            raw = (run_dir / "meta.json").read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            if run_dir.is_dir():  # created whole by a rename: meta.json was lost since
                raise StoreError(
                    f"run {run_dir.name}: its metadata ({run_dir / 'meta.json'}) is missing; "
                    f"`resumable repair {run_dir.name}` rebuilds it from the log",
                    run_id=run_dir.name,
                ) from None
            raise self._not_found(run_dir.name) from None
        try:
            meta = RunMeta.from_json(json.loads(raw))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StoreError(
                f"run {run_dir.name}: its metadata ({run_dir / 'meta.json'}) is damaged "
                f"({_reason(exc)}); `resumable repair {run_dir.name}` rebuilds it from the log",
                run_id=run_dir.name,
            ) from None
        if meta.run_id != run_dir.name:
            raise StoreError(
                f"run {run_dir.name}: its metadata names another run ({meta.run_id!r}); "
                f"`resumable repair {run_dir.name}` rebuilds it from the log",
                run_id=run_dir.name,
            )
        return meta

    def _update_meta(
        self, run_dir: Path, update: Callable[[RunMeta], RunMeta], replace_damaged: bool = False
    ) -> RunMeta:
        """Read, change and replace meta.json under ``meta.lock`` (epochs never go back).

        With ``replace_damaged``, metadata that cannot be read is replaced as if its
        epoch were the highest one the log holds (``repair``); a run without a folder
        is still not found.
        """
        if not replace_damaged or not run_dir.is_dir():
            self._read_meta(run_dir)  # RunNotFoundError before creating the lock file
        fd = os.open(run_dir / "meta.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = self._read_meta(run_dir)
            except (StoreError, RunNotFoundError):
                if not replace_damaged:
                    raise
                epochs = [r.epoch for r in read_log(run_dir).records]
                current = RunMeta(run_dir.name, "", epoch=max(epochs, default=0))
            meta = update(current)
            write_atomic(run_dir / "meta.json", _meta_bytes(meta), True)
            return meta
        finally:
            os.close(fd)

    def _check_epoch(self, run_dir: Path, lease: Lease) -> None:
        current = self._read_meta(run_dir).epoch
        if current != lease.epoch:
            raise FencedError(
                f"run {lease.run_id} was taken over (epoch {current}) while this writer held "
                f"epoch {lease.epoch}; the write was refused",
                run_id=lease.run_id,
                epoch=lease.epoch,
                current=current,
            )

    def _acquire(self, run_dir: Path, run_id: str, owner: str) -> _Owned:
        self._require(run_dir)
        fd = os.open(run_dir / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            for attempt in range(_LOCK_TRIES):
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:  # maybe only a moment's probe by list_runs or prune
                    if attempt == _LOCK_TRIES - 1:
                        raise _busy(run_id) from None
                    time.sleep(0.005)
            meta = self._update_meta(run_dir, lambda m: replace(m, epoch=m.epoch + 1, owner=owner))
            last_seq = repair(run_dir, fsync=True)
            head_fd = open_head(run_dir / "head")
        except BaseException:
            os.close(fd)
            raise
        return _Owned(fd, head_fd, meta.epoch, last_seq, run_dir / "log")

    def _append_unowned(self, run_id: str, records: Sequence[StoredRecord], lease: Lease) -> None:
        """A write under a lease this store object did not acquire: checked, then a new segment."""
        run_dir = self._run_dir(run_id)
        self._check_epoch(run_dir, lease)
        if not records:
            return
        check_seqs(records, newest_seq(run_dir))
        path = run_dir / "log" / f"{records[0].seq:020d}.seg"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            frames, size = encode_frames(records), os.fstat(fd).st_size
            if os.write(fd, frames) != len(frames):
                os.ftruncate(fd, size)
                raise OSError(errno.ENOSPC, "short write", str(path))
            if self.sync == "fsync":
                fsync_file(fd, path.parent)
        finally:
            os.close(fd)
        store_head(run_dir / "head", records[-1].seq)

    def _read(self, run_dir: Path, after_seq: int) -> ReadResult:
        for _ in range(_LOCK_TRIES):  # a segment vanishing under us means prune ran: start over
            try:
                high_water = read_head(run_dir / "head")  # first: appends move it after the log
                return replace(read_log(run_dir, after_seq), high_water=high_water)
            except FileNotFoundError:
                if not run_dir.is_dir():
                    raise self._not_found(run_dir.name) from None
        raise StoreError(f"run {run_dir.name}: the log kept changing while being read")

    def _put_blob(self, path: Path, data: bytes) -> None:
        if path.exists():
            return
        if not path.parent.is_dir():
            raise self._not_found(path.parent.parent.name)
        write_atomic(path, data, self.sync == "fsync")

    def _get_blob(self, path: Path) -> bytes:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            run_id = path.parent.parent.name
            self._require(path.parent.parent)
            raise StoreError(
                f"blob {path.name} of run {run_id} is missing from {self.url}; the run cannot "
                "be restored past the record that needs it",
                run_id=run_id,
                digest=path.name,
            ) from None

    def _get_snapshot(self, run_dir: Path, at_or_before: int | None) -> tuple[int, bytes] | None:
        self._require(run_dir)
        for _ in range(_LOCK_TRIES):
            seqs = [s for s in list_snapshots(run_dir) if at_or_before is None or s <= at_or_before]
            if not seqs:
                return None
            try:
                return seqs[-1], (run_dir / "snapshots" / f"{seqs[-1]:020d}.snap").read_bytes()
            except FileNotFoundError:
                continue
        return None

    def _prune(self, run_dir: Path, keep: int, owned_here: bool) -> int:
        self._require(run_dir)
        snaps = list_snapshots(run_dir)
        if len(snaps) <= keep:
            return 0
        oldest_kept = snaps[-keep]
        fsync = self.sync == "fsync"
        for seq in snaps[:-keep]:
            (run_dir / "snapshots" / f"{seq:020d}.snap").unlink(missing_ok=True)
        probe = None if owned_here else _try_lock(run_dir / "lock")
        try:
            may_touch_newest = owned_here or probe is not None
            dropped = drop_covered(run_dir / "log", oldest_kept, may_touch_newest, fsync)
        finally:
            if probe is not None:
                os.close(probe)
        if fsync:
            fsync_dir(run_dir / "snapshots")
        return dropped

    def _list_runs(self) -> list[RunSummary]:
        self._ensure_root()
        found: list[RunSummary] = []
        for entry in os.scandir(self._runs):
            if entry.name.startswith(".") or not RUN_ID.fullmatch(entry.name):
                continue
            run_dir = Path(entry.path)
            damaged = None
            try:
                meta = self._read_meta(run_dir)
            except (RunNotFoundError, StoreError) as exc:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                # Never drop a run from the list: its log may be whole (`resumable repair`).
                damaged = str(exc)
                meta = RunMeta(entry.name, "?", created_at=_created(run_dir))
            last_write = last_write_time(run_dir)
            live = entry.name in self._owned or _is_locked(run_dir / "lock")
            found.append(RunSummary(meta, newest_seq(run_dir), last_write, live, damaged))
        found.sort(key=lambda s: (s.meta.created_at, s.meta.run_id), reverse=True)
        return found

    def _delete_run(self, run_dir: Path) -> None:
        self._require(run_dir)
        if _is_locked(run_dir / "lock"):
            raise RunBusyError(
                f"run {run_dir.name} is owned by a live process; stop it before deleting the run",
                run_id=run_dir.name,
            )
        doomed = self._runs / f".del-{run_dir.name}-{secrets.token_hex(4)}"
        os.rename(run_dir, doomed)
        shutil.rmtree(doomed, ignore_errors=True)


@dataclass(slots=True)
class _Owned:
    """A run this store object owns: its lock, epoch, and the segment being appended to."""

    lock_fd: int
    head_fd: int
    epoch: int
    last_seq: int
    log_dir: Path
    fd: int = -1
    segment: Path | None = None
    size: int = 0

    def open_segment(self, first_seq: int) -> None:
        self.segment = self.log_dir / f"{first_seq:020d}.seg"
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        self.fd = os.open(self.segment, flags, 0o600)
        self.size = os.fstat(self.fd).st_size

    def close_segment(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def undo_write(self) -> None:
        """Cut a partial write back off, so the next batch follows the last good frame."""
        if self.fd < 0:
            return
        try:
            os.ftruncate(self.fd, self.size)
        except OSError:
            self.close_segment()


def _try_lock(path: Path) -> int | None:
    """An fd holding the run's lock, or None if a live owner holds it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _is_locked(path: Path) -> bool:
    """Whether a live owner holds the run (probed without keeping the lock)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _reason(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def _created(run_dir: Path) -> float:
    try:
        return run_dir.stat().st_mtime
    except OSError:
        return 0.0


def _meta_bytes(meta: RunMeta) -> bytes:
    return json.dumps(meta.to_json(), indent=1, sort_keys=True).encode()


def _busy(run_id: str) -> RunBusyError:
    return RunBusyError(
        f"run {run_id} is owned by a live process; wait for it to finish or stop it "
        "(`resumable runs` shows it as running)",
        run_id=run_id,
    )


def _exists(run_id: str, url: str) -> UsageError:
    return UsageError(f"run {run_id} already exists in {url}; choose another id", run_id=run_id)

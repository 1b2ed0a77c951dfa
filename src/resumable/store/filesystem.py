"""FileStore: the default checkpoint store, one folder per run with an append-only log.

Layout under ``root`` (folders 0700, files 0600)::

    key                                  random MAC key, created on first use
    runs/<run_id>/meta.json              replaced atomically (temp, fsync, rename, fsync dir)
    runs/<run_id>/log/<first_seq>.seg    append-only segments; a new one per snapshot and owner
    runs/<run_id>/snapshots/<seq>.snap
    runs/<run_id>/blobs/<digest>         written once (temp + rename)
    runs/<run_id>/quarantine/            torn or corrupt log tails, moved aside, never deleted
    runs/<run_id>/lock                   flock held by the owner; meta.lock serialises meta updates

Frames in a segment: ``[u32 length][u32 crc32 of the rest][u64 seq][u32 epoch]`` then the
sealed record. The top bit of ``length`` marks "more frames of this batch follow", so a
batch cut short by a crash is dropped whole. Reading stops at the first short or bad
frame and says where. Because a segment is never reopened for writing once its writer
closed it, dropping or rewriting old segments (``prune``) never races an append.

Hot path: ``append`` keeps the segment's fd open (O_APPEND) and writes a batch with one
``os.write``; with ``sync="fsync"`` it then fsyncs in a thread so the loop keeps running.
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
import struct
import time
import zlib
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

_HEAD = struct.Struct("<IIQI")
_TAIL = struct.Struct("<QI")
HEADER_BYTES = _HEAD.size
_MORE = 0x8000_0000
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,199}")
_SEGMENT = re.compile(r"(\d{20})\.seg")
_SNAPSHOT = re.compile(r"(\d{20})\.snap")
_LOCK_TRIES = 10
_T = TypeVar("_T")


def encode_frames(records: Sequence[StoredRecord]) -> bytes:
    """Frame a batch; every frame but the last carries the "more follow" bit."""
    parts: list[bytes] = []
    last = len(records) - 1
    for i, record in enumerate(records):
        data = record.data
        tail = _TAIL.pack(record.seq, record.epoch)
        length = len(data) | (_MORE if i < last else 0)
        parts += (
            _HEAD.pack(length, zlib.crc32(data, zlib.crc32(tail)), record.seq, record.epoch),
            data,
        )
    return b"".join(parts)


@dataclass(slots=True)
class _Scan:
    records: list[StoredRecord]
    end: int
    """Offset just past the last complete batch."""
    reason: str | None
    """Why scanning stopped before the end of the buffer (None: it did not)."""


def scan_frames(buf: bytes, after_seq: int = 0) -> _Scan:
    """The complete batches at the start of ``buf``; stop at a short, bad or unordered frame."""
    view = memoryview(buf)
    records: list[StoredRecord] = []
    size, pos, last = len(buf), 0, after_seq
    batch_pos, batch_len, reason = 0, 0, None
    while pos < size:
        if size - pos < HEADER_BYTES:
            reason = f"frame header cut short at {size - pos} bytes"
            break
        length, crc, seq, epoch = _HEAD.unpack_from(buf, pos)
        more, length = length & _MORE, length & ~_MORE
        end = pos + HEADER_BYTES + length
        if end > size:
            reason = f"frame of {length} bytes cut short at {size - pos - HEADER_BYTES}"
            break
        if zlib.crc32(view[pos + 8 : end]) != crc:
            reason = "CRC mismatch"
            break
        if seq <= last:
            reason = f"seq {seq} does not follow seq {last}"
            break
        records.append(StoredRecord(seq, epoch, bytes(view[pos + HEADER_BYTES : end])))
        last, pos = seq, end
        if not more:
            batch_pos, batch_len = pos, len(records)
    if batch_pos < pos and reason is None:
        reason = "batch cut short"
    del records[batch_len:]
    return _Scan(records, batch_pos, reason)


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
        def update(current: RunMeta) -> RunMeta:
            return replace(meta, epoch=max(meta.epoch, current.epoch))

        await self._io(self._update_meta, self._run_dir(meta.run_id), update)

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
            await self._io(_fsync, owned.fd, owned.log_dir if created else None)

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
        await self._io(_write_atomic, path, data, self.sync == "fsync")

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
        if not _NAME.fullmatch(name):
            raise UsageError(
                f"invalid {what} {name!r}: use letters, digits, '-', '_' and '.' "
                "(not first), at most 200 characters",
                value=name,
            )

    def _run_dir(self, run_id: str) -> Path:
        self._check_name(run_id)
        return self._runs / run_id

    def _require(self, run_dir: Path) -> None:
        if not (run_dir / "meta.json").is_file():
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
        os.close(owned.lock_fd)  # closing the only fd on the lock releases the flock

    # -- blocking work, run in a thread ----------------------------------------------
    def _load_key(self) -> bytes:
        self._ensure_root()
        path = self.root / "key"
        if not path.exists():
            tmp = self.root / f".key-{secrets.token_hex(4)}"
            _write_new(tmp, os.urandom(32), fsync=True)
            try:
                os.link(tmp, path)  # fails if another process created the key first
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
            _fsync_dir(self.root)
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
            _write_new(tmp / "lock", b"", fsync=False)
            _write_new(tmp / "meta.json", _meta_bytes(meta), fsync=True)
            _fsync_dir(tmp)
            os.rename(tmp, target)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise _exists(meta.run_id, self.url) from None
            raise
        _fsync_dir(self._runs)

    def _read_meta(self, run_dir: Path) -> RunMeta:
        try:
            raw = (run_dir / "meta.json").read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            raise self._not_found(run_dir.name) from None
        try:
            return RunMeta.from_json(json.loads(raw))
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"{run_dir / 'meta.json'} is not valid run metadata ({exc})", run_id=run_dir.name
            ) from None

    def _update_meta(self, run_dir: Path, update: Callable[[RunMeta], RunMeta]) -> RunMeta:
        """Read, change and replace meta.json under ``meta.lock`` (epochs never go back)."""
        self._read_meta(run_dir)  # RunNotFoundError before creating the lock file
        fd = os.open(run_dir / "meta.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            meta = update(self._read_meta(run_dir))
            _write_atomic(run_dir / "meta.json", _meta_bytes(meta), True)
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
            last_seq = _repair(run_dir, fsync=True)
        except BaseException:
            os.close(fd)
            raise
        return _Owned(fd, meta.epoch, last_seq, run_dir / "log")

    def _append_unowned(self, run_id: str, records: Sequence[StoredRecord], lease: Lease) -> None:
        """A write under a lease this store object did not acquire: checked, then a new segment."""
        run_dir = self._run_dir(run_id)
        self._check_epoch(run_dir, lease)
        if not records:
            return
        check_seqs(records, _last_seq(run_dir))
        path = run_dir / "log" / f"{records[0].seq:020d}.seg"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            frames, size = encode_frames(records), os.fstat(fd).st_size
            if os.write(fd, frames) != len(frames):
                os.ftruncate(fd, size)
                raise OSError(errno.ENOSPC, "short write", str(path))
            if self.sync == "fsync":
                _fsync(fd, path.parent)
        finally:
            os.close(fd)

    def _read(self, run_dir: Path, after_seq: int) -> ReadResult:
        for _ in range(_LOCK_TRIES):  # a segment vanishing under us means prune ran: start over
            try:
                return self._read_once(run_dir, after_seq)
            except FileNotFoundError:
                if not (run_dir / "meta.json").exists():
                    raise self._not_found(run_dir.name) from None
        raise StoreError(f"run {run_dir.name}: the log kept changing while being read")

    def _read_once(self, run_dir: Path, after_seq: int) -> ReadResult:
        segments = _segments(run_dir)
        start = _first_needed(segments, after_seq)
        out: list[StoredRecord] = []
        last = 0
        for i in range(start, len(segments)):
            path = segments[i][1]
            limit = segments[i + 1][0] if i + 1 < len(segments) else None
            buf = path.read_bytes()
            scan = scan_frames(buf, last)
            copies = False
            for record in scan.records:
                if limit is not None and record.seq >= limit:
                    copies = True  # left by an interrupted prune; the next segment has them
                    break
                if record.seq > after_seq:
                    out.append(record)
                last = record.seq
            if scan.reason is not None and not copies:
                later = segments[i + 1 :]
                skipped = len(buf) - scan.end + sum(_size(p) for _, p in later)
                also = f" and {len(later)} later segment(s)" if later else ""
                problem = (
                    f"run {run_dir.name}: log segment {path.name} is torn or corrupt at byte "
                    f"{scan.end} ({scan.reason}); {skipped} bytes skipped{also}"
                )
                return ReadResult(out, problem)
        return ReadResult(out)

    def _put_blob(self, path: Path, data: bytes) -> None:
        if path.exists():
            return
        if not path.parent.is_dir():
            raise self._not_found(path.parent.parent.name)
        _write_atomic(path, data, self.sync == "fsync")

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
            seqs = [s for s in _snapshots(run_dir) if at_or_before is None or s <= at_or_before]
            if not seqs:
                return None
            try:
                return seqs[-1], (run_dir / "snapshots" / f"{seqs[-1]:020d}.snap").read_bytes()
            except FileNotFoundError:
                continue
        return None

    def _prune(self, run_dir: Path, keep: int, owned_here: bool) -> int:
        self._require(run_dir)
        snaps = _snapshots(run_dir)
        if len(snaps) <= keep:
            return 0
        oldest_kept = snaps[-keep]
        fsync = self.sync == "fsync"
        for seq in snaps[:-keep]:
            (run_dir / "snapshots" / f"{seq:020d}.snap").unlink(missing_ok=True)
        probe = None if owned_here else _try_lock(run_dir / "lock")
        try:
            may_touch_newest = owned_here or probe is not None
            dropped = _drop_covered(run_dir / "log", oldest_kept, may_touch_newest, fsync)
        finally:
            if probe is not None:
                os.close(probe)
        if fsync:
            _fsync_dir(run_dir / "snapshots")
        return dropped

    def _list_runs(self) -> list[RunSummary]:
        self._ensure_root()
        found: list[RunSummary] = []
        for entry in os.scandir(self._runs):
            if entry.name.startswith(".") or not _NAME.fullmatch(entry.name):
                continue
            run_dir = Path(entry.path)
            try:
                meta = self._read_meta(run_dir)
            except (RunNotFoundError, StoreError):
                continue
            last_write = _last_write(run_dir)
            live = entry.name in self._owned or _is_locked(run_dir / "lock")
            found.append(RunSummary(meta, _last_seq(run_dir), last_write, live))
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


# -- segments -------------------------------------------------------------------------
def _segments(run_dir: Path) -> list[tuple[int, Path]]:
    log = run_dir / "log"
    found = [(int(m[1]), log / m[0]) for n in os.listdir(log) if (m := _SEGMENT.fullmatch(n))]
    return sorted(found)


def _snapshots(run_dir: Path) -> list[int]:
    names = os.listdir(run_dir / "snapshots")
    return sorted(int(m[1]) for n in names if (m := _SNAPSHOT.fullmatch(n)))


def _first_needed(segments: list[tuple[int, Path]], after_seq: int) -> int:
    """Index of the first segment that can hold a seq after ``after_seq``."""
    start = 0
    for i, (first, _) in enumerate(segments):
        if first <= after_seq + 1:
            start = i
    return start


def _last_seq(run_dir: Path) -> int:
    """The newest seq in the log (or the newest snapshot's, if the log is pruned away)."""
    snaps = _snapshots(run_dir)
    floor = snaps[-1] if snaps else 0
    for _, path in reversed(_segments(run_dir)):
        records = scan_frames(_read_or_empty(path)).records
        if records:
            return max(records[-1].seq, floor)
    return floor


def _repair(run_dir: Path, *, fsync: bool) -> int:
    """Quarantine a torn/corrupt tail of the log a resume would read; return the last seq."""
    snaps = _snapshots(run_dir)
    last = snaps[-1] if snaps else 0
    segments = _segments(run_dir)
    for i in range(_first_needed(segments, last), len(segments)):
        path = segments[i][1]
        buf = path.read_bytes()
        if not buf:  # created by a writer that died before its first write
            path.unlink()
            continue
        scan = scan_frames(buf)
        if scan.records:
            last = max(last, scan.records[-1].seq)
        if scan.reason is None:
            continue
        quarantine = run_dir / "quarantine"
        quarantine.mkdir(mode=0o700, exist_ok=True)
        _write_atomic(_aside(quarantine, f"{path.name}.{scan.end}.bad"), buf[scan.end :], fsync)
        for _, later in segments[i + 1 :]:
            os.replace(later, _aside(quarantine, f"{later.name}.0.bad"))
        if scan.end == 0:
            path.unlink()
        else:
            with path.open("r+b") as segment:
                segment.truncate(scan.end)
                os.fsync(segment.fileno())
        break
    _fsync_dir(run_dir / "log")
    return last


def _aside(folder: Path, name: str) -> Path:
    """A path in ``folder`` named ``name`` that does not overwrite an earlier quarantine."""
    path = folder / name
    while path.exists():
        path = folder / f"{name}.{secrets.token_hex(2)}"
    return path


def _drop_covered(log_dir: Path, covered: int, may_touch_newest: bool, fsync: bool) -> int:
    """Remove log records with seq <= ``covered``: whole segments, or by rewriting one."""
    segments = _segments(log_dir.parent)
    dropped = 0
    for i, (first, path) in enumerate(segments):
        if first > covered:
            break
        limit = segments[i + 1][0] if i + 1 < len(segments) else None
        if limit is None and not may_touch_newest:
            break
        buf = path.read_bytes()
        scan = scan_frames(buf)
        gone = [r for r in scan.records if r.seq <= covered]
        kept = [r for r in scan.records if r.seq > covered and (limit is None or r.seq < limit)]
        dropped += len(gone)
        if limit is not None and limit <= covered + 1:
            path.unlink()  # every record in it is covered
            continue
        if gone and (kept or (limit is None and scan.end < len(buf))):
            cut = sum(HEADER_BYTES + len(r.data) for r in gone)
            first_kept = kept[0].seq if kept else covered + 1
            _write_atomic(log_dir / f"{first_kept:020d}.seg", buf[cut:], fsync)
            path.unlink()
        elif gone:
            path.unlink()  # nothing left but copies of the next segment's records
        break
    if fsync:
        _fsync_dir(log_dir)
    return dropped


# -- small file helpers -----------------------------------------------------------------
def _write_new(path: Path, data: bytes, *, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: bytes, fsync: bool) -> None:
    """Replace ``path`` all or nothing: a temp file, renamed over it."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        _write_new(tmp, data, fsync=fsync)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        _fsync_dir(path.parent)


def _fsync(fd: int, directory: Path | None) -> None:
    os.fsync(fd)
    if directory is not None:
        _fsync_dir(directory)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


def _read_or_empty(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _last_write(run_dir: Path) -> float | None:
    """When the newest segment (or, with the log pruned away, snapshot) was written."""
    segments = _segments(run_dir)
    snaps = _snapshots(run_dir)
    paths = [segments[-1][1]] if segments else []
    paths += [run_dir / "snapshots" / f"{snaps[-1]:020d}.snap"] if snaps else []
    for path in paths:
        try:
            return path.stat().st_mtime
        except FileNotFoundError:
            continue
    return None


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

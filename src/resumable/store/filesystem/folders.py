"""The run folders of a FileStore: the blocking file work, run in a thread by the store.

Everything here works on ``runs/<run_id>/`` (see :mod:`resumable.store.filesystem` for
the layout): creating, listing and deleting runs, their metadata, reads of the log,
blobs and snapshots, taking ownership and the writes of a store that does not own the
run. ``FileStore`` adds the async API and the owner's hot append path on top.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import secrets
import shutil
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

from resumable.errors import (
    FencedError,
    RunBusyError,
    RunNotFoundError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)
from resumable.store.base import Lease, ReadResult, RunMeta, RunSummary, StoredRecord, check_seqs
from resumable.store.common import RUN_ID, check_run_id
from resumable.store.filesystem.owner import OwnedRun, busy_error, is_locked
from resumable.store.filesystem.preallocate import open_segment_file, release_tail
from resumable.store.filesystem.pruning import FLOOR, prune_log, raise_floor
from resumable.store.filesystem.segments import (
    encode_frames,
    fsync_dir,
    fsync_file,
    last_write_time,
    list_snapshots,
    newest_seq,
    read_log,
    repair,
    write_atomic,
    write_new,
)
from resumable.store.heads import encode_head, open_head, read_head, store_head
from resumable.store.meta_check import check_meta_json

_DIGEST = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,199}")
LOCK_TRIES = 10


class RunFolders:
    """The folders under ``root/runs``; ``FileStore`` sets these attributes."""

    root: Path
    sync: Literal["fsync", "flush"]
    url: str
    _runs: Path
    _ready: bool
    _owned: dict[str, OwnedRun]

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

    # -- blocking work, run in a thread ----------------------------------------------
    def _load_key(self) -> bytes:
        path = self.root / "key"
        if getattr(self, "read_only", False) and not path.exists():
            return os.urandom(32)  # no key, so no run written: nothing will be verified
        self._ensure_root()
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
        self._check_private(path)
        key = path.read_bytes()
        if len(key) != 32:
            raise StoreError(
                f"MAC key {path} is damaged ({len(key)} bytes, expected 32); restore it from a "
                "backup: records written with the old key cannot be verified without it",
                path=str(path),
            )
        return key

    def _check_private(self, key: Path) -> None:
        """Whoever can read the key and write the store can forge records that resume
        unpickles: a key others can read, or a store folder anyone can write, is refused
        for writing (and said when only reading)."""
        problems = []
        mode = key.stat().st_mode & 0o777
        if mode & 0o077:
            problems.append(
                f"its MAC key {key} can be read by other users (mode {mode:o}): chmod 600 {key}"
            )
        for folder in (self.root, self._runs):
            mode = folder.stat().st_mode & 0o7777
            if mode & 0o002 and not (folder == self.root and mode & 0o1000):  # sticky: /tmp
                problems.append(
                    f"its folder {folder} can be written by anyone (mode {mode:o}): "
                    f"chmod 700 {folder}"
                )
        if not problems:
            return
        message = f"checkpoint store {self.root} is not private: {'; '.join(problems)}"
        if getattr(self, "read_only", False):
            warnings.warn(message, RuntimeWarning, stacklevel=2)
            return
        raise UsageError(
            f"{message} (another local user could forge its records)", path=str(self.root)
        )

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
            write_new(tmp / FLOOR, encode_head(0), fsync=False)  # lost: unknown, as if old
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
            data = json.loads(raw)
            check_meta_json(data)
            meta = RunMeta.from_json(data)
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

    def _acquire(self, run_dir: Path, run_id: str, owner: str) -> OwnedRun:
        self._require(run_dir)
        fd = os.open(run_dir / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            for attempt in range(LOCK_TRIES):
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:  # maybe only a moment's probe by list_runs or prune
                    if attempt == LOCK_TRIES - 1:
                        raise busy_error(run_id) from None
                    time.sleep(0.005)
            meta = self._update_meta(run_dir, lambda m: replace(m, epoch=m.epoch + 1, owner=owner))
            last_seq = repair(run_dir, fsync=True)
            head_fd = open_head(run_dir / "head")
        except BaseException:
            os.close(fd)
            raise
        return OwnedRun(fd, head_fd, meta.epoch, last_seq, run_dir / "log")

    def _append_unowned(self, run_id: str, records: Sequence[StoredRecord], lease: Lease) -> None:
        """A write under a lease this store object did not acquire: checked, then a new segment."""
        run_dir = self._run_dir(run_id)
        self._check_epoch(run_dir, lease)
        if not records:
            return
        last = newest_seq(run_dir)
        check_seqs(records, last)
        if last == 0 and records[0].seq > 1:  # a log that starts later (a migrated run)
            raise_floor(run_dir, records[0].seq - 1, fsync=self.sync == "fsync")
        path = run_dir / "log" / f"{records[0].seq:020d}.seg"
        frames = encode_frames(records)
        fd, size, capacity = open_segment_file(path, len(frames))
        try:
            if os.pwrite(fd, frames, size) != len(frames):
                os.ftruncate(fd, size)
                raise OSError(errno.ENOSPC, "short write", str(path))
            if self.sync == "fsync":
                fsync_file(fd, path.parent, capacity > 0)
            if capacity:
                release_tail(fd, size + len(frames))  # no one appends to it after us
        finally:
            os.close(fd)
        store_head(run_dir / "head", records[-1].seq)

    def _read(self, run_dir: Path, after_seq: int) -> ReadResult:
        for _ in range(LOCK_TRIES):  # a segment vanishing under us means prune ran: start over
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
        for _ in range(LOCK_TRIES):
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
        return prune_log(run_dir, keep, owned_here, fsync=self.sync == "fsync")

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
            live = entry.name in self._owned or is_locked(run_dir / "lock")
            found.append(RunSummary(meta, newest_seq(run_dir), last_write, live, damaged))
        found.sort(key=lambda s: (s.meta.created_at, s.meta.run_id), reverse=True)
        return found

    def _delete_run(self, run_dir: Path) -> None:
        self._require(run_dir)
        if is_locked(run_dir / "lock"):
            raise RunBusyError(
                f"run {run_dir.name} is owned by a live process; stop it before deleting the run",
                run_id=run_dir.name,
            )
        doomed = self._runs / f".del-{run_dir.name}-{secrets.token_hex(4)}"
        os.rename(run_dir, doomed)
        shutil.rmtree(doomed, ignore_errors=True)


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


def _exists(run_id: str, url: str) -> UsageError:
    return UsageError(f"run {run_id} already exists in {url}; choose another id", run_id=run_id)

"""The SQLite store's file and its one thread: schema, connection, transactions, MAC key.

One connection, owned by one dedicated thread (``_executor``): every call is a job on
that thread, so the event loop never blocks on disk and the connection is never shared
between threads. :class:`~resumable.store.sqlite.SQLiteStore` builds its API on this.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import secrets
import sqlite3
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from resumable.errors import (
    ResumableError,
    SchemaVersionError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)
from resumable.store.common import not_found
from resumable.store.heads import read_head

SCHEMA_VERSION = 2
SYNC_PRAGMAS = {"fsync": "FULL", "flush": "NORMAL"}

# Migrations by the version they lead to: a new file runs them all, an older one the
# rest, in the transaction that reads its version.
MIGRATIONS = {
    1: """
CREATE TABLE settings (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    meta TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    epoch INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    lease_expires_at REAL,
    last_seq INTEGER NOT NULL DEFAULT 0,
    last_write REAL
);
CREATE TABLE records (
    run_id TEXT NOT NULL REFERENCES runs ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE blobs (
    run_id TEXT NOT NULL REFERENCES runs ON DELETE CASCADE,
    digest TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, digest)
);
CREATE TABLE snapshots (
    run_id TEXT NOT NULL REFERENCES runs ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, seq)
);
""",
    # Version 2 keeps the highest seq pruned away, so a log that starts after it lost its
    # first records (``holes.log_gap``). Runs written before have none (NULL: unknown, a
    # start a snapshot covers is taken as pruned); a new run starts at 0.
    2: "ALTER TABLE runs ADD COLUMN seq_floor INTEGER",
}

RUN_COLUMNS = (
    "run_id, meta, status, created_at, updated_at, epoch, owner, lease_expires_at, "
    "last_seq, last_write"
)

_T = TypeVar("_T")


class SQLiteConnection:
    """The open database file; ``SQLiteStore`` sets these attributes."""

    path: Path
    url: str
    heads: Path
    sync: str
    busy_timeout: float
    _conn: sqlite3.Connection | None
    _executor: ThreadPoolExecutor | None
    _mac_key: bytes | None
    _version = SCHEMA_VERSION
    """The schema version of the open file (older only when opened to be read)."""

    read_only = False
    """Opened only to be read (``mode=ro``): no schema, no WAL switch, no key made."""

    def _open(self) -> None:
        if self.read_only:
            self._open_to_read()
            return
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.heads.mkdir(mode=0o700, exist_ok=True)
            # The file holds the MAC key: create it private before SQLite opens it.
            os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as err:
            raise StoreUnavailableError(
                f"cannot open the SQLite store {self.path}: {err}; check the path is writable",
                path=str(self.path),
            ) from err
        self._conn = conn
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreUnavailableError(
                f"the SQLite store {self.path} cannot use WAL mode (it stays in {mode!r} mode); "
                "put it on a local filesystem",
                path=str(self.path),
            )
        conn.execute(f"PRAGMA synchronous={SYNC_PRAGMAS[self.sync]}")
        conn.execute("PRAGMA foreign_keys=ON")
        with self._transaction() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            self._refuse_newer(version)
            for target in range(version + 1, SCHEMA_VERSION + 1):
                # Not executescript: it would commit the open transaction first.
                for statement in filter(str.strip, MIGRATIONS[target].split(";")):
                    db.execute(statement)
            if version < SCHEMA_VERSION:
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self._version = SCHEMA_VERSION

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"the SQLite store {self.path} has schema version {version}, written by a "
                f"newer resumable (this one knows {SCHEMA_VERSION}); upgrade resumable",
                path=str(self.path),
                version=version,
            )

    def _open_to_read(self) -> None:
        if not self.path.is_file():
            raise UsageError(
                f"no SQLite store at {self.path}; check [durability] path or --config",
                path=str(self.path),
            )
        # With no write-ahead log, nothing is pending: a connection that writes nothing
        # removes the log files it opens when it closes, leaving the folder as it was (a
        # read-only one would leave them behind); else, or on read-only media, mode=ro.
        wal = self.path.with_name(self.path.name + "-wal")
        writable = os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK)
        mode = "rw" if writable and not wal.exists() else "ro"
        try:
            uri = f"file:{quote(str(self.path))}?mode={mode}"
            conn = sqlite3.connect(
                uri,
                uri=True,
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.Error as err:
            raise StoreUnavailableError(
                f"cannot read the SQLite store {self.path}: {err}", path=str(self.path)
            ) from err
        self._conn = conn
        self._refuse_newer(version)
        self._version = version  # not migrated: only read
        if version == 0:
            raise UsageError(
                f"{self.path} is not a resumable SQLite store (it has no runs table); check "
                "[durability] path",
                path=str(self.path),
            )

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn`` on the store's thread, turning SQLite failures into ``StoreError``."""
        if self._executor is None:
            raise StoreError(f"the SQLite store {self.path} is not open (use `async with`)")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, functools.partial(self._guarded, fn, *args)
        )

    def _guarded(self, fn: Callable[..., _T], *args: Any) -> _T:
        try:
            return fn(*args)
        except sqlite3.Error as err:
            raise StoreError(
                f"the SQLite store {self.path} failed: {err}", path=str(self.path)
            ) from err

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the file's write lock at once (no upgrade deadlock)."""
        conn = self._connection()
        if conn.in_transaction:
            yield conn
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    async def reclaim(self) -> int:
        """Give the file's free pages back to the disk (``VACUUM``); the bytes it shrank by.

        ``resumable gc`` calls it after deleting runs: SQLite only marks deleted rows'
        pages free, so the file keeps its size until it is rebuilt. Nothing is done when
        no page is free. The WAL is checkpointed and truncated before and after.
        """
        return await self._call(self._reclaim)

    def _reclaim(self) -> int:
        db = self._connection()
        before = self._file_bytes()
        if db.execute("PRAGMA freelist_count").fetchone()[0] == 0:
            return 0
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return max(0, before - self._file_bytes())

    def _file_bytes(self) -> int:
        """The database file and its WAL, as they take up the disk."""
        total = 0
        for path in (self.path, self.path.with_name(self.path.name + "-wal")):
            with contextlib.suppress(FileNotFoundError):
                total += path.stat().st_size
        return total

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"the SQLite store {self.path} is not open (use `async with`)")
        return self._conn

    # -- key ------------------------------------------------------------------
    async def mac_key(self) -> bytes:
        if self._mac_key is None:
            self._mac_key = await self._call(self._load_mac_key)
        return self._mac_key

    def _load_mac_key(self) -> bytes:
        self._check_private()
        if self.read_only:
            row = (
                self._connection()
                .execute("SELECT value FROM settings WHERE name='mac_key'")
                .fetchone()
            )
            return bytes(row[0]) if row else os.urandom(32)  # no key: no run to verify
        with self._transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO settings (name, value) VALUES ('mac_key', ?)",
                (secrets.token_bytes(32),),
            )
            return bytes(
                db.execute("SELECT value FROM settings WHERE name='mac_key'").fetchone()[0]
            )

    def _check_private(self) -> None:
        """The database holds the MAC key: whoever can read it (or write it, or its folder)
        can forge records that resume unpickles. Such a store is refused for writing, with
        the chmod that fixes it, and said in a warning when only reading."""
        problems = []
        for path in (self.path, self.path.with_name(self.path.name + "-wal")):
            with contextlib.suppress(FileNotFoundError):
                mode = path.stat().st_mode & 0o777
                if mode & 0o077:
                    problems.append(
                        f"{path} holds its MAC key and can be read or written by other users "
                        f"(mode {mode:o}): chmod 600 {path}"
                    )
        folder = self.path.parent
        mode = folder.stat().st_mode & 0o7777
        if mode & 0o002 and not mode & 0o1000:  # a sticky world-writable folder (/tmp) is fine
            problems.append(
                f"its folder {folder} can be written by anyone (mode {mode:o}): chmod 700 {folder}"
            )
        if not problems:
            return
        message = f"checkpoint store {self.path} is not private: {'; '.join(problems)}"
        if self.read_only:
            warnings.warn(message, RuntimeWarning, stacklevel=2)
            return
        raise UsageError(
            f"{message} (another local user could forge its records)", path=str(self.path)
        )

    def _not_found(self, run_id: str) -> ResumableError:
        """No such run - or one that acknowledged records the database no longer has."""
        if read_head(self.heads / run_id):
            return self._vanished(run_id)
        return not_found(run_id, self.url)

    def _vanished(self, run_id: str) -> StoreError:
        seq = read_head(self.heads / run_id) or 0
        return StoreError(
            f"run {run_id}: its records 1-{seq} are missing from the SQLite store {self.path} "
            f"(was its -wal file lost or damaged?); restore the file together with "
            f"{self.path.name}-wal from a backup",
            run_id=run_id,
        )

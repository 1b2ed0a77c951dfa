"""The SQLite store: every run in one SQLite file, for one machine and no server.
Owns the file and its thread, the log, blobs and snapshots, and the lease rows."""

from __future__ import annotations

from resumable.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]

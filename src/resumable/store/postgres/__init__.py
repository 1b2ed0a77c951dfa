"""The PostgreSQL store: runs in a database shared by many machines (needs asyncpg).
Owns the connection and pool, the log, leases, blobs and snapshots, schema and statements."""

from __future__ import annotations

from resumable.store.postgres.connect import SYNC_SETTINGS
from resumable.store.postgres.schema import SCHEMA_VERSION
from resumable.store.postgres.store import PostgresStore

__all__ = ["SCHEMA_VERSION", "SYNC_SETTINGS", "PostgresStore"]

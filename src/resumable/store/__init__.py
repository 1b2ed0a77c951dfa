"""Checkpoint stores: the protocol, and :func:`open_store` to pick a backend by name.

The file store is always available; the others are imported only when chosen, so
their drivers (asyncpg, redis) are not loaded by a run that does not use them. Every
backend class offers ``from_url(url, *, sync=...)``.
"""

from __future__ import annotations

import importlib

from resumable.errors import ConfigError
from resumable.extras import import_extra
from resumable.store.base import (
    STATUSES,
    CheckpointStore,
    Lease,
    ReadResult,
    RunMeta,
    RunStatus,
    RunSummary,
    StoredRecord,
    check_seqs,
)
from resumable.store.filesystem import FileStore

__all__ = [
    "KINDS",
    "STATUSES",
    "CheckpointStore",
    "FileStore",
    "Lease",
    "ReadResult",
    "RunMeta",
    "RunStatus",
    "RunSummary",
    "StoredRecord",
    "check_seqs",
    "open_store",
    "to_read",
]

_BACKENDS = {
    "sqlite": ("resumable.store.sqlite", "SQLiteStore"),
    "postgres": ("resumable.store.postgres", "PostgresStore"),
    "redis": ("resumable.store.redis", "RedisStore"),
}
_DRIVERS = {"postgres": ("asyncpg", "postgres"), "redis": ("redis", "redis")}
"""The driver each server store needs, and the extra that installs it."""
KINDS: tuple[str, ...] = ("file", *_BACKENDS)


def open_store(kind: str, *, path: str = "", url: str = "", sync: str = "fsync") -> CheckpointStore:
    """An unopened store of ``kind`` (use it as ``async with``).

    ``path`` locates the embedded stores (a folder for ``file``, a file for ``sqlite``);
    ``url`` is used when ``path`` is empty, and by the server stores.
    """
    if sync not in ("fsync", "flush"):
        raise ConfigError(
            f"[durability] sync must be 'fsync' or 'flush', not {sync!r}", key="durability.sync"
        )
    if kind == "file":
        if not (path or url):
            raise ConfigError(
                "[durability] path is empty: name the store's folder", key="durability.path"
            )
        return FileStore.from_url(path or url, sync="fsync" if sync == "fsync" else "flush")
    if kind not in _BACKENDS:
        raise ConfigError(
            f"[durability] store = {kind!r} is not a store; use one of {', '.join(KINDS)}",
            key="durability.store",
        )
    target = (path or url) if kind == "sqlite" else url
    if not target:
        setting = "path" if kind == "sqlite" else "url"
        raise ConfigError(
            f"[durability] store = {kind!r} needs [durability] {setting}",
            key=f"durability.{setting}",
        )
    module_name, class_name = _BACKENDS[kind]
    if kind in _DRIVERS:
        driver, extra = _DRIVERS[kind]
        import_extra(driver, extra, f"[durability] store = {kind!r}", key="durability.store")
    try:
        backend = getattr(importlib.import_module(module_name), class_name)
    except ImportError as exc:
        raise ConfigError(
            f"[durability] store = {kind!r} is not available in this installation ({exc})",
            key="durability.store",
        ) from None
    store: CheckpointStore = backend.from_url(target, sync=sync)
    return store


def to_read(store: CheckpointStore) -> CheckpointStore:
    """``store`` (not open yet) for commands that only read (``runs``, ``show``, ``steps``,
    ``ui``): it then writes nothing - the folder and SQLite stores open on read-only media,
    PostgreSQL makes or upgrades no schema - and makes no MAC key; a store that does not
    exist is a UsageError naming its path (or schema), never created."""
    if hasattr(store, "read_only"):
        store.read_only = True
    return store

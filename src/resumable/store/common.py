"""What the database stores share: argument checks, the meta column, and their errors.

The SQLite, PostgreSQL and Redis stores refuse the same things in the same words, so
a user reads one message whichever backend runs; they are built here once.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from resumable.errors import (
    ConfigError,
    FencedError,
    RunBusyError,
    RunNotFoundError,
    StoreError,
    UsageError,
)
from resumable.store.base import STATUSES, Lease, RunMeta

SYNC_MODES = ("fsync", "flush")


# -- checks ---------------------------------------------------------------------------
def check_sync(sync: str, store: str) -> None:
    if sync not in SYNC_MODES:
        raise ConfigError(
            f"unknown sync mode {sync!r} for the {store} store; use 'fsync' or 'flush'",
            key="durability.sync",
            value=sync,
        )


def check_status(meta: RunMeta) -> None:
    if meta.status not in STATUSES:
        raise ValueError(f"unknown run status {meta.status!r}; expected one of {STATUSES}")


def check_keep(keep: int) -> None:
    if keep < 1:
        raise ValueError(f"prune must keep at least one snapshot, not {keep}")


def check_fence(run_id: str, lease: Lease, current: int | None, url: str) -> None:
    """Refuse a write unless ``lease`` is for ``run_id`` at its ``current`` epoch."""
    if current is None:
        raise not_found(run_id, url)
    if lease.run_id != run_id or lease.epoch != current:
        raise FencedError(
            f"run {run_id}: write refused, lease epoch {lease.epoch} is stale (the run is at "
            f"epoch {current}); another owner took the run over",
            run_id=run_id,
            epoch=lease.epoch,
            current_epoch=current,
        )


# -- the meta column --------------------------------------------------------------------
def meta_json(meta: RunMeta) -> str:
    """The runtime-owned part of the metadata; the other fields have columns of their own."""
    return json.dumps(
        {"program": meta.program, "kind": meta.kind, "parent": meta.parent, "extra": meta.extra}
    )


def meta_from_row(row: Iterable[Any]) -> RunMeta:
    """A run row whose first columns are run_id, meta, status, created_at, updated_at, epoch, owner."""
    run_id, meta, status, created_at, updated_at, epoch, owner, *_ = row
    data = json.loads(meta)
    return RunMeta(
        run_id=run_id,
        program=data["program"],
        kind=data["kind"],
        status=status,
        created_at=created_at,
        updated_at=updated_at,
        epoch=epoch,
        owner=owner,
        parent=data["parent"],
        extra=data["extra"],
    )


# -- URLs -------------------------------------------------------------------------------
def take_option(url: str, name: str, options: dict[str, Any]) -> str:
    """Move the query parameter ``name`` (ours, not the driver's) into ``options``."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query)
    for key, value in query:
        if key == name:
            options.setdefault(name, value)
    rest = urlencode([(k, v) for k, v in query if k != name])
    return urlunsplit(parts._replace(query=rest))


# -- errors -----------------------------------------------------------------------------
def not_found(run_id: str, url: str) -> RunNotFoundError:
    return RunNotFoundError(f"no run {run_id} in {url}", run_id=run_id)


def already_exists(run_id: str, url: str) -> UsageError:
    return UsageError(f"a run with id {run_id} already exists in {url}", run_id=run_id)


def holder_is_dead(holder: str | None) -> bool:
    """True if ``holder`` ("host:pid", as runs name their owner) is a process of this
    machine that no longer exists: its lease need not run out before another takes over.

    Only for embedded stores (one machine); a store shared by machines waits for expiry.
    """
    if not holder:
        return False
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def busy(run_id: str, holder: str, epoch: int) -> RunBusyError:
    return RunBusyError(
        f"run {run_id} is owned by {holder} (lease epoch {epoch}); "
        "wait for it to finish or for its lease to expire",
        run_id=run_id,
        owner=holder,
    )


def lease_lost(lease: Lease) -> FencedError:
    return FencedError(
        f"run {lease.run_id}: the lease of epoch {lease.epoch} was lost (released or taken over)",
        run_id=lease.run_id,
        epoch=lease.epoch,
    )


def blob_missing(run_id: str, digest: str, url: str) -> StoreError:
    return StoreError(
        f"blob {digest} of run {run_id} is missing from {url}", run_id=run_id, digest=digest
    )

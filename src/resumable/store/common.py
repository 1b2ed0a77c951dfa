"""What the stores share: argument checks, the meta column, their errors, and closing.

The SQLite, PostgreSQL and Redis stores refuse the same things in the same words, so
a user reads one message whichever backend runs; they are built here once.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterable
from dataclasses import replace
from types import TracebackType
from typing import Any
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

from resumable.errors import (
    ConfigError,
    FencedError,
    RunBusyError,
    RunNotFoundError,
    StoreError,
    UsageError,
)
from resumable.store.base import STATUSES, Lease, RunMeta, RunSummary

SYNC_MODES = ("fsync", "flush")


class ClosedOnExit:
    """Leaving ``async with store`` closes the store, however the block ended."""

    async def aclose(self) -> None:
        """Give back what the open store holds (connections, threads, locks); again: nothing."""

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,199}")
"""The one run-id rule of every store and command: a name that is also a safe file name."""


def check_run_id(name: str, what: str = "run id") -> None:
    """Refuse an id outside :data:`RUN_ID` before anything is created or looked up."""
    if not name:
        raise UsageError(
            f"invalid {what} '': it is empty; name a run (`resumable runs` lists them)",
            value=name,
        )
    if not RUN_ID.fullmatch(name):
        shown = repr(name) if len(name) <= 60 else repr(name[:57]) + "..."
        raise UsageError(
            f"invalid {what} {shown}: use letters, digits, '-', '_' and '.' (not first), "
            "at most 200 characters",
            value=name[:200],
        )


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


def fenced_for(run_id: str, lease: Lease) -> Lease:
    """``lease`` as a fenced write to ``run_id`` checks it: a lease for another run never
    matches (its epoch is replaced by an impossible one)."""
    return lease if lease.run_id == run_id else replace(lease, run_id=run_id, epoch=-1)


# -- the meta column --------------------------------------------------------------------
def meta_json(meta: RunMeta) -> str:
    """The runtime-owned part of the metadata; the other fields have columns of their own."""
    return json.dumps(
        {"program": meta.program, "kind": meta.kind, "parent": meta.parent, "extra": meta.extra}
    )


def meta_from_row(row: Iterable[Any], url: str = "the store") -> RunMeta:
    """A run row whose first columns are run_id, meta, status, created_at, updated_at, epoch, owner.

    Metadata that does not parse is :func:`damaged_meta`, never a traceback.
    """
    run_id, meta, status, created_at, updated_at, epoch, owner, *_ = row
    try:
        data = json.loads(meta)
        return RunMeta(
            run_id=run_id,
            program=str(data["program"]),
            kind=str(data["kind"]),
            status=status,
            created_at=created_at,
            updated_at=updated_at,
            epoch=epoch,
            owner=owner,
            parent=data["parent"],
            extra=dict(data["extra"]),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise damaged_meta(run_id, url, exc) from None


def damaged_meta(run_id: str, url: str, exc: Exception) -> StoreError:
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return StoreError(
        f"run {run_id}: its metadata in {url} is damaged ({reason[:80]}); "
        f"`resumable repair {run_id}` rebuilds it from the log",
        run_id=run_id,
    )


def damaged_summary(run_id: str, problem: str) -> RunSummary:
    """How ``list_runs`` shows a run whose metadata cannot be read: listed, never dropped."""
    return RunSummary(RunMeta(run_id, "?"), 0, None, False, problem)


# -- URLs -------------------------------------------------------------------------------
def split_url(url: str, store: str) -> SplitResult:
    """The parts of a store URL; a malformed one (bracket, port) is one ``ConfigError`` line."""
    shown = re.sub(r"//([^:/@]*):[^@/]*@", r"//\1:***@", url)
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a port that is not a number in 0-65535
    except ValueError as exc:
        raise ConfigError(
            f"[durability] url {shown!r} is not a valid {store} URL ({exc}); "
            f"write it as {_EXAMPLES.get(store, 'scheme://host:port/...')}",
            key="durability.url",
        ) from None
    if port == 0:
        raise ConfigError(
            f"[durability] url {shown!r}: port 0 is not a port; use 1-65535",
            key="durability.url",
        )
    return parts


_EXAMPLES = {
    "PostgreSQL": "postgresql://user@host:5432/database?schema=resumable",
    "Redis": "redis://host:6379/0?prefix=resumable",
}


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
        epoch=epoch,
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

"""The contract every checkpoint store keeps.

A store persists opaque, already-sealed record bytes (see ``records.py``), content-
addressed blobs, snapshots and a little metadata per run. It never interprets a
record: MACs, codecs, pickles and encryption are the caller's business, so a store
is small and the same contract test suite runs against every backend.

Ownership: a run is written by one owner at a time, under a :class:`Lease` whose
``epoch`` grows by one at every acquisition. ``append`` and ``put_snapshot`` refuse
a lease whose epoch is not the run's current one (:class:`FencedError`), so an
owner that lost its lease (paused, partitioned, killed and restarted elsewhere)
cannot write after another took over.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Any, Literal, Protocol, Self, runtime_checkable

RunStatus = Literal["pending", "running", "waiting", "completed", "failed", "cancelled"]
"""Stored status. ``crashed`` is never stored: it is ``running`` with no live owner."""

STATUSES: tuple[str, ...] = ("pending", "running", "waiting", "completed", "failed", "cancelled")

INTERRUPTED = "interrupted"
"""The key in ``RunMeta.extra`` of a run stopped in order while running (a stop signal, a
failing store): listed ``interrupted`` instead of ``crashed``, with the reason."""

UNFINISHED_FORK = "unfinished_fork"
"""The key in ``RunMeta.extra`` of a fork until ``fork`` has written all of it: listed
``unfinished``, never resumed (a fork killed while copying may lack records or its
snapshot), deleted by ``gc``."""

CREATOR = "creator"
"""The key in ``RunMeta.extra`` naming the process (``host:pid``) that created the run, which
no store's ``owner`` says before the run is first owned: ``gc`` tells from it whether an
unfinished run is still being made."""

UNFINISHED = "unfinished"
"""Listed for a fork not written whole, and for a run killed before its first record (a
new run, a queued one): nothing of either can run; ``gc`` deletes them."""

LISTED_STATUSES: tuple[str, ...] = (*STATUSES, "crashed", INTERRUPTED, UNFINISHED)
"""Every status ``runs`` lists: the stored ones, two kinds of ``running`` with no owner, and
runs left unfinished."""

RESUMABLE_STATUSES: tuple[str, ...] = ("crashed", INTERRUPTED, "waiting", "pending")
"""The statuses of a run ``resume`` (or ``--latest``) continues."""


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One record as the store sees it: its position, the writer's epoch, sealed bytes."""

    seq: int
    epoch: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Records in seq order, and what was skipped at the end, if anything.

    ``problem`` is a one-line description of a torn or corrupted tail (e.g. a write
    cut short by a crash); the records before it are returned intact.
    ``high_water`` is the seq of the last record the store acknowledged, kept apart
    from the records themselves (None: the store has no such mark for this run), so a
    log that lost its tail or part of its middle is noticed: :meth:`missing`.
    """

    records: list[StoredRecord]
    problem: str | None = None
    high_water: int | None = None

    def missing(self, after_seq: int = 0) -> tuple[int, int] | None:
        """The first range of seqs (first, last) absent from a read from ``after_seq``.

        Seqs of a run are consecutive, so a jump is a hole; records short of the
        high-water mark are a lost tail.
        """
        expected = after_seq + 1
        for record in self.records:
            if record.seq != expected:
                return (expected, record.seq - 1)
            expected += 1
        if self.high_water is not None and self.high_water >= expected:
            return (expected, self.high_water)
        return None


@dataclass(frozen=True, slots=True)
class RunMeta:
    """What the store knows about a run besides its log.

    ``extra`` is free-form JSON-able data owned by the runtime (program source
    digest, config summary, waiting question...). Stores keep it verbatim.
    """

    run_id: str
    program: str
    kind: str = "script"
    status: RunStatus = "pending"
    created_at: float = 0.0
    updated_at: float = 0.0
    epoch: int = 0
    owner: str | None = None
    parent: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Every field by its name (``extra`` copied), as :meth:`from_json` reads it back."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunMeta:
        return cls(
            run_id=str(data["run_id"]),
            program=str(data["program"]),
            kind=str(data.get("kind", "script")),
            status=data.get("status", "pending"),
            created_at=float(data.get("created_at", 0.0)),
            updated_at=float(data.get("updated_at", 0.0)),
            epoch=int(data.get("epoch", 0)),
            owner=data.get("owner"),
            parent=data.get("parent"),
            extra=dict(data.get("extra") or {}),
        )


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A run as listed: its metadata, how far its log goes, and whether an owner is alive."""

    meta: RunMeta
    last_seq: int
    last_write: float | None
    live: bool
    damaged: str | None = None
    """Why the run's metadata cannot be read (its log may be intact: ``resumable repair``)."""

    @property
    def never_started(self) -> bool:
        """Created (``waiting`` until it is owned, then ``running``) and left with no record:
        its process died first, and nothing of it ran. A run whose metadata was written
        since (a question asked, a status changed) has had records: it lost its log."""
        meta = self.meta
        created = meta.status in ("waiting", "running") and meta.updated_at == meta.created_at
        return created and self.last_seq == 0 and not self.live

    @property
    def status(self) -> str:
        if self.damaged is not None:
            return "damaged"
        if self.meta.extra.get(UNFINISHED_FORK) or self.never_started:
            return UNFINISHED
        if self.meta.status == "running" and not self.live:
            return INTERRUPTED if self.meta.extra.get(INTERRUPTED) else "crashed"
        return self.meta.status


@dataclass(frozen=True, slots=True)
class Lease:
    """The right to write a run, until ``expires_at`` (None: held by an OS lock)."""

    run_id: str
    epoch: int
    owner: str
    expires_at: float | None = None


@runtime_checkable
class CheckpointStore(Protocol):
    """Durable storage for runs. Every method is safe to call concurrently.

    Stores are async context managers; ``url`` names the store in messages.
    """

    url: str

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def mac_key(self) -> bytes:
        """The store's record-authentication key, created at random on first use."""
        ...

    # -- runs -----------------------------------------------------------------
    async def create_run(self, meta: RunMeta) -> None:
        """Create an empty run; ``UsageError`` if the id exists."""
        ...

    async def get_meta(self, run_id: str) -> RunMeta:
        """The run's metadata; ``RunNotFoundError`` if there is no such run."""
        ...

    async def put_meta(self, meta: RunMeta) -> None:
        """Replace the run's metadata atomically (all or nothing)."""
        ...

    async def list_runs(self) -> list[RunSummary]:
        """Every run, newest first."""
        ...

    async def delete_run(self, run_id: str) -> None:
        """Remove the run and everything it owns; ``RunNotFoundError`` if absent."""
        ...

    # -- the log --------------------------------------------------------------
    async def append(self, run_id: str, records: Sequence[StoredRecord], lease: Lease) -> None:
        """Append records (strictly increasing seqs) durably, all or nothing.

        Durable means: survives the writing process being killed (``sync="flush"``)
        or a power loss (``sync="fsync"``), as the store was opened. Raises
        ``FencedError`` if ``lease.epoch`` is not the run's current epoch.
        """
        ...

    async def read(self, run_id: str, after_seq: int = 0) -> ReadResult:
        """Records with ``seq > after_seq`` in order, stopping at a torn/corrupt tail."""
        ...

    # -- blobs: content-addressed, per run, written once ------------------------
    async def put_blob(self, run_id: str, digest: str, data: bytes) -> None:
        """Store ``data`` under ``digest`` (a no-op if already there)."""
        ...

    async def get_blob(self, run_id: str, digest: str) -> bytes:
        """The blob; ``StoreError`` naming the digest if it is missing."""
        ...

    async def has_blob(self, run_id: str, digest: str) -> bool: ...

    async def list_blobs(self, run_id: str) -> dict[str, int]:
        """Every blob the run holds: digest -> size of its stored bytes."""
        ...

    async def delete_blobs(
        self, run_id: str, digests: Collection[str], lease: Lease | None = None
    ) -> int:
        """Delete the named blobs (absent ones are skipped); returns how many were deleted.

        Nothing here knows which blobs records still refer to: the caller decides, and
        owns the run meanwhile (``gc``: :mod:`resumable.durability.runs.blob_sweep`). With
        ``lease``, fenced like ``append`` (``FencedError``, nothing deleted).
        """
        ...

    # -- snapshots --------------------------------------------------------------
    async def put_snapshot(self, run_id: str, seq: int, data: bytes, lease: Lease) -> None:
        """Store the folded state as of record ``seq`` (fenced like ``append``)."""
        ...

    async def get_snapshot(
        self, run_id: str, at_or_before: int | None = None
    ) -> tuple[int, bytes] | None:
        """The newest snapshot with ``seq <= at_or_before`` (any, if None)."""
        ...

    async def prune(self, run_id: str, keep: int) -> int:
        """Keep the newest ``keep`` snapshots; drop older ones and the records the oldest
        kept one stands for (up to its seq; a store may keep some of them, as the folder
        store does within a segment).

        Returns the number of records dropped. Records after the oldest kept
        snapshot are never dropped.
        """
        ...

    # -- ownership ------------------------------------------------------------
    async def acquire(self, run_id: str, owner: str, ttl: float = 30.0) -> Lease:
        """Own the run under a new epoch; ``RunBusyError`` if a live owner holds it."""
        ...

    async def renew(self, lease: Lease, ttl: float = 30.0) -> Lease:
        """Extend the lease; ``FencedError`` if it was lost to another owner."""
        ...

    async def release(self, lease: Lease) -> None:
        """Give the run up (idempotent)."""
        ...


class AppendInProgress(Protocol):
    """Records written to the store whose durability is still on its way."""

    def wait(self) -> None:
        """Block until they are durable; raise the error ``append`` would have raised."""
        ...


@runtime_checkable
class BeginsAppends(Protocol):
    """A store that can write records now and make them durable while the caller goes on."""

    def begin_append(
        self,
        run_id: str,
        records: Sequence[StoredRecord],
        lease: Lease,
        written: Callable[[], None] | None = None,
    ) -> AppendInProgress | None:
        """Write ``records`` (as ``append`` would, without yielding); None: use ``append``.

        ``written`` is called as soon as the records have reached the operating system,
        before anything else happens (the held program output goes out there: the window
        in which a kill loses it is as short as it can be). Nothing may count them durable,
        nor act as if they were, before ``wait()`` returned.
        """
        ...


@runtime_checkable
class AppendsNow(Protocol):
    """A store that can append while the caller blocks: before a synchronous step, which
    cannot await (every store of resumable)."""

    def append_now(
        self,
        run_id: str,
        records: Sequence[StoredRecord],
        lease: Lease,
        blobs: Mapping[str, bytes] | None = None,
    ) -> bool:
        """``put_blob`` of each of ``blobs`` and ``append``, durable when this returns, the
        caller blocked meanwhile; False, having done nothing: use them."""
        ...


def check_seqs(records: Sequence[StoredRecord], after: int) -> None:
    """Refuse a batch whose seqs do not strictly increase from ``after``."""
    last = after
    for record in records:
        if record.seq <= last:
            raise ValueError(f"record seq {record.seq} does not follow seq {last}")
        last = record.seq

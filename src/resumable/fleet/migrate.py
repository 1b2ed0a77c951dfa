"""Copying runs from one checkpoint store to another, verified record by record.

Records cannot be copied byte for byte: every store authenticates its records with its
own MAC key (and may encrypt them with its own key), so each record, blob and snapshot
is opened with the source's codec (MAC verified, nothing unpickled) and sealed again
with the target's, keeping the envelope (run id, seq, kind, frame, time, epoch, body)
unchanged. A copied run is then read back from the target and compared with the source
record by record; a copy that does not compare equal is deleted, never left half done.

A run being copied carries ``extra["migrating_from"]`` until its copy is verified, so a
copy cut short (the process killed) is recognised, and redone, by the next migration.
Blob references are found without knowing the runtime's record layout: every string
in a record body (and in a snapshot's packed state) that is a sha256 hex digest and
names a blob of the run in the source is copied.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import msgpack

from resumable.durability.log.records import Record, RecordCodec
from resumable.errors import (
    DecryptionError,
    RecordError,
    RunNotFoundError,
    StoreError,
    UsageError,
)
from resumable.store.base import CheckpointStore, Lease, RunSummary, StoredRecord

MIGRATING = "migrating_from"
"""Key of ``RunMeta.extra`` marking a run whose copy is not verified yet (value: source URL)."""

BATCH_RECORDS = 512
"""Records sealed and appended to the target at a time."""

LEASE_TTL = 60.0
_OWNER = "resumable migrate"
_DIGEST = re.compile(r"[0-9a-f]{64}")

Progress = Callable[[str, int, int], None]
"""``progress(run_id, records_copied, records_total)``: called as each batch lands."""


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What a migration did: runs copied, what they held, what was left and why."""

    runs: list[str]
    records: int
    blobs: int
    snapshots: int
    skipped: list[tuple[str, str]]
    """``(run_id, reason)`` for every run not copied."""
    problems: list[str] = field(default_factory=list)
    """Copied anyway, but worth knowing: a torn source tail, a missing blob, a redone copy."""


@dataclass(slots=True)
class _Tally:
    runs: list[str] = field(default_factory=list)
    records: int = 0
    blobs: int = 0
    snapshots: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def report(self) -> MigrationReport:
        return MigrationReport(
            self.runs, self.records, self.blobs, self.snapshots, self.skipped, self.problems
        )


async def migrate(
    source: CheckpointStore,
    target: CheckpointStore,
    *,
    source_codec: RecordCodec,
    target_codec: RecordCodec,
    run_ids: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> MigrationReport:
    """Copy runs (all, or ``run_ids``) from ``source`` to ``target``; never overwrite one.

    Both stores must be open. The codecs are each store's own (``RecordCodec(await
    store.mac_key(), ...)``). A run owned by a live process in the source, or already in
    the target, is skipped with the reason. A record that fails authentication in the
    source raises :class:`IntegrityError`; a copy that does not read back equal raises
    :class:`StoreError` naming the run and seq. Either way the run is not left in the
    target; runs copied before it stay, complete and verified.
    """
    if source.url == target.url:
        raise UsageError(
            f"source and target are the same store ({source.url}); name another target",
            url=source.url,
        )
    chosen = _choose(await source.list_runs(), run_ids, source.url)
    in_target = {s.meta.run_id: s for s in await target.list_runs()}
    tally = _Tally()
    copier = _Copier(source, target, source_codec, target_codec, tally, progress)
    for summary in chosen:
        run_id = summary.meta.run_id
        if summary.damaged is not None:
            tally.skipped.append((run_id, f"{summary.damaged}; not copied"))
            continue
        if summary.live:
            tally.skipped.append(
                (run_id, "owned by a live process in the source; copy it once it stops")
            )
            continue
        if MIGRATING in summary.meta.extra:
            tally.skipped.append(
                (run_id, f"an unfinished copy from {summary.meta.extra[MIGRATING]}; not copied")
            )
            continue
        there = in_target.get(run_id)
        if there is not None:
            if MIGRATING not in there.meta.extra:
                tally.skipped.append((run_id, f"already in {target.url}; not overwritten"))
                continue
            if there.live:
                tally.skipped.append((run_id, f"being copied to {target.url} by another process"))
                continue
            await target.delete_run(run_id)
            tally.problems.append(
                f"run {run_id}: an unfinished copy from {there.meta.extra[MIGRATING]} was "
                f"found in {target.url}, removed and copied again"
            )
        await copier.copy(run_id)
    return tally.report()


def _choose(
    summaries: list[RunSummary], run_ids: Sequence[str] | None, url: str
) -> list[RunSummary]:
    """The runs to copy, oldest first (so a fork's parent lands before the fork)."""
    if run_ids is None:
        return summaries[::-1]
    by_id = {s.meta.run_id: s for s in summaries}
    wanted = list(dict.fromkeys(run_ids))
    missing = [run_id for run_id in wanted if run_id not in by_id]
    if missing:
        raise RunNotFoundError(
            f"no run {', '.join(missing)} in {url}; `resumable runs` lists the runs",
            run_id=missing[0],
            run_ids=missing,
        )
    return [by_id[run_id] for run_id in wanted]


@dataclass(slots=True)
class _Copier:
    """Copies one run at a time and counts what it copied."""

    source: CheckpointStore
    target: CheckpointStore
    source_codec: RecordCodec
    target_codec: RecordCodec
    tally: _Tally
    progress: Progress | None

    async def copy(self, run_id: str) -> None:
        source, target = self.source, self.target
        meta = await source.get_meta(run_id)
        read = await source.read(run_id)
        problems = [] if read.problem is None else [_about(run_id, read.problem)]
        # From its first record: an older part may have been pruned behind a snapshot.
        gap = read.missing(read.records[0].seq - 1 if read.records else 0)
        if gap is not None:  # said here: the copy's own high-water mark will not know
            problems.append(
                f"run {run_id}: records {gap[0]}-{gap[1]} the source acknowledged are missing "
                "or damaged there; the copy lacks them, so their completed effects may run "
                "again on resume"
            )
        # Open everything before the target is touched: a forgery stops here, unwritten.
        stored_epochs = {stored.seq: stored.epoch for stored in read.records}
        records = [
            self.source_codec.open(stored.data, run_id=run_id, seq=stored.seq)
            for stored in read.records
        ]
        snapshot = None
        found = await source.get_snapshot(run_id)
        if found is not None:
            snapshot = self.source_codec.open(found[1], run_id=run_id, seq=found[0])
        digests = sorted(_referenced(records, snapshot, run_id, problems))

        marked = replace(meta, owner=None, extra={**meta.extra, MIGRATING: source.url})
        try:
            await target.create_run(marked)
        except UsageError:  # created by someone else since the target was listed
            self.tally.skipped.append((run_id, f"already in {target.url}; not overwritten"))
            return
        lease: Lease | None = None
        try:
            lease = await target.acquire(run_id, _OWNER, LEASE_TTL)
            renewed = time.monotonic()
            blobs = await self._copy_blobs(run_id, digests, problems)
            for done in range(0, len(records), BATCH_RECORDS):
                batch = records[done : done + BATCH_RECORDS]
                sealed = [
                    StoredRecord(r.seq, stored_epochs[r.seq], self.target_codec.seal(r))
                    for r in batch
                ]
                await target.append(run_id, sealed, lease)
                if self.progress is not None:
                    self.progress(run_id, done + len(batch), len(records))
                if time.monotonic() - renewed > LEASE_TTL / 3:
                    lease, renewed = await target.renew(lease, LEASE_TTL), time.monotonic()
            if snapshot is not None:
                data = self.target_codec.seal(snapshot)
                await target.put_snapshot(run_id, snapshot.seq, data, lease)
            await target.put_meta(replace(meta, owner=None, epoch=lease.epoch))
            await self._verify(run_id, records, snapshot, blobs, meta.status)
        except BaseException:
            await _discard(target, run_id, lease)
            raise
        await target.release(lease)
        if self.progress is not None and not records:
            self.progress(run_id, 0, 0)
        tally = self.tally
        tally.runs.append(run_id)
        tally.records += len(records)
        tally.blobs += len(blobs)
        tally.snapshots += snapshot is not None
        tally.problems += problems

    async def _copy_blobs(self, run_id: str, digests: list[str], problems: list[str]) -> list[str]:
        """Open (MAC and digest verified) and re-seal every referenced blob; return those copied."""
        copied = []
        for digest in digests:
            if not await self.source.has_blob(run_id, digest):
                problems.append(
                    f"run {run_id}: blob {digest} is referenced but missing from "
                    f"{self.source.url}; copied without it"
                )
                continue
            plain = self.source_codec.open_blob(
                run_id, digest, await self.source.get_blob(run_id, digest)
            )
            sealed = self.target_codec.seal_blob(run_id, digest, plain)
            await self.target.put_blob(run_id, digest, sealed)
            copied.append(digest)
        return copied

    async def _verify(
        self,
        run_id: str,
        records: list[Record],
        snapshot: Record | None,
        blobs: list[str],
        status: str,
    ) -> None:
        """Read the copy back with the target's codec; it must equal the source exactly."""
        target, url = self.target, self.target.url
        back = await target.read(run_id)
        if back.problem is not None:
            raise _mismatch(run_id, None, url, f"its log reads back torn ({back.problem})")
        for i in range(max(len(records), len(back.records))):
            if i >= len(back.records):
                raise _mismatch(run_id, records[i].seq, url, f"record {records[i].seq} is missing")
            seq = back.records[i].seq
            if i >= len(records) or seq != records[i].seq:
                raise _mismatch(run_id, seq, url, f"record {seq} is not in the source")
            differ = _differences(records[i], self._open_copy(run_id, back.records[i].data, seq))
            if differ:
                raise _mismatch(run_id, seq, url, f"record {seq} differs in {differ}")
        if snapshot is not None:
            seq, found = snapshot.seq, await target.get_snapshot(run_id)
            if found is None or found[0] != seq:
                raise _mismatch(run_id, seq, url, f"snapshot {seq} is missing")
            differ = _differences(snapshot, self._open_copy(run_id, found[1], seq))
            if differ:
                raise _mismatch(run_id, seq, url, f"snapshot {seq} differs in {differ}")
        for digest in blobs:
            try:
                self.target_codec.open_blob(run_id, digest, await target.get_blob(run_id, digest))
            except (RecordError, DecryptionError) as exc:
                raise _mismatch(run_id, None, url, f"blob {digest} does not open ({exc})") from None
        meta = await target.get_meta(run_id)
        if meta.status != status or MIGRATING in meta.extra:
            raise _mismatch(run_id, None, url, "its metadata did not take")

    def _open_copy(self, run_id: str, data: bytes, seq: int) -> Record:
        try:
            return self.target_codec.open(data, run_id=run_id, seq=seq)
        except (RecordError, DecryptionError) as exc:
            what = f"record {seq} does not open with the target's key ({exc})"
            raise _mismatch(run_id, seq, self.target.url, what) from None


def _referenced(
    records: list[Record], snapshot: Record | None, run_id: str, problems: list[str]
) -> set[str]:
    """Every string that looks like a blob digest in the bodies and the snapshot's state."""
    found: set[str] = set()
    for record in records:
        found.update(_digests(record.body))
    if snapshot is not None:
        found.update(_digests(snapshot.body))
        state = snapshot.body.get("state")
        if isinstance(state, bytes):
            try:
                found.update(_digests(msgpack.unpackb(state, raw=False, strict_map_key=False)))
            except Exception as exc:  # authentic yet not msgpack: copy it, but say so
                problems.append(
                    f"run {run_id}: the state of snapshot {snapshot.seq} could not be scanned "
                    f"for blobs ({exc}); blobs only it references were not copied"
                )
    return found


def _digests(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) == 64 and _DIGEST.fullmatch(item):
                yield item
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def _differences(source: Record, copy: Record) -> str:
    names = [f.name for f in fields(Record) if getattr(source, f.name) != getattr(copy, f.name)]
    return ", ".join(names)


def _mismatch(run_id: str, seq: int | None, url: str, what: str) -> StoreError:
    return StoreError(
        f"run {run_id} copied to {url} does not match the source: {what}; the copy was "
        "removed, the source is untouched",
        run_id=run_id,
        seq=seq,
    )


async def _discard(target: CheckpointStore, run_id: str, lease: Lease | None) -> None:
    """Remove a copy that failed; a failure here must not hide the one that caused it."""
    try:
        if lease is not None:
            await target.release(lease)
        await target.delete_run(run_id)
    except Exception:  # the marker lets the next migration find and redo it
        pass


def _about(run_id: str, problem: str) -> str:
    return problem if run_id in problem else f"run {run_id}: {problem}"

"""Sweeping a run's superseded blobs: deleting every blob nothing kept refers to any more.

A blob is written once per run and referred to by digest: by the records that need it
(the ``b`` list of a boundary or await record, and the pickles in them) and by the
snapshots that fold those records (frames' ``ns_blobs``, journal entries' ``blobs``).
Pruning drops old snapshots and the records they cover, so a blob only they referred
to - a namespace's big value since replaced, a superseded piece of a namespace - stays
behind, read by no resume, ``show`` or ``fork``. ``gc`` sweeps them.

What counts as a reference is decided generously: every 64-hex-digit digest found
anywhere in a kept record's body, a kept snapshot's state or the run's metadata - in a
string, inside the bytes of a pickle, where a persistent id names its blob, or as the
raw digest of a piece in a namespace stored in pieces (:mod:`..capture.pieces`) - and,
while unreferenced blobs remain, inside the referenced blobs that are not a plain
``bytes``/``str`` value (a blob may list others: the pieces of a large value). A blob
kept for a digest that only looks like one costs its bytes; a blob deleted that a
record needs would cost the run. So nothing of a run is deleted unless all of its log
reads whole and verifies (every record from its first to the high-water mark, MACs
and decryption included) and every stored snapshot opens and decodes; else the run
is left as it is and the reason said.

Concurrency: only an owner writes blobs, or records that refer to them (a blob is put
before the record naming it, and putting a blob that is there already is a no-op).
So the sweep owns the run while it decides and deletes - ``acquire``, like a resume or
an answer, then the same lease renewed and fencing each delete - and a run a live
process owns is skipped. An owner that starts during the sweep is refused; the one
that starts after it reads a log that refers only to blobs still there. A first look
without the lease finds whether there is anything to delete at all: a run with
nothing to sweep, or whose log does not verify, is not acquired (not written to: the
folder store's acquire would set aside a torn tail).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import msgpack

from resumable.durability.capture.pickling import BYTES_BLOB, STR_BLOB
from resumable.durability.capture.pieces import PIECE_BLOB, PIECES_CODEC, assemble
from resumable.durability.log.records import RecordCodec
from resumable.durability.log.state_codec import state_from_dict
from resumable.durability.runs import owners
from resumable.errors import (
    DecryptionError,
    FencedError,
    RecordError,
    RunBusyError,
    RunNotFoundError,
    StoreError,
)
from resumable.store.base import CheckpointStore, Lease
from resumable.store.holes import log_gap

__all__ = ["BlobSweep", "referenced_blobs", "sweep_blobs"]

LEAF_BLOBS = (BYTES_BLOB, STR_BLOB, PIECE_BLOB)
"""The tags of blobs that name no other blob: one value, or a piece of a namespace (the blobs
its pickle names are listed in the record that names the piece)."""
LEASE_TTL = 60.0
DELETE_BATCH = 500

_DIGEST = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}")
_DIGEST_BYTES = re.compile(rb"(?<![0-9a-f])[0-9a-f]{64}")
# No check on the right: a digest is preceded by its length in a pickle or msgpack (never a
# hex digit), but what follows it may be any byte.


@dataclass(frozen=True, slots=True)
class BlobSweep:
    """What the sweep of one run deleted (or would delete), and why it deleted nothing."""

    run_id: str
    deleted: int = 0
    reclaimed_bytes: int = 0
    kept: int = 0
    skipped: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Unreadable(Exception):
    """Part of the run cannot be read or verified: nothing of it may be deleted."""


async def sweep_blobs(
    store: CheckpointStore, codec: RecordCodec, run_id: str, *, dry_run: bool = False
) -> BlobSweep:
    """Delete the blobs of ``run_id`` that no kept record or snapshot refers to.

    They are looked for first without owning the run; only if there are some is the run
    acquired, and they are looked for again under the lease before anything is deleted
    (a run with nothing to sweep, or that does not verify, is never written to).
    ``dry_run`` only counts them.
    """
    try:
        looked = await _look(store, codec, run_id)
        if dry_run or looked.skipped is not None or not looked.deleted:
            return looked
        try:
            lease = await owners.acquire(store, run_id, LEASE_TTL)
        except RunBusyError:
            return BlobSweep(run_id, skipped="a live process owns it; its blobs were not swept")
        try:
            return await _sweep(store, codec, run_id, lease)
        except FencedError:
            return BlobSweep(run_id, skipped="another owner took it over during the sweep")
        finally:
            await store.release(lease)
    except RunNotFoundError:
        return BlobSweep(run_id, skipped="deleted during the sweep")


async def _look(store: CheckpointStore, codec: RecordCodec, run_id: str) -> BlobSweep:
    """What a sweep would delete now (``deleted``: how many blobs), nothing written."""
    stored = await store.list_blobs(run_id)
    if not stored:
        return BlobSweep(run_id)  # only an owner adds blobs: none to sweep, none to own
    doomed, why = await _doomed(store, codec, run_id, stored)
    if why is not None:
        return BlobSweep(run_id, kept=len(stored), skipped=why)
    return BlobSweep(run_id, len(doomed), sum(stored[d] for d in doomed), len(stored) - len(doomed))


async def _doomed(
    store: CheckpointStore, codec: RecordCodec, run_id: str, stored: dict[str, int]
) -> tuple[list[str], str | None]:
    """The stored blobs nothing refers to, or why that cannot be known."""
    try:
        referenced = await referenced_blobs(store, codec, run_id)
        await _named_in_blobs(store, codec, run_id, set(stored), referenced)
    except Unreadable as why:
        return [], f"{why}; no blob of it was deleted"
    return sorted(set(stored) - referenced), None


async def _named_in_blobs(
    store: CheckpointStore, codec: RecordCodec, run_id: str, stored: set[str], found: set[str]
) -> None:
    """Add the digests that referenced blobs name in turn (a blob listing the pieces of a
    value), until every stored blob is referenced or every referenced one was opened.

    Only blobs that may hold references are scanned: a big ``bytes`` or ``str`` value or a
    piece of a namespace is a leaf (its tag says so), anything else (an external codec's payload, a format newer
    than this code) is scanned like a record.
    """
    opened: set[str] = set()
    while stored - found and (todo := (found & stored) - opened):
        for digest in sorted(todo):
            opened.add(digest)
            try:
                plain = codec.open_blob(run_id, digest, await store.get_blob(run_id, digest))
            except (RecordError, DecryptionError, StoreError) as exc:
                raise Unreadable(f"blob {digest} cannot be read ({exc.message})") from None
            if plain[:1] not in LEAF_BLOBS:
                _scan(plain, found)


async def _sweep(
    store: CheckpointStore, codec: RecordCodec, run_id: str, lease: Lease
) -> BlobSweep:
    """Under the run's lease: look again, then delete in batches, renewing the lease."""
    stored = await store.list_blobs(run_id)
    doomed, why = await _doomed(store, codec, run_id, stored)
    if why is not None:
        return BlobSweep(run_id, kept=len(stored), skipped=why)
    deleted = 0
    for start in range(0, len(doomed), DELETE_BATCH):
        lease = await store.renew(lease, LEASE_TTL)  # FencedError if it was lost meanwhile
        deleted += await store.delete_blobs(run_id, doomed[start : start + DELETE_BATCH], lease)
    size = sum(stored[digest] for digest in doomed)
    return BlobSweep(run_id, deleted, size, len(stored) - len(doomed))


async def referenced_blobs(store: CheckpointStore, codec: RecordCodec, run_id: str) -> set[str]:
    """Every digest the run's kept records, snapshots and metadata mention.

    Raises :class:`Unreadable` if a record is missing, torn, forged or undecodable, or a
    snapshot does not open: what it refers to cannot be known.
    """
    found: set[str] = set()
    _scan(json.dumps((await store.get_meta(run_id)).to_json()), found)
    result = await store.read(run_id, 0)
    if result.problem is not None:
        raise Unreadable(f"its log cannot be read whole ({result.problem})")
    gap = await log_gap(store, run_id)
    if gap is not None:
        first, last = gap[0]
        span = f"record {first} is" if first == last else f"records {first}-{last} are"
        raise Unreadable(f"{span} missing from its log")
    for stored in result.records:
        try:
            record = codec.open(stored.data, run_id=run_id, seq=stored.seq)
        except (RecordError, DecryptionError) as exc:
            raise Unreadable(f"record {stored.seq} cannot be verified ({exc.message})") from None
        _scan(record.body, found)
    at: int | None = None
    while (snapshot := await store.get_snapshot(run_id, at)) is not None:
        seq, sealed = snapshot
        try:
            record = codec.open(sealed, run_id=run_id, seq=seq)
            state = msgpack.unpackb(record.body["state"], raw=False, strict_map_key=False)
            state_from_dict(state)
        except (RecordError, DecryptionError) as exc:
            raise Unreadable(f"snapshot {seq} cannot be verified ({exc.message})") from None
        except Exception as exc:  # authentic, yet not a state this version reads
            raise Unreadable(f"snapshot {seq} cannot be decoded ({exc!r})") from None
        _scan(state, found)
        at = seq - 1
    return found


def _scan(value: Any, found: set[str]) -> None:
    """Add every digest in ``value`` (nested lists, tuples, dicts; strings and bytes)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.update(_DIGEST.findall(item))
        elif isinstance(item, bytes | bytearray | memoryview):
            data = bytes(item)
            found.update(match.decode() for match in _DIGEST_BYTES.findall(data))
            if data[:1] == PIECES_CODEC:
                found.update(_pieces_named(data))
        elif isinstance(item, dict):
            stack.extend(_items(item))
        elif isinstance(item, list | tuple):
            stack.extend(item)


def _pieces_named(data: bytes) -> list[str]:
    """The blobs a namespace stored in pieces names by their raw 32-byte digests (the
    record's ``b`` lists them too); none if ``data`` is not such a namespace after all."""
    named: list[str] = []

    def note(digest: str) -> bytes:
        named.append(digest)
        return b""

    try:
        assemble(data, note)
    except RecordError:
        return []
    return named


def _items(mapping: dict[Any, Any]) -> Iterable[Any]:
    for key, value in mapping.items():
        yield key
        yield value

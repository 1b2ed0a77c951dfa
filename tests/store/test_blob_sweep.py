"""What the blob sweep of `gc` keeps and deletes, on every store (Python API, sealed records).

A blob is kept when any kept record or stored snapshot names it, in any field: the ``b``
list, a digest inside a pickle (a persistent id), the snapshot's folded state - or a kept
blob that lists others does (a plain ``str`` or ``bytes`` value names none). Only the
rest goes; a run owned by someone else, or with a record that does not verify, keeps all.
"""

from __future__ import annotations

import hashlib
import pickle
from typing import TYPE_CHECKING, Any

import msgpack
import pytest

from resumable.durability.capture.pickling import STR_BLOB
from resumable.durability.log.records import Record, RecordCodec
from resumable.durability.log.run_state import RunState
from resumable.durability.log.state_codec import state_to_dict
from resumable.durability.runs import blob_sweep
from resumable.durability.runs.blob_sweep import sweep_blobs
from resumable.errors import RunBusyError
from resumable.store.base import CheckpointStore, Lease, RunMeta, StoredRecord

if TYPE_CHECKING:
    from conftest import StoreSite

RUN = "run-1"
KEPT = ("in-b", "in-pickle", "in-snapshot", "manifest", "piece")
NAMES = (*KEPT, "stray", "superseded", "mentioned")


CONTENT = {name: name.encode() for name in NAMES}


def digest(name: str) -> str:
    """The digest blob ``name`` is stored under: that of its content."""
    return hashlib.sha256(CONTENT[name]).hexdigest()


CONTENT["in-b"] = STR_BLOB + digest("mentioned").encode()  # a value: names nothing
CONTENT["manifest"] = b"M" + digest("piece").encode()  # not a plain value: may name pieces


@pytest.fixture
async def codec(store: CheckpointStore) -> RecordCodec:
    return RecordCodec(await store.mac_key())


async def _run(store: CheckpointStore, codec: RecordCodec) -> Lease:
    """A run whose records and snapshot name blobs in every way they can."""
    await store.create_run(RunMeta(RUN, "p.py", status="running"))
    lease = await store.acquire(RUN, "writer")
    bodies = [
        ("run", {"program": "p.py", "source": "x = 1\n"}),
        ("stmt", {"t": 0, "i": 0, "end": 6, "ns": b"\x00",
                  "b": [digest("in-b"), digest("manifest")]}),
        ("await", {"t": 0, "i": 1, "k": 0, "s": "x", "o": "v", "n": -1,
                   "v": pickle.dumps(("b", digest("in-pickle")), protocol=5)}),
    ]  # fmt: skip
    sealed = [
        StoredRecord(seq, lease.epoch, codec.seal(Record(RUN, seq, kind, "main", 1.0, 1, body)))
        for seq, (kind, body) in enumerate(bodies, 1)
    ]
    await store.append(RUN, sealed, lease)
    state = RunState(run_id=RUN, program="p.py", seq=2)
    state.frame("main").ns_blobs = [digest("in-snapshot")]
    packed = msgpack.packb(state_to_dict(state), use_bin_type=True)
    snapshot = Record(RUN, 2, "snapshot", "", 1.0, 1, {"state": packed})
    await store.put_snapshot(RUN, 2, codec.seal(snapshot), lease)
    for name in NAMES:
        sealed = codec.seal_blob(RUN, digest(name), CONTENT[name])
        await store.put_blob(RUN, digest(name), sealed)
    return lease


async def test_only_blobs_nothing_kept_names_are_swept(
    store: CheckpointStore, codec: RecordCodec
) -> None:
    await store.release(await _run(store, codec))
    epoch = (await store.get_meta(RUN)).epoch
    sizes = await store.list_blobs(RUN)

    would = await sweep_blobs(store, codec, RUN, dry_run=True)
    assert (would.deleted, would.kept, would.skipped) == (3, 5, None)
    assert len(await store.list_blobs(RUN)) == len(NAMES)
    swept = await sweep_blobs(store, codec, RUN)

    assert swept.deleted == 3
    gone = ("stray", "superseded", "mentioned")
    assert swept.reclaimed_bytes == sum(sizes[digest(n)] for n in gone)
    assert set(await store.list_blobs(RUN)) == {digest(n) for n in KEPT}
    assert (await store.get_meta(RUN)).epoch == epoch + 1  # owned while it deleted
    assert (await sweep_blobs(store, codec, RUN)).deleted == 0
    assert (await store.get_meta(RUN)).epoch == epoch + 1  # nothing to delete: not owned


async def test_a_run_owned_by_a_live_process_keeps_its_blobs(
    store: CheckpointStore, codec: RecordCodec
) -> None:
    await _run(store, codec)  # its writer still holds it

    swept = await sweep_blobs(store, codec, RUN)

    assert swept.deleted == 0
    assert swept.skipped is not None
    assert "live process owns it" in swept.skipped
    assert len(await store.list_blobs(RUN)) == len(NAMES)


async def test_a_record_that_does_not_verify_keeps_every_blob(store: CheckpointStore) -> None:
    await store.release(await _run(store, RecordCodec(b"k" * 32)))

    swept = await sweep_blobs(store, RecordCodec(b"another key" * 3), RUN)

    assert swept.deleted == 0
    assert swept.skipped is not None
    assert swept.skipped.startswith("record 1 cannot be verified")
    assert swept.skipped.endswith("no blob of it was deleted")
    assert len(await store.list_blobs(RUN)) == len(NAMES)


async def test_a_blob_that_does_not_open_keeps_every_blob(
    store: CheckpointStore, codec: RecordCodec
) -> None:
    await store.create_run(RunMeta("run-2", "p.py", status="running"))
    lease = await store.acquire("run-2", "writer")
    body = {"t": 0, "i": 0, "end": 6, "ns": b"\x00", "b": [digest("manifest")]}
    record = Record("run-2", 1, "stmt", "main", 1.0, 1, body)
    await store.append("run-2", [StoredRecord(1, lease.epoch, codec.seal(record))], lease)
    await store.release(lease)
    forged = RecordCodec(b"not the store's key" * 2).seal_blob(
        "run-2", digest("manifest"), CONTENT["manifest"]
    )
    await store.put_blob("run-2", digest("manifest"), forged)
    await store.put_blob("run-2", digest("stray"), codec.seal_blob("run-2", digest("stray"), b"x"))

    swept = await sweep_blobs(store, codec, "run-2")

    assert swept.deleted == 0
    assert swept.skipped is not None
    assert swept.skipped.startswith(f"blob {digest('manifest')} cannot be read")
    assert len(await store.list_blobs("run-2")) == 2


async def test_the_run_is_owned_while_its_blobs_are_swept(
    site: StoreSite,
    store: CheckpointStore,
    codec: RecordCodec,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await store.release(await _run(store, codec))
    looks: list[str] = []
    look = blob_sweep._doomed

    async def look_and_try_to_own(*args: Any) -> Any:
        async with site.open() as other:  # another process's store, as far as locks go
            try:
                taken = await other.acquire(RUN, "another-process")
            except RunBusyError:
                looks.append("busy")
            else:
                await other.release(taken)
                looks.append("acquired")
        return await look(*args)

    monkeypatch.setattr(blob_sweep, "_doomed", look_and_try_to_own)
    swept = await sweep_blobs(store, codec, RUN)

    assert looks == ["acquired", "busy"]  # the first look owns nothing; the sweep owns the run
    assert swept.deleted == 3

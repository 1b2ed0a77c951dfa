"""`resumable migrate`: runs copied between stores, re-sealed, verified, never overwritten."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import msgpack
import pytest

import resumable.fleet.migrate as migrate_module
from resumable.durability.log.crypto import Cipher
from resumable.durability.log.records import Record, RecordCodec
from resumable.errors import (
    DecryptionError,
    IntegrityError,
    RunNotFoundError,
    StoreError,
    UsageError,
)
from resumable.fleet.migrate import MIGRATING, MigrationReport, migrate
from resumable.store import open_store
from resumable.store.base import CheckpointStore, ReadResult, RunMeta, RunStatus, StoredRecord
from resumable.store.filesystem import FileStore
from resumable.store.holes import log_extent, log_gap
from resumable.store.urls import parse_store_url

SECRET = "the-launch-code-is-7781"


@dataclass
class Site:
    """An open store and the codec sealed with its own MAC key."""

    store: FileStore
    codec: RecordCodec


@dataclass
class RunSpec:
    """What a test run was given, to compare the copy against."""

    run_id: str
    records: list[Record]
    blobs: dict[str, bytes]
    snapshot: Record | None = None
    meta: RunMeta = field(default_factory=lambda: RunMeta("", ""))


@pytest.fixture
async def src(tmp_path: Path) -> AsyncIterator[Site]:
    async with FileStore(tmp_path / "source", sync="flush") as store:
        yield Site(store, RecordCodec(await store.mac_key()))


@pytest.fixture
async def dst(tmp_path: Path) -> AsyncIterator[Site]:
    async with FileStore(tmp_path / "target", sync="flush") as store:
        yield Site(store, RecordCodec(await store.mac_key()))


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def make_run(
    site: Site,
    run_id: str,
    *,
    records: int = 5,
    blobs: tuple[bytes, ...] = (),
    snapshot_at: tuple[int, ...] = (),
    snapshot_blob: bytes | None = None,
    prune: bool = False,
    status: RunStatus = "completed",
    created_at: float = 1.0,
    codec: RecordCodec | None = None,
) -> RunSpec:
    """A run written through the store API: one record per append, blobs, a snapshot."""
    store = site.store
    meta = RunMeta(
        run_id, "prog.py", status=status, created_at=created_at, extra={"source": "x = 1"}
    )
    await store.create_run(meta)
    lease = await store.acquire(run_id, "writer")
    spec = RunSpec(run_id, [], {})
    digests = []
    for data in blobs:
        digest = digest_of(data)
        await store.put_blob(run_id, digest, site.codec.seal_blob(run_id, digest, data))
        spec.blobs[digest] = data
        digests.append(digest)
    for seq in range(1, records + 1):
        if seq % 2:
            kind, body = "chunk", {"t": 0, "text": f"print({seq}) # mark-{seq:04d}"}
        else:
            kind = "await"
            body = {"t": 0, "k": seq, "s": f"0:{seq}:4", "o": "v", "v": bytes([seq]) * 8}
            if digests:
                body["b"] = [digests[seq // 2 % len(digests)]]
        record = Record(run_id, seq, kind, "main", 1000.0 + seq, lease.epoch, body)
        sealed = (codec or site.codec).seal(record)
        await store.append(run_id, [StoredRecord(seq, lease.epoch, sealed)], lease)
        spec.records.append(record)
        if seq in snapshot_at:
            frames: list[dict[str, object]] = [{"id": "main", "ns_blobs": []}]
            if snapshot_blob is not None and seq == snapshot_at[-1]:
                digest = digest_of(snapshot_blob)
                await store.put_blob(
                    run_id, digest, site.codec.seal_blob(run_id, digest, snapshot_blob)
                )
                spec.blobs[digest] = snapshot_blob
                frames[0]["ns_blobs"] = [digest]
            state = msgpack.packb({"seq": seq, "frames": frames}, use_bin_type=True)
            snap = Record(run_id, seq, "snapshot", "", 2000.0, lease.epoch, {"state": state})
            await store.put_snapshot(run_id, seq, site.codec.seal(snap), lease)
            spec.snapshot = snap
    if prune:
        await store.prune(run_id, 1)
        spec.records = [r for r in spec.records if spec.snapshot and r.seq > spec.snapshot.seq]
    spec.meta = replace(meta, epoch=lease.epoch)
    await store.release(lease)
    return spec


async def opened_records(site: Site, run_id: str) -> list[Record]:
    result = await site.store.read(run_id)
    assert result.problem is None
    return [site.codec.open(r.data, run_id=run_id, seq=r.seq) for r in result.records]


async def assert_copied(spec: RunSpec, dst: Site, src: Site) -> None:
    """The copy opens with the target's key only, and equals what the source was given."""
    assert await opened_records(dst, spec.run_id) == spec.records
    raw = (await dst.store.read(spec.run_id)).records
    if raw:
        with pytest.raises(IntegrityError):
            src.codec.open(raw[0].data)
    for digest, data in spec.blobs.items():
        sealed = await dst.store.get_blob(spec.run_id, digest)
        assert dst.codec.open_blob(spec.run_id, digest, sealed) == data
    found = await dst.store.get_snapshot(spec.run_id)
    if spec.snapshot is None:
        assert found is None
    else:
        assert found is not None
        assert dst.codec.open(found[1], run_id=spec.run_id, seq=found[0]) == spec.snapshot
    meta = await dst.store.get_meta(spec.run_id)
    assert (meta.status, meta.owner, meta.program, meta.extra, meta.created_at) == (
        spec.meta.status,
        None,
        spec.meta.program,
        spec.meta.extra,
        spec.meta.created_at,
    )


async def run(src: Site, dst: Site, **options: object) -> MigrationReport:
    return await migrate(
        src.store,
        dst.store,
        source_codec=src.codec,
        target_codec=dst.codec,
        **options,  # type: ignore[arg-type]
    )


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


# -- copying ------------------------------------------------------------------------


async def test_every_run_arrives_resealed_with_the_target_key(src: Site, dst: Site) -> None:
    specs = [
        await make_run(src, "alpha", records=6, blobs=(b"A" * 300, b"B" * 70), created_at=1.0),
        await make_run(
            src, "beta", records=9, snapshot_at=(2, 4), created_at=2.0, status="running"
        ),
        await make_run(src, "gamma", records=0, status="pending", created_at=3.0),
    ]

    report = await run(src, dst)

    assert sorted(report.runs) == sorted(s.run_id for s in specs)
    assert report.records == sum(len(s.records) for s in specs)
    assert report.blobs == sum(len(s.blobs) for s in specs)
    assert report.snapshots == sum(s.snapshot is not None for s in specs)
    assert (report.skipped, report.problems) == ([], [])
    for spec in specs:
        await assert_copied(spec, dst, src)
    listed = {s.meta.run_id: s for s in await dst.store.list_runs()}
    assert listed["beta"].status == "crashed"  # "running" with no live owner, as in the source
    lease = await dst.store.acquire("alpha", "after")  # the migration left no owner behind
    await dst.store.release(lease)


async def test_a_pruned_run_keeps_its_snapshot_and_the_blob_only_the_snapshot_names(
    src: Site, dst: Site
) -> None:
    spec = await make_run(
        src, "pruned", records=8, snapshot_at=(3, 5), snapshot_blob=b"namespace" * 50, prune=True
    )
    assert [r.seq for r in (await src.store.read("pruned")).records] == [6, 7, 8]

    report = await run(src, dst)

    assert (report.runs, report.blobs, report.snapshots) == (["pruned"], 1, 1)
    await assert_copied(spec, dst, src)
    # The copy starts at 6 on purpose: its floor says so, and it is not listed damaged.
    assert await log_gap(dst.store, "pruned") is None
    assert (await log_extent(dst.store, "pruned")).floor == 5


async def test_only_the_runs_asked_for_are_copied(src: Site, dst: Site) -> None:
    await make_run(src, "one", created_at=1.0)
    two = await make_run(src, "two", created_at=2.0)

    report = await run(src, dst, run_ids=["two", "two"])

    assert report.runs == ["two"]
    assert [s.meta.run_id for s in await dst.store.list_runs()] == ["two"]
    await assert_copied(two, dst, src)


async def test_an_unknown_run_id_is_refused_before_anything_is_copied(src: Site, dst: Site) -> None:
    await make_run(src, "one")
    with pytest.raises(RunNotFoundError, match="no run nope in") as caught:
        await run(src, dst, run_ids=["one", "nope"])
    assert caught.value.fields["run_id"] == "nope"
    assert await dst.store.list_runs() == []


async def test_copying_a_store_onto_itself_is_refused(src: Site) -> None:
    with pytest.raises(UsageError, match="same store"):
        await run(src, src)


async def test_progress_is_reported_after_every_batch(
    src: Site, dst: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(migrate_module, "BATCH_RECORDS", 4)
    spec = await make_run(src, "long", records=10)
    calls: list[tuple[str, int, int]] = []

    await run(src, dst, progress=lambda *args: calls.append(args))

    total = len(spec.records)
    assert calls == [("long", min(n, total), total) for n in range(4, total + 4, 4)]
    await assert_copied(spec, dst, src)


# -- what is not copied ---------------------------------------------------------------


async def test_a_run_already_in_the_target_is_skipped_and_left_alone(src: Site, dst: Site) -> None:
    await make_run(src, "shared", records=5, created_at=1.0)
    other = await make_run(src, "other", records=2, created_at=2.0)
    theirs = await make_run(dst, "shared", records=3, status="failed")

    report = await run(src, dst)

    assert report.runs == ["other"]
    [(run_id, reason)] = report.skipped
    assert run_id == "shared"
    assert "already in" in reason
    assert await opened_records(dst, "shared") == theirs.records
    assert (await dst.store.get_meta("shared")).status == "failed"
    await assert_copied(other, dst, src)


async def test_a_run_owned_by_a_live_process_is_skipped(
    src: Site, dst: Site, tmp_path: Path
) -> None:
    await make_run(src, "busy")
    async with FileStore(tmp_path / "source", sync="flush") as other_process:
        lease = await other_process.acquire("busy", "worker")
        report = await run(src, dst)
        await other_process.release(lease)

    assert report.runs == []
    [(run_id, reason)] = report.skipped
    assert run_id == "busy"
    assert "live process" in reason
    assert await dst.store.list_runs() == []


async def test_a_torn_source_tail_copies_the_valid_records_and_says_so(
    src: Site, dst: Site
) -> None:
    spec = await make_run(src, "torn", records=7)
    [segment] = (src.store.root / "runs" / "torn" / "log").glob("*.seg")
    data = bytearray(segment.read_bytes())
    at = data.index(b"mark-0005")
    data[at] ^= 0xFF
    segment.write_bytes(bytes(data))

    report = await run(src, dst)

    assert report.runs == ["torn"]
    assert report.records == 4
    [problem, lost] = report.problems
    assert "torn" in problem
    assert "CRC" in problem
    # the source had acknowledged them (its head counts 7): a loss, said aloud
    assert "records 5-7 the source acknowledged are missing or damaged" in lost
    assert await opened_records(dst, "torn") == [r for r in spec.records if r.seq < 5]


async def test_a_record_failing_authentication_stops_the_copy_and_leaves_nothing_behind(
    src: Site, dst: Site
) -> None:
    good = await make_run(src, "good", records=3, created_at=1.0)
    forger = RecordCodec(os.urandom(32))
    await make_run(src, "forged", records=4, blobs=(b"payload" * 20,), created_at=2.0, codec=forger)

    with pytest.raises(IntegrityError, match="run forged") as caught:
        await run(src, dst)

    assert caught.value.fields["run_id"] == "forged"
    assert caught.value.fields["seq"] == 1
    with pytest.raises(RunNotFoundError):
        await dst.store.get_meta("forged")
    assert sorted(p.name for p in (dst.store.root / "runs").iterdir()) == ["good"]
    await assert_copied(good, dst, src)  # runs copied before the bad one stay, verified


class ChangingStore(FileStore):
    """A target whose read-back returns one record different from what was written."""

    codec: RecordCodec
    changed_seq = 3

    async def read(self, run_id: str, after_seq: int = 0) -> ReadResult:
        result = await super().read(run_id, after_seq)
        records = []
        for stored in result.records:
            if stored.seq == self.changed_seq:
                record = self.codec.open(stored.data)
                record = replace(record, body={**record.body, "text": "something else"})
                stored = StoredRecord(stored.seq, stored.epoch, self.codec.seal(record))
            records.append(stored)
        return ReadResult(records, result.problem)


async def test_a_copy_that_reads_back_different_is_removed_and_named(
    src: Site, tmp_path: Path
) -> None:
    await make_run(src, "drift", records=5)
    async with ChangingStore(tmp_path / "target", sync="flush") as target:
        target.codec = RecordCodec(await target.mac_key())
        with pytest.raises(StoreError, match=r"run drift .*: record 3 differs in body") as caught:
            await migrate(src.store, target, source_codec=src.codec, target_codec=target.codec)
        assert caught.value.fields == {"run_id": "drift", "seq": 3}
        assert await target.list_runs() == []
        assert list((target.root / "runs").iterdir()) == []


async def test_an_unfinished_copy_in_the_target_is_redone(src: Site, dst: Site) -> None:
    spec = await make_run(src, "again", records=4, blobs=(b"blob" * 40,))
    leftover = await make_run(dst, "again", records=1)
    await dst.store.put_meta(replace(leftover.meta, extra={MIGRATING: src.store.url}))

    report = await run(src, dst)

    assert report.runs == ["again"]
    [problem] = report.problems
    assert "unfinished copy" in problem
    await assert_copied(spec, dst, src)


async def test_an_unfinished_copy_is_not_copied_onward(src: Site, dst: Site) -> None:
    spec = await make_run(src, "half")
    await src.store.put_meta(replace(spec.meta, extra={MIGRATING: "file:///elsewhere"}))

    report = await run(src, dst)

    assert report.runs == []
    assert [run_id for run_id, _ in report.skipped] == ["half"]
    assert await dst.store.list_runs() == []


async def test_a_missing_source_blob_is_reported(src: Site, dst: Site) -> None:
    spec = await make_run(src, "lossy", records=4, blobs=(b"gone" * 30,))
    [digest] = spec.blobs
    (src.store.root / "runs" / "lossy" / "blobs" / digest).unlink()

    report = await run(src, dst)

    assert report.runs == ["lossy"]
    assert report.blobs == 0
    [problem] = report.problems
    assert digest in problem
    assert "missing" in problem
    assert await opened_records(dst, "lossy") == spec.records


# -- encryption -------------------------------------------------------------------------


async def test_an_encrypted_target_holds_no_plaintext(src: Site, tmp_path: Path) -> None:
    secret = SECRET.encode()
    await make_run(src, "plain", records=3, blobs=(secret * 10,), snapshot_at=(2,), created_at=1.0)
    lease = await src.store.acquire("plain", "writer")
    record = Record("plain", 4, "chunk", "main", 1.0, lease.epoch, {"t": 0, "text": SECRET})
    await src.store.append("plain", [StoredRecord(4, lease.epoch, src.codec.seal(record))], lease)
    await src.store.release(lease)
    assert any(secret in p.read_bytes() for p in files_under(src.store.root))

    cipher = Cipher(os.urandom(32))
    async with FileStore(tmp_path / "target", sync="flush") as target:
        key = await target.mac_key()
        dst = Site(target, RecordCodec(key, cipher=cipher))
        report = await run(src, dst)

        assert (report.runs, report.blobs, report.snapshots) == (["plain"], 1, 1)
        leaked = [p for p in files_under(target.root) if secret in p.read_bytes()]
        assert leaked == []
        copied = await opened_records(dst, "plain")
        assert copied[-1].body["text"] == SECRET
        stored = (await target.read("plain")).records[-1]
        with pytest.raises(DecryptionError):
            RecordCodec(key).open(stored.data)


# -- another backend ----------------------------------------------------------------------


async def test_runs_travel_from_files_to_sqlite_and_back_unchanged(
    src: Site, tmp_path: Path
) -> None:
    sqlite = pytest.importorskip("resumable.store.sqlite")
    specs = [
        await make_run(src, "a", records=5, blobs=(b"x" * 100,), created_at=1.0),
        await make_run(src, "b", records=6, snapshot_at=(3,), created_at=2.0, status="waiting"),
    ]
    store: CheckpointStore
    async with sqlite.SQLiteStore(tmp_path / "runs.db", sync="flush") as store:
        middle = Site(store, RecordCodec(await store.mac_key()))  # type: ignore[arg-type]
        there = await run(src, middle)
        assert sorted(there.runs) == ["a", "b"]
        for spec in specs:
            await assert_copied(spec, middle, src)

        async with FileStore(tmp_path / "back", sync="flush") as back_store:
            back = Site(back_store, RecordCodec(await back_store.mac_key()))
            report = await run(middle, back)
            assert (report.records, report.blobs, report.snapshots) == (
                there.records,
                there.blobs,
                there.snapshots,
            )
            for spec in specs:
                await assert_copied(spec, back, middle)


# -- store URLs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "kind", "options"),
    [
        ("/var/lib/runs", "file", {"path": "/var/lib/runs"}),
        ("runs", "file", {"path": "runs"}),
        ("file:///var/lib/runs", "file", {"path": "/var/lib/runs"}),
        ("sqlite:///var/lib/runs.db", "sqlite", {"url": "sqlite:///var/lib/runs.db"}),
        ("sqlite:runs.db", "sqlite", {"url": "sqlite:runs.db"}),
        ("postgresql://u@db:5432/r", "postgres", {"url": "postgresql://u@db:5432/r"}),
        ("postgres://u@db/r?schema=s", "postgres", {"url": "postgres://u@db/r?schema=s"}),
        ("redis://cache:6379/0", "redis", {"url": "redis://cache:6379/0"}),
        ("rediss://cache:6380/0", "redis", {"url": "rediss://cache:6380/0"}),
    ],
)
def test_store_urls_name_a_kind_and_how_to_open_it(
    url: str, kind: str, options: dict[str, str]
) -> None:
    assert parse_store_url(url) == (kind, options)


@pytest.mark.parametrize(
    "url", ["mysql://u@db/r", "", "   ", "s3://bucket/runs", "file://", "sqlite://", "redis:host"]
)
def test_a_url_that_is_no_store_is_refused_with_the_accepted_forms(url: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_store_url(url)
    message = str(caught.value)
    assert repr(url) in message
    assert "postgresql://" in message
    assert "sqlite:///" in message


def test_a_refused_url_does_not_echo_its_password() -> None:
    with pytest.raises(UsageError) as caught:
        parse_store_url("mysql://admin:hunter2@db/runs")
    assert "hunter2" not in str(caught.value)
    assert "admin" in str(caught.value)


async def test_a_parsed_file_url_opens_the_same_store(src: Site) -> None:
    kind, options = parse_store_url(f"file://{src.store.root}")
    async with open_store(kind, sync="flush", **options) as reopened:
        assert await reopened.mac_key() == await src.store.mac_key()

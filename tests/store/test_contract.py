"""The CheckpointStore contract, run against every store.

Each test opens a store on a fresh location (see ``conftest.py``). The last section
holds what only the lease-based stores promise (expiring leases, several
connections) and what a backend adds of its own (URLs, schema versions, claims).
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg
import pytest

from resumable.errors import (
    ConfigError,
    FencedError,
    RunBusyError,
    RunNotFoundError,
    SchemaVersionError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)
from resumable.store.base import CheckpointStore, Lease, RunMeta, StoredRecord
from resumable.store.postgres import PostgresStore
from resumable.store.redis import RedisStore
from resumable.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from conftest import StoreSite


def meta(run_id: str = "run-1", created_at: float = 1000.0, **changes: object) -> RunMeta:
    base = RunMeta(
        run_id=run_id,
        program="examples/ledger.py",
        kind="script",
        status="running",
        created_at=created_at,
        updated_at=created_at + 0.5,
        parent="run-0",
        extra={"digest": "ab12", "question": {"text": "ok?", "options": [1, 2.5, None]}},
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def rec(seq: int, epoch: int = 1, tag: str = "") -> StoredRecord:
    return StoredRecord(seq, epoch, f"record {seq} {tag}".encode() + bytes([seq % 256, 0, 255]))


async def owned_run(store: CheckpointStore, run_id: str = "run-1") -> Lease:
    await store.create_run(meta(run_id))
    return await store.acquire(run_id, "owner-a")


async def seqs(store: CheckpointStore, run_id: str = "run-1", after: int = 0) -> list[int]:
    return [r.seq for r in (await store.read(run_id, after)).records]


# -- runs ------------------------------------------------------------------------


async def test_created_run_reads_back_as_written(store: CheckpointStore) -> None:
    written = meta()
    await store.create_run(written)

    got = await store.get_meta("run-1")

    assert got.run_id == written.run_id
    assert got.program == written.program
    assert got.kind == written.kind
    assert got.status == written.status
    assert got.created_at == written.created_at
    assert got.updated_at == written.updated_at
    assert got.parent == written.parent
    assert got.extra == written.extra
    assert (await store.read("run-1")).records == []


async def test_creating_an_existing_run_is_a_usage_error(store: CheckpointStore) -> None:
    await store.create_run(meta())
    with pytest.raises(UsageError, match="run-1"):
        await store.create_run(meta(program="other.py"))
    assert (await store.get_meta("run-1")).program == "examples/ledger.py"


async def test_unknown_run_ids_raise_run_not_found(store: CheckpointStore) -> None:
    await store.create_run(meta("known"))
    with pytest.raises(RunNotFoundError, match="nope"):
        await store.get_meta("nope")
    with pytest.raises(RunNotFoundError):
        await store.put_meta(meta("nope"))
    with pytest.raises(RunNotFoundError):
        await store.read("nope")
    with pytest.raises(RunNotFoundError):
        await store.delete_run("nope")
    with pytest.raises(RunNotFoundError):
        await store.acquire("nope", "owner-a")


async def test_put_meta_replaces_metadata_but_not_the_lease(store: CheckpointStore) -> None:
    stale = meta()
    await store.create_run(stale)
    lease = await store.acquire("run-1", "owner-a")

    await store.put_meta(replace(stale, status="waiting", updated_at=2000.0, extra={"n": 1}))

    got = await store.get_meta("run-1")
    assert (got.status, got.updated_at, got.extra) == ("waiting", 2000.0, {"n": 1})
    assert got.epoch == lease.epoch
    await store.append("run-1", [rec(1, lease.epoch)], lease)
    assert await seqs(store) == [1]


async def test_a_run_created_with_an_owner_name_can_be_acquired(store: CheckpointStore) -> None:
    await store.create_run(meta(owner="host:123", epoch=7))
    lease = await store.acquire("run-1", "host:123")
    await store.append("run-1", [rec(1, lease.epoch)], lease)
    assert await seqs(store) == [1]


async def test_list_runs_is_newest_first(store: CheckpointStore) -> None:
    for run_id, created in [("b", 2000.0), ("a", 1000.0), ("c", 3000.0)]:
        await store.create_run(meta(run_id, created_at=created))
    assert [s.meta.run_id for s in await store.list_runs()] == ["c", "b", "a"]


async def test_list_runs_reports_live_owner_and_last_seq(store: CheckpointStore) -> None:
    lease = await owned_run(store, "run-1")
    await store.create_run(meta("idle", created_at=10.0))
    await store.append("run-1", [rec(1), rec(2)], lease)
    await store.append("run-1", [rec(5)], lease)

    summaries = {s.meta.run_id: s for s in await store.list_runs()}
    assert summaries["run-1"].live
    assert summaries["run-1"].last_seq == 5
    assert summaries["run-1"].last_write is not None
    assert not summaries["idle"].live
    assert summaries["idle"].last_seq == 0

    await store.release(lease)
    summary = next(s for s in await store.list_runs() if s.meta.run_id == "run-1")
    assert not summary.live
    assert summary.status == "crashed"


async def test_delete_run_removes_log_blobs_and_snapshots(store: CheckpointStore) -> None:
    lease = await owned_run(store)
    await store.append("run-1", [rec(1), rec(2)], lease)
    await store.put_blob("run-1", "d1", b"blob")
    await store.put_snapshot("run-1", 2, b"snap", lease)
    await store.create_run(meta("other"))

    await store.delete_run("run-1")

    with pytest.raises(RunNotFoundError):
        await store.get_meta("run-1")
    assert [s.meta.run_id for s in await store.list_runs()] == ["other"]
    await store.create_run(meta("run-1"))
    assert await seqs(store) == []
    assert not await store.has_blob("run-1", "d1")
    assert await store.get_snapshot("run-1") is None


# -- the log ---------------------------------------------------------------------


async def test_append_then_read_in_order_and_after_a_seq(store: CheckpointStore) -> None:
    lease = await owned_run(store)
    first = [rec(1, lease.epoch), rec(2, lease.epoch), rec(3, lease.epoch)]
    second = [rec(7, lease.epoch), rec(9, lease.epoch)]
    await store.append("run-1", first, lease)
    await store.append("run-1", second, lease)

    assert (await store.read("run-1")).records == first + second
    assert (await store.read("run-1", after_seq=3)).records == second
    assert (await store.read("run-1", after_seq=8)).records == second[1:]
    assert (await store.read("run-1", after_seq=9)).records == []
    assert (await store.read("run-1")).problem is None


async def test_appends_that_do_not_increase_seq_are_refused_whole(store: CheckpointStore) -> None:
    lease = await owned_run(store)
    await store.append("run-1", [rec(1), rec(2)], lease)

    with pytest.raises(ValueError, match="seq"):
        await store.append("run-1", [rec(2, tag="again")], lease)
    with pytest.raises(ValueError, match="seq"):
        await store.append("run-1", [rec(3), rec(4), rec(4, tag="dup")], lease)
    with pytest.raises(ValueError, match="seq"):
        await store.append("run-1", [rec(6), rec(5)], lease)

    assert (await store.read("run-1")).records == [rec(1), rec(2)]
    await store.append("run-1", [rec(3)], lease)
    assert await seqs(store) == [1, 2, 3]


async def test_large_records_round_trip(store: CheckpointStore) -> None:
    lease = await owned_run(store)
    big = StoredRecord(1, lease.epoch, random.randbytes(3_000_000))
    await store.append("run-1", [big], lease)
    assert (await store.read("run-1")).records == [big]


# -- blobs -----------------------------------------------------------------------


async def test_blobs_are_written_once_and_read_back(store: CheckpointStore) -> None:
    await store.create_run(meta())
    assert not await store.has_blob("run-1", "sha256-aa")

    await store.put_blob("run-1", "sha256-aa", b"\x00first")
    await store.put_blob("run-1", "sha256-aa", b"second")

    assert await store.has_blob("run-1", "sha256-aa")
    assert await store.get_blob("run-1", "sha256-aa") == b"\x00first"


async def test_a_missing_blob_is_a_store_error_naming_it(store: CheckpointStore) -> None:
    await store.create_run(meta())
    with pytest.raises(StoreError, match="sha256-missing"):
        await store.get_blob("run-1", "sha256-missing")


async def test_list_blobs_names_each_blob_of_the_run_with_its_size(store: CheckpointStore) -> None:
    await store.create_run(meta())
    await store.create_run(meta("other"))
    assert await store.list_blobs("run-1") == {}

    await store.put_blob("run-1", "sha256-aa", b"\x00first")
    await store.put_blob("run-1", "sha256-bb", random.randbytes(70_000))
    await store.put_blob("other", "sha256-cc", b"elsewhere")

    assert await store.list_blobs("run-1") == {"sha256-aa": 6, "sha256-bb": 70_000}
    assert await store.list_blobs("other") == {"sha256-cc": 9}
    with pytest.raises(RunNotFoundError):
        await store.list_blobs("no-such-run")


async def test_delete_blobs_deletes_those_named_and_counts_them(store: CheckpointStore) -> None:
    await store.create_run(meta())
    await store.create_run(meta("other"))
    for digest in ("sha256-aa", "sha256-bb", "sha256-cc"):
        await store.put_blob("run-1", digest, digest.encode())
    await store.put_blob("other", "sha256-aa", b"kept")

    assert await store.delete_blobs("run-1", ["sha256-aa", "sha256-bb", "sha256-gone"]) == 2

    assert await store.list_blobs("run-1") == {"sha256-cc": 9}
    assert not await store.has_blob("run-1", "sha256-aa")
    with pytest.raises(StoreError, match="sha256-bb"):
        await store.get_blob("run-1", "sha256-bb")
    assert await store.get_blob("other", "sha256-aa") == b"kept"  # another run's: untouched
    assert await store.delete_blobs("run-1", ["sha256-aa"]) == 0
    assert await store.delete_blobs("run-1", []) == 0
    await store.put_blob("run-1", "sha256-aa", b"written again")  # a deleted digest comes back
    assert await store.get_blob("run-1", "sha256-aa") == b"written again"
    with pytest.raises(RunNotFoundError):
        await store.delete_blobs("no-such-run", ["sha256-aa"])


async def test_delete_blobs_under_a_stale_lease_is_fenced(store: CheckpointStore) -> None:
    old = await owned_run(store)
    await store.put_blob("run-1", "sha256-aa", b"blob")
    await store.release(old)
    new = await store.acquire("run-1", "owner-b")

    with pytest.raises(FencedError, match="run-1"):
        await store.delete_blobs("run-1", ["sha256-aa"], old)
    with pytest.raises(FencedError):
        await store.delete_blobs("run-1", ["sha256-aa"], replace(new, run_id="other"))
    assert await store.has_blob("run-1", "sha256-aa")

    assert await store.delete_blobs("run-1", ["sha256-aa"], new) == 1
    assert await store.list_blobs("run-1") == {}


async def test_many_blobs_are_listed_and_deleted_together(store: CheckpointStore) -> None:
    await store.create_run(meta())
    digests = [f"sha256-{n:05d}" for n in range(1200)]
    for digest in digests:
        await store.put_blob("run-1", digest, b"x")
    assert set(await store.list_blobs("run-1")) == set(digests)
    assert await store.delete_blobs("run-1", digests[:1100]) == 1100
    assert sorted(await store.list_blobs("run-1")) == digests[1100:]


# -- snapshots -------------------------------------------------------------------


async def test_snapshots_newest_and_at_or_before(store: CheckpointStore) -> None:
    lease = await owned_run(store)
    assert await store.get_snapshot("run-1") is None
    for seq in (3, 6, 9):
        await store.put_snapshot("run-1", seq, f"state@{seq}".encode(), lease)

    assert await store.get_snapshot("run-1") == (9, b"state@9")
    assert await store.get_snapshot("run-1", at_or_before=8) == (6, b"state@6")
    assert await store.get_snapshot("run-1", at_or_before=6) == (6, b"state@6")
    assert await store.get_snapshot("run-1", at_or_before=2) is None


async def test_prune_drops_old_snapshots_and_what_they_cover(store: CheckpointStore) -> None:
    lease = await owned_run(store)
    await store.append("run-1", [rec(s) for s in range(1, 12)], lease)
    for seq in (3, 6, 9):
        await store.put_snapshot("run-1", seq, f"state@{seq}".encode(), lease)

    dropped = await store.prune("run-1", keep=2)

    left = await seqs(store)
    assert dropped == 11 - len(left)
    assert dropped >= 3
    assert left == list(range(12 - len(left), 12))
    assert min(left) <= 7  # nothing after the oldest kept snapshot (6) is gone
    if isinstance(store, (SQLiteStore, PostgresStore, RedisStore)):
        assert left == [7, 8, 9, 10, 11]  # record by record: all the kept snapshot stands for
    assert await store.get_snapshot("run-1", at_or_before=5) is None
    assert await store.get_snapshot("run-1", at_or_before=8) == (6, b"state@6")
    assert await store.get_snapshot("run-1") == (9, b"state@9")


async def test_prune_with_few_snapshots_keeps_everything(store: CheckpointStore) -> None:
    lease = await owned_run(store)
    await store.append("run-1", [rec(s) for s in range(1, 6)], lease)
    await store.put_snapshot("run-1", 4, b"state@4", lease)

    assert await store.prune("run-1", keep=3) == 0
    assert await seqs(store) == [1, 2, 3, 4, 5]
    assert await store.get_snapshot("run-1") == (4, b"state@4")


# -- ownership -------------------------------------------------------------------


async def test_acquire_is_exclusive_and_each_acquire_is_a_new_epoch(
    store: CheckpointStore,
) -> None:
    await store.create_run(meta())
    first = await store.acquire("run-1", "owner-a")
    assert (first.run_id, first.owner) == ("run-1", "owner-a")

    with pytest.raises(RunBusyError, match="run-1"):
        await store.acquire("run-1", "owner-b")

    await store.release(first)
    await store.release(first)  # idempotent
    second = await store.acquire("run-1", "owner-b")
    assert second.epoch == first.epoch + 1
    assert (await store.get_meta("run-1")).epoch == second.epoch


async def test_a_stale_lease_cannot_append_or_snapshot(store: CheckpointStore) -> None:
    old = await owned_run(store)
    await store.append("run-1", [rec(1, old.epoch)], old)
    await store.release(old)
    new = await store.acquire("run-1", "owner-b")

    with pytest.raises(FencedError, match="run-1"):
        await store.append("run-1", [rec(2, old.epoch)], old)
    with pytest.raises(FencedError):
        await store.put_snapshot("run-1", 1, b"stale state", old)
    with pytest.raises(FencedError):
        await store.renew(old)

    assert await seqs(store) == [1]
    assert await store.get_snapshot("run-1") is None
    await store.release(old)  # a stale release leaves the new owner alone
    await store.append("run-1", [rec(2, new.epoch)], new)
    assert (await store.read("run-1")).records == [rec(1, old.epoch), rec(2, new.epoch)]


async def test_renew_keeps_the_epoch(store: CheckpointStore) -> None:
    lease = await owned_run(store)
    renewed = await store.renew(lease, ttl=60.0)
    assert (renewed.run_id, renewed.epoch, renewed.owner) == ("run-1", lease.epoch, "owner-a")
    await store.append("run-1", [rec(1)], renewed)
    with pytest.raises(RunBusyError):
        await store.acquire("run-1", "owner-b")


async def test_mac_key_is_stable_across_reopening(site: StoreSite) -> None:
    async with site.open() as store:
        key = await store.mac_key()
        assert key == await store.mac_key()
    async with site.open() as store:
        assert await store.mac_key() == key
    assert len(key) >= 32
    assert len(set(key)) > 8


# -- concurrency -----------------------------------------------------------------


async def _write_run(store: CheckpointStore, run_id: str, count: int) -> None:
    await store.create_run(meta(run_id))
    lease = await store.acquire(run_id, f"owner-{run_id}")
    seq = 0
    while seq < count:
        size = random.randint(1, 3)
        batch = [rec(seq + i, lease.epoch, run_id) for i in range(1, size + 1)]
        await store.append(run_id, batch, lease)
        seq += size


async def test_many_runs_appended_concurrently_lose_nothing(store: CheckpointStore) -> None:
    runs = [f"run-{n}" for n in range(24)]
    await asyncio.gather(*(_write_run(store, run_id, 20) for run_id in runs))

    for run_id in runs:
        records = (await store.read(run_id)).records
        assert [r.seq for r in records] == list(range(1, len(records) + 1))
        assert len(records) >= 20
        assert all(r == rec(r.seq, r.epoch, run_id) for r in records)


async def _race_appends(store: CheckpointStore, lease: Lease, writer: str, batches: int) -> None:
    """Append ``batches`` batches right after whatever is last, retrying when beaten to it."""
    done = 0
    while done < batches:
        last = (await store.read(lease.run_id)).records
        start = last[-1].seq if last else 0
        batch = [rec(start + i, lease.epoch, f"{writer}/{done}") for i in (1, 2, 3)]
        try:
            await store.append(lease.run_id, batch, lease)
        except ValueError:
            continue
        done += 1


def _assert_whole_batches(records: list[StoredRecord], expected_batches: int) -> None:
    assert [r.seq for r in records] == list(range(1, 3 * expected_batches + 1))
    tags = [r.data[:-3].split(b" ", 2)[2] for r in records]
    for first in range(0, len(tags), 3):
        assert tags[first] == tags[first + 1] == tags[first + 2]
    assert len(set(tags)) == expected_batches


async def test_racing_writers_never_interleave_a_batch(store: CheckpointStore) -> None:
    lease = await owned_run(store)
    await asyncio.gather(*(_race_appends(store, lease, f"w{n}", 5) for n in range(6)))
    _assert_whole_batches((await store.read("run-1")).records, 30)


async def test_a_stale_append_among_concurrent_ones_fails_alone(store: CheckpointStore) -> None:
    for n in range(8):
        await store.create_run(meta(f"run-{n}"))
    leases = [await store.acquire(f"run-{n}", "owner-a") for n in range(8)]
    await store.release(leases[3])
    await store.acquire("run-3", "owner-b")

    results = await asyncio.gather(
        *(store.append(lease.run_id, [rec(1, lease.epoch)], lease) for lease in leases),
        return_exceptions=True,
    )

    assert isinstance(results[3], FencedError)
    assert [r for n, r in enumerate(results) if n != 3] == [None] * 7
    assert await seqs(store, "run-3") == []
    assert [await seqs(store, f"run-{n}") for n in (0, 7)] == [[1], [1]]


# -- lease-based stores: expiry and several connections ----------------------------


async def test_an_expired_lease_is_taken_over_and_fenced(db_site: StoreSite) -> None:
    async with db_site.open() as first, db_site.open() as second:
        await first.create_run(meta())
        old = await first.acquire("run-1", "owner-a", ttl=0.6)
        await first.append("run-1", [rec(1, old.epoch)], old)
        with pytest.raises(RunBusyError):
            await second.acquire("run-1", "owner-b")

        await asyncio.sleep(0.8)
        assert not next(iter(await second.list_runs())).live
        new = await second.acquire("run-1", "owner-b", ttl=30)

        with pytest.raises(FencedError):
            await first.append("run-1", [rec(2, old.epoch, "late")], old)
        with pytest.raises(FencedError):
            await first.renew(old)
        await second.append("run-1", [rec(2, new.epoch)], new)
        assert (await first.read("run-1")).records == [rec(1, old.epoch), rec(2, new.epoch)]
        assert (await first.get_meta("run-1")).owner == "owner-b"


async def test_two_connections_appending_lose_nothing(db_site: StoreSite) -> None:
    async with db_site.open() as first, db_site.open() as second:
        runs = [f"run-{n}" for n in range(16)]
        await asyncio.gather(
            *(_write_run(first if n % 2 else second, run_id, 15) for n, run_id in enumerate(runs))
        )
        for run_id in runs:
            records = (await second.read(run_id)).records
            assert [r.seq for r in records] == list(range(1, len(records) + 1))
            assert all(r == rec(r.seq, r.epoch, run_id) for r in records)


async def test_two_connections_racing_on_one_run_never_interleave(db_site: StoreSite) -> None:
    async with db_site.open() as first, db_site.open() as second:
        lease = await owned_run(first)
        await asyncio.gather(
            *(_race_appends(s, lease, f"{n}", 4) for n, s in enumerate([first, second] * 3))
        )
        _assert_whole_batches((await second.read("run-1")).records, 24)


async def test_only_one_of_two_connections_acquires(db_site: StoreSite) -> None:
    async with db_site.open() as first, db_site.open() as second:
        await first.create_run(meta())
        results = await asyncio.gather(
            *(s.acquire("run-1", f"owner-{n}") for n, s in enumerate([first, second] * 4)),
            return_exceptions=True,
        )
        leases = [r for r in results if isinstance(r, Lease)]
        assert len(leases) == 1
        assert all(isinstance(r, RunBusyError) for r in results if r is not leases[0])
        assert (await second.get_meta("run-1")).epoch == leases[0].epoch


# -- backend specifics -----------------------------------------------------------


async def test_sqlite_from_url_and_private_file(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "runs.db"
    for url in (f"sqlite://{path}", f"sqlite:///{path}", str(path)):
        assert SQLiteStore.from_url(url).path == path
    async with SQLiteStore.from_url(f"sqlite://{path}", sync="flush") as store:
        await store.create_run(meta())
    assert path.stat().st_mode & 0o777 == 0o600
    with pytest.raises(ConfigError, match="sync"):
        SQLiteStore(path, sync="sometimes")


async def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with SQLiteStore(path) as store:
        await store.create_run(meta())
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version=99")
    with pytest.raises(SchemaVersionError, match="newer resumable"):
        async with SQLiteStore(path):
            pass


async def test_sqlite_unwritable_location_is_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreUnavailableError, match=r"runs\.db"):
        async with SQLiteStore(blocker / "runs.db"):
            pass


def pg(site: StoreSite) -> PostgresStore:
    store = site.open()
    assert isinstance(store, PostgresStore)
    return store


@pytest.mark.postgres
async def test_postgres_refuses_a_newer_schema(postgres_site: StoreSite, postgres_url: str) -> None:
    async with pg(postgres_site) as store:
        await store.create_run(meta())
        schema = store.schema
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute(f'UPDATE "{schema}".resumable_schema_version SET version = 99')
    finally:
        await conn.close()
    with pytest.raises(SchemaVersionError, match="newer resumable; upgrade"):
        async with postgres_site.open():
            pass


@pytest.mark.postgres
async def test_postgres_claims_pending_and_orphaned_runs_once(postgres_site: StoreSite) -> None:
    async with pg(postgres_site) as first, pg(postgres_site) as second:
        await first.enqueue(meta("queued-1", created_at=1.0, status="pending"))
        await first.enqueue(meta("queued-2", created_at=2.0, status="running"))
        await first.create_run(meta("orphan", created_at=3.0, status="running"))
        await first.create_run(meta("alive", created_at=4.0, status="running"))
        await first.create_run(meta("asking", created_at=5.0, status="waiting"))
        await first.create_run(meta("done", created_at=6.0, status="completed"))
        dead = await first.acquire("orphan", "crashed-worker", ttl=0.2)
        await first.acquire("alive", "live-worker", ttl=60)
        await asyncio.sleep(0.3)

        claims = await asyncio.gather(
            first.claim("worker-1", 30.0, 10), second.claim("worker-2", 30.0, 10)
        )

        by_id = {lease.run_id: lease for batch in claims for lease in batch}
        assert sorted(by_id) == ["orphan", "queued-1", "queued-2"]
        assert sum(len(batch) for batch in claims) == 3
        assert (await first.get_meta("queued-2")).status == "pending"
        assert by_id["orphan"].epoch == dead.epoch + 1
        with pytest.raises(FencedError):
            await first.append("orphan", [rec(1, dead.epoch)], dead)
        await first.append("orphan", [rec(1)], by_id["orphan"])
        assert await first.claim("worker-3", 30.0, 10) == []


@pytest.mark.postgres
async def test_postgres_claim_takes_the_oldest_up_to_the_limit(postgres_site: StoreSite) -> None:
    async with pg(postgres_site) as store:
        for n in range(5):
            await store.enqueue(meta(f"q{n}", created_at=float(n)))
        first = await store.claim("w", 30.0, 2)
        rest = await store.claim("w", 30.0, 10)
        assert [lease.run_id for lease in first] == ["q0", "q1"]
        assert sorted(lease.run_id for lease in rest) == ["q2", "q3", "q4"]


@pytest.mark.postgres
async def test_postgres_appends_go_on_after_the_server_drops_connections(
    postgres_site: StoreSite, postgres_url: str
) -> None:
    async with pg(postgres_site) as store:
        lease = await owned_run(store)
        await store.append("run-1", [rec(1)], lease)
        admin = await asyncpg.connect(postgres_url)
        try:
            dropped = await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND query LIKE '%' || $1 || '%'",
                store.schema,
            )
        finally:
            await admin.close()
        assert dropped >= 1

        # at once, before the client has read the server's goodbye, and again later
        await store.append("run-1", [rec(2)], lease)
        await asyncio.sleep(0.1)
        await store.append("run-1", [rec(3)], lease)
        assert await seqs(store) == [1, 2, 3]


@pytest.mark.postgres
async def test_postgres_connection_errors_are_clear() -> None:
    with pytest.raises(StoreUnavailableError, match=r"127\.0\.0\.1:1\b.*is PostgreSQL running\?"):
        async with PostgresStore("postgresql://postgres:s3cret@127.0.0.1:1/test"):
            pass
    with pytest.raises(StoreUnavailableError, match="no_such_db") as missing_db:
        async with PostgresStore("postgresql://postgres:s3cret@127.0.0.1:5432/no_such_db"):
            pass
    with pytest.raises(StoreUnavailableError, match="no_such_user") as bad_user:
        async with PostgresStore("postgresql://no_such_user:s3cret@127.0.0.1:5432/test"):
            pass
    for error in (missing_db.value, bad_user.value):
        assert "s3cret" not in str(error)
    assert "s3cret" not in PostgresStore("postgresql://u:s3cret@127.0.0.1/test").url


def test_postgres_from_url_reads_the_schema_option(postgres_url: str) -> None:
    store = PostgresStore.from_url(f"{postgres_url}?schema=runs_a", sync="flush")
    assert store.schema == "runs_a"
    assert "schema" not in store.dsn
    with pytest.raises(ConfigError, match="schema"):
        PostgresStore(postgres_url, schema='x"; DROP TABLE runs; --')


@pytest.mark.redis
async def test_redis_connection_errors_are_clear() -> None:
    with pytest.raises(StoreUnavailableError, match=r"127\.0\.0\.1:1\b.*is Redis running\?"):
        async with RedisStore("redis://:s3cret@127.0.0.1:1/0"):
            pass
    assert "s3cret" not in RedisStore("redis://:s3cret@127.0.0.1:1/0").url


def test_redis_from_url_reads_the_prefix_option(redis_url: str) -> None:
    store = RedisStore.from_url(f"{redis_url}?prefix=team-a", sync="flush")
    assert store.prefix == "team-a"
    with pytest.raises(ConfigError, match="sync"):
        RedisStore(redis_url, sync="sometimes")

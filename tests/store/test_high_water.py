"""Every store keeps a high-water mark apart from its records: a lost tail or hole shows.

``read`` reports the seq of the last record an append acknowledged; the records it
returns falling short of it, or skipping a seq, is a loss (``ReadResult.missing``).
An append after a loss the user accepted follows the log's own last record, and moves
the mark back with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import asyncpg
import pytest

from resumable.errors import UsageError
from resumable.store.base import CheckpointStore, ReadResult, StoredRecord
from resumable.store.filesystem import FileStore
from resumable.store.postgres import PostgresStore
from resumable.store.postgres.schema import MIGRATIONS
from resumable.store.redis import RedisStore
from resumable.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from conftest import StoreSite

from tests.store.test_contract import owned_run, rec


async def _drop_records(store: CheckpointStore, run_id: str, seqs: list[int]) -> None:
    """Delete records behind the store's back, as an operator or a lost file does."""
    if isinstance(store, FileStore):
        from resumable.store.filesystem.segments import encode_frames, list_segments, scan_frames

        for _, segment in list_segments(store.root / "runs" / run_id):
            kept = [r for r in scan_frames(segment.read_bytes()).records if r.seq not in seqs]
            segment.write_bytes(b"".join(encode_frames([r]) for r in kept))
    elif isinstance(store, SQLiteStore):
        await store._call(  # the store's own connection: the same file, its own thread
            lambda: [
                store._connection().execute(
                    "DELETE FROM records WHERE run_id=? AND seq=?", (run_id, seq)
                )
                for seq in seqs
            ]
        )
    elif isinstance(store, PostgresStore):
        async with store._conn("test") as conn:
            await conn.execute(
                f"DELETE FROM {store._s}.records WHERE run_id = $1 AND seq = ANY($2)",
                run_id,
                seqs,
            )
    elif isinstance(store, RedisStore):
        for seq in seqs:
            await store._call("zremrangebyscore", store._key(run_id, ":log"), seq, seq)
    else:
        raise AssertionError(type(store))


async def test_a_read_reports_the_last_acknowledged_seq(site: StoreSite) -> None:
    async with site.open() as store:
        lease = await owned_run(store)
        await store.append("run-1", [rec(1), rec(2), rec(3)], lease)
        await store.append("run-1", [rec(4)], lease)
        read = await store.read("run-1")
        assert read.high_water == 4
        assert read.missing() is None
        assert (await store.read("run-1", 2)).missing(2) is None


async def test_a_lost_tail_and_a_hole_are_seen_and_the_log_goes_on_after_a_lost_tail(
    site: StoreSite,
) -> None:
    async with site.open() as store:
        lease = await owned_run(store)
        await store.append("run-1", [rec(n) for n in range(1, 7)], lease)
        await _drop_records(store, "run-1", [5, 6])
        assert (await store.read("run-1")).missing() == (5, 6)
        await _drop_records(store, "run-1", [2])
        assert (await store.read("run-1")).missing() == (2, 2)
        await _drop_records(store, "run-1", [3, 4])  # now only record 1 is left
        await store.release(lease)
    async with site.open() as store:
        lease = await store.acquire("run-1", "owner-b")
        await store.append("run-1", [StoredRecord(2, lease.epoch, b"again")], lease)
        read = await store.read("run-1")
        assert [r.seq for r in read.records] == [1, 2]
        assert read.high_water == 2
        assert read.missing() is None


def test_missing_reads_holes_before_tails() -> None:
    def result(seqs: list[int], high: int | None) -> ReadResult:
        return ReadResult([StoredRecord(s, 1, b"") for s in seqs], high_water=high)

    assert result([1, 2, 3], 3).missing() is None
    assert result([1, 2, 3], None).missing() is None
    assert result([], 0).missing() is None
    assert result([], 4).missing() == (1, 4)
    assert result([1, 3], 3).missing() == (2, 2)
    assert result([1, 2], 5).missing() == (3, 5)
    assert result([6, 7], 9).missing(5) == (8, 9)
    assert result([7], 7).missing(5) == (6, 6)


@pytest.mark.parametrize("bad", ["", "x" * 201, "a\nb", "tab\there", ".hidden", "a/b"])
async def test_every_store_refuses_a_run_id_outside_the_rule(site: StoreSite, bad: str) -> None:
    from resumable.store.base import RunMeta

    async with site.open() as store:
        with pytest.raises(UsageError, match="invalid run id"):
            await store.create_run(RunMeta(bad, "p.py"))
        assert await store.list_runs() == []


@pytest.mark.postgres
async def test_postgres_schema_3_carries_the_marks_of_runs_written_under_schema_2(
    postgres_site: StoreSite, postgres_url: str
) -> None:
    async with postgres_site.open() as store:
        lease = await owned_run(store)
        await store.append("run-1", [rec(1), rec(2), rec(3)], lease)
        schema = store.schema  # type: ignore[attr-defined]
    conn = await asyncpg.connect(postgres_url)
    try:  # back to schema 2, as an older resumable left it
        await conn.execute(f'DROP TABLE "{schema}".heads')
        await conn.execute(f'DROP FUNCTION "{schema}".fence_appends CASCADE')
        await conn.execute(f'UPDATE "{schema}".resumable_schema_version SET version = 2')
    finally:
        await conn.close()
    assert 3 in MIGRATIONS
    async with postgres_site.open() as store:
        read = await store.read("run-1")
        assert read.high_water == 3
        await _drop_records(store, "run-1", [3])
        assert (await store.read("run-1")).missing() == (3, 3)

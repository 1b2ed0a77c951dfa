"""The PostgreSQL append is fenced at the run's head: what a racing acquire or claim sees.

Each race is staged with a second connection that holds one side's transaction open
(an acquire or claim that bumped the epoch, or an append that updated the head), so
the other side's behaviour at the other side's commit is observed, not hoped for.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import asyncpg
import pytest
from tests.store.test_contract import meta, owned_run, pg, rec, seqs

from resumable.errors import FencedError, StoreUnavailableError
from resumable.store.base import Lease, StoredRecord
from resumable.store.postgres import PostgresStore

if TYPE_CHECKING:
    from conftest import StoreSite

pytestmark = pytest.mark.postgres

ACQUIRE_ELSEWHERE = "UPDATE {s}.runs SET epoch = epoch + 1, owner = 'other' WHERE run_id = $1"


@pytest.fixture
async def store(postgres_site: StoreSite) -> AsyncIterator[PostgresStore]:
    async with pg(postgres_site) as opened:
        yield opened


@pytest.fixture
async def other(postgres_url: str) -> AsyncIterator[Any]:
    """A plain connection of another process, for the side of a race held open."""
    conn = await asyncpg.connect(postgres_url)
    try:
        yield conn
    finally:
        await conn.close()


async def _still_waiting(task: asyncio.Task[Any]) -> bool:
    await asyncio.sleep(0.3)
    return not task.done()


async def _head(store: PostgresStore, run_id: str = "run-1") -> tuple[int, int]:
    async with store._conn("test") as conn:
        row = await conn.fetchrow(
            f"SELECT last_seq, epoch FROM {store._s}.heads WHERE run_id = $1", run_id
        )
    return row[0], row[1]


@pytest.mark.parametrize("taker", ["acquire", "claim"])
async def test_an_append_racing_a_takeover_waits_for_it_and_is_refused(
    store: PostgresStore, other: Any, taker: str
) -> None:
    await store.create_run(meta())
    lease = await store.acquire("run-1", "owner-a", ttl=0.2)
    await store.append("run-1", [rec(1, lease.epoch)], lease)
    await asyncio.sleep(0.3)  # the lease lapsed: the run may be claimed
    async with other.transaction():
        if taker == "acquire":
            await other.execute(ACQUIRE_ELSEWHERE.format(s=store._s), "run-1")
        else:
            assert [r[0] for r in await other.fetch(store._sql["claim"], "w", 30.0, 5)] == ["run-1"]
        late = asyncio.create_task(store.append("run-1", [rec(2, lease.epoch)], lease))
        assert await _still_waiting(late)  # on the head's row lock, until the takeover commits
    with pytest.raises(FencedError, match="stale"):
        await late
    assert await seqs(store) == [1]
    assert await _head(store) == (1, lease.epoch + 1)


async def test_an_append_in_flight_is_skipped_by_claims_and_waited_for_by_acquire(
    store: PostgresStore, other: Any
) -> None:
    await store.create_run(meta())
    lease = await store.acquire("run-1", "owner-a", ttl=0.2)
    await asyncio.sleep(0.3)
    async with other.transaction():  # the append of a slow owner, not committed yet
        await other.execute(store._sql["append_record"], "run-1", lease.epoch, 1, lease.epoch, b"x")
        assert await asyncio.wait_for(store.claim("w", 30.0, 5), 5) == []
        taking = asyncio.create_task(store.acquire("run-1", "owner-b"))
        assert await _still_waiting(taking)
    new = await taking
    assert new.epoch == lease.epoch + 1
    assert await seqs(store) == [1]
    with pytest.raises(FencedError):
        await store.append("run-1", [rec(2, lease.epoch)], lease)
    await store.append("run-1", [rec(2, new.epoch)], new)
    assert await _head(store) == (2, new.epoch)


async def test_deleting_a_run_waits_for_its_append_in_flight_and_leaves_no_record(
    store: PostgresStore, other: Any
) -> None:
    lease = await owned_run(store)
    async with other.transaction():
        await other.execute(store._sql["append_record"], "run-1", lease.epoch, 1, lease.epoch, b"x")
        deleting = asyncio.create_task(store.delete_run("run-1"))
        assert await _still_waiting(deleting)
    await deleting
    left = await other.fetchval(f"SELECT count(*) FROM {store._s}.records")
    assert left == 0


async def test_seqs_that_skip_or_repeat_are_judged_by_the_log_and_counted_by_the_head(
    store: PostgresStore,
) -> None:
    lease = await owned_run(store)
    await store.append("run-1", [rec(1), rec(2)], lease)
    await store.append("run-1", [rec(5)], lease)  # skips 3-4, as every store allows
    assert await _head(store) == (5, lease.epoch)
    for repeated in ([rec(5)], [rec(4)], [rec(6), rec(5)]):
        with pytest.raises(ValueError, match="seq"):
            await store.append("run-1", repeated, lease)
    await store.append("run-1", [rec(6), rec(7)], lease)
    assert await seqs(store) == [1, 2, 5, 6, 7]
    assert (await store.read("run-1")).high_water == 7


async def test_a_group_commit_writes_each_append_by_its_own_outcome(store: PostgresStore) -> None:
    leases = [await owned_run(store, f"run-{n}") for n in range(8)]
    for lease in leases:
        await store.append(lease.run_id, [rec(1, lease.epoch)], lease)
    await store.release(leases[6])
    await store.acquire("run-6", "owner-b")
    batches = {n: [rec(2, lease.epoch)] for n, lease in enumerate(leases)}
    batches[3] = [rec(4, leases[3].epoch)]  # a skip: written by the locked look
    batches[5] = [rec(1, leases[5].epoch, "again")]  # a repeat: refused alone

    results = await asyncio.gather(
        *(store.append(lease.run_id, batches[n], lease) for n, lease in enumerate(leases)),
        return_exceptions=True,
    )

    assert isinstance(results[5], ValueError)
    assert isinstance(results[6], FencedError)
    assert [r for n, r in enumerate(results) if n not in (5, 6)] == [None] * 6
    assert [await seqs(store, f"run-{n}") for n in range(8)] == [
        [1, 2],
        [1, 2],
        [1, 2],
        [1, 4],
        [1, 2],
        [1],
        [1],
        [1, 2],
    ]
    assert [(await _head(store, f"run-{n}"))[0] for n in range(8)] == [2, 2, 2, 4, 2, 1, 1, 2]


async def test_schema_4_fences_runs_written_and_taken_under_schema_3(
    postgres_site: StoreSite, other: Any
) -> None:
    async with pg(postgres_site) as store:
        old = await owned_run(store)
        await store.append("run-1", [rec(1), rec(2)], old)
        await store.release(old)
        await store.create_run(meta("run-2"))
        s = store._s
    # Back to schema 3, as an older resumable left it: no epoch on the heads and no
    # trigger; that resumable acquires run-1 again, and created run-2 without a head.
    await other.execute(f"DROP FUNCTION {s}.fence_appends CASCADE")
    await other.execute(f"ALTER TABLE {s}.heads DROP COLUMN epoch")
    await other.execute(f"DELETE FROM {s}.heads WHERE run_id = 'run-2'")
    await other.execute(f"UPDATE {s}.resumable_schema_version SET version = 3")
    await other.execute(ACQUIRE_ELSEWHERE.format(s=s), "run-1")
    new = Lease("run-1", old.epoch + 1, "other")

    async with pg(postgres_site) as store:
        assert await other.fetchval(f"SELECT max(version) FROM {s}.resumable_schema_version") == 4
        assert await _head(store) == (2, new.epoch)
        with pytest.raises(FencedError):
            await store.append("run-1", [rec(3, old.epoch)], old)
        await store.append("run-1", [StoredRecord(3, new.epoch, b"new")], new)
        assert (await store.read("run-1")).high_water == 3
        assert await _head(store, "run-2") == (0, 0)
        taken = await store.acquire("run-2", "owner-c")
        await store.append("run-2", [rec(1, taken.epoch)], taken)
        assert await seqs(store, "run-2") == [1]


async def test_an_append_whose_reply_was_lost_is_sent_again_and_written_once(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = await owned_run(store)
    await store.append("run-1", [rec(1)], lease)
    real = store._append_at_heads
    tries: list[int] = []

    async def commit_then_lose_the_reply(conn: Any, group: Any) -> set[int]:
        accepted = await real(conn, group)  # committed on the server
        tries.append(len(accepted))
        if len(tries) == 1:
            conn.terminate()
            raise asyncpg.ConnectionDoesNotExistError("connection was closed in the middle")
        return accepted

    monkeypatch.setattr(store, "_append_at_heads", commit_then_lose_the_reply)
    await store.append("run-1", [rec(2), rec(3)], lease)

    assert tries == [1, 0]  # sent again on a new connection, refused at the head
    assert await seqs(store) == [1, 2, 3]
    assert await _head(store) == (3, lease.epoch)
    with pytest.raises(ValueError, match="seq"):  # a repeat that was not a resend
        await store.append("run-1", [rec(3)], lease)


async def test_an_append_the_server_keeps_failing_is_refused_after_one_more_try(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = await owned_run(store)
    tries: list[None] = []

    async def drop(conn: Any, group: Any) -> set[int]:
        tries.append(None)
        conn.terminate()
        raise asyncpg.ConnectionDoesNotExistError("connection was closed in the middle")

    monkeypatch.setattr(store, "_append_at_heads", drop)
    with pytest.raises(StoreUnavailableError, match="lost PostgreSQL"):
        await store.append("run-1", [rec(1)], lease)
    assert len(tries) == 2
    monkeypatch.undo()
    await store.append("run-1", [rec(1)], lease)
    assert await seqs(store) == [1]

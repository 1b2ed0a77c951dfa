"""Every store keeps the highest seq pruned: a log that lost its start is told from a pruned one.

A log may start after record 1 because ``prune`` dropped its start behind a snapshot,
or because its first records were deleted. The floor (``holes.log_gap``) tells them
apart: a log starting after ``floor + 1`` lost records. Runs written before the folder
and SQLite stores kept a floor have none, and read as before (a start a snapshot
covers is taken as pruned). A prune writes its floor before it deletes anything.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from resumable.errors import StoreError
from resumable.store.base import Lease
from resumable.store.filesystem import FileStore, pruning
from resumable.store.holes import log_extent, log_gap
from resumable.store.sqlite import SQLiteStore
from resumable.store.sqlite.connection import MIGRATIONS, SCHEMA_VERSION

if TYPE_CHECKING:
    from conftest import StoreSite

from tests.store.test_contract import owned_run, rec, seqs
from tests.store.test_high_water import _drop_records


async def _gap(store: object, run_id: str = "run-1") -> tuple[int, int] | None:
    found = await log_gap(store, run_id)  # type: ignore[arg-type]
    return None if found is None else found[0]


async def test_deleted_first_records_are_a_gap_and_pruned_ones_are_not(site: StoreSite) -> None:
    async with site.open() as store:
        lease = await owned_run(store)
        await store.append("run-1", [rec(n) for n in range(1, 10)], lease)
        await store.put_snapshot("run-1", 3, b"state@3", lease)
        await _drop_records(store, "run-1", [1, 2])
        assert await _gap(store) == (1, 2)  # a snapshot covers them, but nothing pruned them

        lease = await owned_run(store, "run-2")
        await store.append("run-2", [rec(n) for n in range(1, 10)], lease)
        for seq in (3, 6):
            await store.put_snapshot("run-2", seq, f"state@{seq}".encode(), lease)
        assert await store.prune("run-2", keep=1) > 0
        first = (await seqs(store, "run-2"))[0]
        assert first > 1
        assert await _gap(store, "run-2") is None
        await _drop_records(store, "run-2", [first])
        assert await _gap(store, "run-2") == (first, first)


async def test_a_log_written_from_a_later_seq_is_not_a_loss(site: StoreSite) -> None:
    """What `resumable migrate` writes for a pruned run: its records, then the snapshot."""
    async with site.open() as store:
        lease = await owned_run(store)
        await store.append("run-1", [rec(6), rec(7), rec(8)], lease)
        await store.put_snapshot("run-1", 5, b"state@5", lease)
        assert await _gap(store) is None
        await _drop_records(store, "run-1", [6])
        assert await _gap(store) == (6, 6)


# -- the folder store -------------------------------------------------------------------


async def _pruned_file_run(store: FileStore) -> Lease:
    lease = await owned_run(store)
    await store.append("run-1", [rec(n) for n in range(1, 10)], lease)
    for seq in (3, 6):
        await store.put_snapshot("run-1", seq, f"state@{seq}".encode(), lease)
    return lease


async def test_a_folder_run_without_a_floor_reads_as_before(tmp_path: Path) -> None:
    async with FileStore(tmp_path / "runs") as store:
        await _pruned_file_run(store)
        run_dir = store.root / "runs" / "run-1"
        assert pruning.read_floor(run_dir) == 0
        (run_dir / "floor").unlink()  # a run written before the floor was kept
        await _drop_records(store, "run-1", [1, 2, 3])
        assert (await log_extent(store, "run-1")).floor is None
        assert await _gap(store) is None  # covered by snapshot 6: taken as pruned
        await store.prune("run-1", keep=1)
        assert pruning.read_floor(run_dir) == 6  # from now on it is kept
        await _drop_records(store, "run-1", [7])
        assert await _gap(store) == (7, 7)


async def test_a_prune_cut_short_after_its_floor_leaves_a_whole_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FileStore(tmp_path / "runs") as store:
        lease = await _pruned_file_run(store)
        run_dir = store.root / "runs" / "run-1"

        def crash(*args: object) -> int:
            raise KeyboardInterrupt  # the process dies between the floor and the deletion

        monkeypatch.setattr(pruning, "drop_covered", crash)
        with pytest.raises(KeyboardInterrupt):
            await store.prune("run-1", keep=1)
        assert pruning.read_floor(run_dir) == 6
        assert await seqs(store) == list(range(1, 10))
        assert await _gap(store) is None
        monkeypatch.undo()  # the next snapshot's prune drops them
        await store.put_snapshot("run-1", 8, b"state@8", lease)
        assert await store.prune("run-1", keep=1) == 8
        assert await seqs(store) == [9]
        assert pruning.read_floor(run_dir) == 8
        assert await _gap(store) is None


async def test_a_floor_that_cannot_be_written_stops_the_prune(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FileStore(tmp_path / "runs") as store:
        await _pruned_file_run(store)

        def full(*args: object) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(pruning, "write_atomic", full)
        with pytest.raises(StoreError, match="free space"):
            await store.prune("run-1", keep=1)
        assert await seqs(store) == list(range(1, 10))
        assert await store.get_snapshot("run-1", at_or_before=3) == (3, b"state@3")


# -- the SQLite store -------------------------------------------------------------------


def _schema_1_file(path: Path) -> None:
    """An SQLite store as resumable left it before the floor: a run pruned up to 3."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in filter(str.strip, MIGRATIONS[1].split(";")):
            db.execute(statement)
        db.execute("PRAGMA user_version=1")
        db.execute(
            "INSERT INTO runs (run_id, meta, status, created_at, updated_at, last_seq) "
            "VALUES ('old', '{}', 'running', 1.0, 1.0, 9)"
        )
        for seq in range(4, 10):
            db.execute("INSERT INTO records VALUES ('old', ?, 1, ?)", (seq, rec(seq).data))
        db.executemany("INSERT INTO snapshots VALUES ('old', ?, x'00')", [(3,), (6,)])
    finally:
        db.close()


async def test_an_sqlite_store_of_schema_1_is_read_then_migrated(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _schema_1_file(path)
    path.chmod(0o600)
    reader = SQLiteStore(path)
    reader.read_only = True
    async with reader:  # only read: not migrated, the floor unknown
        assert (await log_extent(reader, "old")).floor is None
        assert await _gap(reader, "old") is None
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1

    async with SQLiteStore(path) as store:
        assert (await log_extent(store, "old")).floor is None
        assert await _gap(store, "old") is None  # no false alarm on a run written before
        lease = await owned_run(store, "new")
        await store.append("new", [rec(1), rec(2)], lease)
        assert (await log_extent(store, "new")).floor == 0
        await _drop_records(store, "new", [1])
        assert await _gap(store, "new") == (1, 1)
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
            floors = dict(db.execute("SELECT run_id, seq_floor FROM runs").fetchall())
        assert floors == {"old": None, "new": 0}
        await store.prune("old", keep=1)  # from its next prune on, the old run keeps one
        assert (await log_extent(store, "old")).floor == 6  # up to the snapshot it keeps
        await _drop_records(store, "old", [7])
        assert await _gap(store, "old") == (7, 7)

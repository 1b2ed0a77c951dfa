"""`resumable gc` gives a deleted run's space back on every store (real processes).

A finished run that held several megabytes is deleted by `gc --older-than-days 0`;
then the SQLite file is smaller by about that much (``VACUUM``, said in `gc`'s line),
the folder holds no file of the run, PostgreSQL no row of it in any table, and Redis
no key of it.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from tests.crash.damage import POSTGRES_URL, REDIS_URL, PostgresSite, RedisSite, Site
from tests.crash.harness import resumable

BIG = """\
import asyncio
import os

chunks = []
for n in range(6):
    chunks.append(os.urandom(1_000_000).hex())
    await asyncio.sleep(0)
print("held", sum(len(c) for c in chunks))
"""
MB = 2**20


def _bytes(work: Path, *names: str) -> int:
    return sum((work / n).stat().st_size for n in names if (work / n).exists())


def _big_run(site: Site, work: Path) -> tuple[str, str]:
    """A finished run holding about 12 MB, and a crashed one `gc` keeps."""
    site.prepare(work)
    (work / "big.py").write_text(BIG)
    run_id = f"g{secrets.token_hex(3)}"
    done = resumable(["exec", "big.py", "--run-id", run_id], work, timeout=120)
    assert done.code == 0, done.stderr
    kept = f"k{secrets.token_hex(3)}"
    crashed = resumable(
        ["exec", "s.py", "--run-id", kept], work, env={"RESUMABLE_CRASH_AFTER": "4"}
    )
    assert crashed.code == -9, crashed.stderr
    return run_id, kept


def _gc(work: Path, run_id: str) -> str:
    collected = resumable(["gc", "--older-than-days", "0"], work)
    assert collected.code == 0, collected.stderr
    assert "deleted 1 finished run" in collected.stderr, collected.stderr
    listed = resumable(["runs", "--json"], work)
    assert run_id not in listed.stdout
    return collected.stderr


async def test_gc_leaves_nothing_of_a_deleted_run(site: Site, tmp_path: Path) -> None:
    run_id, kept = _big_run(site, tmp_path)
    if site.kind == "sqlite":
        before = _bytes(tmp_path, "runs.db", "runs.db-wal")
        assert before > 12 * MB
        said = _gc(tmp_path, run_id)
        after = _bytes(tmp_path, "runs.db", "runs.db-wal")
        assert after < 2 * MB, (before, after)
        assert "the store file shrank by" in said
        assert not (tmp_path / "runs.db-heads" / run_id).exists()
    elif site.kind == "file":
        runs = tmp_path / ".resumable" / "runs"
        assert sum(f.stat().st_size for f in (runs / run_id).rglob("*") if f.is_file()) > 12 * MB
        _gc(tmp_path, run_id)
        left = [p for p in tmp_path.rglob("*") if run_id in str(p)]
        assert left == []
        assert (runs / kept).is_dir()
    elif isinstance(site, PostgresSite):
        _gc(tmp_path, run_id)
        await _no_rows(site.schema, run_id, kept)
    else:
        assert isinstance(site, RedisSite)
        _gc(tmp_path, run_id)
        await _no_keys(site.prefix, run_id, kept)
    resumed = resumable(["resume", kept], tmp_path)  # what gc kept still works
    assert resumed.code == 0, resumed.stderr


async def _no_rows(schema: str, run_id: str, kept: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        tables = await conn.fetch(
            "SELECT table_name FROM information_schema.columns "
            "WHERE table_schema = $1 AND column_name = 'run_id'",
            schema,
        )
        assert {t[0] for t in tables} >= {"runs", "records", "blobs", "snapshots", "heads"}
        for (table,) in tables:
            count = await conn.fetchval(
                f'SELECT count(*) FROM "{schema}"."{table}" WHERE run_id = $1', run_id
            )
            assert count == 0, f"{table} still has {count} rows of {run_id}"
        assert await conn.fetchval(
            f'SELECT count(*) FROM "{schema}".records WHERE run_id = $1', kept
        )
    finally:
        await conn.close()


async def _no_keys(prefix: str, run_id: str, kept: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(REDIS_URL)
    async with client:
        keys = [k.decode() async for k in client.scan_iter(match=f"{prefix}:*", count=1000)]
        assert [k for k in keys if run_id in k] == []
        assert await client.zscore(f"{prefix}:runs", run_id) is None
        assert any(kept in k for k in keys)
        members = await client.zrange(f"{prefix}:runs", 0, -1)
        assert run_id.encode() not in members

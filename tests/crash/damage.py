"""Damage done to a crashed run in each store, as an operator, a disk or a lost file does it.

Every site runs the real command in a folder whose ``playbooks.toml`` points at its
store, and reaches into the store directly (files, SQL, Redis commands) to damage a
run: delete records, flip a byte of one, tear its metadata, lose SQLite's ``-wal``.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.crash.harness import resumable

from resumable.config import load_config
from resumable.durability.runs.session import store_for
from resumable.store.filesystem import HEADER_BYTES, encode_frames, scan_frames

POSTGRES_URL = os.environ.get(
    "RESUMABLE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("RESUMABLE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

KINDS = [
    "file",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]
_NAMES = ["file", "sqlite", "postgres", "redis"]


def across_stores(cases: Sequence[Any], stores: int = 2) -> list[Any]:
    """The parameters of a grid of cases, each case run on ``stores`` of the four, in turn.

    A grid (finished or crashed, under a snapshot or its own record) crossed with all four
    stores repeats, on each store, what differs between cases above the store; each case
    on two stores and each store given a share of the cases keeps what is store-specific
    (how a record goes missing, what the store keeps of a prune) covered at half the cost.
    Each case is a ``pytest.param`` whose values follow the store (``site``, indirect).
    """
    params = []
    for index, case in enumerate(cases):
        for turn in range(stores):
            kind = _NAMES[(index + turn * len(_NAMES) // stores) % len(_NAMES)]
            marks = [*case.marks, *([getattr(pytest.mark, kind)] if kind in _NAMES[2:] else [])]
            params.append(pytest.param(kind, *case.values, id=f"{kind}-{case.id}", marks=marks))
    return params


SCRIPT = """\
import asyncio

import resumable


@resumable.step
def book(n):
    with open("effects.log", "a") as ledger:
        ledger.write(f"effect {n}\\n")


async def effect(n):
    await asyncio.sleep(0)
    book(n)
    return n


total = 0
for n in range(6):
    total += await effect(n)
    print("did", n)
print("total", total)
"""
FULL_STDOUT = "".join(f"did {n}\n" for n in range(6)) + "total 15\n"
LEDGER = [f"effect {n}" for n in range(6)]


class Site:
    """One store: how the command line is pointed at it, and how its runs are damaged."""

    kind = ""
    lease_seconds = 0.0
    """How long a killed owner's lease outlives it (0: an OS lock, gone with the process)."""

    def config(self) -> str:
        return ""

    def prepare(self, work: Path) -> None:
        (work / "s.py").write_text(SCRIPT)
        (work / "playbooks.toml").write_text(self.config())

    async def delete(self, work: Path, run_id: str, seqs: Sequence[int]) -> None:
        raise NotImplementedError

    async def flip(self, work: Path, run_id: str, seq: int) -> None:
        raise NotImplementedError

    async def tear_meta(self, work: Path, run_id: str) -> None:
        raise NotImplementedError

    async def delete_snaps(self, work: Path, run_id: str) -> None:
        """Every snapshot of the run gone (its log left as it is)."""
        raise NotImplementedError

    async def cleanup(self) -> None:
        """Remove what the site left on a shared server."""


class FileSite(Site):
    kind = "file"

    @staticmethod
    def _segments(work: Path, run_id: str) -> list[Path]:
        return sorted((work / ".resumable" / "runs" / run_id / "log").glob("*.seg"))

    async def delete(self, work: Path, run_id: str, seqs: Sequence[int]) -> None:
        for segment in self._segments(work, run_id):
            records = scan_frames(segment.read_bytes()).records
            kept = [r for r in records if r.seq not in seqs]
            segment.write_bytes(b"".join(encode_frames([r]) for r in kept))

    async def flip(self, work: Path, run_id: str, seq: int) -> None:
        for segment in self._segments(work, run_id):
            data = bytearray(segment.read_bytes())
            offset = 0
            for record in scan_frames(bytes(data)).records:
                if record.seq == seq:
                    data[offset + HEADER_BYTES + 12] ^= 0x20
                    segment.write_bytes(bytes(data))
                    return
                offset += HEADER_BYTES + len(record.data)
        raise AssertionError(f"no record {seq}")

    async def tear_meta(self, work: Path, run_id: str) -> None:
        meta = work / ".resumable" / "runs" / run_id / "meta.json"
        meta.write_bytes(meta.read_bytes()[:40])

    async def delete_snaps(self, work: Path, run_id: str) -> None:
        for snap in (work / ".resumable" / "runs" / run_id / "snapshots").glob("*.snap"):
            snap.unlink()


class SQLiteSite(Site):
    kind = "sqlite"

    def config(self) -> str:
        return '[durability]\nstore = "sqlite"\npath = "runs.db"\n'

    @staticmethod
    def _sql(work: Path, statement: str, *args: object) -> None:
        db = sqlite3.connect(work / "runs.db")
        try:
            db.execute(statement, args)
            db.commit()
        finally:
            db.close()

    async def delete(self, work: Path, run_id: str, seqs: Sequence[int]) -> None:
        for seq in seqs:
            self._sql(work, "DELETE FROM records WHERE run_id=? AND seq=?", run_id, seq)

    async def flip(self, work: Path, run_id: str, seq: int) -> None:
        self._sql(
            work,
            "UPDATE records SET data = CAST(substr(data, 1, 40) || x'00' || substr(data, 42) "
            "AS BLOB) "
            "WHERE run_id=? AND seq=?",
            run_id,
            seq,
        )

    async def tear_meta(self, work: Path, run_id: str) -> None:
        self._sql(work, "UPDATE runs SET meta = substr(meta, 1, 20) WHERE run_id=?", run_id)

    async def delete_snaps(self, work: Path, run_id: str) -> None:
        self._sql(work, "DELETE FROM snapshots WHERE run_id=?", run_id)

    @staticmethod
    def lose_wal(work: Path) -> None:
        """What copying or cleaning up only ``runs.db`` does: its last commits are gone."""
        wal = work / "runs.db-wal"
        assert wal.stat().st_size > 0, "the killed writer left no WAL to lose"
        wal.unlink()
        (work / "runs.db-shm").unlink(missing_ok=True)


class PostgresSite(Site):
    kind = "postgres"
    lease_seconds = 0.5

    def __init__(self) -> None:
        self.schema = f"resumable_damage_{secrets.token_hex(5)}"

    def config(self) -> str:
        return (
            f'[durability]\nstore = "postgres"\nurl = "{POSTGRES_URL}?schema={self.schema}"\n'
            f"lease_seconds = {self.lease_seconds}\n"
        )

    async def _sql(self, statement: str, *args: object) -> None:
        import asyncpg

        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            await conn.execute(statement.format(s=f'"{self.schema}"'), *args)
        finally:
            await conn.close()

    async def delete(self, work: Path, run_id: str, seqs: Sequence[int]) -> None:
        await self._sql(
            "DELETE FROM {s}.records WHERE run_id = $1 AND seq = ANY($2)", run_id, list(seqs)
        )

    async def flip(self, work: Path, run_id: str, seq: int) -> None:
        await self._sql(
            "UPDATE {s}.records SET data = overlay(data PLACING '\\x00'::bytea FROM 41) "
            "WHERE run_id = $1 AND seq = $2",
            run_id,
            seq,
        )

    async def tear_meta(self, work: Path, run_id: str) -> None:
        await self._sql("""UPDATE {s}.runs SET meta = '"torn"'::jsonb WHERE run_id = $1""", run_id)

    async def delete_snaps(self, work: Path, run_id: str) -> None:
        await self._sql("DELETE FROM {s}.snapshots WHERE run_id = $1", run_id)

    async def cleanup(self) -> None:
        await self._sql("DROP SCHEMA IF EXISTS {s} CASCADE")


class RedisSite(Site):
    kind = "redis"
    lease_seconds = 0.5

    def __init__(self) -> None:
        self.prefix = f"resumable-damage-{secrets.token_hex(5)}"

    def config(self) -> str:
        return (
            f'[durability]\nstore = "redis"\nurl = "{REDIS_URL}?prefix={self.prefix}"\n'
            f"lease_seconds = {self.lease_seconds}\n"
        )

    def _key(self, run_id: str, part: str = "") -> str:
        return f"{self.prefix}:run:{{{run_id}}}{part}"

    async def _client(self):  # type: ignore[no-untyped-def]
        import redis.asyncio as aioredis

        return aioredis.Redis.from_url(REDIS_URL)

    async def delete(self, work: Path, run_id: str, seqs: Sequence[int]) -> None:
        client = await self._client()
        async with client:
            for seq in seqs:
                await client.zremrangebyscore(self._key(run_id, ":log"), seq, seq)

    async def delete_log(self, run_id: str) -> None:
        client = await self._client()
        async with client:
            await client.delete(self._key(run_id, ":log"))

    async def flip(self, work: Path, run_id: str, seq: int) -> None:
        client = await self._client()
        async with client:
            key = self._key(run_id, ":log")
            (member,) = await client.zrangebyscore(key, seq, seq)
            damaged = bytearray(member)
            damaged[40] ^= 0x20
            await client.zrem(key, member)
            await client.zadd(key, {bytes(damaged): seq})

    async def tear_meta(self, work: Path, run_id: str) -> None:
        client = await self._client()
        async with client:
            await client.hset(self._key(run_id), "meta", '{"prog')

    async def delete_snaps(self, work: Path, run_id: str) -> None:
        client = await self._client()
        async with client:
            await client.delete(self._key(run_id, ":snaps"))

    async def cleanup(self) -> None:
        client = await self._client()
        async with client:
            keys = [k async for k in client.scan_iter(match=f"{self.prefix}:*", count=1000)]
            if keys:
                await client.delete(*keys)


SITES = {"file": FileSite, "sqlite": SQLiteSite, "postgres": PostgresSite, "redis": RedisSite}


# -- a run of the script, killed or not, and what it left (real processes) -----------------
SNAPSHOTS = {"RESUMABLE_DURABILITY_SNAPSHOT_EVERY": "3"}
PRUNED = {**SNAPSHOTS, "RESUMABLE_DURABILITY_KEEP": "1"}


def booked(work: Path) -> list[str]:
    """The effects the script booked in ``work``, in order."""
    path = work / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


def run_script(site: Site, work: Path, env: dict[str, str], crash_after: int | None) -> str:
    """A run of the script on ``site``'s store, killed after record ``crash_after`` (None: to
    its end), then left a lease's time so that nobody owns it; its id."""
    run_id = f"h{secrets.token_hex(3)}"
    work.mkdir(exist_ok=True)
    site.prepare(work)
    if crash_after is not None:
        env = {**env, "RESUMABLE_CRASH_AFTER": str(crash_after)}
    done = resumable(["exec", "s.py", "--run-id", run_id], work, env=env)
    assert done.code == (0 if crash_after is None else -9), done.stderr
    time.sleep(site.lease_seconds)
    return run_id


def printed(work: Path) -> str:
    """What the script printed before it was killed: a line per effect it booked."""
    return "".join(f"did {n}\n" for n in range(len(booked(work))))


def resumes_to_the_end(work: Path, run_id: str, env: dict[str, str], already: str) -> None:
    """``resume`` prints the rest of the uninterrupted output (``already``: what the run
    printed before) and books each effect once."""
    resumed = resumable(["resume", run_id], work, env=env)
    assert resumed.code == 0, resumed.stderr
    assert already + resumed.stdout == FULL_STDOUT
    assert booked(work) == LEDGER


async def log_seqs(work: Path, run_id: str) -> list[int]:
    """The seqs of the run's log, as its store reads them."""
    config = load_config(cwd=work, env={})
    async with store_for(config.durability, config) as store:
        return [r.seq for r in (await store.read(run_id)).records]

#!/usr/bin/env python
"""PostgreSQL append statements side by side: schema 3's, schema 4's, and a bare INSERT.

    python scripts/bench_pg_heads.py [--url postgresql://...] [--rounds 10]

One store (schema 4), one connection with the store writer's settings, three runs;
rounds of 200 one-record statements alternate their order. ``schema 3`` is that
version's append (share-lock the run's row at the lease's epoch, read the log's last
seq, update the head, insert); ``schema 4`` is the append fenced at the head (one
conditional update of the head, then the insert); ``INSERT`` is a bare one-row INSERT
into a table like the records' (same columns and primary key). Medians in microseconds
of each statement's round trip, under ``sync = "flush"`` and ``"fsync"``, and their
ratio to the INSERT. The schema is a throwaway ``bench_heads_<random>``, dropped at
the end.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import time
from typing import Any

import asyncpg

from resumable.store.base import RunMeta
from resumable.store.postgres import PostgresStore

RECORD = b"x" * 300
SCHEMA_3 = """
WITH fenced AS (
    SELECT run_id, seq_floor FROM {s}.runs WHERE run_id = $1 AND epoch = $2 FOR SHARE
), accepted AS (
    SELECT run_id FROM fenced
    WHERE greatest(seq_floor, (SELECT max(seq) FROM {s}.records WHERE run_id = $1)) < $3
), head AS (
    UPDATE {s}.heads AS h SET last_seq = $7 FROM accepted AS a WHERE h.run_id = a.run_id
)
INSERT INTO {s}.records (run_id, seq, epoch, data)
SELECT a.run_id, n.seq, n.epoch, n.data
FROM accepted AS a, unnest($4::bigint[], $5::bigint[], $6::bytea[]) AS n(seq, epoch, data)
RETURNING 1
"""
CASES = ("schema-3", "schema-4", "INSERT")  # also the runs' ids


async def one(conn: Any, case: str, sql: dict[str, str], epoch: int, seq: int) -> float:
    started = time.perf_counter()
    if case == "schema-3":
        written = await conn.fetch(sql[case], case, epoch, seq, [seq], [epoch], [RECORD], seq)
    elif case == "schema-4":
        written = await conn.execute(sql[case], case, epoch, seq, epoch, RECORD)
    else:
        written = await conn.execute(sql[case], case, seq, epoch, RECORD)
    elapsed = time.perf_counter() - started
    if not written or written == "INSERT 0 0":
        raise AssertionError(f"{case}: nothing written ({written!r})")
    return elapsed


async def measure(url: str, sync: str, rounds: int) -> dict[str, float]:
    schema = f"bench_heads_{secrets.token_hex(4)}"
    s = f'"{schema}"'
    times: dict[str, list[float]] = {case: [] for case in CASES}
    try:
        async with PostgresStore(url, schema=schema, sync=sync) as store:
            sql = {
                "schema-3": SCHEMA_3.format(s=s),
                "schema-4": store._sql["append_record"],
                "INSERT": f"INSERT INTO {s}.plain (run_id, seq, epoch, data) VALUES ($1, $2, $3, $4)",
            }
            conn = await store._writer_connection()
            await conn.execute(f"CREATE TABLE {s}.plain (LIKE {s}.records INCLUDING ALL)")
            epochs = {}
            for case in CASES:
                await store.create_run(RunMeta(case, "bench"))
                epochs[case] = (await store.acquire(case, "bench")).epoch
            seq = 0
            for n in range(rounds):
                for case in CASES if n % 2 == 0 else CASES[::-1]:
                    for k in range(1, 201):
                        times[case].append(await one(conn, case, sql, epochs[case], seq + k))
                seq += 200
    finally:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
        finally:
            await conn.close()
    return {case: statistics.median(found) * 1e6 for case, found in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    print("sync    schema 3 us  schema 4 us  INSERT us  schema 3 x INSERT  schema 4 x INSERT")
    for sync in ("flush", "fsync"):
        found = asyncio.run(measure(args.url, sync, args.rounds))
        old, new, floor = (found[case] for case in CASES)
        print(
            f"{sync:<6} {old:>12.1f} {new:>12.1f} {floor:>10.1f} {old / floor:>18.2f}"
            f" {new / floor:>18.2f}"
        )


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""What PostgreSQL schema 3's high-water mark costs an append, against schema 2's statement.

    python scripts/bench_pg_heads.py [--url postgresql://...] [--rounds 10]

One store, two runs; rounds alternate which goes first. Each append of run ``old`` uses
the schema-2 append statement (no ``heads`` update), each append of run ``new`` the
schema-3 one. Both under ``sync = "flush"`` and ``"fsync"``; medians in microseconds
and their ratio. The schema is a throwaway ``bench_heads_<random>``, dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import time

import asyncpg

from resumable.store.base import RunMeta, StoredRecord
from resumable.store.postgres import PostgresStore
from resumable.store.postgres_sql import APPEND_ONE

HEAD_UPDATE = """), head AS (
    UPDATE {s}.heads AS h SET last_seq = $7 FROM accepted AS a WHERE h.run_id = a.run_id
)"""
SCHEMA_2 = APPEND_ONE.replace(HEAD_UPDATE, ")").replace("RETURNING 1", "RETURNING 1, $7::bigint")


async def measure(url: str, sync: str, rounds: int) -> tuple[float, float]:
    schema = f"bench_heads_{secrets.token_hex(4)}"
    times: dict[str, list[float]] = {"old": [], "new": []}
    try:
        async with PostgresStore(url, schema=schema, sync=sync) as store:
            statements = {"old": SCHEMA_2.format(s=f'"{schema}"'), "new": store._sql["append_one"]}
            for run_id in times:
                await store.create_run(RunMeta(run_id, "bench"))
            leases = {run_id: await store.acquire(run_id, "bench") for run_id in times}
            seqs = dict.fromkeys(times, 0)
            for n in range(rounds):
                for run_id in ("old", "new") if n % 2 == 0 else ("new", "old"):
                    store._sql["append_one"] = statements[run_id]
                    lease = leases[run_id]
                    for _ in range(100):
                        seqs[run_id] += 1
                        record = StoredRecord(seqs[run_id], lease.epoch, b"x" * 300)
                        started = time.perf_counter()
                        await store.append(run_id, [record], lease)
                        times[run_id].append(time.perf_counter() - started)
            assert (await store.read("new")).high_water == seqs["new"]
    finally:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()
    return statistics.median(times["old"]) * 1e6, statistics.median(times["new"]) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    print("sync   schema-2 append us  schema-3 append us  ratio")
    for sync in ("flush", "fsync"):
        old, new = asyncio.run(measure(args.url, sync, args.rounds))
        print(f"{sync:<6} {old:>18.0f}  {new:>18.0f}  {new / old:.3f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""PostgreSQL: one append of the store against one raw INSERT round trip, and 64 runs at once.

    python scripts/bench.py pg [--url postgresql://...] [--sync flush|fsync] [--quick]

In one throwaway schema (``bench_pg_<random>``, dropped at the end), phases alternate:
a raw single-row INSERT on a plain connection (the round-trip floor, with the same
``synchronous_commit``), then one run's appends through ``PostgresStore.append`` (one
300-byte record each, as a durable await writes). The ratio of their medians is the
store's per-append cost in round trips. Then 64 runs append at once and their total
appends/s is compared with the single run's: group commit lets concurrent appends
share a round trip.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import time
from typing import Any

import asyncpg

from benchmarks.report import Report
from resumable.store.base import Lease, RunMeta, StoredRecord
from resumable.store.postgres import SYNC_SETTINGS, PostgresStore

RECORD = b"x" * 300
RUNS = 64


def pg_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--sync", choices=("flush", "fsync"), default="flush")
    parser.add_argument("--rounds", type=int, default=10, help="alternating phases")
    parser.add_argument("--appends", type=int, default=200, help="appends per phase")
    parser.add_argument("--quick", action="store_true", help="2 rounds of 20 (a smoke run)")
    parser.add_argument("--dir", help="unused: PostgreSQL keeps nothing on disk here")


class Log:
    """One run's lease and next seq."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.seq = 0

    async def append(self, store: PostgresStore) -> float:
        self.seq += 1
        began = time.perf_counter()
        await store.append(
            self.lease.run_id, [StoredRecord(self.seq, self.lease.epoch, RECORD)], self.lease
        )
        return time.perf_counter() - began


async def raw_inserts(conn: Any, table: str, count: int, start: int) -> list[float]:
    times = []
    for n in range(start, start + count):
        began = time.perf_counter()
        await conn.execute(f"INSERT INTO {table} VALUES ($1, $2, $3)", "raw", n, RECORD)
        times.append(time.perf_counter() - began)
    return times


async def concurrent(store: PostgresStore, logs: list[Log], count: int) -> float:
    """Appends per second of ``logs`` appending ``count`` records each, all at once."""
    began = time.perf_counter()

    async def one(log: Log) -> None:
        for _ in range(count):
            await log.append(store)

    await asyncio.gather(*(one(log) for log in logs))
    return len(logs) * count / (time.perf_counter() - began)


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    schema = f"bench_pg_{secrets.token_hex(4)}"
    rounds, appends = (2, 20) if args.quick else (args.rounds, args.appends)
    raw: list[float] = []
    single: list[float] = []
    solo_rates: list[float] = []
    many_rates: list[float] = []
    conn = await asyncpg.connect(
        args.url, server_settings={"synchronous_commit": SYNC_SETTINGS[args.sync]}
    )
    try:
        async with PostgresStore(args.url, schema=schema, sync=args.sync) as store:
            table = f'"{schema}".raw_insert'
            await conn.execute(f"CREATE TABLE {table} (run_id text, seq bigint, data bytea)")
            logs = []
            for n in range(RUNS + 1):
                await store.create_run(RunMeta(f"run-{n}", "bench"))
                logs.append(Log(await store.acquire(f"run-{n}", "bench")))
            for n in range(rounds):
                raw += await raw_inserts(conn, table, appends, n * appends)
                began = time.perf_counter()
                single += [await logs[0].append(store) for _ in range(appends)]
                solo_rates.append(appends / (time.perf_counter() - began))
                many_rates.append(await concurrent(store, logs[1:], max(appends // 4, 5)))
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()
    return {
        "raw": raw,
        "single": single,
        "solo": statistics.median(solo_rates),
        "many": statistics.median(many_rates),
    }


def p99(times: list[float]) -> float:
    return sorted(times)[min(len(times) - 1, int(len(times) * 0.99))]


def bench_pg(args: argparse.Namespace) -> Report:
    found = asyncio.run(measure(args))
    floor = statistics.median(found["raw"])
    rows = [
        ("raw INSERT round trip", floor * 1e6, p99(found["raw"]) * 1e6, 1.0, 1 / floor),
        (
            "store append, 1 run",
            statistics.median(found["single"]) * 1e6,
            p99(found["single"]) * 1e6,
            statistics.median(found["single"]) / floor,
            found["solo"],
        ),
        (f"store append, {RUNS} runs at once", None, None, None, found["many"]),
    ]
    return Report(
        f"PostgreSQL append against a raw INSERT round trip (sync={args.sync})",
        ("case", "median us", "p99 us", "x insert", "appends/s"),
        [tuple("-" if v is None else v for v in row) for row in rows],
        summary={
            "x insert (1 run)": statistics.median(found["single"]) / floor,
            f"throughput {RUNS} runs / 1 run": found["many"] / found["solo"],
        },
    )

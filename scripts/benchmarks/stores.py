"""Every checkpoint store side by side: what one durable await costs, and awaits per second.

    python scripts/bench.py stores                              # file, sqlite, postgres, redis
    python scripts/bench.py stores --quick --stores file,sqlite  # a smoke test

Per await: as in the checkpoint benchmark, a run awaits ``tick()`` N times inside one
statement and the gaps between successive calls are the per-await cost; every round
feeds each store (and sync mode) in turn. Baseline, timed in the same rounds: one
autocommit ``INSERT`` of a record-sized ``bytea`` into a small table on the same
PostgreSQL server (asyncpg, one round trip), with ``synchronous_commit`` on (what
``sync = "fsync"`` asks for) and off (``"flush"``).

Throughput: 1, 8 and 64 runs at once on one store object, each run a task with its own
RunSession, executor and FrameRecorder, whose awaited call yields to the event loop once
(as any I/O does); durable awaits per second = all awaits / wall time, set-up excluded.

PostgreSQL goes in a throwaway schema ``bench_<random>`` and Redis under a random key
prefix; both are deleted at the end, as is the folder of the embedded stores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import statistics
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from benchmarks.harness import (
    SYNCS,
    Floor,
    Harness,
    Progress,
    Stats,
    durable_harness,
    loop_program,
    ratio,
    scratch_folder,
    tick,
)
from benchmarks.report import Report, SectionedReport
from resumable.config import Config, DurabilitySettings
from resumable.durability.runs.session import store_for
from resumable.errors import ResumableError
from resumable.store.base import CheckpointStore

KINDS = ("file", "sqlite", "postgres", "redis")
SYNCHRONOUS_COMMIT = {"fsync": "on", "flush": "off"}
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
REDIS_URL = "redis://127.0.0.1:6379/0"


async def step(value: int) -> int:
    """The awaited call of the throughput runs: it yields once, as a real tool's I/O would."""
    await asyncio.sleep(0)
    return value + 1


def with_query(url: str, key: str, value: str) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query), (key, value)]
    return urlunsplit(parts._replace(query=urlencode(query)))


@dataclass(slots=True)
class Target:
    """One store opened in one sync mode, and what was measured on it."""

    kind: str
    sync: str
    config: Config
    store: CheckpointStore | None = None
    harness: Harness | None = None
    samples: list[float] = field(default_factory=list)
    error: str = ""

    @property
    def name(self) -> str:
        return f"{self.kind} {self.sync}"


@dataclass(slots=True)
class Scratch:
    """Where this run's data goes on each server, so it can all be deleted."""

    root: Path
    schema: str
    prefix: str
    pg_url: str
    redis_url: str

    def config(self, kind: str, sync: str) -> Config:
        if kind in ("file", "sqlite"):
            path = str(self.root / (f"file-{sync}" if kind == "file" else f"{sync}.db"))
            settings = DurabilitySettings(store=kind, path=path, sync=sync)  # type: ignore[arg-type]
        elif kind == "postgres":
            url = with_query(self.pg_url, "schema", self.schema)
            settings = DurabilitySettings(store="postgres", url=url, sync=sync)  # type: ignore[arg-type]
        else:
            url = with_query(self.redis_url, "prefix", self.prefix)
            settings = DurabilitySettings(store="redis", url=url, sync=sync)  # type: ignore[arg-type]
        return Config(durability=settings)

    async def clean(self, kinds: list[str]) -> None:
        """Drop the schema and delete the keys; say so on stderr if that fails."""
        if "postgres" in kinds:
            import asyncpg

            try:
                conn = await asyncpg.connect(self.pg_url)
                try:
                    await conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
                finally:
                    await conn.close()
            except (OSError, asyncpg.PostgresError) as exc:
                print(f"could not drop schema {self.schema} ({exc}); drop it", file=sys.stderr)
        if "redis" in kinds:
            import redis.asyncio as aioredis
            from redis.exceptions import RedisError

            client = aioredis.Redis.from_url(self.redis_url)
            try:
                keys = [key async for key in client.scan_iter(match=f"{self.prefix}:*")]
                if keys:
                    await client.delete(*keys)
            except (OSError, RedisError) as exc:
                print(f"could not delete keys {self.prefix}:* ({exc})", file=sys.stderr)
            finally:
                await client.aclose()


@contextlib.asynccontextmanager
async def opened(targets: list[Target], progress: Progress) -> AsyncIterator[list[Target]]:
    """Open every target's store; one that cannot be reached is reported, not fatal."""
    async with contextlib.AsyncExitStack() as stack:
        for target in targets:
            progress(f"opening {target.name}")
            settings = target.config.durability
            try:
                target.store = await stack.enter_async_context(store_for(settings, target.config))
            except ResumableError as exc:
                target.error = str(exc).splitlines()[0]
        try:
            yield [t for t in targets if t.store is not None]
        finally:
            for target in targets:
                if target.harness is not None:
                    await target.harness.close()


# -- the INSERT baseline --------------------------------------------------------------


class InsertFloor(Floor):
    """One autocommit INSERT of a record-sized ``bytea`` into a small table: one round trip.

    Run by :func:`tick` inside every await of the PostgreSQL store's rounds, so the
    baseline and the store see the same server and machine at the same moments.
    """

    def __init__(self, conn: Any, table: str, data: bytes) -> None:
        super().__init__()
        self.conn = conn
        self.sql = f"INSERT INTO {table} (data) VALUES ($1)"
        self.data = data

    async def run(self) -> None:
        await self.conn.execute(self.sql, self.data)


async def insert_floors(
    scratch: Scratch, syncs: list[str], stack: contextlib.AsyncExitStack
) -> dict[str, InsertFloor]:
    """An INSERT floor per sync mode: ``synchronous_commit`` on for fsync, off for flush."""
    import asyncpg

    floors: dict[str, InsertFloor] = {}
    table = f'"{scratch.schema}".insert_baseline'
    for sync in syncs:
        conn = await asyncpg.connect(scratch.pg_url)
        stack.push_async_callback(conn.close)
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {table} (id bigserial PRIMARY KEY, data bytea NOT NULL)"
        )
        await conn.execute(f"SET synchronous_commit = {SYNCHRONOUS_COMMIT[sync]}")
        size = await conn.fetchval(
            f'SELECT avg(octet_length(data)) FROM "{scratch.schema}".records'
        )
        floors[sync] = InsertFloor(conn, table, os.urandom(round(size or 170)))
    return floors


# -- per await -------------------------------------------------------------------------------


async def per_await(
    targets: list[Target], scratch: Scratch, args: argparse.Namespace, progress: Progress
) -> dict[str, InsertFloor]:
    """Pooled per-await gaps of every target; the INSERT floors if PostgreSQL is among them."""
    for target in targets:
        assert target.store is not None
        progress(f"warming up {target.name}")
        target.harness = await durable_harness(
            target.store, target.config, f"{target.kind}-{target.sync}", {"tick": tick}
        )
        await target.harness.feed("counter = 0\n")
        await target.harness.feed(loop_program(args.awaits))
    async with contextlib.AsyncExitStack() as stack:
        floors: dict[str, InsertFloor] = {}
        if any(target.kind == "postgres" for target in targets):
            syncs = sorted({target.sync for target in targets})
            floors = await insert_floors(scratch, syncs, stack)
        for number in range(1, args.rounds + 1):
            for target in targets:
                progress(f"round {number}/{args.rounds}: {target.name}")
                assert target.harness is not None
                floor = floors.get(target.sync) if target.kind == "postgres" else None
                target.samples += await target.harness.feed(loop_program(args.awaits + 1), floor)
    for target in targets:
        assert target.harness is not None
        await target.harness.close()
        target.harness = None
    return floors


# -- throughput ---------------------------------------------------------------------------------


async def throughput(
    target: Target, runs: int, total: int, progress: Progress, label: str
) -> tuple[int, float]:
    """Durable awaits per second of ``runs`` concurrent runs on one store (set-up excluded)."""
    assert target.store is not None
    each = max(50, total // runs)  # fewer, and the per-run fixed costs would dominate
    progress(f"{label}: {target.name}, {runs} runs: setting up")
    harnesses: list[Harness] = []
    try:
        for number in range(runs):
            harness = await durable_harness(
                target.store, target.config, f"t{runs}-{number}", {"step": step}
            )
            harnesses.append(harness)
            await harness.feed("counter = 0\n")
        text = f"for i in range({each}):\n    counter = await step(counter)\n"
        progress(f"{label}: {target.name}, {runs} runs x {each} awaits")
        began = time.perf_counter()
        await asyncio.gather(*(harness.feed(text) for harness in harnesses))
        seconds = time.perf_counter() - began
    finally:
        for harness in harnesses:
            await harness.close()
    return runs * each, seconds


# -- the subcommand -----------------------------------------------------------------------------


def stores_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="small N: a smoke test")
    parser.add_argument("--stores", default=",".join(KINDS), help="which stores (all four)")
    parser.add_argument("--sync", default=",".join(SYNCS), help="sync modes (fsync,flush)")
    parser.add_argument("--awaits", type=int, help="awaits per round and store (200)")
    parser.add_argument("--rounds", type=int, help="rounds of the per-await phase (5)")
    parser.add_argument("--runs", help="concurrent runs of the throughput phase (1,8,64)")
    parser.add_argument(
        "--throughput-awaits", type=int, help="awaits of a throughput phase, all runs (640)"
    )
    parser.add_argument(
        "--throughput-rounds", type=int, help="rounds of the throughput phase (3, median)"
    )
    parser.add_argument("--pg-url", default=PG_URL, help=f"PostgreSQL ({PG_URL})")
    parser.add_argument("--redis-url", default=REDIS_URL, help=f"Redis ({REDIS_URL})")
    parser.add_argument("--dir", type=Path, help="where the embedded stores go (a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the embedded stores")


def _defaults(args: argparse.Namespace) -> None:
    for name, full, small in (
        ("awaits", 200, 20),
        ("rounds", 5, 1),
        ("runs", "1,8,64", "1,8"),
        ("throughput_awaits", 640, 50),
        ("throughput_rounds", 3, 1),
    ):
        if getattr(args, name) is None:
            setattr(args, name, small if args.quick else full)


def _split(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [part for part in chosen if part not in allowed]
    if unknown or not chosen:
        raise SystemExit(f"--{what}: choose among {', '.join(allowed)} (got {text!r})")
    return chosen


async def measure(
    args: argparse.Namespace, scratch: Scratch, progress: Progress
) -> tuple[list[Target], dict[str, InsertFloor], list[tuple[Any, ...]]]:
    kinds = _split(args.stores, KINDS, "stores")
    syncs = _split(args.sync, SYNCS, "sync")
    concurrency = [int(part) for part in str(args.runs).split(",") if part]
    targets = [Target(kind, sync, scratch.config(kind, sync)) for kind in kinds for sync in syncs]
    rows: list[tuple[Any, ...]] = []
    try:
        async with opened(targets, progress) as usable:
            floors = await per_await(usable, scratch, args, progress)
            rates: dict[tuple[str, int], list[float]] = {}
            awaits: dict[tuple[str, int], int] = {}
            for number in range(1, args.throughput_rounds + 1):
                for target in usable:
                    for runs in concurrency:
                        label = f"throughput round {number}/{args.throughput_rounds}"
                        count, seconds = await throughput(
                            target, runs, args.throughput_awaits, progress, label
                        )
                        awaits[target.name, runs] = count
                        rates.setdefault((target.name, runs), []).append(count / seconds)
            for target in usable:
                single = statistics.median(rates[target.name, concurrency[0]])
                for runs in concurrency:
                    found = rates[target.name, runs]
                    rate = statistics.median(found)
                    rows.append(
                        (
                            target.name,
                            runs,
                            awaits[target.name, runs],
                            rate,
                            min(found),
                            max(found),
                            ratio(rate, single),
                        )
                    )
    finally:
        await scratch.clean(kinds)
    return targets, floors, rows


def bench_stores(args: argparse.Namespace) -> Report:
    """Per-await cost of each store against a PostgreSQL INSERT; throughput of many runs."""
    _defaults(args)
    progress = Progress("stores")
    token = secrets.token_hex(4)
    with scratch_folder(args.dir, args.keep) as root:
        scratch = Scratch(root, f"bench_{token}", f"bench_{token}", args.pg_url, args.redis_url)
        targets, floors, throughput_rows = asyncio.run(measure(args, scratch, progress))
    progress.done()
    inserts = {sync: Stats.of(floor.samples) for sync, floor in floors.items()}
    rows: list[tuple[Any, ...]] = []
    pg_x_insert: dict[str, float] = {}
    for target in targets:
        if target.error:
            rows.append((target.name, "-", "-", "-", "-", 0, target.error))
            continue
        s = Stats.of(target.samples)
        insert = inserts.get(target.sync)
        vs = ratio(s.median, insert.median) if insert is not None else "-"
        if target.kind == "postgres" and insert is not None:
            pg_x_insert[target.sync] = ratio(s.median, insert.median)
        rows.append((target.name, s.median, s.p99, s.mean, vs, s.count, ""))
    for sync, s in inserts.items():
        name = f"INSERT autocommit, synchronous_commit={SYNCHRONOUS_COMMIT[sync]}"
        rows.append((name, s.median, s.p99, s.mean, 1.0, s.count, ""))
    most = max(row[1] for row in throughput_rows) if throughput_rows else 0
    scaling = {row[0]: row[-1] for row in throughput_rows if row[1] == most}
    aims: dict[str, Any] = {
        "postgres_x_insert": pg_x_insert,
        "postgres_within_1.5x_insert": (
            all(x <= 1.5 for x in pg_x_insert.values()) if pg_x_insert else None
        ),
        "scaling": {
            "runs": most,
            "x_one_run": scaling,
            "at_least_10x": {name: x >= 10 for name, x in scaling.items()},
        },
    }
    return SectionedReport(
        title=f"Per await by store, microseconds ({args.rounds} rounds of {args.awaits} awaits "
        "in one statement; x INSERT: against the autocommit INSERT of the same sync)",
        columns=("store", "median us", "p99 us", "mean us", "x INSERT", "awaits", "note"),
        rows=rows,
        summary={"python": sys.version.split()[0], "cpus": os.cpu_count(), "aims": aims},
        sections={
            "throughput": Report(
                title="Throughput: concurrent runs on one store object, durable awaits per second "
                f"(median of {args.throughput_rounds} rounds; each awaited call yields once)",
                columns=("store", "runs", "awaits", "awaits/s", "min", "max", "x one run"),
                rows=throughput_rows,
            )
        },
    )

#!/usr/bin/env python
"""The worker fleet: submit-to-claim latency woken by NOTIFY against polling, and runs/s.

    python scripts/bench.py fleet [--url postgresql://...] [--runs 40] [--quick]

In a throwaway schema (``bench_fleet_<random>``, dropped at the end) two workers run in
this process on one store: one woken by the store's notifications, one that only polls
(every ``--poll`` seconds, the CLI's default 0.25). Runs of a tiny script are queued
one at a time while the worker is idle; the latency is from the start of queueing
(which writes the run and its first record) to the worker's "claimed" line. Then ``--runs`` runs are queued at once for
the notified worker (concurrency 8) and its runs/s is the count over the time until
all completed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import asyncpg

from benchmarks.report import Report
from resumable.config import load_config
from resumable.fleet.worker import Worker, queue_run
from resumable.store.postgres import PostgresStore

SCRIPT = "import asyncio\nawait asyncio.sleep(0)\nprint('done')\n"


def fleet_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--runs", type=int, default=40, help="runs per measurement")
    parser.add_argument("--poll", type=float, default=0.25, help="the polling worker's interval")
    parser.add_argument("--quick", action="store_true", help="5 runs each (a smoke run)")
    parser.add_argument("--dir", help="unused: the fleet keeps nothing on disk here")


class PollingStore(PostgresStore):
    """The store with its notifications unheard: a worker on it can only poll."""

    async def watch_runs(
        self, wake: Callable[[str | None], None], *, retry_seconds: float = 1.0
    ) -> None:
        await asyncio.Event().wait()


class Fleet:
    """One in-process worker on a store, and when it claimed each run."""

    def __init__(self, store: PostgresStore, work: Path, poll: float, concurrency: int) -> None:
        self.env = {
            "RESUMABLE_DURABILITY_STORE": "postgres",
            "RESUMABLE_DURABILITY_URL": store.dsn + f"?schema={store.schema}",
            "RESUMABLE_DURABILITY_SYNC": "flush",
        }
        self.config = load_config(None, cwd=work, env=self.env)
        self.store = store
        self.claimed: dict[str, float] = {}
        self.completed: set[str] = set()
        self.worker = Worker(
            store,
            self.config,
            env=self.env,
            concurrency=concurrency,
            poll_seconds=poll,
            owner=f"bench-{secrets.token_hex(2)}",
            log=self._line,
            # In process, not started again with the store's hash seed as `resumable worker`
            # is: drive the runs here rather than in a child process each.
            hand_off=False,
        )

    def _line(self, text: str) -> None:
        words = text.split()
        if len(words) > 4 and words[3] == "run":
            if words[2] == "claimed":
                self.claimed[words[4].rstrip(":")] = time.perf_counter()
            elif words[2] == "completed":
                self.completed.add(words[4].rstrip(":"))

    async def until(self, done: Callable[[], bool]) -> None:
        while not done():
            await asyncio.sleep(0.001)


async def latencies(fleet: Fleet, script: Path, runs: int) -> list[float]:
    """Seconds from queueing each run (the worker idle) to its claim."""
    found = []
    for _ in range(runs):
        await asyncio.sleep(0.05)  # the worker is idle again, waiting
        queued = time.perf_counter()
        run_id = await queue_run(fleet.store, script, fleet.config, env=fleet.env)
        await fleet.until(lambda run_id=run_id: run_id in fleet.completed)
        found.append(fleet.claimed[run_id] - queued)
    return found


async def throughput(fleet: Fleet, script: Path, runs: int) -> float:
    began = time.perf_counter()
    ids = [await queue_run(fleet.store, script, fleet.config, env=fleet.env) for _ in range(runs)]
    await fleet.until(lambda: all(run_id in fleet.completed for run_id in ids))
    return runs / (time.perf_counter() - began)


async def measure(args: argparse.Namespace) -> dict[str, list[float] | float]:
    runs = 5 if args.quick else args.runs
    found: dict[str, list[float] | float] = {}
    with tempfile.TemporaryDirectory() as work:
        script = Path(work) / "tiny.py"
        script.write_text(SCRIPT, encoding="utf-8")
        for name, kind, concurrency in (
            ("notify", PostgresStore, 1),
            ("poll", PollingStore, 1),
            ("runs/s", PostgresStore, 8),
        ):
            schema = f"bench_fleet_{secrets.token_hex(4)}"
            try:
                async with kind(args.url, schema=schema, sync="flush") as store:
                    fleet = Fleet(store, Path(work), args.poll, concurrency)
                    serving = asyncio.create_task(fleet.worker.run())
                    if name == "runs/s":
                        found[name] = await throughput(fleet, script, runs)
                    else:
                        found[name] = await latencies(fleet, script, runs)
                    fleet.worker.request_stop()
                    await serving
            finally:
                conn = await asyncpg.connect(args.url)
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                await conn.close()
    return found


def bench_fleet(args: argparse.Namespace) -> Report:
    with contextlib.redirect_stdout(io.StringIO()):  # what the runs print
        found = asyncio.run(measure(args))
    rows = []
    for name in ("notify", "poll"):
        times = sorted(found[name])  # type: ignore[arg-type]
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        rows.append((f"submit to claim, {name}", statistics.median(times) * 1e3, p99 * 1e3))
    return Report(
        f"Fleet: submit-to-claim with NOTIFY against polling every {args.poll:g}s",
        ("case", "p50 ms", "p99 ms"),
        rows,
        summary={"runs/s (1 worker, concurrency 8)": found["runs/s"]},
    )

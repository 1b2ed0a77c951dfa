"""`bench.py group-commit`: concurrent awaits in one process sharing fsyncs, sync="fsync".

    python scripts/bench.py group-commit            # a table (a minute or two)
    python scripts/bench.py group-commit --quick    # small N: a smoke test, not figures

Three shapes on a FileStore and a SQLite store: one run awaiting in a loop (the
baseline), ``--runs`` runs of this process doing the same at once, and one run whose
statement gathers ``--tasks`` tasks that each await in a loop. Every await is journaled
and durable before its task goes on. Reported: awaits per second over all runs and
tasks, the ratio to the baseline's, and the commits per await - ``os.fsync`` calls for
the FileStore (a run's records go to its own segment file), write transactions for
SQLite (each one fsyncs the WAL once). Below 1 commit per await, awaits that completed
together shared one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness import Progress, durable_harness, ratio, scratch_folder
from benchmarks.report import Report
from benchmarks.stmt_shape import counting_fsyncs
from resumable.config import Config, DurabilitySettings
from resumable.durability.runs.session import store_for
from resumable.exec.executor import StreamingPythonExecutor
from resumable.store.base import CheckpointStore

LOOP = "for i in range({awaits}):\n    counter = await pause(0, i)\n"
GATHER = (
    "async def worker(k):\n"
    "    for i in range({awaits}):\n"
    "        await pause(0, i)\n"
    "\n"
    "await gather(*(worker(k) for k in range({tasks})))\n"
)


def group_commit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="small N: a smoke test")
    parser.add_argument("--awaits", type=int, default=200, help="awaits per run or task")
    parser.add_argument("--runs", type=int, default=8, help="concurrent runs")
    parser.add_argument("--tasks", type=int, default=8, help="concurrent tasks of one run")
    parser.add_argument("--dir", type=Path, help="where the stores go (a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the stores afterwards")


def store_config(folder: Path, store: str) -> Config:
    path = folder / ("runs.db" if store == "sqlite" else "file")
    settings = DurabilitySettings(  # type: ignore[arg-type]
        store=store, path=str(path), sync="fsync", snapshot_every=10**9
    )
    return Config(durability=settings)


@contextlib.contextmanager
def counting_commits(store: CheckpointStore) -> Iterator[list[int]]:
    """Commits while the block runs: fsyncs (FileStore) or write transactions (SQLite)."""
    batch = getattr(store, "_append_batch", None)
    if batch is None:
        with counting_fsyncs() as count:
            yield count
        return
    count = [0]

    def counted(items: Any) -> Any:
        count[0] += 1
        return batch(items)

    store._append_batch = counted  # type: ignore[attr-defined]
    try:
        yield count
    finally:
        del store._append_batch  # type: ignore[attr-defined]


async def feed(executor: StreamingPythonExecutor, text: str) -> None:
    executor.start_response(index=executor.next_index)
    await executor.add_chunk(text)
    result = await executor.finalize()
    if result.error is not None:
        raise SystemExit(f"the benchmark program failed: {result.error.message}")


async def shape_row(
    store: CheckpointStore, config: Config, runs: int, text: str, awaits: int
) -> tuple[float, float]:
    """Awaits per second and commits per await of ``runs`` runs fed ``text`` at once."""
    harnesses = []
    for number in range(runs):
        namespace = {"pause": asyncio.sleep, "gather": asyncio.gather, "counter": 0}
        harnesses.append(await durable_harness(store, config, f"g{number}", namespace))
    try:
        with counting_commits(store) as count:
            began = time.perf_counter()
            await asyncio.gather(*(feed(h.executor, text) for h in harnesses))
            elapsed = time.perf_counter() - began
    finally:
        for harness in harnesses:
            await harness.close()
    return awaits / elapsed, count[0] / awaits


async def measure(folder: Path, args: argparse.Namespace) -> list[tuple[Any, ...]]:
    progress = Progress("group-commit")
    n, runs, tasks = args.awaits, args.runs, args.tasks
    shapes = [
        ("1 run", 1, LOOP.format(awaits=n), n),
        (f"{runs} runs", runs, LOOP.format(awaits=n), n * runs),
        (f"1 run, {tasks} tasks", 1, GATHER.format(awaits=n, tasks=tasks), n * tasks),
    ]
    rows = []
    for store_name in ("file", "sqlite"):
        config = store_config(folder / store_name, store_name)
        async with store_for(config.durability, config) as store:
            base = None
            for label, count, text, awaits in shapes:
                progress(f"{store_name}: {label}")
                rate, commits = await shape_row(store, config, count, text, awaits)
                base = rate if base is None else base
                rows.append((f"{store_name}, {label}", awaits, rate, ratio(rate, base), commits))
    progress.done()
    return rows


def bench_group_commit(args: argparse.Namespace) -> Report:
    if args.quick:
        args.awaits, args.runs, args.tasks = 10, 3, 3
    with scratch_folder(args.dir, args.keep) as folder:
        rows = asyncio.run(measure(folder, args))
    return Report(
        title=f'Concurrent awaits in one process, sync="fsync" ({args.awaits} awaits per run '
        "or task)",
        columns=("shape", "awaits", "awaits/s", "x 1 run", "commits/await"),
        rows=rows,
        summary={"runs": args.runs, "tasks": args.tasks},
    )

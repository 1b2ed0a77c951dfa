"""`bench.py resume`: how long a resume takes to load a run, against the length of its log.

    python scripts/bench.py resume            # a table (about a minute)
    python scripts/bench.py resume --quick    # small N: a smoke test, not figures

Runs of 1,000 and 10,000 await records (100 awaits per top-level statement, a snapshot
every 500 records, the defaults) are written by the real script runner on a FileStore
and a SQLite store. Then, ``--repeat`` times each: ``RecoveryCoordinator.load`` (what a
resume folds: the newest snapshot, then only the records after it), the decoding of
that snapshot alone (read, verify, unpack into a ``RunState`` - the part that grows with
the program's state, not with its log), and ``RunSession.attach`` (load, take the lease,
load again, admit). "load - snapshot" is what a resume costs beyond the snapshot; the
baseline is the same figure for the 1,000-record run: flat means a ratio near 1.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgpack

from benchmarks.harness import Progress, Stats, ratio, scratch_folder, written_script_run
from benchmarks.report import Report
from resumable.config import Config, DurabilitySettings
from resumable.durability.log.run_state import RunState
from resumable.durability.log.state_codec import state_from_dict
from resumable.durability.runs.coordinator import RecoveryCoordinator
from resumable.durability.runs.session import RunSession, store_for
from resumable.store.base import CheckpointStore

TARGET_MS = 50.0
HEADER = "import asyncio\n\ncounter = 0\n"
BLOCK = "for i in range(100):\n    counter = await asyncio.sleep(0, counter + 1)\n"


def resume_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="small N: a smoke test")
    parser.add_argument("--sizes", default="1000,10000", help="await records of the runs")
    parser.add_argument("--dir", type=Path, help="where the stores go (a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the stores afterwards")


def store_config(folder: Path, store: str) -> Config:
    path = folder / ("runs.db" if store == "sqlite" else "file")
    settings = DurabilitySettings(store=store, path=str(path), sync="flush")  # type: ignore[arg-type]
    return Config(durability=settings)


async def timed(repeat: int, work: Callable[[], Awaitable[Any]]) -> Stats:
    """Milliseconds of ``work`` over ``repeat`` runs, collected garbage first."""
    samples = []
    for _ in range(repeat):
        gc.collect()
        began = time.perf_counter()
        await work()
        samples.append((time.perf_counter() - began) * 1000)
    return Stats.of(samples)


async def decode_snapshot(store: CheckpointStore, codec: Any, run_id: str) -> RunState:
    """What load spends on the snapshot: read it, verify it, unpack it."""
    found = await store.get_snapshot(run_id)
    if found is None:
        return RunState()
    seq, sealed = found
    record = codec.open(sealed, run_id=run_id, seq=seq)
    return state_from_dict(msgpack.unpackb(record.body["state"], raw=False))


async def resume_row(
    folder: Path, store_name: str, size: int, repeat: int, progress: Progress
) -> dict[str, Any]:
    config = store_config(folder / f"{store_name}-{size}", store_name)
    async with store_for(config.durability, config) as store:
        progress(f"{store_name}: writing a run of {size} awaits")
        source = HEADER + BLOCK * max(1, size // 100)
        session = await written_script_run(store, config, size, source)
        coordinator = RecoveryCoordinator(store, session.codec)
        progress(f"{store_name}: loading the run of {size} awaits")
        read = (await coordinator.load(session.run_id)).records_read
        load = await timed(repeat, lambda: coordinator.load(session.run_id))
        snapshot = await timed(
            repeat, lambda: decode_snapshot(store, session.codec, session.run_id)
        )

        async def attach() -> None:
            attached = await RunSession.attach(store, config, session.run_id, env={})
            await attached.close()

        attached = await timed(repeat, attach)
    return {
        "records": session.manager.written,
        "read": read,
        "load": load,
        "snapshot": snapshot,
        "attach": attached,
    }


async def measure(folder: Path, sizes: list[int], repeat: int) -> list[tuple[Any, ...]]:
    progress = Progress("resume")
    rows = []
    for store_name in ("file", "sqlite"):
        base = None
        for size in sizes:
            found = await resume_row(folder, store_name, size, repeat, progress)
            load, snapshot, attach = found["load"], found["snapshot"], found["attach"]
            beyond = load.median - snapshot.median
            base = beyond if base is None else base
            rows.append(
                (
                    f"{store_name}, {size} awaits",
                    found["records"],
                    found["read"],
                    load.median,
                    load.p99,
                    snapshot.median,
                    beyond,
                    ratio(beyond, base),
                    attach.median,
                    attach.p99,
                )
            )
    progress.done()
    return rows


def bench_resume(args: argparse.Namespace) -> Report:
    sizes = [200, 1000] if args.quick else [int(size) for size in args.sizes.split(",")]
    repeat = 3 if args.quick else args.repeat
    with scratch_folder(args.dir, args.keep) as folder:
        rows = asyncio.run(measure(folder, sizes, repeat))
    worst = max(row[6] for row in rows)
    return Report(
        title=f"Resume: loading a run from its newest snapshot (median of {repeat}; "
        "a snapshot every 500 records)",
        columns=(
            "run",
            "records",
            "read",
            "load ms",
            "load p99",
            "snapshot ms",
            "load - snapshot",
            "x smallest",
            "attach ms",
            "attach p99",
        ),
        rows=rows,
        summary={
            "worst load - snapshot ms": round(worst, 2),
            "target": f"<= {TARGET_MS} ms beyond the snapshot, flat in the log's length",
        },
    )

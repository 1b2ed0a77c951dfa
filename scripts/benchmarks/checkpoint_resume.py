"""`bench.py checkpoint`, its resume part: how long loading and attaching a run takes.

Runs of 1k..50k await records (100 awaits per top-level statement) are written by the
real script runner, then ``RecoveryCoordinator.load`` and ``RunSession.attach`` are timed
on each, with snapshots every 500 records and without.
"""

from __future__ import annotations

import gc
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import NEVER, Progress, file_config, folder_bytes, ratio, written_script_run
from benchmarks.report import Report
from resumable.durability.runs.coordinator import RecoveryCoordinator
from resumable.durability.runs.session import RunSession, store_for

# -- resume time ------------------------------------------------------------------------------

# asyncio.sleep is a foreign await: each one is journaled (a program-defined coroutine is not)
RESUME_HEADER = "import asyncio\n\ncounter = 0\n"
RESUME_BLOCK = "for i in range(100):\n    counter = await asyncio.sleep(0, counter + 1)\n"


async def resume_run(
    root: Path, size: int, snapshot_every: int, repeat: int, progress: Progress
) -> tuple[Any, ...]:
    """Write a script run of ``size`` awaits, then time loading and attaching it."""
    label = f"{size} awaits, " + (
        f"snapshot every {snapshot_every}" if snapshot_every < NEVER else "no snapshots"
    )
    folder = root / f"resume-{size}-{snapshot_every}"
    config = file_config(folder, "flush", snapshot_every=snapshot_every)
    source = RESUME_HEADER + RESUME_BLOCK * max(1, size // 100)
    async with store_for(config.durability, config) as store:
        progress(f"resume: writing a run of {label}")
        session = await written_script_run(store, config, size, source)
        records = session.manager.written
        loads: list[float] = []
        attaches: list[float] = []
        read = 0
        for number in range(repeat):
            progress(f"resume: {label}: load {number + 1}/{repeat}")
            gc.collect()
            began = time.perf_counter()
            loaded = await RecoveryCoordinator(store, session.codec).load(session.run_id)
            loads.append(time.perf_counter() - began)
            read = loaded.records_read
            began = time.perf_counter()
            attached = await RunSession.attach(store, config, session.run_id, env={})
            attaches.append(time.perf_counter() - began)
            await attached.close()
        on_disk = folder_bytes(folder / "runs")
    return (
        label,
        records,
        read,
        statistics.median(loads) * 1000,
        statistics.median(attaches) * 1000,
        on_disk / 2**20,
    )


async def measure_resume(
    root: Path, sizes: list[int], repeat: int, progress: Progress
) -> tuple[Report, dict[str, Any]]:
    rows = [
        await resume_run(root, size, every, repeat, progress)
        for every in (500, NEVER)
        for size in sizes
    ]
    half = len(sizes)
    growth = {
        "records": ratio(rows[half - 1][1], rows[0][1]),
        "load_with_snapshots": ratio(rows[half - 1][3], rows[0][3]),
        "load_without_snapshots": ratio(rows[-1][3], rows[half][3]),
    }
    report = Report(
        title=f"Resume time (median of {repeat}; 100 awaits per top-level statement)",
        columns=("run", "records", "records read", "load ms", "attach ms", "log MB"),
        rows=rows,
    )
    aims = {
        "resume_growth": growth,
        # flat: a 50x longer log must not take even 5x longer to load
        "resume_not_linear": growth["load_with_snapshots"] < growth["records"] / 10,
    }
    return report, aims

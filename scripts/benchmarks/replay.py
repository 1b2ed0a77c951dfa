"""What replaying a statement costs: a statement with N completed foreign awaits, resumed.

    python scripts/bench.py replay              # N = 10,000, median of --repeat rounds
    python scripts/bench.py replay --quick      # N = 500: a smoke test, not figures

Method. One top-level statement, ``for i in range(N): counter = await step(counter)``,
where ``step`` is a foreign coroutine (defined outside the program, so each await is
journaled). A durable run of it is stopped gracefully right after its N-th await record
(``stop_requested``: the statement stays in progress, exactly as after a kill). Then,
each round, a copy of that run is resumed in-process: ``RunSession.attach`` (read and
fold the log) and ``drive_script`` (replay the N awaits from the journal, then finish).
Baselines, timed in the same rounds: the same statement with durability off (the
executor's passthrough hook), and the clean durable run (every await journaled).
Reported: milliseconds per phase and microseconds per await; the ratios are what to
compare across machines.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import NEVER, file_config
from benchmarks.report import Report
from resumable.durability.log.stopping import StopRequested
from resumable.durability.runs.session import RunSession, store_for
from resumable.exec.executor import StreamingPythonExecutor
from resumable.script import drive_script
from resumable.store.base import RunMeta

_stop: dict[str, Any] = {"after": -1, "count": 0, "manager": None}


async def step(value: int) -> int:
    """The foreign await: stops the durable run once it has been awaited ``after`` times."""
    _stop["count"] += 1
    if _stop["count"] == _stop["after"] and _stop["manager"] is not None:
        _stop["manager"].stop_requested = True
    return value + 1


def program(awaits: int) -> str:
    loop = f"for i in range({awaits}):\n    counter = await step(counter)\n"
    return "from benchmarks.replay import step\n\ncounter = 0\n" + loop


async def durable_run(folder: Path, awaits: int, *, stop: bool) -> tuple[float, str]:
    """A run of the program (stopped after its last await record if ``stop``)."""
    config = file_config(folder, "flush", snapshot_every=NEVER)
    async with store_for(config.durability, config) as store:
        meta = RunMeta("replay-bench", program="<bench replay>", kind="script")
        first = {"program": "<bench replay>", "kind": "script", "source": program(awaits)}
        session = await RunSession.create(store, config, meta, first, env={})
        _stop.update(after=awaits if stop else -1, count=0, manager=session.manager)
        began = time.perf_counter()
        try:
            await drive_script(session, config, env={})
        except StopRequested:
            pass
        finally:
            elapsed = time.perf_counter() - began
            _stop["manager"] = None
            await session.close()
    return elapsed, meta.run_id


async def resume(folder: Path, run_id: str) -> tuple[float, float]:
    config = file_config(folder, "flush", snapshot_every=NEVER)
    async with store_for(config.durability, config) as store:
        began = time.perf_counter()
        session = await RunSession.attach(store, config, run_id, env={})
        attached = time.perf_counter()
        try:
            outcome = await drive_script(session, config, env={})
        finally:
            await session.close()
        done = time.perf_counter()
    if outcome.exit_code != 0:
        raise SystemExit(f"the replayed run failed: {outcome.message}")
    return attached - began, done - attached


async def direct(awaits: int) -> float:
    executor = StreamingPythonExecutor(filename="<bench replay direct>")
    began = time.perf_counter()
    await executor.run(program(awaits))
    return time.perf_counter() - began


async def measure(args: argparse.Namespace) -> Report:
    awaits = 500 if args.quick else args.awaits
    root = Path(tempfile.mkdtemp(prefix="bench-replay-", dir=args.dir))
    try:
        stopped = root / "stopped"
        await durable_run(stopped, awaits, stop=True)
        times: dict[str, list[float]] = {"direct": [], "clean": [], "attach": [], "replay": []}
        for number in range(args.repeat):
            times["direct"].append(await direct(awaits))
            clean, _ = await durable_run(root / f"clean{number}", awaits, stop=False)
            times["clean"].append(clean)
            copy = root / f"copy{number}"
            shutil.copytree(stopped, copy)
            attach, replay = await resume(copy, "replay-bench")
            times["attach"].append(attach)
            times["replay"].append(replay)
        medians = {name: statistics.median(values) for name, values in times.items()}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    per = {name: seconds * 1e6 / awaits for name, seconds in medians.items()}
    rows = [
        ("no durability (DirectHook)", medians["direct"] * 1000, per["direct"], 1.0),
        ("clean durable run", medians["clean"] * 1000, per["clean"], per["clean"] / per["direct"]),
        (
            "resume: attach (read + fold)",
            medians["attach"] * 1000,
            per["attach"],
            per["attach"] / per["direct"],
        ),
        (
            "resume: replay the statement",
            medians["replay"] * 1000,
            per["replay"],
            per["replay"] / per["direct"],
        ),
    ]
    return Report(
        title=f"Replay of one statement with {awaits} completed foreign awaits "
        f"(median of {args.repeat} rounds)",
        columns=("phase", "ms", "us per await", "x no durability"),
        rows=rows,
        summary={
            "awaits": awaits,
            "replay_vs_clean": round(per["replay"] / per["clean"], 3),
            "replay_us_per_await": round(per["replay"], 2),
        },
    )


def replay_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--awaits", type=int, default=10_000, help="completed awaits to replay")
    parser.add_argument("--quick", action="store_true", help="500 awaits: a smoke test")
    parser.add_argument("--dir", default=None, help="where the stores go (a temporary folder)")


def bench_replay(args: argparse.Namespace) -> Report:
    return asyncio.run(measure(args))

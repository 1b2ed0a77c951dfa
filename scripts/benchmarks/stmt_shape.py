"""`bench.py stmt-shape`: statements of one await each, sync="fsync", against raw append+fsync.

    python scripts/bench.py stmt-shape                 # a table (about a minute)
    python scripts/bench.py stmt-shape --quick         # small N: a smoke test, not figures
    python scripts/bench.py stmt-shape --way inline    # every boundary's fsync one way

The shape LLM-written code has: ``counter = await tick(counter)``, one statement per
await. Each such statement writes an await record and the statement's boundary record;
both are made durable by one append and one fsync (see docs/durability.md, "Storage
guarantees"). A statement's time is the gap from one ``tick()`` returning to the next
being called: its records sealed, appended and fsync'd, the next statement compiled.
The baseline is ``os.write`` + ``os.fsync`` of the same number of bytes (what one
statement adds to the log) to an O_APPEND file in the same folder, N times. A third phase
runs the same statement with each one's source new (``tick(counter + n - n)``), as a
model writes them: none is compiled from a statement seen before. The three
run in alternating phases, ``--rounds`` times, and their samples are pooled. The fsyncs
a statement costs are counted by wrapping ``os.fsync`` while the durable phase runs.
``--way`` fixes where a boundary's fsync runs (the helper process, or inline) instead of
the store's choice (``store/filesystem/sync_choice.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    Progress,
    Stats,
    durable_harness,
    file_config,
    folder_bytes,
    ratio,
    scratch_folder,
    statements_program,
    tick,
)
from benchmarks.report import SectionedReport
from resumable.durability.runs.session import store_for
from resumable.store.filesystem import background_fsync

TARGET = 1.0  # the aim: cheaper than the naive write it replaces


def stmt_shape_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="small N: a smoke test")
    parser.add_argument("--statements", type=int, default=300, help="statements per phase")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--dir", type=Path, help="where the stores go (a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the stores afterwards")
    parser.add_argument(
        "--way",
        choices=("auto", "background", "inline"),
        default="auto",
        help="where a boundary's fsync runs (auto: the store's choice)",
    )


class FixedWay:
    """A boundary's fsync always one way, in place of the store's ``SyncChoice``."""

    def __init__(self, background: bool) -> None:
        self._background = background

    def background(self) -> bool:
        return self._background


@contextlib.contextmanager
def counting_fsyncs() -> Iterator[list[int]]:
    """``os.fsync`` and ``os.fdatasync`` counted while the block runs, with the fsyncs handed
    to the helper process (``store/filesystem/background_fsync.py``): ``[count]``."""
    real, real_data, count = os.fsync, getattr(os, "fdatasync", None), [0]
    handed = background_fsync._helper.sent

    def fsync(fd: Any) -> None:
        count[0] += 1
        real(fd)

    def fdatasync(fd: Any) -> None:
        count[0] += 1
        (real_data or real)(fd)

    os.fsync, os.fdatasync = fsync, fdatasync
    try:
        yield count
    finally:
        count[0] += background_fsync._helper.sent - handed
        os.fsync = real
        if real_data is None:
            del os.fdatasync
        else:
            os.fdatasync = real_data


def raw_appends(folder: Path, n: int, size: int) -> list[float]:
    """Microseconds of each of ``n`` ``os.write`` + ``os.fsync`` of ``size`` bytes."""
    fd = os.open(folder / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    data, samples = b"x" * size, []
    try:
        for _ in range(n):
            began = time.perf_counter_ns()
            os.write(fd, data)
            os.fsync(fd)
            samples.append((time.perf_counter_ns() - began) / 1000)
    finally:
        os.close(fd)
    return samples


def distinct_statements(awaits: int, first: int) -> str:
    """The same statement, each one's source new (as a model writes them): none is compiled
    from a statement seen before (``exec/compiled.py``)."""
    return "".join(
        f"counter = await tick(counter + {n} - {n})\n" for n in range(first, first + awaits)
    )


async def measure(folder: Path, statements: int, rounds: int, way: str = "auto") -> dict[str, Any]:
    progress = Progress("stmt-shape")
    config = file_config(folder / "store", "fsync", snapshot_every=10**9)
    durable: list[float] = []
    distinct: list[float] = []
    raw: list[float] = []
    fsyncs = written = 0
    async with store_for(config.durability, config) as store:
        if way != "auto":
            store._sync_choice = FixedWay(way == "background")  # type: ignore[attr-defined]
        harness = await durable_harness(store, config, "stmt", {"tick": tick, "counter": 0})
        try:
            await harness.feed(statements_program(2))  # warm: first segment, imports
            for number in range(rounds):
                progress(f"round {number + 1}/{rounds}")
                before = folder_bytes(folder / "store")
                with counting_fsyncs() as count:
                    durable += await harness.feed(statements_program(statements + 1))
                fsyncs += count[0]
                grown = folder_bytes(folder / "store") - before
                written += statements + 1
                size = max(1, grown // (statements + 1))
                raw += raw_appends(folder, statements, size)
                program = distinct_statements(statements + 1, number * (statements + 1))
                with counting_fsyncs() as count:
                    distinct += await harness.feed(program)
                fsyncs += count[0]
                written += statements + 1
        finally:
            await harness.close()
    progress.done()
    return {
        "durable": Stats.of(durable),
        "distinct": Stats.of(distinct),
        "raw": Stats.of(raw),
        "fsyncs": fsyncs / written,
    }


def bench_stmt_shape(args: argparse.Namespace) -> SectionedReport:
    statements, rounds = (20, 1) if args.quick else (args.statements, args.rounds)
    with scratch_folder(args.dir, args.keep) as folder:
        found = asyncio.run(measure(folder, statements, rounds, args.way))
    durable, distinct, raw = found["durable"], found["distinct"], found["raw"]
    median_ratio, p99_ratio = ratio(durable.median, raw.median), ratio(durable.p99, raw.p99)
    where = "" if args.way == "auto" else f" ({args.way})"
    rows = [
        (f"statement `x = await tick(x)`, fsync{where}", durable.median, durable.p99, median_ratio),
        (
            f"the same, each statement's source new{where}",
            distinct.median,
            distinct.p99,
            ratio(distinct.median, raw.median),
        ),
        ("raw os.write + os.fsync, same bytes", raw.median, raw.p99, 1.0),
    ]
    return SectionedReport(
        title=f"One await per statement, sync=fsync, FileStore ({durable.count} statements, "
        f"{rounds} rounds, Python {sys.version.split()[0]})",
        columns=("run", "median us", "p99 us", "x raw"),
        rows=rows,
        summary={
            "way": args.way,
            "fsyncs per statement": round(found["fsyncs"], 3),
            "ratio median": median_ratio,
            "ratio p99": p99_ratio,
            "ratio median, new sources": ratio(distinct.median, raw.median),
            "target": f"<= {TARGET}x raw append+fsync (median)",
        },
    )

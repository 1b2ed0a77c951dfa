"""What a durable await costs, measured next to what it cannot be cheaper than.

    python scripts/bench.py checkpoint            # tables (a few minutes)
    python scripts/bench.py checkpoint --quick    # small N: a smoke test, not figures

Method. The program awaits ``tick()``, which notes ``time.perf_counter_ns()`` when it is
called and when it returns; the time from one return to the next call is one await's
checkpoint (pickle the result, seal the record, append it, fold it), plus, in the
statement-per-await shape, the boundary record and the compilation of the next
statement. Every round feeds each variant one response of N+1 awaits (N samples), the
variants taking turns, and the samples of all rounds are pooled into a median, a p99
and a mean (the mean also carries the snapshot written every ``snapshot_every``
records). Baselines: the executor without durability (``DirectHook``); the naive
approach, a hook that pickles the whole namespace at every await and replaces a file
atomically; and a floor, ``os.write`` (+ ``os.fsync``) of a record-sized buffer to an
O_APPEND file in the store's folder, run *inside* ``tick()`` at every await so that
floor and checkpoint alternate and see the disk in the same state. Bytes per await
come from a separate run that never prunes: its folder's growth over its awaits.

Resume time (checkpoint_resume.py): runs of 1k..50k await records (100 awaits per
top-level statement) are written by the real script runner, then
``RecoveryCoordinator.load`` and ``RunSession.attach`` are timed on each, with
snapshots every 500 records and without.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import statistics
import sys
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import cloudpickle

from benchmarks.checkpoint_resume import measure_resume
from benchmarks.harness import (
    NEVER,
    PROGRAMS,
    SYNCS,
    Floor,
    Harness,
    Progress,
    RawAppend,
    Stats,
    durable_harness,
    file_config,
    folder_bytes,
    ratio,
    scratch_folder,
    stored_size,
    tick,
)
from benchmarks.report import Report, SectionedReport
from resumable.durability.runs.session import store_for
from resumable.exec.executor import StreamingPythonExecutor
from resumable.exec.hooks import HookBase
from resumable.store.base import CheckpointStore

T = TypeVar("T")


# -- baselines --------------------------------------------------------------------------


class NaiveCheckpoint(HookBase):
    """What resumable replaces: at every await, pickle the whole namespace, replace a file."""

    def __init__(self, namespace: dict[str, Any], folder: Path, *, fsync: bool) -> None:
        self.namespace = namespace
        self.folder = folder
        self.fsync = fsync
        self.last_size = 0
        folder.mkdir(parents=True, exist_ok=True)

    async def await_(self, site: str, awaitable: Awaitable[T]) -> T:
        result = await awaitable
        names = {k: v for k, v in self.namespace.items() if not k.startswith("__")}
        data = cloudpickle.dumps((names, site, result))
        temp = self.folder / "state.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, self.folder / "state.pickle")
        self.last_size = len(data)
        return result


# -- per-await ----------------------------------------------------------------------------


@dataclass(slots=True)
class Variant:
    """One row of the per-await table: what runs, and the gaps it produced."""

    shape: str
    big: bool
    kind: str  # "durable", "direct" (no durability) or "naive"
    sync: str | None
    awaits: int
    harness: Harness
    floor: Floor | None = None
    naive: NaiveCheckpoint | None = None
    samples: list[float] = field(default_factory=list)
    paired: list[float] = field(default_factory=list)
    """Each await's gap over the floor timed just before it: both saw the same moment."""

    async def round(self) -> None:
        floor = self.floor
        done = len(floor.samples) if floor is not None else 0
        gaps = await self.harness.feed(PROGRAMS[self.shape](self.awaits + 1), floor)
        self.samples += gaps
        if floor is not None:
            self.paired += [gap / f for gap, f in zip(gaps, floor.samples[done:], strict=False)]

    def paired_ratio(self) -> float:
        return round(statistics.median(self.paired), 3) if self.paired else float("nan")

    @property
    def name(self) -> str:
        namespace = "50MB" if self.big else "small"
        return " ".join(filter(None, (self.shape, namespace, self.kind, self.sync)))


async def build_variants(
    root: Path,
    args: argparse.Namespace,
    big_value: bytes,
    stores: dict[str, CheckpointStore],
    raw_files: dict[str, int],
    record: bytes,
) -> list[Variant]:
    variants: list[Variant] = []
    for shape in PROGRAMS:
        for big in (False, True):

            def namespace(big: bool = big) -> dict[str, Any]:
                return {"tick": tick, "big": big_value} if big else {"tick": tick}

            tag = f"{shape}-{'big' if big else 'small'}"
            direct = StreamingPythonExecutor(namespace(), filename=f"<bench {tag}>")
            variants.append(Variant(shape, big, "direct", None, args.awaits, Harness(direct)))
            for sync, store in stores.items():

                def floor(sync: str = sync) -> RawAppend:
                    return RawAppend(raw_files[sync], record, fsync=sync == "fsync")

                count = args.awaits if sync == "flush" else args.fsync_awaits
                config = file_config(root / f"store-{sync}", sync)
                harness = await durable_harness(store, config, f"{tag}-{sync}", namespace())
                variants.append(Variant(shape, big, "durable", sync, count, harness, floor()))
                ns = namespace()
                naive = NaiveCheckpoint(ns, root / f"naive-{tag}-{sync}", fsync=sync == "fsync")
                executor = StreamingPythonExecutor(ns, hook=naive, filename=f"<bench {tag}>")
                count = min(count, args.naive_big_awaits) if big else count
                variants.append(
                    Variant(shape, big, "naive", sync, count, Harness(executor), floor(), naive)
                )
    for variant in variants:  # the first boundary writes the big value's blob, once per run
        await variant.harness.feed("counter = 0\n")
    return variants


async def bytes_per_await(root: Path, shape: str, big_value: bytes | None, awaits: int) -> float:
    """Bytes the store gains per await, in a run that never prunes (nothing is taken back)."""
    folder = root / f"bytes-{shape}-{'big' if big_value else 'small'}"
    config = file_config(folder, "flush", keep=NEVER)
    namespace: dict[str, Any] = {"tick": tick}
    if big_value is not None:
        namespace["big"] = big_value
    async with store_for(config.durability, config) as store:
        harness = await durable_harness(store, config, f"bytes-{shape}", namespace)
        await harness.feed("counter = 0\n")
        before = folder_bytes(folder)
        await harness.feed(PROGRAMS[shape](awaits))
        grown = folder_bytes(folder) - before
        await harness.close()
    return grown / awaits


def record_size(root: Path, awaits: int) -> int:
    """Mean size of a framed await record, read off the log of the small loop run."""
    segments = (root / "bytes-loop-small" / "runs").rglob("*.seg")
    return max(1, round(sum(stored_size(path) for path in segments) / (awaits + 3)))


async def measure_per_await(
    root: Path, args: argparse.Namespace, progress: Progress
) -> tuple[list[Variant], dict[tuple[str, bool], float], int]:
    big_value = os.urandom(args.big_mb * 2**20)
    sizes: dict[tuple[str, bool], float] = {}
    for shape in PROGRAMS:
        for big in (False, True):
            progress(f"bytes per await, {shape}, {'50MB' if big else 'small'} namespace")
            sizes[shape, big] = await bytes_per_await(
                root, shape, big_value if big else None, args.awaits
            )
    record = os.urandom(record_size(root, args.awaits))
    async with contextlib.AsyncExitStack() as stack:
        stores: dict[str, CheckpointStore] = {}
        raw_files: dict[str, int] = {}
        for sync in SYNCS:
            config = file_config(root / f"store-{sync}", sync)
            stores[sync] = await stack.enter_async_context(store_for(config.durability, config))
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
            raw_files[sync] = os.open(root / f"store-{sync}" / "raw.log", flags, 0o600)
            stack.callback(os.close, raw_files[sync])
        progress("setting up the runs")
        variants = await build_variants(root, args, big_value, stores, raw_files, record)
        for number in range(1, args.rounds + 1):
            for variant in variants:
                progress(f"round {number}/{args.rounds}: {variant.name}")
                os.sync()  # no writeback of an earlier phase's data under this one's fsyncs
                gc.collect()
                await variant.round()
        for variant in variants:
            await variant.harness.close()
    return variants, sizes, len(record)


def per_await_report(
    variants: list[Variant],
    sizes: dict[tuple[str, bool], float],
    record: int,
    args: argparse.Namespace,
) -> tuple[Report, dict[str, Any]]:
    by_key = {(v.shape, v.big, v.kind, v.sync): v for v in variants}
    stats = {key: Stats.of(v.samples) for key, v in by_key.items()}
    rows: list[tuple[Any, ...]] = []
    for key, variant in by_key.items():
        shape, big, kind, sync = key
        s = stats[key]
        if variant.floor is None:
            extra: tuple[Any, ...] = ("-",) * 6
        else:
            floor = Stats.of(variant.floor.samples).median
            x_floor = (floor, ratio(s.median, floor), variant.paired_ratio())
            if kind == "durable":
                naive = stats[shape, big, "naive", sync].median
                vs_none = s.median - stats[shape, big, "direct", None].median
                extra = (vs_none, *x_floor, ratio(s.median, naive), round(sizes[shape, big]))
            else:
                written = variant.naive.last_size if variant.naive is not None else "-"
                extra = ("-", *x_floor, "-", written)
        rows.append((variant.name, s.median, s.p99, s.mean, *extra, s.count))
    for sync in SYNCS:
        pooled = [x for v in variants if v.sync == sync and v.floor for x in v.floor.samples]
        s = Stats.of(pooled)
        name = "raw os.write" + (" + os.fsync" if sync == "fsync" else "") + " (all rows)"
        rows.append((name, s.median, s.p99, s.mean, *("-",) * 5, record, s.count))

    def durable(shape: str, big: bool, sync: str) -> Variant:
        return by_key[shape, big, "durable", sync]

    def median(shape: str, big: bool, sync: str) -> float:
        return stats[shape, big, "durable", sync].median

    # fsync figures swing with the disk's state: compare them through their paired floors
    big_x_small = {
        f"{shape} flush": ratio(median(shape, True, "flush"), median(shape, False, "flush"))
        for shape in PROGRAMS
    } | {
        f"{shape} fsync, paired": ratio(
            durable(shape, True, "fsync").paired_ratio(),
            durable(shape, False, "fsync").paired_ratio(),
        )
        for shape in PROGRAMS
    }
    extra_bytes = {shape: round(sizes[shape, True] - sizes[shape, False]) for shape in PROGRAMS}
    flush = median("loop", False, "flush")
    fsync_run = durable("loop", False, "fsync")
    assert fsync_run.floor is not None
    fsync_medians = ratio(median("loop", False, "fsync"), Stats.of(fsync_run.floor.samples).median)
    fsync_paired = fsync_run.paired_ratio()
    aims = {
        "flush_median_us": round(flush, 2),
        "flush_under_50us": flush < 50,
        "fsync_x_raw_fsync": {"medians": fsync_medians, "paired": fsync_paired},
        "fsync_within_1.2x_raw_fsync": fsync_paired <= 1.2,
        "big_x_small": big_x_small,
        "big_within_1.5x_small": all(r <= 1.5 for r in big_x_small.values()),
        "big_extra_bytes_per_await": extra_bytes,
        "bytes_independent_of_big_value": all(b < 1024 for b in extra_bytes.values()),
    }
    report = Report(
        title=f"Per await, microseconds ({args.rounds} rounds of {args.awaits} awaits, "
        f"{args.fsync_awaits} with fsync; small namespace = a counter, 50MB = plus "
        f"{args.big_mb} MB of bytes that never change)",
        columns=(
            "case",
            "median us",
            "p99 us",
            "mean us",
            "+us vs none",
            "floor us",
            "x floor",
            "x floor paired",
            "x naive",
            "bytes/await",
            "awaits",
        ),
        rows=rows,
    )
    return report, aims


# -- the subcommand -----------------------------------------------------------------------------


def checkpoint_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="small N: a smoke test")
    parser.add_argument("--awaits", type=int, help="awaits per round and variant (2000)")
    parser.add_argument("--fsync-awaits", type=int, help="awaits per round with fsync (200)")
    parser.add_argument(
        "--naive-big-awaits", type=int, help="awaits per round of the naive 50 MB case (10)"
    )
    parser.add_argument("--big-mb", type=int, help="size of the unchanging value (50)")
    parser.add_argument("--rounds", type=int, help="rounds of the per-await phase (5)")
    parser.add_argument(
        "--resume-sizes", help="await records of the resume runs (1000,10000,50000)"
    )
    parser.add_argument("--dir", type=Path, help="where the stores go (a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the stores afterwards")


def _defaults(args: argparse.Namespace) -> None:
    quick = args.quick
    for name, full, small in (
        ("awaits", 2000, 100),
        ("fsync_awaits", 200, 10),
        ("naive_big_awaits", 10, 2),
        ("big_mb", 50, 5),
        ("rounds", 5, 1),
        ("resume_sizes", "1000,10000,50000", "200,1000"),
    ):
        if getattr(args, name) is None:
            setattr(args, name, small if quick else full)
    if quick:
        args.repeat = min(args.repeat, 2)


def bench_checkpoint(args: argparse.Namespace) -> Report:
    """Per-await cost of a durable run against its baselines, bytes per await, resume time."""
    _defaults(args)
    sizes = [int(part) for part in str(args.resume_sizes).split(",") if part]
    progress = Progress("checkpoint")
    with scratch_folder(args.dir, args.keep) as root:
        variants, written, record = asyncio.run(measure_per_await(root, args, progress))
        main, aims = per_await_report(variants, written, record, args)
        resume, resume_aims = asyncio.run(measure_resume(root, sizes, args.repeat, progress))
    progress.done()
    aims |= resume_aims
    return SectionedReport(
        title=main.title,
        columns=main.columns,
        rows=main.rows,
        summary={
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "rounds": args.rounds,
            "aims": aims,
        },
        sections={"resume": resume},
    )

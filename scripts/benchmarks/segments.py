"""The file store's append with sync="fsync" against the disk's two floors.

    python scripts/bench.py segments                      # this checkout against the floors
    python scripts/bench.py segments --before OLD/src     # and an older checkout, side by side

Phases alternate, ``--rounds`` times, in the same folder: N raw appends
(``os.write`` + ``os.fsync`` of a record-sized buffer to an O_APPEND file), N raw
in-place writes (``os.pwrite`` into a file preallocated with ``posix_fallocate``, then
``os.fdatasync``), and N ``FileStore.append`` calls of one record each - in a child
process per checkout, so an older ``src`` folder (``--before``) is measured in the same
run. Samples are pooled per case; ratios are against the raw append.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.report import Report
from benchmarks.stmt_shape import raw_appends

SIZE = 200
CHILD = """\
import asyncio, json, sys, time
from resumable.store.base import RunMeta, StoredRecord
from resumable.store.filesystem import FileStore

async def main(root, n, size):
    samples = []
    async with FileStore(root, sync="fsync") as store:
        await store.create_run(RunMeta("r", "bench.py"))
        lease = await store.acquire("r", "bench")
        for seq in range(1, n + 1):
            record = StoredRecord(seq, lease.epoch, bytes(size))
            began = time.perf_counter_ns()
            await store.append("r", [record], lease)
            samples.append((time.perf_counter_ns() - began) / 1000)
        await store.release(lease)
    print(json.dumps(samples))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


def segments_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--appends", type=int, default=500, help="appends per phase")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--before", type=Path, help="the src folder of a checkout to compare")
    parser.add_argument("--quick", action="store_true", help="a smoke test: tiny N")


def _raw_in_place(path: Path, n: int) -> list[float]:
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    data, samples = b"x" * (SIZE + 24), []
    try:
        os.posix_fallocate(fd, 0, 1 << 20)
        os.fsync(fd)
        for i in range(n):
            began = time.perf_counter_ns()
            os.pwrite(fd, data, i * len(data))
            os.fdatasync(fd)
            samples.append((time.perf_counter_ns() - began) / 1000)
    finally:
        os.close(fd)
    return samples


def _store(src: Path, root: Path, n: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(n), str(SIZE)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the store phase with {src} failed:\n{done.stderr}")
    return [float(x) for x in json.loads(done.stdout)]


def bench_segments(args: argparse.Namespace) -> Report:
    n, rounds = (30, 1) if args.quick else (args.appends, args.rounds)
    here = Path(__file__).resolve().parent.parent / "src"
    cases: dict[str, list[float]] = {"raw append + fsync": [], "raw pwrite + fdatasync": []}
    checkouts = {"FileStore.append (this checkout)": here}
    if args.before is not None:
        checkouts = {"FileStore.append (--before)": args.before.resolve(), **checkouts}
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:
        folder = Path(tmp)
        for number in range(rounds):
            print(f"segments: round {number + 1}/{rounds}", file=sys.stderr, flush=True)
            cases["raw append + fsync"] += raw_appends(folder, n, SIZE + 24)
            cases["raw pwrite + fdatasync"] += _raw_in_place(folder / "raw.pre", n)
            for index, (name, src) in enumerate(checkouts.items()):
                root = folder / f"store-{number}-{index}"
                cases.setdefault(name, []).extend(_store(src, root, n))
    floor = statistics.median(cases["raw append + fsync"])
    rows = []
    for name, samples in cases.items():
        ordered = sorted(samples)
        median, p99 = statistics.median(ordered), ordered[round(0.99 * (len(ordered) - 1))]
        rows.append((name, round(median, 1), round(p99, 1), round(median / floor, 3), len(ordered)))
    return Report(
        f"One {SIZE}-byte record per append, sync=fsync ({rounds} alternating rounds)",
        ("case", "median us", "p99 us", "x raw append", "appends"),
        rows,
    )

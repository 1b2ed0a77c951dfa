"""`bench.py fsync`: a durable await with sync="fsync" against the raw append+fsync floor.

The two are measured in alternating phases (not inside one another as the
`checkpoint` benchmark's paired floor is: there the floor's fsync runs right before
ours and the second of two back-to-back fsyncs waits for the first's journal commit).
Each phase times N awaits of a script run by `resumable exec` (the script times its own
loop, so interpreter start-up is excluded), then N raw `os.write` + `os.fsync` of a
record-sized buffer appended to a file in the same folder.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.report import Report

SCRIPT = """\
import sys, time
async def tick(i):
    return i
t = time.perf_counter()
for i in range({n}):
    counter = await tick(i)
print((time.perf_counter() - t) / {n} * 1e6, file=sys.stderr)
"""


def fsync_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--awaits", type=int, default=500, help="awaits per phase")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds")
    parser.add_argument("--quick", action="store_true", help="a smoke test: tiny N")


def _durable(folder: Path, n: int) -> float:
    script = folder / "loop.py"
    script.write_text(SCRIPT.format(n=n))
    env = {**os.environ, "RESUMABLE_DURABILITY_SYNC": "fsync", "RESUMABLE_RUNTIME_PROGRESS": "off"}
    done = subprocess.run(
        [sys.executable, "-m", "resumable", "exec", str(script)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(next(line for line in done.stderr.splitlines() if line[:1].isdigit()))


def _raw(folder: Path, n: int, size: int = 190) -> float:
    fd = os.open(folder / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    data = b"x" * size
    try:
        start = time.perf_counter()
        for _ in range(n):
            os.write(fd, data)
            os.fsync(fd)
        return (time.perf_counter() - start) / n * 1e6
    finally:
        os.close(fd)


def bench_fsync(args: argparse.Namespace) -> Report:
    n, rounds = (50, 2) if args.quick else (args.awaits, args.rounds)
    durable: list[float] = []
    raw: list[float] = []
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:
        folder = Path(tmp)
        for number in range(rounds):
            print(f"fsync: round {number + 1}/{rounds}", file=sys.stderr, flush=True)
            durable.append(_durable(folder, n))
            raw.append(_raw(folder, n))
    ratios = [d / r for d, r in zip(durable, raw, strict=True)]
    rows = [
        ("raw os.write + os.fsync", round(statistics.median(raw), 1)),
        ('durable await, sync="fsync"', round(statistics.median(durable), 1)),
    ]
    summary = {
        "awaits per phase": n,
        "rounds": rounds,
        "ratio of medians": round(statistics.median(durable) / statistics.median(raw), 3),
        "median of per-round ratios": round(statistics.median(ratios), 3),
        "per-round ratios": [round(r, 2) for r in ratios],
        "within 1.2x": statistics.median(ratios) <= 1.2,
    }
    return Report("Per await, microseconds (alternating phases)", ("case", "us"), rows, summary)

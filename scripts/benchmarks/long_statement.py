"""`bench.py long-statement`: one statement that awaits 10,000 and 100,000 times.

    python scripts/bench.py long-statement             # N = 10,000 and 100,000
    python scripts/bench.py long-statement --quick     # N = 1,000 and 10,000: a smoke test

A statement's per-await cost must not grow with its journal: the clean run, the fold of its
log at attach, and the replay of its awaits after a stop in the middle of it (the statement
in progress, as after a kill) each cost the same per await at N and 10N. The program and the
phases are ``bench.py replay``'s (:mod:`benchmarks.replay`); the rows give microseconds per
await at each N and the ratio of 10N's to N's (1.0: flat).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from pathlib import Path

from benchmarks.replay import durable_run, resume
from benchmarks.report import Report


def long_statement_options(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(repeat=1)
    parser.add_argument("--awaits", type=int, default=10_000, help="N: measured at N and 10N")
    parser.add_argument("--quick", action="store_true", help="N = 1,000: a smoke test")
    parser.add_argument("--dir", type=Path, help="where the stores go (a temporary folder)")


async def per_await(root: Path, awaits: int, repeat: int) -> dict[str, float]:
    """Best of ``repeat`` rounds of each phase, in microseconds per await."""
    best: dict[str, float] = {}
    stopped = root / f"stopped-{awaits}"
    await durable_run(stopped, awaits, stop=True)
    for number in range(repeat):
        clean, _ = await durable_run(root / f"clean-{awaits}-{number}", awaits, stop=False)
        copy = root / f"copy-{awaits}-{number}"
        shutil.copytree(stopped, copy)
        attach, replay = await resume(copy, "replay-bench")
        for phase, seconds in (("clean run", clean), ("attach", attach), ("replay", replay)):
            value = seconds * 1e6 / awaits
            best[phase] = min(best.get(phase, value), value)
        shutil.rmtree(copy)
    return best


def bench_long_statement(args: argparse.Namespace) -> Report:
    small = 1_000 if args.quick else args.awaits
    large = 10 * small
    root = Path(tempfile.mkdtemp(prefix="bench-long-", dir=args.dir))
    try:
        at_small = asyncio.run(per_await(root, small, args.repeat))
        at_large = asyncio.run(per_await(root, large, args.repeat))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = [
        (phase, at_small[phase], at_large[phase], at_large[phase] / at_small[phase])
        for phase in at_small
    ]
    return Report(
        f"One statement of {small:,} and {large:,} foreign awaits: us per await "
        f"(best of {args.repeat})",
        ("phase", f"N = {small:,}", f"N = {large:,}", "ratio"),
        rows,
        {"awaits": [small, large], "ratios": {row[0]: round(row[3], 3) for row in rows}},
    )

"""`bench.py growth`: how large a run's store grows, and what a statement writes.

    python scripts/bench.py growth              # a table (about a minute)
    python scripts/bench.py growth --repeat 1   # a smoke test

Each program runs under ``resumable exec`` in a new process on the file store with
``sync = "fsync"`` and the default retention (``snapshot_every`` 500, ``keep`` 3):

- ``long N``: a 100 KB dict, then N top-level statements that each change one counter;
- ``big + N``: a dict of 1,000,000 short strings (about 37 MB pickled), then N trivial
  statements.

A row gives the bytes stored (log segments without their preallocated zeros, snapshots,
blobs) and the wall time (median of ``--repeat``); ``per statement`` is the difference between
two rows of a pair divided by the statements between them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.harness import folder_bytes, scratch_folder
from benchmarks.report import Report

CONFIG = '[durability]\nenabled = true\nsync = "fsync"\npath = "store"\n'


def growth_options(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(repeat=1)
    parser.add_argument("--big", type=int, default=1_000_000, help="items of the big dict")


def _long(statements: int) -> str:
    lines = ["state = {i: f'{i:090d}' for i in range(1100)}"]
    lines += [f"counter_{n % 10} = {n}" for n in range(statements)]
    return "\n".join(lines) + "\n"


def _big(items: int, statements: int) -> str:
    lines = [f"big = {{i: str(i) * 5 for i in range({items})}}"]
    lines += [f"x = {n}" for n in range(statements)]
    return "\n".join(lines) + "\n"


def _run(folder: Path, source: str, repeat: int) -> tuple[int, float]:
    times, stored = [], 0
    for attempt in range(repeat):
        work = folder / f"w{attempt}"
        work.mkdir()
        (work / "playbooks.toml").write_text(CONFIG)
        (work / "p.py").write_text(source)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "resumable", "exec", "p.py", "-q"],
            cwd=work,
            env=env,
            check=True,
            capture_output=True,
        )
        times.append(time.perf_counter() - started)
        stored = folder_bytes(work / "store" / "runs")
    times.sort()
    return stored, times[len(times) // 2]


def bench_growth(args: argparse.Namespace) -> Report:
    rows: list[tuple[object, ...]] = []
    summary: dict[str, object] = {}
    pairs = {
        "long": [(f"long {n}", _long(n)) for n in (1000, 3000)],
        "big": [(f"big + {n}", _big(args.big, n)) for n in (1, 11)],
    }
    with scratch_folder(None, keep=False) as scratch:
        for kind, programs in pairs.items():
            measured = []
            for number, (name, source) in enumerate(programs):
                folder = scratch / f"{kind}{number}"
                folder.mkdir()
                stored, seconds = _run(folder, source, args.repeat)
                measured.append((stored, seconds))
                rows.append((name, stored, round(seconds, 2)))
            (b0, t0), (b1, t1) = measured
            between = 2000 if kind == "long" else 10
            summary[f"{kind}: bytes per statement"] = round((b1 - b0) / between)
            summary[f"{kind}: ms per statement"] = round((t1 - t0) / between * 1000, 1)
    return Report(
        "bytes stored by a run, and wall time", ("program", "bytes", "seconds"), rows, summary
    )

"""Time one statement holding a big string literal in the embedded executor.

    python scripts/bench_big_statement.py              # 400 KB and 2 MB
    python scripts/bench_big_statement.py 10000000     # any sizes, in characters

A statement's text is cut from its line and column offsets, so its cost grows with its
size, not with the square of it.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import resumable


def run_once(size: int, store: Path) -> float:
    source = f"a = 1\ns = '{'x' * size}'\nlen(s)\n"
    with resumable.open_run(f"big-{size}", store=store) as run:
        executor = run.executor()
        started = time.perf_counter()
        outcome = executor.run_code(source)
        elapsed = time.perf_counter() - started
    if outcome.error is not None or outcome.value != size:
        raise SystemExit(f"the {size}-character statement did not run: {outcome.error}")
    return elapsed


def main() -> None:
    sizes = [int(arg) for arg in sys.argv[1:]] or [400_000, 2_000_000]
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            print(f"{size:>12,} characters  {run_once(size, Path(folder) / 'store'):7.2f} s")


if __name__ == "__main__":
    main()

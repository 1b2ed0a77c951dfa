"""`bench.py capture`: what a statement boundary's namespace capture costs for program shapes.

    python scripts/bench.py capture                       # this checkout
    python scripts/bench.py capture --base ../other/src   # and another, side by side

A namespace is pickled again at every statement boundary, with the program's functions and
classes in it. Each shape below is captured N and 3N times in a child process under valgrind's
``callgrind`` and the slope is the instructions of one capture (the load of a shared machine does
not move it); beside it, one capture timed in a child process (median of ``--repeat`` rounds
of 200). Shapes: the names every script has (a module, a counter); ten helper functions and a
class with two methods and five instances, as an agent's program defines them; fifty instances
of a program's class; fifty dicts. Needs ``valgrind`` on the PATH.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.instructions import callgrind
from benchmarks.report import Report

_SRC = Path(__file__).resolve().parents[2] / "src"
_HELPER = '''
async def helper{i}(x, y=3, *, z=None):
    """Adds up."""
    total = 0
    for k in range(x):
        total += k * y
    await asyncio.sleep(0)
    return total + {i}
'''
_CLASS = """
class Item:
    def __init__(self, a):
        self.a = a

    def twice(self):
        return self.a * 2
"""
SHAPES = {
    "a module and a counter": "",
    "10 functions, a class, 5 instances": "".join(_HELPER.format(i=i) for i in range(10))
    + _CLASS
    + "items = [Item(i) for i in range(5)]\n",
    "50 instances of a program's class": _CLASS + "items = [Item(i) for i in range(50)]\n",
    "50 dicts": "items = [{'a': i, 'b': str(i)} for i in range(50)]\n",
}
_CHILD = """\
import asyncio, sys, time
from resumable.durability.capture.snapshot import Snapshotter
ns = {"__name__": "__main__", "asyncio": asyncio, "counter": 0}
exec(compile(sys.argv[1], "<program>", "exec"), ns)
snapshotter = Snapshotter()
if sys.argv[2] == "time":
    snapshotter.capture(ns)
    rounds = []
    for _ in range(int(sys.argv[3])):
        began = time.perf_counter()
        for _ in range(200):
            snapshotter.capture(ns)
        rounds.append((time.perf_counter() - began) / 200 * 1e6)
    print(sorted(rounds)[len(rounds) // 2])
else:
    for _ in range(int(sys.argv[2])):
        snapshotter.capture(ns)
"""
"""One process's captures of a shape: ``N`` of them (counted), or ``time R`` (median us)."""


def capture_options(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(repeat=5)
    parser.add_argument("--captures", type=int, default=100, help="N: counted at N and 3N")
    parser.add_argument("--base", type=Path, help="the src folder of a checkout to compare")
    parser.add_argument("--quick", action="store_true", help="N = 5, one round: a smoke test")


def _child(src: Path, source: str, *args: str) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    return [sys.executable, "-c", _CHILD, source, *args], env


def per_capture(src: Path, source: str, captures: int, cwd: Path) -> float:
    argv, env = _child(src, source)
    subprocess.run([*argv, "1"], cwd=cwd, env=env, check=True)  # compiles, uncounted
    low, _ = callgrind([*argv, str(captures)], cwd, env)
    high, _ = callgrind([*argv, str(3 * captures)], cwd, env)
    return (high - low) / (2 * captures)


def timed(src: Path, source: str, repeat: int, cwd: Path) -> float:
    """Microseconds of one capture, median of ``repeat`` rounds of 200."""
    argv, env = _child(src, source, "time", str(repeat))
    done = subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True, text=True)
    return float(done.stdout)


def bench_capture(args: argparse.Namespace) -> Report:
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    if args.quick:
        args.captures, args.repeat = 5, 1
    trees = {"this checkout": _SRC}
    if args.base is not None:
        trees = {"base": args.base.resolve(), **trees}
    rows = []
    summary: dict[str, object] = {"captures": args.captures}
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        for shape, source in SHAPES.items():
            counted = {n: per_capture(src, source, args.captures, cwd) for n, src in trees.items()}
            times = {n: timed(src, source, args.repeat, cwd) for n, src in trees.items()}
            row: list[object] = [shape]
            for name in trees:
                row += [round(counted[name]), round(times[name], 1)]
            if args.base is not None:
                row.append(round(counted["this checkout"] / counted["base"], 3))
            rows.append(tuple(row))
            summary[shape] = {"instructions": counted, "us": times}
    columns = ["namespace"]
    for name in trees:
        columns += [f"instructions: {name}", f"us: {name}"]
    if args.base is not None:
        columns.append("instructions x base")
    return Report(
        f"One namespace capture (slope between {args.captures} and {3 * args.captures} captures)",
        tuple(columns),
        rows,
        summary,
    )

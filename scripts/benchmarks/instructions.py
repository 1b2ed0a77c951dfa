"""`bench.py instructions`: CPU instructions per foreign await, counted, not timed.

    python scripts/bench.py instructions                       # this checkout
    python scripts/bench.py instructions --base ../other/src   # and another, side by side
    python scripts/bench.py instructions --shape stmt          # a statement per await

A shared machine's load moves a timed per-await cost by more than the few percent a change
to the await path makes; the number of instructions the process executes does not move
with the load. This counts them with valgrind's ``callgrind`` (no CPU counters needed) for a
``resumable exec`` of ``for i in range(N): await asyncio.sleep(0)`` at N and 3N awaits, with
``sync = "flush"`` (the write path without the disk's wait), and reports the slope: the
instructions one journaled await costs, start-up and the program's end taken out. With
``--shape stmt`` the program is N top-level statements ``x = await asyncio.sleep(0, x + 1)``
instead: the slope is then what a statement of one await costs (its compile, its
boundary record and namespace capture). With
``--base`` the same is counted for the source tree at that path (``PYTHONPATH``), and the
ratio is this checkout's over the base's. Both trees run the same program through their own
``python -m resumable exec``, once uncounted first: a tree whose modules are not compiled yet
would count their compilation in the first run (a slope off by several percent). Needs
``valgrind`` on the PATH (``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.report import Report

_PROGRAMS = {
    "loop": "import asyncio\n\nfor i in range({n}):\n    await asyncio.sleep(0)\nprint('done')\n",
    "stmt": "import asyncio\n\nx = 0\n{statements}print('done')\n",
}
_STATEMENT = "x = await asyncio.sleep(0, x + 1)\n"
_CONFIG = '[durability]\nenabled = true\nsync = "flush"\n'
_COLLECTED = re.compile(r"Collected : (\d+)")
_SRC = Path(__file__).resolve().parents[2] / "src"


def instructions_options(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(repeat=1)
    parser.add_argument("--awaits", type=int, default=1000, help="N: counted at N and 3N")
    parser.add_argument("--base", type=Path, help="the src folder of a checkout to compare")
    parser.add_argument("--quick", action="store_true", help="N = 50: a smoke test")
    parser.add_argument(
        "--shape",
        choices=sorted(_PROGRAMS),
        default="loop",
        help="N awaits in a loop, or N statements",
    )


def callgrind(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Instructions of one run of ``argv`` under callgrind, and what it printed."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{' '.join(argv)} under valgrind failed:\n{done.stdout}{done.stderr}")
    return int(found[1]), done.stdout


def _program(
    src: Path, awaits: int, folder: Path, shape: str = "loop"
) -> tuple[list[str], Path, dict[str, str]]:
    """The command, folder and environment of one ``resumable exec`` with ``awaits`` awaits."""
    work = folder / f"{src.parent.name}-{awaits}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    program = _PROGRAMS[shape].format(n=awaits, statements=_STATEMENT * awaits)
    (work / "loop.py").write_text(program, encoding="utf-8")
    (work / "playbooks.toml").write_text(_CONFIG, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    return [sys.executable, "-m", "resumable", "exec", "loop.py", "-q"], work, env


def count(src: Path, awaits: int, folder: Path, shape: str = "loop") -> int:
    """Instructions of one ``resumable exec`` of the program with ``awaits`` awaits."""
    argv, work, env = _program(src, awaits, folder, shape)
    counted, said = callgrind(argv, work, env)
    if "done" not in said:
        raise SystemExit(f"{' '.join(argv)} under valgrind printed {said!r}")
    return counted


def per_await(src: Path, awaits: int, folder: Path, shape: str = "loop") -> float:
    argv, work, env = _program(src, 1, folder, shape)
    subprocess.run(argv, cwd=work, env=env, capture_output=True, check=True)  # compiles, uncounted
    many, few = count(src, 3 * awaits, folder, shape), count(src, awaits, folder, shape)
    return (many - few) / (2 * awaits)


def bench_instructions(args: argparse.Namespace) -> Report:
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    if args.quick:
        args.awaits = 50
    trees = [("this checkout", _SRC)]
    if args.base is not None:
        trees.insert(0, ("base", args.base.resolve()))
    with tempfile.TemporaryDirectory() as folder:
        counted = {
            name: per_await(src, args.awaits, Path(folder), args.shape) for name, src in trees
        }
    first = next(iter(counted.values()))
    rows = [(name, round(value), round(value / first, 3)) for name, value in counted.items()]
    summary = {"awaits": args.awaits, "shape": args.shape, "instructions_per_await": counted}
    what = "statements of one await" if args.shape == "stmt" else "awaits in a loop"
    return Report(
        f"Instructions per journaled await (slope between {args.awaits} and "
        f"{3 * args.awaits} {what}, sync = flush)",
        ("tree", "instructions per await", "x first"),
        rows,
        summary,
    )

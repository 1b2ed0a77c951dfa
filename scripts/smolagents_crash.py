#!/usr/bin/env python
"""Kill the smolagents example after every record N, resume it, compare with no crash.

    python scripts/smolagents_crash.py            # every N until the run completes
    python scripts/smolagents_crash.py 5 17 40    # only these N

For each N: ``RESUMABLE_CRASH_AFTER=N`` kills the first process with SIGKILL right after
record N is durable; a fresh process with the same run id finishes the run. Its answer
must equal the answer of the same agent on smolagents' LocalPythonExecutor, the ledger
its tools wrote must equal that run's ledger (each effect once), the agent's memory must
equal an uninterrupted durable run's, and the model must not have been called more
times in all than in the uninterrupted run.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import crash_sweep
from crash_sweep import ROOT, arguments, differences, sweep

MAIN = ROOT / "examples" / "smolagents" / "run_agent.py"


@dataclass(frozen=True)
class Result(crash_sweep.Result):
    """A finished run, with the agent's memory steps as the example saved them."""

    memory: list[dict[str, object]]


def run_example(folder: Path, *args: str, crash_after: int | None = None) -> Result:
    """Run the example once (a crashed first process, if ``crash_after``, then a resume)."""
    files = {
        "SHOP_LEDGER": str(folder / "ledger"),
        "SHOP_CALLS": str(folder / "calls"),
        "SHOP_MEMORY": str(folder / "memory.json"),
    }
    finished = crash_sweep.run_example(MAIN, folder, args, files, crash_after)
    return Result(**vars(finished), memory=json.loads((folder / "memory.json").read_text()))


def baselines(folder: Path) -> tuple[Result, Result]:
    """(smolagents' own executor, resumable's executor without a crash)."""
    (folder / "local").mkdir()
    (folder / "durable").mkdir()
    local = run_example(folder / "local", "--local")
    durable = run_example(folder / "durable", "r1", str(folder / "durable" / "store"))
    return local, durable


def problems(n: int, folder: Path, local: Result, durable: Result) -> tuple[list[str], int]:
    """What differs after a crash at record ``n`` (empty: exact), and the first exit code."""
    work = folder / f"crash-{n}"
    work.mkdir()
    got = run_example(work, "r1", str(work / "store"), crash_after=n)
    found = differences(got, local, durable)
    if got.memory != durable.memory:
        found.append("memory steps differ from the uninterrupted run")
    return found, got.returncode


def main(argv: list[str]) -> int:
    args = arguments(__doc__).parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        local, durable = baselines(folder)
        print(f"local answer: {local.answer}; durable: {durable.answer}; calls {durable.calls}")
        return sweep(args.points, lambda n: problems(n, folder, local, durable))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

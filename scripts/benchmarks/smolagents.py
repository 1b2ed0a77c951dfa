"""``bench.py smolagents``: the scripted shop agent with resumable's executor vs smolagents'.

The same CodeAgent run (examples/smolagents: five code actions, six tool calls, one
failing action) in this process, timed end to end: with smolagents' own
LocalPythonExecutor (no durability) and with DurablePythonExecutor under
``durable_agent`` on a file store (every model response, statement, tool call and
memory step checkpointed), for each ``sync`` setting. The runs alternate within each
round, so the ratios hold on a loaded machine.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "smolagents"))


def smolagents_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", type=Path, help="where the stores go (default: a temp folder)")
    parser.add_argument("--quick", action="store_true", help="3 rounds instead of --repeat")


def bench_smolagents(args: argparse.Namespace) -> Any:
    from shop import TASK, build_agent

    from benchmarks.report import Report, median_seconds
    from resumable.integrations.smolagents import durable_agent

    folder = Path(tempfile.mkdtemp(dir=args.dir))
    os.environ["SHOP_LEDGER"] = str(folder / "ledger")
    counter = itertools.count()
    answers: set[str] = set()

    def local() -> None:
        answers.add(str(build_agent(durable=False).run(TASK)))

    def durable(sync: str) -> Any:
        def run() -> None:
            os.environ["RESUMABLE_DURABILITY_SYNC"] = sync
            agent = durable_agent(
                build_agent(), run_id=f"bench-{next(counter)}", store=folder / "store"
            )
            answers.add(str(agent.run(TASK)))

        return run

    repeat = 3 if args.quick else args.repeat
    try:
        times = median_seconds(
            {"local": local, "flush": durable("flush"), "fsync": durable("fsync")}, repeat
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop("RESUMABLE_DURABILITY_SYNC", None)
    base = times["local"]
    rows = [
        ("LocalPythonExecutor (smolagents)", base * 1000, 1.0),
        ('DurablePythonExecutor, sync="flush"', times["flush"] * 1000, times["flush"] / base),
        ('DurablePythonExecutor, sync="fsync"', times["fsync"] * 1000, times["fsync"] / base),
    ]
    return Report(
        "The scripted shop agent run (5 code actions, 6 tool calls), median wall time",
        ("executor", "ms per run", "x local"),
        rows,
        {"rounds": repeat, "same answer": len(answers) == 1},
        ok=len(answers) == 1,
    )

#!/usr/bin/env python
"""Benchmarks of resumable, one subcommand each.

    python scripts/bench.py splitter            # a table
    python scripts/bench.py splitter --json     # machine-readable results

A benchmark is a module of ``benchmarks/``: a function ``bench_<name>`` taking the
parsed arguments and returning a :class:`~benchmarks.report.Report`, its options (if
any) from ``<name>_options``, and one entry in ``BENCHMARKS`` here. This file only
dispatches: the modules share ``benchmarks/report.py`` below them and never import it.
Every timing is the median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from benchmarks.report import Report


@dataclass(frozen=True, slots=True)
class Benchmark:
    module: str
    """The module of ``benchmarks/``, imported only when the command line is built: some
    load the whole runtime or a store driver."""
    help: str

    def load(self) -> ModuleType:
        return importlib.import_module(f"benchmarks.{self.module}")

    def run(self, args: argparse.Namespace) -> Report:
        run: Callable[[argparse.Namespace], Report] = getattr(self.load(), f"bench_{self.module}")
        return run(args)

    def options(self, parser: argparse.ArgumentParser) -> None:
        options = getattr(self.load(), f"{self.module}_options", None)
        if options is not None:
            options(parser)


BENCHMARKS: dict[str, Benchmark] = {
    "splitter": Benchmark("splitter", "statement splitter vs ast.parse"),
    "checkpoint": Benchmark(
        "checkpoint",
        "per-await cost of durability against its baselines; bytes per await; resume time",
    ),
    "stores": Benchmark("stores", "per-await cost and concurrent throughput of each store"),
    "replay": Benchmark(
        "replay", "resuming a statement with 10,000 completed foreign awaits, per await"
    ),
    "fsync": Benchmark(
        "fsync", 'a durable await with sync="fsync" against raw append+fsync, in alternating phases'
    ),
    "stmt-shape": Benchmark(
        "stmt_shape", 'statements of one await each with sync="fsync" against raw append+fsync'
    ),
    "resume": Benchmark(
        "resume", "resume of runs of 1k and 10k records: load time beyond the snapshot's decoding"
    ),
    "group-commit": Benchmark(
        "group_commit",
        'concurrent runs and tasks in one process with sync="fsync": fsyncs per await',
    ),
    "smolagents": Benchmark(
        "smolagents",
        "the scripted smolagents CodeAgent with DurablePythonExecutor vs LocalPythonExecutor",
    ),
    "pg": Benchmark("pg", "PostgreSQL append against a raw INSERT round trip; 64 concurrent runs"),
    "fleet": Benchmark(
        "fleet", "fleet submit-to-claim latency with NOTIFY against polling; runs/s"
    ),
    "set-order": Benchmark(
        "set_order", "capture and restore of a set with its hash table against pickle's"
    ),
    "startup": Benchmark(
        "startup", "resumable exec hi.py against python hi.py, --version against python -c pass"
    ),
    "long-statement": Benchmark(
        "long_statement", "per-await cost of one statement of N and 10N awaits (flat: 1.0)"
    ),
    "segments": Benchmark(
        "segments", "a store append into a preallocated segment against raw appends (--before)"
    ),
    "instructions": Benchmark(
        "instructions", "CPU instructions per journaled await (valgrind), against a --base tree"
    ),
    "capture": Benchmark(
        "capture", "instructions of one namespace capture for program shapes, against a --base"
    ),
    "growth": Benchmark(
        "growth", "bytes a long run stores, and what a statement beside a large value writes"
    ),
    "peers": Benchmark(
        "peers", "the same killed-and-resumed job on resumable exec, LangGraph and DBOS"
    ),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmarks of resumable.")
    commands = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    for name, benchmark in BENCHMARKS.items():
        sub = commands.add_parser(name, help=benchmark.help, description=benchmark.help)
        sub.add_argument("--json", action="store_true", help="print the results as JSON")
        sub.add_argument("--repeat", type=int, default=7, help="runs per timing (median)")
        benchmark.options(sub)
    args = parser.parse_args(argv)
    report = BENCHMARKS[args.benchmark].run(args)
    print(json.dumps(report.as_json(args.benchmark), indent=2) if args.json else report.as_table())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

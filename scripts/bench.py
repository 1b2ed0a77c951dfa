#!/usr/bin/env python
"""Benchmarks of resumable, one subcommand each.

    python scripts/bench.py splitter            # a table
    python scripts/bench.py splitter --json     # machine-readable results

A benchmark is one function taking the parsed arguments and returning a
:class:`Report`, plus one entry in ``BENCHMARKS`` (its options, if any, come
from that entry's ``options`` function). Every timing is the median of
``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import ast
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resumable.exec.streaming import StatementSplitter


@dataclass(frozen=True, slots=True)
class Report:
    """What a benchmark measured: table rows (the first column names the row) and a summary."""

    title: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    summary: dict[str, Any] = field(default_factory=dict)
    ok: bool = True  # False when a --max-* budget was exceeded

    def as_json(self, name: str) -> dict[str, Any]:
        rows = [dict(zip(self.columns, row, strict=True)) for row in self.rows]
        return {"benchmark": name, "title": self.title, "rows": rows, **self.summary, "ok": self.ok}

    def as_table(self) -> str:
        cells = [self.columns, *(tuple(_cell(value) for value in row) for row in self.rows)]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.columns))]
        lines = [self.title, ""]
        for number, row in enumerate(cells):
            lines.append(
                "  ".join(
                    text.ljust(width) if i == 0 else text.rjust(width)
                    for i, (text, width) in enumerate(zip(row, widths, strict=True))
                )
            )
            if number == 0:
                lines.append("  ".join("-" * width for width in widths))
        lines += ["", *(f"{key}: {_cell(value)}" for key, value in self.summary.items())]
        return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def median_seconds(runs: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median wall time of each run over ``repeat`` rounds, garbage collector off.

    The runs take turns within a round, so a load change on a shared machine
    affects all of them alike and their ratios stay meaningful.
    """
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            gc.collect()
            gc.disable()  # as timeit does: the collector's pauses are not the code's cost
            try:
                began = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - began)
            finally:
                gc.enable()
    return {name: statistics.median(values) for name, values in times.items()}


# -- splitter -------------------------------------------------------------------

SPLITTER_CANDIDATES = ("_pydecimal.py", "typing.py", "argparse.py", "inspect.py", "turtle.py")


def splitter_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--file",
        type=Path,
        help="source to split (default: the largest of "
        + ", ".join(SPLITTER_CANDIDATES)
        + " in the standard library)",
    )
    parser.add_argument("--chunk", type=int, default=4, help="characters per chunk (default 4)")
    parser.add_argument(
        "--max-ratio", type=float, help="fail (exit 1) above this ratio to ast.parse"
    )


def largest_library_source() -> Path:
    library = Path(os.path.dirname(ast.__file__))
    found = [library / name for name in SPLITTER_CANDIDATES if (library / name).is_file()]
    if not found:
        raise SystemExit("none of the candidate sources is in the standard library; pass --file")
    return max(found, key=lambda path: len(path.read_text(encoding="utf-8")))


def bench_splitter(args: argparse.Namespace) -> Report:
    """A large real source fed in small chunks, against one ast.parse of the whole text."""
    path: Path = args.file or largest_library_source()
    text = path.read_text(encoding="utf-8")
    chunks = [text[i : i + args.chunk] for i in range(0, len(text), args.chunk)]
    expected = len(ast.parse(text).body)

    def split(pieces: list[str]) -> int:
        splitter = StatementSplitter()
        count = 0
        for piece in pieces:
            count += len(splitter.feed(piece))
        return count + len(splitter.close())

    if split(chunks) != expected:
        raise SystemExit(f"the splitter does not find the {expected} statements of {path}")
    median = median_seconds(
        {
            "parse": lambda: ast.parse(text),
            "chunked": lambda: split(chunks),
            "whole": lambda: split([text]),
        },
        args.repeat,
    )
    parse, chunked, whole = median["parse"], median["chunked"], median["whole"]
    ratio = chunked / parse
    rows = [
        ("ast.parse, whole text once", parse * 1000, 1.0, "-"),
        (
            f"StatementSplitter, {args.chunk}-char chunks",
            chunked * 1000,
            ratio,
            chunked / len(chunks) * 1e6,
        ),
        ("StatementSplitter, one chunk", whole * 1000, whole / parse, "-"),
    ]
    return Report(
        title=f"Splitting {path.name} ({len(text)} chars, {text.count(chr(10))} lines, "
        f"{expected} statements, Python {sys.version.split()[0]})",
        columns=("run", "ms (median)", "x ast.parse", "us per chunk"),
        rows=rows,
        summary={
            "file": str(path),
            "chars": len(text),
            "chunks": len(chunks),
            "statements": expected,
            "repeat": args.repeat,
            "ratio": round(ratio, 3),
        },
        ok=args.max_ratio is None or ratio <= args.max_ratio,
    )


# -- registry -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Benchmark:
    run: Callable[[argparse.Namespace], Report]
    help: str
    options: Callable[[argparse.ArgumentParser], None] | None = None


def bench_checkpoint(args: argparse.Namespace) -> Report:
    from bench_checkpoint import bench_checkpoint as run  # imports the whole runtime

    return run(args)


def checkpoint_options(parser: argparse.ArgumentParser) -> None:
    from bench_checkpoint import checkpoint_options as options

    options(parser)


def bench_stores(args: argparse.Namespace) -> Report:
    from bench_stores import bench_stores as run  # imports the store drivers

    return run(args)


def stores_options(parser: argparse.ArgumentParser) -> None:
    from bench_stores import stores_options as options

    options(parser)


def bench_fsync(args: argparse.Namespace) -> Report:
    from bench_fsync import bench_fsync as run

    return run(args)


def fsync_options(parser: argparse.ArgumentParser) -> None:
    from bench_fsync import fsync_options as options

    options(parser)


def bench_stmt_shape(args: argparse.Namespace) -> Report:
    from bench_stmt_shape import bench_stmt_shape as run

    return run(args)


def stmt_shape_options(parser: argparse.ArgumentParser) -> None:
    from bench_stmt_shape import stmt_shape_options as options

    options(parser)


def bench_resume(args: argparse.Namespace) -> Report:
    from bench_resume import bench_resume as run

    return run(args)


def resume_options(parser: argparse.ArgumentParser) -> None:
    from bench_resume import resume_options as options

    options(parser)


def bench_group_commit(args: argparse.Namespace) -> Report:
    from bench_group_commit import bench_group_commit as run

    return run(args)


def group_commit_options(parser: argparse.ArgumentParser) -> None:
    from bench_group_commit import group_commit_options as options

    options(parser)


def bench_smolagents(args: argparse.Namespace) -> Report:
    from bench_smolagents import bench_smolagents as run  # imports smolagents

    report: Report = run(args)
    return report


def smolagents_options(parser: argparse.ArgumentParser) -> None:
    from bench_smolagents import smolagents_options as options

    options(parser)


def bench_replay(args: argparse.Namespace) -> Report:
    from bench_replay import bench_replay as run

    return run(args)


def replay_options(parser: argparse.ArgumentParser) -> None:
    from bench_replay import replay_options as options

    options(parser)


def bench_pg(args: argparse.Namespace) -> Report:
    from bench_pg import bench_pg as run  # imports the PostgreSQL driver

    return run(args)


def pg_options(parser: argparse.ArgumentParser) -> None:
    from bench_pg import pg_options as options

    options(parser)


def bench_fleet(args: argparse.Namespace) -> Report:
    from bench_fleet import bench_fleet as run  # imports the fleet and the runtime

    return run(args)


def fleet_options(parser: argparse.ArgumentParser) -> None:
    from bench_fleet import fleet_options as options

    options(parser)


def bench_set_order(args: argparse.Namespace) -> Report:
    from bench_set_order import bench_set_order as run

    return run(args)


def set_order_options(parser: argparse.ArgumentParser) -> None:
    from bench_set_order import set_order_options as options

    options(parser)


def bench_startup(args: argparse.Namespace) -> Report:
    from bench_startup import bench_startup as run

    return run(args)


def startup_options(parser: argparse.ArgumentParser) -> None:
    from bench_startup import startup_options as options

    options(parser)


BENCHMARKS: dict[str, Benchmark] = {
    "splitter": Benchmark(bench_splitter, "statement splitter vs ast.parse", splitter_options),
    "checkpoint": Benchmark(
        bench_checkpoint,
        "per-await cost of durability against its baselines; bytes per await; resume time",
        checkpoint_options,
    ),
    "stores": Benchmark(
        bench_stores,
        "per-await cost and concurrent throughput of each store",
        stores_options,
    ),
    "replay": Benchmark(
        bench_replay,
        "resuming a statement with 10,000 completed foreign awaits, per await",
        replay_options,
    ),
    "fsync": Benchmark(
        bench_fsync,
        'a durable await with sync="fsync" against raw append+fsync, in alternating phases',
        fsync_options,
    ),
    "stmt-shape": Benchmark(
        bench_stmt_shape,
        'statements of one await each with sync="fsync" against raw append+fsync',
        stmt_shape_options,
    ),
    "resume": Benchmark(
        bench_resume,
        "resume of runs of 1k and 10k records: load time beyond the snapshot's decoding",
        resume_options,
    ),
    "group-commit": Benchmark(
        bench_group_commit,
        'concurrent runs and tasks in one process with sync="fsync": fsyncs per await',
        group_commit_options,
    ),
    "smolagents": Benchmark(
        bench_smolagents,
        "the scripted smolagents CodeAgent with DurablePythonExecutor vs LocalPythonExecutor",
        smolagents_options,
    ),
    "pg": Benchmark(
        bench_pg,
        "PostgreSQL append against a raw INSERT round trip; 64 concurrent runs",
        pg_options,
    ),
    "fleet": Benchmark(
        bench_fleet,
        "fleet submit-to-claim latency with NOTIFY against polling; runs/s",
        fleet_options,
    ),
    "set-order": Benchmark(
        bench_set_order,
        "capture and restore of a set with its hash table against pickle's",
        set_order_options,
    ),
    "startup": Benchmark(
        bench_startup,
        "resumable exec hi.py against python hi.py, --version against python -c pass",
        startup_options,
    ),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmarks of resumable.")
    commands = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    for name, benchmark in BENCHMARKS.items():
        sub = commands.add_parser(name, help=benchmark.help, description=benchmark.help)
        sub.add_argument("--json", action="store_true", help="print the results as JSON")
        sub.add_argument("--repeat", type=int, default=7, help="runs per timing (median)")
        if benchmark.options is not None:
            benchmark.options(sub)
    args = parser.parse_args(argv)
    report = BENCHMARKS[args.benchmark].run(args)
    print(json.dumps(report.as_json(args.benchmark), indent=2) if args.json else report.as_table())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

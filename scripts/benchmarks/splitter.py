"""`bench.py splitter`: the statement splitter fed a large real source in small chunks.

python scripts/bench.py splitter
python scripts/bench.py splitter --file /path/to/lib/python3.11/typing.py
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from pathlib import Path

from benchmarks.report import Report, median_seconds
from resumable.exec.stream_syntax import body_lines
from resumable.exec.streaming import StatementSplitter

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


class LineCollector:
    """The least a streaming splitter does with each chunk: a chunk without a newline is
    kept (the checks of the splitter's own fast path), and one with a newline ends a line,
    joined and matched against the block-lines pattern. Its cost is the floor of the
    per-chunk calls, beside which the splitter's own work is measured."""

    def __init__(self) -> None:
        self._probe = False
        self._error: SyntaxError | None = None
        self._partial: list[str] = []
        self._lines: list[str] = []
        self._pattern = body_lines()

    def feed(self, chunk: str) -> list[str]:
        if not self._probe and "\n" not in chunk and self._error is None:
            self._partial.append(chunk)
            return []
        newline = chunk.rfind("\n")
        self._partial.append(chunk[: newline + 1])
        line = "".join(self._partial)
        self._pattern.match(line)
        self._lines.append(line)
        rest = chunk[newline + 1 :]
        self._partial = [rest] if rest else []
        return []


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

    def collect(pieces: list[str]) -> int:
        collector = LineCollector()
        count = 0
        for piece in pieces:
            count += len(collector.feed(piece))
        return count

    if split(chunks) != expected:
        raise SystemExit(f"the splitter does not find the {expected} statements of {path}")
    median = median_seconds(
        {
            "parse": lambda: ast.parse(text),
            "chunked": lambda: split(chunks),
            "whole": lambda: split([text]),
            "floor": lambda: collect(chunks),
        },
        args.repeat,
    )
    parse, chunked, whole = median["parse"], median["chunked"], median["whole"]
    floor = median["floor"]
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
        (
            f"lines collected, {args.chunk}-char chunks",
            floor * 1000,
            floor / parse,
            floor / len(chunks) * 1e6,
        ),
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
            "one_chunk_ratio": round(whole / parse, 3),
            "collect_ratio": round(floor / parse, 3),
        },
        ok=args.max_ratio is None or ratio <= args.max_ratio,
    )

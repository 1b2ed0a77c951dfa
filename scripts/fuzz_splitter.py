#!/usr/bin/env python
"""Fuzz the statement splitter against ``ast.parse`` on every Python file of a tree.

For each file that parses: several random chunkings (1 character up to a few
lines) must give statements whose sources are exact slices of the text, whose
trees dump like the whole-file parse, node for node, at the same lines. Then
random single-character mutations: when the mutated file parses, the splitter
must agree with it; when it does not, the splitter must raise ``SyntaxError``.

    python scripts/fuzz_splitter.py                   # the standard library
    python scripts/fuzz_splitter.py --root src --chunkings 20 --mutations 20

Prints progress and a summary; exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from resumable.exec.streaming import Statement, StatementSplitter

# Characters a mutation inserts: the ones the splitter's lexer cares about, and some others.
MUTATION_CHARS = "()[]{}'\"#;:\\\n \t@x0.="


@dataclass
class Tally:
    files: int = 0
    skipped: int = 0
    chunkings: int = 0
    statements: int = 0
    mutations: int = 0
    rejected: int = 0  # mutations that do not parse, and that the splitter rejected
    same_line: int = 0  # ... with the same error line as the whole-file parse
    mismatches: list[str] = field(default_factory=list)


def python_files(root: Path, max_chars: int, tally: Tally) -> Iterator[tuple[Path, str]]:
    """Files under root that parse as a whole (the others are counted as skipped)."""
    for path in sorted(root.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
            if len(text) > max_chars:
                raise ValueError("too large")
            ast.parse(text)
        except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError, OSError):
            tally.skipped += 1
            continue
        yield path, text


def chunking(text: str, rng: random.Random) -> list[str]:
    """Random chunk sizes: 1 character, up to a few hundred, or whole lines."""
    if rng.random() < 0.2:
        lines = text.split("\n")
        out, i = [], 0
        while i < len(lines):
            n = rng.randint(1, 4)
            out.append("\n".join(lines[i : i + n]) + ("\n" if i + n < len(lines) else ""))
            i += n
        return out
    largest = rng.choice([1, 2, 3, 5, 8, 16, 64, 300])
    out, i = [], 0
    while i < len(text):
        n = rng.randint(1, largest)
        out.append(text[i : i + n])
        i += n
    return out


def split(chunks: list[str]) -> list[Statement]:
    splitter = StatementSplitter()
    out: list[Statement] = []
    for chunk in chunks:
        out += splitter.feed(chunk)
    return out + splitter.close()


def compare(text: str, statements: list[Statement], whole: list[ast.stmt]) -> str | None:
    """Why the statements disagree with the whole-file parse, or None."""
    got: list[tuple[int, str]] = []
    for number, statement in enumerate(statements):
        if text[statement.start : statement.end] != statement.source:
            return f"statement {number} at {statement.start} is not its slice of the stream"
        if statement.tree is None:
            return f"statement {number} has no tree"
        for node in statement.tree:
            got.append((statement.line + node.lineno - 1, ast.dump(node)))
    expected = [(node.lineno, ast.dump(node)) for node in whole]
    for number, (mine, theirs) in enumerate(zip(got, expected, strict=False)):
        if mine != theirs:
            return (
                f"node {number}: line {mine[0]} {mine[1][:60]} != line {theirs[0]} {theirs[1][:60]}"
            )
    if len(got) != len(expected):
        return f"{len(got)} nodes, the whole-file parse has {len(expected)}"
    return None


def mutate(text: str, rng: random.Random) -> str:
    at = rng.randrange(len(text) + 1)
    action = rng.random()
    if action < 0.4 and at < len(text):
        return text[:at] + text[at + 1 :]
    if action < 0.8:
        return text[:at] + rng.choice(MUTATION_CHARS) + text[at:]
    return text[:at] + "    " + text[at:]


def check_file(path: Path, text: str, args: argparse.Namespace, tally: Tally) -> None:
    rng = random.Random(f"{args.seed}:{path.name}:{len(text)}")
    whole = ast.parse(text).body
    for _ in range(args.chunkings):
        chunks = chunking(text, rng)
        try:
            statements = split(chunks)
        except SyntaxError as exc:
            tally.mismatches.append(f"{path}: valid file rejected at line {exc.lineno}: {exc.msg}")
            return
        tally.chunkings += 1
        tally.statements += len(statements)
        if why := compare(text, statements, whole):
            tally.mismatches.append(f"{path}: {why}")
            return
    for _ in range(args.mutations):
        mutated = mutate(text, rng)
        try:
            expected: list[ast.stmt] | SyntaxError = ast.parse(mutated).body
        except (SyntaxError, ValueError) as exc:
            expected = exc if isinstance(exc, SyntaxError) else SyntaxError(str(exc))
        except (RecursionError, MemoryError):
            continue
        tally.mutations += 1
        try:
            statements = split(chunking(mutated, rng))
        except SyntaxError as exc:
            if not isinstance(expected, SyntaxError):
                tally.mismatches.append(
                    f"{path}: valid mutation rejected: {exc.msg} line {exc.lineno}"
                )
                return
            tally.rejected += 1
            tally.same_line += exc.lineno == expected.lineno
            continue
        if isinstance(expected, SyntaxError):
            tally.mismatches.append(
                f"{path}: invalid mutation accepted ({expected.msg}, line {expected.lineno})"
            )
            return
        if why := compare(mutated, statements, expected):
            tally.mismatches.append(f"{path}: mutation: {why}")
            return


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root", type=Path, default=Path(os.path.dirname(ast.__file__)), help="tree to walk"
    )
    parser.add_argument("--chunkings", type=int, default=4, help="random chunkings per file")
    parser.add_argument("--mutations", type=int, default=4, help="random mutations per file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=0, help="stop after this many files (0: all)")
    parser.add_argument("--max-chars", type=int, default=400_000, help="skip larger files")
    parser.add_argument("--every", type=int, default=100, help="progress line every N files")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # invalid escapes and the like in the files walked
    sys.setrecursionlimit(10_000)

    tally = Tally()
    began = time.perf_counter()
    for path, text in python_files(args.root, args.max_chars, tally):
        check_file(path, text, args, tally)
        tally.files += 1
        if tally.files % args.every == 0:
            print(
                f"[{time.perf_counter() - began:6.1f}s] {tally.files} files, "
                f"{tally.chunkings} chunkings, {tally.mutations} mutations, "
                f"{len(tally.mismatches)} mismatches",
                flush=True,
            )
        if args.limit and tally.files >= args.limit:
            break

    for mismatch in tally.mismatches[:20]:
        print("MISMATCH", mismatch)
    rejected = max(tally.rejected, 1)
    print(
        f"\n{tally.files} files ({tally.skipped} skipped: do not parse, not UTF-8, or too large), "
        f"{tally.chunkings} chunkings, {tally.statements} statements, "
        f"{tally.mutations} mutations ({tally.rejected} rejected as the whole-file parse does, "
        f"{100 * tally.same_line / rejected:.0f}% at the same line), "
        f"{len(tally.mismatches)} mismatches, {time.perf_counter() - began:.1f}s"
    )
    return 1 if tally.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())

"""Every crash point of every process-state program of the corpus, not the sample CI runs.

    PYTHONPATH=src python scripts/state_sweep.py             # all state_* and nondeterminism_*
    PYTHONPATH=src python scripts/state_sweep.py state_logging

For each program: plain CPython once, an uninterrupted ``resumable exec``, then for every record
N a run killed after N and resumed in a process started with another hash seed. Prints one line
per program: points tried, points exact, and the first points that were not.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.replay.state_harness import PROGRAMS, clean, crashed_and_resumed, plain


def sweep(program: Path) -> tuple[int, list[int]]:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        reference = plain(program, base)
        _, kinds = clean(program, base)
        wrong = []
        points = range(1, len(kinds))
        for after in points:
            got = crashed_and_resumed(program, base, after, resume_seed="7")
            if program.stem.startswith("nondeterminism_"):
                exact = (got.code, got.stdout) == (reference.code, reference.stdout)
            else:
                exact = got == reference
            if not exact:
                wrong.append(after)
        return len(points), wrong


def main(names: list[str]) -> int:
    programs = sorted(PROGRAMS.glob("state_*.py")) + sorted(PROGRAMS.glob("nondeterminism_*.py"))
    if names:
        programs = [p for p in programs if p.stem in names]
    failed = 0
    for program in programs:
        tried, wrong = sweep(program)
        failed += bool(wrong)
        print(f"{program.stem}: {tried - len(wrong)}/{tried} crash points exact", end="")
        print(f"; wrong after records {wrong[:10]}" if wrong else "", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

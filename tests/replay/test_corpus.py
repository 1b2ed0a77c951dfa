"""The replay corpus: each program under resumable equals plain CPython, killed or not.

Clean runs of every program, and a deterministic sample of crash points per program
(plus every point of three programs); ``scripts/replay_sweep.py`` kills every program
after every record.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from tests.replay import harness

ALL_POINTS = ("exit_error.py", "library_generators.py", "library_genexp.py")
"""Killed after every record: a generator the library resumes (``aclosing``'s ``aclose()``,
a generator expression it consumes) must be made again wherever the kill lands, not only at
the sampled points."""


def _points(program: str, records: int) -> list[int]:
    """Two crash points chosen from the program's name: the same on every CI run."""
    chosen = 1 + zlib.crc32(program.encode()) % records
    return sorted({chosen, max(1, records - 1)})


def _same(expected: harness.Observed, got: harness.Observed, what: str) -> None:
    assert got.code == expected.code, f"{what}: exit code\n{got.stderr}"
    assert got.stdout == expected.stdout, f"{what}: stdout\n{got.stderr}"
    assert got.ledger == expected.ledger, f"{what}: ledger"
    assert got.files == expected.files, f"{what}: files written"


def test_the_corpus_has_enough_programs() -> None:
    assert len(harness.PROGRAMS) >= 25


@pytest.mark.parametrize("program", harness.PROGRAMS)
def test_clean_and_crashed_runs_equal_cpython(tmp_path: Path, program: str) -> None:
    expected = harness.reference(tmp_path, program)
    got, records = harness.clean(tmp_path, program)
    _same(expected, got, "clean run")
    assert "Traceback" not in got.stderr or expected.code != 0
    points = range(1, records + 1) if program in ALL_POINTS else _points(program, records)
    for point in points:
        crashed = harness.crashed(tmp_path, program, point)
        _same(expected, crashed, f"killed after record {point} and resumed")
        assert "never retrieved" not in crashed.stderr

"""The text of a statement, as a failure names it, is exact for any statement, and a
statement of megabytes runs (its text is cut from line and column offsets in linear time)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import resumable
from resumable.durability.embedded.turn import source_segment

SOURCES = [
    "a = 1\n",
    "x = 'é€😀'\ny = 2",
    "if x:\r\n    y = 'ü'\r\nz = [1,\n 2]\n",
    "a=1; b = 'ß'  # c\n",
    "\f\nq = (1 +\r 2)\n",
    "def f():\n    return 'ä'\n",
]


@pytest.mark.parametrize("source", SOURCES)
def test_the_segment_of_every_node_is_what_python_gives(source: str) -> None:
    for node in ast.walk(ast.parse(source)):
        if hasattr(node, "lineno"):
            assert source_segment(source, node) == ast.get_source_segment(source, node)


def test_a_node_past_the_end_has_no_segment() -> None:
    node = ast.parse("a = 1\nb = 2\n").body[1]
    assert source_segment("a = 1\n", node) is None


def test_a_statement_of_megabytes_runs_and_a_failure_names_its_text(tmp_path: Path) -> None:
    literal = "é" * 1_000_000 + "x" * 2_000_000
    failing = f"t = '{literal}' + 1"
    with resumable.open_run("big", store=tmp_path / "store") as run:
        executor = run.executor()
        outcome = executor.run_code(f"a = 1\ns = '{literal}'\nlen(s)\n")
        assert outcome.error is None
        assert outcome.value == 3_000_000
        failed = executor.run_code(f"b = 2\n{failing}\n")
        assert failed.error is not None
        assert failed.error.exc_type == "TypeError"
        assert failed.error.line == 2
        assert failed.error.statement == failing

"""A statement deeper than Python's parser or compiler go (a 100,000-term sum) is a program
error naming its line, in `resumable exec` and in the embedded executor, never a
RecursionError out of the executor; one `python` runs (a 900-term sum, a list nested as
deep as the parser allows) runs the same, though the runtime's own frames are on the stack
and the rewrite recurses per level."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.crash.harness import resumable as cli

import resumable

DEEP = "y = 2\nx = " + "+".join(["1"] * 100_000) + "\nprint(x)\n"
SUM = "y = 2\nx = " + "+".join(["1"] * 900) + "\nprint(x)\n"  # deeper than the rewrite went
NESTED = "x = " + "[" * 199 + "]" * 199 + "\nprint(x)\n"  # as deep as the parser nests brackets
AWAITED = (  # the await at the bottom of the tree, routed through the hook
    "import asyncio\n\nasync def one():\n    await asyncio.sleep(0)\n    return 1\n\n"
    "x = " + "+".join(["1"] * 899) + "+ await one()\nprint(x)\n"
)
TOO_DEEP = (
    "the statement is nested too deeply for Python to compile (RecursionError); "
    "split it into smaller statements"
)


def test_exec_refuses_a_script_too_deep_to_parse_naming_the_line(tmp_path: Path) -> None:
    (tmp_path / "deep.py").write_text(DEEP)
    refused = cli(["exec", "deep.py"], tmp_path, timeout=120)
    assert refused.code == 2
    assert refused.stdout == ""
    assert refused.stderr.splitlines() == [f"resumable: error: deep.py:2: {TOO_DEEP}"]


@pytest.mark.parametrize("source", [SUM, NESTED, AWAITED], ids=["sum", "nested", "awaited"])
def test_exec_runs_a_deep_statement_python_runs(tmp_path: Path, source: str) -> None:
    (tmp_path / "deep.py").write_text(source)
    expected = subprocess.run(
        [sys.executable, "-c", _AS_PYTHON, "deep.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert expected.returncode == 0, expected.stderr
    ran = cli(["exec", "-q", "deep.py"], tmp_path, timeout=120)
    assert (ran.code, ran.stdout) == (0, expected.stdout)


_AS_PYTHON = """
import ast, asyncio, sys
code = compile(open(sys.argv[1]).read(), sys.argv[1], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
async def main():
    result = eval(code, {"__name__": "__main__"})
    if result is not None:
        await result
asyncio.run(main())
"""


@pytest.mark.parametrize("streamed", [False, True], ids=["run_code", "feed"])
def test_the_embedded_executor_reports_a_too_deep_statement_as_a_failure(
    tmp_path: Path, streamed: bool
) -> None:
    with resumable.open_run("deep", store=tmp_path / "store") as run:
        executor = run.executor()
        if streamed:
            executor.feed(DEEP)
            outcome = executor.finish()
        else:
            outcome = executor.run_code(DEEP)
        assert outcome.error is not None
        assert outcome.error.line == 2
        assert TOO_DEEP in outcome.error.message
        assert outcome.output == ""
        after = executor.run_code("z = 3\nz")
        assert after.error is None
        assert after.value == 3


@pytest.mark.parametrize("streamed", [False, True], ids=["run_code", "feed"])
def test_the_embedded_executor_runs_a_deep_statement_python_runs(
    tmp_path: Path, streamed: bool
) -> None:
    with resumable.open_run("deep", store=tmp_path / "store") as run:
        executor = run.executor()
        if streamed:
            executor.feed(SUM + NESTED)
            outcome = executor.finish()
        else:
            outcome = executor.run_code(SUM + NESTED)
        assert outcome.error is None
        assert outcome.output == "900\n" + "[" * 199 + "]" * 199 + "\n"
